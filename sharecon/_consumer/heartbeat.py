"""The membership loop: ShareGroupHeartbeat to the group coordinator, on its schedule.

Rules of this module:

1. The sans-I/O :class:`~sharecon._share.membership.Membership` decides when to send and
   what; this loop only carries requests and answers, and applies assignment changes.
2. The coordinator is looked up with FindCoordinator and cached by the cluster; a
   transport error or NOT_COORDINATOR invalidates it.
3. The loop ends once the member has left (close) or failed; it never raises.
4. TOPIC_AUTHORIZATION_FAILED (the principal may not describe a subscribed topic) stops
   the consumer with that error, so start() or the iteration raises it within a heartbeat
   backoff. The member itself stays where it is (it backs off) so close() still leaves the
   group cleanly.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon._share.membership import MemberState
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    from sharecon._consumer.core import ConsumerCore
    from sharecon._share.membership import AssignmentChange, HeartbeatOutcome, HeartbeatPlan

logger = logging.getLogger("sharecon.consumer")

_IDLE_CHECK = 1.0


async def heartbeat_loop(core: ConsumerCore) -> None:
    """Run the membership until it leaves or fails (rule 3)."""
    membership = core.membership
    try:
        while membership.state not in (MemberState.LEFT, MemberState.FATAL):
            now = anyio.current_time()
            core.tick_expiry()  # a held-back count is said within a beat of its minute
            plan = membership.build_heartbeat(now)
            if plan is None:
                deadline = membership.next_deadline()
                wait = (
                    _IDLE_CHECK if deadline is None else max(0.0, min(deadline - now, _IDLE_CHECK))
                )
                await core.heartbeat_wake.wait(timeout=wait)
                continue
            outcome = await _send(core, plan)
            await _apply(core, outcome)
    except errors.KafkaError as exc:
        core.fail(exc)
    finally:
        core.joined.set()


async def _send(core: ConsumerCore, plan: HeartbeatPlan) -> HeartbeatOutcome:
    membership = core.membership
    request = membership.request(plan)
    try:
        node = await core.cluster.coordinator(core.config.group_id)
        sent_at = anyio.current_time()
        resp = await core.cluster.request(node, request, timeout=core.config.request_timeout)
    except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
        logger.info("heartbeat of %s failed: %s", plan.member_id, exc)
        return membership.on_error(anyio.current_time())
    except errors.BrokerError as exc:
        # FindCoordinator answered with an error (e.g. COORDINATOR_NOT_AVAILABLE while the
        # group state topic is created): retriable ones back off like a failed heartbeat.
        if not exc.retriable:
            raise
        logger.info("coordinator lookup for %s failed: %s", core.config.group_id, exc)
        return membership.on_error(anyio.current_time())
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
    return membership.answered(now, resp)


async def _apply(core: ConsumerCore, outcome: HeartbeatOutcome) -> None:
    if outcome.find_coordinator:
        core.cluster.invalidate_coordinator(core.config.group_id)
    if outcome.change is not None:
        core.stats.on_rebalance(time.monotonic())
        await _assign(core, outcome.change)
    if outcome.error is not None:
        if outcome.state is MemberState.FATAL or isinstance(
            outcome.error, errors.TopicAuthorizationFailedError
        ):
            core.fail(outcome.error)
        else:
            core.note_error(outcome.error)
    if outcome.state is MemberState.STABLE:
        core.joined.set()


async def _assign(core: ConsumerCore, change: AssignmentChange) -> None:
    """Take a new assignment: resolve topic ids to names, route to leaders (rule 1)."""
    cluster = core.cluster
    ids = {tp.topic_id for tp in change.assigned}
    names = cluster.metadata.topic_names
    if not ids <= names.keys() or any(
        core.leader(tp) is None for tp in change.assigned if tp.topic_id in names
    ):
        await cluster.refresh_metadata(core.membership.topics, topic_ids=ids)
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
