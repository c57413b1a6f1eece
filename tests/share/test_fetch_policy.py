"""The fetch loop's decisions, without a broker: the next request, each error code, and a
session lost in every state it can be in."""

from __future__ import annotations

import uuid

import pytest

from sharecon._share.fetch_policy import (
    Action,
    FetchPlanner,
    answer_verdict,
    partition_action,
    renewed,
    top_level_action,
    transport_failed,
)
from sharecon._share.ledger import AckFailure, AckLedger, MarkResult
from sharecon._share.session import RequestKind, SessionEvent, ShareSession
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition

T = uuid.uuid4()
TP0 = TopicIdPartition(T, 0, "t")
TP1 = TopicIdPartition(T, 1, "t")
FETCH, ACK = RequestKind.SHARE_FETCH, RequestKind.SHARE_ACKNOWLEDGE


def opened(want: tuple[TopicIdPartition, ...] = (TP0,)) -> tuple[ShareSession, FetchPlanner]:
    """A session whose opening fetch (epoch 0) was answered: now at epoch 1."""
    session = ShareSession(1)
    planner = FetchPlanner(session)
    turn = planner.next(AckLedger(), want, room=True)
    assert turn.plan is not None and turn.plan.epoch == 0
    assert answer_verdict(session, AckLedger(), turn.plan, 0).proceed
    return session, planner


# -- the next request --------------------------------------------------------------------------


def test_a_new_session_opens_with_a_fetch_and_waits_without_room() -> None:
    session = ShareSession(1)
    planner = FetchPlanner(session)
    assert planner.next(AckLedger(), [TP0], room=False).plan is None
    turn = planner.next(AckLedger(), [TP0], room=True)
    assert turn.plan is not None and turn.plan.kind is FETCH and turn.plan.added == (TP0,)
    assert turn.taken is None and turn.may_wait


def test_acks_ride_on_the_next_fetch_and_holding_records_forbids_a_long_poll() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.mark(TP0, 0, AckType.ACCEPT)
    turn = planner.next(ledger, [TP0], room=True)
    assert turn.plan is not None and turn.plan.kind is FETCH
    assert turn.taken is not None and dict(turn.plan.acks) == turn.taken.acks
    assert not turn.may_wait  # nine records still held: MaxWaitMs 0


def test_without_room_for_a_reason_other_than_the_buffer_the_acks_go_alone() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=30.0)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    turn = planner.next(ledger, [TP0], room=False, now=1.0)  # a budget, say
    assert turn.plan is not None and turn.plan.kind is ACK


def test_acks_wait_for_room_in_a_full_buffer_then_ride_the_fetch() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=30.0)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    turn = planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.0)
    assert turn.plan is None and planner.held_since == 1.0
    turn = planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.05)
    assert turn.plan is None and planner.held_since == 1.0  # since the first wait
    turn = planner.next(ledger, [TP0], room=True, now=1.07)
    assert turn.plan is not None and turn.plan.kind is FETCH
    assert turn.taken is not None and turn.taken.count == 1
    assert planner.held_since is None


def test_acks_waiting_for_room_go_alone_once_their_linger_ends() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=30.0)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.0).plan is None
    planner.linger_expired = True
    turn = planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.1)
    assert turn.plan is not None and turn.plan.kind is ACK


@pytest.mark.parametrize(
    ("deadline", "renew", "now"),
    [(1.5, False, 1.0), (None, False, 1.0), (30.0, True, 1.0), (30.0, False, None)],
    ids=["lock-ends-within-the-margin", "lock-end-unknown", "a-renew", "no-clock"],
)
def test_acks_that_may_not_wait_go_alone_with_a_full_buffer(
    deadline: float | None, renew: bool, now: float | None
) -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=deadline)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    if renew:
        ledger.mark(TP0, 1, AckType.RENEW)
    turn = planner.next(ledger, [TP0], room=False, buffer_full=True, now=now)
    assert turn.plan is not None and turn.plan.kind is ACK
    assert planner.held_since is None


def test_a_commit_sends_the_acks_at_once_even_with_room() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.mark(TP0, 0, AckType.REJECT)
    turn = planner.next(ledger, [TP0], room=True, urgent=True)
    assert turn.plan is not None and turn.plan.kind is ACK


