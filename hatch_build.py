"""The optional compiled build: the per-record modules compiled with mypyc.

``pip install .`` gives the pure-Python sharecon and needs no compiler. With
``SHARECON_COMPILE=1`` in the environment, building the wheel also compiles the modules
named in ``sharecon/_build.py`` with mypyc (a C compiler and Python's headers needed), builds the
C module ``sharecon._speedups`` (``sharecon/_speedups.c``), and puts the
extension modules beside their ``.py`` files: Python imports an extension module before
a source file of the same name, so the two builds share every other file.

``python hatch_build.py --inplace`` compiles the same modules into the checkout itself,
which is how ``scripts/test-compiled`` runs the suite against the compiled build.
``python hatch_build.py --clean`` removes them again.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


def _modules() -> tuple[str, ...]:
    # sharecon/_build.py names them; read without importing sharecon (its dependencies
    # need not be installed where the wheel is built).
    namespace: dict[str, Any] = {}
    exec(compile((ROOT / "sharecon/_build.py").read_text(), "_build.py", "exec"), namespace)
    modules: tuple[str, ...] = namespace["MODULES"]
    return modules


#: What a compiled build needs besides sharecon's own dependencies: mypy (mypyc),
#: setuptools (to drive the C compiler), and the optional packages sharecon imports where
#: they are installed (sharecon/_net/clock.py asks sniffio and trio for the running loop),
#: which mypy follows like any other import.
COMPILE_TOOLS = ("mypy>=1.11", "setuptools>=70", "sniffio>=1.3", "trio>=0.25")

#: The C extension module of the compiled build (sharecon/_speedups.c).
SPEEDUPS = "sharecon._speedups"

# The extension modules a build leaves in the tree: one per compiled module plus the
# shared library mypyc puts the code of them all in.
_GROUP = "sharecon"


def compile_modules(out_dir: Path) -> list[Path]:
    """Compile the modules into ``out_dir`` (laid out as the package); return the files."""
    # Imported here so that a pure build never needs mypy or setuptools.
    from mypyc.build import mypycify
    from setuptools import Distribution, Extension  # type: ignore[import-untyped,unused-ignore]

    work = Path(tempfile.mkdtemp(prefix="sharecon-mypyc-"))
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        extensions = mypycify(
            [
                "--config-file",
                str(ROOT / "pyproject.toml"),
                *(name.replace(".", "/") + ".py" for name in _modules()),
            ],
            opt_level="3",
            target_dir=str(work / "c"),
            group_name=_GROUP,
        )
        # The compiled build's own C (sharecon/_speedups.c): the record maker and the
        # async for stepper, which mypyc cannot express (a type with a vectorcall and an
        # am_send slot). Built with the same compiler and flags as the mypyc modules.
        extensions.append(Extension(SPEEDUPS, [SPEEDUPS.replace(".", "/") + ".c"]))
        dist = Distribution({"name": "sharecon", "ext_modules": extensions})
        build_ext = dist.get_command_obj("build_ext")
        build_ext.build_lib = str(out_dir)
        build_ext.build_temp = str(work / "o")
        dist.run_command("build_ext")
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    return sorted(p for p in out_dir.rglob("*") if p.suffix in {".so", ".pyd"})


def built_files(tree: Path) -> list[Path]:
    """The compiled extension modules currently in ``tree``."""
    found = [p for p in (tree / "sharecon").rglob("*") if p.suffix in {".so", ".pyd"}]
    found += [p for p in tree.glob(f"{_GROUP}__mypyc*") if p.suffix in {".so", ".pyd"}]
    return sorted(found)


def _inplace() -> None:
    _clean()
    out = Path(tempfile.mkdtemp(prefix="sharecon-build-"))
    try:
        for built in compile_modules(out):
            dest = ROOT / built.relative_to(out)
            shutil.copy2(built, dest)
            print(f"compiled {dest.relative_to(ROOT)}")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _clean() -> None:
    for path in built_files(ROOT):
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")


def _wanted() -> bool:
    return os.environ.get("SHARECON_COMPILE", "").lower() in {"1", "true", "yes"}


try:
    from hatchling.builders.hooks.plugin.interface import (  # type: ignore[import-not-found,unused-ignore]
        BuildHookInterface,
    )
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object


class CompiledBuildHook(BuildHookInterface):  # type: ignore[misc,unused-ignore]
    """Adds the mypyc-compiled modules to the wheel when ``SHARECON_COMPILE=1``."""

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        # Only a compiled build needs mypy (mypyc) and setuptools (to drive the compiler).
        # mypyc type-checks the modules first, following their imports into anyio,
        # typing_extensions and the rest: pip's isolated build environment has none of
        # them, so a compiled build asks for sharecon's own dependencies too (pip installs
        # them there from its cache, a --find-links directory or the index, as it would
        # install them for sharecon itself).
        if not _wanted():
            return []
        return [*COMPILE_TOOLS, *self.metadata.core.dependencies]

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if not _wanted():
            return
        out = Path(self.directory) / "mypyc-build"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for built in compile_modules(out):
            build_data["force_include"][str(built)] = str(built.relative_to(out))
        # A platform wheel (cp311-...-linux_x86_64), not py3-none-any.
        build_data["pure_python"] = False
        build_data["infer_tag"] = True


if __name__ == "__main__":
    if sys.argv[1:] == ["--inplace"]:
        _inplace()
    elif sys.argv[1:] == ["--clean"]:
        _clean()
    else:
        sys.exit("usage: python hatch_build.py --inplace | --clean")
