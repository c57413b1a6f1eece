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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, cast

from sharecon import errors
from sharecon._consumer.backlog import partition_metrics
from sharecon._consumer.committing import commit
from sharecon._consumer.config import AcquireMode, ConsumerConfig, check_max_records, topics_tuple
from sharecon._consumer.deserialize import Deserializers
from sharecon._consumer.group_config import lock_duration as group_lock_duration
from sharecon._consumer.iteration import Iteration
from sharecon._consumer.jobs import Jobs, check_cluster
from sharecon._consumer.liveness import Liveness
from sharecon._lifecycle import ClientRuntime
from sharecon._net.cluster import Cluster
from sharecon._net.connect import ConnectionConfig
from sharecon._net.health import ClusterHealth  # noqa: TC001 - resolvable for get_type_hints
from sharecon._share.breaker import DeadLetterBreaker
from sharecon._share.dead_letter_retry import retry_in as dead_letter_retry_in
from sharecon._share.membership import MemberState
from sharecon._telemetry import check_enabled, metric_points
from sharecon.dlq import DeadLetterPolicy, DeadLetterRouter, routing_error
from sharecon.metrics import CONSUMER_METRICS
from sharecon.protocol.names import validate_topic_name
from sharecon.record import K, V, check_delay
from sharecon.serde import AnyDeserializer, AsyncWithContext, WithContext
from sharecon.types import AckType, TopicPartition

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
    from types import TracebackType

    from typing_extensions import Self

    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon._share.ledger import AckResult
    from sharecon.metrics import ConsumerMetrics, PartitionMetrics
    from sharecon.producer import RecordMetadata
    from sharecon.record import Record