def test_an_expired_linger_sends_the_acks_alone_once() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.mark(TP0, 0, AckType.ACCEPT)
    planner.linger_expired = True
    turn = planner.next(ledger, [TP0], room=True)
    assert turn.plan is not None and turn.plan.kind is ACK
    assert not planner.linger_expired


def test_renew_marks_make_a_renew_request_that_does_not_fetch() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.mark(TP0, 3, AckType.RENEW)
    turn = planner.next(ledger, [TP0], room=True)
    assert turn.plan is not None and turn.plan.is_renew and not turn.plan.fetches


def test_dry_waits_for_answers_then_fetches_again() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    turn = planner.next(ledger, [TP0], room=True)
    assert turn.plan is not None and not turn.may_wait
    answer_verdict(session, ledger, turn.plan, 0)
    planner.fetched(turn.plan, may_wait=turn.may_wait, acquired=0)
    assert planner.dry
    assert planner.next(ledger, [TP0], room=True).plan is None  # wait for the application
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.answered() and not planner.dry
    assert planner.next(ledger, [TP0], room=True).plan is not None


def test_a_long_poll_that_found_nothing_is_not_dry() -> None:
    session, planner = opened()
    turn = planner.next(AckLedger(), [TP0], room=True)
    assert turn.plan is not None and turn.may_wait
    planner.fetched(turn.plan, may_wait=True, acquired=0)
    assert not planner.dry


def dry_with_ten_held(deadline: float = 30.0) -> tuple[ShareSession, FetchPlanner, AckLedger]:
    """A session holding ten records whose last two no-wait fetches came back empty: the
    first, then the one that carried the answer (offset 9) the first empty one woke."""
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=deadline)
    turn = planner.next(ledger, [TP0], room=True, now=1.0)
    assert turn.plan is not None and not turn.may_wait
    answer_verdict(session, ledger, turn.plan, 0)
    planner.fetched(turn.plan, may_wait=False, acquired=0)
    assert planner.dry
    ledger.mark(TP0, 9, AckType.ACCEPT)
    assert planner.answered()
    # After one empty answer the first answer goes at once: the broker's per-partition
    # lock limit, which that answer frees a place under, may be what emptied it.
    turn = planner.next(ledger, [TP0], room=True, now=1.01)
    assert turn.plan is not None and turn.plan.kind is FETCH and turn.taken is not None
    answer_verdict(session, ledger, turn.plan, 0)
    ledger.complete_all(turn.plan.tag, 0)  # the broker took the answer
    planner.fetched(turn.plan, may_wait=False, acquired=0)
    assert planner.dry and planner.empty_streak == 2
    return session, planner, ledger


def test_answers_after_a_dry_fetch_gather_for_the_linger_then_ride_one_fetch() -> None:
    _, planner, ledger = dry_with_ten_held()
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.answered()  # the first answer wakes the loop...
    turn = planner.next(ledger, [TP0], room=True, now=1.2)
    assert turn.plan is None and planner.held_since == 1.2  # ...which waits for company
    ledger.mark(TP0, 1, AckType.ACCEPT)
    assert not planner.answered()  # the next answers wake no one
    assert planner.next(ledger, [TP0], room=True, now=1.25).plan is None
    planner.linger_expired = True  # the loop's idle wait (ack_linger) ran out
    turn = planner.next(ledger, [TP0], room=True, now=1.3)
    assert turn.plan is not None and turn.plan.kind is FETCH  # not on their own
    assert turn.taken is not None and turn.taken.count == 2
    assert not turn.may_wait and not planner.gathering and planner.held_since is None


def test_answers_given_before_the_empty_answer_came_gather_too() -> None:
    """Found by simulation (invariant 25, seed 636 on 4.4): an answer marked while the
    no-wait fetch was out never told the dry planner (it was not dry yet); when the empty
    answer came the loop planned at once and sent it on another no-wait fetch."""
    session, planner, ledger = dry_with_ten_held()
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.answered()
    planner.linger_expired = True
    turn = planner.next(ledger, [TP0], room=True, now=1.2)
    assert turn.plan is not None and turn.plan.kind is FETCH
    ledger.mark(TP0, 1, AckType.ACCEPT)  # while that fetch is out
    answer_verdict(session, ledger, turn.plan, 0)
    ledger.complete_all(turn.plan.tag, 0)
    planner.fetched(turn.plan, may_wait=False, acquired=0)
    assert planner.next(ledger, [TP0], room=True, now=1.25).plan is None
    assert planner.held_since == 1.25
    assert planner.records_wanted() and not planner.records_wanted()  # wake once
    turn = planner.next(ledger, [TP0], room=True, now=1.3)
    assert turn.plan is not None and turn.plan.kind is FETCH
    assert not planner.wanted


