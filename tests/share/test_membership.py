"""The ShareGroupHeartbeat state machine, driven through join/stable/fenced/leave sequences."""

from __future__ import annotations

import math
import uuid

import pytest

from sharecon._backoff import Backoff
from sharecon._share.membership import (
    EARLY_TRIES,
    AssignmentChange,
    HeartbeatPlan,
    Membership,
    MemberState,
    new_member_id,
)
from sharecon.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRecordError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    UnsupportedAssignorError,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import TopicIdPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
MID = "member-1"
NO_JITTER = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
EARLY = Backoff(initial=0.05, maximum=5.0, jitter=0.0)


def tp(t: uuid.UUID, p: int) -> TopicIdPartition:
    return TopicIdPartition(t, p)


def member(**kw: object) -> Membership:
    kw.setdefault("early", EARLY)
    return Membership("g", ["b", "a"], rack_id="r1", member_id=MID, backoff=NO_JITTER, **kw)  # type: ignore[arg-type]


def joined(
    m: Membership, now: float = 0.0, parts: dict[uuid.UUID, list[int]] | None = None
) -> None:
    assert m.build_heartbeat(now) is not None
    m.on_response(
        now, error_code=0, member_epoch=5, heartbeat_interval_ms=5000, assignment=parts or {}
    )


def test_member_id_looks_like_a_kafka_uuid() -> None:
    fixed = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    mid = new_member_id(lambda: fixed)
    assert mid == "a6e4EJ2tEdGAtADAT9QwyA" and len(mid) == 22
    # An id that would start with "-" is drawn again.
    draws = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), fixed])
    assert new_member_id(lambda: next(draws)) == mid
    assert len(Membership("g", ["t"]).member_id) == 22


def test_join_then_stable_sequence() -> None:
    m = member()
    assert m.state is MemberState.UNJOINED and m.next_deadline() == -math.inf
    plan = m.build_heartbeat(0.0)
    assert plan == HeartbeatPlan("g", MID, 0, "r1", ("a", "b"))
    assert m.state is MemberState.JOINING
    assert m.build_heartbeat(0.0) is None and m.next_deadline() is None  # in flight

    out = m.on_response(
        1.0, error_code=0, member_epoch=5, heartbeat_interval_ms=5000, assignment={T1: [0, 1]}
    )
    assert out.state is MemberState.STABLE
    assert out.change == AssignmentChange(
        frozenset({tp(T1, 0), tp(T1, 1)}), frozenset({tp(T1, 0), tp(T1, 1)}), frozenset()
    )
    assert m.next_deadline() == -math.inf  # acknowledge the assignment promptly
    assert m.build_heartbeat(1.0) == HeartbeatPlan("g", MID, 5, None, None)

    out = m.on_response(
        2.0, error_code=0, member_epoch=5, heartbeat_interval_ms=5000, assignment=None
    )
    assert out.change is None and m.assignment == {tp(T1, 0), tp(T1, 1)}  # None = unchanged
    assert m.next_deadline() == 7.0  # interval counted from the response
    assert m.build_heartbeat(6.9) is None
    assert m.build_heartbeat(7.0) == HeartbeatPlan("g", MID, 5, None, None)


def test_assignment_change_diff() -> None:
    m = member()
    joined(m, parts={T1: [0, 1]})
    m.build_heartbeat(0.0)
    out = m.on_response(1.0, error_code=0, member_epoch=6, assignment={T1: [1], T2: [0]})
    assert out.change == AssignmentChange(
        frozenset({tp(T1, 1), tp(T2, 0)}), frozenset({tp(T2, 0)}), frozenset({tp(T1, 0)})
    )
    assert m.member_epoch == 6
    # The same assignment again is not a change and does not hurry the next heartbeat.
    m.build_heartbeat(1.0)
    assert (
        m.on_response(2.0, error_code=0, member_epoch=6, assignment={T2: [0], T1: [1]}).change
        is None
    )
    assert m.next_deadline() == 7.0


def test_subscription_change_is_sent_promptly() -> None:
    m = member()
    joined(m, parts={T1: [0]})
    assert beat(m, 0.0) == 5.0  # the assignment acknowledged; the interval
    m.subscribe(["c"])
    assert m.next_deadline() == -math.inf
    assert m.build_heartbeat(0.5) == HeartbeatPlan("g", MID, 5, None, ("c",))
    with pytest.raises(ValueError):
        m.subscribe([])


