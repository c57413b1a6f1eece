"""The records' way between the machine and the application, both ways: deliveries
buffered and decoded into records, and the application's answers to them given back.

Nothing here decides anything (the machine, :mod:`sharecon._share.machine`, does): a
:class:`~sharecon._share.effects.Deliver` becomes a buffered :class:`Chunk`, a batch of it
becomes records when the application reaches it, and what the decoding found, what the
buffer dropped and how the application answered go back to the machine (:class:`Handout`),
whose effects are then carried out.

Rules of this module:

1. Per-record cost is one call: the record factory is bound once per chunk (topic,
   partition, owner, lock deadline) and once per batch (:class:`BatchInfo`), and fills a
   bare record's slots (:func:`sharecon.record.record_factory`).
2. A record knows the delivery it came from (:class:`SessionOwner`), so its answer never
   lands on a newer delivery of the same offset.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from sharecon._consumer.buffer import Chunk
from sharecon.record import BatchInfo, Record, record_factory
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.buffer import DeliveryBuffer, RecordFactory
    from sharecon._share.effects import Deliver
    from sharecon._share.intake import Decoded
    from sharecon._share.ledger import Delivery, MarkResult
    from sharecon._share.machine import ShareMachine
    from sharecon._share.session import SessionTag
    from sharecon.protocol.records import RecordBatch
    from sharecon.types import TopicIdPartition

__all__ = [
    "Acknowledger",
    "Handout",
    "SessionOwner",
    "chunk_of",
    "decode_chunk",
    "owner_of",
    "wall_clock_offset",
]

# Read once per explicit answer: Final, a C static in the compiled build.
_RENEW: Final = AckType.RENEW


class Acknowledger(Protocol):
    """Where :class:`~sharecon.record.Record` answers go."""

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Apply ``ack`` to ``record``."""

    def release_later(self, record: Record, delay: float) -> None:
        """Release ``record`` ``delay`` seconds from now, keeping its lock meanwhile."""


