"""DeliveryTally: what counts as lost, accepted, duplicated and explained (no broker)."""

from __future__ import annotations

import pytest

from sharecon.testing.tally import (
    COUNT_ROSE,
    NEW_LEADER,
    RELEASED_ON_DISCONNECT,
    RELOADED,
    DeliveryTally,
)


def _tally(n: int = 3, **kwargs: bool) -> DeliveryTally:
    tally = DeliveryTally(**kwargs)  # type: ignore[arg-type]
    tally.started(0.0)
    for i in range(n):
        tally.produced(f"r{i}", "t", 0, i, at=0.0)
    return tally


def test_every_record_delivered_and_confirmed_once_is_ok() -> None:
    tally = _tally()
    for i in range(3):
        tally.delivered(f"r{i}", "t", 0, i, 1, "m0", 1.0 + i)
    tally.answered("t", 0, 0, 2, ok=True, at=4.0)
    report = tally.report()
    assert report.ok
    assert (report.accepted, report.duplicates, report.lost) == (3, 0, ())
    assert tally.done(4.0)


def test_a_record_never_delivered_is_lost() -> None:
    tally = _tally()
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.answered("t", 0, 0, 0, ok=True, at=1.5)
    report = tally.report()
    assert not report.ok
    assert report.lost == ("r1", "r2")
    assert not tally.done(100.0)


def test_a_higher_delivery_count_explains_a_duplicate() -> None:
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.delivered("r0", "t", 0, 0, 2, "m1", 20.0)
    tally.answered("t", 0, 0, 0, ok=True, at=21.0)
    report = tally.report()
    assert report.ok
    assert report.explained == {COUNT_ROSE: 1}


@pytest.mark.parametrize("same_count_redelivery", [True, False])
def test_the_same_count_is_explained_only_where_the_broker_does_that(
    same_count_redelivery: bool,
) -> None:
    tally = _tally(1, same_count_redelivery=same_count_redelivery)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.answered("t", 0, 0, 0, ok=False, at=2.0)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 3.0)
    tally.answered("t", 0, 0, 0, ok=True, at=4.0)
    report = tally.report()
    assert report.ok is same_count_redelivery
    if same_count_redelivery:
        assert report.explained == {RELEASED_ON_DISCONNECT: 1}
    else:
        assert len(report.unexplained) == 1 and "count 1 (m0) then 1 (m1)" in report.unexplained[0]


def test_the_same_count_from_a_new_leader_epoch_is_explained() -> None:
    tally = _tally(1, same_count_redelivery=False)
    tally.delivered("r0", "t", 0, 0, 2, "m0", 1.0, leader_epoch=3)
    tally.delivered("r0", "t", 0, 0, 2, "m1", 5.0, leader_epoch=4)
    tally.answered("t", 0, 0, 0, ok=True, at=6.0)
    report = tally.report()
    assert report.ok and report.explained == {NEW_LEADER: 1}


def test_delivered_again_after_a_confirmed_accept_is_a_double_accept() -> None:
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.answered("t", 0, 0, 0, ok=True, at=2.0)
    tally.delivered("r0", "t", 0, 0, 2, "m1", 3.0)
    tally.answered("t", 0, 0, 0, ok=True, at=4.0)
    report = tally.report()
    assert not report.ok
    assert len(report.double_accepted) == 1


def test_a_superseded_holders_late_confirmation_is_not_a_double_accept() -> None:
    # The CI failure of 2026-12-05: m1's lock ended, m2 got the record with count 3 and
    # accepted it; m1's acceptance, answered 0.7 s later, was skipped by the broker as
    # below the start offset and answered 0 (conformance: late-ack-after-the-other-accepted).
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 2, "m1", 1.0)
    tally.delivered("r0", "t", 0, 0, 3, "m2", 6.0)
    tally.answered("t", 0, 0, 0, ok=True, at=6.1, member="m2")
    tally.answered("t", 0, 0, 0, ok=True, at=6.8, member="m1")
    report = tally.report()
    assert report.ok, report.summary()
    assert (report.accepted, report.late_confirmations) == (1, 1)
    assert "late confirmations 1" in report.summary()


@pytest.mark.parametrize(
    "answers",
    [
        # The superseded holder confirmed while the last holder still held the record: the
        # broker checks such an acknowledgement, so two successes are two acceptances.
        (("m1", 6.05), ("m2", 6.1)),
        # The last holder confirmed twice.
        (("m2", 6.1), ("m2", 6.8)),
        # A member that never had the record.
        (("m2", 6.1), ("m9", 6.8)),
    ],
)
def test_other_second_confirmations_stay_double_accepts(
    answers: tuple[tuple[str, float], ...],
) -> None:
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 2, "m1", 1.0)
    tally.delivered("r0", "t", 0, 0, 3, "m2", 6.0)
    for member, at in answers:
        tally.answered("t", 0, 0, 0, ok=True, at=at, member=member)
    report = tally.report()
    assert not report.ok
    assert len(report.double_accepted) == 1 and report.late_confirmations == 0
    assert "history: count 2 to m1 at 1.00" in report.double_accepted[0]


