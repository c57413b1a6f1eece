"""One :class:`~sharecon.types.TopicIdPartition` per partition the answers name, not
one per partition per answer.

Rules of this module:

1. Making a ``TopicIdPartition`` costs one to three microseconds (its generated
   ``__init__``, then ``__post_init__`` computing its key and hash through
   ``uuid.UUID.int``), and each ShareFetch answer names each of its partitions several
   times (its size, its acknowledgement code, its records). :func:`topic_partition`
   hands back the object made the first time: two dict lookups, keyed by the topic id's
   ``int`` (a ``uuid.UUID`` hashes and compares in Python, two calls a lookup).
2. An object is reused only under the same name (``tp.topic``), since that is the name
   records and messages show; another name makes, and keeps, a new one. Either is equal
   to the other: identity is ``(topic_id, partition)``.
3. Bounded: past :data:`MAX_KEPT` partitions the table starts again, so no stream of
   topics grows it for ever. Shared by every consumer of the process (objects are
   immutable; a lost race only makes one object twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    import uuid

__all__ = ["MAX_KEPT", "topic_partition"]

#: Partitions kept before the table starts again (rule 3).
MAX_KEPT = 1 << 16

_by_topic: dict[int, dict[int, TopicIdPartition]] = {}  # by topic_id.int (rule 1)
_kept = [0]


def topic_partition(topic_id: uuid.UUID, partition: int, name: str | None) -> TopicIdPartition:
    """``TopicIdPartition(topic_id, partition, name)``, the same object each time (rule 1)."""
    key = topic_id.int
    parts = _by_topic.get(key)
    if parts is not None:
        tp = parts.get(partition)
        if tp is not None and tp.topic == name:
            return tp
    tp = TopicIdPartition(topic_id, partition, name)
    if _kept[0] >= MAX_KEPT:
        _by_topic.clear()
        _kept[0] = 0
        parts = None
    if parts is None:
        parts = _by_topic.setdefault(key, {})
    if partition not in parts:
        _kept[0] += 1
    parts[partition] = tp
    return tp