def test_unsubscribe_sends_an_empty_subscription_and_stays_in_the_group() -> None:
    m = member()
    joined(m, parts={T1: [0]})
    m.unsubscribe()
    assert m.topics == () and m.next_deadline() == -math.inf
    assert m.build_heartbeat(0.5) == HeartbeatPlan("g", MID, 5, None, ())
    out = m.on_response(1.0, error_code=0, member_epoch=6, assignment={})
    assert out.state is MemberState.STABLE
    assert out.change == AssignmentChange(frozenset(), frozenset(), frozenset({tp(T1, 0)}))
    # Still a member: it keeps heartbeating, without sending the (unchanged) subscription.
    assert m.build_heartbeat(1.0) == HeartbeatPlan("g", MID, 6, None, None)
    m.on_response(1.5, error_code=0, member_epoch=6)
    m.unsubscribe()  # a second time changes nothing
    assert m.next_deadline() == 6.5
    m.subscribe(["c"])
    assert m.build_heartbeat(1.6) == HeartbeatPlan("g", MID, 6, None, ("c",))


def test_an_unsubscribed_member_out_of_the_group_waits_for_subscribe_to_join() -> None:
    # The coordinator refuses a join without topics (INVALID_REQUEST, which is fatal).
    m = member()
    joined(m, parts={T1: [0]})
    m.unsubscribe()
    m.build_heartbeat(0.0)
    m.on_response(1.0, error_code=ErrorCode.FENCED_MEMBER_EPOCH)
    assert m.build_heartbeat(1.0) is None and m.next_deadline() is None
    assert m.state is MemberState.UNJOINED
    m.subscribe(["a"])
    assert m.next_deadline() == -math.inf
    assert m.build_heartbeat(2.0) == HeartbeatPlan("g", MID, 0, "r1", ("a",))
    # Leaving while idle needs no heartbeat.
    idle = member()
    idle.unsubscribe()
    assert idle.build_heartbeat(0.0) is None
    idle.leave()
    assert idle.state is MemberState.LEFT


@pytest.mark.parametrize(
    "code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID], ids=lambda c: c.name
)
def test_fenced_drops_assignment_and_rejoins_at_once(code: int) -> None:
    m = member()
    joined(m, parts={T1: [0]})
    m.build_heartbeat(0.0)
    out = m.on_response(3.0, error_code=code)
    assert out.state is MemberState.FENCED
    assert out.change == AssignmentChange(frozenset(), frozenset(), frozenset({tp(T1, 0)}))
    assert m.next_deadline() == -math.inf
    # Rejoin: epoch 0, same member id, rack and topics again.
    assert m.build_heartbeat(3.0) == HeartbeatPlan("g", MID, 0, "r1", ("a", "b"))


@pytest.mark.parametrize(
    "code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE], ids=lambda c: c.name
)
def test_coordinator_moved_retries_at_once(code: int) -> None:
    m = member()
    joined(m, parts={T1: [0]})
    m.build_heartbeat(0.0)
    out = m.on_response(3.0, error_code=code)
    assert out.find_coordinator and out.state is MemberState.STABLE and out.change is None
    assert m.next_deadline() == -math.inf
    # The new coordinator may not have seen our subscription: send it again.
    assert m.build_heartbeat(3.0) == HeartbeatPlan("g", MID, 5, "r1", ("a", "b"))


