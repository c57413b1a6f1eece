"""The membership loop's steps (sharecon._consumer.membership_loop), without a broker.

The consumer's heartbeat loop and the simulator's member both run these steps; here each
outcome the membership can give is turned into what the port must do.
"""

from __future__ import annotations

import uuid

from sharecon._backoff import Backoff
from sharecon._consumer.membership_loop import ENDED, Beat, MembershipLoop, Sleep
from sharecon._share.membership import JOIN_EPOCH, LEAVE_EPOCH, Membership
from sharecon.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.share_group_heartbeat import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from sharecon.types import TopicIdPartition

TOPIC_ID = uuid.UUID(int=7)
BACKOFF = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
INTERVAL_MS = 5000


def loop() -> MembershipLoop:
    return MembershipLoop(Membership("g", ["t"], member_id="m1", backoff=BACKOFF, early=BACKOFF))


def answer(
    code: int = 0, epoch: int = 1, partitions: tuple[int, ...] | None = None
) -> ShareGroupHeartbeatResponse:
    assignment = None
    if partitions is not None:
        assignment = Assignment(
            topic_partitions=(TopicPartitions(topic_id=TOPIC_ID, partitions=partitions),)
        )
    return ShareGroupHeartbeatResponse(
        error_code=code,
        member_epoch=epoch,
        heartbeat_interval_ms=INTERVAL_MS,
        assignment=assignment,
    )


def beat(lp: MembershipLoop, now: float) -> Beat:
    step = lp.next(now)
    assert type(step) is Beat, step
    return step


def test_a_join_then_an_assignment_then_a_sleep_until_the_interval() -> None:
    lp = loop()
    first = beat(lp, 0.0)
    assert first.request.member_epoch == JOIN_EPOCH
    assert first.request.subscribed_topic_names == ("t",)
    assert lp.next(0.0) == Sleep(None)  # one heartbeat in flight: nothing is due
    settled = lp.answered(0.1, answer(partitions=(0, 1)))
    assert settled.joined and settled.fatal is None and not settled.find_coordinator
    assert settled.change is not None
    assert settled.change.added == {TopicIdPartition(TOPIC_ID, 0), TopicIdPartition(TOPIC_ID, 1)}
    # An assignment changed: the next heartbeat acknowledges it at once.
    again = beat(lp, 0.1)
    assert again.request.member_epoch == 1
    settled = lp.answered(0.2, answer())
    assert settled.joined and settled.change is None
    assert lp.next(0.2) == Sleep(0.2 + INTERVAL_MS / 1000)
    assert lp.next(1.0) == Sleep(0.2 + INTERVAL_MS / 1000)  # asking early changes nothing
    assert type(lp.next(5.2)) is Beat


def test_a_heartbeat_that_got_no_answer_looks_the_coordinator_up_and_backs_off() -> None:
    lp = loop()
    beat(lp, 0.0)
    settled = lp.failed(1.0)
    assert settled.find_coordinator and settled.fatal is None and not settled.joined
    step = lp.next(1.0)
    assert type(step) is Sleep and step.until is not None and step.until > 1.0
    assert type(lp.next(step.until)) is Beat


def test_a_moved_coordinator_is_looked_up_again() -> None:
    lp = loop()
    beat(lp, 0.0)
    settled = lp.answered(0.1, answer(code=ErrorCode.NOT_COORDINATOR))
    assert settled.find_coordinator and settled.fatal is None


def test_a_fatal_answer_stops_the_consumer_and_ends_the_loop() -> None:
    lp = loop()
    beat(lp, 0.0)
    settled = lp.answered(0.1, answer(code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    assert isinstance(settled.fatal, GroupAuthorizationFailedError)
    assert not settled.joined
    assert lp.next(0.1) is ENDED


def test_a_topic_the_principal_may_not_describe_stops_the_consumer_but_not_the_member() -> None:
    """The member stays where it is (backing off), so a close still leaves the group."""
    lp = loop()
    beat(lp, 0.0)
    settled = lp.answered(0.1, answer(code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    assert isinstance(settled.fatal, TopicAuthorizationFailedError)
    assert lp.next(0.1) is not ENDED
    lp.membership.leave()
    leave = beat(lp, 0.1)
    assert leave.request.member_epoch == LEAVE_EPOCH


def test_after_the_leave_is_answered_the_loop_ends() -> None:
    lp = loop()
    beat(lp, 0.0)
    lp.answered(0.1, answer(partitions=(0,)))
    lp.membership.leave()
    assert beat(lp, 0.1).request.member_epoch == LEAVE_EPOCH
    settled = lp.answered(0.2, answer(epoch=LEAVE_EPOCH))
    assert settled.change is not None and settled.change.removed
    assert lp.next(0.2) is ENDED
