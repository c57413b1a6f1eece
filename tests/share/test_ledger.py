"""The acknowledgement ledger: lifecycle, renew, resets and leader changes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharecon._share.acks import AckBatch, expand
from sharecon._share.ledger import AckFailure, AckLedger, AckResult, MarkResult
from sharecon._share.session import SessionTag
from sharecon.errors import InvalidRecordStateError
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition

G, A, R, J, N = AckType.GAP, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW
T1 = uuid.UUID(int=1)
TP0 = TopicIdPartition(T1, 0, "t")
TP1 = TopicIdPartition(T1, 1, "t")
TAG = SessionTag(node_id=1, generation=0)
TAG_NEXT = SessionTag(node_id=1, generation=1)
OTHER = SessionTag(node_id=2, generation=0)


def b(first: int, last: int, *types: AckType) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def delivered(ledger: AckLedger, tp: TopicIdPartition, first: int, last: int) -> None:
    assert ledger.add(tp, TAG, [(first, last)]) == []
    ledger.deliver(tp, first, last)


def test_implicit_accept_lifecycle() -> None:
    """Delivered -> accepted -> taken (in flight) -> answered -> gone."""
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 499)
    assert ledger.unacknowledged() == {TP0: list(range(500))}
    assert ledger.mark_delivered(A) == 500
    assert ledger.unacknowledged() == {}
    taken = ledger.take(TAG)
    assert taken is not None
    assert taken.acks == {TP0: [b(0, 499, A)]}
    assert (taken.count, taken.is_renew) == (500, False)
    assert ledger.in_flight(TAG)
    with pytest.raises(RuntimeError):
        ledger.take(TAG)  # one request in flight per session
    assert ledger.complete(TAG, {TP0: 0}) == [AckResult(TP0, (b(0, 499, A),))]
    assert ledger.partitions() == []
    assert ledger.take(TAG) is None
    assert ledger.complete(TAG, {TP0: 0}) == []  # nothing in flight any more


def test_gaps_are_sent_without_waiting_for_the_application() -> None:
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)], gaps=[(3, 4), (9, 9)])
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(3, 4, G), b(9, 9, G)]}
    ledger.complete(TAG, {TP0: 0})
    ledger.deliver(TP0, 0, 9)
    assert ledger.unacknowledged() == {TP0: [0, 1, 2, 5, 6, 7, 8]}


def test_buffered_records_are_not_implicitly_accepted() -> None:
    """Implicit accept covers what the application saw, not what is still buffered."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)])
    ledger.deliver(TP0, 0, 4)
    assert ledger.mark_delivered(A) == 5
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 4, A)]}


@pytest.mark.parametrize("in_flight", [False, True])
def test_an_implicit_accept_covers_records_being_renewed(in_flight: bool) -> None:
    """poll() in implicit mode accepts the previous batch in bulk while the lock keeper
    may be renewing its records: a renewal pending or in flight must not drop the
    accept (found by simulation, poll() with slow handlers: the record stayed held,
    answered for the application and never for the broker, and fetching stopped)."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 3)])
    ledger.deliver(TP0, 0, 3)
    assert ledger.mark(TP0, 1, N) is MarkResult.OK
    if in_flight:
        renew = ledger.take(TAG)
        assert renew is not None and renew.is_renew
    assert ledger.mark_delivered(A) == 4
    if in_flight:
        ledger.complete(TAG, {TP0: 0})  # the renewal's answer
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 3, A)]}
    ledger.complete(TAG, {TP0: 0})
    assert not ledger.has_outstanding(TAG)  # nothing left held for the broker to expire


def test_close_releases_delivered_and_buffered() -> None:
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)])
    ledger.deliver(TP0, 0, 4)
    assert ledger.mark(TP0, 2, A) is MarkResult.OK
    assert ledger.mark_delivered(R, include_buffered=True) == 9
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 9, R, R, A, R, R, R, R, R, R, R)]}


@pytest.mark.parametrize(
    ("steps", "want"),
    [
        ([(5, A)], [MarkResult.OK]),
        ([(50, A)], [MarkResult.UNKNOWN]),
        ([(5, A), (5, R)], [MarkResult.OK, MarkResult.ALREADY_ACKNOWLEDGED]),
        ([(5, N), (5, A)], [MarkResult.OK, MarkResult.OK]),
        ([(5, N), (5, N)], [MarkResult.OK, MarkResult.OK]),
        ([(5, A), (5, N)], [MarkResult.OK, MarkResult.ALREADY_ACKNOWLEDGED]),
    ],
    ids=["ok", "unknown", "twice", "renew then accept", "renew twice", "renew after accept"],
)
def test_mark_results(steps: list[tuple[int, AckType]], want: list[MarkResult]) -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 9)
    assert [ledger.mark(TP0, o, t) for o, t in steps] == want


def test_mark_unknown_partition_and_after_completion() -> None:
    ledger = AckLedger()
    assert ledger.mark(TP1, 0, A) is MarkResult.UNKNOWN
    delivered(ledger, TP0, 0, 0)
    ledger.mark(TP0, 0, A)
    ledger.take(TAG)
    assert ledger.mark(TP0, 0, R) is MarkResult.ALREADY_ACKNOWLEDGED  # in flight
    ledger.complete(TAG, {TP0: 0})
    assert ledger.mark(TP0, 0, R) is MarkResult.UNKNOWN  # finished


def test_explicit_acks_mixed_types() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 10, 14)
    for o, t in [(10, A), (11, A), (12, R), (13, J)]:
        assert ledger.mark(TP0, o, t) is MarkResult.OK
    assert ledger.unacknowledged() == {TP0: [14]}
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(10, 13, A, A, R, J)]}
    assert ledger.unacknowledged() == {TP0: [14]}


def mark_range(ledger: AckLedger, tp: TopicIdPartition, first: int, last: int, ack: int) -> int:
    """Answer every record of ``first..last`` still unanswered (the newest delivery of
    each); how many were marked."""
    return sum(ledger.mark(tp, o, ack) is MarkResult.OK for o in range(first, last + 1))


def test_mark_range() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 9)
    ledger.mark(TP0, 3, R)
    assert mark_range(ledger, TP0, 2, 6, A) == 4
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(2, 6, A, R, A, A, A)]}


def test_marking_a_delivery_leaves_an_older_delivery_of_the_same_offsets_alone() -> None:
    """Seed 20007135: the application held offset 0 of a delivery from the partition's
    old leader (its renewal in flight there) when the new leader delivered 0..1 again in
    a corrupt batch. Releasing that batch marked the held record too, so the
    application's own answer then found nothing, and the release's failure was reported
    for a delivery that had ended already."""
    ledger = AckLedger()
    ledger.add(TP0, OTHER, [(0, 1)])
    old = (1, ledger.sequence)
    ledger.deliver(TP0, 0, 1, old)
    assert ledger.mark(TP0, 0, N, old) is MarkResult.OK
    assert ledger.take(OTHER) is not None  # the renewal in flight at the old leader
    ledger.add(TP0, TAG, [(0, 1)])
    new = (old[1] + 1, ledger.sequence)
    assert ledger.mark_undelivered(TP0, new, 0, 1, AckType.RELEASE) == 2
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 1, R)]}
    # The application's answer still reaches the delivery it holds.
    assert ledger.mark(TP0, 0, A, old) is MarkResult.OK


def test_counts_by_partition_say_what_is_buffered_held_and_in_flight() -> None:
    """The backlog metrics' source: per partition, records acquired and not handed out;
    handed out, or answered and not sent; answers sent and not confirmed."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)])
    ledger.deliver(TP0, 0, 5)
    ledger.mark(TP0, 0, A)
    ledger.mark(TP0, 1, R)
    assert ledger.take(TAG) is not None  # 0 and 1 in flight
    ledger.mark(TP0, 2, J)  # answered, not sent yet
    ledger.add(TP1, TAG, [(0, 2)])
    assert ledger.counts_by_partition() == {TP0: (4, 4, 2), TP1: (3, 0, 0)}
    assert AckLedger().counts_by_partition() == {}


