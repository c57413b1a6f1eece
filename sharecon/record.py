"""The record a share consumer delivers, and the answers it takes.

One :class:`Record` is allocated per delivered record, straight from the batch decoder
(no intermediate object), so the class is slotted and its constructor does nothing else.
What the records of one batch share (leader epoch, timestamp type, the wall clock's
offset) sits in one :class:`BatchInfo` they all point to, and values derived from a
record's fields (sizes, the wall-clock lock deadline) are computed when asked for.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol

from sharecon.protocol.records import TimestampType
from sharecon.types import AckType

if TYPE_CHECKING:
    from sharecon.protocol.records import Headers
    from sharecon.types import TopicIdPartition

__all__ = ["BatchInfo", "Record", "TimestampType"]


class BatchInfo:
    """What every record of one record batch shares (one object per batch, not per record).

    :ivar leader_epoch: the batch's PartitionLeaderEpoch: the partition leader's epoch
        when the batch was written, or ``None`` if the batch does not say (-1).
    :ivar timestamp_type: :attr:`TimestampType.CREATE_TIME` (the producer's clock) or
        :attr:`TimestampType.LOG_APPEND_TIME` (the broker's), from the batch attributes.
    :ivar clock_offset: wall-clock seconds (Unix epoch) minus :func:`anyio.current_time`
        when the batch was decoded, to turn a lock deadline into a wall-clock time; ``None``
        if unknown.
    """

    __slots__ = ("clock_offset", "leader_epoch", "timestamp_type")

    def __init__(
        self, leader_epoch: int | None, timestamp_type: TimestampType, clock_offset: float | None
    ) -> None:
        self.leader_epoch = leader_epoch
        self.timestamp_type = timestamp_type
        self.clock_offset = clock_offset

    def __repr__(self) -> str:
        return (
            f"BatchInfo(leader_epoch={self.leader_epoch}, timestamp_type="
            f"{self.timestamp_type.name}, clock_offset={self.clock_offset})"
        )


class _Acknowledger(Protocol):
    def acknowledge(self, record: Record, ack: AckType) -> None: ...


class Record:
    """A record acquired by this consumer from a share group.

    The broker holds it locked for this consumer until :attr:`lock_deadline`; answer it
    with :meth:`accept`, :meth:`release`, :meth:`reject` or :meth:`renew` (or let the
    consumer's implicit mode accept it when the iteration moves on).

    :ivar topic: topic name.
    :ivar partition: partition index.
    :ivar offset: offset in the partition.
    :ivar timestamp: milliseconds since the Unix epoch (create or log-append time).
    :ivar key: the key bytes, or ``None``.
    :ivar value: the value bytes, or ``None`` (a tombstone).
    :ivar headers: ``(key, value)`` pairs, in the order the producer sent them.
    :ivar delivery_count: how many times this record has been delivered (1 the first time).
    :ivar lock_deadline: when the acquisition lock ends, as :func:`anyio.current_time`
        (monotonic seconds), or ``None`` if the broker did not say (:attr:`lock_expires_at`
        is the same moment on the wall clock).

    Computed when read: :attr:`timestamp_type`, :attr:`leader_epoch`,
    :attr:`serialized_key_size`, :attr:`serialized_value_size`, :attr:`lock_expires_at`.
    """

    __slots__ = (
        "_batch",
        "_owner",
        "delivery_count",
        "headers",
        "key",
        "lock_deadline",
        "offset",
        "partition",
        "timestamp",
        "topic",
        "topic_partition",
        "value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_partition: TopicIdPartition,
        owner: _Acknowledger | None,
        lock_deadline: float | None,
        batch: BatchInfo | None,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_partition = topic_partition
        self._owner = owner
        self.lock_deadline = lock_deadline
        self._batch = batch
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.delivery_count = 1

    def __repr__(self) -> str:
        return (
            f"Record(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"delivery_count={self.delivery_count}, key={self.key!r:.40}, "
            f"value={self.value!r:.60})"
        )

    @property
    def timestamp_type(self) -> TimestampType:
        """Whether :attr:`timestamp` is the producer's create time or the broker's
        log-append time (the topic's ``message.timestamp.type``), from the batch attributes.
        ``CREATE_TIME`` for a record built without batch information."""
        batch = self._batch
        return TimestampType.CREATE_TIME if batch is None else batch.timestamp_type

    @property
    def leader_epoch(self) -> int | None:
        """The partition leader's epoch when the record was written (the batch's
        PartitionLeaderEpoch), or ``None`` if unknown."""
        batch = self._batch
        return None if batch is None else batch.leader_epoch

    @property
    def serialized_key_size(self) -> int:
        """The key's size in bytes, or -1 for a null key (as Java's ``ConsumerRecord``)."""
        key = self.key
        return -1 if key is None else len(key)

    @property
    def serialized_value_size(self) -> int:
        """The value's size in bytes, or -1 for a null value (a tombstone)."""
        value = self.value
        return -1 if value is None else len(value)

    @property
    def lock_expires_at(self) -> datetime | None:
        """When the acquisition lock ends on the wall clock (an aware UTC ``datetime``), or
        ``None`` if unknown. It follows :attr:`lock_deadline`, renewals included.

        The broker's clock decides; this is the consumer's estimate, like
        :attr:`lock_deadline`, and a wall-clock change (NTP) after the record was fetched
        is not reflected. To know how long is left, prefer
        ``record.lock_deadline - anyio.current_time()``.
        """
        deadline = self.lock_deadline
        batch = self._batch
        if deadline is None or batch is None or batch.clock_offset is None:
            return None
        return datetime.fromtimestamp(deadline + batch.clock_offset, tz=timezone.utc)

    def header(self, key: str) -> bytes | None:
        """The value of the last header named ``key`` (``None`` if absent or null)."""
        for k, v in reversed(self.headers):
            if k == key:
                return v
        return None

    def _ack(self, ack: AckType) -> None:
        if self._owner is None:
            raise RuntimeError(f"{self!r} is not owned by a consumer")
        self._owner.acknowledge(self, ack)

    def accept(self) -> None:
        """Processed: the broker marks the record done."""
        self._ack(AckType.ACCEPT)

    def release(self) -> None:
        """Give it back: the broker delivers it again (its delivery count goes up)."""
        self._ack(AckType.RELEASE)

    def reject(self) -> None:
        """Poison: the broker archives the record; it is never delivered again."""
        self._ack(AckType.REJECT)

    def renew(self) -> None:
        """Keep the lock: extend the acquisition lock (Kafka 4.2+).

        The record still needs an answer later: :meth:`accept`, :meth:`release` or
        :meth:`reject` (or, in implicit mode, the accept when the iteration moves on).
        """
        self._ack(AckType.RENEW)
