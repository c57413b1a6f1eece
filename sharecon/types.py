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


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and raw (possibly null) value."""

    key: str
    value: bytes | None
