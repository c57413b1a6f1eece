"""Batches that cannot cross the link within the lock (issue 30, behaviour 3): the rules
of :mod:`sharecon._share.oversize`, and the share machine carrying them out."""

from __future__ import annotations

import uuid

from sharecon._share.effects import FetchLate, PartitionBlocked
from sharecon._share.oversize import PROBE_LOCKS, REPROBE_LOCKS, OversizeGuard
from sharecon._share.session import RequestKind
from sharecon.protocol import ShareFetchRequest, ShareFetchResponse
from sharecon.types import TopicIdPartition
from tests.share.test_machine import (
    LOCK_MS,
    NAMES,
    NODE,
    TP,
    _kilobyte_records,
    machine,
    opened,
    send,
)

T2 = uuid.uuid4()
OTHER = TopicIdPartition(T2, 0, "u")
LOCK = 30.0


def test_a_late_batch_larger_than_the_lock_carries_blocks_its_partition_at_once() -> None:
    g = OversizeGuard()
    # 512 KiB at 10 KiB/s: 51 s, longer than the 30 s lock; OTHER's 1 KiB would fit.
    new = g.answered(
        {TP: 512 * 1024, OTHER: 1024},
        elapsed=52.0,
        bytes_per_second=10240.0,
        lock=LOCK,
        asked=16 * 1024,
    )
    assert [b.tp for b in new] == [TP]
    cause = new[0].describe()
    assert "524288-byte batch" in cause and "51.2 s" in cause
    assert "10240 bytes/s" in cause and "30.0 s acquisition lock" in cause
    assert g.wanted([TP, OTHER]) == [OTHER]
    assert g.causes() == [cause]


def test_a_late_floor_sized_batch_is_a_stall_and_blocks_nothing() -> None:
    """Simulation (seed 334190681 on 4.2): a stalled answer brought a 75-byte batch after
    the lock, measured at 35 bytes/s, and the block it made outlasted the stall for good:
    the partition's records were never fetched again (invariant 9)."""
    g = OversizeGuard()
    assert g.answered({TP: 75}, elapsed=2.2, bytes_per_second=35.0, lock=2.0, asked=1024) == []
    assert g.answered({TP: 1024}, elapsed=40.0, bytes_per_second=20.0, lock=LOCK, asked=1024) == []
    assert g.wanted([TP]) == [TP]
    # Past the floor the rule stands: 2 KiB that needs longer than the lock blocks.
    [b] = g.answered({TP: 2048}, elapsed=40.0, bytes_per_second=20.0, lock=LOCK, asked=1024)
    assert b.tp == TP and g.wanted([TP]) == []


def test_a_late_answer_whose_partitions_each_fit_blocks_nothing() -> None:
    g = OversizeGuard()
    # 400 KB asked and got in many batches: a smaller ask helps (the fetch sizer's job).
    assert (
        g.answered({TP: 400_000}, elapsed=40.0, bytes_per_second=10_000.0, lock=LOCK, asked=400_000)
        == []
    )
    assert (
        g.answered(
            {TP: 200_000, OTHER: 200_000},
            elapsed=40.0,
            bytes_per_second=10_000.0,
            lock=LOCK,
            asked=16384,
        )
        == []
    )
    assert g.wanted([TP, OTHER]) == [TP, OTHER]


def test_an_unanswered_fetch_makes_a_probe_and_an_unanswered_probe_blocks() -> None:
    g = OversizeGuard()
    assert g.timed_out([TP], waited=30.5, bytes_per_second=None, lock=LOCK) == []
    assert g.probing and g.wanted([TP]) == [TP]
    # An empty answer (the first fetch's locks still hold) decides nothing.
    g.answered({}, elapsed=0.5, bytes_per_second=None, lock=LOCK, asked=16384)
    assert g.probing
    [b] = g.timed_out([TP], waited=120.0, bytes_per_second=None, lock=LOCK)
    assert b.tp == TP and b.batch_bytes is None
    assert "no answer within 120.0 s" in b.describe()
    assert not g.probing and g.wanted([TP]) == []


