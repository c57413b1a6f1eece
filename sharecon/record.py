"""The record a share consumer delivers, and the answers it takes.

One :class:`Record` is allocated per delivered record, straight from the batch decoder
(no intermediate object), so the class is slotted and its constructor does nothing else.
What the records of one batch share (leader epoch, timestamp type, the wall clock's
offset) sits in one :class:`BatchInfo` they all point to, and values derived from a
record's fields (sizes, the wall-clock lock deadline) are computed when asked for.

``Record[K, V]`` is generic in the key and value types a consumer's deserializers produce
(``bytes`` when there are none). For tests of code that handles records,
:meth:`Record.build` makes one without a consumer, and :class:`RecordedAcks` keeps the
answers it is given.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from sharecon import _native, errors
from sharecon.protocol.records import TimestampType
from sharecon.types import ZERO_UUID, AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from sharecon.protocol.records import Headers

__all__ = [
    "Acknowledger",
    "BatchInfo",
    "K",
    "Record",
    "RecordedAcks",
    "RetryLater",
    "TimestampType",
    "V",
]

#: The type of a record's key after the consumer's ``key_deserializer`` (default ``bytes``).
K = TypeVar("K", default=bytes)
#: The type of a record's value after the consumer's ``value_deserializer`` (default ``bytes``).
V = TypeVar("V", default=bytes)


_ACCEPT = AckType.ACCEPT  # a global, not an attribute of the enum class, per answer


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


class Acknowledger(Protocol):
    """Where a record's answers go: the consumer that delivered it, or, for a record made
    with :meth:`Record.build`, a :class:`RecordedAcks` (or any object like it)."""

    def acknowledge(self, record: Record[Any, Any], ack: AckType) -> None:
        """Take ``ack`` as the answer for ``record``."""


class Record(Generic[K, V]):
    """A record acquired by this consumer from a share group.

    The broker holds it locked for this consumer until :attr:`lock_deadline`; answer it
    with :meth:`accept`, :meth:`release`, :meth:`reject` or :meth:`renew` (or let the
    consumer's implicit mode accept it when the iteration moves on).

    ``Record[K, V]``: the key is a ``K`` and the value a ``V`` as the consumer's
    ``key_deserializer`` / ``value_deserializer`` made them (both ``bytes`` without
    deserializers; a null key or value is ``None`` either way).
    :attr:`serialized_key` and :attr:`serialized_value` are the bytes as fetched.

    :ivar topic: topic name.
    :ivar partition: partition index.
    :ivar offset: offset in the partition.
    :ivar timestamp: milliseconds since the Unix epoch (create or log-append time).
    :ivar key: the key (bytes, or what ``key_deserializer`` made of them), or ``None``.
    :ivar value: the value (bytes, or what ``value_deserializer`` made of them), or
        ``None`` (a tombstone).
    :ivar headers: ``(key, value)`` pairs, in the order the producer sent them.
    :ivar delivery_count: how many times this record has been delivered (1 the first time).
    :ivar lock_deadline: when the acquisition lock ends, as :func:`anyio.current_time`
        (monotonic seconds), or ``None`` if the broker did not say (:attr:`lock_expires_at`
        is the same moment on the wall clock).

    Computed when read: :attr:`timestamp_type`, :attr:`leader_epoch`,
    :attr:`serialized_key`, :attr:`serialized_value`, :attr:`serialized_key_size`,
    :attr:`serialized_value_size`, :attr:`lock_expires_at`.
    """

    __slots__ = (
        "_batch",
        "_owner",
        # (key bytes, value bytes) as fetched; set only once deserializers replaced
        # key/value, so a consumer without deserializers never touches it.
        "_serialized",
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

    _serialized: tuple[bytes | None, bytes | None]

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_partition: TopicIdPartition,
        owner: Acknowledger | None,
        lock_deadline: float | None,
        batch: BatchInfo | None,
        offset: int,
        timestamp: int,
        key: K | None,
        value: V | None,
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
    def serialized_key(self) -> bytes | None:
        """The key's bytes as fetched, before any ``key_deserializer`` (``None`` if null)."""
        try:
            return self._serialized[0]
        except AttributeError:  # not deserialized: the key is the bytes
            return _as_bytes(self.key)

    @property
    def serialized_value(self) -> bytes | None:
        """The value's bytes as fetched, before any ``value_deserializer`` (``None`` for a
        tombstone). A dead-letter copy carries these bytes."""
        try:
            return self._serialized[1]
        except AttributeError:  # not deserialized: the value is the bytes
            return _as_bytes(self.value)

    @property
    def serialized_key_size(self) -> int:
        """The key's size in bytes, or -1 for a null key (as Java's ``ConsumerRecord``)."""
        key = self.serialized_key
        return -1 if key is None else len(key)

    @property
    def serialized_value_size(self) -> int:
        """The value's size in bytes, or -1 for a null value (a tombstone)."""
        value = self.serialized_value
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
            raise errors.InvalidRecordStateError(
                f"{self.topic}-{self.partition} offset {self.offset} was built without a "
                "consumer; pass acks=RecordedAcks() to Record.build() to answer it"
            )
        self._owner.acknowledge(self, ack)

    def accept(self) -> None:
        """Processed: the broker marks the record done."""
        owner = self._owner  # _ack(), inlined: explicit mode calls this once per record
        if owner is None:
            self._ack(_ACCEPT)  # raises: built without a consumer
        else:
            owner.acknowledge(self, _ACCEPT)

    def release(self, delay: float | None = None) -> None:
        """Give it back: the broker delivers it again (its delivery count goes up).

        With ``delay`` (seconds), a visibility timeout: the record stays locked to this
        consumer, its lock renewed, for ``delay`` seconds, and is released then, so no
        member gets it again before (Kafka 4.2+, as :meth:`renew`). It is one delivery,
        as an immediate release. A consumer that closes releases it at once; one that
        dies leaves it to come back when its lock ends.

        :raises ConfigError: ``delay`` is not a finite number of seconds >= 0.
        :raises UnsupportedVersionError: ``delay`` against a broker older than Kafka 4.2.
        """
        if delay is None:
            self._ack(AckType.RELEASE)
            return
        delay = check_delay(delay)
        owner = self._owner
        release_later = getattr(owner, "release_later", None)
        if release_later is None:
            if owner is None:
                self._ack(AckType.RELEASE)  # raises: built without a consumer
            raise errors.InvalidRecordStateError(
                f"{self.topic}-{self.partition} offset {self.offset}: its acknowledger "
                f"{type(owner).__name__} takes no delayed release"
            )
        release_later(self, delay)

    def reject(self) -> None:
        """Poison: the broker archives the record; it is never delivered again."""
        self._ack(AckType.REJECT)

    def renew(self) -> None:
        """Keep the lock: extend the acquisition lock (Kafka 4.2+).

        The record still needs an answer later: :meth:`accept`, :meth:`release` or
        :meth:`reject` (or, in implicit mode, the accept when the iteration moves on).
        """
        self._ack(AckType.RENEW)

    # -- records for tests ------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        topic: str,
        value: V | None,
        *,
        key: K | None = None,
        partition: int = 0,
        offset: int = 0,
        headers: Iterable[tuple[str, bytes | None]] = (),
        delivery_count: int = 1,
        timestamp: int = -1,
        lock_deadline: float | None = None,
        acks: Acknowledger | None = None,
    ) -> Record[K, V]:
        """A record made by hand, for unit tests of code that handles records.

        ::

            acks = RecordedAcks()
            record = Record.build("orders", {"id": 7}, key="customer-7", acks=acks)
            await handle(record)                  # the code under test
            assert acks.answer(record) is AckType.ACCEPT

        Its answers (:meth:`accept`, :meth:`release`, :meth:`reject`, :meth:`renew`) go
        to ``acks``, which checks them as a consumer does (a second final answer raises
        :class:`~sharecon.errors.InvalidRecordStateError`). Without ``acks`` an answer
        raises that error, saying the record has no consumer.

        :param value: the value, already deserialized if your code expects that.
        :param timestamp: milliseconds since the Unix epoch (default -1, Kafka's "no
            timestamp", so a built record is the same on every run).
        :param lock_deadline: as :attr:`lock_deadline` (``anyio.current_time()`` seconds).
        :raises ConfigError: a negative partition or offset, or a delivery count below 1.
        """
        if not isinstance(topic, str) or not topic:
            raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
        for name, number, least in (
            ("partition", partition, 0),
            ("offset", offset, 0),
            ("delivery_count", delivery_count, 1),
        ):
            if not isinstance(number, int) or isinstance(number, bool) or number < least:
                raise errors.ConfigError(f"{name} must be an int >= {least}, not {number!r}")
        record: Record[K, V] = cls(
            topic,
            partition,
            TopicIdPartition(ZERO_UUID, partition, topic),
            acks,
            lock_deadline,
            None,
            offset,
            timestamp,
            key,
            value,
            tuple(headers),
        )
        record.delivery_count = delivery_count
        return record


