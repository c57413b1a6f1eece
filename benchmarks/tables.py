"""The docs' benchmark tables, rendered from one run of ``benchmarks/all.py``.

README.md and docs/performance.md hold generated blocks between markers::

    <!-- bench:consume -->
    ...generated, never edited by hand...
    <!-- /bench:consume -->

and inline figures (``<!-- bench:decode-speedup -->3.1x<!-- /bench:decode-speedup -->``).
This script renders every block from ``benchmarks/results/all.json`` and rewrites them::

    python benchmarks/tables.py            # rewrite the blocks in README.md and docs/performance.md
    python benchmarks/tables.py --check    # exit 1 if they differ from what all.json renders
    python benchmarks/tables.py --print    # print the blocks

Ratios are sharecon's over the other client's, measured in the same run: for rates, above
1.00x is faster; for CPU per record, above 1.00x is more CPU. CPU is the client process's
own (user + system, every thread), per record.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "all.json"
DOCS = (ROOT / "README.md", ROOT / "docs" / "performance.md")

MARKER = re.compile(r"<!-- bench:([a-z0-9-]+) -->(.*?)<!-- /bench:\1 -->", re.DOTALL)

MODES = {
    "defaults": "every client at its defaults",
    "tuned": "same tuning for all",
    "script": "as the script ships",
}
CONSUME_CLIENTS = {
    "sharecon-compiled:records": "**sharecon** `async for record`, compiled",
    "sharecon-compiled:poll": "**sharecon** `poll()` loop, compiled",
    "sharecon-compiled": "**sharecon** `batches()`, compiled",
    "sharecon:records": "**sharecon** `async for record`, pure Python",
    "sharecon:poll": "**sharecon** `poll()` loop, pure Python",
    "sharecon": "**sharecon** `batches()`, pure Python",
    "confluent-kafka": "librdkafka (confluent-kafka) `poll()` loop",
    "franz-go": "franz-go `PollFetches` loop",
    "java": "Java `kafka-share-consumer-perf-test`",
}
PRODUCE_CLIENTS = {
    "sharecon-send-loop-compiled": "**sharecon** `await send()` loop, compiled",
    "sharecon-send-loop": "**sharecon** `await send()` loop, pure Python",
    "sharecon-compiled": "**sharecon** `send_batch`, compiled",
    "sharecon": "**sharecon** `send_batch`, pure Python",
    "sharecon-send-nowait-compiled": "**sharecon** `send_nowait()` loop, compiled",
    "sharecon-send-nowait": "**sharecon** `send_nowait()` loop, pure Python",
    "confluent-kafka": "librdkafka (confluent-kafka)",
    "java": "Java `kafka-producer-perf-test`",
}
DECODERS = {
    "sharecon-compiled": "sharecon compiled",
    "sharecon": "sharecon pure",
    "aiokafka": "aiokafka (C)",
    "aiokafka-py": "aiokafka (Python)",
    "kafka-python": "kafka-python",
}
PARTS = ("consume", "produce", "decode", "roundtrip")
SIZES = {"100B": "100 B", "1024B": "1 KiB", "1KiB": "1 KiB"}


# -- formatting ---------------------------------------------------------------------------


def rate(value: float | None) -> str:
    """Records per second, short: ``384k``, ``6.2k``, ``2.48 M``."""
    if value is None or value <= 0:
        return "–"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    """``ours / theirs`` as ``1.23x``, or a dash when either is missing."""
    if not ours or not theirs:
        return "–"
    return f"{ours / theirs:.2f}x"


def us(value: float | None) -> str:
    """Microseconds with one decimal, or a dash."""
    return "–" if value is None else f"{value:.1f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ordered(per: dict[str, Any], names: dict[str, str]) -> list[str]:
    return [n for n in names if n in per] + sorted(n for n in per if n not in names)


def _steps(data: dict[str, Any], part: str) -> list[tuple[str, dict[str, Any]]]:
    """(mode, step) for ``part``, in the order defaults, tuned, script."""
    found = {k.split("/", 1)[1]: v for k, v in data["steps"].items() if k.split("/")[0] == part}
    order = (*MODES, "pure", "compiled")
    return [(m, found[m]) for m in (*order, *sorted(set(found) - set(order))) if m in found]


def _grouped(rows: list[list[str]], columns: int) -> list[list[str]]:
    """Rows with their first ``columns`` cells left blank where they repeat the row above."""
    out, last = [], None
    for row in rows:
        key = row[:columns]
        out.append(([""] * columns if key == last else key) + row[columns:])
        last = key
    return out


def _missing(part: str, data: dict[str, Any]) -> str | None:
    steps = _steps(data, part)
    if not steps:
        return f"*Not measured in this run: `benchmarks/all.py --parts {part}`.*"
    if all("error" in s for _, s in steps):
        return f"*{part} failed in this run; see `benchmarks/results/all-logs/`.*"
    return None


def _cpu_us(r: dict[str, Any]) -> float | None:
    cpu = r.get("cpu_s", r.get("cpu"))
    return cpu / r["records"] * 1e6 if cpu is not None and r.get("records") else None


# -- the blocks ---------------------------------------------------------------------------


def render_machine(data: dict[str, Any]) -> str:
    """One paragraph: where, when and under what load the run was made."""
    m = data["machine"]
    pkgs = m.get("packages", {})
    others = ", ".join(f"{k} {v}" for k, v in sorted(pkgs.items()) if v and k != "sharecon")
    commit = (m.get("git_commit") or "unknown")[:10] + (
        " (with local changes)" if m.get("git_dirty") else ""
    )
    quick = " A `--quick` run: small sizes, not figures to quote." if m.get("quick") else ""
    parts = "; ".join(
        f"{part}/{mode} {s['load_before'][0]:.1f} → {s['load_after'][0]:.1f} ({s['seconds']:.0f} s)"
        for part in PARTS
        for mode, s in _steps(data, part)
        if "load_before" in s and "load_after" in s
    )
    if parts:
        quick += f" Load average (1 min) and time per part: {parts}."
    return (
        f"Generated by `python benchmarks/all.py` ({m.get('seconds', 0) / 60:.0f} minutes) on "
        f"{m.get('started', '?')} at commit `{commit}`: {m.get('cores')} cores shared with "
        f"the broker (Kafka {m.get('kafka_version')}, one for the whole run), load average "
        f"{m['load_before'][0]:.1f} before and {m.get('load_after', [0.0])[0]:.1f} after, "
        f"Python {m.get('python')}, {others}.{quick}"
    )


def render_consume(data: dict[str, Any]) -> str:
    """Consume + accept: rates, CPU per record and ratios to librdkafka, per mode and size."""
    if note := _missing("consume", data):
        return note
    rows: list[list[str]] = []
    for mode, step in _steps(data, "consume"):
        if "error" in step:
            rows.append([MODES.get(mode, mode), "failed", "", "", "", "", "", "", ""])
            continue
        for size, per in step["result"]["results"].items():
            base = per.get("confluent-kafka", {})
            base_cpu = _cpu_us(base) if base else None
            for name in _ordered(per, CONSUME_CLIENTS):
                r = per[name]
                java = name == "java"
                cpu = _cpu_us(r)
                rows.append(
                    [
                        MODES.get(mode, mode),
                        f"{r['records']:,} × {SIZES.get(size, size)}",
                        CONSUME_CLIENTS.get(name, name),
                        rate(r.get("records_per_s")),
                        rate(r.get("steady_records_per_s")),
                        f"{r['first_record']:.2f} s" if "first_record" in r else "–",
                        us(cpu) + (" (JVM start included)" if java and cpu else ""),
                        ""
                        if name == "confluent-kafka"
                        else ratio(r.get("records_per_s"), base.get("records_per_s")),
                        ""
                        if name == "confluent-kafka"
                        else ratio(r.get("steady_records_per_s"), base.get("steady_records_per_s")),
                        "" if name == "confluent-kafka" or java else ratio(cpu, base_cpu),
                    ]
                )
    return table(
        [
            "settings",
            "records",
            "client",
            "overall rec/s",
            "from first record",
            "first record",
            "CPU µs/record",
            "overall ÷ librdkafka",
            "from first ÷ librdkafka",
            "CPU ÷ librdkafka",
        ],
        _grouped(rows, 2),
    )


def render_produce(data: dict[str, Any]) -> str:
    """Produce: rates, CPU per record and ratios to librdkafka, per mode and size."""
    if note := _missing("produce", data):
        return note
    rows: list[list[str]] = []
    for mode, step in _steps(data, "produce"):
        if "error" in step:
            rows.append([MODES.get(mode, mode), "failed", "", "", "", "", ""])
            continue
        for size, per in step["result"]["results"].items():
            base = per.get("confluent-kafka", {})
            base_cpu = _cpu_us(base) if base else None
            for name in _ordered(per, PRODUCE_CLIENTS):
                r = per[name]
                cpu = _cpu_us(r)
                own = name == "confluent-kafka"
                rows.append(
                    [
                        MODES.get(mode, mode),
                        f"{r['records']:,} × {SIZES.get(size, size)}",
                        PRODUCE_CLIENTS.get(name, name),
                        rate(r.get("records_per_s")),
                        us(cpu),
                        "" if own else ratio(r.get("records_per_s"), base.get("records_per_s")),
                        "" if own else ratio(cpu, base_cpu),
                    ]
                )
    return table(
        [
            "settings",
            "records",
            "client",
            "rec/s",
            "CPU µs/record",
            "rec/s ÷ librdkafka",
            "CPU ÷ librdkafka",
        ],
        _grouped(rows, 2),
    )


def _decode_cases(data: dict[str, Any]) -> list[dict[str, Any]]:
    steps = [s for _, s in _steps(data, "decode") if "result" in s]
    return steps[0]["result"]["cases"] if steps else []


def render_decode(data: dict[str, Any], *, codecs: bool) -> str:
    """Decoding: records/s per decoder; every codec when ``codecs``, else uncompressed."""
    if note := _missing("decode", data):
        return note
    cases = [c for c in _decode_cases(data) if codecs or c["codec"] == "none"]
    names = _ordered(cases[0]["decoders"], DECODERS) if cases else []
    rows = []
    for case in cases:
        d = case["decoders"]
        rows.append(
            [
                SIZES.get(case["value_size"], case["value_size"]),
                case["codec"],
                *(rate(d[n]["records_per_s"]) if n in d else "–" for n in names),
                # decode.py times aiokafka beside the compiled build in that build's own
                # process, in alternation: that ratio, where present, is the fair one.
                f"{case['compiled_vs_aiokafka']:.2f}x"
                if "compiled_vs_aiokafka" in case
                else ratio(
                    d.get("sharecon-compiled", {}).get("records_per_s"),
                    d.get("aiokafka", {}).get("records_per_s"),
                ),
                ratio(
                    d.get("sharecon-compiled", {}).get("records_per_s"),
                    d.get("sharecon", {}).get("records_per_s"),
                ),
            ]
        )
    return table(
        [
            "value",
            "codec",
            *(f"{DECODERS.get(n, n)} rec/s" for n in names),
            "compiled ÷ aiokafka (C)",
            "compiled ÷ pure",
        ],
        rows,
    )


def _bytes(result: dict[str, Any]) -> str:
    """The answer's size in bytes, where the run recorded it."""
    size = result.get("response_bytes")
    return f"{size:,}" if isinstance(size, int) else ""


