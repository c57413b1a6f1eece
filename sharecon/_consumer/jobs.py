"""One consumer's life: the checks at start, its jobs in its task group, and the close
sequence.

Rules of this module:

1. Every job runs in the consumer's one task group (``sharecon._lifecycle.ClientRuntime``)
   and never raises into it (a fatal error goes to ``ConsumerCore.fail``). Started with
   the consumer: the heartbeat, the per-leader fetch loops (:class:`FetcherPool`), the lag
   board's member, and as configured the dead-letter routing (a policy), the lock keeper
   (``keep_locks``), the liveness watch (``max_poll_interval``) and the metrics push.
   Started on first use: the delayed releases; restarted after leaving for idleness:
   the heartbeat.
2. :class:`Jobs` holds what those jobs share with the consumer's calls (the fetch pool,
   the dead-letter router, the lock keeper, the delayed releases); the public
   ``ShareConsumer`` only validates and delegates. What belongs to the public layer
   (the client runtime's task group and metrics push, the dead-letter router and its
   error wrapping) the consumer hands in: this layer may not import it.
3. Closing follows :func:`sharecon._consumer.closing.close_steps` (the simulator runs the
   same order); each step is carried out here. A member the heartbeat loop could not
   take out of the group leaves with one heartbeat sent from the closing task.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from sharecon import errors
from sharecon._consumer import observe
from sharecon._consumer.backlog import keep_lag
from sharecon._consumer.closing import CloseStep, close_steps, spares_buffered
from sharecon._consumer.core import ConsumerCore
from sharecon._consumer.dead_letters import route_dead_letters
from sharecon._consumer.delayed import DelayedReleaser, run_ticks
from sharecon._consumer.fetcher import FetcherPool
from sharecon._consumer.heartbeat import heartbeat_loop
from sharecon._consumer.lock_keeping import keep_locks, renewals_allowed
from sharecon._consumer.rejecting import reject_to_dlq, release_quietly
from sharecon._net.clock import event_loop_clock
from sharecon._net.cluster import has_record_limit, require_record_limit, require_share_groups
from sharecon._share.lock_keeper import LockKeeper
from sharecon._share.membership import MemberState
from sharecon.protocol import ShareFetchRequest, ShareGroupHeartbeatRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from sharecon._backoff import Backoff
    from sharecon._consumer.config import AcquireMode, ConsumerConfig
    from sharecon._consumer.cursor import Cursor
    from sharecon._consumer.handout import Acknowledger
    from sharecon._consumer.rejecting import RetryIn, Router, RoutingError
    from sharecon._net.cluster import Cluster
    from sharecon._net.connect import ConnectionConfig
    from sharecon._share.breaker import DeadLetterBreaker
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record
    from sharecon.types import AckType

__all__ = ["DeadLetterSettings", "HandOut", "Jobs", "check_cluster"]

logger = logging.getLogger("sharecon.consumer")


class HandOut(Protocol):
    """What the jobs set up of the hand-out (:class:`sharecon._consumer.iteration.Iteration`)."""

    #: The core, once made (``None`` before).
    core: ConsumerCore | None
    #: ``async for``'s per-record step.
    cursor: Cursor
    #: Whether each record needs the hand-out's own step (set for ``keep_locks``).
    prepare_each: bool

    async def watch_liveness(self, core: ConsumerCore) -> None:
        """Leave the group when the application stops asking (``max_poll_interval``)."""
        ...


class DeadLetterSettings(Protocol):
    """What the engine reads of a :class:`sharecon.dlq.DeadLetterPolicy`."""

    @property
    def max_deliveries(self) -> int:
        """The delivery from which a failed record is routed instead of released."""
        ...

    @property
    def route_unseen(self) -> bool:
        """Route records past the limit the application never saw here too."""
        ...

    @property
    def retry_backoff(self) -> Backoff | None:
        """Delays for the releases of failed records before the limit."""
        ...


async def check_cluster(cluster: Cluster, config: ConsumerConfig) -> ConsumerConfig:
    """What ``start()`` checks before joining: share groups (and record-limit acquisition
    where asked for) are supported; ``"auto"`` acquisition is resolved; subscribed topics
    that do not exist, or may not be described, are said once (WARNING).

    :returns: ``config``, its acquire mode resolved.
    """
    require_share_groups(cluster.versions, cluster.bootstrap_addresses[0])
    if config.acquire_mode == "record_limit":
        require_record_limit(cluster.versions)
    elif config.acquire_mode == "auto":
        mode: AcquireMode = "record_limit" if has_record_limit(cluster.versions) else "batch"
        config = replace(config, acquire_mode=mode)
    await cluster.refresh_metadata(config.topics)
    missing = [t for t in config.topics if t not in cluster.metadata.topic_ids]
    refused = [
        t
        for t in missing
        if cluster.metadata.topic_errors.get(t) == errors.ErrorCode.TOPIC_AUTHORIZATION_FAILED
    ]
    if refused:
        # Not "missing": the principal may not DESCRIBE them (the first heartbeat
        # is refused too, and start() raises TopicAuthorizationFailedError).
        logger.warning(
            "share consumer of group %s: not authorized to describe subscribed topics: %s",
            config.group_id,
            ", ".join(refused),
        )
        missing = [t for t in missing if t not in refused]
    if missing:
        # Not fatal: the topic may be created later; but say so, once.
        logger.warning(
            "share consumer of group %s: subscribed topics do not exist (yet): %s",
            config.group_id,
            ", ".join(missing),
        )
    return config


class Jobs:
    """One consumer's jobs, what they share with its calls, and its close (rules 1-3).

    :param task_group: the client's task group (raises once it is closed).
    :param make_router: the dead-letter router, made at start for the cluster.
    :param routing_error: what a failed dead-letter write raises
        (:func:`sharecon.dlq.routing_error`).
    :param retry_in: when a failed dead-letter write is tried again
        (:func:`sharecon._share.dead_letter_retry.retry_in`).
    :param push_metrics: starts the KIP-714 metrics push for the core (``None``: off).
    :param acknowledge: the consumer's own ``acknowledge`` (records routed to the
        dead-letter topic are answered through it).
    """

    def __init__(
        self,
        task_group: Callable[[], TaskGroup],
        connection: ConnectionConfig,
        *,
        make_router: Callable[[Cluster], Router],
        routing_error: RoutingError,
        retry_in: RetryIn,
        dead_letter: DeadLetterSettings | None,
        breaker: DeadLetterBreaker | None,
        push_metrics: Callable[[ConsumerCore], None] | None,
        acknowledge: Callable[[Record[Any, Any], AckType], None],
    ) -> None:
        self._task_group = task_group
        self._connection = connection
        self._make_router = make_router
        self._routing_error = routing_error
        self._retry_in = retry_in
        self._dead_letter = dead_letter
        self._breaker = breaker
        self._push_metrics = push_metrics
        self._acknowledge = acknowledge
        self._max_hold = 0.0
        self._heartbeat_done = anyio.Event()
        #: The fetch loops (``stop_fetching()`` and ``fetching_stopped()`` reach them).
        self.fetch_pool: FetcherPool | None = None
        #: Writes dead-letter copies (made at start).
        self.router: Router | None = None
        #: Records handed out and not answered, whose locks are renewed (``keep_locks``).
        self.keeper: LockKeeper[Record[Any, Any]] | None = None
        #: Records released with a delay (``record.release(delay=...)``), made on first use.
        self.delayed: DelayedReleaser | None = None

    # -- start ---------------------------------------------------------------------------

    def wire(
        self,
        cluster: Cluster,
        tg: TaskGroup,
        config: ConsumerConfig,
        *,
        owner: Acknowledger,
        on_acknowledged: Callable[[list[AckResult]], None] | None,
        hand: HandOut,
    ) -> ConsumerCore:
        """Make the consumer's core and fetch pool, and give the hand-out the core.

        :param owner: what the records call back into (the public consumer).
        """
        self._max_hold = config.max_hold
        core = ConsumerCore(
            cluster,
            config,
            tg,
            on_acknowledged=on_acknowledged,
            client_id=self._connection.client_id,
        )
        core.handout.owner = owner
        core.clock = event_loop_clock()  # read per record: looked up once, here
        core.fetchers = self.fetch_pool = FetcherPool(core)
        hand.core = hand.cursor.core = core
        return core

    async def start(self, core: ConsumerCore, config: ConsumerConfig, hand: HandOut) -> None:
        """Start the jobs (rule 1) and wait until the member joined.

        :param hand: the consumer's hand-out (each record is prepared with ``keep_locks``).
        :raises KafkaTimeoutError: the coordinator did not accept the member in time.
        """
        cluster, tg = core.cluster, core.tg
        breaker = self._breaker
        if breaker is not None:
            # Fetching holds while the breaker is open: asked at each turn, so the end
            # of the cool-down lets it go on whoever (if anyone) is looking.
            core.buffer.held = lambda: breaker.holds(core.clock)
        self.router = self._make_router(cluster)
        if self._dead_letter is not None:
            core.machine.dead_letter_limit = self._dead_letter.max_deliveries
            core.machine.route_unseen = self._dead_letter.route_unseen
            tg.start_soon(self._route_dead_letters, core, name="sharecon dead letters")
        tg.start_soon(self._run_heartbeat, core, name="sharecon heartbeat")
        if self._push_metrics is not None:
            self._push_metrics(core)
        tg.start_soon(keep_lag, cluster, config.group_id, core, name="sharecon lag")
        if config.keep_locks:
            core.check_renew()
            await renewals_allowed(
                cluster,
                config.group_id,
                timeout=config.request_timeout,
                member_id=core.member_id,
                explicit=True,
            )
            self.keeper = LockKeeper(config.max_hold)
            hand.prepare_each = hand.cursor.prepare_each = True
            tg.start_soon(self.keep_locks, core, self.keeper, name="sharecon lock keeper")
        if config.max_poll_interval is not None:
            tg.start_soon(hand.watch_liveness, core, name="sharecon liveness")
        join_limit = config.request_timeout + self._connection.connect_timeout
        with anyio.move_on_after(join_limit) as join_scope:
            await core.joined.wait()
        if join_scope.cancelled_caught:
            raise errors.KafkaTimeoutError(
                f"group {config.group_id!r}: the coordinator did not accept this "
                f"member within {join_limit:g} s"
            )
        if core.fatal is not None:
            raise core.fatal
        core.stats.poll_timer_from(_monotonic())

    # -- the jobs ------------------------------------------------------------------------

    async def _run_heartbeat(self, core: ConsumerCore) -> None:
        try:
            await heartbeat_loop(core)
        finally:
            self._heartbeat_done.set()

    def restart_heartbeat(self, core: ConsumerCore) -> None:
        """Start the heartbeat loop again if it ended (rejoining after idleness)."""
        if self._heartbeat_done.is_set():
            self._heartbeat_done = anyio.Event()
            self._task_group().start_soon(self._run_heartbeat, core, name="sharecon heartbeat")

    async def keep_locks(self, core: ConsumerCore, keeper: LockKeeper[Record[Any, Any]]) -> None:
        """Renew ``keeper``'s records' locks until the consumer closes or fails."""
        # Released with a delay: the delayed releases keep its lock, not the keeper.
        await keep_locks(core, keeper, self._max_hold, self.delayed_has)

    def delayed_has(self, record: Record[Any, Any]) -> bool:
        """Whether ``record`` waits for a delayed release."""
        delayed = self.delayed
        return delayed is not None and record in delayed

    def release_later(self, core: ConsumerCore, record: Record[Any, Any], delay: float) -> None:
        """Release ``record`` after ``delay`` seconds (> 0, checked), its lock renewed
        meanwhile: the delayed releases' job starts when the first record waits."""
        delayed = self.delayed
        if delayed is None:
            delayed = self.delayed = DelayedReleaser(core)
        if delayed.add(record, delay):
            core.tg.start_soon(run_ticks, core, delayed, name="sharecon delayed releases")
        if self.keeper is not None:
            self.keeper.drop(record)  # the delayed releases renew it, up to the release

    async def reject_to_dlq(
        self, core: ConsumerCore, record: Record[Any, Any], reason: str, topic: str | None
    ) -> object:
        """:func:`sharecon._consumer.rejecting.reject_to_dlq` with this consumer's router."""
        router = self.router
        assert router is not None
        return await reject_to_dlq(
            core,
            router,
            self._routing_error,
            self._retry_in,
            self._acknowledge,
            record,
            reason,
            topic,
        )

    def release_quietly(self, record: Record[Any, Any]) -> None:
        """Give ``record`` back after a failed dead-letter write, raising nothing."""
        release_quietly(self._acknowledge, record)

    async def _route_dead_letters(self, core: ConsumerCore) -> None:
        """Route records past the policy's delivery limit (never raises into the group)."""

        async def route(record: Record[Any, Any], reason: str) -> object:
            return await self.reject_to_dlq(core, record, reason, None)

        await route_dead_letters(core, route, self.release_quietly, self._breaker)

    # -- fetching ------------------------------------------------------------------------

    def stop_fetching(self) -> None:
        """Fetch no more records, for good (the consumer checked it is running)."""
        assert self.fetch_pool is not None
        self.fetch_pool.stop_fetching()

    async def fetching_stopped(self, timeout: float | None) -> bool:
        """Wait until, after :meth:`stop_fetching`, no fetch is outstanding.

        :raises ClientStateError: :meth:`stop_fetching` was not called.
        """
        pool = self.fetch_pool
        assert pool is not None
        if not pool.drain.stopped:
            raise errors.ClientStateError("fetching_stopped() before stop_fetching()")
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            await pool.drained.wait()
        return pool.drained.is_set()

    # -- close (rule 3) ------------------------------------------------------------------

    async def leave(
        self, core: ConsumerCore, request_timeout: float, final_wait: float | None = None
    ) -> None:
        """The close sequence: release, stop dead letters, close the fetchers (final
        acknowledgements, their answers awaited ``final_wait`` seconds in all at most),
        leave the group."""
        # The order is sharecon._consumer.closing's (the simulator runs it too); each step
        # is carried out here.
        unseen = core.machine.released_unseen
        spare = _spares_prefetch(core)
        for step in close_steps(
            core.machine, core.buffer, core.apply_effects, spare_buffered=spare
        ):
            if step is CloseStep.STOP_DEAD_LETTERS:
                core.dead_letter_signal.set()
                if self.router is not None:
                    await self.router.stop()
            elif step is CloseStep.CLOSE_FETCHERS:
                unseen = core.machine.released_unseen - unseen
                if unseen:
                    observe.released_unseen(
                        core.member_id, unseen, "closing", core.buffer.max_records
                    )
                core.wake_all()
                core.buffer.data.set()
                await core.fetchers.close(final_wait)
                core.tick_expiry(closing=True)  # nothing counted is left unsaid
            elif not self._heartbeat_done.is_set():  # CloseStep.LEAVE_GROUP
                core.membership.leave()
                core.heartbeat_wake.set()
                await self._heartbeat_done.wait()
        if core.membership.state not in (MemberState.LEFT, MemberState.FATAL):
            await _leave_directly(core, request_timeout)


def _spares_prefetch(core: ConsumerCore) -> bool:
    """Rule 5 of :mod:`sharecon._consumer.closing`, judged by the bootstrap broker's
    ShareFetch version (not connected yet: nothing is buffered anyway)."""
    try:
        versions = core.cluster.versions
    except errors.BrokerConnectError:
        return False
    return spares_buffered(versions.get(ShareFetchRequest))


async def _leave_directly(core: ConsumerCore, request_timeout: float) -> None:
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
        resp = await core.cluster.request(node, request, timeout=request_timeout)
    except errors.KafkaError as exc:
        logger.info("share consumer %s: leaving the group failed: %s", plan.member_id, exc)
        membership.on_error(anyio.current_time())
        return
    membership.on_response(anyio.current_time(), error_code=resp.error_code)
