"""The producer's I/O side: one dispatcher task, one metadata task, the requests.

Rules of this module (the decisions themselves are :mod:`sharecon._produce`'s):

1. **One dispatcher, one request per leader per round.** The dispatcher asks the
   accumulator for every ready batch, groups them by leader broker and starts one
   Produce request per broker (split at ``max_request_size``). Requests to one broker
   share its connection, pipelined.
2. **Answers are applied through the policy table** (:mod:`sharecon._produce.policy`);
   the only I/O part of it is the leader hint of a NOT_LEADER answer, applied to the
   cluster view at once.
3. **Metadata** is refreshed by its own task, rate limited (a burst of NOT_LEADER answers
   needs one refresh, not one each).
4. **Producer id resets** stop sending, wait for in-flight requests, get a new producer
   id and restart every partition's sequence at 0. A reset that fails for good fails the
   producer (:attr:`Sender.fatal`) and every batch.
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
from sharecon._produce.policy import Action, transport_action
from sharecon.protocol import InitProducerIdRequest, ProduceRequest
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.produce import PartitionProduceData, TopicProduceData
from sharecon.protocol.names import validate_topic_name
from sharecon.types import ZERO_UUID

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from anyio.abc import TaskGroup

    from sharecon._net.cluster import Cluster
    from sharecon._produce.accumulator import Accumulator, Prepared
    from sharecon._produce.batch import Batch
    from sharecon._produce.settings import Settings
    from sharecon._stats import ProducerStats
    from sharecon.protocol import ProduceResponse
    from sharecon.protocol.messages.produce import PartitionProduceResponse

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
        self.cluster: Cluster | None = None
        self.tg: TaskGroup | None = None
        self.wake_event = anyio.Event()
        #: Whether wake_event is set (a plain flag: send() reads it once per record).
        self.work = False
        self.space = anyio.Event()
        self.idle = anyio.Event()
        self.metadata_wanted = anyio.Event()
        self.topic_locks: dict[str, anyio.Lock] = {}
        self.resetting = False
        #: Why the producer cannot go on (a producer id could not be replaced), if it can't.
        self.fatal: BaseException | None = None
        #: Called with ``closing=False`` when :attr:`fatal` is set.
        self.on_fatal: Callable[..., None] | None = None

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
        acc = self.acc
        try:
            while acc.in_flight:
                if self.idle.is_set():
                    self.idle = anyio.Event()
                await self.idle.wait()
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
                acc.producer_id,
            )
            acc.restart_sequences(pid, epoch)
        except errors.KafkaError as exc:
            self.fatal = exc
            if self.on_fatal is not None:
                self.on_fatal(closing=False)
            acc.fail_all(exc)
            self.space.set()
        finally:
            acc.reset_wanted = False
            self.resetting = False
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
        acc = self.acc
        if acc.reset_wanted and not self.resetting:
            self.resetting = True
            tg.start_soon(self._reset_producer_id, cluster)
        if self.resetting:
            return math.inf  # woken when the reset is done
        ready, wait, want_metadata = acc.ready(anyio.current_time(), cluster.metadata.partitions)
        if want_metadata:
            self.metadata_wanted.set()
        max_request = self.settings.max_request
        for node, batches in ready.items():
            for group in acc.requests(batches, max_request):
                tg.start_soon(self._send, cluster, node, group)
        return wait

    async def _send(self, cluster: Cluster, node: int, batches: list[Batch]) -> None:
        try:
            await self._send_request(cluster, node, batches)
        finally:
            self.acc.request_done(len(batches))
            if not self.acc.in_flight:
                self.idle.set()
            self.wake()

    async def _send_request(self, cluster: Cluster, node: int, batches: list[Batch]) -> None:
        meta = cluster.metadata
        by_topic: dict[str, list[Batch]] = {}
        for batch in batches:
            batch.attempts += 1
            by_topic.setdefault(batch.topic, []).append(batch)
        request = ProduceRequest(
            transactional_id=None,
            acks=self.settings.acks,
            timeout_ms=int(self.settings.request_timeout * 1000),
            topic_data=tuple(
                TopicProduceData(
                    name=topic,
                    topic_id=meta.topic_ids.get(topic, ZERO_UUID),
                    partition_data=tuple(
                        PartitionProduceData(index=b.partition, records=b.encoded) for b in group
                    ),
                )
                for topic, group in by_topic.items()
            ),
        )
        stats = self.stats
        started = time.monotonic()
        stats.on_request(started, [len(b.encoded or b"") for b in batches])
        try:
            response = await cluster.request(node, request)
        except errors.KafkaError as exc:
            action = transport_action(exc)
            if action is not Action.FAIL:
                # The request may or may not have been written: retry the same bytes.
                self.metadata_wanted.set()
            self.acc.transport_failed(batches, exc, action, anyio.current_time())
            return
        now = time.monotonic()
        stats.on_response(
            now, now - started, sum(len(b.timestamps) for b in batches), response.throttle_time_ms
        )
        self._handle_response(cluster, node, batches, response)

    def _handle_response(
        self, cluster: Cluster, node: int, batches: list[Batch], response: ProduceResponse
    ) -> None:
        names = dict(cluster.metadata.topic_names)
        answers: dict[tuple[str, int], PartitionProduceResponse] = {}
        for topic in response.responses:
            name = topic.name or names.get(topic.topic_id, "")
            for part in topic.partition_responses:
                answers[(name, part.index)] = part
        endpoints = {
            e.node_id: BrokerAddress(e.host, e.port, e.node_id) for e in response.node_endpoints
        }
        now = anyio.current_time()
        for batch in batches:
            answer = answers.get((batch.topic, batch.partition))
            if answer is None:
                self.acc.finish(
                    batch,
                    errors.RemoteProtocolError(
                        f"broker {node}: the Produce response does not mention "
                        f"{batch.topic}-{batch.partition}"
                    ),
                )
                continue
            self._apply(cluster, node, batch, answer, endpoints, now)

    def _apply(
        self,
        cluster: Cluster,
        node: int,
        batch: Batch,
        pr: PartitionProduceResponse,
        endpoints: Mapping[int, BrokerAddress],
        now: float,
    ) -> None:
        code = pr.error_code
        action = self.acc.answer_action(batch, code)
        err: errors.KafkaError | None = None
        hinted = False
        if action is not Action.WRITTEN:
            detail = f"topic {batch.topic!r} partition {batch.partition} (broker {node})"
            if pr.error_message:
                detail += f": {pr.error_message}"
            err = errors.error_for_code(code, detail)
            assert err is not None
        if action is Action.RETRY:
            leader = pr.current_leader
            tid = cluster.metadata.topic_ids.get(batch.topic)
            if leader.leader_id >= 0 and tid is not None:
                hinted = cluster.apply_leader_hint(
                    tid,
                    batch.partition,
                    leader.leader_id,
                    leader.leader_epoch,
                    endpoints.get(leader.leader_id),
                )
            self.metadata_wanted.set()
        self.acc.answered(
            batch,
            action,
            err,
            base_offset=pr.base_offset,
            log_append_time=pr.log_append_time_ms,
            now=now,
            hinted=hinted,
        )
