"""How the machine's deliveries become the application's records: who a record calls
back into, and the factories the buffer's decoder calls per record.

Nothing here decides anything (the machine, :mod:`sharecon._share.machine`, does): a
:class:`~sharecon._share.effects.Deliver` becomes a buffered :class:`Chunk`, and a batch
of it becomes records when the application reaches it.

Rules of this module:

1. Per-record cost is one call: the record factory is bound once per chunk (topic,
   partition, owner, lock deadline) and once per batch (:class:`BatchInfo`).
2. A record knows the delivery it came from (:class:`SessionOwner`), so its answer never
   lands on a newer delivery of the same offset.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon._consumer.buffer import Chunk
from sharecon.record import BatchInfo, Record

if TYPE_CHECKING:
    from sharecon._consumer.buffer import RecordFactory
    from sharecon._share.effects import Deliver
    from sharecon._share.intake import Decoded
    from sharecon._share.ledger import Delivery
    from sharecon._share.session import SessionTag
    from sharecon.protocol.records import RecordBatch
    from sharecon.types import AckType

__all__ = ["Acknowledger", "SessionOwner", "chunk_of", "decode_chunk", "owner_of"]


class Acknowledger(Protocol):
    """Where :class:`~sharecon.record.Record` answers go."""

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Apply ``ack`` to ``record``."""


class SessionOwner:
    """What the records of one delivery call back into: the consumer, plus the session and
    the ledger :data:`~sharecon._share.ledger.Delivery` they came from (rule 2)."""

    __slots__ = ("consumer", "delivery", "tag")

    def __init__(self, consumer: Acknowledger, tag: SessionTag, delivery: Delivery) -> None:
        self.consumer = consumer
        self.tag = tag
        self.delivery = delivery

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Pass the answer on to the consumer."""
        self.consumer.acknowledge(record, ack)


def owner_of(record: Record) -> SessionOwner | None:
    """The delivery a record came from (``None`` for records built by hand)."""
    owner = record._owner
    return owner if type(owner) is SessionOwner else None


def chunk_of(e: Deliver, consumer: Acknowledger | None) -> Chunk:
    """The buffered form of the machine's :class:`~sharecon._share.effects.Deliver`, its
    records owned by ``consumer`` (rule 1)."""
    tp = e.tp
    owner = SessionOwner(consumer, e.tag, e.delivery) if consumer is not None else None
    factory = partial(Record, tp.topic or str(tp.topic_id), tp.partition, tp, owner, e.deadline)
    return Chunk(e.intake, e.tag, e.deadline, factory, e.delivery)


def decode_chunk(chunk: Chunk, dead_letter_limit: int | None) -> Decoded[Record] | None:
    """Decode a buffered chunk's next batch (``None``: none left); the caller hands the
    result to the machine (``ShareMachine.batch_decoded``)."""
    intake = chunk.intake
    batch = intake.next_batch()
    if batch is None:
        return None
    return intake.decode_next(_batch_factory(chunk, batch), dead_letter_limit=dead_letter_limit)


def _batch_factory(chunk: Chunk, batch: RecordBatch) -> RecordFactory:
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
        offset = info.clock_offset if info is not None else time.time() - anyio.current_time()
        info = chunk.batch_info = BatchInfo(leader_epoch, ts_type, offset)
        # partial of a partial is flattened into one: a record costs one call, as before.
        bound = chunk.batch_factory = partial(chunk.factory, info)
    return bound