def test_take_spans_deliveries_and_partitions_but_only_its_session() -> None:
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 4), (5, 9)])
    ledger.add(TP1, TAG, [(0, 2)])
    ledger.add(TP1, OTHER, [(3, 3)])  # fetched from another leader
    mark_range(ledger, TP0, 0, 9, A)
    mark_range(ledger, TP1, 0, 3, R)
    taken = ledger.take(TAG)
    assert taken is not None
    assert taken.acks == {TP0: [b(0, 9, A)], TP1: [b(0, 2, R)]}
    other = ledger.take(OTHER)
    assert other is not None and other.acks == {TP1: [b(3, 3, R)]}


def test_renew_keeps_the_record_outstanding() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 1)
    ledger.mark(TP0, 0, N)
    ledger.mark(TP0, 1, A)
    taken = ledger.take(TAG)
    assert taken is not None and taken.is_renew
    assert taken.acks == {TP0: [b(0, 1, N, A)]}
    ledger.complete(TAG, {TP0: 0})
    # The renewed record is held again and still needs a terminal acknowledgement.
    assert ledger.unacknowledged() == {TP0: [0]}
    assert ledger.mark(TP0, 0, A) is MarkResult.OK
    taken = ledger.take(TAG)
    assert taken is not None and not taken.is_renew and taken.acks == {TP0: [b(0, 0, A)]}


def test_terminal_ack_while_renew_in_flight_wins() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 0)
    ledger.mark(TP0, 0, N)
    ledger.take(TAG)
    assert ledger.mark(TP0, 0, R) is MarkResult.OK
    ledger.complete(TAG, {TP0: 0})
    assert ledger.unacknowledged() == {}
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 0, R)]}


def test_take_without_renew_leaves_renews_behind() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 1)
    ledger.mark(TP0, 0, N)
    ledger.mark(TP0, 1, A)
    assert ledger.has_marked(TAG)
    taken = ledger.take(TAG, include_renew=False)
    assert taken is not None and not taken.is_renew and taken.acks == {TP0: [b(1, 1, A)]}
    ledger.complete(TAG, {TP0: 0})
    renew = ledger.take(TAG)
    assert renew is not None and renew.is_renew and renew.acks == {TP0: [b(0, 0, N)]}


def test_broker_error_and_missing_partition() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 0)
    delivered(ledger, TP1, 0, 0)
    ledger.mark_delivered(A)
    ledger.take(TAG)
    results = ledger.complete(TAG, {TP0: ErrorCode.INVALID_RECORD_STATE})
    assert results == [
        AckResult(TP0, (b(0, 0, A),), ErrorCode.INVALID_RECORD_STATE, AckFailure.BROKER_ERROR),
        AckResult(
            TP1, (b(0, 0, A),), ErrorCode.INVALID_RECORD_STATE, AckFailure.MISSING_FROM_RESPONSE
        ),
    ]
    err = results[0].error()
    assert isinstance(err, InvalidRecordStateError)
    assert ledger.partitions() == []  # failures are final: nothing is re-sent


def test_requeue_codes_send_again_on_the_same_session() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 2)
    ledger.mark_delivered(A)
    ledger.take(TAG)
    assert ledger.complete(TAG, {TP0: 7}, requeue={7}) == []
    again = ledger.take(TAG)
    assert again is not None and again.acks == {TP0: [b(0, 2, A)]}


def test_complete_all_fails_the_request() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 2)
    ledger.mark_delivered(A)
    ledger.take(TAG)
    assert ledger.complete_all(TAG, 30) == [
        AckResult(TP0, (b(0, 2, A),), 30, AckFailure.REQUEST_FAILED)
    ]
    assert ledger.partitions() == []


