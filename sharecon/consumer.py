"""ShareConsumer: read a share group's records with ``async for``, answer each one.

The consumer owns one task group: a heartbeat loop (group membership) and one fetch loop
per leader broker (share sessions). Records reach the application through a bounded
buffer; answers (accept, release, reject, renew) are collected, coalesced into ranges and
sent piggybacked on the next fetch to the partition's leader, or in a ShareAcknowledge
when no fetch is due (``commit()``, close, or after ``ack_linger`` seconds).

Acknowledgement modes:

* ``implicit`` (default): a record the application has not answered is accepted when the
  iteration moves past it (or the next batch is asked for, or ``commit()`` runs). When the
  consumer closes, records delivered but not answered are **released**, so a handler that
  crashes never loses a record.
* ``explicit``: every delivered record must be answered before the next one (or the next
  batch) is asked for; otherwise :class:`~sharecon.errors.UnacknowledgedRecordsError`
  names the records.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from functools import partial
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any, Generic, Literal, cast

import anyio
import anyio.lowlevel

from sharecon import errors
from sharecon._consumer.backlog import keep_lag, partition_metrics
from sharecon._consumer.closing import CloseStep, close_steps
from sharecon._consumer.config import AcquireMode, ConsumerConfig, check_max_records, topics_tuple
from sharecon._consumer.core import ConsumerCore
from sharecon._consumer.cursor import CHECKPOINT_EVERY, Cursor
from sharecon._consumer.dead_letters import route_dead_letters
from sharecon._consumer.delayed import DelayedReleaser, run_ticks
from sharecon._consumer.deserialize import Deserializers
from sharecon._consumer.fetcher import FetcherPool
from sharecon._consumer.group_config import lock_duration as group_lock_duration
from sharecon._consumer.handout import owner_of
from sharecon._consumer.heartbeat import heartbeat_loop
from sharecon._consumer.holdback import Holdback
from sharecon._consumer.liveness import Liveness
from sharecon._consumer.lock_keeping import keep_locks, renewals_allowed
from sharecon._consumer.process import Host, run_workers
from sharecon._lifecycle import ClientRuntime
from sharecon._net.clock import event_loop_clock
from sharecon._net.cluster import (
    Cluster,
    has_record_limit,
    require_record_limit,
    require_share_groups,
)
from sharecon._net.connect import ConnectionConfig
from sharecon._net.health import ClusterHealth  # noqa: TC001 - resolvable for get_type_hints
from sharecon._share.breaker import DeadLetterBreaker
from sharecon._share.dead_letter_retry import retry_in as dead_letter_retry_in
from sharecon._share.lock_keeper import LockKeeper
from sharecon._share.membership import MemberState
from sharecon._telemetry import check_enabled, metric_points
from sharecon.dlq import DeadLetterPolicy, DeadLetterRouter, routing_error
from sharecon.metrics import CONSUMER_METRICS
from sharecon.protocol import ShareGroupHeartbeatRequest
from sharecon.protocol.names import validate_topic_name
from sharecon.record import K, V, check_delay
from sharecon.serde import AnyDeserializer, AsyncWithContext, WithContext
from sharecon.types import AckType, TopicIdPartition, TopicPartition

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
    from types import TracebackType

    from typing_extensions import Self

    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon._share.ledger import AckResult
    from sharecon.metrics import ConsumerMetrics, PartitionMetrics
    from sharecon.producer import RecordMetadata
    from sharecon.record import Record

__all__ = ["ConsumerHealth", "ShareConsumer"]

#: Dead-letter copy failures that another attempt at the same record cannot fix.
_NEVER_FITS = (errors.MessageTooLargeError, errors.RecordListTooLargeError)

logger = logging.getLogger("sharecon.consumer")
#: Every consumer metric as a KIP-714 point.
_CONSUMER_POINTS = metric_points(CONSUMER_METRICS, "consumer")

#: The answers acknowledge_offset() gives (a renew goes through the Record, whose deadline
#: it moves; GAP is the consumer's own).
_OFFSET_ACKS = frozenset({AckType.ACCEPT, AckType.RELEASE, AckType.REJECT})

#: The (de)serializer wrappers of sharecon.serde: not callables themselves.
_WRAPPED = (WithContext, AsyncWithContext)


class ShareConsumer(Generic[K, V]):
    """An asyncio/trio consumer of a Kafka share group (KIP-932).

    ::

        async with ShareConsumer("localhost:9092", group_id="billing", topics=["invoices"]) as c:
            async for record in c:
                await handle(record)            # implicit mode: accepted when the loop moves on

    :param bootstrap: ``"host:port"``, a comma-separated list, or a sequence of them.
    :param group_id: the share group.
    :param topics: topic names to subscribe to.
    :param ack_mode: ``"implicit"`` (default) or ``"explicit"`` (see the module docs).
    :param max_records: records per fetch and per :meth:`batches` batch (MaxRecords).
    :param max_wait_ms: how long the broker may hold a fetch waiting for records.
    :param min_bytes: bytes the broker waits for before answering a fetch.
    :param fetch_max_bytes: most bytes per fetch response.
    :param max_buffered_records: fetching pauses while this many records wait in memory
        (default ``2 * max_records``; at the default, one more answer may wait behind an
        answer over it when both can be handled within the lock at the measured rate).
    :param max_buffered_bytes: likewise for bytes (default ``fetch_max_bytes``).
    :param ack_linger: seconds answered records may wait for a fetch to carry them before
        a ShareAcknowledge is sent on its own.
    :param on_acknowledged: called with the per-partition outcome of every acknowledgement
        request (successes and failures, e.g. INVALID_RECORD_STATE after a lock expired).
    :param request_timeout: seconds a request may wait for its response.
    :param close_timeout: seconds :meth:`close` may take.
    :param client_id: sent to the brokers (logs, quotas).
    :param ssl_context: enables TLS (verification on with :func:`ssl.create_default_context`).
    :param sasl: SASL credentials (:class:`sharecon.SaslConfig`), or a Kerberos login
        (:class:`sharecon.config.GssapiConfig`).
    :param connect_timeout: seconds to connect, negotiate and authenticate.
    :param config: a complete :class:`~sharecon.config.ConnectionConfig` (TLS files for
        mutual TLS, SASL, client id, timeouts) instead of ``client_id``, ``ssl_context``,
        ``sasl`` and ``connect_timeout``, as ``Producer`` and ``Admin`` take it. Giving one
        of those as well is a :class:`~sharecon.errors.ConfigError` unless it says the same.
    :param rack_id: the client's rack, sent when joining.
    :param dlq_topic: the dead-letter topic for :meth:`reject_to_dlq` (default
        ``dlq.<group_id>``).
    :param dead_letter: a :class:`~sharecon.dlq.DeadLetterPolicy`: a record the
        application failed here (a handler error, ``record.release()``) that comes back
        past ``max_deliveries`` is routed to the dead-letter topic instead of being
        delivered again (every record past it with ``route_unseen=True``).
    :param acquire_mode: ``"batch"`` (default): the broker acquires whole batches, so a
        fetch may bring more than ``max_records``. ``"record_limit"`` (Kafka 4.2+, KIP-1206):
        this member never holds more than ``max_records`` records at once (buffered, handed
        out or answered but not yet confirmed), nor more than it handles within half the
        acquisition lock at its measured handling rate (16 until measured), so records do
        not wait in its buffer until their locks end while other members could handle
        them; older brokers are refused at :meth:`start` with
        :class:`~sharecon.errors.UnsupportedVersionError`. ``"auto"``: ``"record_limit"``
        where the broker has it, ``"batch"`` on Kafka 4.1.
    :param keep_locks: renew the lock of every record handed out and not yet answered
        when it nears its end (Kafka 4.2+), for at most ``max_hold`` seconds per record.
        :meth:`process` does this by default. A failed renewal is logged (WARNING) and
        counted in :meth:`health`. A group whose ``share.renew.acknowledge.enable`` is
        false (Kafka 4.3+) makes :meth:`start` raise
        :class:`~sharecon.errors.IncompatibleBrokerError` with ``keep_locks=True``.
    :param max_hold: seconds after its delivery that a record's lock stops being renewed.
    :param max_poll_interval: seconds the application may go without taking a record
        (iteration, :meth:`poll`, :meth:`batches`, :meth:`process`) before this member
        leaves the group, releasing what it holds; it rejoins when it asks again.
        ``None`` turns this off. Like Java's ``max.poll.interval.ms`` (default 300 s).
    :param key_deserializer: turns each record's key bytes into ``record.key`` (see
        :mod:`sharecon.serde`; :func:`~sharecon.serde.with_context` or
        :func:`~sharecon.serde.async_deserializer` for one that is given the record's
        topic, partition, offset and headers, or is awaited where records are handed
        out); never called for a null key. Typed records follow:
        ``ShareConsumer[K, V]`` hands out ``Record[K, V]``.
    :param value_deserializer: the same for ``record.value`` (never called for a
        tombstone). A record either one fails for is not handed out: the call that would
        have handed it out raises :class:`~sharecon.errors.DeserializationError` and the
        record is released (or, on its last allowed delivery under ``dead_letter``,
        routed to the dead-letter topic); the next call goes on with the next record.
    :param enable_metrics_push: push this consumer's metrics to brokers that ask for
        them (KIP-714 client telemetry, as Java's ``enable.metrics.push``): nothing is
        sent unless a client-metrics subscription on the cluster matches this client.
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
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_buffered_records: int = 0,
        max_buffered_bytes: int = 0,
        ack_linger: float = 0.1,
        on_acknowledged: Callable[[list[AckResult]], None] | None = None,
        request_timeout: float = 30.0,
        close_timeout: float = 30.0,
        client_id: str = "sharecon",
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | GssapiConfig | None = None,
        connect_timeout: float = 10.0,
        config: ConnectionConfig | None = None,
        rack_id: str | None = None,
        dlq_topic: str | None = None,
        dead_letter: DeadLetterPolicy | None = None,
        acquire_mode: AcquireMode = "batch",
        keep_locks: bool = False,
        max_hold: float = 300.0,
        max_poll_interval: float | None = 300.0,
        key_deserializer: AnyDeserializer[K] | None = None,
        value_deserializer: AnyDeserializer[V] | None = None,
        enable_metrics_push: bool = True,
    ) -> None:
        self._enable_metrics_push = check_enabled(enable_metrics_push)
        self._config = ConsumerConfig(
            group_id=group_id,
            topics=topics_tuple(topics),
            ack_mode=ack_mode,
            max_records=max_records,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_buffered_records=max_buffered_records,
            max_buffered_bytes=max_buffered_bytes,
            ack_linger=ack_linger,
            request_timeout=request_timeout,
            close_timeout=close_timeout,
            rack_id=rack_id,
            acquire_mode=acquire_mode,
            keep_locks=keep_locks,
            max_hold=max_hold,
            max_poll_interval=max_poll_interval,
        )
        if dlq_topic is not None:
            validate_topic_name(dlq_topic, param="dlq_topic")
        self._bootstrap = bootstrap
        if config is not None:
            _check_same_connection(
                config,
                client_id=client_id,
                ssl_context=ssl_context,
                sasl=sasl,
                connect_timeout=connect_timeout,
            )
        self._connection = config or ConnectionConfig(
            client_id=client_id,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            ssl_context=ssl_context,
            sasl=sasl,
        )
        self._on_acknowledged = on_acknowledged
        for name, fn in (
            ("key_deserializer", key_deserializer),
            ("value_deserializer", value_deserializer),
        ):
            if fn is not None and not callable(fn) and not isinstance(fn, _WRAPPED):
                raise errors.ConfigError(
                    f"{name} must be a callable taking bytes (or made by with_context() "
                    f"or async_deserializer()), not {type(fn).__name__}"
                )
        self._deserializers = Deserializers(key_deserializer, value_deserializer)
        # The kind of each deserializer is read once, here (sharecon.serde rule 4).
        self._deserialize = self._deserializers.apply_sync
        #: With an async deserializer: the step hand-out awaits instead of _deserialize.
        self._deserialize_async = (
            self._deserializers.apply_async if self._deserializers.awaits else None
        )
        self._deserializing = self._deserializers.active
        #: Per-record work at hand-out beyond popping (deserializers, lock keeping): one
        #: test per record decides it, so a consumer with neither pays nothing more.
        self._prepare_each = self._deserializing
        #: A DeserializationError for a record met while a poll() filled its batch:
        #: raised by the next call, after the records before it were handed out.
        self._pending_error: errors.DeserializationError | None = None
        #: Records a cancelled hand-out took from the buffer: the next one serves them
        #: first (sharecon._consumer.holdback).
        self._held = Holdback(self._held_expired, self._held_holds)
        if (
            dead_letter is not None
            and dlq_topic is not None
            and dead_letter.topic not in (None, dlq_topic)
        ):
            raise errors.ConfigError("dlq_topic and dead_letter.topic name different topics")
        self._dead_letter = dead_letter
        # reject_to_dlq works without a policy too: its topic comes from either argument.
        policy = dead_letter or DeadLetterPolicy()
        self._dlq_policy = replace(policy, topic=policy.topic or dlq_topic)
        #: The dead-letter circuit breaker of process() (None: no policy, or turned off).
        self._breaker: DeadLetterBreaker | None = None
        if dead_letter is not None and dead_letter.breaker_threshold is not None:
            self._breaker = DeadLetterBreaker(
                dead_letter.breaker_threshold,
                dead_letter.breaker_window,
                dead_letter.breaker_cooldown,
            )
        self._router: DeadLetterRouter | None = None
        self._runtime = ClientRuntime("ShareConsumer")
        self._life = self._runtime.life
        self._core: ConsumerCore | None = None
        #: The fetch loops (``stop_fetching()`` and ``fetching_stopped()`` reach them).
        self._fetch_pool: FetcherPool | None = None
        self._heartbeat_done = anyio.Event()
        self._explicit = ack_mode == "explicit"
        self._batch_out = False
        #: Records handed out and not answered, whose locks are renewed (``keep_locks``).
        self._keeper: LockKeeper[Record[Any, Any]] | None = None
        #: Records released with a delay (``record.release(delay=...)``), made on first use.
        self._delayed: DelayedReleaser | None = None
        #: process() calls running (a delayed release in implicit mode needs one).
        self._processing = 0
        #: Liveness (``max_poll_interval``): how often the application asked for records,
        #: how many of its tasks wait for records now, and whether it was made to leave.
        self._liveness = Liveness(self._config.max_poll_interval, self._config.request_timeout)
        #: ``async for``: the current record and the per-record step (compiled).
        self._cursor = Cursor(self, self._liveness, explicit=self._explicit)
        self._cursor.prepare_each = self._prepare_each

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, check the cluster supports share groups, and join the group.

        Returns once the coordinator has accepted this member (its first assignment may
        still be empty while the broker initialises the group's state).

        :raises BrokerConnectError: no bootstrap broker could be reached.
        :raises IncompatibleBrokerError: the broker is too old, or share groups are off.
        :raises BrokerError: the group cannot be joined (e.g. GROUP_AUTHORIZATION_FAILED).
        :raises ClientStateError: it was started already; :class:`ClientClosedError` (a
            subclass) once it was closed, or after a start that failed.
        """
        # A second life would be a new member nobody closes: it would heartbeat and hold
        # records until the process exits. So a closed consumer never starts again.
        connect = self._runtime.starting(lambda g: Cluster(self._bootstrap, self._connection, g))
        async with connect as (cluster, tg):
            require_share_groups(cluster.versions, cluster.bootstrap_addresses[0])
            if self._config.acquire_mode == "record_limit":
                require_record_limit(cluster.versions)
            elif self._config.acquire_mode == "auto":
                mode: AcquireMode = (
                    "record_limit" if has_record_limit(cluster.versions) else "batch"
                )
                self._config = replace(self._config, acquire_mode=mode)
            await cluster.refresh_metadata(self._config.topics)
            missing = [t for t in self._config.topics if t not in cluster.metadata.topic_ids]
            refused = [
                t
                for t in missing
                if cluster.metadata.topic_errors.get(t)
                == errors.ErrorCode.TOPIC_AUTHORIZATION_FAILED
            ]
            if refused:
                # Not "missing": the principal may not DESCRIBE them (the first heartbeat
                # is refused too, and start() raises TopicAuthorizationFailedError).
                logger.warning(
                    "share consumer of group %s: not authorized to describe subscribed topics: %s",
                    self._config.group_id,
                    ", ".join(refused),
                )
                missing = [t for t in missing if t not in refused]
            if missing:
                # Not fatal: the topic may be created later; but say so, once.
                logger.warning(
                    "share consumer of group %s: subscribed topics do not exist (yet): %s",
                    self._config.group_id,
                    ", ".join(missing),
                )
            core = ConsumerCore(
                cluster,
                self._config,
                tg,
                on_acknowledged=self._on_acknowledged,
                client_id=self._connection.client_id,
            )
            core.handout.owner = self
            core.clock = event_loop_clock()  # read per record: looked up once, here
            core.fetchers = self._fetch_pool = FetcherPool(core)
            self._core = core
            self._cursor.core = core
            breaker = self._breaker
            if breaker is not None:
                # Fetching holds while the breaker is open: asked at each turn, so the end
                # of the cool-down lets it go on whoever (if anyone) is looking.
                core.buffer.held = lambda: breaker.holds(core.clock)
            self._router = DeadLetterRouter(
                self._bootstrap,
                self._connection,
                self._config.group_id,
                self._dlq_policy,
                cluster.versions.feature_level("share.version"),
            )
            if self._dead_letter is not None:
                core.machine.dead_letter_limit = self._dead_letter.max_deliveries
                core.machine.route_unseen = self._dead_letter.route_unseen
                tg.start_soon(self._route_dead_letters, core, name="sharecon dead letters")
            tg.start_soon(self._run_heartbeat, core, name="sharecon heartbeat")
            if self._enable_metrics_push:
                self._runtime.push_metrics(
                    lambda: _CONSUMER_POINTS(core.metrics()),
                    resource={
                        "client_id": self._connection.client_id,
                        "group_id": self._config.group_id,
                    },
                    request_timeout=self._config.request_timeout,
                    logger=logger,
                )
            tg.start_soon(keep_lag, core, name="sharecon lag")
            if self._config.keep_locks:
                core.check_renew()
                await self._check_renewals(core, explicit=True)
                self._keeper = LockKeeper(self._config.max_hold)
                self._prepare_each = self._cursor.prepare_each = True
                tg.start_soon(self._keep_locks, core, self._keeper, name="sharecon lock keeper")
            if self._config.max_poll_interval is not None:
                tg.start_soon(self._watch_liveness, core, name="sharecon liveness")
            join_limit = self._config.request_timeout + self._connection.connect_timeout
            with anyio.move_on_after(join_limit) as join_scope:
                await core.joined.wait()
            if join_scope.cancelled_caught:
                raise errors.KafkaTimeoutError(
                    f"group {self._config.group_id!r}: the coordinator did not accept this "
                    f"member within {join_limit:g} s"
                )
            if core.fatal is not None:
                raise core.fatal
            core.stats.poll_timer_from(_monotonic())

    @property
    def _closed(self) -> bool:
        return self._runtime.state == "closed"

    async def _run_heartbeat(self, core: ConsumerCore) -> None:
        try:
            await heartbeat_loop(core)
        finally:
            self._heartbeat_done.set()

    async def close(self, timeout: float | None = None) -> None:
        """Leave the group cleanly; bounded by ``timeout`` (default ``close_timeout``).

        Records delivered but not answered, and records still buffered, are released;
        pending answers are sent with the final ShareAcknowledge (epoch -1) to each
        leader, which also ends the share sessions; then the member leaves the group.
        Shielded from cancellation, and never longer than the timeout. Closing again, or
        closing a consumer never started, does nothing.

        An iteration in progress (``async for``, :meth:`batches`, :meth:`process`, a
        waiting :meth:`poll`) ends when the consumer closes; a call made after the
        close raises :class:`~sharecon.errors.ClientClosedError`.
        """
        if not self._runtime.begin_close():
            return
        core = self._core
        limit = self._config.close_timeout if timeout is None else timeout
        if core is None:
            await self._runtime.shutdown(timeout=limit)
            return
        # The farewell reconnects in a task group of the closing task if an enclosing
        # cancel scope cancelled the consumer's loops and connection readers.
        if await self._runtime.shutdown(lambda _: self._leave(core), limit):
            logger.warning("share consumer %s: close timed out after %g s", core.member_id, limit)

    async def aclose(self) -> None:
        """:meth:`close` with the default timeout (the name every sharecon client has)."""
        await self.close()

    async def _leave(self, core: ConsumerCore) -> None:
        # The order is sharecon._consumer.closing's (the simulator runs it too); each step
        # is carried out here.
        for step in close_steps(core.machine, core.buffer, core.apply_effects):
            if step is CloseStep.STOP_DEAD_LETTERS:
                core.dead_letter_signal.set()
                if self._router is not None:
                    await self._router.stop()
            elif step is CloseStep.CLOSE_FETCHERS:
                core.wake_all()
                core.buffer.data.set()
                await core.fetchers.close()
                core.tick_expiry(closing=True)  # nothing counted is left unsaid
            elif not self._heartbeat_done.is_set():  # CloseStep.LEAVE_GROUP
                core.membership.leave()
                core.heartbeat_wake.set()
                await self._heartbeat_done.wait()
        if core.membership.state not in (MemberState.LEFT, MemberState.FATAL):
            await self._leave_directly(core)

    async def _leave_directly(self, core: ConsumerCore) -> None:
        """Send the leave heartbeat from the closing task (the heartbeat loop is gone)."""
        membership = core.membership
        if membership.in_flight:
            membership.on_error(anyio.current_time())  # its answer will never be read
        membership.leave()
        plan = membership.build_heartbeat(anyio.current_time())
        if plan is None:
            return
        request = ShareGroupHeartbeatRequest(
            group_id=plan.group_id, member_id=plan.member_id, member_epoch=plan.member_epoch
        )
        try:
            node = await core.cluster.coordinator(plan.group_id)
            resp = await core.cluster.request(node, request, timeout=self._config.request_timeout)
        except errors.KafkaError as exc:
            logger.info("share consumer %s: leaving the group failed: %s", plan.member_id, exc)
            membership.on_error(anyio.current_time())
            return
        membership.on_response(anyio.current_time(), error_code=resp.error_code)

    # -- state --------------------------------------------------------------------------

    def _running(self) -> ConsumerCore:
        """The core, for views that still answer after close (health, member id...)."""
        core = self._core
        if core is None:
            raise self._life.error()
        return core

    def _live(self) -> ConsumerCore:
        """The core, for calls that need the consumer running (not closed)."""
        core = self._core
        if core is None or self._closed:
            raise self._life.error()
        return core

    @property
    def member_id(self) -> str:
        """This consumer's member id in the share group."""
        return self._running().member_id

    @property
    def group_id(self) -> str:
        """The share group."""
        return self._config.group_id

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the coordinator assigned to this member (may be empty)."""
        return frozenset(
            TopicPartition(tp.topic or str(tp.topic_id), tp.partition)
            for tp in self._running().assignment
        )

    @property
    def recent_errors(self) -> list[errors.KafkaError]:
        """Recent errors that did not stop the consumer (corrupt batches, answers that could
        not be taken in, brokers that could not be reached...), newest last; at most 100."""
        return list(self._running().errors)

    def health(self) -> ConsumerHealth:
        """A read-only status for a health check (liveness or readiness probe).

        ``ok`` is true while the consumer runs, is a stable member of its group, has not
        failed, every broker it needs is reachable (see :class:`ClusterHealth` for
        which broker is down, since when, and why), and records waiting at a leader are
        not stuck there (``stuck_for``: for longer than the lock duration, every fetch
        came back after its records' locks ended, or not at all), and no partition is
        ``blocked`` (its batches cannot cross the link within the lock: it is no longer
        fetched, and the reason names the batch size, the measured rate and the lock).
        """
        core = self._running()
        cluster = core.cluster.health()
        state = core.membership.state
        fatal = core.fatal
        running = not (self._closed or core.closing)
        stuck = core.stuck()
        breaker = self._breaker
        tripped = breaker.reason if breaker is not None and breaker.is_open(core.clock()) else None
        blocked = core.blocked()
        return ConsumerHealth(
            ok=running
            and fatal is None
            and state is MemberState.STABLE
            and cluster.ok
            and not stuck
            and tripped is None
            and not blocked,
            running=running,
            member_state=state.name.lower(),
            failed=None if fatal is None else f"{type(fatal).__name__}: {fatal}",
            assigned_partitions=len(core.assignment),
            buffered_records=core.buffer.records,
            cluster=cluster,
            stuck_for=stuck,
            dead_letter_breaker=tripped,
            blocked=blocked,
            expired_in_buffer=core.expiry.total,
            released_unreachable=core.released_unreachable,
            past_limit_unseen=core.machine.past_limit_unseen,
        )

    def reset_dead_letter_breaker(self) -> bool:
        """Close the dead-letter circuit breaker now (see
        :class:`~sharecon.dlq.DeadLetterPolicy` ``breaker_threshold``): :meth:`process`
        hands out records again within 0.5 s, and fetching goes on. Returns whether it was
        open.

        :raises ClientClosedError: the consumer was closed.
        """
        core = self._live()
        breaker = self._breaker
        was_open = breaker is not None and breaker.is_open(core.clock())
        if breaker is not None:
            breaker.reset()  # closes a half-open one too: the window starts afresh
        core.buffer.resume()
        if was_open:
            logger.warning("share consumer %s: dead-letter circuit breaker reset", core.member_id)
        return was_open

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of this consumer's metrics, named and meant as the Java share
        consumer's (see :mod:`sharecon.metrics`); readable after :meth:`close` too, and
        from any thread (an exporter's)."""
        return self._running().metrics()

    def partition_metrics(self) -> tuple[PartitionMetrics, ...]:
        """Per partition assigned to this member (or still holding its records): the
        share-partition lag the broker reports, and this member's buffered, held and
        in-flight records and lock expiries (see :class:`~sharecon.metrics.PartitionMetrics`).

        The lag is fetched in the background while this is read (at most every 10 s per
        group, shared by the group's members in this process): the first reads give ``-1``
        until it has been fetched. Readable from any thread, and after :meth:`close`.
        """
        return partition_metrics(self._running())

    @property
    def on_acknowledged(self) -> Callable[[list[AckResult]], None] | None:
        """The callback given every acknowledgement outcome (``None`` for none).

        Settable at any time, before or after :meth:`start`; outcomes reported from then
        on go to the new callback.

        :raises ConfigError: (on set) the value is neither callable nor ``None``.
        """
        return self._on_acknowledged

    @on_acknowledged.setter
    def on_acknowledged(self, callback: Callable[[list[AckResult]], None] | None) -> None:
        if callback is not None and not callable(callback):
            raise errors.ConfigError(
                "on_acknowledged must be a callable taking a list of AckResult, or None, "
                f"not {type(callback).__name__}"
            )
        self._on_acknowledged = callback
        if self._core is not None:
            # The loops report through the core: it must see the new callback at once.
            self._core.outcomes.callback = callback

    def subscribe(self, topics: Iterable[str]) -> None:
        """Replace the subscription; the next heartbeat tells the coordinator.

        :raises ConfigError: no topics, or a name Kafka would refuse (checked here, so a
            bad name fails at once instead of never matching a topic).
        """
        topics = topics_tuple(topics)
        if not topics:
            raise errors.ConfigError("subscribe() needs at least one topic name")
        for t in topics:
            validate_topic_name(t, param="topics")
        core = self._live()
        core.subscribe(topics)

    async def lock_duration(self, *, timeout: float | None = None) -> float:
        """The group's acquisition lock duration, in seconds: how long each record stays
        locked for this consumer after a fetch (``record.lock_deadline`` is the end of it).

        Asked of the cluster on each call (a group config may change): the group's
        ``share.record.lock.duration.ms`` (DescribeConfigs on the group), or, if that
        cannot be read, the group coordinator's ``group.share.record.lock.duration.ms``.

        :param timeout: seconds per request (default ``request_timeout``).
        :raises ConfigError: ``timeout`` is not a positive number.
        :raises BrokerError: neither config could be read (e.g. an authorization failure).
        """
        core = self._live()
        limit = self._config.request_timeout if timeout is None else timeout
        return await group_lock_duration(core.cluster, self._config.group_id, timeout=limit)

    @property
    def subscription(self) -> frozenset[str]:
        """The topics subscribed to (empty after :meth:`unsubscribe`)."""
        core = self._core
        return frozenset(self._config.topics if core is None else core.membership.topics)

    def unsubscribe(self) -> None:
        """Stop consuming every topic; :meth:`subscribe` starts again.

        At once: nothing more is fetched, and every record fetched but not handed out yet
        is released (delivered again, to this member or another). The next heartbeat
        sends an empty subscription and the coordinator takes the assignment away; the
        member stays in the group. Records already handed out are still yours to answer
        (in implicit mode the current one is accepted when you move on, as usual).
        Meanwhile ``async for`` and :meth:`poll` wait (``poll`` returns ``[]`` on timeout).

        :raises ClientClosedError: the consumer was closed.
        """
        core = self._live()
        if core.closing:
            return
        released = core.unsubscribe()
        logger.info(
            "share consumer %s unsubscribed; released %d buffered records",
            core.member_id,
            released,
        )

    def stop_fetching(self) -> None:
        """Fetch no more records, for good; everything else goes on.

        Records already fetched are still handed out, and answers are still sent (with
        ShareAcknowledge). A fetch already on its way may still bring records (within
        ``max_wait_ms``): :meth:`fetching_stopped` says when none is left. For a drain
        that finishes what this member acquired instead of releasing it, which would spend
        one of each record's delivery attempts (``sharecon worker`` drains so);
        :meth:`close` afterwards.

        :raises ClientClosedError: the consumer was closed.
        """
        self._live()
        assert self._fetch_pool is not None
        self._fetch_pool.stop_fetching()

    async def fetching_stopped(self, timeout: float | None = None) -> bool:
        """Wait until, after :meth:`stop_fetching`, no fetch is outstanding: none planned,
        none on the wire, none whose records are still being taken in. From then on
        nothing more arrives; what was fetched is in the buffer or handed out, so a drain
        is over once :meth:`metrics` shows no buffered and no held records.

        Also true once the consumer closed after :meth:`stop_fetching` (its fetch loops
        ended).

        :param timeout: the most seconds to wait (``None``: no limit).
        :returns: True once drained; False if ``timeout`` passed first.
        :raises ClientStateError: :meth:`stop_fetching` was not called.
        :raises ClientNotStartedError: the consumer was never started.
        """
        pool = self._fetch_pool
        if pool is None:
            raise self._life.error()
        if not pool.drain.stopped:
            raise errors.ClientStateError("fetching_stopped() before stop_fetching()")
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            await pool.drained.wait()
        return pool.drained.is_set()

    # -- acknowledgements -----------------------------------------------------------------

    def acknowledge(self, record: Record[Any, Any], ack: AckType = AckType.ACCEPT) -> None:
        """Answer one delivered record (the same as ``record.accept()`` and friends).

        :raises InvalidRecordStateError: the record was already answered, or is not held
            by this consumer.
        :raises UnsupportedVersionError: RENEW against a broker older than Kafka 4.2.
        """
        core = self._core
        if core is None:
            raise errors.InvalidRecordStateError(
                f"{record.topic}-{record.partition} offset {record.offset}: the consumer is "
                "not started"
            )
        self._cursor.acknowledge(core.handout, record, ack)

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, ack: AckType = AckType.ACCEPT
    ) -> None:
        """Answer the delivered record at ``topic``/``partition``/``offset`` without its
        :class:`Record` (as Java's ``acknowledge(topic, partition, offset, type)``).

        The same rules as :meth:`acknowledge`: the answer is collected and sent with the
        next request; a record whose lock the consumer lost is reported
        (``AckFailure.LOCK_LOST``), not raised. Only ACCEPT, RELEASE and REJECT: renew
        through the record (``record.renew()``), so its ``lock_deadline`` follows.

        :raises ConfigError: a wrong type or value (``partition`` or ``offset`` negative,
            ``ack`` not ACCEPT, RELEASE or REJECT).
        :raises InvalidRecordStateError: this consumer did not hand out a record there
            (never fetched, another member's, fetched but not handed out yet), it was
            already answered, or the consumer is not started or is closed.
        """
        if not isinstance(topic, str) or not topic:
            raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
        for name, value in (("partition", partition), ("offset", offset)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise errors.ConfigError(f"{name} must be an int >= 0, not {value!r}")
        if not isinstance(ack, AckType) or ack not in _OFFSET_ACKS:
            raise errors.ConfigError(
                "acknowledge_offset() takes AckType.ACCEPT, RELEASE or REJECT, not "
                f"{ack!r}; renew with record.renew() so the record's lock_deadline follows"
            )
        core = self._core
        if core is None:
            raise errors.InvalidRecordStateError(
                f"{topic}-{partition} offset {offset}: the consumer is not started"
            )
        core.handout.acknowledge_offset(topic, partition, offset, ack)
        cur = self._cursor.current
        if (
            cur is not None
            and cur.offset == offset
            and cur.partition == partition
            and cur.topic == topic
        ):
            self._cursor.answered = True

    def release_later(self, record: Record[Any, Any], delay: float) -> None:
        """Release ``record`` ``delay`` seconds from now (what ``record.release(delay=...)``
        calls): its lock is renewed meanwhile, so no member gets it before.

        :raises ConfigError: ``delay`` is not a finite number of seconds >= 0.
        :raises UnsupportedVersionError: the broker cannot renew locks (Kafka 4.1).
        :raises InvalidRecordStateError: the record is not this consumer's to answer (or
            is waiting for a delayed release already); in implicit mode, a record of
            :meth:`poll` or :meth:`batches` (their next call accepts it).
        """
        delay = check_delay(delay)
        core = self._core
        if core is None or core.closing:
            raise errors.InvalidRecordStateError(
                f"{record.topic}-{record.partition} offset {record.offset}: the consumer is "
                "not running"
            )
        if not self._explicit and record is not self._cursor.current and not self._processing:
            raise errors.InvalidRecordStateError(
                "implicit ack mode: release(delay=...) only for the record of `async for` or "
                "process(); poll() and batches() accept the rest of their records"
            )
        if delay == 0:
            self.acknowledge(record, AckType.RELEASE)
            return
        delayed = self._delayed
        if delayed is None:
            delayed = self._delayed = DelayedReleaser(core)
        if delayed.add(record, delay):
            core.tg.start_soon(run_ticks, core, delayed, name="sharecon delayed releases")
        if self._keeper is not None:
            self._keeper.drop(record)  # the delayed releases renew it, up to the release
        self._cursor.answered_elsewhere(record)

    async def commit(
        self, timeout: float | None = None
    ) -> dict[TopicPartition, errors.KafkaError | None]:
        """Send every pending answer now and wait for the brokers' verdicts.

        In implicit mode the records delivered so far (the current record or batch
        included) are accepted first.

        :returns: per partition, ``None`` on success or the error the broker returned
            (e.g. :class:`~sharecon.errors.InvalidRecordStateError` after a lock expired).
        :raises KafkaTimeoutError: no verdict within ``timeout`` (default: request timeout).
        """
        core = self._raise_if_failed()
        # Answers to records whose lock was already lost count as failures here (they
        # were reported to on_acknowledged when they were given).
        collected = core.outcomes.collect()
        try:
            if not self._explicit:
                self._accept_current()
                core.answer_all_delivered(AckType.ACCEPT)
        except BaseException:
            core.outcomes.stop(collected)
            raise
        if not core.pending_acks():
            core.outcomes.stop(collected)
            return _by_partition(collected)
        core.flush_requested += 1
        core.wake_all()
        limit = (
            self._config.request_timeout + self._config.max_wait_ms / 1000
            if timeout is None
            else timeout
        )
        try:
            with anyio.move_on_after(limit) as scope:
                while core.pending_acks() and core.fatal is None:
                    await core.progress.wait(timeout=0.5)
        finally:
            core.outcomes.stop(collected)
            core.flush_requested -= 1
        if core.fatal is not None:
            raise core.fatal
        if scope.cancelled_caught:
            raise errors.KafkaTimeoutError(
                f"commit: acknowledgements not answered within {limit:g} s"
            )
        return _by_partition(collected)

    # -- dead letters ----------------------------------------------------------------------

    async def reject_to_dlq(
        self, record: Record[Any, Any], *, reason: str = "", topic: str | None = None
    ) -> RecordMetadata | None:
        """Copy ``record`` to the dead-letter topic, then reject it.

        The copy keeps the key, value and headers and adds ``sharecon.dlq.*`` headers
        (source topic, partition, offset, delivery count, group, ``reason``, time). The
        original is rejected only once the broker acknowledged the copy; if the copy
        cannot be written the original is **released** instead (delivered again later)
        and :class:`~sharecon.errors.DeadLetterError` is raised: nothing is lost. A
        failure that may pass is first retried while the record's lock lasts (0.5 s
        doubling to 5 s; each release spends one of its deliveries). When
        retrying cannot help (the principal may not write the topic, its name is invalid)
        it is :class:`~sharecon.errors.DeadLetterTopicError`, and the consumer stops with
        it: :meth:`process`, the iteration and :meth:`poll` raise it, ``health()`` reports
        it, and ``dlq_errors_total`` counts each record given back this way.

        When the broker keeps its own dead-letter queue for this group and topic (Kafka
        4.4 with ``share.version`` 2 and ``errors.deadletterqueue.topic.name``), the
        record is only rejected and the broker writes the copy; ``None`` is returned.

        If this consumer already lost the record's lock (its session was lost, or the lock
        expired and the record was delivered again), nothing is written: the broker will
        deliver it again, and a copy now would be a duplicate. The reject is reported as
        ``AckFailure.LOCK_LOST`` (``on_acknowledged``, ``commit()``) and ``None`` returned.

        :param topic: the dead-letter topic (default: ``dlq_topic`` / ``dlq.<group_id>``).
        :returns: where the copy was written.
        :raises DeadLetterError: the copy could not be written (the record was released).
        :raises InvalidRecordStateError: the record is not held by this consumer.
        """
        # Not _raise_if_failed(): after a failure the record is still released first, so
        # an implicit-mode loop that goes on cannot accept it.
        return await self._reject_to_dlq(self._live(), record, reason, topic)

    async def _reject_to_dlq(
        self, core: ConsumerCore, record: Record[Any, Any], reason: str, topic: str | None
    ) -> RecordMetadata | None:
        # Also for the consumer's own routing, which may still run while it closes.
        router = self._router
        assert router is not None
        if not core.handout.holds(record):
            # Lock lost (reported, not raised) or never ours / already answered (raised).
            self.acknowledge(record, AckType.REJECT)
            return None
        target = topic or router.default_topic
        if core.fatal is not None:
            # A dead-letter topic that cannot be written stopped the consumer: another
            # attempt would fail the same way; give the record back once and say why.
            self._release_quietly(record)
            raise core.fatal
        failures = 0
        while True:
            try:
                if not router.started:
                    await core.tg.start(router.host)
                written = await router.write(record, reason, target)
                break
            except errors.KafkaError as exc:
                err = exc
                if not isinstance(exc, errors.DeadLetterError):
                    # E.g. the router's producer could not start (InitProducerId refused).
                    err = routing_error(
                        f"{record.topic}-{record.partition}@{record.offset}: dead-letter "
                        f"routing to {target!r} failed",
                        exc,
                    )
                    err.__cause__ = exc
            except BaseException:
                self._release_quietly(record)
                raise
            # The wait runs outside the except clauses: a cancellation during it must
            # still give the record back (the ``except BaseException`` above would not
            # see one raised inside its sibling clause).
            failures += 1
            wait = None
            if core.fatal is None and not core.is_closing() and core.handout.holds(record):
                # Each release spends a delivery attempt: try again while the lock
                # lasts (sharecon._share.dead_letter_retry).
                wait = dead_letter_retry_in(
                    failures,
                    core.clock(),
                    record.lock_deadline,
                    may_pass=not isinstance(err, errors.DeadLetterTopicError)
                    and not isinstance(err.__cause__, _NEVER_FITS),
                )
            if wait is not None:
                logger.info("%s; trying again in %.1f s", err, wait)
                try:
                    await anyio.sleep(wait)
                except BaseException:
                    self._release_quietly(record)
                    raise
                if core.handout.holds(record) and not core.is_closing():
                    continue
            core.stats.dlq_errors += 1
            # Released, not left to its lock: either way its next delivery counts one
            # more (docs/security.md), and a release cannot be auto-accepted later.
            self._release_quietly(record)
            if isinstance(err, errors.DeadLetterTopicError) and not core.is_closing():
                core.fail(err)  # stop: routing anything else would fail the same way
            raise err from err.__cause__
        core.stats.dlq_records += 1
        if not core.handout.holds(record):
            # Its lock was lost while the copy was written (a slow or retried write, a
            # lost session): the broker delivers it again, and it may be copied again (at
            # least once, docs/dlq.md). The loss is reported, as above, never raised: the
            # copy is written and the application has nothing to answer for.
            try:
                self.acknowledge(record, AckType.REJECT)
            except errors.InvalidRecordStateError:
                logger.info(
                    "%s-%d@%d: its lock was lost while its dead-letter copy was written; "
                    "it will be delivered again",
                    *(record.topic, record.partition, record.offset),
                )
            return written
        self.acknowledge(record, AckType.REJECT)
        return written

    def _release_quietly(self, record: Record[Any, Any]) -> None:
        try:
            self.acknowledge(record, AckType.RELEASE)
        except errors.KafkaError as exc:
            logger.info("releasing %s after a failed dead-letter write: %s", record, exc)

    async def _route_dead_letters(self, core: ConsumerCore) -> None:
        """Route records past the policy's delivery limit (never raises into the group)."""

        async def route(record: Record[Any, Any], reason: str) -> object:
            return await self._reject_to_dlq(core, record, reason, None)

        await route_dead_letters(core, route, self._release_quietly, self._breaker)

    async def process(
        self,
        handler: Callable[[Record[K, V]], Awaitable[object]],
        *,
        concurrency: int = 1,
        keep_locks: bool | None = None,
    ) -> None:
        """Run ``handler`` on every record, ``concurrency`` at a time, until the consumer
        closes (or the calling task is cancelled).

        Each record is accepted when ``handler`` returns. When it raises an ``Exception``,
        the record is released, or, on its last allowed delivery under a
        :class:`~sharecon.dlq.DeadLetterPolicy`, routed to the dead-letter topic with the
        exception as the reason; with the policy's ``retry_backoff``, an error before the
        last allowed delivery releases the record after the backoff's delay instead. A
        handler that raises or returns :class:`~sharecon.record.RetryLater` releases the
        record after its delay (``record.release(delay=...)``, Kafka 4.2+). Answers the
        handler gives itself are kept. A record the
        deserializers fail for never reaches ``handler``: it is released (or routed) the
        same way, and the :class:`~sharecon.errors.DeserializationError` is logged
        (WARNING) and kept in :attr:`recent_errors` instead of ending ``process()``.

        :param keep_locks: renew the lock of each record while its handler runs (up to the
            consumer's ``max_hold``). ``None`` (default): on where the broker can renew
            (Kafka 4.2+), off on 4.1, and off with one WARNING where the group's
            ``share.renew.acknowledge.enable`` is false (Kafka 4.3+). ``True`` on a 4.1
            broker raises :class:`~sharecon.errors.UnsupportedVersionError`, and where the
            group refuses renewals :class:`~sharecon.errors.IncompatibleBrokerError`.
        """
        if concurrency < 1:
            raise errors.ConfigError(f"concurrency must be at least 1, not {concurrency}")
        core = self._raise_if_failed()
        self._give_back_current()
        limit = self._dead_letter.max_deliveries if self._dead_letter is not None else None
        backoff = self._dead_letter.retry_backoff if self._dead_letter is not None else None
        if backoff is not None:
            core.check_renew()  # delayed releases renew locks: Kafka 4.2+
        keeper = self._keeper
        if keeper is None and keep_locks is not False:
            if keep_locks or core.can_renew():
                core.check_renew()
                if await self._check_renewals(core, explicit=bool(keep_locks)):
                    keeper = LockKeeper(self._config.max_hold)
        host = Host(
            asked=self._asked,
            wait_for_records=self._wait_for_records,
            closed=lambda: self._closed,
            deserialize=(
                self._deserialize
                if self._deserializing and self._deserialize_async is None
                else None
            ),
            deserialize_async=self._deserialize_async,
            held=self._held,
            dispose=self._dispose_undeserializable,
            to_dead_letters=partial(self._reject_to_dlq, topic=None),
            answer=self._answer_if_open,
            release_later=self._release_later_if_open,
            keep_locks=self._keep_locks,
        )
        self._processing += 1
        # The handlers may wait for each other's records: the member may always hold one
        # record per handler, whatever the handling rate (rule 1 of _share.record_limit).
        core.machine.handlers += concurrency
        try:
            await run_workers(
                core,
                host,
                handler,
                concurrency=concurrency,
                keeper=keeper,
                own_keeper=keeper is not self._keeper,
                dead_letter_limit=limit,
                retry_backoff=backoff,
                breaker=self._breaker,
            )
        finally:
            self._processing -= 1
            core.machine.handlers -= concurrency
        if core.fatal is not None:
            raise core.fatal

    # -- deserializers ---------------------------------------------------------------------

    async def _prepare(self, core: ConsumerCore, record: Record[Any, Any], decoded: bool) -> None:
        """What hand-out does per record beyond popping it, when there is anything to do:
        deserialize (raising for a record that fails, once it is disposed of; not when
        ``decoded`` already) and keep its lock. Cancelled while deserializing, the record
        is kept for the next hand-out (sharecon._consumer.holdback)."""
        if self._deserializing and not decoded:
            try:
                if self._deserialize_async is None:
                    self._deserialize(record)
                else:
                    await self._deserialize_async(record)
            except errors.DeserializationError as exc:
                await self._dispose_undeserializable(core, record, exc)
                raise
            except BaseException:
                self._held.keep((), record)
                raise
        if self._keeper is not None:
            self._keeper.hold(record, core.clock(), record.lock_deadline)

    async def _dispose_undeserializable(
        self, core: ConsumerCore, record: Record[Any, Any], exc: errors.DeserializationError
    ) -> None:
        """Never lose a record the application could not be given: route it to the
        dead-letter topic on its last allowed delivery under the policy, else release it."""
        policy = self._dead_letter
        if policy is not None and record.delivery_count >= policy.max_deliveries:
            try:
                await self._reject_to_dlq(core, record, f"DeserializationError: {exc}", None)
            except errors.DeadLetterError as dlq_exc:
                # reject_to_dlq released it instead (and, for a DeadLetterTopicError,
                # stopped the consumer: the next wait raises it)
                core.note_error(dlq_exc)
            else:
                exc.dead_lettered = True
            return
        core.handout.answer(record, AckType.RELEASE)
        core.wake_leader(record.topic_partition)

    async def _pop_deserialized(self, core: ConsumerCore, limit: int) -> list[Record[Any, Any]]:
        """poll() with deserializers: up to ``limit`` records, ending before one the
        deserializers fail for (whose error the next call raises, or this one if it is the
        first)."""
        out: list[Record[Any, Any]] = []
        pop = core.buffer.pop_one
        clock = core.clock
        deserialize, deserialize_async = self._deserialize, self._deserialize_async
        held = self._held
        record: Record[Any, Any] | None = None
        try:
            while len(out) < limit:
                kept = held.take(clock) if held.items else None
                if kept is not None:
                    record, decoded = kept
                    if decoded:
                        out.append(record)
                        record = None
                        continue
                else:
                    record = pop(clock)
                    if record is None:
                        break
                try:
                    if deserialize_async is None:
                        deserialize(record)
                    else:
                        await deserialize_async(record)
                except errors.DeserializationError as exc:
                    failed, record = record, None
                    await self._dispose_undeserializable(core, failed, exc)
                    if not out:
                        raise
                    self._pending_error = exc
                    break
                out.append(record)
                record = None
        except BaseException:
            # Cancelled (a poll() timeout, a cancel scope) while deserializing: what was
            # taken stays this consumer's, and the next hand-out serves it first.
            if out or record is not None:
                held.keep(out, record)
            raise
        return out

    def _held_expired(self, record: Record[Any, Any]) -> None:
        # A record kept for the next hand-out whose lock ended meanwhile: dropped as the
        # buffer drops its own (delivery forgotten, counted as expired in the buffer).
        core = self._core
        if core is None:
            return
        owner = owner_of(record)
        tp = record.topic_partition
        if owner is not None:
            core.machine.forget(tp, owner.delivery, record.offset, record.offset)
        core.buffer.count_expired(tp, 1)

    def _held_holds(self, record: Record[Any, Any]) -> bool:
        core = self._core
        return core is not None and core.handout.holds(record)

    def _raise_pending(self) -> None:
        exc, self._pending_error = self._pending_error, None
        assert exc is not None
        raise exc

    # -- lock keeping and liveness --------------------------------------------------------

    async def _wait_for_records(self, core: ConsumerCore) -> None:
        await self._liveness.wait_for_records(core)

    async def _check_renewals(self, core: ConsumerCore, *, explicit: bool) -> bool:
        return await renewals_allowed(core, explicit=explicit)

    async def _keep_locks(self, core: ConsumerCore, keeper: LockKeeper[Record[Any, Any]]) -> None:
        await keep_locks(core, keeper, self._config.max_hold, self._delayed_holds)

    def _delayed_holds(self, record: Record[Any, Any]) -> bool:
        # Released with a delay: the delayed releases keep its lock, not the keeper.
        delayed = self._delayed
        return delayed is not None and record in delayed

    async def _watch_liveness(self, core: ConsumerCore) -> None:
        """Leave the group when the application stops asking for records (``max_poll_interval``)."""
        await self._liveness.watch(core, self._give_up_current)

    def _give_up_current(self) -> None:
        # Leaving for idleness releases what was handed out: the current record or batch
        # is no longer the application's to answer.
        if self._cursor.current is not None:
            self._cursor.answered = True
        self._batch_out = False

    def _asked(self, core: ConsumerCore) -> None:
        # The application asks for records: liveness counts it, and after leaving for
        # idleness the member rejoins now.
        live = self._liveness
        live.asks += 1
        core.stats.on_poll(_monotonic())  # per record: see sharecon._stats rule 3
        if live.left_idle:
            live.rejoin(core, partial(self._restart_heartbeat, core))

    def _restart_heartbeat(self, core: ConsumerCore) -> None:
        if self._heartbeat_done.is_set():
            self._heartbeat_done = anyio.Event()
            self._runtime.task_group.start_soon(
                self._run_heartbeat, core, name="sharecon heartbeat"
            )

    def _answer_if_open(self, record: Record[Any, Any], ack: AckType) -> None:
        # process(): the handler may have answered the record itself; that answer stands,
        # a delayed release included.
        assert self._core is not None
        delayed = self._delayed
        if delayed is not None and record in delayed:
            return
        self._core.handout.answer(record, ack)

    def _release_later_if_open(self, record: Record[Any, Any], delay: float) -> None:
        # process(): a RetryLater (or the policy's backoff) for a record the handler did
        # not answer itself; a record it answered, or whose lock was lost, keeps that.
        core = self._core
        assert core is not None
        delayed = self._delayed
        if (delayed is not None and record in delayed) or not core.handout.holds(record):
            return
        if core.closing:
            core.handout.answer(record, AckType.RELEASE)
            return
        self.release_later(record, delay)

    def _accept_current(self) -> None:
        cursor = self._cursor
        cur = cursor.current
        if cur is not None and not cursor.answered:
            cursor.answered = True
            assert self._core is not None
            self._core.handout.answer(cur, AckType.ACCEPT)

    def _give_back_current(self) -> None:
        """Release the record in hand of an ``async for`` that ended early (``break``, an
        exception), when a new loop, :meth:`poll`, :meth:`batches` or :meth:`process`
        takes over: it was never moved past, so it is released, never accepted (a later
        implicit accept of every delivered record would otherwise take it too)."""
        cursor = self._cursor
        cur = cursor.current
        core = self._core
        if cur is not None and not cursor.answered and core is not None:
            cursor.answered = True
            core.handout.answer(cur, AckType.RELEASE)
            core.wake_leader(cur.topic_partition)

    def _raise_if_failed(self) -> ConsumerCore:
        core = self._live()
        if core.fatal is not None:
            raise core.fatal
        return core

    # -- delivery -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Record[K, V]]:
        # A new loop over the consumer: it must be running (a loop in progress ends when
        # it closes, a new one is a mistake). The previous loop ended early (break or an
        # exception), so its last record was not handled: give it back. The loop itself
        # runs in the cursor (sharecon._consumer.cursor: compiled in the compiled build).
        self._live()
        self._give_back_current()
        if type(self).__anext__ is not _PLAIN_ANEXT:
            # __anext__ was wrapped (sharecon.otel's receive spans) or overridden: the
            # loop must run it, not the cursor (once per loop, not per record).
            return self
        return cast("AsyncIterator[Record[K, V]]", self._cursor)

    async def __anext__(self) -> Record[K, V]:
        # What ``async for`` runs is the cursor's __anext__ (see __aiter__); this is for
        # ``await consumer.__anext__()``.
        return cast("Record[K, V]", await self._cursor.__anext__())

    def _not_running(self) -> BaseException:
        return self._life.error()

    def _rejoin_after_idle(self, core: ConsumerCore) -> None:
        self._liveness.rejoin(core, partial(self._restart_heartbeat, core))

    async def _next_prepared(self, core: ConsumerCore) -> Record[Any, Any]:
        """``__anext__`` with per-record work (deserializers, ``keep_locks``): a loop of
        its own, so the plain loop of the cursor does nothing per record it does not need."""
        if self._pending_error is not None:
            self._raise_pending()
        buffer = core.buffer
        cursor = self._cursor
        held = self._held
        if (cursor.served + 1) % CHECKPOINT_EVERY == 0:
            # Before taking the record (as the cursor does): cancelled here, it stays
            # buffered, not current.
            await anyio.lowlevel.checkpoint()
        while True:
            kept = held.take(core.clock) if held.items else None
            if kept is not None:
                rec, decoded = kept
            else:
                popped = buffer.pop_one(core.clock)
                if popped is None:
                    await self._no_record(core)
                    continue
                rec, decoded = popped, False
            await self._prepare(core, rec, decoded)
            cursor.current = rec
            cursor.answered = False
            cursor.served += 1
            return rec

    async def _no_record(self, core: ConsumerCore) -> None:
        """The buffer is empty: raise the consumer's failure, end the iteration when it
        closes, else wait for records."""
        if core.fatal is not None:
            raise core.fatal
        if self._closed or core.closing:
            raise StopAsyncIteration
        await self._wait_for_records(core)

    async def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> list[Record[K, V]]:
        """Wait up to ``timeout`` seconds for records; return up to ``max_records`` of them.

        In implicit mode the previously polled batch is accepted first; in explicit mode
        it must be fully answered. Returns an empty list on timeout.

        With deserializers, a record they fail for ends the batch: the records before it
        are returned, and the next call raises its
        :class:`~sharecon.errors.DeserializationError` (at once if it is the first).

        :raises ConfigError: ``max_records`` is not a positive int, or ``timeout`` is
            negative or not a number.
        """
        limit = check_max_records(max_records, self._config.max_records)
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not timeout >= 0  # NaN fails this too
        ):
            raise errors.ConfigError(f"timeout must be None or >= 0 seconds, not {timeout!r}")
        core = self._live()
        self._asked(core)
        self._give_back_current()
        if self._batch_out:
            if self._explicit:
                missing = core.ledger.unacknowledged()
                if missing and self._delayed is not None:
                    missing = self._delayed.not_waiting(missing)
                if missing:
                    raise errors.UnacknowledgedRecordsError(_describe_unacked(missing))
            else:
                core.answer_all_delivered(AckType.ACCEPT)
            self._batch_out = False
        if core.fatal is not None:
            raise core.fatal  # stop at once, not after the buffered records
        if self._pending_error is not None:
            self._raise_pending()
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            while True:
                records: list[Record[Any, Any]]
                if self._deserializing:
                    records = await self._pop_deserialized(core, limit)
                else:
                    records = core.buffer.pop_many(limit, core.clock)
                if records:
                    core.handout.handed_out(records)
                    self._batch_out = True
                    if self._keeper is not None:
                        now = core.clock()
                        for rec in records:
                            self._keeper.hold(rec, now, rec.lock_deadline)
                    # Once per batch: the records are what the deserializers made them.
                    return cast("list[Record[K, V]]", records)
                if core.fatal is not None:
                    raise core.fatal
                if self._closed or core.closing:
                    return []
                await self._wait_for_records(core)
        return []

    def batches(self, *, max_records: int | None = None) -> AsyncIterator[list[Record[K, V]]]:
        """An async iterator of record lists (one per buffered fetch, up to ``max_records``).

        ``async for batch in consumer.batches(): ...`` — in implicit mode each batch is
        accepted when the next one is asked for.

        :raises ConfigError: ``max_records`` is not a positive int.
        """
        limit = check_max_records(max_records, self._config.max_records)
        self._live()
        return _BatchIterator(self, limit)


class _BatchIterator(Generic[K, V]):
    """``async for batch in consumer.batches()``: one list of records per turn."""

    def __init__(self, consumer: ShareConsumer[K, V], max_records: int | None) -> None:
        self._consumer = consumer
        self._max = max_records

    def __aiter__(self) -> _BatchIterator[K, V]:
        return self

    async def __anext__(self) -> list[Record[K, V]]:
        if self._consumer._closed:
            raise StopAsyncIteration  # the consumer closed between two batches
        records = await self._consumer.poll(None, max_records=self._max)
        if not records:
            raise StopAsyncIteration
        return records


#: The consumer's own ``__anext__``, to tell when it was wrapped or overridden.
_PLAIN_ANEXT = ShareConsumer.__anext__


@dataclass(frozen=True, slots=True)
class ConsumerHealth:
    """What :meth:`ShareConsumer.health` saw.

    :param ok: running, a stable group member, not failed, every broker reachable,
        nothing stuck (``stuck_for`` is 0) and nothing ``blocked``.
    :param running: started and not closing.
    :param member_state: the membership state (``unjoined``, ``joining``, ``stable``,
        ``fenced``, ``leaving``, ``left`` or ``fatal``).
    :param failed: the error that stopped the consumer, if one did.
    :param assigned_partitions: partitions the coordinator assigned to this member.
    :param buffered_records: records fetched and waiting for the application.
    :param cluster: the brokers' reachability.
    :param stuck_for: seconds records have been waiting at a leader with none delivered,
        when that is longer than the acquisition lock (fetches came back after the locks
        ended, or timed out: see "Adaptive fetch sizing" in docs/consumer.md); else 0.
    :param dead_letter_breaker: why the dead-letter circuit breaker is open (then ``ok``
        is false), or None.
    :param blocked: a sentence per partition this member no longer fetches because one
        of its batches cannot arrive within the acquisition lock, naming the partition,
        the batch size, the measured link rate and the lock (see "Batches larger than
        the link carries within the lock" in docs/consumer.md).
    :param expired_in_buffer: records whose acquisition locks ended while they waited in
        this consumer's buffer, since it started: each a delivery attempt spent unseen
        (logged at WARNING, at most once a minute, with the cause). Does not make ``ok``
        false.
    :param released_unreachable: under batch acquisition (Kafka 4.1), buffered records
        released at once because they could not be reached before their locks ended
        (each spent the attempt its acquisition counted; another member may have them).
    :param past_limit_unseen: records that arrived past the dead-letter policy's
        ``max_deliveries`` and were handed out because the application never saw them here
        (``DeadLetterPolicy.route_unseen`` is off).
    """

    ok: bool
    running: bool
    member_state: str
    failed: str | None
    assigned_partitions: int
    buffered_records: int
    cluster: ClusterHealth
    stuck_for: float = 0.0
    dead_letter_breaker: str | None = None
    blocked: tuple[str, ...] = ()
    expired_in_buffer: int = 0
    released_unreachable: int = 0
    past_limit_unseen: int = 0


def _check_same_connection(
    config: ConnectionConfig,
    *,
    client_id: str,
    ssl_context: ssl.SSLContext | None,
    sasl: SaslConfig | GssapiConfig | None,
    connect_timeout: float,
) -> None:
    """Refuse separate connection options that contradict ``config`` (left at their
    defaults, they are simply not used)."""
    clashes = [
        name
        for name, given, default, wanted in (
            ("client_id", client_id, "sharecon", config.client_id),
            ("connect_timeout", connect_timeout, 10.0, config.connect_timeout),
        )
        if given != default and given != wanted
    ]
    if ssl_context is not None and ssl_context is not config.ssl_context:
        clashes.append("ssl_context")
    if sasl is not None and sasl != config.sasl:
        clashes.append("sasl")
    if clashes:
        raise errors.ConfigError(
            f"config= is given, and so is {', '.join(clashes)} with another value: put "
            "every connection setting in the ConnectionConfig"
        )


def _by_partition(results: list[AckResult]) -> dict[TopicPartition, errors.KafkaError | None]:
    """commit()'s answer: per partition, ``None`` or the first error of its results."""
    out: dict[TopicPartition, errors.KafkaError | None] = {}
    for r in results:
        key = TopicPartition(r.partition.topic or str(r.partition.topic_id), r.partition.partition)
        err = r.error()
        if key not in out or (err is not None and out[key] is None):
            out[key] = err
    return out


def _describe_unacked(missing: Mapping[TopicIdPartition, list[int]]) -> str:
    parts = []
    for tp, offsets in list(missing.items())[:5]:
        shown = ", ".join(map(str, offsets[:10])) + (" ..." if len(offsets) > 10 else "")
        parts.append(f"{tp.topic or tp.topic_id}-{tp.partition} offsets {shown}")
    return "explicit ack mode: answer every record of the previous batch first: " + "; ".join(parts)
