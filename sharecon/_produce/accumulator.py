"""The producer's accumulator: records into batches, batches into requests, outcomes
back into batches. Sans-I/O (see :mod:`sharecon._produce`).

Rules of this module:

1. **Accumulate, then send.** A record goes into its partition's open batch (the last in
   the queue); a batch closes (*sealed*) at ``max_batch`` bytes, when it is sent, or when
   a new one is opened behind it. What is queued is bounded by ``max_buffer`` bytes:
   :meth:`Accumulator.place` hands a record that does not fit back to its caller, who
   waits for space (or refuses it) and then uses :meth:`Accumulator.append`.
2. **Partition choice.** An explicit partition wins; a key picks one with Java's
   murmur2; a record without either sticks to the partition of the last keyless batch of
   its topic while that batch has room (the sticky partitioner, KIP-480), then moves to
   another partition at random.
3. **Up to ``max_in_flight`` batches in flight per partition** with idempotence (one
   without), in order (:meth:`Accumulator.ready`). A batch gets its sequence numbers when
   it is first sent, and keeps them: a retry resends the very same bytes. A batch sent
   before goes back into its queue in sequence order (ahead of every batch never sent),
   and is sent again only once nothing else of its partition is in flight, so the broker
   always sees the sequences in order. Until a first batch of the producer id is written
   on a partition, one batch is in flight there (the broker takes any sequence from a
   producer id it has no state for); and a new batch is numbered only while fewer than
   ``max_in_flight`` batches numbered before it are not done (the broker recognises a
   resend among the last five batches only). A batch answered OUT_OF_ORDER_SEQUENCE_NUMBER while
   an earlier batch of its partition is still pending (in flight or waiting to be resent)
   is only behind that one's failure: it is resent after it (:data:`.policy.Action.RESEND`).
   A batch that fails for good after getting sequence numbers hands them back when nothing
   was numbered after it; otherwise (a gap the broker would never see filled) the producer
   gets a new producer id, as for an ambiguous failure (rule 5).
4. **Outcomes** follow :mod:`.policy`: written, split, retried (back at the head of its
   queue with a backoff), expired after ``delivery_timeout`` or failed. A batch done for
   good frees its buffer space and tells the hooks once.
5. **Idempotence.** A failure whose outcome is unknown, or an answer saying the broker
   lost our producer state, asks for a new producer id (:attr:`Accumulator.reset_wanted`);
   :meth:`Accumulator.restart_sequences` then starts every partition at 0. A batch whose
   outcome is unknown then fails rather than being sent under the new id (it may be in
   the log already: the broker could not recognise it as a resend).

Time: :meth:`Accumulator.ready` and the outcome methods take ``now`` (the I/O layer's
monotonic clock, seconds); the clock given at construction is read only when a new
batch is opened. Records' create times (milliseconds since the epoch) come in with them,
or are read from the wall clock given at construction.
"""

from __future__ import annotations

import math
from collections import deque  # noqa: TC003  (a real import: the compiled build reads it)
from typing import TYPE_CHECKING, Any, Protocol

from sharecon import errors
from sharecon.partitioner import partition_for_key

from .batch import Batch, PartitionQueue
from .inputs import (
    BATCH_OVERHEAD,
    MAX_TIMESTAMP,
    NO_HEADERS,
    RECORD_OVERHEAD,
    as_bytes,
    normalise_headers,
    record_size,
)
from .policy import Action, answer_action
from .settings import Settings  # noqa: TC001  (a real import: the compiled build reads it)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

__all__ = ["DEBUG", "INFO", "WARNING", "Accumulator", "Hooks", "Prepared", "View"]

_new: Any = object.__new__

# Log levels the hooks get (the values of the logging module's, which this layer does
# not import).
DEBUG = 10
INFO = 20
WARNING = 30

Headers = tuple[tuple[str, bytes | None], ...]

# Sequence numbers are int32 and wrap to 0 after 2**31 - 1.
_SEQ_MASK = 0x7FFFFFFF