def test_an_unconfirmed_answer_counts_as_done_only_after_the_settle_time() -> None:
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.answered("t", 0, 0, 0, ok=False, at=2.0)
    assert not tally.done(10.0, settle=20.0)  # it may still come back when its lock expires
    assert tally.done(23.0, settle=20.0)
    report = tally.report()
    assert report.ok and report.unconfirmed == 1 and report.accepted == 0


def test_records_of_other_runs_are_foreign() -> None:
    tally = _tally(1)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.answered("t", 0, 0, 0, ok=True, at=1.0)
    tally.delivered("x", "t", 0, 99, 1, "m0", 1.0)
    assert tally.report().foreign == 1 and not tally.report().ok


def test_gaps_count_only_while_records_wait() -> None:
    tally = DeliveryTally()
    tally.started(0.0)
    tally.produced("a", "t", 0, 0, at=0.0)
    tally.produced("b", "t", 0, 1, at=0.0)
    tally.produced("c", "t", 0, 2, at=50.0)  # produced after an idle spell
    tally.delivered("a", "t", 0, 0, 1, "m0", 1.0)
    tally.delivered("b", "t", 0, 1, 1, "m0", 6.0)  # waited 5 s with nothing delivered
    tally.delivered("c", "t", 0, 2, 1, "m0", 50.5)  # 44 s idle: nothing was waiting
    tally.fault("cut", 1.5)
    report = tally.report()
    assert report.longest_gap == pytest.approx(5.0)
    assert report.time_without_progress == pytest.approx(5.0)
    assert report.faults[0].to_next_delivery == pytest.approx(4.5)


def test_a_reported_leader_change_between_deliveries_explains_the_same_count() -> None:
    tally = _tally(2, same_count_redelivery=False)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.leader_changed("t", 0, 5.0)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 4.8)  # the poller saw the change a bit late
    tally.delivered("r1", "t", 0, 1, 1, "m0", 6.0)  # after the change: same leader twice
    tally.delivered("r1", "t", 0, 1, 1, "m1", 9.0)
    tally.answered("t", 0, 0, 1, ok=True, at=10.0)
    report = tally.report()
    assert report.explained == {NEW_LEADER: 1}
    assert len(report.unexplained) == 1 and report.unexplained[0].startswith("r1 ")


def test_only_the_accepted_offsets_of_a_mixed_range_count_as_accepted() -> None:
    from sharecon._share.acks import AckBatch
    from sharecon._share.ledger import AckResult
    from sharecon.testing.chaos import tally_acceptances
    from sharecon.types import ZERO_UUID, AckType, TopicIdPartition

    tally = _tally()
    for i in range(3):
        tally.delivered(f"r{i}", "t", 0, i, 1, "m0", 1.0)
    mixed = AckBatch(0, 2, (AckType.ACCEPT, AckType.RELEASE, AckType.ACCEPT))
    tally_acceptances(tally, [AckResult(TopicIdPartition(ZERO_UUID, 0, "t"), (mixed,))], 2.0)
    # r1 was released, so its redelivery with the same count is no double accept.
    tally.delivered("r1", "t", 0, 1, 2, "m1", 3.0)
    report = tally.report()
    assert report.double_accepted == ()
    assert report.explained == {COUNT_ROSE: 1}
    assert report.accepted == 2 and report.unconfirmed == 1


def test_the_same_count_after_all_sessions_ended_is_a_reload() -> None:
    # Kafka 4.2+: no same-count release on disconnect, but a stall's end closes every
    # connection at once and the broker reloads the share partition from persisted state.
    tally = _tally(1, same_count_redelivery=False)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.sessions_ended(5.0)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 6.0)
    tally.answered("t", 0, 0, 0, ok=True, at=6.5)
    report = tally.report()
    assert report.ok, report.summary()
    assert report.explained == {RELOADED: 1}


def test_a_reload_reported_before_both_deliveries_explains_nothing() -> None:
    tally = _tally(1, same_count_redelivery=False)
    tally.partition_reloaded("t", 0, 0.5)
    tally.delivered("r0", "t", 0, 0, 1, "m0", 1.0)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 6.0)
    report = tally.report()
    assert not report.ok
    assert len(report.unexplained) == 1
    tally.partition_reloaded("t", 0, 3.0)
    assert tally.report().explained == {RELOADED: 1}


def test_a_session_the_broker_ended_explains_the_same_count_after_it() -> None:
    # The cut's close reached the broker after the member's new session began: that close
    # ended the new session too, and its records came back with the same count.
    tally = _tally(1, same_count_redelivery=False)
    tally.sessions_ended(0.5)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 1.0)
    tally.session_ended_by_broker(1.5)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 2.0)
    tally.answered("t", 0, 0, 0, ok=True, at=2.5, member="m1")
    report = tally.report()
    assert report.ok and report.explained == {RELOADED: 1}


def test_an_unexplained_line_says_when_and_what_ended() -> None:
    tally = _tally(1, same_count_redelivery=False)
    tally.sessions_ended(0.5)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 1.0)
    tally.delivered("r0", "t", 0, 0, 1, "m1", 2.0)
    (line,) = tally.report().unexplained
    assert "at 1.00 and 2.00" in line and "sessions ended at 0.50" in line