def test_session_reset_fails_acks_and_never_resends_them() -> None:
    """In-flight and marked acks of the old session fail once; nothing goes out later."""
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 9)
    mark_range(ledger, TP0, 0, 3, A)
    ledger.take(TAG)  # 0..3 in flight
    ledger.mark(TP0, 4, R)  # marked, not sent
    ledger.add(TP1, TAG, [(0, 4)])  # buffered, never handed out
    results = ledger.invalidate(AckFailure.SESSION_RESET, 13, tag=TAG)
    assert results == [AckResult(TP0, (b(0, 4, A, A, A, A, R),), 13, AckFailure.SESSION_RESET)]
    assert ledger.complete(TAG, {TP0: 0}) == []  # the late answer reports nothing twice
    assert not ledger.in_flight(TAG)
    assert ledger.take(TAG) is None and ledger.take(TAG_NEXT) is None
    # The application still holds 5..9: its acknowledgements are dead, not sent.
    assert ledger.mark(TP0, 5, A) is MarkResult.DEAD
    assert ledger.mark(TP0, 5, A) is MarkResult.UNKNOWN
    assert ledger.unacknowledged() == {}
    assert ledger.mark_delivered(A) == 0  # drops the remaining dead delivered records
    # TP1's were never handed out: they wait for the buffer to forget them.
    assert ledger.partitions() == [TP1]
    ledger.forget(TP1, (0, ledger.sequence), 0, 4)
    assert ledger.partitions() == []


def test_leader_change_fails_only_that_partition() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 1)
    delivered(ledger, TP1, 0, 1)
    ledger.mark_delivered(A)
    ledger.take(TAG)
    results = ledger.invalidate(AckFailure.LEADER_CHANGED, 6, partition=TP0, node_id=1)
    assert results == [AckResult(TP0, (b(0, 1, A),), 6, AckFailure.LEADER_CHANGED)]
    assert ledger.complete(TAG, {TP1: 0}) == [AckResult(TP1, (b(0, 1, A),))]
    assert ledger.partitions() == []


@pytest.mark.parametrize("old, new", [(TAG, OTHER), (OTHER, TAG)])
def test_leader_change_leaves_the_new_leader_s_acks_in_flight(
    old: SessionTag, new: SessionTag
) -> None:
    """The partition moved from ``old`` to ``new`` while both leaders had its
    acknowledgements in flight: only the old leader's fail. The new leader's answer still
    settles its own (whichever node id is the higher)."""
    ledger = AckLedger()
    assert ledger.add(TP0, old, [(0, 1)]) == []
    ledger.deliver(TP0, 0, 1)
    ledger.mark_delivered(A)
    assert ledger.take(old) is not None
    assert ledger.add(TP0, new, [(2, 3)]) == []
    ledger.deliver(TP0, 2, 3)
    ledger.mark_delivered(A)
    assert ledger.take(new) is not None
    results = ledger.invalidate(AckFailure.LEADER_CHANGED, 6, partition=TP0, node_id=old.node_id)
    assert results == [AckResult(TP0, (b(0, 1, A),), 6, AckFailure.LEADER_CHANGED)]
    assert ledger.complete(new, {TP0: 0}) == [AckResult(TP0, (b(2, 3, A),))]
    assert ledger.complete(old, {TP0: 0}) == []
    assert ledger.partitions() == []


def test_invalidate_needs_a_criterion() -> None:
    with pytest.raises(ValueError):
        AckLedger().invalidate(AckFailure.SESSION_RESET, 13)


def test_redelivery_supersedes_unanswered_acks() -> None:
    """The broker redelivers offsets only after our lock ended: old marks are void."""
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 9)
    mark_range(ledger, TP0, 5, 9, A)
    results = ledger.add(TP0, TAG, [(5, 14)])
    assert results == [
        AckResult(TP0, (b(5, 9, A),), ErrorCode.INVALID_RECORD_STATE, AckFailure.SUPERSEDED)
    ]
    assert isinstance(results[0].error(), InvalidRecordStateError)
    assert ledger.mark(TP0, 7, R) is MarkResult.OK  # applies to the new delivery
    mark_range(ledger, TP0, 0, 4, A)
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 4, A), b(7, 7, R)]}


def test_supersede_before_the_next_request_keeps_old_answers_out_of_it() -> None:
    """Pipelining: the next request is sent before an answer's records are added. An
    answer that re-acquires offsets we still hold (our lock ended at the broker) must end
    that hold first: an accept of the old delivery, taken into the next request, would be
    applied by the broker to the new acquisition."""
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 9)
    mark_range(ledger, TP0, 0, 9, A)  # answered, not sent yet
    assert ledger.mark(TP0, 10, A) is MarkResult.UNKNOWN
    results = ledger.supersede(TP0, [(5, 12)])
    assert results == [
        AckResult(TP0, (b(5, 9, A),), ErrorCode.INVALID_RECORD_STATE, AckFailure.SUPERSEDED)
    ]
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 4, A)]}  # 5..9 stay out
    ledger.complete(TAG, {TP0: 0})
    # Then the records come in: nothing more fails, and the new delivery is answerable.
    assert ledger.add(TP0, TAG, [(5, 12)]) == []
    assert ledger.mark(TP0, 7, A) is MarkResult.OK
    # A delivered record of the old hold that the application answers late is dead.
    ledger2 = AckLedger()
    delivered(ledger2, TP0, 0, 3)
    assert ledger2.supersede(TP0, [(0, 3)]) == []
    assert ledger2.mark(TP0, 1, A, (1, 1)) is MarkResult.DEAD
    assert ledger2.supersede(TP1, [(0, 3)]) == []  # a partition we hold nothing of