class SessionOwner:
    """What the records of one delivery call back into: the consumer, plus the session and
    the ledger :data:`~sharecon._share.ledger.Delivery` they came from (rule 2), and
    their partition (the records' own ``topic_partition``: read here, the compiled
    implicit accept reads a native field instead of a Python object's attribute)."""

    __slots__ = ("consumer", "delivery", "tag", "tp")

    def __init__(
        self, consumer: Acknowledger, tag: SessionTag, delivery: Delivery, tp: TopicIdPartition
    ) -> None:
        self.consumer = consumer
        self.tag = tag
        self.delivery = delivery
        self.tp = tp

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Pass the answer on to the consumer."""
        self.consumer.acknowledge(record, ack)

    def release_later(self, record: Record, delay: float) -> None:
        """Pass a delayed release (``record.release(delay=...)``) on to the consumer."""
        self.consumer.release_later(record, delay)


def owner_of(record: Record) -> SessionOwner | None:
    """The delivery a record came from (``None`` for records built by hand)."""
    owner = record._owner
    return owner if type(owner) is SessionOwner else None


def chunk_of(e: Deliver, consumer: Acknowledger | None) -> Chunk:
    """The buffered form of the machine's :class:`~sharecon._share.effects.Deliver`, its
    records owned by ``consumer`` (rule 1)."""
    tp = e.tp
    owner = SessionOwner(consumer, e.tag, e.delivery, tp) if consumer is not None else None
    factory = partial(
        record_factory, tp.topic or str(tp.topic_id), tp.partition, tp, owner, e.deadline
    )
    return Chunk(e.intake, e.tag, e.deadline, factory, e.delivery)


def wall_clock_offset() -> float | None:
    """Wall-clock seconds (Unix epoch) minus the event loop's clock: what a record's
    :attr:`~sharecon.record.BatchInfo.clock_offset` holds (read once per chunk)."""
    return time.time() - anyio.current_time()


def decode_chunk(
    chunk: Chunk,
    dead_letter_limit: int | None,
    clock_offset: Callable[[], float | None] = wall_clock_offset,
    limit: int | None = None,
) -> Decoded[Record] | None:
    """Decode a buffered chunk's next batch, or its next ``limit`` records (``None``: none
    left); the caller hands the result to the machine (``ShareMachine.batch_decoded``).
    ``clock_offset`` is read once per chunk, at its first batch."""
    intake = chunk.intake
    batch = intake.next_batch()
    if batch is None:
        return None
    return intake.decode_next(
        _batch_factory(chunk, batch, clock_offset),
        dead_letter_limit=dead_letter_limit,
        limit=limit,
    )


class Handout:
    """One consumer's records between its machine and the application (rules 1-2).

    :param settle: carries out the machine's pending effects.
    :param renew_check: raises when the brokers cannot renew locks.
    :param clock_offset: the wall clock minus the lock deadlines' clock, read once per
        chunk (the consumer's: :func:`wall_clock_offset`; the simulator, which has
        neither clock, gives ``None``).
    :ivar owner: what the records call back into (the public ShareConsumer).
    """

    __slots__ = ("buffer", "clock_offset", "machine", "owner", "renew_check", "settle")

    def __init__(
        self,
        machine: ShareMachine,
        buffer: DeliveryBuffer,
        settle: Callable[[], None],
        renew_check: Callable[[], None],
        clock_offset: Callable[[], float | None] = wall_clock_offset,
    ) -> None:
        self.machine = machine
        self.buffer = buffer
        self.settle = settle
        self.renew_check = renew_check
        self.clock_offset = clock_offset
        self.owner: Acknowledger | None = None
        buffer.decoder = self.decode
        buffer.on_drop = self.dropped
        buffer.admit = self.admit

    # -- the application's answers (the machine's rules 4 and 6) ----------------------------

    def answer(self, record: Record, ack: AckType) -> MarkResult:
        """Give the machine the application's answer for ``record``; raises nothing for a
        lost lock (reported). :raises UnsupportedVersionError: RENEW on Kafka 4.1."""
        if ack is AckType.RENEW:
            self.renew_check()
        machine = self.machine
        owner = owner_of(record)
        if owner is None:
            result = machine.answer(record.topic_partition, record.offset, ack, None)
        else:
            result = machine.answer(
                record.topic_partition, record.offset, ack, owner.delivery, owner.tag, record
            )
        if machine.effects:
            self.settle()
        return result

    def acknowledge(self, record: Record, ack: AckType) -> MarkResult:
        """The application's explicit answer (refused as the machine's rule 6 says): OK,
        or DEAD for a record whose lock was lost (reported, not raised).

        :raises UnsupportedVersionError: RENEW on a broker without ShareAcknowledge v2.
        :raises InvalidRecordStateError: answered already, never held, or closed.
        """
        machine = self.machine
        if ack is _RENEW and not machine.closing:
            self.renew_check()
        owner = record._owner  # owner_of(), inlined: this runs once per explicit answer
        if type(owner) is SessionOwner:
            delivery: Delivery | None = owner.delivery
            tag: SessionTag | None = owner.tag
        else:
            delivery = tag = None
        try:
            return machine.acknowledge(
                record.topic_partition, record.offset, ack, delivery, tag, record
            )
        finally:
            if machine.effects:
                self.settle()

    def acknowledge_offset(self, topic: str, partition: int, offset: int, ack: AckType) -> None:
        """The application's answer by position (refused as the machine's rule 6 says)."""
        try:
            self.machine.acknowledge_at(topic, partition, offset, ack, self.buffer.holds)
        finally:
            self.settle()

    def handed_out(self, records: list[Record]) -> None:
        """Tell the machine ``records`` were handed to the application (``poll()``), one
        range per run of consecutive offsets of one delivery."""
        start = records[0]
        last = records[-1]
        if (
            last.offset - start.offset == len(records) - 1
            and type(start._owner) is SessionOwner
            and last._owner is start._owner
            and last.topic_partition is start.topic_partition
        ):
            # One chunk's records without a hole (the usual batch): each delivery has its
            # own owner, a chunk is handed out in rising offsets before the next one, so
            # first and last spanning exactly len(records) offsets is one run.
            self._handed_run(start, last.offset)
            return
        prev = start
        for rec in records:
            # Records of one chunk share one TopicIdPartition object: identity is the fast
            # path. A run also ends at a hole (the offsets between may be another chunk's,
            # still buffered, not handed out), and where the chunk does (records of one
            # chunk share one owner): each run is noted for its own delivery only.
            if (
                rec.offset != prev.offset + 1
                or rec._owner is not start._owner
                or (
                    rec.topic_partition is not start.topic_partition
                    and rec.topic_partition != start.topic_partition
                )
            ):
                if rec is not start:
                    self._handed_run(start, prev.offset)
                start = rec
            prev = rec
        self._handed_run(start, prev.offset)

    def _handed_run(self, start: Record, last: int) -> None:
        owner = start._owner
        delivery = owner.delivery if type(owner) is SessionOwner else None
        self.machine.deliver(start.topic_partition, start.offset, last, delivery)

    def holds(self, record: Record) -> bool:
        """Whether ``record`` is still this consumer's to answer (its lock not lost)."""
        owner = owner_of(record)
        delivery = owner.delivery if owner is not None else None
        return self.machine.holds(record.topic_partition, record.offset, delivery)

    # -- deliveries ---------------------------------------------------------------------------

    def deliver(self, e: Deliver) -> None:
        """Buffer an answer's records for the application (the machine's Deliver)."""
        chunk = chunk_of(e, self.owner)
        if e.eager:
            # Records past the dead-letter limit: decode at once, so they reach the router.
            live: list[Record] = []
            while (d := self.decode(chunk)) is not None:
                live.extend(d.records)
                chunk.decoded += d.nbytes
            if not live:
                return
            chunk.records = live
        self.buffer.push(chunk)

    def decode(self, chunk: Chunk, limit: int | None = None) -> Decoded[Record] | None:
        """Decode a chunk's next batch (or its next ``limit`` records) and tell the
        machine what it found (the buffer calls this as the application reaches them)."""
        machine = self.machine
        d = decode_chunk(chunk, machine.dead_letter_limit, self.clock_offset, limit)
        if d is not None and (d.gaps or d.release or d.error is not None or d.dead):
            machine.batch_decoded(chunk.tag, chunk.intake.tp, chunk.delivery, d)
            self.settle()
        return d

    def admit(self, chunk: Chunk) -> bool:
        """Whether the machine lets ``chunk`` into the buffer (not while unsubscribed)."""
        machine = self.machine
        first = chunk.next_offset()
        if first is None:
            return machine.subscribed
        admitted = machine.admit(
            chunk.tag, chunk.intake.tp, chunk.delivery, first, chunk.last_offset()
        )
        if machine.effects:
            self.settle()
        return admitted

    def dropped(self, chunk: Chunk, first: int) -> None:
        """The buffer dropped ``chunk`` from ``first`` on without handing it out."""
        self.machine.forget(chunk.intake.tp, chunk.delivery, first, chunk.last_offset())


def _batch_factory(
    chunk: Chunk, batch: RecordBatch, clock_offset: Callable[[], float | None]
) -> RecordFactory:
    """The chunk's record factory with ``batch``'s :class:`BatchInfo` bound.

    Once per batch, so nothing is added per record but one positional argument. The
    batches of one answer nearly always share leader epoch and timestamp type: the info
    and the bound factory are then reused, and the clocks are read once per chunk.
    """
    epoch = batch.partition_leader_epoch
    leader_epoch = epoch if epoch >= 0 else None
    ts_type = batch.timestamp_type
    info = chunk.batch_info
    bound = chunk.batch_factory
    if (
        info is None
        or bound is None
        or info.leader_epoch != leader_epoch
        or info.timestamp_type is not ts_type
    ):
        offset = info.clock_offset if info is not None else clock_offset()
        info = chunk.batch_info = BatchInfo(leader_epoch, ts_type, offset)
        # One Python frame per record (sharecon.record.record_factory).
        bound = chunk.batch_factory = chunk.factory(info)
    return bound