def test_load_in_progress_backs_off_exponentially() -> None:
    m = member()
    assert m.build_heartbeat(0.0) is not None
    assert (
        m.on_response(1.0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS).state
        is MemberState.JOINING
    )
    assert m.next_deadline() == pytest.approx(1.1)
    assert m.build_heartbeat(1.1) is not None
    m.on_response(2.0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert m.next_deadline() == pytest.approx(2.2)
    assert m.build_heartbeat(2.2) == HeartbeatPlan("g", MID, 0, "r1", ("a", "b"))
    m.on_response(3.0, error_code=0, member_epoch=1, heartbeat_interval_ms=1000)
    assert m.state is MemberState.STABLE


# -- rule 7: early heartbeats while a new member has no partitions -------------------------


def beat(
    m: Membership,
    now: float | None = None,
    assignment: dict[uuid.UUID, list[int]] | None = None,
    **kw: int,
) -> float | None:
    """Send the heartbeat due at ``now`` (default: when due), answer it at once (epoch 5,
    interval 5 s unless given) and return when the next one is due, after the answer."""
    if now is None:
        now = m.next_deadline()
        assert now is not None
    assert m.build_heartbeat(now) is not None
    kw.setdefault("member_epoch", 5)
    kw.setdefault("heartbeat_interval_ms", 5000)
    m.on_response(now, error_code=0, assignment=assignment, **kw)
    due = m.next_deadline()
    return None if due is None else round(due - now, 9)


def early_steps(m: Membership, n: int, **kw: int) -> list[float | None]:
    """The delays after ``n`` heartbeats in a row, each sent when due, no partitions."""
    return [beat(m, **kw) for _ in range(n)]


def test_a_new_member_without_partitions_heartbeats_early_and_backs_off() -> None:
    m = member()
    # The join's answer: an epoch, an empty assignment. Then "unchanged" answers.
    assert beat(m, 10.0, assignment={}) == 0.05
    assert early_steps(m, 6) == [0.1, 0.2, 0.4, 0.8, 1.6, 5.0]
    # Six early heartbeats spent: the interval from now on, however long it stays empty.
    assert early_steps(m, 2) == [5.0, 5.0]


def test_early_heartbeats_are_capped_by_the_interval() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}, heartbeat_interval_ms=300) == 0.05
    assert early_steps(m, 6, heartbeat_interval_ms=300) == [0.1, 0.2, 0.3, 0.3, 0.3, 0.3]


def test_an_interval_not_yet_known_does_not_cap_early_heartbeats() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}, heartbeat_interval_ms=0) == 0.05
    assert m.heartbeat_interval is None


def test_the_assignment_ends_early_heartbeats() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}) == 0.05
    assert beat(m) == 0.1
    # Partitions at last: acknowledge them at once, then the normal interval.
    assert m.build_heartbeat(0.2) is not None
    out = m.on_response(0.2, error_code=0, member_epoch=6, assignment={T1: [0, 1]})
    assert out.change is not None and m.next_deadline() == -math.inf
    assert beat(m, 0.2) == 5.0
    # A rebalance that takes every partition away is not a pending assignment: no hurry.
    assert m.build_heartbeat(5.2) is not None
    out = m.on_response(5.2, error_code=0, member_epoch=7, assignment={})
    assert out.change is not None and out.change.removed == {tp(T1, 0), tp(T1, 1)}
    assert m.build_heartbeat(5.2) is not None  # acknowledging the (empty) assignment
    m.on_response(5.25, error_code=0, member_epoch=7)
    assert m.next_deadline() == pytest.approx(10.25)


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_a_rejoin_after_fencing_heartbeats_early_again(code: int) -> None:
    m = member()
    joined(m, parts={T1: [0]})
    assert m.build_heartbeat(1.0) is not None
    m.on_response(1.0, error_code=code)
    assert m.next_deadline() == -math.inf
    # The rejoin's answer has no partitions yet: the early sequence starts over.
    assert beat(m, 1.0, assignment={}) == 0.05
    assert beat(m) == 0.1


def test_a_rejoin_after_leaving_heartbeats_early_again() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}) == 0.05
    early_steps(m, 6)  # spent
    m.leave()
    assert m.build_heartbeat(20.0) is not None
    m.on_response(20.0, error_code=0, member_epoch=-1)
    m.rejoin()
    assert beat(m, 30.0, assignment={}) == 0.05


def test_a_subscription_change_while_unassigned_heartbeats_early_again() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}) == 0.05
    assert early_steps(m, 6)[-1] == 5.0  # spent
    m.subscribe(["c"])
    assert m.next_deadline() == -math.inf  # the subscription goes out at once
    assert beat(m, 10.0) == 0.05


def test_errors_between_early_heartbeats_keep_their_own_backoff() -> None:
    m = member()
    assert beat(m, 0.0, assignment={}) == 0.05
    assert m.build_heartbeat(0.05) is not None
    m.on_error(0.05)  # transport failure: the retry backoff, not the early one
    assert m.next_deadline() == pytest.approx(0.15)
    # The next success continues the early sequence where it was.
    assert beat(m) == 0.1


def test_an_unsubscribed_member_has_nothing_to_wait_for() -> None:
    m = member()
    joined(m, parts={T1: [0]})
    m.unsubscribe()
    assert m.build_heartbeat(0.0) is not None
    m.on_response(0.0, error_code=0, member_epoch=6, assignment={})
    assert m.build_heartbeat(0.0) is not None  # acknowledging the (empty) assignment
    m.on_response(0.0, error_code=0, member_epoch=6)
    assert m.next_deadline() == 5.0