def test_outstanding_counts() -> None:
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)], gaps=[(9, 9)])
    assert ledger.outstanding(TAG) == 10
    ledger.deliver(TP0, 0, 8)
    ledger.mark_delivered(A)
    ledger.take(TAG)
    assert ledger.outstanding(TAG) == 10
    ledger.complete(TAG, {TP0: 0})
    assert ledger.outstanding(TAG) == 0


def test_has_outstanding_and_the_counts_agree_in_every_state() -> None:
    ledger = AckLedger()
    assert not ledger.has_outstanding(TAG) and ledger.outstanding_all() == 0
    ledger.add(TP0, TAG, [(0, 9)], gaps=[(9, 9)])
    ledger.add(TP1, TAG_NEXT, [(0, 4)])
    steps = [
        lambda: ledger.deliver(TP0, 0, 5),  # buffered, handed out, a gap
        lambda: ledger.mark(TP0, 0, A),  # marked
        lambda: ledger.take(TAG),  # sent
        lambda: ledger.complete(TAG, {TP0: 0}),  # 0 and the gap finished
        lambda: ledger.mark_delivered(A, include_buffered=True),
        lambda: ledger.take(TAG),
        lambda: ledger.complete(TAG, {TP0: 0}),  # TAG holds nothing
    ]
    for step in steps:
        step()
        n = ledger.outstanding(TAG)
        assert ledger.has_outstanding(TAG) is (n > 0)
        assert ledger.outstanding_all() == n + ledger.outstanding(TAG_NEXT)
    assert not ledger.has_outstanding(TAG) and ledger.outstanding(TAG_NEXT) == 5


