"""The committed sharecon/protocol/messages/*.py are exactly what tools/gen_messages.py makes.

The generator reads only tools/spec/, which is in the repository, so this runs in a fresh
clone too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "sharecon" / "protocol" / "messages"
RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed next to the interpreter")
def test_generated_messages_are_fresh(tmp_path: Path) -> None:
    """Regenerating from tools/spec reproduces every committed module byte for byte."""
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_messages.py"),
         "--out", str(tmp_path), "--ruff", str(RUFF)],
        check=True,
        cwd=ROOT,
    )  # fmt: skip
    generated = {p.name: p.read_text() for p in tmp_path.glob("*.py")}
    committed = {p.name: p.read_text() for p in MESSAGES.glob("*.py") if p.name != "_base.py"}
    assert sorted(generated) == sorted(committed)
    stale = [name for name in generated if generated[name] != committed[name]]
    assert not stale, f"regenerate with tools/gen_messages.py: {stale}"