def test_early_heartbeats_can_be_turned_off() -> None:
    m = member(early_tries=0)
    assert beat(m, 0.0, assignment={}) == 5.0
    with pytest.raises(ValueError):
        member(early_tries=-1)


def test_default_early_heartbeats_are_jittered_and_bounded() -> None:
    m = Membership("g", ["t"], member_id=MID)
    first = beat(m, 0.0, assignment={}, heartbeat_interval_ms=60_000)
    assert first is not None and 0.04 <= first <= 0.06
    delays = early_steps(m, 8, heartbeat_interval_ms=60_000)
    # At most EARLY_TRIES early heartbeats (the join's answer used the first), then the interval.
    assert [d for d in delays if d is not None and d < 60.0] == delays[: EARLY_TRIES - 1]
    assert delays[EARLY_TRIES - 1 :] == [60.0] * (9 - EARLY_TRIES)


FATAL = [
    (30, GroupAuthorizationFailedError),
    (42, InvalidRequestError),
    (81, GroupMaxSizeReachedError),
    (112, UnsupportedAssignorError),
    (69, GroupIdNotFoundError),
    (87, InvalidRecordError),  # an unexpected non-retriable code
]


@pytest.mark.parametrize(("code", "cls"), FATAL, ids=[str(c) for c, _ in FATAL])
def test_fatal_errors(code: int, cls: type[Exception]) -> None:
    m = member()
    joined(m, parts={T1: [0]})
    m.build_heartbeat(0.0)
    out = m.on_response(1.0, error_code=code, error_message="nope")
    assert out.state is MemberState.FATAL and isinstance(out.error, cls)
    assert out.change is not None and out.change.removed == {tp(T1, 0)}
    assert m.next_deadline() is None and m.build_heartbeat(100.0) is None


