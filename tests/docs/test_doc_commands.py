"""Every command in the README, the guides and ``examples/`` works when run literally.

Each file's blocks run in order (see ``tests/docs/blocks.py`` for what runs and the
markers), in a fresh temporary folder holding a link to ``examples/``, with this
project's interpreter first on PATH (so ``sharecon`` and ``python`` are the venv's) and
this checkout on PYTHONPATH. The commands name ``localhost:9092``, as the quick start
does, so each file gets a fresh broker there (``KafkaBroker(port=9092)``), stopped after
the file; the test fails at once, saying so, if something else listens on 9092.

The tests without ``broker`` check the markers and compile the fragments.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.docs.blocks import KINDS, NOT_RUN, ROOT, RUN, Block, blocks_of, doc_files, needs_broker

if TYPE_CHECKING:
    from collections.abc import Iterator

FILES = doc_files()
#: Most blocks that may stay unrun (skip): each needs a reason in the markdown.
MAX_SKIPS = 8
RUN_TIMEOUT = 180.0
FIRST_LINE_TIMEOUT = 90.0
#: ``foreground quiet``: how long a program that may print nothing must keep running.
QUIET_RUN = 8.0
_FILE_NAME = re.compile(r"^#\s*([\w./-]+\.\w+)\s*$")


def _all_blocks() -> list[Block]:
    return [b for path in FILES for b in blocks_of(path)]


# -- without a broker ------------------------------------------------------------------------


def test_every_block_has_a_known_language_and_marker() -> None:
    for block in _all_blocks():
        assert block.lang in RUN | NOT_RUN, f"{block.where}: unknown language {block.lang!r}"
        assert block.kind in KINDS, f"{block.where}: unknown marker {block.kind!r}"
        if block.kind != "run":
            assert block.lang in RUN, f"{block.where}: a marker on a block that never runs"


def test_skips_are_few_and_say_why() -> None:
    skips = [b for b in _all_blocks() if b.kind == "skip"]
    assert len(skips) <= MAX_SKIPS, [b.where for b in skips]
    for block in skips:
        assert len(block.note) > 10, f"{block.where}: a skip needs its reason"


def test_most_blocks_run() -> None:
    """The harness is not a list of exemptions: most runnable blocks run for real."""
    blocks = [b for b in _all_blocks() if b.lang in RUN]
    running = [b for b in blocks if b.kind in ("run", "foreground")]
    assert len(running) >= 0.6 * len(blocks), (len(running), len(blocks))


@pytest.mark.parametrize(
    "block",
    [b for b in _all_blocks() if b.kind == "fragment"],
    ids=lambda b: b.where,
)
def test_fragments_compile_and_import_existing_names(block: Block) -> None:
    assert block.lang == "python", f"{block.where}: only Python blocks can be fragments"
    tree = compile(
        block.code, block.where, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sharecon"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.where}: {node.module}.{alias.name}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sharecon"):
                    importlib.import_module(alias.name)


def test_links_into_the_repository_resolve() -> None:
    """Links that mkdocs cannot check (GitHub URLs of this repository, the README's
    relative links) name files that exist."""
    for path in FILES:
        if path.suffix != ".md":
            continue
        text = path.read_text()
        for target in re.findall(
            r"https://github\.com/sharecon/sharecon/(?:blob|tree)/main/([^)#\s]+)", text
        ):
            assert (ROOT / target).exists(), f"{path.name}: {target}"
        if path.name == "README.md":
            for target in re.findall(r"\]\((?!https?:|#)([^)#]+)", text):
                assert (ROOT / target).exists(), f"README.md: {target}"


# -- against a broker ------------------------------------------------------------------------


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _listeners(port: int) -> list[str]:
    """The command lines of the processes listening on ``port`` (Linux /proc; best effort)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    found: list[str] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        links: set[str] = set()
        with contextlib.suppress(OSError):
            for fd in list((proc / "fd").iterdir()):
                with contextlib.suppress(OSError):  # closed meanwhile
                    links.add(os.readlink(fd))
        with contextlib.suppress(OSError):
            if any(f"socket:[{inode}]" in links for inode in inodes):
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"pid {proc.name}: {cmd[:300]}")
    return found


