"""scripts/release's plan, without building anything: the README's install commands are the
ones its smoke runs execute, every artifact gets a run, and each run expects the right build.

The builds and the smoke runs themselves are CI's release leg (``scripts/release`` in
``.ci/run``): they take minutes, so they are not repeated here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "tools"))


release = _load("release")


def _artifacts(tmp_path: Path) -> Any:
    art = release.Artifacts(
        tmp_path / "sharecon-1.0.tar.gz", tmp_path / "sharecon-1.0-py3-none-any.whl"
    )
    for v in release.PYTHONS:
        t = "cp" + v.replace(".", "")
        name = f"sharecon-1.0-{t}-{t}-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
        art.compiled[v] = tmp_path / name
    return art


def test_the_readme_install_commands_are_the_smoke_runs_commands() -> None:
    readme = release.readme_install_commands()
    assert sorted(readme) == sorted(release.INSTALL.values())


def test_every_artifact_and_install_command_gets_a_smoke_run(tmp_path: Path) -> None:
    runs = release.smoke_runs(_artifacts(tmp_path))
    assert {r.install for r in runs} == set(release.INSTALL)
    picked = {r.python: r for r in runs if r.install == "pick"}
    assert sorted(picked) == sorted(release.PYTHONS)
    for v, r in picked.items():
        t = "cp" + v.replace(".", "")
        assert r.expect_compiled and r.expect_tag == f"{t}-{t}-manylinux2014_x86_64"
    by_install = {r.install: r for r in runs}
    for pure in ("pure", "wheel", "checkout"):
        assert not by_install[pure].expect_compiled
        assert by_install[pure].expect_tag == "py3-none-any"
    assert by_install["source"].expect_compiled
    assert len({r.name for r in runs}) == len(runs)


def test_a_missing_python_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SHARECON_PYTHON_3_99", raising=False)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(release.ReleaseError, match="SHARECON_PYTHON_3_99"):
        release.find_python("3.99")
    monkeypatch.setenv("SHARECON_PYTHON_3_99", "/opt/py/bin/python3.99")
    assert str(release.find_python("3.99")) == "/opt/py/bin/python3.99"


def test_the_fingerprint_follows_the_package_sources() -> None:
    first = release.fingerprint()
    assert first == release.fingerprint()
    assert len(first) == 16


def test_the_version_is_read_from_its_one_source() -> None:
    import sharecon

    assert release.version() == sharecon.__version__