def _precedes(a: int, b: int) -> bool:
    """Whether sequence number ``a`` comes before ``b`` (wrapping)."""
    return 0 < ((b - a) & _SEQ_MASK) < 0x40000000


def _discard(flight: deque[Batch], batch: Batch) -> None:
    # A batch leaves the in-flight list when its outcome is applied (usually the first).
    if flight:
        if flight[0] is batch:
            flight.popleft()
        elif batch in flight:
            flight.remove(batch)


class Hooks(Protocol):
    """What the accumulator tells the I/O layer."""

    def wake(self) -> None:
        """A batch was opened, filled or failed ambiguously: the dispatcher has work."""

    def batch_done(self, batch: Batch) -> None:
        """``batch`` is done for good (:attr:`Batch.done`): wake its waiter, run its
        callbacks, count it, and report a failure nobody is waiting for."""

    def retrying(self, batch: Batch, error: errors.KafkaError) -> None:
        """``batch`` goes back to its queue for another try after ``error``."""

    def log(self, level: int, message: str, *args: object) -> None:
        """Log ``message % args`` at ``level`` (10 debug, 20 info, 30 warning)."""


class _Leader(Protocol):
    @property
    def leader_id(self) -> int: ...


class _Metadata(Protocol):
    @property
    def partitions(self) -> Mapping[str, Sequence[object]]: ...


class View(Protocol):
    """The I/O layer's view of the cluster: its current metadata."""

    @property
    def metadata(self) -> _Metadata: ...


class Prepared:
    """One record, checked and normalised, that must wait before it is appended."""

    __slots__ = ("headers", "key", "size", "timestamp", "value")

    def __init__(
        self, key: bytes | None, value: bytes | None, headers: Headers, timestamp: int, size: int
    ) -> None:
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
        self.size = size


def _timestamp(timestamp: object, now_ms: int) -> int:
    if timestamp is None:
        return now_ms
    if type(timestamp) is int and 0 <= timestamp <= MAX_TIMESTAMP:
        return timestamp
    raise errors.ConfigError(
        f"timestamp must be milliseconds since the epoch (int >= 0), not {timestamp!r}"
    )