def test_finished_offset_inside_a_live_delivery_is_unknown() -> None:
    ledger = AckLedger()
    delivered(ledger, TP0, 0, 1)
    ledger.mark(TP0, 0, A)
    ledger.take(TAG)
    ledger.complete(TAG, {TP0: 0})
    assert ledger.mark(TP0, 0, R) is MarkResult.UNKNOWN
    assert ledger.mark(TP0, 1, R) is MarkResult.OK


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 39), st.sampled_from(list(AckType)[1:])), max_size=30),
        min_size=1,
        max_size=4,
    ),
    st.sets(st.integers(0, 39), max_size=8),
)
def test_rounds_match_a_per_offset_model(
    rounds: list[list[tuple[int, AckType]]], gap_offsets: set[int]
) -> None:
    """Every round sends exactly the acks marked since the last one; renews come back."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 19), (20, 39)], gaps=[(o, o) for o in gap_offsets])
    ledger.deliver(TP0, 0, 39)
    held = {o for o in range(40) if o not in gap_offsets}  # records the app may acknowledge
    pending: dict[int, AckType] = dict.fromkeys(gap_offsets, G)
    for marks in rounds:
        for o, t in marks:
            result = ledger.mark(TP0, o, t)
            if o in held and (o not in pending or pending[o] is N):
                assert result is MarkResult.OK
                pending[o] = t
            else:
                assert result is not MarkResult.OK
        taken = ledger.take(TAG)
        if not pending:
            assert taken is None
            continue
        assert taken is not None
        assert dict(expand(taken.acks[TP0])) == pending
        assert taken.is_renew == (N in pending.values())
        ledger.complete(TAG, {TP0: 0})
        held -= {o for o, t in pending.items() if t is not N}
        pending = {}
    assert ledger.unacknowledged() == ({TP0: sorted(held)} if held else {})


# -- deliveries: an answer lands only on the delivery its record came from -----------------


def add(ledger: AckLedger, tp: TopicIdPartition, ranges: list[tuple[int, int]]) -> tuple[int, int]:
    before = ledger.sequence
    ledger.add(tp, TAG, ranges)
    return before + 1, ledger.sequence


def test_forget_touches_only_its_own_delivery() -> None:
    # Answer 1 acquired 0..9 and 50..59; another member held 10..49, released them, and
    # answer 2 of the same session acquired them. Answer 1's lock ends: the buffer drops it
    # and forgets 0..59 of *that* delivery only.
    ledger = AckLedger()
    first = add(ledger, TP0, [(0, 9), (50, 59)])
    second = add(ledger, TP0, [(10, 49)])
    ledger.forget(TP0, first, 0, 59)
    assert ledger.mark(TP0, 20, AckType.ACCEPT, second) is MarkResult.OK
    assert ledger.mark(TP0, 5, AckType.ACCEPT, first) is MarkResult.UNKNOWN


def test_an_old_delivery_answer_never_lands_on_the_redelivery() -> None:
    # The lock on 0..9 expired; the same session got 0..9 again. The application answers
    # the old record of offset 3: its lock is gone (reported), the new delivery is untouched.
    ledger = AckLedger()
    old = add(ledger, TP0, [(0, 9)])
    new = add(ledger, TP0, [(0, 9)])
    assert ledger.mark(TP0, 3, AckType.ACCEPT, old) is MarkResult.DEAD
    assert ledger.mark(TP0, 3, AckType.ACCEPT, new) is MarkResult.OK
    assert not ledger.holds(TP0, 4, old) and ledger.holds(TP0, 4, new)
    # The old delivery's records nobody answered are forgotten when its chunk is dropped.
    ledger.forget(TP0, old, 0, 9)
    assert ledger.settle_dead() == []


def test_forget_of_a_middle_range_keeps_the_rest_in_place() -> None:
    """Forgetting 2..4 of 0..9 leaves 0, 1 and 5..9 held, each at its own offset (found by
    mutation testing: every other test forgets up to the end of a delivery)."""
    ledger = AckLedger()
    d = add(ledger, TP0, [(0, 9)])
    ledger.forget(TP0, d, 2, 4)
    assert [o for o in range(10) if ledger.holds(TP0, o, d)] == [0, 1, 5, 6, 7, 8, 9]
    assert ledger.outstanding_all() == 7


def test_forget_keeps_a_record_in_hand_dead() -> None:
    # Session lost while the application holds offset 0; the buffer drops the rest of the
    # chunk (1..9): offset 0 must still answer "lock lost", not "unknown".
    ledger = AckLedger()
    d = add(ledger, TP0, [(0, 9)])
    ledger.invalidate(AckFailure.SESSION_RESET, 13, tag=TAG)
    ledger.forget(TP0, d, 1, 9)
    assert ledger.mark(TP0, 0, AckType.ACCEPT, d) is MarkResult.DEAD
    assert ledger.partitions() == []


def test_mark_undelivered_counts_within_a_delivery_that_starts_past_zero() -> None:
    """Offsets are taken relative to the delivery's first offset: 103..105 of 100..109 are
    three records (found by mutation testing: the other tests' deliveries start at 0,
    where ``offset - first`` and ``offset | first`` agree)."""
    ledger = AckLedger()
    d = add(ledger, TP0, [(100, 109)])
    assert ledger.mark_undelivered(TP0, d, 103, 105, R) == 3
    assert ledger.mark_undelivered(TP0, d, 100, 109, R) == 7


def test_mark_undelivered_answers_only_the_buffered_records_of_its_delivery() -> None:
    # Answer 1 acquired 0..9; the application holds 0..3 (2 already accepted); 4..9 wait in
    # the buffer. Answer 2 acquired 20..29 (same partition, another delivery).
    ledger = AckLedger()
    first = add(ledger, TP0, [(0, 9)])
    second = add(ledger, TP0, [(20, 29)])
    ledger.deliver(TP0, 0, 3)
    assert ledger.mark(TP0, 2, A) is MarkResult.OK
    assert ledger.mark_undelivered(TP0, first, 4, 29, R) == 6  # not answer 2's 20..29
    assert ledger.mark_undelivered(TP0, first, 4, 9, R) == 0  # already marked
    assert ledger.mark_undelivered(TP1, first, 0, 9, R) == 0  # nothing held there
    # What the application holds is still its own to answer.
    assert ledger.unacknowledged() == {TP0: [0, 1, 3]}
    assert ledger.mark(TP0, 0, A) is MarkResult.OK
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 0, A), b(2, 2, A), b(4, 9, R)]}
    assert ledger.mark(TP0, 25, A, second) is MarkResult.OK


def test_settle_dead_reports_an_offset_dead_in_two_deliveries_once() -> None:
    """Simulation seed 272 (4.4): a slow handler left a chunk buffered while its lock
    ended and the record came twice more; closing (release_held) then found the offset
    dead in two deliveries and raised ValueError (overlapping runs) instead of reporting."""
    ledger = AckLedger()
    for _ in range(3):
        ledger.add(TP0, TAG, [(0, 2)])
        ledger.deliver(TP0, 0, 2)  # handed out by poll(), then the lock went
        ledger.supersede(TP0, [(0, 2)])  # the next answer acquired them again
    ledger.add(TP0, TAG, [(0, 2)])
    [lost] = ledger.settle_dead(ack=AckType.RELEASE)
    assert lost.reason is AckFailure.LOCK_LOST
    assert lost.batches == (b(0, 2, AckType.RELEASE),)
    assert ledger.settle_dead(ack=AckType.RELEASE) == []


def test_a_bulk_answer_never_reports_records_that_died_in_the_buffer() -> None:
    """Simulation seed 236 (4.1 and 4.4), implicit poll(): a delivery superseded while
    part of it waited in the buffer. The next poll()'s bulk accept reported the buffered
    records as lost answers, though the application never saw them (and the buffer then
    forgot them: two outcomes for one delivery)."""
    ledger = AckLedger()
    old = add(ledger, TP0, [(0, 5)])
    ledger.deliver(TP0, 0, 2, old)  # poll() handed out 0..2; 3..5 wait in the buffer
    ledger.supersede(TP0, [(0, 5)])
    add(ledger, TP0, [(0, 5)])
    [lost] = ledger.settle_dead()
    assert lost.batches == (b(0, 2, A),)  # only what was handed out
    assert ledger.settle_dead() == []
    # The buffer forgets the rest; an answer by the cursor (which hands out without telling
    # the ledger) to one of them still hears "lock lost", once.
    assert ledger.mark(TP0, 3, A, old) is MarkResult.DEAD
    assert ledger.mark(TP0, 3, A, old) is MarkResult.UNKNOWN
    ledger.forget(TP0, old, 3, 5)
    assert ledger.settle_dead() == []
    assert not any(ledger.holds(TP0, o, old) for o in range(6))


def test_a_bulk_accept_leaves_the_unseen_dead_for_the_buffer_and_close_drops_them() -> None:
    ledger = AckLedger()
    d = add(ledger, TP0, [(0, 3)])
    ledger.invalidate(AckFailure.SESSION_RESET, 13, tag=TAG)
    assert ledger.mark_delivered(A) == 0
    # Still there for the cursor's answer to be told "lock lost".
    assert ledger.mark(TP0, 1, A, d) is MarkResult.DEAD
    # A close (everything released, the buffer cleared) finishes the rest silently.
    assert ledger.settle_dead(ack=AckType.RELEASE) == []
    assert ledger.mark_delivered(AckType.RELEASE, include_buffered=True) == 0
    assert ledger.partitions() == []


def test_deliver_marks_only_its_own_delivery() -> None:
    """Simulation seed 1974 (4.4): after a leader move the same offsets were held twice
    (the old delivery handed out, the new one still buffered). Noting the old one as
    handed out marked the buffered copy DELIVERED too, so a bulk answer (implicit mode's
    accept, or close's release) would have reached records the application never saw."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 2)])
    old = (ledger.sequence, ledger.sequence)
    ledger.add(TP0, TAG_NEXT, [(0, 2)])  # a newer delivery of the same offsets, buffered
    ledger.deliver(TP0, 1, 1, old)  # the old copy (its lock already lost) is handed out
    assert ledger.mark_delivered(AckType.ACCEPT) == 0
    assert ledger.take(TAG_NEXT) is None  # the buffered copy got no answer
    new = (ledger.sequence, ledger.sequence)
    ledger.deliver(TP0, 1, 1, new)
    assert ledger.mark_delivered(AckType.ACCEPT) == 1


# -- the segment mark() found last: a shortcut, never a different answer -------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.sampled_from([TP0, TP1]), st.integers(0, 12), st.integers(0, 4)
        ),
        st.tuples(
            st.just("mark"),
            st.sampled_from([TP0, TP1]),
            st.integers(0, 17),
            st.sampled_from([A, R, J, N]),
            st.integers(-1, 8),  # which add() the record came from; -1: none given
        ),
        st.tuples(
            st.just("deliver"), st.sampled_from([TP0, TP1]), st.integers(0, 16), st.integers(0, 4)
        ),
        st.tuples(st.just("take"), st.sampled_from([0, 13])),  # answered OK, or the session lost
        st.tuples(
            st.just("forget"), st.sampled_from([TP0, TP1]), st.integers(0, 8), st.integers(0, 16)
        ),
        # Implicit mode: records first..first+n of one delivery accepted one after the other.
        st.tuples(
            st.just("accept"),
            st.sampled_from([TP0, TP1]),
            st.integers(0, 16),
            st.integers(0, 5),
            st.integers(0, 8),
        ),
    ),
    max_size=60,
)