@contextlib.contextmanager
def _broker_on_9092(wanted: bool) -> Iterator[None]:
    if _port_busy(9092):
        pytest.fail(
            "something already listens on 127.0.0.1:9092: the doc tests run the docs' "
            "commands literally against localhost:9092 and need the port; stop it first "
            f"({'; '.join(_listeners(9092)) or 'no process found'})"
        )
    if not wanted:
        yield
        return
    from sharecon.testing import KafkaBroker

    with KafkaBroker(port=9092):
        yield


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    # Keep the broker provisioning settings; drop what would redirect the commands.
    for key in ("SHARECON_KAFKA_CACHE", "SHARECON_JAVA", "SHARECON_MAVEN", "SHARECON_MAVEN_ARGS"):
        if key in os.environ:
            env[key] = os.environ[key]
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_COLOR"] = "1"
    return env


def _argv(block: Block, command: str | None, workdir: Path) -> list[str]:
    if block.lang == "python":
        script = workdir / f"block_{block.line}.py"
        script.write_text(block.code)
        return [sys.executable, script.name]
    return [
        "bash",
        "-e",
        "-o",
        "pipefail",
        "-c",
        command if command is not None else block.script(),
    ]


def _run(block: Block, workdir: Path) -> None:
    done = subprocess.run(
        _argv(block, None, workdir),
        cwd=workdir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (
        f"{block.where} failed with exit code {done.returncode}:\n{block.code}\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
    assert "Traceback" not in done.stderr, f"{block.where}:\n{done.stderr[-3000:]}"


def _foreground(block: Block, workdir: Path) -> None:
    """Start each command, wait for its first output line, Ctrl-C it, expect a clean end.

    Notes on the marker: ``quiet`` (a program waiting for work may print nothing: it must
    still run after ``QUIET_RUN`` seconds), ``clean`` (Ctrl-C must end it with exit 0 and
    no traceback at all; otherwise a ``KeyboardInterrupt`` traceback, exit 130, is the
    documented way ``anyio.run`` ends on Ctrl-C).
    """
    notes = set(block.note.split())
    commands: list[str | None] = [None] if block.lang == "python" else list(block.commands())
    for command in commands:
        proc = subprocess.Popen(
            _argv(block, command, workdir),
            cwd=workdir,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        assert proc.stdout is not None
        what = command or block.code
        try:
            first = _first_line(proc, QUIET_RUN if "quiet" in notes else FIRST_LINE_TIMEOUT)
            if "quiet" not in notes:
                assert first, f"{block.where}: {what!r} ended or printed nothing"
            assert proc.poll() is None, f"{block.where}: {what!r} ended on its own: {first}"
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C goes to the terminal's job
            rest, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out = first + rest
        if "clean" in notes:
            assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}:\n{out}"
            assert "Traceback" not in out, f"{block.where}: {what!r}:\n{out}"
            continue
        assert proc.returncode in (0, 130, -signal.SIGINT), (
            f"{block.where}: {what!r} exited {proc.returncode} after Ctrl-C:\n{out}"
        )
        if "Traceback" in out:
            # Only the KeyboardInterrupt that anyio.run re-raises after closing cleanly.
            last = [ln for ln in out.splitlines() if ln.strip()][-1]
            assert last.strip() == "KeyboardInterrupt", f"{block.where}: {what!r}:\n{out}"


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    import selectors

    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                return proc.stdout.readline()
    return ""


def _runs(block: Block) -> bool:
    return block.lang in RUN and block.kind in ("run", "foreground")


RUNNABLE = [p for p in FILES if any(_runs(b) for b in blocks_of(p))]


@pytest.mark.broker
@pytest.mark.parametrize("path", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_doc_commands_run(path: Path, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    with _broker_on_9092(needs_broker(path)):
        for block in blocks_of(path):
            name = _FILE_NAME.match(block.code.split("\n", 1)[0])
            if block.lang in NOT_RUN and block.lang != "text" and name:
                # A file the next commands use (`# worker.toml` on its first line).
                (tmp_path / name.group(1)).write_text(block.code)
            elif block.kind == "foreground":
                _foreground(block, tmp_path)
            elif _runs(block):
                _run(block, tmp_path)
