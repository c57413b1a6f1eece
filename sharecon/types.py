"""Small value types shared by every layer: acknowledgement types, partitions, headers.

Pure data; importable from any layer (the sans-I/O ones included).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["ZERO_UUID", "AckType", "Header", "TopicIdPartition", "TopicPartition"]

#: Kafka's "no topic id" value (all zero bits).
ZERO_UUID = uuid.UUID(int=0)


class AckType(IntEnum):
    """How a consumer answers for one acquired record (the wire's AcknowledgeTypes values)."""

    #: The offset holds no deliverable record (compacted away, control batch); client-internal.
    GAP = 0
    #: Processed: the record is done.
    ACCEPT = 1
    #: Give it back: the record is redelivered (the delivery count goes up).
    RELEASE = 2
    #: Poison: the record is archived and never delivered again.
    REJECT = 3
    #: Keep the lock: extend the acquisition lock (ShareFetch/ShareAcknowledge v2, Kafka 4.2+).
    RENEW = 4


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """A partition named by topic name."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition named by topic id, as the share APIs name it (the name kept when known)."""

    topic_id: uuid.UUID
    partition: int
    # The name is a convenience for messages and logs; identity is (topic_id, partition).
    topic: str | None = field(default=None, compare=False)
    # Identity as plain ints, and its hash, computed once: the ledger looks a partition up
    # once per record, with an equal instance from another fetch answer, and the generated
    # methods (a tuple, then uuid.UUID.__hash__ / __eq__ in Python) cost ~0.6 us a lookup.
    _key: tuple[int, int] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Frozen: set through object. UUID hashes as its int, so the hash is the one the
        # generated __hash__ gave.
        key = (self.topic_id.int, self.partition)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        # As the generated one: equal when the class, topic id and partition are.
        if isinstance(other, TopicIdPartition) and other.__class__ is self.__class__:
            return self._key == other._key
        return NotImplemented


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and raw (possibly null) value."""

    key: str
    value: bytes | None