def test_a_probe_answered_in_time_clears_the_suspicion() -> None:
    g = OversizeGuard()
    g.timed_out([TP], waited=30.5, bytes_per_second=None, lock=LOCK)
    assert (
        g.answered({TP: 1000}, elapsed=0.1, bytes_per_second=10_000.0, lock=LOCK, asked=16384) == []
    )
    assert not g.probing


def test_a_block_ends_when_the_batch_fits_and_outlives_assignment_changes() -> None:
    g = OversizeGuard()
    g.answered({TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=16384)
    # A rate measured by a fetch that may have waited at the broker is not trusted.
    g.answered({OTHER: 500}, elapsed=0.1, bytes_per_second=5e8, lock=LOCK, asked=16384, waited=True)
    assert g.wanted([TP, OTHER]) == [OTHER]
    # A faster link measured on the same leader: 512 KiB in 5 s, within 30 % of the lock.
    g.answered({OTHER: 500_000}, elapsed=5.0, bytes_per_second=100_000.0, lock=LOCK, asked=16384)
    assert g.wanted([TP, OTHER]) == [TP, OTHER]
    g.answered({TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=16384)
    # The leader unknown for a moment (no partitions led here): the block stays.
    assert g.wanted([]) == [] and g.wanted([TP]) == []
    g.retain({TP, OTHER})
    assert g.wanted([TP]) == []
    # Revoked and assigned again (a fenced member rejoining): still not fetched.
    g.retain({OTHER})
    assert g.wanted([TP]) == []
    g.timed_out([OTHER], waited=30.5, bytes_per_second=None, lock=LOCK)
    g.retain({TP})  # a revoked suspect is forgotten
    assert not g.probing


def _unanswered_block(g: OversizeGuard) -> None:
    g.timed_out([TP, OTHER], waited=30.5, bytes_per_second=None, lock=LOCK)
    g.answered({OTHER: 500}, elapsed=0.1, bytes_per_second=5000.0, lock=LOCK, asked=1024)
    [b] = g.timed_out([TP], waited=120.0, bytes_per_second=None, lock=LOCK)
    assert b.batch_bytes is None and g.wanted([TP, OTHER]) == [OTHER]


def test_an_answer_in_time_after_an_unanswered_probe_probes_again() -> None:
    """A stall (a RequestTimeoutError leaves the connection usable) outlasted the probe;
    before, nothing ended a block with no batch size: the partition was never fetched
    again by this member."""
    g = OversizeGuard()
    _unanswered_block(g)
    # Still stalled: a late answer of the other partition ends nothing.
    g.answered({OTHER: 500}, elapsed=LOCK + 1, bytes_per_second=5000.0, lock=LOCK, asked=1024)
    assert g.wanted([TP, OTHER]) == [OTHER] and not g.probing
    # Healed: the leader answers in time (even empty). TP is suspect: the next fetch probes.
    g.answered({}, elapsed=0.2, bytes_per_second=None, lock=LOCK, asked=16384)
    assert g.wanted([TP, OTHER]) == [TP, OTHER] and g.probing and g.causes() == []
    # The probe's bytes arrive in time: cleared, fetched as usual.
    g.answered({TP: 800}, elapsed=0.2, bytes_per_second=8000.0, lock=LOCK, asked=1024)
    assert not g.probing and g.wanted([TP]) == [TP]


def test_a_reprobe_that_gets_no_answer_blocks_again() -> None:
    g = OversizeGuard()
    _unanswered_block(g)
    g.answered({}, elapsed=0.2, bytes_per_second=None, lock=LOCK, asked=16384)
    assert g.probing
    [b] = g.timed_out([TP, OTHER], waited=120.0, bytes_per_second=None, lock=LOCK)
    assert b.tp == TP and g.wanted([TP, OTHER]) == [OTHER]


def test_an_unanswered_block_is_probed_again_within_reprobe_locks_with_no_answer_at_all() -> None:
    """Every partition of the leader blocked: no fetch goes there, no answer comes; the
    bound still ends it."""
    g = OversizeGuard()
    _unanswered_block(g)
    assert g.wanted([TP], now=100.0) == []  # first seen: the clock starts
    assert g.wanted([TP], now=100.0 + REPROBE_LOCKS * LOCK - 0.1) == []
    assert g.wanted([TP], now=100.0 + REPROBE_LOCKS * LOCK) == [TP] and g.probing


def test_a_block_again_after_a_reprobe_starts_its_clock_afresh() -> None:
    g = OversizeGuard()
    _unanswered_block(g)
    g.wanted([TP], now=100.0)
    due = 100.0 + REPROBE_LOCKS * LOCK
    assert g.blocked[TP].reprobe_at == due
    assert g.wanted([TP], now=due) == [TP] and g.probing
    # The re-probe gets no answer either: blocked again, with no deadline yet ...
    [b] = g.timed_out([TP], waited=120.0, bytes_per_second=None, lock=LOCK)
    assert b.reprobe_at is None
    # ... which starts when the guard first sees it, not at the old one.
    assert g.wanted([TP], now=due + 1.0) == []
    assert g.wanted([TP], now=due + REPROBE_LOCKS * LOCK) == []
    assert g.wanted([TP], now=due + 1.0 + REPROBE_LOCKS * LOCK) == [TP]


def test_a_block_with_a_measured_batch_is_not_ended_by_a_mere_answer() -> None:
    g = OversizeGuard()
    g.answered({TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=16384)
    g.answered({}, elapsed=0.2, bytes_per_second=None, lock=LOCK, asked=16384)
    assert g.wanted([TP], now=0.0) == [] and not g.probing


def test_a_block_with_a_measured_batch_is_probed_again_within_reprobe_locks() -> None:
    """Whole-client simulation, seeds 79 and 93 on 4.4: the slow link healed, but the
    member's other partitions were idle, so no answer could show a faster rate; the
    measured block stood for good (health() never ok again, the partition's records left
    waiting at the broker by that member).
    The bound of rule 3 now holds for every block."""
    g = OversizeGuard()
    g.answered({TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=16384)
    assert g.wanted([TP], now=100.0) == []  # first seen: the clock starts
    assert g.wanted([TP], now=100.0 + REPROBE_LOCKS * LOCK - 0.1) == []
    assert g.wanted([TP], now=100.0 + REPROBE_LOCKS * LOCK) == [TP] and g.probing
    assert g.causes() == []
    # The link is fast again: the probe's batch arrives in time, and the partition is
    # fetched as usual.
    assert (
        g.answered({TP: 512 * 1024}, elapsed=0.5, bytes_per_second=1e6, lock=LOCK, asked=1024) == []
    )
    assert not g.probing and g.wanted([TP]) == [TP]


def test_a_reprobe_of_a_measured_block_that_is_late_again_blocks_again() -> None:
    g = OversizeGuard()
    g.answered({TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=16384)
    g.wanted([TP], now=100.0)
    assert g.wanted([TP], now=100.0 + REPROBE_LOCKS * LOCK) == [TP]
    # Still slow: the probe (one record's worth asked) brings the batch after the lock.
    [b] = g.answered(
        {TP: 512 * 1024}, elapsed=52.0, bytes_per_second=10240.0, lock=LOCK, asked=1024
    )
    assert b.tp == TP and b.reprobe_at is None and g.wanted([TP]) == []
    assert "at the latest in 300 s" in b.describe()


def test_a_rate_surely_reached_by_a_fetch_that_waited_ends_a_block() -> None:
    """A fetch that may have waited at the broker overstates the rate measured as bytes
    over (elapsed - wait); bytes over the whole round trip understate it, so a batch that
    fits at that rate surely fits."""
    g = OversizeGuard()
    g.answered({TP: 100_000}, elapsed=52.0, bytes_per_second=2000.0, lock=LOCK, asked=16384)
    # 30 KB in 0.6 s (the fetch may have waited 0.5 s of it): at least 50 KB/s, and the
    # 100 KB batch then arrives in 2 s, within 30 % of the lock.
    g.answered(
        {OTHER: 30_000}, elapsed=0.6, bytes_per_second=3e5, lock=LOCK, asked=16384, waited=True
    )
    assert g.wanted([TP, OTHER]) == [TP, OTHER]
    # Not when the surely-reached rate is too low: 1 KB in 0.6 s.
    g.answered({TP: 100_000}, elapsed=52.0, bytes_per_second=2000.0, lock=LOCK, asked=16384)
    g.answered(
        {OTHER: 1000}, elapsed=0.6, bytes_per_second=1e4, lock=LOCK, asked=16384, waited=True
    )
    assert g.wanted([TP, OTHER]) == [OTHER]


# -- the machine ------------------------------------------------------------------------------


def test_the_machine_stops_fetching_a_partition_whose_batch_arrived_after_the_lock() -> None:
    m = machine()
    opened(m)
    f = send(m, 1.0)
    late = _kilobyte_records(0, 29)  # one 30 KB batch, more than the 16 KiB asked
    size = len(late.responses[0].partitions[0].records or b"")
    # It took longer than the 30 s lock to arrive: one delivery attempt spent.
    assert m.fetch_answered(f, late, NAMES, 1.0 + LOCK_MS / 1000 + 5, pipeline=False).proceed
    m.fetch_records(f, late, NAMES)
    effects = m.drain()
    [blocked] = [e for e in effects if isinstance(e, PartitionBlocked)]
    assert blocked.tp == TP and f"{size}-byte batch" in blocked.cause
    assert any(isinstance(e, FetchLate) for e in effects)
    assert m.blocked() == [blocked.cause]
    # The records still wait: stuck counts from the late fetch's send, past the lock,
    # even after the next (empty, quick) answer.
    turn = m.next_turn(NODE, [TP], room=True, now=40.0)
    f2 = m.sent(NODE, turn, 40.0)
    m.fetch_answered(
        f2, ShareFetchResponse(acquisition_lock_timeout_ms=LOCK_MS), NAMES, 40.1, pipeline=False
    )
    assert m.stuck(40.1) == 40.1 - 1.0
    # That next fetch forgot the partition: no second attempt is spent by this member.
    assert turn.plan is not None and turn.plan.forgotten == (TP,)


def test_the_machine_probes_after_an_unanswered_fetch_and_blocks_after_a_second() -> None:
    m = machine()
    opened(m)
    f = send(m, 1.0)
    assert m.fetch_timeout(f, 30.5) == 30.5 and not f.probe
    m.request_failed(f, timed_out=True)
    m.drain()
    # The probe: the session was reset, it opens again asking for one record's worth
    # with record-limit acquisition (4.2+), awaited PROBE_LOCKS locks.
    turn = m.next_turn(NODE, [TP], room=True, now=32.0)
    assert turn.plan is not None and turn.plan.kind is RequestKind.SHARE_FETCH
    request = m.request(turn, "member")
    assert isinstance(request, ShareFetchRequest)
    assert (request.max_records, request.share_acquire_mode) == (1, 1)
    assert request.max_bytes <= 1024
    probe = m.sent(NODE, turn, 32.0)
    assert probe.probe and m.fetch_timeout(probe, 30.5) == PROBE_LOCKS * LOCK_MS / 1000
    m.request_failed(probe, timed_out=True)
    [blocked] = [e for e in m.drain() if isinstance(e, PartitionBlocked)]
    assert blocked.tp == TP and "no answer within 120.0 s" in blocked.cause
    turn = m.next_turn(NODE, [TP], room=True, now=160.0)
    assert turn.plan is None or TP not in turn.plan.added


def test_an_empty_quick_answer_is_not_a_block() -> None:
    m = machine()
    opened(m)
    f = send(m, 1.0)
    m.fetch_answered(
        f, ShareFetchResponse(acquisition_lock_timeout_ms=LOCK_MS), NAMES, 1.5, pipeline=False
    )
    assert m.blocked() == []


def test_a_longer_lock_reported_by_the_broker_ends_a_block() -> None:
    m = machine()
    opened(m)
    f = send(m, 1.0)
    late = _kilobyte_records(0, 29)
    m.fetch_answered(f, late, NAMES, 1.0 + LOCK_MS / 1000 + 5, pipeline=False)
    m.fetch_records(f, late, NAMES)
    m.drain()
    assert m.blocked()
    # The group's lock raised to 300 s: 30 KB at the measured ~850 bytes/s fits in 90 s.
    turn = m.next_turn(NODE, [TP], room=True, now=40.0)
    f2 = m.sent(NODE, turn, 40.0)
    longer = ShareFetchResponse(acquisition_lock_timeout_ms=300_000)
    m.fetch_answered(f2, longer, NAMES, 40.5, pipeline=False)
    assert m.blocked() == []
    assert m.leader(NODE).guard.wanted([TP]) == [TP]  # fetched again


def test_an_empty_answer_in_time_does_not_end_a_block_at_the_rate_from_before() -> None:
    """Whole-client simulation, seed 1080 on 4.1: the leader's running rate still held a
    sample from before the link slowed (one small answer in a millisecond), an empty
    answer in time ended the block at that rate, and the batch was fetched late again: a
    third delivery attempt of each of its records spent (invariant N4)."""
    m = machine()
    opened(m)
    f = send(m, 1.0)
    quick = _kilobyte_records(0, 0)
    m.fetch_answered(f, quick, NAMES, 1.001, pipeline=False)  # ~1 MB/s, before the slowdown
    m.fetch_records(f, quick, NAMES)
    m.drain()
    f = m.sent(NODE, m.next_turn(NODE, [TP], room=True, now=2.0), 2.0)
    late = _kilobyte_records(1, 29)
    m.fetch_answered(f, late, NAMES, 2.0 + LOCK_MS / 1000 + 5, pipeline=False)
    m.fetch_records(f, late, NAMES)
    m.drain()
    assert m.blocked()
    turn = m.next_turn(NODE, [TP], room=True, now=40.0)
    f2 = m.sent(NODE, turn, 40.0)
    empty = ShareFetchResponse(acquisition_lock_timeout_ms=LOCK_MS)
    m.fetch_answered(f2, empty, NAMES, 40.2, pipeline=False)
    assert m.blocked()  # an empty answer measured nothing
    assert m.leader(NODE).guard.wanted([TP]) == []


def test_the_machine_probes_an_unanswered_block_again_after_reprobe_locks() -> None:
    m = machine()
    opened(m)
    f = send(m, 1.0)
    m.request_failed(f, timed_out=True)
    m.drain()
    probe = m.sent(NODE, m.next_turn(NODE, [TP], room=True, now=32.0), 32.0)
    m.request_failed(probe, timed_out=True)
    assert [e for e in m.drain() if isinstance(e, PartitionBlocked)]
    turn = m.next_turn(NODE, [TP], room=True, now=160.0)
    assert turn.plan is None or TP not in turn.plan.added
    lock = LOCK_MS / 1000
    turn = m.next_turn(NODE, [TP], room=True, now=160.0 + REPROBE_LOCKS * lock)
    assert turn.plan is not None and turn.plan.kind is RequestKind.SHARE_FETCH
    request = m.request(turn, "member")
    assert isinstance(request, ShareFetchRequest)
    assert (request.max_records, request.share_acquire_mode) == (1, 1)  # a probe again
    assert m.blocked() == []
