"""The producer's I/O side: a thin anyio runner over the sans-I/O engine.

Every decision (what to send to which leader, how many in flight, what each answer,
error, timeout or lost connection means, when to get a new producer id) is
:class:`sharecon._produce.engine.Engine`'s, the code the producer simulation
(:mod:`sharecon.testing.sim.produce`) runs too. Rules of this module:

1. **One dispatcher.** It runs an engine round whenever there is work or something falls
   due, and starts one task per request the round decided. Requests to one broker share
   its connection, pipelined.
2. **Answers go to the engine**; the only I/O part of one is its leader hint, which the
   engine offers and this module applies to the cluster view.
3. **Metadata** is refreshed by its own task when the engine asks, rate limited (a burst
   of NOT_LEADER answers needs one refresh, not one each).
4. **Producer id resets**: when the engine says so (nothing in flight), get a new producer
   id and hand it to the engine. A reset that fails for good fails the producer
   (:attr:`Sender.fatal`) and every batch.
5. **Waits** (for a topic's metadata, for buffer space, for a batch) live here; each is
   bounded by ``metadata_timeout``, a batch's ``delivery_timeout``, or the caller's.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.lowlevel

from sharecon import errors
from sharecon._net.connection import BrokerAddress
from sharecon._produce.engine import Engine
from sharecon.protocol import InitProducerIdRequest
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.names import validate_topic_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from sharecon._net.cluster import Cluster
    from sharecon._produce.accumulator import Accumulator, Prepared
    from sharecon._produce.batch import Batch
    from sharecon._produce.engine import LeaderHint, Outgoing
    from sharecon._produce.settings import Settings
    from sharecon._stats import ProducerStats

__all__ = ["Sender", "run_callback"]

logger = logging.getLogger("sharecon.producer")

_TRANSACTION_TIMEOUT_MS = 60_000  # sent with InitProducerId; ignored without a transactional id
# Metadata says this while a topic is being created or its leader elected: keep looking.
_TOPIC_NOT_READY = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})


_F = TypeVar("_F")


def run_callback(callback: Callable[[_F], object], future: _F) -> None:
    """Run a done callback; one that raises is logged, never passed on."""
    try:
        callback(future)
    except Exception:
        # A user's callback must not take the producer's dispatch loop down with it.
        logger.exception("a RecordFuture done callback raised (%r)", future)


class Sender:
    """The anyio side of one producer: implements the accumulator's hooks and runs its
    tasks in the producer's task group."""

    def __init__(self, settings: Settings, stats: ProducerStats) -> None:
        self.settings = settings
        self.stats = stats
        self.acc: Accumulator  # set by the producer right after (it takes this as hooks)
        self.engine: Engine  # set by attach(), with acc
        self.cluster: Cluster | None = None
        self.tg: TaskGroup | None = None
        self.wake_event = anyio.Event()
        #: Whether wake_event is set (a plain flag: send() reads it once per record).
        self.work = False
        self.space = anyio.Event()
        self.metadata_wanted = anyio.Event()
        self.topic_locks: dict[str, anyio.Lock] = {}
        #: Why the producer cannot go on (a producer id could not be replaced), if it can't.
        self.fatal: BaseException | None = None
        #: Called with ``closing=False`` when :attr:`fatal` is set.
        self.on_fatal: Callable[..., None] | None = None

    def attach(self, acc: Accumulator) -> None:
        """Take ``acc`` (made with this sender as its hooks) and run the engine over it."""
        self.acc = acc
        self.engine = Engine(acc, self.settings)

    # -- the accumulator's hooks -------------------------------------------------------------

    def wake(self) -> None:
        """The dispatcher has work."""
        self.work = True
        self.wake_event.set()

    def batch_done(self, batch: Batch) -> None:
        """Count the batch, free space, wake its waiters and run its callbacks."""
        error = batch.error
        if error is not None:
            root = batch.root()
            if root.unclaimed:
                # Nobody is waiting for some of these records: say so once, here.
                logger.warning(
                    "%r failed (%d records queued with send() whose futures were not awaited): %s",
                    batch,
                    root.unclaimed,
                    error,
                )
            else:
                logger.debug("%r failed: %s", batch, error)
        if batch.children is None:
            self.stats.on_batch_done(
                time.monotonic(), len(batch.timestamps), failed=error is not None
            )
            if not self.space.is_set():
                self.space.set()
        waiter = batch.waiter
        if waiter is not None:
            waiter.set()
        callbacks = batch.callbacks
        if callbacks is not None:
            batch.callbacks = None
            for future, callback in callbacks:
                run_callback(callback, future)

    def retrying(self, batch: Batch, error: errors.KafkaError) -> None:
        """Count a retry."""
        logger.debug("retrying %r (attempt %d): %s", batch, batch.attempts, error)
        self.stats.on_retry(time.monotonic(), len(batch.timestamps))

    def log(self, level: int, message: str, *args: object) -> None:
        """Log for the engine."""
        logger.log(level, message, *args)

    # -- waiting -----------------------------------------------------------------------------

    @staticmethod
    async def wait_done(batch: Batch) -> None:
        """Wait until ``batch`` is done (at once, with a checkpoint, if it is)."""
        if batch.done:
            await anyio.lowlevel.checkpoint()
            return
        waiter = batch.waiter
        if waiter is None:
            waiter = batch.waiter = anyio.Event()
        await waiter.wait()

    async def wait_for_space(self, check_open: Callable[[], object]) -> None:
        """Wait until delivered batches free buffer space (then ``check_open()``)."""
        if self.space.is_set():
            self.space = anyio.Event()
        self.acc.space_wanted += 1
        self.wake()
        try:
            await self.space.wait()
        finally:
            self.acc.space_wanted -= 1
        check_open()

    async def place_later(
        self,
        cluster: Cluster,
        topic: str,
        record: Prepared,
        partition: object,
        check_open: Callable[[], object],
    ) -> Batch:
        """Append a record that could not be placed at once: its topic or partition is not
        in the metadata yet, or the buffer is full."""
        acc = self.acc
        parts = cluster.metadata.partitions.get(topic)
        if not parts:
            # Only names the cluster does not know yet are checked, keeping the per-record
            # path cheap; an illegal name would otherwise wait out metadata_timeout.
            validate_topic_name(topic)
        count = len(parts) if parts else await self.partition_count(cluster, topic)
        part = acc.choose_partition(topic, record.key, partition, count, record.size)
        if part >= count:
            count = await self.partition_count(cluster, topic, refresh=True)
            if part >= count:
                raise errors.ConfigError(
                    f"partition {part} of topic {topic!r} does not exist "
                    f"(the topic has partitions 0..{count - 1})"
                )
        acc.check_size(topic, part, record.size)
        while not acc.has_room(record.size):
            await self.wait_for_space(check_open)
        return acc.append(
            topic, part, record.key, record.value, record.headers, record.timestamp, record.size
        )

    async def flush(self, timeout: float | None) -> None:
        """Send everything queued now (no linger) and wait until it is done."""
        pending = self.acc.pending()
        if not pending:
            return
        self.acc.flushing += 1
        self.wake()
        try:
            with anyio.fail_after(math.inf if timeout is None else timeout):
                for batch in pending:
                    await self.wait_done(batch)
        except TimeoutError:
            raise errors.KafkaTimeoutError(
                f"flush: {sum(not b.done for b in pending)} batches still unsent "
                f"after {timeout:g} s"
            ) from None
        finally:
            self.acc.flushing -= 1

    # -- topics and metadata -----------------------------------------------------------------

    async def partition_count(self, cluster: Cluster, topic: str, *, refresh: bool = False) -> int:
        """The number of partitions of ``topic``, looked up (with retries, for up to
        ``metadata_timeout``) when the metadata does not know it or ``refresh``."""
        parts = cluster.metadata.partitions.get(topic)
        if parts and not refresh:
            return len(parts)
        lock = self.topic_locks.setdefault(topic, anyio.Lock())
        async with lock:
            parts = cluster.metadata.partitions.get(topic)
            if parts and not refresh:
                return len(parts)
            timeout = self.settings.metadata_timeout
            deadline = anyio.current_time() + timeout
            attempt = 0
            last: errors.KafkaError | None = None
            while True:
                try:
                    meta = await cluster.refresh_metadata([topic])
                except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                    last = exc
                else:
                    parts = meta.partitions.get(topic)
                    if parts:
                        return len(parts)
                    code = meta.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    err = errors.error_for_code(code, f"topic {topic!r}")
                    assert err is not None
                    if code not in _TOPIC_NOT_READY:
                        raise err
                    last = err
                attempt += 1
                delay = self.settings.backoff.delay(attempt)
                if anyio.current_time() + delay >= deadline:
                    if isinstance(last, errors.UnknownTopicOrPartitionError):
                        raise errors.UnknownTopicOrPartitionError(
                            f"topic {topic!r} is not in the cluster metadata after {attempt} "
                            f"lookups over {timeout:g} s (this producer does not create topics)"
                        )
                    assert last is not None
                    raise last
                await anyio.sleep(delay)

    async def metadata_loop(self, cluster: Cluster) -> None:
        """Refresh metadata when asked (rule 3)."""
        attempt = 0
        while True:
            await self.metadata_wanted.wait()
            self.metadata_wanted = anyio.Event()
            topics = sorted({t for t, _ in self.acc.partitions})
            try:
                await cluster.refresh_metadata(topics)
                attempt = 0
            except errors.KafkaError as exc:
                logger.info("metadata refresh failed: %s", exc)
                self.metadata_wanted.set()
                attempt += 1
            self.wake()
            await anyio.sleep(self.settings.backoff.delay(attempt))

    # -- idempotence -------------------------------------------------------------------------

    async def init_producer_id(self, cluster: Cluster) -> tuple[int, int]:
        """A producer id and epoch from the cluster (retried for ``request_timeout``)."""
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS
        )
        deadline = anyio.current_time() + self.settings.request_timeout
        attempt = 0
        while True:
            failure: errors.KafkaError
            try:
                response = await cluster.request_any(request)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                failure = exc
            else:
                if response.error_code == ErrorCode.NONE:
                    logger.debug(
                        "producer id %d epoch %d", response.producer_id, response.producer_epoch
                    )
                    return response.producer_id, response.producer_epoch
                err = errors.error_for_code(
                    response.error_code, "InitProducerId for an idempotent producer"
                )
                assert err is not None
                if not err.retriable:
                    raise err
                failure = err
            delay = self.settings.backoff.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay >= deadline:
                raise failure
            await anyio.sleep(delay)

    async def _reset_producer_id(self, cluster: Cluster) -> None:
        # Started by the engine once nothing is in flight (its rule 2).
        engine = self.engine
        try:
            while True:
                try:
                    pid, epoch = await self.init_producer_id(cluster)
                    break
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    logger.info("getting a new producer id failed (%s); retrying", exc)
            logger.info(
                "new producer id %d (was %d): sequence numbers restart at 0",
                pid,
                self.acc.producer_id,
            )
            engine.reset_done(pid, epoch)
        except errors.KafkaError as exc:
            self.fatal = exc
            if self.on_fatal is not None:
                # First: callbacks run as the batches fail must not queue new records.
                self.on_fatal(closing=False)
            engine.reset_failed(exc)
            self.space.set()
        finally:
            self.wake()

    # -- dispatching -------------------------------------------------------------------------

    async def dispatch_loop(self, cluster: Cluster, tg: TaskGroup) -> None:
        """Send ready batches whenever there is work or something falls due (rule 1)."""
        try:
            while True:
                self.wake_event = anyio.Event()
                self.work = False
                wait = self._dispatch_round(cluster, tg)
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await self.wake_event.wait()
        except BaseException as exc:
            # Callers wait on batches; never leave them hanging.
            reason = exc if isinstance(exc, errors.KafkaError) else None
            self.fail_all(
                reason or errors.KafkaError(f"the producer stopped: {type(exc).__name__}")
            )
            raise

    def fail_all(self, error: errors.KafkaError) -> None:
        """Fail every batch not done yet, and release senders waiting for space."""
        self.acc.fail_all(error)
        self.space.set()

    def _dispatch_round(self, cluster: Cluster, tg: TaskGroup) -> float:
        decided = self.engine.poll(anyio.current_time(), cluster.metadata)
        if decided.reset:
            tg.start_soon(self._reset_producer_id, cluster)
        if decided.refresh:
            self.metadata_wanted.set()
        for out in decided.sends:
            tg.start_soon(self._send, cluster, out)
        return decided.wait

    async def _send(self, cluster: Cluster, out: Outgoing) -> None:
        engine = self.engine
        try:
            stats = self.stats
            started = time.monotonic()
            stats.on_request(started, [len(b.encoded or b"") for b in out.batches])
            try:
                response = await cluster.request(out.node, out.request)
            except errors.KafkaError as exc:
                if engine.failed(out, exc, anyio.current_time()):
                    self.metadata_wanted.set()
                return
            now = time.monotonic()
            stats.on_response(
                now,
                now - started,
                sum(len(b.timestamps) for b in out.batches),
                response.throttle_time_ms,
            )
            if engine.answered(
                out,
                response,
                anyio.current_time(),
                cluster.metadata,
                lambda hint: self._apply_hint(cluster, hint),
            ):
                self.metadata_wanted.set()
        finally:
            engine.abandoned(out)
            self.wake()

    @staticmethod
    def _apply_hint(cluster: Cluster, hint: LeaderHint) -> bool:
        endpoint = hint.endpoint
        return cluster.apply_leader_hint(
            hint.topic_id,
            hint.partition,
            hint.leader_id,
            hint.leader_epoch,
            None
            if endpoint is None
            else BrokerAddress(endpoint.host, endpoint.port, endpoint.node_id),
        )
