"""The two builds: pure Python, and the per-record modules compiled with mypyc.

``scripts/test-compiled`` runs the suite against the compiled build with
``SHARECON_EXPECT_COMPILED=1``; the other legs set nothing and must run pure Python.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import sharecon
from sharecon._build import MODULES, compiled_modules

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_build_is_the_one_this_leg_expects() -> None:
    expected = os.environ.get("SHARECON_EXPECT_COMPILED", "0") == "1"
    assert sharecon.COMPILED is expected, (
        f"sharecon.COMPILED is {sharecon.COMPILED}, SHARECON_EXPECT_COMPILED says {expected}"
        f" (compiled: {compiled_modules()})"
    )


def test_the_modules_are_compiled_all_or_none() -> None:
    # A half-compiled tree (a module added to MODULES but not rebuilt, a stale extension
    # left beside its source) runs code nobody tested as a whole.
    assert compiled_modules() in ([], list(MODULES))


def test_every_compiled_module_exists_as_source() -> None:
    for name in MODULES:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


def test_the_default_wheel_is_pure_python(tmp_path: Path) -> None:
    # Also in the compiled leg, whose checkout holds extension modules built in place:
    # they are not part of the default wheel.
    env = {k: v for k, v in os.environ.items() if k != "SHARECON_COMPILE"}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        env=env,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("sharecon-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))]
    for name in MODULES:
        assert name.replace(".", "/") + ".py" in names


def test_only_a_compiled_build_asks_for_mypy(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/performance.md: without SHARECON_COMPILE, building needs no mypy at all.
    spec = importlib.util.spec_from_file_location("hatch_build", ROOT / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    runtime = ["anyio>=4.4", "tomli>=2.0; python_version < '3.11'"]
    builder = SimpleNamespace(metadata=SimpleNamespace(core=SimpleNamespace(dependencies=runtime)))
    monkeypatch.delenv("SHARECON_COMPILE", raising=False)
    assert hook.CompiledBuildHook.dependencies(builder) == []
    monkeypatch.setenv("SHARECON_COMPILE", "1")
    wanted = hook.CompiledBuildHook.dependencies(builder)
    assert any(d.startswith("mypy") for d in wanted)
    # mypyc type-checks against sharecon's dependencies: pip's isolated build environment
    # has them only because the hook asks for them (scripts/release builds every compiled
    # wheel in a fresh venv that way, and runs `SHARECON_COMPILE=1 pip install .` there).
    assert set(runtime) <= set(wanted)