def render_roundtrip(data: dict[str, Any]) -> str:
    """Round trips: requests/s and CPU per request, each build against aiokafka in its run."""
    if note := _missing("roundtrip", data):
        return note
    runs = [(b, s["result"]) for b, s in _steps(data, "roundtrip") if "result" in s]
    rows = []
    calls = list(runs[0][1]["aiokafka"]) if runs else []
    for call in calls:
        for build, res in runs:
            theirs = res["aiokafka"][call]
            for key, loop in (("sharecon_asyncio", "asyncio"), ("sharecon_trio", "trio")):
                if key not in res:
                    continue
                r = res[key][call]
                rows.append(
                    [
                        call,
                        f"**sharecon**, {'pure Python' if build == 'pure' else build}, {loop}",
                        f"v{r['version']}",
                        _bytes(r),
                        rate(r["requests_per_s"]),
                        us(r["cpu_us_per_request"]),
                        ratio(r["requests_per_s"], theirs["requests_per_s"]),
                        ratio(r["cpu_us_per_request"], theirs["cpu_us_per_request"]),
                    ]
                )
            rows.append(
                [
                    call,
                    f"aiokafka (beside the {'pure Python' if build == 'pure' else build} run)",
                    f"v{theirs['version']}",
                    _bytes(theirs),
                    rate(theirs["requests_per_s"]),
                    us(theirs["cpu_us_per_request"]),
                    "",
                    "",
                ]
            )
    return table(
        [
            "request",
            "client",
            "version",
            "answer bytes",
            "requests/s",
            "CPU µs/request",
            "requests/s ÷ aiokafka",
            "CPU ÷ aiokafka",
        ],
        _grouped(rows, 1),
    )


