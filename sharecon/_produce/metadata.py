"""The public result of a delivered record: :class:`RecordMetadata` (re-exported by
:mod:`sharecon.producer`).

Plain Python in both builds: :func:`new_metadata` fills the frozen dataclass through its
slot descriptors, which a compiled class would not have.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RecordMetadata", "new_metadata"]


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record was written, once the broker acknowledged it.

    :ivar topic: the topic.
    :ivar partition: the partition.
    :ivar offset: the record's offset in the partition (-1 in the rare case the broker
        acknowledged a duplicate without saying where the original went).
    :ivar timestamp: milliseconds since the epoch: the broker's append time when the topic
        uses ``LogAppendTime``, else the record's create time.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


# The public home of the class is sharecon.producer (docs, pickles, reprs name it there).
RecordMetadata.__module__ = "sharecon.producer"

_new = object.__new__
_set_topic = RecordMetadata.__dict__["topic"].__set__
_set_partition = RecordMetadata.__dict__["partition"].__set__
_set_offset = RecordMetadata.__dict__["offset"].__set__
_set_timestamp = RecordMetadata.__dict__["timestamp"].__set__


def new_metadata(topic: str, partition: int, offset: int, timestamp: int) -> RecordMetadata:
    """``RecordMetadata(topic, partition, offset, timestamp)`` made through its slots: a
    frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field, which
    costs about twice as much, once per record of every ``send_batch``."""
    meta: RecordMetadata = _new(RecordMetadata)
    _set_topic(meta, topic)
    _set_partition(meta, partition)
    _set_offset(meta, offset)
    _set_timestamp(meta, timestamp)
    return meta
