"""A level-triggered wake-up for loops that sleep until something changes."""

from __future__ import annotations

import math

import anyio


class Signal:
    """``set()`` wakes every current waiter; ``wait()`` sleeps until the next ``set()``.

    Unlike :class:`anyio.Event` it can be reused: each wait starts from a fresh event, and a
    ``set()`` that happened while nobody waited is remembered once (so no wake-up is lost
    between a loop's check and its wait).
    """

    __slots__ = ("_event", "_pending")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._pending = False

    def set(self) -> None:
        """Wake the waiters (or the next one to wait)."""
        self._pending = True
        self._event.set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Sleep until :meth:`set` (or ``timeout`` seconds); return whether it was set."""
        if not self._pending:
            with anyio.move_on_after(math.inf if timeout is None else timeout):
                await self._event.wait()
        woke = self._pending
        self._pending = False
        if self._event.is_set():
            self._event = anyio.Event()
        return woke
