"""The fetch sizer, with simulated links and applications (no broker, no clock)."""

from __future__ import annotations

from sharecon._share.fetch_size import (
    ARRIVAL_SHARE,
    DEFAULT_LOCK,
    HANDLE_SHARE,
    INITIAL_BYTES,
    MIN_BYTES,
    FetchSizer,
)

MIB = 1024 * 1024
CEILING = 50 * MIB


def _link(sizer: FetchSizer, *, bps: float, backlog: int, record: int, lock_ms: int) -> float:
    """Fetch ``backlog`` bytes of ``record``-byte records over a ``bps`` link; return the
    worst arrival time of a fetch (the broker returns min(asked, left), at least one record)."""
    now = 0.0
    worst = 0.0
    left = backlog
    while left > 0:
        asked = sizer.size().max_bytes
        got = min(left, max(record, asked // record * record))
        took = 0.001 + got / bps
        sizer.fetched(now, now + took, got, got // record, lock_ms=lock_ms)
        worst = max(worst, took)
        now += took
        left -= got
    return worst


def test_starts_conservative_and_caps_by_configuration() -> None:
    assert FetchSizer(CEILING, 500).size().max_bytes == INITIAL_BYTES
    assert FetchSizer(10_000, 500).size().max_bytes == 10_000
    assert FetchSizer(CEILING, 500).size().max_records == 500


def test_grows_multiplicatively_on_a_fast_link() -> None:
    sizer = FetchSizer(CEILING, 500)
    sizes = []
    now = 0.0
    for _ in range(5):
        asked = sizer.size().max_bytes
        sizes.append(asked)
        sizer.fetched(now, now + 0.002, asked, 100, lock_ms=30_000)  # 2 ms on loopback
        now += 0.01
    # x16 per fast answer (the measured rate carries far more), then the ceiling.
    assert sizes == [INITIAL_BYTES, 16 * INITIAL_BYTES, 256 * INITIAL_BYTES, CEILING, CEILING]


def test_growth_follows_the_measured_rate() -> None:
    # 1 MB/s, 30 s lock: an answer of 16 KiB in 16 ms allows 1 MB/s * 9 s / 4 = 2.25 MB,
    # but one jump is bounded by x16.
    sizer = FetchSizer(CEILING, 500)
    sizer.fetched(0.0, INITIAL_BYTES / 1e6, INITIAL_BYTES, 64, lock_ms=30_000)
    assert sizer.size().max_bytes == 16 * INITIAL_BYTES
    # 100 KB/s: 16 KiB took 0.16 s, the rate carries 225 KB: more than doubling.
    slow = FetchSizer(CEILING, 500)
    slow.fetched(0.0, INITIAL_BYTES / 1e5, INITIAL_BYTES, 64, lock_ms=30_000)
    assert abs(slow.size().max_bytes - 1e5 * 30 * ARRIVAL_SHARE / 4) <= 1
    # Slower still (2 s, within a quarter of the budget): at least doubles.
    small = FetchSizer(CEILING, 500)
    small.fetched(0.0, 2.0, INITIAL_BYTES, 64, lock_ms=30_000)
    assert small.size().max_bytes == 2 * INITIAL_BYTES


def test_does_not_grow_on_small_answers() -> None:
    # Answers that do not fill the size asked give no reason to ask for more.
    sizer = FetchSizer(CEILING, 500)
    for i in range(5):
        sizer.fetched(i, i + 0.002, 1000, 1, lock_ms=30_000)
    assert sizer.size().max_bytes == INITIAL_BYTES


def test_slow_link_every_fetch_arrives_within_the_lock() -> None:
    # The probe's case: 10 KiB/s, 600 KB backlog, 1 KB records, 30 s lock.
    sizer = FetchSizer(CEILING, 500)
    worst = _link(sizer, bps=10 * 1024, backlog=600_000, record=1000, lock_ms=30_000)
    assert worst < 30.0 * ARRIVAL_SHARE  # every fetch within its share of the lock
    assert 10 * 1024 * 0.95 < (sizer.bytes_per_second or 0) < 10 * 1024 * 1.05


def test_the_link_rate_is_weighed_by_transfer_time() -> None:
    """Whole-client simulation, seed 1080 on 4.1: one small answer in a millisecond, then
    the link slowed to 2 KiB/s. Averaged sample by sample, the rate named in the late
    fetch's warning stayed in the gigabytes per second for many answers; weighed by time,
    it is the slow link's after one."""
    sizer = FetchSizer(CEILING, 500)
    sizer.fetched(0.0, 1e-9, 1000, 1, lock_ms=15_000)  # in no measurable time
    assert sizer.bytes_per_second is not None and sizer.bytes_per_second >= 1e9
    sizer.fetched(1.0, 1.0 + 22.7, 46_500, 45, lock_ms=15_000)  # 46.5 KB over 22.7 s
    assert 2000 < sizer.bytes_per_second < 2200
    # It follows the link when it heals (1 MB/s), as the slow answer's seconds halve away.
    rates = []
    for i in range(8):
        sizer.fetched(30.0 + i, 30.0 + i + 0.5, 500_000, 500, lock_ms=15_000)
        rates.append(sizer.bytes_per_second)
    assert rates == sorted(rates) and 900_000 < rates[-1] < 1_000_000


def test_shrinks_when_an_answer_is_slow() -> None:
    sizer = FetchSizer(CEILING, 500, initial_bytes=MIB)
    # 1 MiB took 100 s at 10 KiB/s: the next ask is what 10 KiB/s carries in the budget.
    sizer.fetched(0.0, 100.0, MIB, 1000, lock_ms=30_000)
    assert sizer.size().max_bytes == int(MIB / 100.0 * 30.0 * ARRIVAL_SHARE)


def test_long_poll_wait_is_not_counted_as_transfer() -> None:
    sizer = FetchSizer(CEILING, 500, initial_bytes=MIB)
    # With a 1 s lock, a 0.5 s long poll followed by a quick answer must not shrink.
    sizer.fetched(0.0, 0.5, 100, 1, lock_ms=1000, waited=0.5)
    assert sizer.size().max_bytes == MIB


def test_timeout_quarters_down_to_the_floor_then_says_so() -> None:
    sizer = FetchSizer(CEILING, 500, initial_bytes=4 * MIN_BYTES * 4)
    assert sizer.timed_out(0.0) is False
    assert sizer.size().max_bytes == 4 * MIN_BYTES
    assert sizer.timed_out(0.0) is False
    assert sizer.size().max_bytes == MIN_BYTES
    assert sizer.timed_out(0.0) is True  # already at one record's worth
    assert sizer.size().max_bytes == MIN_BYTES


def test_a_record_larger_than_the_budget_is_late_and_too_slow() -> None:
    sizer = FetchSizer(CEILING, 500, initial_bytes=MIN_BYTES)
    # One 1 MB record over 10 KiB/s with a 15 s lock: it arrives (the broker sends the first
    # batch whatever max_bytes says) but after its lock ended.
    sized = sizer.fetched(0.0, 100.0, 1_000_000, 1, lock_ms=15_000)
    assert sized.late and sized.too_slow
    assert sizer.size().max_bytes == MIN_BYTES  # never below the floor
    # At the default size, a 120 KB batch (more than asked) late: shrinking cannot help.
    first = FetchSizer(CEILING, 500)
    assert first.fetched(0.0, 6.0, 120_000, 1, lock_ms=2000).too_slow
    # A late answer to a larger ask is late, but shrinking helps: not "too slow".
    big = FetchSizer(CEILING, 500, initial_bytes=MIB)
    sized = big.fetched(0.0, 100.0, MIB, 1000, lock_ms=15_000)
    assert sized.late and not sized.too_slow


def test_lock_duration_comes_from_the_answers() -> None:
    sizer = FetchSizer(CEILING, 500)
    assert sizer.lock == DEFAULT_LOCK
    sizer.fetched(0.0, 0.01, 10, 1, lock_ms=2000)
    assert sizer.lock == 2.0
    sizer.fetched(0.0, 0.01, 10, 1)  # v0 answers report no lock: keep the last known
    assert sizer.lock == 2.0


def test_records_follow_a_slow_application() -> None:
    sizer = FetchSizer(CEILING, 500)
    sizer.fetched(0.0, 0.01, 50_000, 500, lock_ms=10_000)
    # The application answers 10 records a second and still has records waiting.
    sizer.handled(1.01, 10, backlog=True)
    sizer.handled(2.01, 10, backlog=True)
    assert sizer.handled_per_second == 10.0
    # Two fetches' worth within HANDLE_SHARE of the 10 s lock: 10/s * 10 s * 0.4 / 2.
    assert sizer.size().max_records == int(10 * 10 * HANDLE_SHARE / 2)


def test_an_idle_application_only_raises_its_rate() -> None:
    sizer = FetchSizer(CEILING, 500)
    sizer.fetched(0.0, 1.0, 50_000, 100, lock_ms=10_000)
    sizer.handled(2.0, 100, backlog=True)  # 100/s while busy
    sizer.fetched(2.0, 12.0, 1000, 10, lock_ms=10_000)
    # It answered 10 records 10 s after they came: it waited for the link, not the
    # reverse; 1/s is a lower bound and must not lower the estimate.
    sizer.handled(22.0, 10, backlog=False)
    assert sizer.handled_per_second == 100.0
    assert sizer.size().max_records == int(100 * 10 * HANDLE_SHARE / 2)


def test_never_below_one_record() -> None:
    sizer = FetchSizer(CEILING, 500)
    sizer.fetched(0.0, 0.01, 10, 1, lock_ms=1000)
    sizer.handled(1000.0, 1, backlog=True)  # one record in 1000 s
    assert sizer.size().max_records == 1


def test_stuck_when_a_whole_lock_passes_with_nothing_deliverable() -> None:
    sizer = FetchSizer(CEILING, 500, initial_bytes=MIB)
    # A fetch sent at 0 comes back at 20 s with a 15 s lock: its records' locks had ended.
    sizer.fetched(0.0, 20.0, MIB, 1000, lock_ms=15_000)
    assert sizer.stuck(14.0) == 0.0
    assert sizer.stuck(20.0) == 20.0  # stalled since the late fetch was sent
    # The next fetch, sent at 20 s, times out at 50 s: still stuck, since 0.
    sizer.timed_out(20.0)
    assert sizer.stuck(50.0) == 50.0
    # An answer within the lock delivers: not stuck any more.
    sizer.fetched(50.0, 52.0, 10_000, 10, lock_ms=15_000)
    assert sizer.stuck(52.0) == 0.0


def test_not_stuck_on_a_short_stall_or_an_empty_answer() -> None:
    sizer = FetchSizer(CEILING, 500)
    sizer.timed_out(0.0)  # no answer, but less than a lock ago
    assert sizer.stuck(29.0) == 0.0
    sizer.fetched(29.0, 29.5, 0, 0, lock_ms=30_000)  # nothing waiting at the broker
    assert sizer.stuck(100.0) == 0.0
    assert sizer.stalled_since is None


def test_one_answer_ahead_only_when_both_fit_in_the_lock() -> None:
    sizer = FetchSizer(CEILING, 500)
    # Rate unmeasured: no answer may wait behind the one being handed out.
    assert not sizer.overlap_fits(1)
    sizer.fetched(0.0, 0.01, 50_000, 500, lock_ms=10_000)
    sizer.handled(1.01, 100, backlog=True)
    sizer.handled(2.01, 100, backlog=True)  # 100 records/s
    # 100/s * 10 s * HANDLE_SHARE records fit: half of them held, as much again to come.
    fits = int(100 * 10 * HANDLE_SHARE)
    assert sizer.overlap_fits(fits // 2)
    assert not sizer.overlap_fits(fits // 2 + 1)
