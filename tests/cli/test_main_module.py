"""``python -m sharecon`` runs the CLI (no broker needed)."""

from __future__ import annotations

import subprocess
import sys

from sharecon import __version__


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharecon", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_m_sharecon_help_lists_the_commands() -> None:
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: sharecon")
    for command in ("consume", "produce", "groups", "topics", "dlq", "worker"):
        assert command in proc.stdout


def test_python_m_sharecon_version() -> None:
    proc = _run("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"sharecon {__version__}"


def test_python_m_sharecon_usage_error_exits_2() -> None:
    proc = _run("nonsense")
    assert proc.returncode == 2
    assert "nonsense" in proc.stderr
