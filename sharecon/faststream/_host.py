"""Runs a sharecon client in a task of its own, for FastStream's start/stop calls.

A sharecon client's task group must be exited by the task that entered it (anyio's rule,
``sharecon._lifecycle``), but FastStream may start a broker in one task and stop it in
another (its ``stop`` runs each subscriber's in a task group). So each client is started,
run and closed by one task made for it here; ``stop()`` asks that task to close it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class _Client(Protocol):
    async def start(self) -> None: ...
    async def aclose(self) -> None: ...


C = TypeVar("C", bound=_Client)


class Hosted(Generic[C]):
    """``client`` started, run and closed by a task of its own."""

    __slots__ = ("_ready", "_stop", "_task", "client")

    def __init__(self, client: C) -> None:
        self.client = client
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future[None] | None = None

    async def start(self, body: Callable[[C], Awaitable[None]] | None = None) -> None:
        """Start the client in its task; then run ``body(client)`` there until it returns
        or :meth:`stop`. Raises what the client's ``start()`` raised."""
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready = loop.create_future()
        # A stop (Ctrl-C) while starting cancels the caller: nobody may read the outcome.
        self._ready.add_done_callback(_read_outcome)
        self._task = loop.create_task(self._run(body))
        await asyncio.shield(self._ready)

    async def _run(self, body: Callable[[C], Awaitable[None]] | None) -> None:
        assert self._ready is not None and self._stop is not None
        client = self.client
        try:
            await client.start()
        except BaseException as exc:
            ready = self._ready
            if isinstance(exc, asyncio.CancelledError):
                ready.cancel()
                raise
            if not ready.done():
                ready.set_exception(exc)
            return
        self._ready.set_result(None)
        # The body runs in a task of its own, not in a task group of this task: the
        # client's own task group was entered first, by start() above, and this task
        # must exit it (close) with no scope of its own still open inside it (anyio's
        # rule; a stop right after start used to close from inside such a group).
        runner = None if body is None else asyncio.get_running_loop().create_task(self._body(body))
        try:
            await self._stop.wait()
        finally:
            # No anyio scope around the close either (not even a shield): the client's
            # own scopes must be the innermost when it exits them. A wait cancelled by
            # asyncio.run's shutdown (Ctrl-C while starting) still closes: asyncio
            # cancels a task once, and the client shields its farewell itself.
            await client.aclose()  # ends the body (a consumer's process() returns)
            if runner is not None:
                await _finish(runner)
        if runner is not None and not runner.cancelled():
            failed = runner.exception()
            if failed is not None:
                raise failed  # the body's own error, as the task group raised it before

    async def _body(self, body: Callable[[C], Awaitable[None]]) -> None:
        assert self._stop is not None
        try:
            await body(self.client)
        finally:
            self._stop.set()  # a body that ended (or failed) closes its client

    async def stop(self, timeout: float) -> None:
        """Close the client and wait (at most ``timeout`` seconds) for its task to end;
        past that the task is cancelled (closing is shielded and bounded)."""
        task, self._task = self._task, None
        if task is None or self._stop is None:
            return
        self._stop.set()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            await asyncio.wait({task})


#: How long a body may take to return once its client closed, before it is cancelled.
_BODY_GRACE = 30.0


async def _finish(task: asyncio.Task[None]) -> None:
    # The client is closed: its body returns soon; past the grace it is cancelled.
    if not task.done():
        await asyncio.wait({task}, timeout=_BODY_GRACE)
    if not task.done():
        task.cancel()
        await asyncio.wait({task})


def _read_outcome(ready: asyncio.Future[None]) -> None:
    # Marks a failed start as seen: its caller raises it, unless it was cancelled first.
    if not ready.cancelled():
        ready.exception()
