"""``sharecon.sync.ShareConsumer``: the share consumer for blocking code.

A façade over :class:`sharecon.ShareConsumer`, which runs unchanged on the client's
event-loop thread (:class:`~sharecon.sync._thread.EngineThread`); every rule (answers,
implicit acceptance, locks, dead letters, closing) is the async consumer's.

Iteration hands records over in chunks: the blocking side takes a list of records with one
call of the async :meth:`~sharecon.ShareConsumer.poll` and serves them from a local deque, so
there is no cross-thread round trip per record. The acknowledgement rules stay those of
``async for``:

- implicit mode: a record counts as handled when the next one is asked for. The records
  moved past are accepted by the async ``poll()`` that takes the next chunk (it accepts the
  delivered records not answered yet), and, when a chunk takes longer than
  :data:`_FLUSH_EVERY` to go through, by a fire-and-forget call to the loop, so an accept
  never waits behind a slow handler for long;
- the chunk size adapts (1 to ``max_records``) so that a chunk is gone through in about a
  tenth of a second: slow handlers get one record per call, exactly as ``async for``;
- the record in hand, and the records of the chunk not reached yet, are not moved past:
  they are released when the consumer closes, never accepted. The record in hand is
  released when a new ``for`` loop, ``poll()`` (implicit mode) or ``process()`` takes
  over; the chunk's unreached records are served by the next loop or ``poll()``, and
  released by ``commit()`` (implicit mode) and ``process()``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import anyio
import anyio.to_thread

from sharecon import errors
from sharecon.consumer import ConsumerHealth
from sharecon.consumer import ShareConsumer as AsyncShareConsumer
from sharecon.record import K, Record, V
from sharecon.sync import _thread
from sharecon.sync._thread import Backend, EngineThread, SigtermGuard
from sharecon.types import AckType, TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from types import TracebackType

    from typing_extensions import Self

    from sharecon.metrics import ConsumerMetrics
    from sharecon.producer import RecordMetadata
    from sharecon.serde import AnyDeserializer

__all__ = ["ShareConsumer"]

T = TypeVar("T")

logger = logging.getLogger("sharecon.sync")

#: Seconds after which records moved past in a chunk are accepted without waiting for the
#: next chunk (well under ``ack_linger``'s default, so the broker hears about as soon as
#: from ``async for``).
_FLUSH_EVERY = 0.05
#: A chunk that took less than this to go through doubles the next one; more than
#: :data:`_SLOW_CHUNK` halves it.
_FAST_CHUNK = 0.02
_SLOW_CHUNK = 0.1


class _Engine(AsyncShareConsumer[K, V]):
    """The async consumer, with answers given outside its loop thread (``record.accept()``
    in the blocking code, or a ``process()`` handler's thread) carried over to it."""

    _sync_facade: ShareConsumer[K, V]

    def acknowledge(self, record: Record[Any, Any], ack: AckType = AckType.ACCEPT) -> None:
        facade = self._sync_facade
        if threading.get_ident() != facade._thread.ident:
            facade._answer(record, ack)
            return
        super().acknowledge(record, ack)

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, ack: AckType = AckType.ACCEPT
    ) -> None:
        facade = self._sync_facade
        if threading.get_ident() != facade._thread.ident:
            facade.acknowledge_offset(topic, partition, offset, ack)
            return
        super().acknowledge_offset(topic, partition, offset, ack)

    def release_later(self, record: Record[Any, Any], delay: float) -> None:
        facade = self._sync_facade
        if threading.get_ident() != facade._thread.ident:
            facade._release_later(record, delay)
            return
        super().release_later(record, delay)