def test_answers_held_back_by_the_hold_limit_go_when_the_application_waits() -> None:
    """With more than half a lock's work in hand (no room, ``buffer_full``), answers wait
    for room as in a full buffer; the application running out sends them at once."""
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=30.0)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.0).plan is None
    assert planner.records_wanted()
    turn = planner.next(ledger, [TP0], room=False, buffer_full=True, now=1.01)
    assert turn.plan is not None and turn.plan.kind is ACK


def test_a_dry_planner_with_nothing_gathered_stays_dry_when_records_are_wanted() -> None:
    _, planner, ledger = dry_with_ten_held()
    assert not planner.records_wanted()
    assert planner.dry and planner.next(ledger, [TP0], room=True, now=1.2).plan is None


def test_gathered_answers_go_at_once_when_the_application_waits_for_records() -> None:
    _, planner, ledger = dry_with_ten_held()
    ledger.mark(TP0, 0, AckType.ACCEPT)
    planner.answered()
    assert planner.next(ledger, [TP0], room=True, now=1.2).plan is None
    assert planner.records_wanted()  # wake the loop
    assert not planner.records_wanted()  # once
    turn = planner.next(ledger, [TP0], room=True, now=1.21)
    assert turn.plan is not None and turn.plan.kind is FETCH


@pytest.mark.parametrize(
    ("deadline", "room", "now"),
    [(1.5, True, 1.2), (30.0, True, None), (30.0, False, 1.2)],
    ids=["lock-ends-within-the-margin", "no-clock", "no-room"],
)
def test_answers_after_a_dry_fetch_that_may_not_gather_go_now(
    deadline: float, room: bool, now: float | None
) -> None:
    _, planner, ledger = dry_with_ten_held(deadline)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert planner.answered()
    turn = planner.next(ledger, [TP0], room=room, now=now)
    assert turn.plan is not None and turn.taken is not None
    assert turn.plan.kind is (FETCH if room else ACK)


def test_a_fetch_that_brings_records_ends_the_streak() -> None:
    session, planner, ledger = dry_with_ten_held()
    ledger.mark(TP0, 0, AckType.ACCEPT)
    planner.answered()
    planner.linger_expired = True
    turn = planner.next(ledger, [TP0], room=True, now=1.2)
    assert turn.plan is not None
    answer_verdict(session, ledger, turn.plan, 0)
    planner.fetched(turn.plan, may_wait=False, acquired=3)
    assert planner.empty_streak == 0 and not planner.dry


def test_answers_without_a_dry_fetch_before_them_do_not_gather() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)], deadline=30.0)
    ledger.mark(TP0, 0, AckType.ACCEPT)
    assert not planner.answered()
    turn = planner.next(ledger, [TP0], room=True, now=1.0)
    assert turn.plan is not None and turn.plan.kind is FETCH


# -- error policy ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (ErrorCode.NONE, Action.OK),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, Action.LEADER_MOVED),
        (ErrorCode.FENCED_LEADER_EPOCH, Action.LEADER_MOVED),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, Action.REFRESH_METADATA),
        (ErrorCode.UNKNOWN_TOPIC_ID, Action.REFRESH_METADATA),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, Action.FATAL),
        (ErrorCode.INVALID_RECORD_STATE, Action.NOTE),
        (ErrorCode.KAFKA_STORAGE_ERROR, Action.NOTE),
        (ErrorCode.CORRUPT_MESSAGE, Action.NOTE),
        (ErrorCode.UNKNOWN_SERVER_ERROR, Action.NOTE),
        (9999, Action.NOTE),
    ],
)
def test_partition_codes(code: int, action: Action) -> None:
    assert partition_action(code) is action


