"""docs/observability.md: its tables list every metric as the code does, its snippets import
only names that exist, and its programs run as printed against a real broker."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from sharecon.metrics import (
    ADMIN_METRICS,
    CONSUMER_METRICS,
    PARTITION_METRICS,
    PRODUCER_METRICS,
)

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "observability.md"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)


def test_the_tables_are_the_metric_tables() -> None:
    text = GUIDE.read_text()
    for m in (*CONSUMER_METRICS, *PARTITION_METRICS, *PRODUCER_METRICS, *ADMIN_METRICS):
        row = f"| `{m.name}` / `{m.field}` | {m.unit} | {m.group} | {m.description} |"
        assert row in text, row


def test_snippets_import_only_existing_names() -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 5
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sharecon"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


@pytest.mark.broker
async def test_the_programs_run_as_printed(kafka_bootstrap: str) -> None:
    topic, group = f"obs-{uuid.uuid4().hex[:8]}", f"obs-{uuid.uuid4().hex[:8]}"
    programs = [b for b in _python_blocks() if "anyio.run(main)" in b]
    assert len(programs) == 3
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    outputs = []
    for block in programs:
        program = (
            block.replace('"localhost:9092"', repr(kafka_bootstrap))
            .replace('"invoices"', repr(topic))
            .replace('"billing"', repr(group))
        )
        with anyio.fail_after(120):
            done = await anyio.run_process([sys.executable, "-c", program], env=env, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        outputs.append(done.stdout.decode())
    metrics_out, otel_out, prom_out = outputs
    # What the guide says the first program prints.
    assert metrics_out.startswith("sent: 20.0\nconsumed: 20.0 acknowledged: 20.0\n"), metrics_out
    assert re.search(r"^records-consumed-total\s+20\.000$", metrics_out, flags=re.M)
    # Each process span's parent is a send span.
    spans = re.findall(r"^(\S+) \S+\s+(\w+)\s+span (\w+) parent (\w+)$", otel_out, flags=re.M)
    sends = {span for name, _kind, span, _ in spans if name == "send"}
    processes = [parent for name, _kind, _span, parent in spans if name == "process"]
    assert len(sends) == 2 and len(processes) == 2 and set(processes) == sends, otel_out
    assert any(name == "settle" for name, *_ in spans), otel_out
    # The scrape shows the consumer's labels and the exported names.
    assert re.search(
        rf'^sharecon_consumer_records_consumed_total\{{client_id="billing-1",group="{group}",'
        r'member_id="[^"]+"\} [1-9]',
        prom_out,
        flags=re.M,
    ), prom_out
    assert "sharecon_consumer_fetch_latency_avg_seconds{" in prom_out
