"""The record a share consumer delivers, and the answers it takes.

One :class:`Record` is allocated per delivered record, straight from the batch decoder
(no intermediate object), so the class is slotted and its constructor does nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sharecon.types import AckType

if TYPE_CHECKING:
    from sharecon.protocol.records import Headers
    from sharecon.types import TopicIdPartition

__all__ = ["Record"]


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
        (monotonic seconds), or ``None`` if the broker did not say.
    """

    __slots__ = (
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
