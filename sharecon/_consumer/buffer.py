"""Records fetched but not yet handed to the application, with back-pressure.

Rules of this module:

1. Records are kept in the chunks the fetchers produced (one partition's records of one
   response); the per-record path is an index bump, never a list copy.
2. Records whose acquisition lock has already ended are dropped, not handed out: the
   broker is redelivering them (maybe to another member), so processing them here would
   do the work twice. The check runs per chunk and every 64 records, not per record.
3. Fetching pauses while the buffer holds ``max_records`` records or ``max_bytes`` bytes;
   :attr:`on_room` wakes the fetchers when it drains, the application waits on :attr:`data`.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from sharecon._consumer.signal import Signal

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.record import Record


class _Chunk:
    __slots__ = ("deadline", "nbytes", "pos", "records")

    def __init__(self, records: list[Record], nbytes: int) -> None:
        self.records = records
        self.pos = 0
        self.nbytes = nbytes
        # Every record of a chunk came in one response: one lock deadline for all.
        self.deadline = records[0].lock_deadline


class DeliveryBuffer:
    """FIFO of fetched record chunks, bounded in records and bytes."""

    def __init__(self, *, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._chunks: deque[_Chunk] = deque()
        self.records = 0
        self.nbytes = 0
        #: Records dropped because their lock ended while they waited here (rule 2).
        self.expired = 0
        #: Set when records arrive (or the consumer fails/closes): the application waits on it.
        self.data = Signal()
        #: Called when the buffer drops below its bounds (the consumer wakes its fetchers).
        self.on_room: Callable[[], None] | None = None

    def has_room(self, extra_records: int = 0, extra_bytes: int = 0) -> bool:
        """Whether fetchers may fetch more (counting ``extra_*`` about to be pushed)."""
        return (
            self.records + extra_records < self.max_records
            and self.nbytes + extra_bytes < self.max_bytes
        )

    def push(self, records: list[Record], nbytes: int) -> None:
        """Append one chunk (non-empty)."""
        self._chunks.append(_Chunk(records, nbytes))
        self.records += len(records)
        self.nbytes += nbytes
        self.data.set()

    def _expired(self, chunk: _Chunk, clock: Callable[[], float]) -> bool:
        if chunk.deadline is None or clock() < chunk.deadline:
            return False
        left = len(chunk.records) - chunk.pos
        self.expired += left
        self.records -= left
        self._chunks.popleft()
        self._drained(chunk)
        return True

    def pop_one(self, clock: Callable[[], float]) -> Record | None:
        """The next record, or ``None`` if the buffer is empty (``clock``: rule 2)."""
        chunks = self._chunks
        while chunks:
            chunk = chunks[0]
            if not chunk.pos & 63 and self._expired(chunk, clock):
                continue
            break
        else:
            return None
        rec = chunk.records[chunk.pos]
        chunk.pos += 1
        self.records -= 1
        if chunk.pos == len(chunk.records):
            chunks.popleft()
            self._drained(chunk)
        return rec

    def pop_many(self, limit: int, clock: Callable[[], float]) -> list[Record]:
        """Up to ``limit`` records (whole chunks where possible); empty if none."""
        out: list[Record] = []
        chunks = self._chunks
        while chunks and len(out) < limit:
            chunk = chunks[0]
            if self._expired(chunk, clock):
                continue
            rest = chunk.records[chunk.pos :] if chunk.pos else chunk.records
            take = limit - len(out)
            if len(rest) > take:
                out.extend(rest[:take])
                chunk.pos += take
                self.records -= take
                break
            if out:
                out.extend(rest)
            else:
                out = rest
            self.records -= len(rest)
            chunks.popleft()
            self._drained(chunk)
        return out

    def _drained(self, chunk: _Chunk) -> None:
        self.nbytes -= chunk.nbytes
        if self.on_room is not None and self.has_room():
            self.on_room()

    def clear(self) -> list[Record]:
        """Drop everything buffered; returns the records dropped."""
        out: list[Record] = []
        for chunk in self._chunks:
            out.extend(chunk.records[chunk.pos :])
        self._chunks.clear()
        self.records = 0
        self.nbytes = 0
        if self.on_room is not None:
            self.on_room()
        return out
