"""docs/faststream.md: its complete programs run as printed (the quick start against the
real broker, with this test's own topic and group names; the AsyncAPI and TestShareClient
programs need no broker), and print what the page says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.docs.blocks import markdown_blocks

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ShareGroupFactory

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "faststream.md"
RUNS = [b for b in markdown_blocks(PAGE) if b.lang == "python" and b.kind == "run"]


def _block(marker: str) -> str:
    (code,) = [b.code for b in RUNS if marker in b.code]
    return code


def _run(code: str, tmp_path: Path) -> str:
    script = tmp_path / "program.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_the_page_has_three_programs() -> None:
    assert len(RUNS) == 3


@pytest.mark.broker
def test_quick_start_runs(
    kafka_bootstrap: str, share_group_factory: ShareGroupFactory, tmp_path: Path
) -> None:
    code = RUNS[0].code
    assert "localhost:9092" in code and '"billing"' in code
    suffix = share_group_factory()  # unique names on the shared session broker
    for old, new in (
        ("localhost:9092", kafka_bootstrap),
        ('"orders"', f'"orders-{suffix}"'),
        ('"invoices"', f'"invoices-{suffix}"'),
        ('"billing"', f'"billing-{suffix}"'),
    ):
        code = code.replace(old, new)
    out = _run(code, tmp_path)
    lines = sorted(ln for ln in out.splitlines() if ln.startswith("order "))
    assert lines == [f"order {i}: {9.5 * i} (delivery 1)" for i in range(3)]


def test_asyncapi_program_prints_the_group_binding(tmp_path: Path) -> None:
    out = _run(_block("AsyncAPI(broker"), tmp_path)
    binding = json.loads(out.strip().splitlines()[-1])
    assert binding["kafka"]["groupId"] == {"type": "string", "enum": ["billing"]}


def test_test_client_program_runs_without_a_broker(tmp_path: Path) -> None:
    out = _run(_block("TestShareClient(broker)"), tmp_path)
    assert not re.search(r"error|exception", out, re.IGNORECASE), out