@settings(max_examples=400)
@given(_OPS)
def test_mark_answers_as_if_it_searched_every_time(ops: list[tuple[object, ...]]) -> None:
    """mark() keeps the segment it found last and skips the search while the partition's
    segments are unchanged and do not overlap, and implicit accepts extend a run written
    later (accept_next). Two ledgers get the same steps; one forgets that segment before
    every mark() and never runs: every answer, count and request must be the same
    (redeliveries, overlaps, finished and pruned segments, lost sessions included)."""
    fast, slow = AckLedger(), AckLedger()
    deliveries: list[tuple[int, int]] = []
    for op in ops:
        kind = op[0]
        if kind == "add":
            _, tp, first, n = op
            assert (
                isinstance(tp, TopicIdPartition) and isinstance(first, int) and isinstance(n, int)
            )
            deliveries.append(add(fast, tp, [(first, first + n)]))
            assert add(slow, tp, [(first, first + n)]) == deliveries[-1]
        elif kind == "mark":
            _, tp, offset, ack, which = op
            assert isinstance(tp, TopicIdPartition) and isinstance(offset, int)
            assert isinstance(ack, AckType) and isinstance(which, int)
            d = deliveries[which] if 0 <= which < len(deliveries) else None
            slow._hot_seg = None
            assert fast.mark(tp, offset, ack, d) is slow.mark(tp, offset, ack, d)
        elif kind == "deliver":
            _, tp, first, n = op
            assert (
                isinstance(tp, TopicIdPartition) and isinstance(first, int) and isinstance(n, int)
            )
            fast.deliver(tp, first, first + n)
            slow.deliver(tp, first, first + n)
        elif kind == "take":
            code = op[1]
            assert isinstance(code, int)
            taken = fast.take(TAG)
            other = slow.take(TAG)
            assert (taken is None) == (other is None)
            if taken is not None and other is not None:
                assert taken.acks == other.acks
                tps = list(taken.acks)
                if code:
                    assert fast.invalidate(AckFailure.SESSION_RESET, code, tag=TAG) == (
                        slow.invalidate(AckFailure.SESSION_RESET, code, tag=TAG)
                    )
                else:
                    assert fast.complete(TAG, dict.fromkeys(tps, 0)) == slow.complete(
                        TAG, dict.fromkeys(tps, 0)
                    )
        elif kind == "accept":
            # The fast ledger extends its run where it can (as the cursor does); the slow
            # one searches for every record.
            _, tp, first, n, which = op
            assert isinstance(tp, TopicIdPartition) and isinstance(first, int)
            assert isinstance(n, int) and isinstance(which, int)
            if which < len(deliveries):
                lo, hi = deliveries[which]
                for offset in range(first, first + n + 1):
                    slow._hot_seg = None
                    want = slow.mark(tp, offset, A, (lo, hi))
                    if fast.accept_next(tp, offset, lo, hi):
                        assert want is MarkResult.OK
                    else:
                        assert fast.mark(tp, offset, A, (lo, hi)) is want
        else:
            _, tp, which, first = op
            assert isinstance(tp, TopicIdPartition) and isinstance(which, int)
            assert isinstance(first, int)
            if which < len(deliveries):
                fast.forget(tp, deliveries[which], first, first + 5)
                slow.forget(tp, deliveries[which], first, first + 5)
        assert fast.partitions() == slow.partitions()
        assert fast.counts_by_partition() == slow.counts_by_partition()
    assert fast.unacknowledged() == slow.unacknowledged()
    assert fast.has_marked(TAG) == slow.has_marked(TAG)


def test_mark_finds_a_redelivery_after_the_segment_it_found_last_left() -> None:
    """The segment mark() found last is finished and pruned while another keeps the
    partition; the same offset comes again: an answer given without its delivery lands on
    the new one, an answer of the old delivery on none."""
    ledger = AckLedger()
    old = add(ledger, TP0, [(3, 3), (10, 12)])
    assert ledger.mark(TP0, 3, A, old) is MarkResult.OK
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(3, 3, A)]}
    ledger.complete(TAG, {TP0: 0})
    assert ledger.partitions() == [TP0]  # 10..12 still held
    new = add(ledger, TP0, [(3, 3)])
    assert ledger.mark(TP0, 3, A, old) is MarkResult.UNKNOWN
    assert ledger.mark(TP0, 3, R) is MarkResult.OK
    assert ledger.mark(TP0, 3, A, new) is MarkResult.ALREADY_ACKNOWLEDGED


