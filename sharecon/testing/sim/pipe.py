"""In-memory connections for the whole-client simulation (:mod:`.client`), on trio.

A connection is two :class:`MemoryStream` ends; what one sends, the other receives. Each
``send`` and each ``receive`` is exactly one schedule point, as on trio's own sockets
(which yield once per call: a shielded checkpoint when the call completes at once, or the
wait itself when it blocks), so the seeded scheduler explores the interleavings real
connections have. anyio's memory object streams, used before, yield twice for a
``receive`` that waits and check for cancellation through anyio's backend look-up on each
call: about a fifth of the simulation's task steps went to that.

A direction may carry a :class:`Shaper` (``memory_pipe(down=..., up=...)``): the
transport faults of :mod:`.client_net` (stalls, a bandwidth limit) decide there when the
bytes sent arrive. Without one, nothing changes: the same schedule points as before.

trio only: the simulation runs on trio's ``MockClock``.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import anyio
import anyio.abc
import trio
from trio.lowlevel import (
    Abort,
    Task,
    cancel_shielded_checkpoint,
    checkpoint_if_cancelled,
    current_task,
    reschedule,
    wait_task_rescheduled,
)

__all__ = ["Direction", "MemoryStream", "Shaper", "memory_pipe"]


class Shaper(Protocol):
    """When one direction's bytes arrive (a transport fault of :mod:`.client_net`)."""

    def sent(self, n: int) -> None:
        """``n`` bytes were sent (queued in the direction)."""

    async def admit(self, queued: int, max_bytes: int) -> int:
        """Wait until some of the ``queued`` bytes have arrived; how many a receive may
        take now (at least 1, at most ``max_bytes``). A schedule point."""

    def closed(self, sender_gone: bool) -> None:
        """The receiving end closed (``sender_gone``: after the sending end): bytes not
        taken never arrive."""


class Direction:
    """The bytes travelling one way, and the task waiting for them."""

    __slots__ = ("chunks", "eof", "reader_gone", "shaper", "waiter")

    def __init__(self, shaper: Shaper | None = None) -> None:
        self.chunks: deque[bytes] = deque()
        self.shaper = shaper  #: when the bytes arrive (``None``: at once)
        self.eof = False  #: the sending end will send no more
        self.reader_gone = False  #: the receiving end closed: sends fail
        self.waiter: Task | None = None

    def wake(self) -> None:
        task = self.waiter
        if task is not None:
            self.waiter = None
            reschedule(task)


class MemoryStream(anyio.abc.ByteStream):
    """One end of an in-memory connection (an anyio byte stream, served on trio)."""

    def __init__(self, incoming: Direction, outgoing: Direction) -> None:
        self._in = incoming
        self._out = outgoing
        self._closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await checkpoint_if_cancelled()
        d = self._in
        if self._closed:
            raise anyio.EndOfStream
        if d.chunks:
            if d.shaper is None:
                await cancel_shielded_checkpoint()
        elif d.eof:
            raise anyio.EndOfStream
        else:
            if d.waiter is not None:
                raise anyio.BusyResourceError("receiving")

            def abort(_: object) -> Abort:
                d.waiter = None
                return Abort.SUCCEEDED

            d.waiter = current_task()
            await wait_task_rescheduled(abort)
            if not d.chunks:  # woken by a close, not by bytes
                raise anyio.EndOfStream
        if d.shaper is not None:
            max_bytes = await d.shaper.admit(sum(map(len, d.chunks)), max_bytes)
            if not d.chunks:  # this end closed while the bytes were on their way
                raise anyio.EndOfStream
        # As a socket does: whatever arrived, up to max_bytes.
        data = d.chunks.popleft()
        while d.chunks and len(data) < max_bytes:
            data += d.chunks.popleft()
        if len(data) > max_bytes:
            d.chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        return data

    async def send(self, item: bytes) -> None:
        await checkpoint_if_cancelled()
        d = self._out
        if self._closed or d.eof or d.reader_gone:
            raise anyio.BrokenResourceError
        if item:
            d.chunks.append(bytes(item))
            if d.shaper is not None:
                d.shaper.sent(len(item))
            d.wake()
        await cancel_shielded_checkpoint()

    async def send_eof(self) -> None:
        self._out.eof = True
        self._out.wake()
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self._close()
        await trio.lowlevel.checkpoint()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._out.eof = True
        self._out.wake()
        self._in.reader_gone = True
        self._in.chunks.clear()
        if self._in.shaper is not None:
            self._in.shaper.closed(self._in.eof)
        self._in.wake()  # a receive of this end in another task ends


def memory_pipe(
    *, down: Shaper | None = None, up: Shaper | None = None
) -> tuple[MemoryStream, MemoryStream]:
    """A new in-memory connection: its two ends, the client's and the server's (``down``
    shapes what the server sends, ``up`` what the client sends)."""
    a_to_b, b_to_a = Direction(up), Direction(down)
    return MemoryStream(b_to_a, a_to_b), MemoryStream(a_to_b, b_to_a)
