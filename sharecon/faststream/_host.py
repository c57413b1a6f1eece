"""Runs a sharecon client in a task of its own, for FastStream's start/stop calls.

A sharecon client's task group must be exited by the task that entered it (anyio's rule,
``sharecon._lifecycle``), but FastStream may start a broker in one task and stop it in
another (its ``stop`` runs each subscriber's in a task group). So each client is started,
run and closed by one task made for it here; ``stop()`` asks that task to close it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import anyio

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
        self._task = loop.create_task(self._run(body))
        await asyncio.shield(self._ready)

    async def _run(self, body: Callable[[C], Awaitable[None]] | None) -> None:
        assert self._ready is not None and self._stop is not None
        client = self.client
        try:
            await client.start()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        try:
            async with anyio.create_task_group() as tg:
                if body is not None:
                    tg.start_soon(self._body, body)
                await self._stop.wait()
                await client.aclose()  # ends the body (a consumer's process() returns)
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()  # closing again does nothing

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