def record_factory(
    topic: str,
    partition: int,
    topic_partition: TopicIdPartition,
    owner: Acknowledger | None,
    lock_deadline: float | None,
    batch: BatchInfo | None,
) -> Callable[[int, int, bytes | None, bytes | None, Headers], Record[Any, Any]]:
    """What the batch decoder calls per record of one batch of one delivery:
    ``make(offset, timestamp, key, value, headers)`` gives the record
    ``Record(topic, partition, topic_partition, owner, lock_deadline, batch, offset,
    timestamp, key, value, headers)`` would.

    The per-record path of every consumer. In the compiled build ``make`` is a
    ``RecordMaker`` of ``sharecon/_speedups.c``, which fills the new record's slots in C;
    elsewhere it is :func:`_python_factory`'s one Python frame, which fills the slots of a
    bare instance (instead of ``type.__call__`` running :meth:`Record.__init__` with eleven
    arguments; both measured in docs/performance.md).
    """
    if _RECORD_LAYOUT is not None:
        assert _native.RecordMakerType is not None
        return _native.RecordMakerType(
            _RECORD_LAYOUT, topic, partition, topic_partition, owner, lock_deadline, batch
        )
    return _python_factory(topic, partition, topic_partition, owner, lock_deadline, batch)


def _python_factory(
    topic: str,
    partition: int,
    topic_partition: TopicIdPartition,
    owner: Acknowledger | None,
    lock_deadline: float | None,
    batch: BatchInfo | None,
) -> Callable[[int, int, bytes | None, bytes | None, Headers], Record[Any, Any]]:
    """:func:`record_factory` in Python: the pure build's, and the reference the C maker
    is tested against (``tests/test_record_build.py``). Kept in this module, which the
    compiled build leaves Python, so the slot stores are the interpreter's specialised
    ones."""
    new = object.__new__
    cls = Record

    def make(
        offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> Record[Any, Any]:
        rec: Record[Any, Any] = new(cls)
        rec.topic = topic
        rec.partition = partition
        rec.topic_partition = topic_partition
        rec._owner = owner
        rec.lock_deadline = lock_deadline
        rec._batch = batch
        rec.offset = offset
        rec.timestamp = timestamp
        rec.key = key
        rec.value = value
        rec.headers = headers
        rec.delivery_count = 1
        return rec

    return make


#: Where :class:`Record` keeps the slots the C maker fills (``None``: no C maker).
_RECORD_LAYOUT = _native.RecordLayoutType(Record) if _native.RecordLayoutType is not None else None


class RetryLater(Exception):
    """A :meth:`ShareConsumer.process <sharecon.consumer.ShareConsumer.process>` handler's
    answer: release the record with a delay, as ``record.release(delay=delay)``.

    Raise it, or return it, from the handler::

        async def handle(record):
            if not ready(record):
                raise RetryLater(30.0)   # or: return RetryLater(30.0)

    :param delay: seconds before the record is released (a finite number >= 0).
    :raises ConfigError: ``delay`` is not a finite number of seconds >= 0.
    """

    def __init__(self, delay: float) -> None:
        self.delay = check_delay(delay)
        super().__init__(f"retry in {self.delay:g} s")


def check_delay(delay: object) -> float:
    """``delay`` as seconds, or a :class:`~sharecon.errors.ConfigError` naming what was wrong.

    :raises ConfigError: not a real number, negative, NaN or infinite.
    """
    if isinstance(delay, bool) or not isinstance(delay, (int, float)):
        raise errors.ConfigError(f"delay must be a number of seconds, not {delay!r}")
    seconds = float(delay)
    if not math.isfinite(seconds) or seconds < 0:
        raise errors.ConfigError(f"delay must be a finite number of seconds >= 0, not {delay!r}")
    return seconds


def _as_bytes(data: object) -> bytes | None:
    # A record built by hand (Record.build) may hold anything: only bytes are "serialized".
    return data if data is None or isinstance(data, bytes) else None


class RecordedAcks:
    """Keeps the answers given to records made with :meth:`Record.build` (``acks=``).

    It checks them as a consumer does: ACCEPT, RELEASE and REJECT are final, and a second
    final answer for the same record raises :class:`~sharecon.errors.InvalidRecordStateError`;
    RENEW may come any number of times before the final answer.

    :ivar answers: every answer in the order given, as ``(record, ack)`` pairs.
    :ivar delays: the delays of ``release(delay=...)`` answers, by ``id(record)``
        (:meth:`delay` reads them).
    """

    __slots__ = ("_final", "answers", "delays")

    def __init__(self) -> None:
        self.answers: list[tuple[Record[Any, Any], AckType]] = []
        #: ``id(record)`` -> seconds, for records released with a delay.
        self.delays: dict[int, float] = {}
        self._final: dict[int, AckType] = {}

    def acknowledge(self, record: Record[Any, Any], ack: AckType) -> None:
        """Take one answer for ``record`` (what its ``accept()``, ``release()``,
        ``reject()`` and ``renew()`` call).

        :raises InvalidRecordStateError: ``record`` already has a final answer.
        """
        done = self._final.get(id(record))
        if done is not None:
            raise errors.InvalidRecordStateError(
                f"{record.topic}-{record.partition} offset {record.offset} was already "
                f"answered with {done.name}; cannot {ack.name.lower()} it again"
            )
        self.answers.append((record, ack))
        if ack is not AckType.RENEW:
            self._final[id(record)] = ack

    def release_later(self, record: Record[Any, Any], delay: float) -> None:
        """Take ``record.release(delay=...)``: a RELEASE answer, its delay kept in
        :attr:`delays`.

        :raises ConfigError: ``delay`` is not a finite number of seconds >= 0.
        :raises InvalidRecordStateError: ``record`` already has a final answer.
        """
        seconds = check_delay(delay)
        self.acknowledge(record, AckType.RELEASE)
        self.delays[id(record)] = seconds

    def delay(self, record: Record[Any, Any]) -> float | None:
        """The delay ``record`` was released with (``None``: not released with a delay)."""
        return self.delays.get(id(record))

    def answer(self, record: Record[Any, Any]) -> AckType | None:
        """The final answer given for ``record`` (ACCEPT, RELEASE or REJECT), or ``None``."""
        return self._final.get(id(record))

    def renewals(self, record: Record[Any, Any]) -> int:
        """How many times ``record`` was renewed."""
        return sum(1 for r, ack in self.answers if r is record and ack is AckType.RENEW)

    def __len__(self) -> int:
        return len(self.answers)

    def __iter__(self) -> Iterator[tuple[Record[Any, Any], AckType]]:
        return iter(self.answers)