def _consume_100(data: dict[str, Any]) -> dict[str, Any]:
    for _, step in _steps(data, "consume"):
        if "result" in step:
            return dict(step["result"]["results"].get("100B", {}))
    return {}


def render_inline(data: dict[str, Any]) -> dict[str, str]:
    """Figures quoted in the prose, from the same run."""
    out: dict[str, str] = {}
    cases = [c for c in _decode_cases(data) if c["codec"] == "none" and c["value_size"] == "100B"]
    if cases:
        d = cases[0]["decoders"]
        out["decode-speedup"] = ratio(
            d["sharecon-compiled"]["records_per_s"], d["sharecon"]["records_per_s"]
        )
    per = _consume_100(data)
    if "sharecon" in per and "sharecon-compiled" in per:
        pure, compiled = _cpu_us(per["sharecon"]), _cpu_us(per["sharecon-compiled"])
        out["consume-cpu"] = f"{us(compiled)} µs instead of {us(pure)}"
    return out


def render(data: dict[str, Any]) -> dict[str, str]:
    """Every generated block and inline figure, by marker name."""
    return {
        "machine": render_machine(data),
        "consume": render_consume(data),
        "produce": render_produce(data),
        "decode": render_decode(data, codecs=False),
        "decode-codecs": render_decode(data, codecs=True),
        "roundtrip": render_roundtrip(data),
        **render_inline(data),
    }


