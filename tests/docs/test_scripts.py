"""``scripts/_env.sh`` is safe to source from a user's shell, and the scripts still stop
on the first failure.

The environment script runs in a copy of the scripts folder beside a stand-in ``.venv``
(an executable ``.venv/bin/python`` and an install stamp newer than ``pyproject.toml``),
so nothing is created or installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash")


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    for name in ("_env.sh", "test", "demo"):
        shutil.copy2(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    # scripts/test runs scripts/kerberos-kit first when root (as CI is): a stand-in that
    # installs nothing, so these tests look at scripts/test's own steps.
    kit = tmp_path / "scripts" / "kerberos-kit"
    kit.write_text("#!/bin/sh\nexit 0\n")
    kit.chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    stamp = tmp_path / ".venv" / ".sharecon-installed"
    stamp.write_text("")
    os.utime(tmp_path / "pyproject.toml", (1_000_000, 1_000_000))
    return tmp_path


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert BASH is not None
    return subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sourcing_leaves_the_shell_options_and_directory_alone(fake_root: Path) -> None:
    """A user's `source scripts/_env.sh` must not leave `set -euo pipefail` behind (an
    interactive shell would then exit on the first failing command)."""
    elsewhere = fake_root / "elsewhere"
    elsewhere.mkdir()
    done = _bash(
        f'set +euo pipefail; before="$-:$(set -o | grep pipefail)"; '
        f"source {fake_root}/scripts/_env.sh; "
        f'after="$-:$(set -o | grep pipefail)"; '
        f'false; echo "still here $?"; '
        f'[ "$before" = "$after" ] && echo same-options; pwd; echo "$PATH"',
        cwd=elsewhere,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "still here 1" in lines
    assert "same-options" in lines
    assert lines[-2] == str(elsewhere)
    assert lines[-1].split(":")[0] == str(fake_root / ".venv" / "bin")


def test_the_scripts_stop_on_the_first_failure(fake_root: Path) -> None:
    """scripts/test sets -e itself: the stand-in ruff fails, so nothing after it runs."""
    bin_dir = fake_root / ".venv" / "bin"
    ruff = bin_dir / "ruff"
    ruff.write_text("#!/bin/sh\necho ruff-ran\nexit 3\n")
    ruff.chmod(0o755)
    mypy = bin_dir / "mypy"
    mypy.write_text("#!/bin/sh\necho mypy-ran\n")
    mypy.chmod(0o755)
    (fake_root / "sharecon").mkdir()
    done = _bash(f"{fake_root}/scripts/test", cwd=fake_root)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "ruff-ran" in done.stdout
    assert "mypy-ran" not in done.stdout


def test_a_failed_setup_is_reported_to_a_sourcing_shell(fake_root: Path) -> None:
    """When .venv cannot be made, `source` returns non-zero and the shell lives on."""
    shutil.rmtree(fake_root / ".venv")
    done = _bash(
        f'PYTHON=/nonexistent/python3 source {fake_root}/scripts/_env.sh; echo "returned $?"',
        cwd=fake_root,
    )
    assert "returned 1" in done.stdout, done.stdout + done.stderr
