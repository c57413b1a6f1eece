"""A level-triggered wake-up for loops that sleep until something changes."""

from __future__ import annotations

import math

import anyio


class Signal:
    """``set()`` wakes every current waiter; ``wait()`` sleeps until the next ``set()``.

    Unlike :class:`anyio.Event` it can be reused. Rules:

    1. Every task waiting when ``set()`` is called wakes, and its ``wait()`` returns True.
    2. A ``set()`` while nobody waits is remembered once: the next ``wait()`` returns True
       at once (so a loop loses no wake-up between its check and its wait).
    3. A ``set()`` while nobody waits but tasks woken by an earlier ``set()`` have not run
       yet is folded into that wake-up: they will see the change when they run, so a
       single-waiter loop gets no spurious extra turn.
    """

    __slots__ = ("_event", "_pending", "_waiters", "_woken")

    def __init__(self) -> None:
        #: The event the current waiters sleep on; replaced by each set() that wakes them.
        self._event = anyio.Event()
        self._pending = False
        #: Tasks sleeping on ``_event``.
        self._waiters = 0
        #: Tasks woken by a set() that have not resumed yet (rule 3).
        self._woken = 0

    def set(self) -> None:
        """Wake the waiters (or the next one to wait)."""
        if self._waiters:
            self._event.set()
            # Later waits sleep until the next set(): they must not see this one.
            self._event = anyio.Event()
            self._woken += self._waiters
            self._waiters = 0
        elif not self._woken:
            self._pending = True

    async def wait(self, timeout: float | None = None) -> bool:
        """Sleep until :meth:`set` (or ``timeout`` seconds); return whether it was set."""
        if self._pending:
            self._pending = False
            return True
        # Keep our own event: set() replaces self._event, and whether *this* one fired is
        # the answer (reading a shared flag would tell only the first waiter to resume).
        event = self._event
        self._waiters += 1
        try:
            with anyio.move_on_after(math.inf if timeout is None else timeout):
                await event.wait()
        finally:
            # Timed out or cancelled before a set(): still counted among the waiters.
            if event.is_set():
                self._woken -= 1
            else:
                self._waiters -= 1
        return event.is_set()
