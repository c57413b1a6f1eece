"""In-memory connections for the whole-client simulation (:mod:`.client`), on trio.

A connection is two :class:`MemoryStream` ends; what one sends, the other receives. Each
``send`` and each ``receive`` is exactly one schedule point, as on trio's own sockets
(which yield once per call: a shielded checkpoint when the call completes at once, or the
wait itself when it blocks), so the seeded scheduler explores the interleavings real
connections have. anyio's memory object streams, used before, yield twice for a
``receive`` that waits and check for cancellation through anyio's backend look-up on each
call: about a fifth of the simulation's task steps went to that.

trio only: the simulation runs on trio's ``MockClock``.
"""

from __future__ import annotations

from collections import deque

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

__all__ = ["Direction", "MemoryStream", "memory_pipe"]


class Direction:
    """The bytes travelling one way, and the task waiting for them."""

    __slots__ = ("chunks", "eof", "reader_gone", "waiter")

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
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
        self._in.wake()  # a receive of this end in another task ends


def memory_pipe() -> tuple[MemoryStream, MemoryStream]:
    """A new in-memory connection: its two ends."""
    a_to_b, b_to_a = Direction(), Direction()
    return MemoryStream(b_to_a, a_to_b), MemoryStream(a_to_b, b_to_a)