__all__ = ["ConsumerHealth", "ShareConsumer"]

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
        deserializers = Deserializers(key_deserializer, value_deserializer)
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
        self._runtime = ClientRuntime("ShareConsumer")
        self._life = self._runtime.life
        #: The engine's wiring, set by start(): the per-record answers and the views
        #: read it (sharecon._consumer.core).
        self._core: ConsumerCore | None = None
        self._explicit = ack_mode == "explicit"
        # The engine (docs/architecture.md, "The consumer"): the jobs in the task group,
        # what they share with these calls, and the close (sharecon._consumer.jobs); the
        # hand-out to the application (sharecon._consumer.iteration). They call back
        # through these methods, looked up at each call (sharecon.otel may wrap them).
        self._jobs = Jobs(
            lambda: self._runtime.task_group,
            self._connection,
            make_router=self._make_router,
            routing_error=routing_error,
            retry_in=_retry_in,
            dead_letter=dead_letter,
            breaker=self._breaker,
            push_metrics=self._push_metrics if self._enable_metrics_push else None,
            acknowledge=lambda record, ack: self.acknowledge(record, ack),
        )
        self._hand = Iteration(
            self._jobs,
            self._life.error,
            # Liveness (``max_poll_interval``): how often the application asked for
            # records, how many of its tasks wait for records now, and whether it left.
            Liveness(self._config.max_poll_interval, self._config.request_timeout),
            deserializers,
            explicit=self._explicit,
            closed=lambda: self._closed,
            release_later=lambda record, delay: self.release_later(record, delay),
            dead_letter=dead_letter,
            breaker=self._breaker,
        )
        #: ``async for``: the current record and the per-record step (compiled).
        self._cursor = self._hand.cursor

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
            self._config = await check_cluster(cluster, self._config)
            core = self._core = self._jobs.wire(
                cluster,
                tg,
                self._config,
                owner=self,
                on_acknowledged=self._on_acknowledged,
                hand=self._hand,
            )
            await self._jobs.start(core, self._config, self._hand)

    def _make_router(self, cluster: Cluster) -> DeadLetterRouter:
        return DeadLetterRouter(
            self._bootstrap,
            self._connection,
            self._config.group_id,
            self._dlq_policy,
            cluster.versions.feature_level("share.version"),
        )

    def _push_metrics(self, core: ConsumerCore) -> None:
        self._runtime.push_metrics(
            lambda: _CONSUMER_POINTS(core.metrics()),
            resource={"client_id": self._connection.client_id, "group_id": self._config.group_id},
            request_timeout=self._config.request_timeout,
            logger=logger,
        )

    @property
    def _closed(self) -> bool:
        return self._runtime.state == "closed"

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
        # The final requests' answers get half the close's time at most: one that never
        # comes must leave time for the leave, or the coordinator learns of it only when
        # the member's session times out.
        if await self._runtime.shutdown(
            lambda _: self._jobs.leave(core, self._config.request_timeout, limit / 2), limit
        ):
            logger.warning("share consumer %s: close timed out after %g s", core.member_id, limit)

    async def aclose(self) -> None:
        """:meth:`close` with the default timeout (the name every sharecon client has)."""
        await self.close()

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
            released_unseen=core.machine.released_unseen,
            lost_unseen=core.lost_unseen + core.machine.stale_records,
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
        self._jobs.stop_fetching()

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
        if self._core is None:
            raise self._life.error()
        return await self._jobs.fetching_stopped(timeout)

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
        if not self._explicit and record is not self._cursor.current and not self._hand.processing:
            raise errors.InvalidRecordStateError(
                "implicit ack mode: release(delay=...) only for the record of `async for` or "
                "process(); poll() and batches() accept the rest of their records"
            )
        if delay == 0:
            self.acknowledge(record, AckType.RELEASE)
            return
        self._jobs.release_later(core, record, delay)
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
        limit = (
            self._config.request_timeout + self._config.max_wait_ms / 1000
            if timeout is None
            else timeout
        )
        # Answers to records whose lock was already lost count as failures here (they
        # were reported to on_acknowledged when they were given).
        return await commit(core, limit, None if self._explicit else self._hand.accept_delivered)

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
        written = await self._jobs.reject_to_dlq(self._live(), record, reason, topic)
        return cast("RecordMetadata | None", written)

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
        await self._hand.process(
            core,
            handler,
            concurrency=concurrency,
            keep_locks=keep_locks,
            max_hold=self._config.max_hold,
        )

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
        self._hand.give_back_current()
        if type(self).__anext__ is not _PLAIN_ANEXT:
            # __anext__ was wrapped (sharecon.otel's receive spans) or overridden: the
            # loop must run it, not the cursor (once per loop, not per record).
            return self
        return cast("AsyncIterator[Record[K, V]]", self._cursor)

    async def __anext__(self) -> Record[K, V]:
        # What ``async for`` runs is the cursor's __anext__ (see __aiter__); this is for
        # ``await consumer.__anext__()``.
        return cast("Record[K, V]", await self._cursor.__anext__())

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
        # Once per batch: the records are what the deserializers made them.
        return cast("list[Record[K, V]]", await self._hand.poll(core, limit, timeout))

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
    :param released_unseen: records fetched and released without ever being handed out:
        buffered at :meth:`ShareConsumer.close` (or arriving during it) or when the member
        left the group for idleness (each logged at INFO with the count), at
        :meth:`ShareConsumer.unsubscribe`, or arriving while unsubscribed. Each spent a
        delivery attempt nobody saw. Does not make ``ok`` false. Not counted at a close on
        Kafka 4.1, which leaves those records to the end of their share sessions and so
        spends none.
    :param lost_unseen: records fetched and dropped without ever being handed out because
        their share session ended (a lost connection, a session the broker reset) or their
        partition's leadership moved (or moved away and back: its leader delivered them
        again though their locks had not expired), and records of an answer from a
        partition's old leader that arrived after the new leader's delivery of them. The
        broker delivers
        them again: a session's end counts the attempt on Kafka 4.2 and later (4.1 lowers
        the count again), and a new leader that rebuilt the partition from its persisted
        state may not count it. Does not make ``ok`` false.
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
    released_unseen: int = 0
    lost_unseen: int = 0


def _retry_in(
    failures: int, now: float, lock_deadline: float | None, *, may_pass: bool = True
) -> float | None:
    # Looked up here at each call: the whole-client simulation plants a bug by replacing
    # sharecon.consumer.dead_letter_retry_in (sharecon.testing.sim.client_dlq).
    return dead_letter_retry_in(failures, now, lock_deadline, may_pass=may_pass)


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