class Accumulator:
    """Every partition's queue of batches, and the producer's idempotence state."""

    __slots__ = (
        "_backoff",
        "_clock",
        "_codec",
        "_delivery_timeout",
        "_hooks",
        "_level",
        "_linger",
        "_max_batch",
        "_max_flight",
        "_max_buffer",
        "_max_request",
        "_randrange",
        "_wall_ns",
        "buffered",
        "future_type",
        "closing",
        "flushing",
        "idempotent",
        "in_flight",
        "partitions",
        "producer_epoch",
        "producer_id",
        "reset_wanted",
        "space_wanted",
        "sticky",
        "view",
    )

    def __init__(
        self,
        settings: Settings,
        hooks: Hooks,
        *,
        clock: Callable[[], float],
        wall_ns: Callable[[], int],
        randrange: Callable[[int], int],
    ) -> None:
        self._hooks = hooks
        self._clock = clock
        self._wall_ns = wall_ns
        self._randrange = randrange
        self._max_batch = settings.max_batch
        self._max_buffer = settings.max_buffer
        # Without idempotence nothing would keep two batches of a partition in order.
        self._max_flight = settings.max_in_flight if settings.idempotent else 1
        self._max_request = settings.max_request
        self._delivery_timeout = settings.delivery_timeout
        self._linger = settings.linger
        self._backoff = settings.backoff
        self._codec = settings.codec
        self._level = settings.compression_level
        self.idempotent = settings.idempotent
        self.partitions: dict[tuple[str, int], PartitionQueue] = {}
        #: Per topic, the batch its keyless records go to while it has room (rule 2).
        self.sticky: dict[str, Batch] = {}
        #: Bytes of records queued and not yet done (rule 1).
        self.buffered = 0
        #: Batches in requests that have not come back.
        self.in_flight = 0
        #: Flushes under way, and senders waiting for space: batches do not linger then.
        self.flushing = 0
        self.space_wanted = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.reset_wanted = False
        self.closing = False
        #: The cluster view records are placed against by :meth:`enqueue` and by
        #: :meth:`place` without ``known``: set by the I/O layer while the short path is
        #: open (started, not closing, not failed, no serializers), else ``None``.
        self.view: View | None = None
        #: The class of the futures :meth:`enqueue` makes (slots ``_batch``, ``_index``,
        #: ``_claimed``; the I/O layer's).
        self.future_type: Any = None

    # -- placing records (the per-record path) -------------------------------------------------

    def enqueue(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int,
    ) -> Any:
        """The short path of a send: :meth:`place` against :attr:`view`, and a future of
        :attr:`future_type` for the record (it counts as unclaimed in its batch). ``None``
        when the short path is closed or the record must wait (:meth:`place`).

        :raises ConfigError: a wrong argument (nothing was queued).
        :raises MessageTooLargeError: the record alone is larger than ``max_request``.
        """
        view = self.view
        if view is None:
            return None
        batch = self.place(
            topic, value, key, headers, partition, timestamp, now_ms, view.metadata.partitions
        )
        if batch is None:
            return None
        future = _new(self.future_type)
        future._batch = batch
        future._index = len(batch.timestamps) - 1
        future._claimed = False
        batch.unclaimed += 1
        return future

    def place_records(
        self, items: Iterator[Any], now_ms: int, runs: list[list[Any]], record_type: Any
    ) -> Any:
        """The short path of ``send_batch``: :meth:`place` each item of ``items`` (objects
        of ``record_type``, with ``topic``, ``value``, ``key``, ``headers``, ``partition``
        and ``timestamp``) against :attr:`view`, noting each in ``runs``
        (:func:`.batch.add_to_runs`). Returns the first item that must take the long way
        (the caller places it, adds it to ``runs`` and calls again), or ``None`` once
        ``items`` is exhausted.

        :raises ConfigError: an item that is not a ``record_type``, or a wrong argument.
        :raises MessageTooLargeError: a record alone is larger than ``max_request``.
        """
        view = self.view
        last: list[Any] | None = runs[-1] if runs else None
        for rec in items:
            if type(rec) is not record_type:
                raise errors.ConfigError(
                    f"send_batch takes {record_type.__name__} items, not {type(rec).__name__}"
                )
            if view is None:
                return rec
            batch = self.place(
                rec.topic,
                rec.value,
                rec.key,
                rec.headers,
                rec.partition,
                rec.timestamp,
                now_ms,
                view.metadata.partitions,
            )
            if batch is None:
                return rec
            index = len(batch.timestamps) - 1
            if last is not None and last[0] is batch and last[2] == index:
                last[2] = index + 1
            else:
                last = [batch, index, index + 1]
                runs.append(last)
        return None

    def place(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int,
        known: Mapping[str, Sequence[object]] | None = None,
    ) -> Batch | None:
        """Check one record and append it to its partition's open batch; its index there
        is ``len(batch.timestamps) - 1``.

        ``now_ms`` is the create time of a record without ``timestamp`` (-1: read the
        wall clock given at construction). ``known`` maps each topic the metadata knows
        to its partitions (by default :attr:`view`'s; none while it is ``None``). Returns
        ``None`` when the record must wait (its topic or partition is not known yet, or the
        buffer is full) or there is no view: the caller then uses :meth:`prepare`, waits,
        and :meth:`append`.

        :raises ConfigError: a wrong argument (nothing was queued).
        :raises MessageTooLargeError: the record alone is larger than ``max_request``.
        """
        if known is None:
            view = self.view
            if view is None:
                return None
            known = view.metadata.partitions
        if type(topic) is not str or not topic:
            raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
        v: bytes | None = (
            value if value is None or type(value) is bytes else as_bytes(value, "value")
        )
        k: bytes | None = key if key is None or type(key) is bytes else as_bytes(key, "key")
        hs = normalise_headers(headers) if headers else NO_HEADERS
        if timestamp is None:
            ts = now_ms if now_ms >= 0 else self._wall_ns() // 1_000_000
        else:
            ts = _timestamp(timestamp, now_ms)
        size = RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        if hs:
            size = record_size(k, v, hs)
        parts = known.get(topic)
        if not parts:
            return None
        count = len(parts)
        if partition is None:
            if k is None:
                sticky = self.sticky.get(topic)
                if (
                    sticky is not None
                    and not sticky.sealed
                    and sticky.size + size <= self._max_batch
                    and sticky.partition < count
                ):
                    # The open keyless batch has room (rule 2): the common case, no lookups.
                    if self.buffered > 0 and self.buffered + size > self._max_buffer:
                        return None
                    self._add(sticky, k, v, hs, ts, size)
                    return sticky
                part = self._next_sticky(sticky, count, size)
            else:
                part = partition_for_key(k, count)
        elif type(partition) is not int or partition < 0:
            raise errors.ConfigError(f"partition must be an int >= 0, not {partition!r}")
        elif partition >= count:
            return None
        else:
            part = partition
        if size + BATCH_OVERHEAD > self._max_request:
            raise self.too_large(topic, part, size)
        if self.buffered > 0 and self.buffered + size > self._max_buffer:
            return None
        return self.append(topic, part, k, v, hs, ts, size)

    def prepare(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        timestamp: object,
        now_ms: int,
    ) -> Prepared:
        """The checks and normalisation of :meth:`place`, for a record that must wait.

        :raises ConfigError: a wrong argument.
        """
        if type(topic) is not str or not topic:
            raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
        v = as_bytes(value, "value")
        k = as_bytes(key, "key")
        hs = normalise_headers(headers) if headers else NO_HEADERS
        if timestamp is None and now_ms < 0:
            now_ms = self._wall_ns() // 1_000_000
        return Prepared(k, v, hs, _timestamp(timestamp, now_ms), record_size(k, v, hs))

    def choose_partition(
        self, topic: str, key: bytes | None, partition: object, count: int, size: int
    ) -> int:
        """The partition for a record of ``topic`` (``count`` partitions; rule 2). May
        return ``partition`` >= ``count``: the caller looks again, then refuses it.

        :raises ConfigError: ``partition`` is not an int >= 0.
        """
        if partition is None:
            if key is not None:
                return partition_for_key(key, count)
            return self._next_sticky(self.sticky.get(topic), count, size)
        if type(partition) is not int or partition < 0:
            raise errors.ConfigError(f"partition must be an int >= 0, not {partition!r}")
        return partition

    def has_room(self, size: int) -> bool:
        """Whether a record of ``size`` bytes fits in the buffer now (an empty buffer
        takes any record)."""
        return not (self.buffered > 0 and self.buffered + size > self._max_buffer)

    def too_large(self, topic: str, partition: int, size: int) -> errors.MessageTooLargeError:
        """The error for a record larger than ``max_request`` alone."""
        return errors.MessageTooLargeError(
            f"topic {topic!r} partition {partition}: the record is about {size} bytes, "
            f"more than max_request_size={self._max_request} (checked before sending)"
        )

    def check_size(self, topic: str, partition: int, size: int) -> None:
        """:raises MessageTooLargeError: a record of ``size`` bytes is larger than
        ``max_request`` alone."""
        if size + BATCH_OVERHEAD > self._max_request:
            raise self.too_large(topic, partition, size)

    def _next_sticky(self, current: Batch | None, count: int, size: int) -> int:
        # Keyless records fill one partition's batch before moving on to another one
        # (Java's sticky partitioner, KIP-480): fewer, bigger batches than round-robin.
        if current is None or current.partition >= count:
            return self._randrange(count)
        if not current.sealed and current.size + size <= self._max_batch:
            return current.partition
        if count == 1:
            return 0
        choice = self._randrange(count - 1)
        return choice + 1 if choice >= current.partition else choice

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        timestamp: int,
        size: int,
    ) -> Batch:
        """Append a checked record to the open batch of ``partition`` (a new one if there
        is none or it is full) and return that batch."""
        state = self.partitions.get((topic, partition))
        if state is None:
            state = self.partitions[(topic, partition)] = PartitionQueue(topic, partition)
        queue = state.queue
        batch = queue[-1] if queue else None
        if batch is None or batch.sealed or batch.size + size > self._max_batch:
            now = self._clock()
            fresh = Batch(topic, partition, now, now + self._delivery_timeout)
            builder = fresh.builder
            assert builder is not None
            # Encoded first: a record the format cannot hold leaves no empty batch behind.
            builder.append(timestamp, key, value, headers)
            if batch is not None:
                batch.sealed = True
            batch = fresh
            queue.append(batch)
            self._hooks.wake()
        else:
            builder = batch.builder
            assert builder is not None  # an open batch is not done
            builder.append(timestamp, key, value, headers)
        batch.timestamps.append(timestamp)
        batch.size += size
        self.buffered += size
        if batch.size >= self._max_batch:
            batch.sealed = True
            self._hooks.wake()
        if key is None:
            self.sticky[topic] = batch
        return batch

    def _add(
        self,
        batch: Batch,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        timestamp: int,
        size: int,
    ) -> None:
        builder = batch.builder
        assert builder is not None  # an open batch is not done
        builder.append(timestamp, key, value, headers)
        batch.timestamps.append(timestamp)
        batch.size += size
        self.buffered += size
        if batch.size >= self._max_batch:
            batch.sealed = True
            self._hooks.wake()

    # -- sending ---------------------------------------------------------------------------

    def ready(
        self, now: float, known: Mapping[str, Sequence[_Leader]]
    ) -> tuple[dict[int, list[Batch]], float, bool]:
        """Take every batch that may be sent now, by leader (rule 3): ``(batches by
        leader id, seconds until the next batch is due (inf: none), whether metadata must
        be refreshed)``. Batches past their deadline expire here; the taken ones are in
        flight until their outcome is applied."""
        next_due = math.inf
        want_metadata = False
        lingering = not self.flushing and not self.closing
        # A full buffer, or a sender waiting for space, does not wait for linger.
        if self.buffered >= self._max_buffer or self.space_wanted:
            lingering = False
        out: dict[int, list[Batch]] = {}
        for state in self.partitions.values():
            queue = state.queue
            while queue and queue[0].deadline <= now:
                self._expire(state, queue.popleft())
            if not queue:
                continue
            head = queue[0]
            flight = state.flight
            if flight and (
                len(flight) >= self._max_flight
                or head.base_seq >= 0
                or (self.idempotent and not state.confirmed)
            ):
                # Rule 3: a batch numbered before (a retry) waits until nothing else of
                # its partition is in flight; a new one until there is a free place, and
                # until a first batch of the producer id is written there.
                continue
            if head.base_seq < 0 and self.idempotent:
                window = state.window
                while window and (window[0].done or window[0].children is not None):
                    window.popleft()
                if len(window) >= self._max_flight:
                    continue  # rule 3: a batch not done yet would leave the broker's memory
            if state.retry_at > now:
                next_due = min(next_due, state.retry_at)
                continue
            if not head.sealed and lingering:
                due = head.created + self._linger
                if due > now:
                    next_due = min(next_due, due)
                    continue
            parts = known.get(state.topic, ())
            leader = parts[state.partition].leader_id if state.partition < len(parts) else -1
            if leader < 0:
                want_metadata = True
                state.retry_at = now + self._backoff.delay(head.attempts)
                next_due = min(next_due, state.retry_at)
                continue
            head.sealed = True
            queue.popleft()
            flight.append(head)
            self.in_flight += 1
            group = out.get(leader)
            if group is None:
                out[leader] = [head]
            else:
                group.append(head)
        wait = max(0.0, next_due - now) if next_due < math.inf else math.inf
        return out, wait, want_metadata

    def requests(self, batches: list[Batch], max_bytes: int) -> list[list[Batch]]:
        """``batches`` (taken by :meth:`ready`) encoded and grouped into requests of at
        most ``max_bytes`` (a single batch may be larger)."""
        groups: list[list[Batch]] = [[]]
        size = 0
        for batch in batches:
            encoded = self._encode(batch)
            if groups[-1] and size + len(encoded) > max_bytes:
                groups.append([])
                size = 0
            groups[-1].append(batch)
            size += len(encoded)
        return groups

    def _encode(self, batch: Batch) -> bytes:
        if batch.encoded is not None:
            return batch.encoded  # a retry sends the very same bytes
        if self.idempotent and batch.base_seq < 0:
            # Numbered when first sent (rule 3): the batches after it may go before its answer.
            state = self.partitions[(batch.topic, batch.partition)]
            batch.base_seq = state.next_seq
            state.next_seq = (state.next_seq + len(batch.timestamps)) & _SEQ_MASK
            state.window.append(batch)
        assert batch.builder is not None  # dropped only once the batch is done
        encoded = batch.builder.build(
            codec=self._codec,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=batch.base_seq,
            compression_level=self._level,
        )
        batch.encoded = encoded
        return encoded

    def request_done(self, count: int) -> None:
        """A request of ``count`` batches came back (or failed): they are no longer in
        flight (their outcomes were applied)."""
        self.in_flight -= count

    # -- outcomes --------------------------------------------------------------------------

    def answer_action(self, batch: Batch, code: int) -> Action:
        """The action for a partition's ``ErrorCode`` in the answer to ``batch``
        (:func:`.policy.answer_action`, told whether an earlier batch of the partition is
        still pending: rule 3)."""
        return answer_action(
            code,
            records=len(batch.timestamps),
            idempotent=self.idempotent,
            earlier_pending=code != 0 and self.earlier_pending(batch),
        )

    def earlier_pending(self, batch: Batch) -> bool:
        """Whether a batch numbered before ``batch`` in its partition is still in flight
        or waiting to be resent (so a gap in front of ``batch`` is that one's)."""
        if not self.idempotent or batch.base_seq < 0:
            return False
        state = self.partitions[(batch.topic, batch.partition)]
        seq = batch.base_seq
        for other in state.flight:
            if other is not batch and other.base_seq >= 0 and _precedes(other.base_seq, seq):
                return True
        queue = state.queue
        return bool(queue) and queue[0].base_seq >= 0 and _precedes(queue[0].base_seq, seq)

    def transport_failed(
        self, batches: list[Batch], error: errors.KafkaError, action: Action, now: float
    ) -> None:
        """A request got no answer: retry its batches (``RETRY``, ``RETRY_AMBIGUOUS``) or
        fail them (``FAIL``), as :func:`.policy.transport_action` said."""
        for batch in batches:
            if action is Action.FAIL:
                self.finish(batch, error)
            else:
                batch.ambiguous = batch.ambiguous or action is Action.RETRY_AMBIGUOUS
                self.retry(batch, error, now)

    def answered(
        self,
        batch: Batch,
        action: Action,
        error: errors.KafkaError | None,
        *,
        base_offset: int,
        log_append_time: int,
        now: float,
        hinted: bool = False,
    ) -> None:
        """Apply a partition's answer to ``batch``: ``action`` from
        :func:`.policy.answer_action`, ``error`` the answer's error (``None`` when
        written), ``hinted`` whether the answer's leader hint was applied."""
        if action is Action.WRITTEN:
            batch.ambiguous = False
            if self.idempotent:  # (only idempotence reads confirmed: rule 3)
                state = self.partitions.get((batch.topic, batch.partition))
                if state is not None:
                    state.confirmed = True
            batch.base_offset = base_offset
            batch.log_append_time = log_append_time
            self.finish(batch)
            return
        assert error is not None
        if action is Action.SPLIT:
            batch.ambiguous = False
            self._split(batch)
        elif action is Action.TOO_LARGE:
            batch.ambiguous = False
            encoded = len(batch.encoded or b"")
            self.finish(
                batch,
                type(error)(
                    f"topic {batch.topic!r} partition {batch.partition}: a record of about "
                    f"{batch.size - BATCH_OVERHEAD} bytes (a {encoded}-byte batch) is larger "
                    "than the broker accepts (topic max.message.bytes / broker message.max.bytes)"
                ),
            )
        elif action is Action.NEW_PRODUCER_ID:
            # The broker lost our producer state (or it expired): start over with a new id.
            self._hooks.log(INFO, "%s; getting a new producer id", error)
            self.reset_wanted = True
            self.retry(batch, error, now, immediate=True)
        elif action is Action.RETRY or action is Action.RETRY_AMBIGUOUS:
            # An answer saying the leader may have appended the batch (rule 5 of .policy).
            batch.ambiguous = batch.ambiguous or action is Action.RETRY_AMBIGUOUS
            self.retry(batch, error, now, immediate=hinted)
        elif action is Action.RESEND:
            # Behind an earlier batch's failure (rule 3): resent after it, on its schedule.
            self.retry(batch, error, now, keep_due=True)
        else:
            self.finish(batch, error)

    def retry(
        self,
        batch: Batch,
        error: errors.KafkaError,
        now: float,
        *,
        immediate: bool = False,
        keep_due: bool = False,
    ) -> None:
        """Put ``batch`` back in its queue, ahead of the batches never sent and in sequence
        order (rule 3), due after a backoff (at once if ``immediate``; when the partition
        is due already if ``keep_due``), or expire it if its deadline passed or the
        producer closes."""
        state = self.partitions[(batch.topic, batch.partition)]
        _discard(state.flight, batch)
        batch.last_error = error
        if now >= batch.deadline or self.closing:
            self._expire(state, batch)
            return
        self._hooks.retrying(batch, error)
        self._requeue(state, batch)
        if not keep_due:
            state.retry_at = now if immediate else now + self._backoff.delay(batch.attempts - 1)

    def _requeue(self, state: PartitionQueue, batch: Batch) -> None:
        # Ahead of every batch never sent; among those numbered already, in sequence order
        # (one not numbered yet, a half of a split, goes after them all).
        queue = state.queue
        index = 0
        if self.idempotent:
            seq = batch.base_seq
            for queued in queue:
                if queued.base_seq < 0 or (seq >= 0 and not _precedes(queued.base_seq, seq)):
                    break
                index += 1
        queue.insert(index, batch)

    def _split(self, batch: Batch) -> None:
        state = self.partitions[(batch.topic, batch.partition)]
        _discard(state.flight, batch)
        assert batch.builder is not None  # dropped only once the batch is done
        records = batch.builder.records()  # decoded back: splitting is rare
        half = len(records) // 2
        pieces = []
        for part in (records[:half], records[half:]):
            piece = Batch(batch.topic, batch.partition, batch.created, batch.deadline)
            piece.sealed = True
            piece.parent = batch
            piece.attempts = batch.attempts
            builder = piece.builder
            assert builder is not None
            for r in part:
                builder.append(r.timestamp, r.key, r.value, r.headers)
            piece.timestamps = [r.timestamp for r in part]
            piece.size = BATCH_OVERHEAD + sum(record_size(r.key, r.value, r.headers) for r in part)
            pieces.append(piece)
        self._hooks.log(
            INFO,
            "%r was too large for the broker; splitting it into %d + %d records",
            batch,
            half,
            len(records) - half,
        )
        if batch.base_seq >= 0:
            # The halves take over its sequence numbers (rule 3): numbered again when sent
            # if none were handed out after them, else the same range, split.
            if state.next_seq == (batch.base_seq + len(records)) & _SEQ_MASK:
                state.next_seq = batch.base_seq
            else:
                pieces[0].base_seq = batch.base_seq
                pieces[1].base_seq = (batch.base_seq + half) & _SEQ_MASK
                # They hold the range in the window instead of the batch (rule 3).
                window = state.window
                try:
                    at = window.index(batch)  # one scan, not a membership test and then this
                except ValueError:
                    pass
                else:
                    window.insert(at + 1, pieces[1])
                    window.insert(at + 1, pieces[0])
            batch.base_seq = -1
        # The halves go first, in order; the buffer space moves to them.
        batch.children = (pieces[0], pieces[1])
        batch.encoded = None
        batch.builder = None  # the records live on in the halves
        self._requeue(state, pieces[1])
        self._requeue(state, pieces[0])

    def _expire(self, state: PartitionQueue, batch: Batch) -> None:
        _discard(state.flight, batch)
        last = f"; last error: {batch.last_error}" if batch.last_error else ""
        self.finish(
            batch,
            errors.KafkaTimeoutError(
                f"topic {batch.topic!r} partition {batch.partition}: {len(batch.timestamps)} "
                f"records not delivered within delivery_timeout="
                f"{self._delivery_timeout:g} s after {batch.attempts} attempts{last}"
            ),
        )

    def finish(self, batch: Batch, error: errors.KafkaError | None = None) -> None:
        """``batch`` is done: written (``error`` None) or failed with ``error``. Frees its
        buffer space, tells the hooks, and finishes the batch it was split from once both
        halves are done. Finishing a batch again does nothing."""
        if batch.done:
            return
        state = self.partitions.get((batch.topic, batch.partition))
        if state is not None:
            _discard(state.flight, batch)
        batch.error = error
        if error is not None and self.idempotent:
            if batch.ambiguous:
                # It may have been written under its sequence number: never reuse that.
                self.reset_wanted = True
                self._hooks.wake()
            elif batch.base_seq >= 0 and state is not None:
                end = (batch.base_seq + len(batch.timestamps)) & _SEQ_MASK
                if state.next_seq == end:
                    state.next_seq = batch.base_seq  # never written, nothing after it
                else:
                    # Batches numbered after it would wait for it forever (rule 3).
                    self.reset_wanted = True
                    self._hooks.wake()
        if batch.children is None:
            self.buffered -= batch.size - BATCH_OVERHEAD
        batch.encoded = None
        batch.builder = None  # its records are written or failed: free their bytes
        batch.sealed = True  # never a sticky target again
        batch.done = True
        self._hooks.batch_done(batch)
        parent = batch.parent
        if parent is not None and parent.children is not None:
            first, second = parent.children
            if first.done and second.done:
                self.finish(parent)

    def fail_all(self, error: errors.KafkaError) -> None:
        """Fail every batch queued or in flight with ``error``."""
        for state in self.partitions.values():
            while state.flight:
                self.finish(state.flight[0], error)
            while state.queue:
                self.finish(state.queue.popleft(), error)

    def pending(self) -> list[Batch]:
        """Every batch not done yet: queued, then in flight (what a flush waits for)."""
        out = [b for s in self.partitions.values() for b in s.queue]
        out += [b for s in self.partitions.values() for b in s.flight]
        return out

    def restart_sequences(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id (rule 5): every partition's sequence restarts at 0 and queued
        batches are encoded again under the new id, but for the ones whose outcome is
        unknown: the broker may have written them under the old id, where no resend
        under the new one would be recognised, so they fail instead of being written
        twice."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        for state in self.partitions.values():
            state.next_seq = 0
            state.confirmed = False
            state.window.clear()
            # One pass over the queue (a remove per unknown batch made this quadratic):
            # the others stay, in order, to be numbered and encoded again.
            queue = state.queue
            unknown: list[Batch] = []
            kept: list[Batch] = []
            for batch in queue:
                if batch.ambiguous:
                    unknown.append(batch)
                else:
                    batch.encoded = None
                    batch.base_seq = -1
                    kept.append(batch)
            if unknown:
                queue.clear()
                queue.extend(kept)
            for batch in unknown:
                batch.ambiguous = False  # failed here: no further reset for it
                batch.base_seq = -1
                last = f" ({batch.last_error})" if batch.last_error else ""
                self.finish(
                    batch,
                    errors.KafkaTimeoutError(
                        f"topic {batch.topic!r} partition {batch.partition}: "
                        f"{len(batch.timestamps)} records with an unknown outcome{last}: "
                        "they may have been written, and are not sent again under the "
                        "new producer id, which could write them twice"
                    ),
                )
