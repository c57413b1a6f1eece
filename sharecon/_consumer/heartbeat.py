"""The membership loop: ShareGroupHeartbeat to the group coordinator, on its schedule.

Rules of this module:

1. The sans-I/O :class:`~sharecon._share.membership.Membership` decides when to send and
   what, and :class:`~sharecon._consumer.membership_loop.MembershipLoop` (which the
   simulator runs too) what comes next and what each outcome means; this loop only
   carries requests and answers, and applies assignment changes.
2. The coordinator is looked up with FindCoordinator and cached by the cluster; a
   transport error or NOT_COORDINATOR invalidates it.
3. The loop ends once the member has left (close) or failed; it never raises.
4. TOPIC_AUTHORIZATION_FAILED (the principal may not describe a subscribed topic) stops
   the consumer with that error, so start() or the iteration raises it within a heartbeat
   backoff. The member itself stays where it is (it backs off) so close() still leaves the
   group cleanly.
5. What the loop uses of its consumer is :class:`MemberPort`; it is the one job that
   writes the consumer's ``assignment``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon import errors
from sharecon._consumer.membership_loop import IDLE_CHECK, Beat, MembershipLoop, Settled, Sleep
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    from anyio import Event

    from sharecon._consumer.config import ConsumerConfig
    from sharecon._consumer.core import Fetchers
    from sharecon._consumer.signal import Signal
    from sharecon._net.cluster import Cluster
    from sharecon._share.machine import ShareMachine
    from sharecon._share.membership import AssignmentChange, Membership
    from sharecon._stats import ConsumerStats

logger = logging.getLogger("sharecon.consumer")

__all__ = ["MemberPort", "heartbeat_loop"]


class MemberPort(Protocol):
    """What the membership loop uses of its consumer (``ConsumerCore`` has all of it)."""

    #: The assigned partitions, topic names resolved: replaced whole by this loop (rule 5).
    assignment: frozenset[TopicIdPartition]

    @property
    def membership(self) -> Membership:
        """The member's state machine."""
        ...

    @property
    def cluster(self) -> Cluster:
        """The coordinator, the requests, the metadata."""
        ...

    @property
    def config(self) -> ConsumerConfig:
        """The group id and the request timeout."""
        ...

    @property
    def machine(self) -> ShareMachine:
        """Told of each new assignment."""
        ...

    @property
    def fetchers(self) -> Fetchers:
        """Started for the new assignment's leaders."""
        ...

    @property
    def stats(self) -> ConsumerStats:
        """Heartbeat and rebalance counters."""
        ...

    @property
    def heartbeat_wake(self) -> Signal:
        """Wakes the loop before its next heartbeat is due."""
        ...

    @property
    def joined(self) -> Event:
        """Set once the member has joined (or failed to)."""
        ...

    @property
    def member_id(self) -> str:
        """For the log lines."""
        ...

    def leader(self, tp: TopicIdPartition) -> int | None:
        """The node leading ``tp`` (``None``: unknown)."""
        ...

    def tick_expiry(self, *, closing: bool = False) -> None:
        """Say lock expiries held back by the once-a-minute rule."""
        ...

    def fail(self, exc: BaseException) -> None:
        """Stop the consumer with ``exc`` (rule 3: the loop never raises)."""
        ...


async def heartbeat_loop(core: MemberPort) -> None:
    """Run the membership until it leaves or fails (rule 3)."""
    loop = MembershipLoop(core.membership)
    try:
        while True:
            now = anyio.current_time()
            core.tick_expiry()  # a held-back count is said within a beat of its minute
            step = loop.next(now)
            if type(step) is Sleep:
                until = step.until
                wait = IDLE_CHECK if until is None else min(until - now, IDLE_CHECK)
                await core.heartbeat_wake.wait(timeout=wait)
                continue
            if type(step) is not Beat:
                break  # left or failed
            await _apply(core, await _beat(core, loop, step))
    except errors.KafkaError as exc:
        core.fail(exc)
    finally:
        core.joined.set()


async def _beat(core: MemberPort, loop: MembershipLoop, step: Beat) -> Settled:
    """Send one heartbeat (finding the coordinator first) and settle its outcome."""
    plan = step.plan
    try:
        node = await core.cluster.coordinator(core.config.group_id)
        sent_at = anyio.current_time()
        resp = await core.cluster.request(node, step.request, timeout=core.config.request_timeout)
    except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
        logger.info("heartbeat of %s failed: %s", plan.member_id, exc)
        return loop.failed(anyio.current_time())
    except errors.BrokerError as exc:
        # FindCoordinator answered with an error (e.g. COORDINATOR_NOT_AVAILABLE while the
        # group state topic is created): retriable ones back off like a failed heartbeat.
        if not exc.retriable:
            raise
        logger.info("coordinator lookup for %s failed: %s", core.config.group_id, exc)
        return loop.failed(anyio.current_time())
    logger.debug(
        "heartbeat epoch %d -> error %d epoch %d interval %d ms, assignment %s",
        plan.member_epoch,
        resp.error_code,
        resp.member_epoch,
        resp.heartbeat_interval_ms,
        "unchanged" if resp.assignment is None else len(resp.assignment.topic_partitions),
    )
    now = anyio.current_time()
    core.stats.on_heartbeat(time.monotonic(), now - sent_at)
    return loop.answered(now, resp)


async def _apply(core: MemberPort, settled: Settled) -> None:
    if settled.find_coordinator:
        core.cluster.invalidate_coordinator(core.config.group_id)
    if settled.change is not None:
        core.stats.on_rebalance(time.monotonic())
        await _assign(core, settled.change)
    if settled.fatal is not None:
        core.fail(settled.fatal)
    if settled.joined:
        core.joined.set()


async def _assign(core: MemberPort, change: AssignmentChange) -> None:
    """Take a new assignment: resolve topic ids to names, route to leaders (rule 1)."""
    cluster = core.cluster
    ids = {tp.topic_id for tp in change.assigned}
    names = cluster.metadata.topic_names
    if not ids <= names.keys() or any(
        core.leader(tp) is None for tp in change.assigned if tp.topic_id in names
    ):
        try:
            await cluster.refresh_metadata(core.membership.topics, topic_ids=ids)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            # Taken all the same: the partitions it cannot route yet are looked for until
            # their leaders are known (FetcherPool.ensure, sharecon._share.leader_search).
            # Raised, it stopped the consumer for good.
            logger.info("metadata for the new assignment could not be read: %s", exc)
        names = cluster.metadata.topic_names
    core.assignment = frozenset(
        TopicIdPartition(tp.topic_id, tp.partition, names.get(tp.topic_id))
        for tp in change.assigned
    )
    core.machine.assigned(core.assignment)
    logger.info(
        "share consumer %s assigned %d partitions (+%d -%d)",
        core.member_id,
        len(core.assignment),
        len(change.added),
        len(change.removed),
    )
    core.fetchers.ensure()