class ShareConsumer(Generic[K, V]):
    """A share-group consumer for blocking code (threads, scripts, Django or Flask
    workers): :class:`sharecon.ShareConsumer` run on a background event-loop thread.

    ::

        with ShareConsumer("localhost:9092", group_id="billing", topics=["invoices"]) as c:
            for record in c:
                handle(record)       # implicit mode: accepted when the loop moves on

    Takes every parameter of :class:`sharecon.ShareConsumer` (passed on unchanged), plus:

    :param backend: the event loop the client runs on: ``"asyncio"`` (default) or
        ``"trio"``.
    :param handle_sigterm: while the consumer is open in the main thread, SIGTERM raises
        ``SystemExit(143)`` there (where SIGTERM still has its default action), so the
        ``with`` block closes the consumer and releases its records, as Ctrl-C does.
    :raises ConfigError: for a wrong argument, naming it.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        group_id: str,
        topics: Iterable[str],
        ack_mode: Literal["implicit", "explicit"] = "implicit",
        max_records: int = 500,
        key_deserializer: AnyDeserializer[K] | None = None,
        value_deserializer: AnyDeserializer[V] | None = None,
        backend: Backend = "asyncio",
        handle_sigterm: bool = True,
        **options: Any,
    ) -> None:
        self._thread = EngineThread("ShareConsumer", backend)
        engine: _Engine[K, V] = _Engine(
            bootstrap,
            group_id=group_id,
            topics=topics,
            ack_mode=ack_mode,
            max_records=max_records,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            **options,
        )
        engine._sync_facade = self
        self._engine = engine
        self._explicit = ack_mode == "explicit"
        self._max_records = max_records
        self._handle_sigterm = bool(handle_sigterm)
        self._guarded = False
        self._closed = False
        self._forks = _thread.fork_generation()
        #: The record last handed out by iteration and not moved past yet.
        self._current: Record[K, V] | None = None
        self._current_answered = False
        #: Records of the current chunk not handed out yet.
        self._queue: deque[Record[K, V]] = deque()
        #: Records moved past (implicit mode) and not yet accepted in the loop.
        self._moved: list[Record[K, V]] = []
        self._flushed_at = 0.0
        self._chunk = 1
        self._chunk_at = 0.0
        #: process() calls running (release(delay=...) in implicit mode needs one).
        self._processing = 0

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the event-loop thread, connect and join the group (as the async
        :meth:`sharecon.ShareConsumer.start`, whose errors it raises).

        :raises ClientStateError: started before; :class:`~sharecon.errors.ClientClosedError`
            after a close.
        :raises ForkedClientError: in a child process forked after the consumer was made.
        """
        self._thread.check_fork()
        if self._closed:
            raise errors.ClientClosedError("sharecon.sync.ShareConsumer was closed; make a new one")
        if self._thread.running:
            raise errors.ClientStateError("sharecon.sync.ShareConsumer is started already")
        try:
            self._thread.open(self._engine.start, self._engine.close)
        except BaseException:
            self._closed = True
            raise
        if self._handle_sigterm:
            self._guarded = SigtermGuard.acquire()

    def close(self, timeout: float | None = None) -> None:
        """Leave the group cleanly, release every record handed out and not answered
        (and every buffered one), and stop the event-loop thread. Bounded by ``timeout``
        (default ``close_timeout``). Closing twice does nothing; so does closing in a
        child process after ``fork()`` (the parent's consumer is left alone)."""
        if self._closed or self._thread.forked():
            self._closed = True
            return
        self._closed = True
        try:
            self._thread.shut(timeout)
        finally:
            if self._guarded:
                self._guarded = False
                SigtermGuard.release()

    def _running(self) -> EngineThread:
        thread = self._thread
        if _thread._forks != self._forks:
            raise thread.fork_error()
        if self._closed:
            raise errors.ClientClosedError("sharecon.sync.ShareConsumer is closed; make a new one")
        if not thread.running:
            raise errors.ClientNotStartedError(
                "sharecon.sync.ShareConsumer is not started: use `with ShareConsumer(...) as "
                "consumer:` or call start()"
            )
        return thread

    # -- iteration ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Record[K, V]]:
        # A new loop: the previous one ended early (break, an exception), so its record
        # in hand was not handled: give it back, as a new `async for` does. Records of the
        # chunk not reached yet are still this consumer's: they are served first.
        thread = self._running()
        cur = self._current
        if cur is not None:
            self._current = None
            if not self._current_answered:
                self._current_answered = True
                thread.run_sync(AsyncShareConsumer.acknowledge, self._engine, cur, AckType.RELEASE)
        return self

    def __next__(self) -> Record[K, V]:
        if _thread._forks != self._forks:
            raise self._thread.fork_error()
        if self._closed:
            # Closed (by another thread) while iterating: the loop ends, as `async for`
            # does; the records not reached were released by the close.
            raise StopIteration
        cur = self._current
        if cur is not None:
            if not self._current_answered:
                if self._explicit:
                    raise errors.UnacknowledgedRecordsError(
                        "explicit ack mode: answer the previous record before asking for the "
                        f"next: {cur.topic}-{cur.partition} offset {cur.offset}"
                    )
                self._moved.append(cur)
            self._current = None
        queue = self._queue
        if not queue:
            self._refill()
        elif self._moved:
            now = monotonic()
            if now - self._flushed_at > _FLUSH_EVERY:
                self._flush_moved(now)
        rec = queue.popleft()
        self._current = rec
        self._current_answered = False
        return rec

    def _flush_moved(self, now: float) -> None:
        """Accept the records moved past in the loop thread now, without waiting."""
        moved, self._moved = self._moved, []
        self._flushed_at = now
        self._thread.call_soon(partial(_accept_moved, self._engine, moved))

    def _refill(self) -> None:
        """Take the next chunk (the async poll accepts the records moved past, in
        implicit mode); :raises StopIteration: the consumer closed."""
        thread = self._running()
        self._moved = []
        # Size the chunk so that going through one takes about a tenth of a second.
        took = monotonic() - self._chunk_at
        if took < _FAST_CHUNK:
            self._chunk = min(self._chunk * 2, self._max_records)
        elif took > _SLOW_CHUNK:
            self._chunk = max(self._chunk // 2, 1)
        future = thread.submit(partial(self._engine.poll, None, max_records=self._chunk))
        try:
            records = thread.wait(future, None, "__next__")
        except BaseException:
            # Interrupted (Ctrl-C) just as records arrived: keep them, they are ours.
            if future.done() and not future.cancelled() and future.exception() is None:
                self._queue.extend(future.result())
            raise
        if not records:
            raise StopIteration
        self._queue.extend(records)
        self._chunk_at = self._flushed_at = monotonic()

    def _hand_over_leftovers(self, limit: int) -> list[Record[K, V]]:
        queue = self._queue
        return [queue.popleft() for _ in range(min(limit, len(queue)))]

    def _moved_on(self, thread: EngineThread, *, unseen: bool = False) -> None:
        """poll() or process() take over from iteration. The records moved past are
        accepted (implicit mode); the record in hand was not moved past: it is released,
        never accepted, as a new ``for`` loop does; with ``unseen`` so are the records of
        the chunk iteration has not reached (process() never serves them)."""
        moved, self._moved = self._moved, []
        back: list[Record[K, V]] = []
        cur = self._current
        if cur is not None and not self._current_answered:
            back.append(cur)
        self._current = None
        self._current_answered = False
        if unseen:
            back.extend(self._queue)
            self._queue.clear()
        if moved or back:
            thread.run_sync(_hand_back, self._engine, moved, back)

    def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> list[Record[K, V]]:
        """Wait up to ``timeout`` seconds (``None``: until records come or the consumer
        closes) and return up to ``max_records`` records, as
        :meth:`sharecon.ShareConsumer.poll` (``[]`` on timeout or after close).

        In implicit mode the previous batch is accepted first; in explicit mode it must
        be answered (else :class:`~sharecon.errors.UnacknowledgedRecordsError`).
        """
        thread = self._running()
        if self._queue and not (self._explicit and self._current and not self._current_answered):
            self._moved_on(thread)
            limit = self._max_records if max_records is None else max_records
            return self._hand_over_leftovers(max(limit, 1))
        if not self._explicit:
            # Before the async poll, which accepts every record delivered and unanswered:
            # the record in hand is released, not accepted with them. (In explicit mode
            # an unanswered one makes the async poll raise, and stays in hand.)
            self._moved_on(thread)
        records = thread.call(partial(self._engine.poll, timeout, max_records=max_records))
        self._current = None
        self._moved = []
        return records

    def batches(self, *, max_records: int | None = None) -> Iterator[list[Record[K, V]]]:
        """Lists of records, as :meth:`poll` in a loop, until the consumer closes. In
        implicit mode each list is accepted when the next one is asked for."""
        self._running()
        while True:
            batch = self.poll(None, max_records=max_records)
            if not batch:
                return
            yield batch

    def commit(
        self, timeout: float | None = None
    ) -> dict[TopicPartition, errors.KafkaError | None]:
        """Send every pending answer and wait for the brokers' verdicts, as
        :meth:`sharecon.ShareConsumer.commit` (implicit mode: the record in hand and the
        records moved past are accepted first).

        In implicit mode, records of the current chunk that iteration has not reached
        yet (after a ``break``) are released first, never accepted unseen: they come back
        with their delivery count one higher.

        :raises KafkaTimeoutError: no verdict within ``timeout`` (default: request
            timeout plus ``max_wait_ms``).
        """
        thread = self._running()
        if not self._explicit and self._queue:
            unseen = list(self._queue)
            self._queue.clear()
            thread.run_sync(_release, self._engine, unseen)
        result = thread.call(self._engine.commit, timeout, what="commit")
        if not self._explicit and self._current is not None:
            self._current_answered = True
        self._moved = []
        return result

    # -- answers ------------------------------------------------------------------------

    def _answer(self, record: Record[Any, Any], ack: AckType) -> None:
        """An answer given in another thread (``record.accept()``): applied in the loop,
        its error raised here."""
        if self._closed and not self._thread.forked():
            raise errors.InvalidRecordStateError(
                f"{record.topic}-{record.partition} offset {record.offset}: the consumer is "
                "closed (its unanswered records were released)"
            )
        self._running().run_sync(AsyncShareConsumer.acknowledge, self._engine, record, ack)
        if record is self._current and ack is not AckType.RENEW:
            self._current_answered = True

    def _release_later(self, record: Record[Any, Any], delay: float) -> None:
        thread = self._running()
        if not self._explicit and not self._processing:
            raise errors.InvalidRecordStateError(
                "sharecon.sync in implicit ack mode: release(delay=...) only in process(); "
                "use ack_mode='explicit' to release records of `for` or poll() with a delay"
            )
        thread.run_sync(AsyncShareConsumer.release_later, self._engine, record, delay)
        if record is self._current:
            self._current_answered = True

    def acknowledge(self, record: Record[Any, Any], ack: AckType = AckType.ACCEPT) -> None:
        """Answer one record (the same as ``record.accept()`` and friends)."""
        self._answer(record, ack)

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, ack: AckType = AckType.ACCEPT
    ) -> None:
        """Answer the record handed out at that position, as
        :meth:`sharecon.ShareConsumer.acknowledge_offset`."""
        self._running().run_sync(
            AsyncShareConsumer.acknowledge_offset, self._engine, topic, partition, offset, ack
        )
        cur = self._current
        if cur is not None and (cur.topic, cur.partition, cur.offset) == (topic, partition, offset):
            self._current_answered = True

    def reject_to_dlq(
        self,
        record: Record[Any, Any],
        *,
        reason: str = "",
        topic: str | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata | None:
        """Copy ``record`` to the dead-letter topic, then reject it, as
        :meth:`sharecon.ShareConsumer.reject_to_dlq`.

        :raises KafkaTimeoutError: not done within ``timeout`` seconds.
        """
        result = self._running().call(
            partial(self._engine.reject_to_dlq, record, reason=reason, topic=topic),
            timeout=timeout,
            what="reject_to_dlq",
        )
        if record is self._current:
            self._current_answered = True
        return result

    # -- handlers -----------------------------------------------------------------------

    def process(
        self,
        handler: Callable[[Record[K, V]], object],
        *,
        concurrency: int = 1,
        keep_locks: bool | None = None,
        timeout: float | None = None,
    ) -> None:
        """Run ``handler(record)`` on every record, in ``concurrency`` worker threads, until
        the consumer closes or ``timeout`` seconds have passed (``None``: no end), with
        :meth:`sharecon.ShareConsumer.process`'s rules: a record is accepted when the
        handler returns, released (or dead-lettered, or retried later under a policy)
        when it raises, and answers the handler gives itself are kept. Ctrl-C stops it.
        """
        thread = self._running()
        engine = self._engine
        if timeout is not None and not timeout >= 0:
            raise errors.ConfigError(f"timeout must be None or >= 0 seconds, not {timeout!r}")

        async def run() -> None:
            limiter = anyio.CapacityLimiter(max(concurrency, 1))

            async def handle(record: Record[K, V]) -> object:
                return await anyio.to_thread.run_sync(handler, record, limiter=limiter)

            with anyio.move_on_after(math.inf if timeout is None else timeout):
                await engine.process(handle, concurrency=concurrency, keep_locks=keep_locks)

        # process() serves the engine's buffer only: the rest of the chunk would be left
        # unseen until its locks ran out (an attempt spent). Released now, it comes back.
        self._moved_on(thread, unseen=True)
        self._processing += 1
        try:
            thread.call(run, what="process")
        finally:
            self._processing -= 1

    # -- the rest of the async consumer's API -----------------------------------------------

    @property
    def member_id(self) -> str:
        """This member's id in the group."""
        return self._engine.member_id

    @property
    def group_id(self) -> str:
        """The share group."""
        return self._engine.group_id

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned to this member (may be empty)."""
        return self._call_sync(lambda: self._engine.assignment)

    @property
    def subscription(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._call_sync(lambda: self._engine.subscription)

    @property
    def recent_errors(self) -> list[errors.KafkaError]:
        """The last errors the consumer met (see the async consumer's docs)."""
        return self._call_sync(lambda: self._engine.recent_errors)

    def health(self) -> ConsumerHealth:
        """A status for probes, as :meth:`sharecon.ShareConsumer.health`."""
        return self._call_sync(self._engine.health)

    def metrics(self) -> ConsumerMetrics:
        """The consumer's counters, as :meth:`sharecon.ShareConsumer.metrics`."""
        return self._call_sync(self._engine.metrics)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Replace the subscription (as :meth:`sharecon.ShareConsumer.subscribe`)."""
        names = list(topics)
        self._running().run_sync(self._engine.subscribe, names)

    def unsubscribe(self) -> None:
        """Stop consuming every topic (as :meth:`sharecon.ShareConsumer.unsubscribe`)."""
        self._running().run_sync(self._engine.unsubscribe)

    def lock_duration(self, *, timeout: float | None = None) -> float:
        """The group's acquisition lock in seconds (asks the cluster), as
        :meth:`sharecon.ShareConsumer.lock_duration`."""
        return self._running().call(partial(self._engine.lock_duration, timeout=timeout))

    def _call_sync(self, func: Callable[[], T]) -> T:
        thread = self._thread
        thread.check_fork()
        if thread.running:
            return thread.run_sync(func)
        return func()  # before start or after close: read-only views answer in place


def _accept_moved(engine: _Engine[Any, Any], moved: list[Record[Any, Any]]) -> None:
    """Implicit mode, in the loop thread: accept records the application moved past.
    One the application answered meanwhile keeps its answer."""
    ack = AsyncShareConsumer.acknowledge
    for rec in moved:
        try:
            ack(engine, rec, AckType.ACCEPT)
        except errors.InvalidRecordStateError:
            pass  # answered already (by the application, or by a poll), or closing
        except errors.KafkaError as exc:  # pragma: no cover - logged, never lost silently
            logger.warning(
                "accepting %s-%s offset %s: %s", rec.topic, rec.partition, rec.offset, exc
            )


def _hand_back(
    engine: _Engine[Any, Any], moved: list[Record[Any, Any]], unseen: list[Record[Any, Any]]
) -> None:
    """In the loop thread, when poll() or process() take over from iteration: accept the
    records moved past (implicit mode), release the ones in hand or not reached."""
    _accept_moved(engine, moved)
    _release(engine, unseen)


def _release(engine: _Engine[Any, Any], records: list[Record[Any, Any]]) -> None:
    """In the loop thread: release records handed out by the async side that the
    application was not given (or did not answer), and wake their leaders so the releases
    go out now. One answered meanwhile (by the application, in another thread) is passed
    over: the others are still released."""
    core = engine._core
    for rec in records:
        try:
            AsyncShareConsumer.acknowledge(engine, rec, AckType.RELEASE)
        except errors.InvalidRecordStateError:
            continue
        if core is not None:
            core.wake_leader(rec.topic_partition)
