"""Running ``sharecon worker`` as a real process in tests, and reading what it handled."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.worker.handlers import OUT_ENV, SLEEP_ENV

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[2]
STARTED = re.compile(r"process (\d+) started \(pid (\d+)\)")


def noted(out: Path, kind: str = "handled") -> list[tuple[str, int]]:
    """Every ``(value, delivery_count)`` the handlers noted as ``kind``, all processes."""
    found: list[tuple[str, int]] = []
    for path in sorted(out.glob(f"{kind}-*.txt")):
        for line in path.read_text().splitlines():
            value, _, count = line.rpartition(" ")
            found.append((value, int(count)))
    return found


def counts(out: Path, kind: str = "handled") -> collections.Counter[str]:
    """How many times each value was noted."""
    return collections.Counter(v for v, _ in noted(out, kind))


class WorkerProcess:
    """``sharecon worker ...`` running; its stderr is collected line by line."""

    def __init__(self, proc: Process, out: Path) -> None:
        self.proc = proc
        self.out = out
        self.lines: list[str] = []

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    async def collect(self) -> None:
        assert self.proc.stderr is not None
        stream = BufferedByteReceiveStream(self.proc.stderr)
        while True:
            try:
                line = await stream.receive_until(b"\n", 1 << 20)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return
            self.lines.append(line.decode(errors="replace"))

    def pids(self, index: int) -> list[int]:
        """The pids process ``index`` had, oldest first."""
        return [
            int(m[2]) for line in self.lines if (m := STARTED.search(line)) and int(m[1]) == index
        ]

    async def wait_for(self, what: str, check: object, timeout: float) -> None:
        """Wait until ``check()`` is true; fail naming ``what`` (with the worker's stderr)."""
        assert callable(check)
        try:
            with anyio.fail_after(timeout):
                while not check():
                    if self.proc.returncode is not None:
                        raise AssertionError(
                            f"the worker exited ({self.proc.returncode}) before {what}:\n{self.stderr}"
                        )
                    await anyio.sleep(0.1)
        except TimeoutError:
            raise AssertionError(f"no {what} within {timeout} s:\n{self.stderr}") from None

    async def terminate(self, timeout: float = 60) -> int:
        """SIGTERM (drain) and wait for the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            with anyio.fail_after(timeout):
                return await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            raise AssertionError(
                f"the worker did not drain within {timeout} s:\n{self.stderr}"
            ) from None


@contextlib.asynccontextmanager
async def running_worker(
    bootstrap: str, out: Path, handler: str, *args: str, sleep: float = 0.0
) -> AsyncIterator[WorkerProcess]:
    """``python -m sharecon.cli worker HANDLER ARGS`` from the repository root; killed on
    the way out if still running (its worker processes then drain on their own: their
    stdin closes)."""
    env = {
        **os.environ,
        "SHARECON_BOOTSTRAP": bootstrap,
        OUT_ENV: str(out),
        SLEEP_ENV: str(sleep),
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [sys.executable, "-m", "sharecon.cli", "worker", handler, *args]
    async with anyio.create_task_group() as tg:
        proc = await anyio.open_process(cmd, env=env, cwd=ROOT)
        worker = WorkerProcess(proc, out)
        tg.start_soon(worker.collect)
        try:
            yield worker
        finally:
            with anyio.CancelScope(shield=True):
                if proc.returncode is None:
                    proc.kill()
                with anyio.move_on_after(30):
                    await proc.wait()
                await proc.aclose()