@pytest.mark.parametrize(
    ("kind", "code", "action"),
    [
        (FETCH, ErrorCode.NONE, Action.OK),
        (FETCH, ErrorCode.SHARE_SESSION_NOT_FOUND, Action.RESET_SESSION),
        (FETCH, ErrorCode.INVALID_SHARE_SESSION_EPOCH, Action.RESET_SESSION),
        (FETCH, ErrorCode.SHARE_SESSION_LIMIT_REACHED, Action.RESET_SESSION),
        (ACK, ErrorCode.SHARE_SESSION_NOT_FOUND, Action.RESET_SESSION),
        (ACK, ErrorCode.INVALID_SHARE_SESSION_EPOCH, Action.RESET_SESSION),
        (ACK, ErrorCode.SHARE_SESSION_LIMIT_REACHED, Action.BACK_OFF),
        (FETCH, ErrorCode.TOPIC_AUTHORIZATION_FAILED, Action.FATAL),
        (FETCH, ErrorCode.GROUP_AUTHORIZATION_FAILED, Action.FATAL),
        (ACK, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, Action.FATAL),
        (ACK, ErrorCode.UNSUPPORTED_VERSION, Action.FATAL),
        (FETCH, ErrorCode.UNKNOWN_TOPIC_ID, Action.REFRESH_METADATA),
        (FETCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, Action.REFRESH_METADATA),
        (FETCH, ErrorCode.INVALID_REQUEST, Action.BACK_OFF),
        (FETCH, ErrorCode.GROUP_ID_NOT_FOUND, Action.BACK_OFF),
        (ACK, ErrorCode.UNKNOWN_SERVER_ERROR, Action.BACK_OFF),
        (FETCH, ErrorCode.THROTTLING_QUOTA_EXCEEDED, Action.BACK_OFF),
    ],
)
def test_top_level_codes(kind: RequestKind, code: int, action: Action) -> None:
    assert top_level_action(kind, code) is action


# -- answers -----------------------------------------------------------------------------------


def with_acks_in_flight() -> tuple[ShareSession, FetchPlanner, AckLedger]:
    """Records 0..9 acquired, 0..4 delivered and answered, 5..7 delivered, 8..9 buffered;
    a fetch carrying the answers is in flight."""
    session, planner = opened((TP0, TP1))
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.deliver(TP0, 0, 7)
    for o in range(5):
        ledger.mark(TP0, o, AckType.ACCEPT)
    return session, planner, ledger


def test_a_good_answer_proceeds() -> None:
    session, planner, ledger = with_acks_in_flight()
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    v = answer_verdict(session, ledger, turn.plan, 0)
    assert v.proceed and v.action is Action.OK and v.lost is None and not v.results
    assert session.epoch == 2


@pytest.mark.parametrize(
    "code", [ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH]
)
def test_a_session_reset_fails_the_acks_and_kills_every_held_record(code: int) -> None:
    session, planner, ledger = with_acks_in_flight()
    old = session.tag
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    v = answer_verdict(session, ledger, turn.plan, code)
    assert not v.proceed and v.action is Action.RESET_SESSION and v.lost == old
    assert [(r.partition, r.count, r.reason) for r in v.results] == [
        (TP0, 5, AckFailure.SESSION_RESET)
    ]
    assert session.is_new and session.tag != old
    # Delivered and buffered records are dead: answering them says so, never raises.
    assert ledger.mark(TP0, 6, AckType.ACCEPT) is MarkResult.DEAD
    assert ledger.mark(TP0, 9, AckType.ACCEPT) is MarkResult.DEAD
    # The rest of the delivered ones are settled (reported as lock lost) by the implicit
    # bulk answer; 8, buffered, was never the application's: the buffer forgets it.
    lost = ledger.settle_dead()
    assert [(r.count, r.reason) for r in lost] == [(2, AckFailure.LOCK_LOST)]  # 5, 7
    assert ledger.partitions() == [TP0]
    ledger.forget(TP0, (0, ledger.sequence), 8, 9)
    assert ledger.partitions() == []


def test_a_reset_with_nothing_in_flight_reports_nothing() -> None:
    session, planner = opened()
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 4)])
    delivery = (ledger.sequence, ledger.sequence)
    turn = planner.next(ledger, [TP0], room=True)
    assert turn.plan is not None and turn.taken is None
    v = answer_verdict(session, ledger, turn.plan, ErrorCode.SHARE_SESSION_NOT_FOUND)
    assert v.lost is not None and v.results == []
    # The buffer forgets what it drops: nothing stays behind in the ledger.
    ledger.forget(TP0, delivery, 0, 4)
    assert ledger.partitions() == []