def test_topic_authorization_failed_is_reported_and_member_stays() -> None:
    m = member()
    joined(m)
    assert m.build_heartbeat(5.0) is not None
    out = m.on_response(6.0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert out.state is MemberState.STABLE and isinstance(out.error, TopicAuthorizationFailedError)
    assert m.next_deadline() == 11.0


def test_other_retriable_code_backs_off() -> None:
    m = member()
    joined(m)
    assert m.build_heartbeat(5.0) is not None
    out = m.on_response(6.0, error_code=ErrorCode.REQUEST_TIMED_OUT)
    assert out.state is MemberState.STABLE and out.error is None
    assert m.next_deadline() == pytest.approx(6.1)


def test_leave_sequence_then_rejoin() -> None:
    m = member()
    joined(m, parts={T1: [0]})
    assert m.leave() is None
    assert m.state is MemberState.LEAVING and m.next_deadline() == -math.inf
    assert m.build_heartbeat(1.0) == HeartbeatPlan("g", MID, -1, None, None)
    out = m.on_response(1.5, error_code=ErrorCode.GROUP_ID_NOT_FOUND)  # fine when leaving
    assert out.state is MemberState.LEFT and out.error is None
    assert out.change is not None and out.change.removed == {tp(T1, 0)}
    assert m.build_heartbeat(10.0) is None
    m.rejoin()
    assert m.build_heartbeat(10.0) == HeartbeatPlan("g", MID, 0, "r1", ("a", "b"))


def test_leave_before_joining_sends_nothing() -> None:
    m = member()
    assert m.leave() is None
    assert m.state is MemberState.LEFT and m.build_heartbeat(0.0) is None
    with pytest.raises(RuntimeError):
        member().rejoin()


def test_leave_while_join_in_flight() -> None:
    m = member()
    m.build_heartbeat(0.0)
    m.leave()
    out = m.on_response(1.0, error_code=0, member_epoch=3, assignment={T1: [0]})
    assert out.state is MemberState.LEAVING and out.change is None
    assert m.build_heartbeat(1.0) == HeartbeatPlan("g", MID, -1, None, None)
    assert m.on_error(2.0).state is MemberState.LEFT  # a failed leave still counts


def test_transport_error_backs_off_and_resends_fields() -> None:
    m = member()
    joined(m)
    assert m.build_heartbeat(5.0) is not None
    out = m.on_error(6.0)
    assert out.find_coordinator and out.state is MemberState.STABLE
    assert m.next_deadline() == pytest.approx(6.1)
    assert m.build_heartbeat(6.1) == HeartbeatPlan("g", MID, 5, "r1", ("a", "b"))


def test_answers_without_request_are_rejected() -> None:
    m = member()
    with pytest.raises(RuntimeError):
        m.on_response(0.0, error_code=0)
    with pytest.raises(RuntimeError):
        m.on_error(0.0)


@pytest.mark.parametrize(
    "kw",
    [{"member_id": ""}, {"member_id": "x" * 37}, {"rack_id": ""}],
    ids=["empty id", "long id", "empty rack"],
)
def test_bad_arguments(kw: dict[str, str]) -> None:
    args: dict[str, object] = {"member_id": MID, **kw}
    with pytest.raises(ValueError):
        Membership("g", ["t"], **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("attempt", "rand", "want"),
    [
        (0, 0.5, 0.1),
        (1, 0.5, 0.2),
        (3, 0.5, 0.8),
        (4, 0.5, 1.0),
        (0, 0.0, 0.08),
        (0, 1.0, 0.12),
        (1000, 0.5, 1.0),
    ],
)
def test_backoff(attempt: int, rand: float, want: float) -> None:
    assert Backoff(initial=0.1, rand=lambda: rand).delay(attempt) == pytest.approx(want)


def test_backoff_validates() -> None:
    for kw in ({"initial": 0.0}, {"initial": 2.0}, {"multiplier": 0.5}, {"jitter": 1.0}):
        with pytest.raises(ValueError):
            Backoff(**kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Backoff().delay(-1)


# -- rule 8: every error answer backs off --------------------------------------------------


def _refused_for(m: Membership, code: int, seconds: float) -> list[float]:
    """Drive ``m`` against a coordinator answering every heartbeat with ``code`` (and no
    interval) for ``seconds``; the times the heartbeats were sent."""
    now, sent = 0.0, []
    while now < seconds and len(sent) < 1000:  # bounded: a hot loop never advances now
        deadline = m.next_deadline()
        assert deadline is not None
        now = max(now, deadline)
        if m.build_heartbeat(now) is None:
            break
        sent.append(now)
        m.on_response(now, error_code=code)
    return sent


def test_a_joining_member_refused_for_topic_authorization_backs_off() -> None:
    # Issue 21, defect 1: the answer has no interval, and the next heartbeat was due at
    # now + 0: thousands a second. It backs off now, and reports the error each time.
    m = member()
    assert m.build_heartbeat(0.0) is not None
    out = m.on_response(0.0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="x")
    assert out.state is MemberState.JOINING
    assert isinstance(out.error, TopicAuthorizationFailedError)
    assert "subscribed topics a, b" in str(out.error)
    assert m.next_deadline() == pytest.approx(0.1)
    sent = _refused_for(member(), ErrorCode.TOPIC_AUTHORIZATION_FAILED, 10.0)
    # 0.1, 0.2, 0.4, 0.8, then 1.0 s apart: about 14 in 10 s (was ~24,000).
    assert 10 <= len(sent) <= 16
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert gaps[:4] == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert min(gaps) > 0


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ],
    ids=lambda c: c.name,
)
def test_no_error_answer_repeated_makes_the_member_hot_loop(code: int) -> None:
    sent = _refused_for(member(), code, 10.0)
    # At most one retry at once (fencing, a moved coordinator), then the backoff.
    assert len(sent) <= 17
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert sum(1 for g in gaps if g == 0) <= 1


def test_a_successful_answer_resets_the_backoff() -> None:
    m = member()
    joined(m, parts={T1: [0]})
    for expected in (-math.inf, 0.1, 0.2):  # fenced: at once, then backing off
        now = max(m.next_deadline() or 0.0, 1.0)
        assert m.build_heartbeat(now) is not None
        m.on_response(now, error_code=ErrorCode.FENCED_MEMBER_EPOCH)
        deadline = m.next_deadline()
        assert deadline is not None
        assert (deadline - now if expected > 0 else deadline) == pytest.approx(expected)
    now = m.next_deadline() or 0.0
    assert m.build_heartbeat(now) is not None
    m.on_response(now, error_code=0, member_epoch=7, heartbeat_interval_ms=5000, assignment={})
    assert m.build_heartbeat(now + 10) is not None
    m.on_response(now + 10, error_code=ErrorCode.FENCED_MEMBER_EPOCH)
    assert m.next_deadline() == -math.inf


def test_a_transport_failure_backs_off_too() -> None:
    m = member()
    assert m.build_heartbeat(0.0) is not None
    m.on_error(0.0)
    assert m.next_deadline() == pytest.approx(0.1)