def test_runs_are_the_longest_runs_of_one_marked_state() -> None:
    # ledger._runs finds runs by a search and a match per run; what it must give is what
    # one backreference pattern gives (the definition), on random and edge-case states.
    import random
    import re

    from sharecon._share.ledger import _MARKED_START, _SENT_START, _runs

    rng = random.Random(5)
    cases = [b"", b"\x00", b"\x40" * 9, b"\x00" * 2200, b"\x01\x02" * 50, b"\x40\x00\x00"]
    alphabet = b"\x00\x01\x02\x03\x04\x10\x11\x20\x21\x24\x40"
    for _ in range(300):
        n = rng.randrange(0, 60)
        # Runs of random lengths, so long runs and runs of one both occur.
        out = bytearray()
        while len(out) < n:
            out += bytes([rng.choice(alphabet)]) * rng.choice((1, 1, 2, 5, 17))
        cases.append(bytes(out))
    for starts, definition in (
        (_MARKED_START, re.compile(rb"([\x00-\x04])\1*")),
        (_SENT_START, re.compile(rb"([\x20-\x24])\1*")),
    ):
        for states in cases:
            got: list[tuple[int, int, int]] = []
            _runs(bytearray(states), starts, 100, got)
            want = [
                (100 + m.start(), 99 + m.end(), states[m.start()])
                for m in definition.finditer(states)
            ]
            assert got == want, states


def test_settle_dead_merges_overlapping_dead_runs_far_from_offset_zero() -> None:
    """The seed-272 case past offset 4: the runs' overlap is judged on their offsets, not
    on the acknowledgement type beside them (found by mutation testing, seed 6's sample:
    an index 2 for 1 in ``_union`` only shows where offsets exceed the type's number)."""
    ledger = AckLedger()
    for lo, hi in ((100, 103), (102, 106)):
        ledger.add(TP0, TAG, [(lo, hi)])
        ledger.deliver(TP0, lo, hi)
        ledger.supersede(TP0, [(lo, hi)])
    ledger.add(TP0, TAG, [(100, 106)])
    [lost] = ledger.settle_dead(ack=AckType.RELEASE)
    assert lost.batches == (b(100, 106, AckType.RELEASE),)


# -- implicit accepts written as runs (the ledger's rule 7) ---------------------------------


def test_consecutive_implicit_accepts_go_out_as_one_batch() -> None:
    ledger = AckLedger()
    d = add(ledger, TP0, [(10, 19)])
    assert ledger.mark(TP0, 10, A, d) is MarkResult.OK
    assert all(ledger.accept_next(TP0, o, *d) for o in range(11, 15))
    # What any reader sees is as if each accept had been written at once.
    assert ledger.counts_by_partition() == {TP0: (5, 5, 0)}
    assert ledger.holds(TP0, 14, d) is False and ledger.holds(TP0, 15, d) is True
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(10, 14, A)]}
    assert taken.count == 5


@pytest.mark.parametrize(
    ("tp", "offset", "delivery_shift", "why"),
    [
        (TP1, 11, 0, "another partition"),
        (TP0, 12, 0, "not the next offset"),
        (TP0, 11, 1, "another delivery"),
    ],
)
def test_accept_next_extends_only_the_run_it_holds(
    tp: TopicIdPartition, offset: int, delivery_shift: int, why: str
) -> None:
    ledger = AckLedger()
    d = add(ledger, TP0, [(10, 12)])
    add(ledger, TP1, [(10, 12)])
    assert ledger.mark(TP0, 10, A, d) is MarkResult.OK
    lo, hi = d
    assert not ledger.accept_next(tp, offset, lo + delivery_shift, hi + delivery_shift), why
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(10, 10, A)]}


def test_a_run_stops_at_its_segments_end_and_at_a_record_not_buffered() -> None:
    ledger = AckLedger()
    d = add(ledger, TP0, [(0, 2), (3, 5)])
    ledger.deliver(TP0, 4, 4)  # handed out by a bulk style: no longer the run's kind
    assert ledger.mark(TP0, 0, A, d) is MarkResult.OK
    assert ledger.accept_next(TP0, 1, *d) and ledger.accept_next(TP0, 2, *d)
    assert not ledger.accept_next(TP0, 3, *d)  # the next segment: a search finds it
    assert ledger.mark(TP0, 3, A, d) is MarkResult.OK
    assert not ledger.accept_next(TP0, 4, *d)
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(0, 3, A)]}


def test_a_run_finds_its_next_record_by_its_distance_from_the_segment_start() -> None:
    """The run reads the next record's state at ``offset - first``: a segment starting at
    1005 whose record 1006 was handed out by a bulk style stops the run there, while 1008
    (at ``1006 ^ 1005``, where an index made with the wrong operator would look: a
    mutant of seed 12's sample) is still buffered."""
    ledger = AckLedger()
    d = add(ledger, TP0, [(1005, 1012)])
    ledger.deliver(TP0, 1006, 1006)
    assert ledger.mark(TP0, 1005, A, d) is MarkResult.OK
    assert not ledger.accept_next(TP0, 1006, *d)
    taken = ledger.take(TAG)
    assert taken is not None and taken.acks == {TP0: [b(1005, 1005, A)]}


def test_a_session_lost_with_a_run_pending_fails_its_accepts() -> None:
    """The run's records were the application's: their accepts fail with the session, as
    accepts written one by one would, and none is left as an unseen buffered record."""
    ledger = AckLedger()
    d = add(ledger, TP0, [(0, 9)])
    assert ledger.mark(TP0, 0, A, d) is MarkResult.OK
    assert all(ledger.accept_next(TP0, o, *d) for o in range(1, 4))
    failed = ledger.invalidate(AckFailure.SESSION_RESET, 72, tag=TAG)
    assert failed == [AckResult(TP0, (b(0, 3, A),), 72, AckFailure.SESSION_RESET)]
    # 4..9 died in the buffer, for it to forget: neither buffered nor held any more.
    assert ledger.counts_by_partition() == {TP0: (0, 0, 0)}
    ledger.forget(TP0, d, 4, 9)
    assert ledger.partitions() == []


