"""Records fetched but not yet handed to the application, with back-pressure.

Rules of this module:

1. One chunk per partition per answer, kept as undecoded batches
   (:class:`~sharecon._share.intake.PartitionIntake`): a batch is decoded only when the
   application reaches it, so memory follows what the application takes, not what a
   producer compressed into an answer. Handing out a decoded record is an index bump.
2. The bounds count what memory really holds: undecoded batches by their answer bytes,
   decoded ones by their decompressed bytes; records by the acquired offsets still to
   come. :meth:`DeliveryBuffer.pop_many` stops adding batches once it holds
   ``max_bytes`` decoded bytes, but always returns at least one batch's records, so a
   record larger than the bound is delivered alone, never stuck.
   :meth:`DeliveryBuffer.pop_one` asks for a large batch :data:`SLICE` records at a time
   (decompressed once): the records of a slice are handed out and freed before the next
   slice is built, so the garbage collector never sees a whole batch of records alive
   at once (their young-generation passes would otherwise promote, and scan again, most
   of a 2,000-record batch). :meth:`DeliveryBuffer.pop_many` takes whole batches (the
   caller holds its list of them anyway).
3. Records whose acquisition lock has already ended are dropped, not handed out: the
   broker is redelivering them (maybe to another member), so processing them here would
   do the work twice. The check runs for every record handed out one by one (a handler
   may have run past the lock since the last one), on the caller's clock reading when it
   gives one (``async for`` reads the clock once per record), and again after decoding.
4. Chunks of a share session that was lost are dropped at once (:meth:`drop`): their
   locks are gone, and an answer to them could never reach the broker.
5. Fetching pauses while the buffer holds ``max_records`` records or ``max_bytes`` bytes;
   :attr:`on_room` wakes the fetchers when it drains, the application waits on :attr:`data`.
   With :attr:`overlap` it also wakes them when a chunk is used up and at most one is left:
   they may fetch one answer ahead when it can be handled within the lock (rule 7 of
   :mod:`sharecon._share.fetch_size`).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

from sharecon._consumer.signal import Signal

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._share.intake import Decoded, PartitionIntake
    from sharecon._share.ledger import Delivery
    from sharecon._share.session import SessionTag
    from sharecon.protocol.records import Headers
    from sharecon.record import BatchInfo, Record
    from sharecon.types import TopicIdPartition

    #: Builds one record of a batch: ``factory(offset, timestamp, key, value, headers)``
    #: (topic, partition, owner, lock deadline and batch information already bound).
    RecordFactory = Callable[[int, int, bytes | None, bytes | None, Headers], Record]
    #: Binds a batch's :class:`BatchInfo` into a chunk's record factory (topic, partition,
    #: owner and lock deadline bound already): ``partial(record_factory, ...)``.
    ChunkFactory = Callable[[BatchInfo], RecordFactory]

_EMPTY: list[Record] = []

#: Records built at a time of a batch handed out one by one (rule 2): below the
#: collector's young-generation threshold (700 allocations), so a slice's records are
#: freed before a collection that would promote them.
SLICE: Final = 256


class Chunk:
    """One partition's records from one answer: undecoded batches, and the decoded one
    being handed out."""

    __slots__ = (
        "batch_factory",
        "batch_info",
        "deadline",
        "decoded",
        "delivery",
        "factory",
        "intake",
        "pos",
        "records",
        "tag",
    )

    def __init__(
        self,
        intake: PartitionIntake,
        tag: SessionTag,
        deadline: float | None,
        factory: ChunkFactory,
        delivery: Delivery = (0, -1),
    ) -> None:
        self.intake = intake
        self.tag = tag
        #: The ledger's name for this delivery (what dropping the chunk forgets).
        self.delivery = delivery
        #: Builds each record of the chunk (topic, partition, owner and deadline bound).
        self.factory = factory
        #: The last batch's :class:`BatchInfo` and :attr:`factory` with it bound: the
        #: batches of one answer mostly share it, so both are made once per chunk.
        self.batch_info: BatchInfo | None = None
        self.batch_factory: RecordFactory | None = None
        #: Every record of an answer shares one lock deadline.
        self.deadline = deadline
        self.records: list[Record] = _EMPTY
        self.pos = 0
        #: Decompressed bytes of :attr:`records` (counted until they are all handed out).
        self.decoded = 0

    def next_offset(self) -> int | None:
        """The first offset not handed out yet (``None`` when nothing is left)."""
        if self.pos < len(self.records):
            return self.records[self.pos].offset
        span = self.intake.pending_span()
        return None if span is None else span[0]

    def last_offset(self) -> int:
        """The last acquired offset of the chunk."""
        return self.intake.ranges[-1].last_offset if self.intake.ranges else -1


class DeliveryBuffer:
    """FIFO of fetched chunks, bounded in records and bytes (rules 1-5)."""

    def __init__(self, *, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._chunks: deque[Chunk] = deque()
        #: Records still to come (acquired offsets not decoded + decoded not handed out).
        self.records = 0
        #: Bytes held (undecoded answer bytes + decoded bytes not handed out).
        self.nbytes = 0
        #: Records dropped because their lock ended while they waited here (rule 3), in
        #: all and per partition.
        self.expired = 0
        #: No more fetching, for good (``ShareConsumer.stop_fetching()``).
        self.stopped = False
        #: Asked whether fetching is held for a while (the dead-letter circuit breaker is
        #: open). Asked, not told: the hold ends when the breaker's cool-down does, whoever
        #: looks, and no flag can be left behind to pause fetching for good.
        self.held: Callable[[], bool] | None = None
        self.expired_by: dict[TopicIdPartition, int] = {}
        #: Set when records arrive (or the consumer fails/closes): the application waits on it.
        self.data = Signal()
        #: Called when the buffer drops below its bounds (the consumer wakes its fetchers).
        self.on_room: Callable[[], None] | None = None
        #: The record bound is the default one: one answer may wait behind the chunk being
        #: handed out even past it (rule 5); the fetchers decide (:meth:`single_chunk`).
        self.overlap = False
        #: Decodes a chunk's next batch (up to ``limit`` records of it, a slice, when given)
        #: and applies what it found (gaps, releases, dead letters) to the consumer's
        #: state; ``None`` when the chunk has no batch left.
        self.decoder: Callable[[Chunk, int | None], Decoded[Record] | None] | None = None
        #: Told about a chunk dropped from offset ``first`` on (lock ended, session lost).
        self.on_drop: Callable[[Chunk, int], None] | None = None
        #: Told how many records a chunk whose lock ended dropped (rule 3: counted, said).
        self.on_expired: Callable[[int], None] | None = None
        #: Asked about every chunk pushed; a chunk it refuses is not buffered (the consumer
        #: has unsubscribed: it answers the chunk's records itself).
        self.admit: Callable[[Chunk], bool] | None = None

    def __len__(self) -> int:
        return len(self._chunks)

    def has_room(self, extra_records: int = 0, extra_bytes: int = 0) -> bool:
        """Whether fetchers may fetch more (counting ``extra_*`` about to be pushed)."""
        return (
            not self.stopped
            and (self.held is None or not self.held())
            and self.records + extra_records < self.max_records
            and self.nbytes + extra_bytes < self.max_bytes
        )

    def push(self, chunk: Chunk) -> None:
        """Append one chunk (batches to decode, or records decoded already), unless
        :attr:`admit` turns it away."""
        if self.admit is not None and not self.admit(chunk):
            return
        self._chunks.append(chunk)
        self.records += chunk.intake.acquired + len(chunk.records) - chunk.pos
        self.nbytes += chunk.intake.wire + chunk.decoded
        self.data.set()

    # -- taking records ---------------------------------------------------------------------

    def _decode(self, chunk: Chunk, limit: int | None) -> bool:
        """Decode ``chunk``'s next batch (or slice of ``limit`` records) into
        :attr:`Chunk.records`; False if none is left."""
        decoder = self.decoder
        assert decoder is not None, "DeliveryBuffer.decoder is not set"
        intake = chunk.intake
        while True:
            before_acq, before_wire = intake.acquired, intake.wire
            d = decoder(chunk, limit)
            if d is None:
                return False
            self.records -= before_acq - intake.acquired
            self.nbytes -= before_wire - intake.wire
            if d.records:
                chunk.records = d.records
                chunk.pos = 0
                chunk.decoded = d.nbytes
                self.records += len(d.records)
                self.nbytes += d.nbytes
                return True

    def _finish_batch(self, chunk: Chunk) -> None:
        self.nbytes -= chunk.decoded
        chunk.decoded = 0
        chunk.records = _EMPTY
        chunk.pos = 0

    def _expired(self, chunk: Chunk, clock: Callable[[], float]) -> bool:
        if chunk.deadline is None or clock() < chunk.deadline:
            return False
        before = self.records
        self._remove(chunk)
        self.count_expired(chunk.intake.tp, before - self.records)
        return True

    def count_expired(self, tp: TopicIdPartition, lost: int) -> None:
        """``lost`` records of ``tp`` had their locks end before they were handed out:
        counted, and told (rule 3)."""
        self.expired += lost
        self.expired_by[tp] = self.expired_by.get(tp, 0) + lost
        if self.on_expired is not None:
            self.on_expired(lost)

    def _remove(self, chunk: Chunk) -> None:
        """Take ``chunk`` out, forgetting what it still held (rules 3, 4)."""
        first = chunk.next_offset()
        self.records -= chunk.intake.acquired + len(chunk.records) - chunk.pos
        self.nbytes -= chunk.intake.wire + chunk.decoded
        self._chunks.remove(chunk)
        if first is not None and self.on_drop is not None:
            self.on_drop(chunk, first)
        self._room()

    def pop_one(self, clock: Callable[[], float], now: float | None = None) -> Record | None:
        """The next record, or ``None`` if the buffer is empty (``clock``: rule 3).

        :param now: ``clock()`` read by the caller just now, for the first lock check;
            any later one (after decoding) reads the clock again.
        """
        chunks = self._chunks
        while chunks:
            chunk = chunks[0]
            pos = chunk.pos
            if pos < len(chunk.records):
                # Every record: a handler may have run for longer than the lock since the
                # last one, and a record whose lock ended must never be handed out.
                deadline = chunk.deadline
                if deadline is not None:
                    t = clock() if now is None else now
                    if t >= deadline and self._expired(chunk, clock):
                        now = None
                        continue
                chunk.pos = pos + 1
                self.records -= 1
                return chunk.records[pos]
            now = None  # decoding takes time: the next check reads the clock again
            if chunk.records:
                self._finish_batch(chunk)
            if self._expired(chunk, clock):
                continue
            if not self._decode(chunk, SLICE):
                chunks.popleft()
                self._room()
        return None

    def pop_many(self, limit: int, clock: Callable[[], float]) -> list[Record]:
        """Up to ``limit`` records (whole batches where possible), at most about
        ``max_bytes`` decoded bytes of them but never none (rule 2); empty if none."""
        out: list[Record] = []
        taken_bytes = 0
        chunks = self._chunks
        while chunks and len(out) < limit:
            chunk = chunks[0]
            if chunk.pos >= len(chunk.records):
                if chunk.records:
                    self._finish_batch(chunk)
                if self._expired(chunk, clock):
                    continue
                if out and taken_bytes >= self.max_bytes:
                    break
                if not self._decode(chunk, None):
                    chunks.popleft()
                    self._room()
                    continue
                taken_bytes += chunk.decoded
            elif self._expired(chunk, clock):  # also a chunk part-taken by an earlier call
                continue
            records = chunk.records
            pos = chunk.pos
            end = min(len(records), pos + limit - len(out))
            # One slice (or none, for a whole batch), not a slice of a slice.
            rest = records if pos == 0 and end == len(records) else records[pos:end]
            if out:
                out.extend(rest)
            else:
                out = list(rest) if rest is records else rest
            chunk.pos = end
            self.records -= end - pos
        return out

    def single_chunk(self, extra_records: int = 0) -> bool:
        """Whether at most one chunk waits (counting an answer of ``extra_records`` about to
        be pushed as one), under the byte bound, with :attr:`overlap` on (rule 5)."""
        return (
            self.overlap
            and not self.stopped
            and (self.held is None or not self.held())
            and len(self._chunks) + (1 if extra_records else 0) <= 1
            and self.nbytes < self.max_bytes
        )

    def resume(self) -> None:
        """The hold may have ended: wake the fetchers if there is room."""
        self._room()

    def _room(self) -> None:
        if self.on_room is not None and (self.has_room() or self.single_chunk()):
            self.on_room()

    def holds(self, tp: TopicIdPartition, offset: int) -> bool:
        """Whether the record at ``offset`` of ``tp`` waits here, not handed out yet."""
        for chunk in self._chunks:
            intake = chunk.intake
            if intake.tp != tp or not intake.acquires(offset):
                continue
            first = chunk.next_offset()
            if first is not None and first <= offset:
                return True
        return False

    def chunks(self) -> list[Chunk]:
        """The buffered chunks, oldest first (a copy)."""
        return list(self._chunks)

    # -- dropping ---------------------------------------------------------------------------

    def waiting(self) -> list[tuple[TopicIdPartition, Delivery, int, int]]:
        """What the buffer holds and never handed out: ``(tp, delivery, first, last)``
        per chunk with records left."""
        spans = []
        for chunk in self._chunks:
            first = chunk.next_offset()
            if first is not None:
                spans.append((chunk.intake.tp, chunk.delivery, first, chunk.last_offset()))
        return spans

    def drop(self, match: Callable[[Chunk], bool]) -> int:
        """Drop every chunk ``match`` selects (rule 4); returns how many of their records
        were dropped (never handed out)."""
        doomed = [c for c in self._chunks if match(c)]
        before = self.records
        for chunk in doomed:
            self._remove(chunk)
        return before - self.records

    def clear(self) -> int:
        """Drop everything buffered; returns how many records were dropped."""
        return self.drop(lambda _c: True)
