"""Share sessions: epochs, full vs incremental requests, close, resets and stale answers."""

from __future__ import annotations

import uuid

import pytest

from sharecon._share.acks import AckBatch
from sharecon._share.session import (
    FINAL_EPOCH,
    MAX_EPOCH,
    RequestKind,
    SessionEvent,
    SessionOutcome,
    SessionTag,
    SharePlan,
    ShareSession,
    next_epoch,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
A0, A1, A2 = (TopicIdPartition(T1, p) for p in range(3))
B0 = TopicIdPartition(T2, 0)
ACK = [AckBatch(0, 9, (AckType.ACCEPT,))]


@pytest.mark.parametrize(
    ("epoch", "want"),
    [
        (0, 1),
        (1, 2),
        (41, 42),
        (MAX_EPOCH - 1, MAX_EPOCH),
        (MAX_EPOCH, 1),
        (FINAL_EPOCH, FINAL_EPOCH),
    ],
)
def test_next_epoch(epoch: int, want: int) -> None:
    assert next_epoch(epoch) == want


def test_the_epoch_wraps_at_the_int32_bound() -> None:
    """The epoch is an INT32 on the wire: it wraps to 1 after 2**31 - 1, never past it
    (found by mutation testing: a changed bound kept every other test green)."""
    assert next_epoch(2**31 - 2) == 2**31 - 1
    assert next_epoch(2**31 - 1) == 1


def opened(*partitions: TopicIdPartition) -> ShareSession:
    s = ShareSession(node_id=3)
    plan = s.build_fetch(partitions)
    assert plan is not None
    assert s.on_response(plan, 0).event is SessionEvent.ADVANCED
    return s


def test_open_is_full_and_carries_no_acks() -> None:
    s = ShareSession(node_id=3)
    assert s.is_new and s.tag == SessionTag(3, 0)
    plan = s.build_fetch([A0, B0])
    assert plan is not None
    assert (plan.kind, plan.epoch, plan.added, plan.forgotten, dict(plan.acks)) == (
        RequestKind.SHARE_FETCH,
        0,
        (A0, B0),
        (),
        {},
    )
    assert plan.fetches and not plan.is_final and plan.node_id == 3
    assert plan.topics() == {T1: {0: ()}, T2: {0: ()}}
    assert s.in_flight is plan
    with pytest.raises(RuntimeError):
        s.build_fetch([A0])  # one request in flight
    assert s.on_response(plan, 0) == SessionOutcome(SessionEvent.ADVANCED, SessionTag(3, 0), 0)
    assert (s.epoch, s.partitions, s.in_flight) == (1, (A0, B0), None)


def test_holds_names_the_partitions_the_broker_was_told_of() -> None:
    """``holds`` (what wakes an idle loop for an answer) follows the session's partitions:
    none while new, those of the opening fetch once answered, none after a reset."""
    s = ShareSession(node_id=3)
    assert not s.holds(A0)
    plan = s.build_fetch([A0])
    assert plan is not None
    s.on_response(plan, 0)
    assert s.holds(A0) and not s.holds(B0)
    s.reset()
    assert not s.holds(A0)


def test_new_session_rejects_acks_and_skips_when_empty() -> None:
    s = ShareSession(node_id=3)
    with pytest.raises(ValueError):
        s.build_fetch([A0], {A0: ACK})
    with pytest.raises(ValueError):
        s.build_acknowledge({A0: ACK})
    assert s.build_fetch([]) is None
    assert s.build_close() is None  # nothing to close
    assert s.in_flight is None


def plan_of(
    s: ShareSession,
    want: list[TopicIdPartition] | tuple[TopicIdPartition, ...],
    acks: dict[TopicIdPartition, list[AckBatch]] | None = None,
) -> SharePlan:
    plan = s.build_fetch(want, acks)
    assert plan is not None
    s.on_response(plan, 0)
    return plan


def test_incremental_sequence() -> None:
    """Each step lists only what changed, plus partitions carrying acks."""
    s = opened(A0, A1)
    steps: list[
        tuple[
            list[TopicIdPartition],
            dict[TopicIdPartition, list[AckBatch]],
            int,
            tuple[TopicIdPartition, ...],
            tuple[TopicIdPartition, ...],
            tuple[TopicIdPartition, ...],
        ]
    ] = [
        # want, acks, epoch, added, forgotten, session afterwards
        ([A0, A1], {}, 1, (), (), (A0, A1)),
        ([A0, A1], {A1: ACK}, 2, (), (), (A0, A1)),
        ([A0, A1, A2], {}, 3, (A2,), (), (A0, A1, A2)),
        ([A1, A2], {A0: ACK}, 4, (), (A0,), (A1, A2)),  # removed, with its last acks
        ([A1, A2], {B0: ACK}, 5, (), (B0,), (A1, A2)),  # acks-only partition is forgotten
        ([A2, B0], {}, 6, (B0,), (A1,), (A2, B0)),
    ]
    for want, acks, epoch, added, forgotten, after in steps:
        plan = plan_of(s, want, acks)
        assert (plan.epoch, plan.added, plan.forgotten, dict(plan.acks)) == (
            epoch,
            added,
            forgotten,
            acks,
        )
        assert s.partitions == after
    assert s.epoch == 7


def test_the_same_tuple_again_plans_what_an_equal_list_plans() -> None:
    """Rule 7: while nothing changes the consumer passes the same tuple each fetch, and
    the session skips comparing it; the plans are those an equal new list gets."""
    same = (A0, A1)
    by_tuple, by_list = opened(*same), opened(*same)
    for acks in ({}, {A1: ACK}, {B0: ACK}, {A0: ACK, B0: ACK}, {}):
        got = plan_of(by_tuple, same, acks)
        want = plan_of(by_list, list(same), acks)
        assert (got.epoch, got.added, got.forgotten, dict(got.acks)) == (
            want.epoch,
            want.added,
            want.forgotten,
            dict(want.acks),
        )
        assert by_tuple.partitions == by_list.partitions == same
    # A change after the same tuple is seen; the same tuple after a reset reopens in full.
    assert plan_of(by_tuple, (A1, A2)).added == (A2,)
    assert plan_of(by_tuple, same).forgotten == (A2,)
    by_tuple.reset()
    reopened = plan_of(by_tuple, same)
    assert (reopened.epoch, reopened.added) == (0, same)
    assert plan_of(by_tuple, same).added == ()
    # An empty tuple, again, on an empty session: nothing to send.
    empty: tuple[TopicIdPartition, ...] = ()
    assert plan_of(by_tuple, empty).forgotten == same
    assert by_tuple.build_fetch(empty) is None and by_tuple.build_fetch(empty) is None


def test_acks_only_partition_in_topics_and_forgotten() -> None:
    s = opened(A0)
    plan = plan_of(s, [A0], {B0: ACK})
    assert plan.topics() == {T2: {0: ACK}}
    assert plan.forgotten_topics() == {T2: [0]}


def test_empty_incremental_is_skipped_only_on_an_empty_session() -> None:
    s = opened(A0)
    assert plan_of(s, [A0]).added == ()  # a non-empty session keeps fetching
    plan = plan_of(s, [])
    assert plan.forgotten == (A0,)
    assert s.build_fetch([]) is None
    assert s.in_flight is None


def test_acknowledge_keeps_session_partitions() -> None:
    s = opened(A0)
    plan = s.build_acknowledge({A0: ACK, B0: ACK})
    assert plan is not None
    assert (plan.kind, plan.epoch, plan.added, plan.forgotten) == (
        RequestKind.SHARE_ACKNOWLEDGE,
        1,
        (),
        (),
    )
    assert not plan.fetches
    assert s.on_response(plan, 0).event is SessionEvent.ADVANCED
    assert (s.epoch, s.partitions) == (2, (A0,))
    assert s.build_acknowledge({}) is None


def test_renew_fetch_changes_nothing_and_does_not_fetch() -> None:
    s = opened(A0)
    plan = s.build_fetch([A0, A1], {A0: ACK, B0: ACK}, is_renew=True)
    assert plan is not None
    assert plan.is_renew and not plan.fetches
    assert (plan.added, plan.forgotten) == ((), (B0,))
    assert s.partitions == (A0,)
    s.on_response(plan, 0)
    with pytest.raises(ValueError):
        s.build_fetch([A0], {}, is_renew=True)


@pytest.mark.parametrize("kind", [RequestKind.SHARE_ACKNOWLEDGE, RequestKind.SHARE_FETCH])
def test_close(kind: RequestKind) -> None:
    s = opened(A0)
    plan = s.build_close({A0: ACK}, kind=kind)
    assert plan is not None
    assert (plan.kind, plan.epoch, plan.added, plan.forgotten) == (kind, FINAL_EPOCH, (), ())
    assert plan.is_final and not plan.fetches and dict(plan.acks) == {A0: ACK}
    # The close's acks are real answers, not lock renewals (the machine passes no is_renew).
    assert not plan.is_renew
    out = s.on_response(plan, 0)
    assert out == SessionOutcome(SessionEvent.CLOSED, SessionTag(3, 0), 0)
    assert (s.is_new, s.partitions, s.generation) == (True, (), 1)


RESETS = [
    (RequestKind.SHARE_FETCH, ErrorCode.SHARE_SESSION_NOT_FOUND, SessionEvent.RESET),
    (RequestKind.SHARE_FETCH, ErrorCode.INVALID_SHARE_SESSION_EPOCH, SessionEvent.RESET),
    (RequestKind.SHARE_FETCH, ErrorCode.SHARE_SESSION_LIMIT_REACHED, SessionEvent.RESET),
    (RequestKind.SHARE_ACKNOWLEDGE, ErrorCode.SHARE_SESSION_NOT_FOUND, SessionEvent.RESET),
    (RequestKind.SHARE_ACKNOWLEDGE, ErrorCode.INVALID_SHARE_SESSION_EPOCH, SessionEvent.RESET),
    # The session limit applies to ShareFetch only.
    (RequestKind.SHARE_ACKNOWLEDGE, ErrorCode.SHARE_SESSION_LIMIT_REACHED, SessionEvent.ADVANCED),
    # Other errors still advance.
    (RequestKind.SHARE_FETCH, ErrorCode.GROUP_AUTHORIZATION_FAILED, SessionEvent.ADVANCED),
    (RequestKind.SHARE_FETCH, ErrorCode.NONE, SessionEvent.ADVANCED),
]


@pytest.mark.parametrize(("kind", "code", "event"), RESETS)
def test_top_level_errors(kind: RequestKind, code: int, event: SessionEvent) -> None:
    s = opened(A0, A1)
    plan = (
        s.build_fetch([A0, A1], {A0: ACK})
        if kind is RequestKind.SHARE_FETCH
        else s.build_acknowledge({A0: ACK})
    )
    assert plan is not None
    out = s.on_response(plan, code)
    assert out == SessionOutcome(event, SessionTag(3, 0), code)
    if event is SessionEvent.RESET:
        assert (s.epoch, s.partitions, s.generation) == (0, (), 1)
        full = s.build_fetch([A0, A1])
        assert full is not None and (full.epoch, full.added) == (0, (A0, A1))
        assert full.tag == SessionTag(3, 1)
    else:
        assert (s.epoch, s.generation) == (2, 0)


def test_transport_error_resets() -> None:
    s = opened(A0)
    plan = s.build_fetch([A0], {A0: ACK})
    assert plan is not None
    out = s.on_transport_error(plan)
    assert out == SessionOutcome(SessionEvent.RESET, SessionTag(3, 0), 13)
    assert (s.is_new, s.partitions, s.in_flight) == (True, (), None)


def test_late_answer_after_reset_is_stale() -> None:
    s = opened(A0)
    plan = s.build_fetch([A0])
    assert plan is not None
    assert s.reset() == SessionTag(3, 0)
    assert s.on_response(plan, 0).event is SessionEvent.STALE
    assert s.on_transport_error(plan).event is SessionEvent.STALE
    assert (s.epoch, s.generation) == (0, 1)


def test_epoch_wraps_to_one() -> None:
    s = opened(A0)
    s._epoch = MAX_EPOCH  # reaching it for real takes 2**31 round trips
    plan = s.build_fetch([A0])
    assert plan is not None and plan.epoch == MAX_EPOCH
    s.on_response(plan, 0)
    assert s.epoch == 1
