"""benchmarks/tables.py: the docs' benchmark tables are rendered from one run, never by hand."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_tables() -> Any:
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "benchmarks" / "tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tables"] = module
    spec.loader.exec_module(module)
    return module


tables = _load_tables()


def _consume(rate: float, steady: float, cpu_s: float, records: int = 1000) -> dict[str, Any]:
    return {
        "records": records,
        "records_per_s": rate,
        "steady_records_per_s": steady,
        "first_record": 0.12,
        "cpu_s": cpu_s,
    }


FIXTURE: dict[str, Any] = {
    "schema": 1,
    "machine": {
        "cores": 2,
        "load_before": [1.5, 1.0, 1.0],
        "load_after": [2.5, 1.0, 1.0],
        "git_commit": "0123456789abcdef",
        "git_dirty": False,
        "started": "2026-12-04 14:00 UTC",
        "seconds": 540.0,
        "python": "3.11.7",
        "kafka_version": "4.4.0",
        "packages": {"sharecon": "0.1", "confluent-kafka": "2.16.1", "aiokafka": None},
    },
    "steps": {
        "consume/defaults": {
            "result": {
                "results": {
                    "100B": {
                        "sharecon-compiled": _consume(400_000, 500_000, 0.002),
                        "sharecon": _consume(250_000, 300_000, 0.003),
                        "confluent-kafka": _consume(200_000, 400_000, 0.001),
                    }
                }
            }
        },
        "consume/tuned": {"error": "exit 1: boom"},
        "produce/defaults": {
            "result": {
                "results": {
                    "100B": {
                        "sharecon-send-loop": {
                            "records": 1000,
                            "records_per_s": 150_000,
                            "cpu": 0.004,
                        },
                        "confluent-kafka": {
                            "records": 1000,
                            "records_per_s": 300_000,
                            "cpu": 0.002,
                        },
                        "java": {"records": 1000, "records_per_s": 250_000},
                    }
                }
            }
        },
        "decode/script": {
            "result": {
                "cases": [
                    {
                        "value_size": "100B",
                        "codec": "none",
                        "decoders": {
                            "sharecon": {"records_per_s": 800_000},
                            "sharecon-compiled": {"records_per_s": 2_400_000},
                            "aiokafka": {"records_per_s": 4_000_000},
                        },
                    },
                    {
                        "value_size": "1KiB",
                        "codec": "zstd",
                        # timed in alternation in the compiled build's process: this
                        # ratio wins over the one the rates above would give (0.90x)
                        "compiled_vs_aiokafka": 0.95,
                        "decoders": {
                            "sharecon": {"records_per_s": 300_000},
                            "sharecon-compiled": {"records_per_s": 450_000},
                            "aiokafka": {"records_per_s": 500_000},
                        },
                    },
                ]
            }
        },
        "roundtrip/pure": {
            "result": {
                "sharecon_asyncio": {
                    "Metadata": {
                        "version": 13,
                        "response_bytes": 184,
                        "requests_per_s": 6000,
                        "cpu_us_per_request": 150.0,
                    }
                },
                "aiokafka": {
                    "Metadata": {"version": 5, "requests_per_s": 12000, "cpu_us_per_request": 75.0}
                },
            }
        },
    },
}


def test_consume_table_gives_rates_cpu_per_record_and_ratios_to_librdkafka() -> None:
    text = tables.render(FIXTURE)["consume"]
    lines = text.splitlines()
    assert lines[0].startswith("| settings | records | client | overall rec/s |")
    assert (
        "| every client at its defaults | 1,000 × 100 B | **sharecon** `batches()`, compiled | 400k | 500k"
        " | 0.12 s | 2.0 | 2.00x | 1.25x | 2.00x |"
    ) in lines
    # The repeated settings and size cells are blank on the following rows.
    assert (
        "|  |  | **sharecon** `batches()`, pure Python | 250k | 300k | 0.12 s | 3.0 | 1.25x | 0.75x | 3.00x |"
        in lines
    )
    assert (
        "|  |  | librdkafka (confluent-kafka) `poll()` loop | 200k | 400k | 0.12 s | 1.0 |  |  |  |"
        in lines
    )
    # A failed mode is shown as failed, not left out silently.
    assert any(line.startswith("| same tuning for all | failed |") for line in lines)


def test_produce_decode_and_roundtrip_tables() -> None:
    blocks = tables.render(FIXTURE)
    assert (
        "| every client at its defaults | 1,000 × 100 B | **sharecon** `await send()` loop,"
        " pure Python | 150k | 4.0 | 0.50x | 2.00x |"
    ) in blocks["produce"].splitlines()
    assert "| Java `kafka-producer-perf-test` | 250k | – | 0.83x | – |" in blocks["produce"]
    assert "| 100 B | none | 2.40 M | 800k | 4.00 M | 0.60x | 3.00x |" in blocks["decode"]
    assert "zstd" not in blocks["decode"]
    assert "| 1 KiB | zstd | 450k | 300k | 500k | 0.95x | 1.50x |" in blocks["decode-codecs"]
    assert (
        "| Metadata | **sharecon**, pure Python, asyncio | v13 | 184 | 6.0k | 150.0 | 0.50x | 2.00x |"
        in blocks["roundtrip"]
    )
    assert blocks["decode-speedup"] == "3.00x"
    assert blocks["consume-cpu"] == "2.0 µs instead of 3.0"
    machine = blocks["machine"]
    assert "commit `0123456789`" in machine and "9 minutes" in machine
    assert "load average 1.5 before and 2.5 after" in machine


def test_a_part_left_out_of_the_run_says_so() -> None:
    data = {**FIXTURE, "steps": {}}
    assert "Not measured in this run" in tables.render(data)["produce"]


def test_rewrite_replaces_blocks_and_inline_figures_and_rejects_unknown_markers() -> None:
    text = (
        "Intro <!-- bench:decode-speedup -->old<!-- /bench:decode-speedup --> end.\n\n"
        "<!-- bench:decode -->\n| stale |\n<!-- /bench:decode -->\ntail\n"
    )
    blocks = tables.render(FIXTURE)
    new = tables.rewrite(text, blocks)
    assert "Intro <!-- bench:decode-speedup -->3.00x<!-- /bench:decode-speedup --> end." in new
    assert f"<!-- bench:decode -->\n\n{blocks['decode']}\n\n<!-- /bench:decode -->\ntail" in new
    assert "stale" not in new
    assert tables.rewrite(new, blocks) == new
    with pytest.raises(KeyError):
        tables.rewrite("<!-- bench:nope -->x<!-- /bench:nope -->", blocks)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            "README.md",
            [
                "decode-speedup",
                "consume-cpu",
                "machine",
                "consume",
                "produce",
                "decode",
                "roundtrip",
            ],
        ),
        (
            "docs/performance.md",
            [
                "decode-speedup",
                "consume-cpu",
                "machine",
                "consume",
                "produce",
                "decode-codecs",
                "roundtrip",
            ],
        ),
    ],
)
def test_the_docs_hold_the_generated_blocks(doc: str, expected: list[str]) -> None:
    assert tables.markers((ROOT / doc).read_text()) == expected


def test_the_docs_tables_are_what_the_committed_run_renders() -> None:
    """README.md and docs/performance.md equal what benchmarks/results/all.json renders:
    after a new run, `python benchmarks/tables.py` rewrites them."""
    blocks = tables.render(json.loads(tables.RESULTS.read_text()))
    for doc in tables.DOCS:
        text = doc.read_text()
        assert tables.rewrite(text, blocks) == text, f"{doc.name}: run python benchmarks/tables.py"


def test_hotspots_prints_the_top_entries_by_own_time(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/hotspots.py's table: by own time, busiest first, the event loop's wait left out."""
    import types

    spec = importlib.util.spec_from_file_location(
        "bench_hotspots", ROOT / "benchmarks" / "hotspots.py"
    )
    assert spec is not None and spec.loader is not None
    hotspots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hotspots)
    # pstats' shape: (file, line, function) -> (primitive calls, calls, own, cumulative, callers)
    stats = types.SimpleNamespace(
        stats={
            ("/x/sharecon/protocol/records.py", 815, "_decode_run"): (56, 56, 3.0, 3.5, {}),
            ("~", 0, "<method 'poll' of 'select.epoll' objects>"): (9, 9, 50.0, 50.0, {}),
            ("/x/sharecon/record.py", 135, "__init__"): (1000, 1000, 1.0, 1.0, {}),
            ("~", 0, "<built-in method builtins.len>"): (10, 10, 0.5, 0.5, {}),
            ("/usr/lib/python3.11/asyncio/base_events.py", 1845, "_run_once"): (5, 5, 0.4, 6, {}),
        }
    )
    hotspots.print_top(stats, 3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "4.90 s of own time profiled; 50.00 s waiting in epoll left out"
    table = [line for line in lines if line.startswith("|")]
    assert table == [
        "| own s | own % | cumulative s | calls | function |",
        "|---|---|---|---|---|",
        "| 3.000 | 61.2 | 3.500 | 56 | `sharecon/protocol/records.py:815` _decode_run |",
        "| 1.000 | 20.4 | 1.000 | 1,000 | `sharecon/record.py:135` __init__ |",
        "| 0.500 | 10.2 | 0.500 | 10 | <built-in method builtins.len> |",
    ]