# -- the docs -----------------------------------------------------------------------------


def rewrite(text: str, blocks: dict[str, str]) -> str:
    """``text`` with every marked block replaced by its rendering.

    A block whose markers sit on one line stays inline; others get the rendering on lines
    of their own, set off by blank lines (so a table is a table in Markdown).

    :raises KeyError: a marker names no block.
    """

    def one(match: re.Match[str]) -> str:
        name, old = match.group(1), match.group(2)
        body = blocks[name]
        inner = body if "\n" not in old else f"\n\n{body}\n\n"
        return f"<!-- bench:{name} -->{inner}<!-- /bench:{name} -->"

    return MARKER.sub(one, text)


def markers(text: str) -> list[str]:
    """The names of the generated blocks in ``text``, in order."""
    return [m.group(1) for m in MARKER.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=RESULTS, help="all.json to render")
    parser.add_argument("--check", action="store_true", help="exit 1 if the docs differ")
    parser.add_argument("--print", action="store_true", help="print the blocks instead")
    args = parser.parse_args(argv)
    blocks = render(json.loads(args.input.read_text()))
    if args.print:
        for name, body in blocks.items():
            print(f"## {name}\n\n{body}\n")
        return 0
    stale = []
    for path in DOCS:
        text = path.read_text()
        new = rewrite(text, blocks)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"out of date with {args.input}: {', '.join(map(str, stale))}", file=sys.stderr)
        print("run: python benchmarks/tables.py", file=sys.stderr)
        return 1
    print(f"rewrote {', '.join(map(str, stale))}" if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
