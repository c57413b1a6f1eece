"""The records bound for one partition (:class:`Batch`) and each partition's queue and
sequence state (:class:`PartitionQueue`)."""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

from sharecon import errors
from sharecon.protocol.records import BatchBuilder

from .inputs import BATCH_OVERHEAD
from .metadata import RecordMetadata, new_metadata

_new: Any = object.__new__
_set_topic: Any = RecordMetadata.__dict__["topic"].__set__
_set_partition: Any = RecordMetadata.__dict__["partition"].__set__
_set_offset: Any = RecordMetadata.__dict__["offset"].__set__
_set_timestamp: Any = RecordMetadata.__dict__["timestamp"].__set__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["Batch", "PartitionQueue", "add_to_runs", "outcomes_of"]


class Batch:
    """Records bound for one partition, sent (and retried) as one RecordBatch.

    Its outcome is set once (:attr:`done`); whoever waits for it puts an object with a
    ``set()`` method in :attr:`waiter` (the I/O layer's event), which is set then.
    """

    __slots__ = (
        "ambiguous",
        "attempts",
        "base_offset",
        "base_seq",
        "builder",
        "callbacks",
        "children",
        "created",
        "deadline",
        "done",
        "encoded",
        "error",
        "last_error",
        "log_append_time",
        "parent",
        "partition",
        "sealed",
        "size",
        "timestamps",
        "topic",
        "unclaimed",
        "waiter",
    )

    def __init__(self, topic: str, partition: int, created: float, deadline: float) -> None:
        self.topic = topic
        self.partition = partition
        self.created = created
        self.deadline = deadline
        # The records, encoded as they are appended (None once the batch is done); and
        # each record's timestamp, for its RecordMetadata (its count is the record count).
        self.builder: BatchBuilder | None = BatchBuilder()
        self.timestamps: list[int] = []
        self.size = BATCH_OVERHEAD
        self.sealed = False
        self.encoded: bytes | None = None
        self.base_seq = -1
        self.attempts = 0
        # True after a send whose outcome is unknown (lost connection, timeout): the broker
        # may have written it, so its sequence number must not be handed to other records.
        self.ambiguous = False
        self.last_error: errors.KafkaError | None = None
        self.done = False
        # What the I/O layer waits on (its set() is called once the batch is done).
        self.waiter: Any = None
        self.base_offset = -1
        self.log_append_time = -1
        self.error: errors.KafkaError | None = None
        # After a split, the two halves (the callers still wait on this batch).
        self.children: tuple[Batch, Batch] | None = None
        self.parent: Batch | None = None
        # Records queued by send() whose future nobody has awaited yet: if the batch fails
        # while this is not 0, no caller is sure to hear of it, so it is logged.
        self.unclaimed = 0
        # RecordFuture.add_done_callback(): (future, callback), run once, when done.
        self.callbacks: list[tuple[Any, Callable[[Any], object]]] | None = None

    def __repr__(self) -> str:
        return f"<batch {self.topic}-{self.partition} {len(self.timestamps)} records>"

    def root(self) -> Batch:
        """The batch the records were first appended to (before any split)."""
        batch = self
        while batch.parent is not None:
            batch = batch.parent
        return batch

    def outcome(self, index: int) -> RecordMetadata | errors.KafkaError:
        """The result for the record at ``index`` (call after :attr:`done` is set)."""
        if self.children is not None:
            first, second = self.children
            if index < len(first.timestamps):
                return first.outcome(index)
            return second.outcome(index - len(first.timestamps))
        if self.error is not None:
            return self.error
        ts = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return new_metadata(self.topic, self.partition, offset, ts)

    def outcomes(self, start: int, stop: int) -> list[RecordMetadata | errors.KafkaError]:
        """:meth:`outcome` of the records ``start`` to ``stop - 1``, in one pass (for
        ``send_batch``, which asks for every record of a batch)."""
        if self.children is not None:
            first, second = self.children
            cut = len(first.timestamps)
            both = first.outcomes(start, min(stop, cut)) if start < cut else []
            if stop > cut:
                both += second.outcomes(max(start, cut) - cut, stop - cut)
            return both
        if self.error is not None:
            return [self.error] * (stop - start)
        topic, partition = self.topic, self.partition
        base = self.base_offset
        if base < 0:
            offsets: Iterable[int] = itertools.repeat(-1, stop - start)
        else:
            offsets = range(base + start, base + stop)
        if self.log_append_time >= 0:
            stamps: Iterable[int] = itertools.repeat(self.log_append_time, stop - start)
        else:
            stamps = self.timestamps[start:stop]
        # new_metadata inlined: in the compiled build these are calls of C slots, with no
        # Python frame per record.
        out: list[RecordMetadata | errors.KafkaError] = []
        for o, t in zip(offsets, stamps, strict=True):
            meta = _new(RecordMetadata)
            _set_topic(meta, topic)
            _set_partition(meta, partition)
            _set_offset(meta, o)
            _set_timestamp(meta, t)
            out.append(meta)
        return out


def add_to_runs(runs: list[list[Any]], batch: Batch) -> None:
    """Note that the last record of ``batch`` was placed: ``runs`` holds where a call's
    records went, as ``[batch, first index, index after the last]`` runs."""
    index = len(batch.timestamps) - 1
    if runs:
        last = runs[-1]
        if last[0] is batch and last[2] == index:
            last[2] = index + 1
            return
    runs.append([batch, index, index + 1])


def outcomes_of(
    runs: list[list[Any]], *, raise_first: bool
) -> list[RecordMetadata | errors.KafkaError]:
    """Every record's outcome of ``runs`` (see :func:`add_to_runs`), in order, once their
    batches are done. With ``raise_first`` the first failure is raised instead."""
    out: list[RecordMetadata | errors.KafkaError] = []
    for run in runs:
        batch: Batch = run[0]
        out += batch.outcomes(run[1], run[2])
    if raise_first:
        for result in out:
            if isinstance(result, errors.KafkaError):
                raise result
    return out


class PartitionQueue:
    """Queue and sequence state of one partition: batches waiting (the last one open for
    appends; batches to resend first, in sequence order), the batches in flight (in the
    order they were sent), the next sequence number to hand out, and when it may send
    again."""

    __slots__ = (
        "confirmed",
        "flight",
        "next_seq",
        "partition",
        "queue",
        "retry_at",
        "topic",
        "window",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.queue: deque[Batch] = deque()
        self.flight: deque[Batch] = deque()
        self.next_seq = 0
        self.retry_at = 0.0
        # Whether a batch of the current producer id was written here: until then the
        # broker has no state for it and takes any sequence, so one batch at a time.
        self.confirmed = False
        # The batches numbered since the oldest one not done yet, in sequence order: a
        # new batch is numbered only while fewer than max_in_flight are, so a resent one
        # is always among the last five the broker remembers.
        self.window: deque[Batch] = deque()