def test_every_ledger_method_writes_the_pending_run_first() -> None:
    """Rule 7 holds only if no method reads or changes states past a pending run: each
    public method (but accept_next itself, the sequence number, and mark(), which is
    mark_of()) starts by writing it."""
    import ast
    from pathlib import Path

    # The source file, not inspect.getsource(): the compiled build's class has none.
    source = Path(__file__).resolve().parents[2] / "sharecon" / "_share" / "ledger.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AckLedger"]
    checked = []
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        if node.name in ("accept_next", "sequence", "mark"):  # mark: mark_of's, below
            continue
        body = node.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        first = ast.unparse(body[0])
        assert first == "self._settle()", f"AckLedger.{node.name} starts with {first!r}"
        checked.append(node.name)
    assert {"take", "mark_of", "invalidate", "counts_by_partition", "add"} <= set(checked)


@pytest.mark.parametrize("first", [0, 10, 1000])
def test_rebuilt_finds_an_offset_held_past_a_segment_s_start(first: int) -> None:
    """``rebuilt`` looks for the offsets acquired again inside each held segment, counted
    from the segment's own first offset: a segment that starts at 10 or 1000 (not only
    at 0) holding offset ``first + 2`` under a live lock, its answer not sent, is found;
    once the answer went out, after the lock's deadline, or for another session it is
    not."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(first, first + 9)], deadline=30.0)
    again = [(first + 2, first + 2)]
    assert ledger.rebuilt(TP0, TAG, again, 1.0)
    assert not ledger.rebuilt(TP0, TAG, again, 30.0)  # the lock may have expired
    assert not ledger.rebuilt(TP0, OTHER, again, 1.0)
    ledger.deliver(TP0, first, first + 9)
    assert ledger.mark(TP0, first + 2, A) is MarkResult.OK
    assert ledger.rebuilt(TP0, TAG, again, 1.0)  # answered, but the broker has not heard
    assert ledger.take(TAG) is not None
    assert not ledger.rebuilt(TP0, TAG, again, 1.0)  # sent: the broker may redeliver
    assert ledger.rebuilt(TP0, TAG, [(first + 3, first + 3)], 1.0)


def test_rebuilt_looks_past_segments_of_other_sessions_and_ended_locks() -> None:
    """A range acquired again can span several segments: one whose lock ended, or of
    another session, met before a held one of this session does not end the search (a
    ``break`` there survived the simulation)."""
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)], deadline=30.0)
    ledger.add(TP0, OTHER, [(10, 19)], deadline=30.0)
    ledger.add(TP0, TAG, [(20, 29)], deadline=5.0)
    assert ledger.rebuilt(TP0, TAG, [(0, 29)], 1.0)
    assert ledger.rebuilt(TP0, TAG, [(0, 29)], 10.0)  # 20-29's lock ended; 0-9 still held
    assert ledger.rebuilt(TP0, TAG, [(5, 15)], 10.0)  # across 10-19 (another session's)
    assert not ledger.rebuilt(TP0, TAG, [(10, 29)], 10.0)  # not ours, and ended


def test_holds_by_offset_alone_finds_each_segment_s_first_and_last_record() -> None:
    # Without a delivery to look in (a record with no session owner), the partition's
    # segments are searched by offset: the last offset of a segment is held, an offset
    # between two segments (or before the first) is not, and each offset answers for its
    # own segment, never a neighbour's.
    ledger = AckLedger()
    delivered(ledger, TP0, 10, 19)
    delivered(ledger, TP0, 30, 39)
    held = [o for o in range(5, 45) if ledger.holds(TP0, o)]
    assert held == [*range(10, 20), *range(30, 40)]
    ledger.mark(TP0, 39, AckType.ACCEPT)
    assert ledger.holds(TP0, 38) and not ledger.holds(TP0, 39)


# -- how long marks may wait (rule 1 of fetch_policy) -------------------------------------


def test_marked_deadline_is_the_earliest_lock_among_the_sessions_marks() -> None:
    ledger = AckLedger()
    assert ledger.marked_deadline(TAG) == float("inf")  # nothing marked
    ledger.add(TP0, TAG, [(0, 9)], deadline=30.0)
    ledger.add(TP1, TAG, [(0, 9)], deadline=20.0)
    ledger.add(TP1, TAG_NEXT, [(20, 29)], deadline=5.0)
    assert ledger.marked_deadline(TAG) == float("inf")  # held, none marked
    ledger.mark(TP0, 3, AckType.ACCEPT)
    assert ledger.marked_deadline(TAG) == 30.0
    ledger.mark(TP1, 3, AckType.RELEASE)
    assert ledger.marked_deadline(TAG) == 20.0
    ledger.mark(TP1, 25, AckType.ACCEPT)  # another session's marks are not this one's
    assert ledger.marked_deadline(TAG) == 20.0
    assert ledger.marked_deadline(TAG_NEXT) == 5.0
    ledger.take(TAG)  # sent: no longer waiting
    assert ledger.marked_deadline(TAG) == float("inf")


def test_marked_deadline_is_minus_infinity_for_a_renew_or_an_unknown_lock() -> None:
    ledger = AckLedger()
    ledger.add(TP0, TAG, [(0, 9)], deadline=30.0)
    ledger.add(TP1, TAG, [(0, 9)])  # no deadline known
    ledger.mark(TP0, 1, AckType.ACCEPT)
    ledger.mark(TP0, 2, AckType.RENEW)  # a renew never waits
    assert ledger.marked_deadline(TAG) == float("-inf")
    other = AckLedger()
    other.add(TP1, TAG, [(0, 9)])
    other.mark(TP1, 0, AckType.ACCEPT)
    assert other.marked_deadline(TAG) == float("-inf")