def test_a_top_level_error_fails_the_acks_but_keeps_the_session() -> None:
    session, planner, ledger = with_acks_in_flight()
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    v = answer_verdict(session, ledger, turn.plan, ErrorCode.INVALID_REQUEST)
    assert not v.proceed and v.action is Action.BACK_OFF and v.lost is None
    assert [(r.count, r.reason, r.error_code) for r in v.results] == [
        (5, AckFailure.REQUEST_FAILED, ErrorCode.INVALID_REQUEST)
    ]
    assert session.epoch == 2  # the session advanced: the records are still ours
    assert ledger.mark(TP0, 6, AckType.ACCEPT) is MarkResult.OK


def test_a_fatal_top_level_error() -> None:
    session, planner, ledger = with_acks_in_flight()
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    v = answer_verdict(session, ledger, turn.plan, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert v.action is Action.FATAL and not v.proceed


def test_a_late_answer_after_a_reset_is_ignored() -> None:
    session, planner, ledger = with_acks_in_flight()
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    transport_failed(session, ledger, turn.plan)
    v = answer_verdict(session, ledger, turn.plan, 0)
    assert not v.proceed and v.action is Action.OK and not v.results


@pytest.mark.parametrize("state", ["fetch with acks", "ack request", "renew", "open"])
def test_a_transport_failure_in_each_state_loses_the_session(state: str) -> None:
    session, planner, ledger = with_acks_in_flight()
    if state == "ack request":
        turn = planner.next(ledger, [TP0, TP1], room=False)
    elif state == "renew":
        ledger.mark(TP0, 6, AckType.RENEW)
        turn = planner.next(ledger, [TP0, TP1], room=True)
    elif state == "open":
        session = ShareSession(2)  # another leader's brand-new session
        planner = FetchPlanner(session)
        turn = planner.next(ledger, [TP0], room=True)
    else:
        turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None
    old = session.tag
    v = transport_failed(session, ledger, turn.plan)
    assert v.lost == old and v.action is Action.RESET_SESSION and session.is_new
    failed = sum(r.count for r in v.results)
    assert all(r.error_code == ErrorCode.NETWORK_EXCEPTION for r in v.results)
    assert failed == {"fetch with acks": 5, "ack request": 5, "renew": 6, "open": 0}[state]
    assert session.generation == old.generation + 1


def test_closing_answers_close_the_session() -> None:
    session, planner, ledger = with_acks_in_flight()
    taken = ledger.take(session.tag)
    assert taken is not None
    plan = session.build_close(taken.acks)
    assert plan is not None
    v = answer_verdict(session, ledger, plan, 0)
    assert v.proceed and session.is_new
    assert session.in_flight is None
    assert SessionEvent.CLOSED  # the session module names it; the verdict proceeds


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_REQUEST])
def test_a_refused_closing_answer_fails_its_acks_and_is_not_applied(code: ErrorCode) -> None:
    """A closing request refused at the top level (UNKNOWN_SERVER_ERROR is -1, below
    zero) still ends the session, but its body is not applied and its acknowledgements
    are reported failed with the code."""
    session, planner, ledger = with_acks_in_flight()
    taken = ledger.take(session.tag)
    assert taken is not None
    plan = session.build_close(taken.acks)
    assert plan is not None
    v = answer_verdict(session, ledger, plan, code)
    assert not v.proceed and session.is_new
    assert v.results and all(r.error_code == code for r in v.results)


def test_renew_outcomes() -> None:
    session, planner = opened((TP0, TP1))
    ledger = AckLedger()
    ledger.add(TP0, session.tag, [(0, 9)])
    ledger.add(TP1, session.tag, [(0, 9)])
    ledger.mark(TP0, 1, AckType.RENEW)
    ledger.mark(TP1, 1, AckType.RENEW)
    turn = planner.next(ledger, [TP0, TP1], room=True)
    assert turn.plan is not None and turn.plan.is_renew
    assert renewed(turn.plan, ok=True) == ({TP0, TP1}, set())
    assert renewed(turn.plan, ok=True, codes={TP0: 0, TP1: ErrorCode.INVALID_RECORD_STATE}) == (
        {TP0},
        {TP1},
    )
    assert renewed(turn.plan, ok=False) == (set(), {TP0, TP1})
    fetch = FetchPlanner(ShareSession(2)).next(ledger, [TP0], room=True).plan
    assert fetch is not None and renewed(fetch, ok=True) == (set(), set())
