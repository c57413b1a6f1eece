"""Shared helpers for the benchmark scripts: timing, tables, JSON results.

Benchmarks are measurements, not tests: nothing here asserts a timing.

Timing uses the process's CPU time (``time.process_time``) rather than wall time, and
keeps the best of several runs: other work on a shared machine then inflates a run
only through cache and frequency effects, not through time spent descheduled.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]

#: sharecon's two builds, each measured in its own child process: "pure" is the checkout
#: as installed (pip install -e .), "compiled" the wheel SHARECON_COMPILE=1 builds.
BUILDS = ("pure", "compiled")


def compiled_tree() -> Path:
    """A folder holding the compiled build, to put first on a child's PYTHONPATH.

    Built once per state of the sources (``build/compiled-<hash>/``, about a minute with
    mypyc): ``SHARECON_COMPILE=1 pip wheel .``, installed there with ``--target``.
    """
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(
        [*ROOT.glob("sharecon/**/*.py"), *ROOT.glob("sharecon/**/*.c"), ROOT / "hatch_build.py"]
    ):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    tree = ROOT / "build" / f"compiled-{digest.hexdigest()[:12]}"
    if (tree / ".complete").exists():
        return tree
    print("building the compiled build (SHARECON_COMPILE=1 pip wheel .) ...", flush=True)
    shutil.rmtree(tree, ignore_errors=True)
    with tempfile.TemporaryDirectory() as wheels:
        pip = [sys.executable, "-m", "pip"]
        env = {**os.environ, "SHARECON_COMPILE": "1"}
        subprocess.run(
            [*pip, "wheel", "--no-deps", "-q", "-w", wheels, str(ROOT)], check=True, env=env
        )
        (wheel,) = Path(wheels).glob("sharecon-*.whl")
        subprocess.run(
            [*pip, "install", "--no-deps", "-q", "--target", str(tree), str(wheel)], check=True
        )
    (tree / ".complete").touch()
    return tree


def build_env(build: str) -> dict[str, str]:
    """The environment for a child process that runs sharecon's ``build``."""
    env = {**os.environ, "SHARECON_BENCH_BUILD": build}
    if build == "compiled":
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(compiled_tree()), env.get("PYTHONPATH")])
        )
    return env


def run_child(argv: Sequence[str], build: str, what: str, *, timeout: float = 1800) -> Any:
    """Run ``python argv...`` under sharecon's ``build``; return what it printed after
    ``RESULT `` (JSON), or raise naming ``what`` with the end of its output."""
    proc = subprocess.run(
        [sys.executable, *argv],
        env=build_env(build),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{what} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def check_build() -> str:
    """In a child process: the build it runs, checked against the one it was asked for."""
    import sharecon

    wanted = os.environ.get("SHARECON_BENCH_BUILD", "pure")
    got = "compiled" if sharecon.COMPILED else "pure"
    if got != wanted:
        sys.exit(
            f"asked for sharecon's {wanted} build, but {sharecon.__file__} is the {got} one"
            " (extension modules left in the checkout? python hatch_build.py --clean)"
        )
    return got


def best_time(fn: Callable[[], object], *, repeats: int = 7, min_time: float = 0.2) -> float:
    """Best CPU seconds for one call of ``fn``.

    Each of ``repeats`` runs calls ``fn`` in a loop for at least ``min_time`` CPU
    seconds and averages; the smallest average wins.
    """
    fn()  # warm up: imports, caches, lazily built tables
    best = float("inf")
    for _ in range(repeats):
        calls = 0
        start = time.process_time()
        elapsed = 0.0
        while elapsed < min_time or calls == 0:
            fn()
            calls += 1
            elapsed = time.process_time() - start
        best = min(best, elapsed / calls)
    return best


def fmt_rate(value: float) -> str:
    """A rate with thousands separators and no decimals (``1,234,567``)."""
    return f"{value:,.0f}"


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str = ""
) -> None:
    """Print rows as an aligned plain-text table (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(_looks_numeric(r[i]) for r in cells[1:]) if rows else False for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        )

    if title:
        print(title)
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    print()


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace(".", "").replace("x", "").replace("-", "")
    return stripped.isdigit() or text in ("", "n/a")


def environment(packages: Sequence[str] = ()) -> dict[str, Any]:
    """Python, platform and package versions, for the JSON results."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
        "timer": "time.process_time, best of repeated runs",
    }


def write_json(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``benchmarks/results/<name>.json`` (gitignored); return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


# -- a broker and a group to measure against ---------------------------------------------


@contextmanager
def bootstrap_servers() -> Iterator[str]:
    """``$SHARECON_BOOTSTRAP`` if set, else a local broker started now and stopped after."""
    from sharecon.testing import KafkaBroker

    external = os.environ.get("SHARECON_BOOTSTRAP")
    if external:
        yield external
        return
    broker = KafkaBroker()
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


async def new_topic_and_group(bootstrap: str, prefix: str, partitions: int) -> tuple[str, str]:
    """A new topic of ``partitions`` and a new share group reading it from the earliest
    record, both named ``prefix-<random>``."""
    import uuid

    from sharecon.admin import Admin

    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    group = f"{prefix}-{uuid.uuid4().hex[:6]}"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=partitions)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    return topic, group


async def until(check: Callable[[], bool], timeout: float, *, every: float = 0.01) -> None:
    """Wait until ``check()`` is true, looking every ``every`` seconds; TimeoutError after
    ``timeout``."""
    import anyio

    with anyio.fail_after(timeout):
        while True:
            if check():
                return
            await anyio.sleep(every)
