"""The dead-letter circuit breaker's decisions (sharecon._share.breaker), without a broker."""

from __future__ import annotations

import random

from sharecon._share.breaker import DeadLetterBreaker


def test_a_flood_opens_it_at_the_first_dead_letter_past_the_share() -> None:
    b = DeadLetterBreaker(0.5, 200, cooldown=60.0)
    opened = [i for i in range(1000) if b.outcome(True, now=0.0)]
    # The 101st dead letter opens it; nothing after is counted while it is open.
    assert opened == [100]
    assert b.trips == 1 and b.is_open(0.0)
    assert (
        b.reason
        == "101 of the last 101 records went to the dead-letter path (more than 50% of 200)"
    )


def test_dead_letters_below_the_share_never_open_it() -> None:
    b = DeadLetterBreaker(0.5, 200, cooldown=60.0)
    rng = random.Random(7)
    for _ in range(100_000):
        assert not b.outcome(rng.random() < 0.1, now=0.0)
    # Exactly half of a window is not more than half.
    b = DeadLetterBreaker(0.5, 10, cooldown=None)
    for i in range(100):
        assert not b.outcome(i % 2 == 0, now=0.0)


def test_old_outcomes_leave_the_window() -> None:
    b = DeadLetterBreaker(0.5, 10, cooldown=None)
    for _ in range(5):
        b.outcome(True, 0.0)
    for _ in range(10):
        b.outcome(False, 0.0)  # the five dead ones slide out
    assert not any(b.outcome(True, 0.0) for _ in range(5))
    assert b.outcome(True, 0.0)  # the sixth of the last ten


def test_cooldown_half_opens_and_a_still_bad_probe_opens_it_again_at_once() -> None:
    b = DeadLetterBreaker(0.5, 200, cooldown=30.0, probe=20)
    while not b.outcome(True, 0.0):
        pass
    assert b.is_open(29.9) and b.remaining(29.9) == 30.0 - 29.9
    assert not b.is_open(30.0) and b.is_half_open(30.0)
    opened = [i for i in range(100) if b.outcome(True, 31.0)]
    assert opened == [10]  # the 11th dead of a 20-record probe
    assert b.trips == 2 and b.opened_at == 31.0


def test_a_good_probe_closes_it() -> None:
    b = DeadLetterBreaker(0.5, 200, cooldown=1.0, probe=20)
    while not b.outcome(True, 0.0):
        pass
    assert not b.is_open(1.0)
    for i in range(20):
        assert not b.outcome(i < 10, 1.0)  # 10 of 20 dead: not more than half
    assert not b.is_half_open(1.0) and b.opened_at is None
    # Closed again: the full window judges (101 dead needed).
    assert [i for i in range(200) if b.outcome(True, 2.0)] == [100]


def test_without_cooldown_only_reset_closes_it() -> None:
    b = DeadLetterBreaker(0.5, 4, cooldown=None)
    while not b.outcome(True, 0.0):
        pass
    assert b.is_open(1e9) and b.remaining(1e9) is None
    b.reset()
    assert not b.is_open(1e9) and b.reason == "" and b.remaining(0.0) == 0.0
    assert not b.outcome(True, 1e9)  # an empty window again


def test_reading_it_changes_nothing_so_every_reader_sees_the_cool_down_end() -> None:
    # Looking (health(), the dead-letter job, a fetcher asking for room) is not a step:
    # any number of reads past the cool-down leave it half-open for the next reader.
    b = DeadLetterBreaker(0.5, 4, cooldown=1.0, probe=4)
    while not b.outcome(True, 0.0):
        pass
    before = (b.opened_at, b.trips, b.reason)
    for _ in range(3):
        assert not b.is_open(5.0) and b.is_half_open(5.0) and b.remaining(5.0) == 0.0
    assert (b.opened_at, b.trips, b.reason) == before
    assert b.is_open(0.5)  # an earlier clock still sees it open: nothing was moved on
    # The probe (4 outcomes) judges, not the window: the 3rd dead of 4 opens it again.
    assert [i for i in range(4) if b.outcome(True, 5.0)] == [2]
    assert b.trips == 2 and b.is_open(5.0)


def test_a_probe_judged_long_after_the_cool_down_still_uses_the_probe_size() -> None:
    b = DeadLetterBreaker(0.5, 200, cooldown=1.0, probe=20)
    while not b.outcome(True, 0.0):
        pass
    assert b.limit(0.5) == 101 and b.limit(100.0) == 11  # window while open, probe after


def test_holds_reads_the_clock_only_once_opened() -> None:
    b = DeadLetterBreaker(0.5, 4, cooldown=1.0, probe=2)
    read: list[float] = []

    def clock() -> float:
        read.append(0.0)
        return now

    now = 0.0
    assert not b.holds(clock) and read == []  # closed: no clock read
    while not b.outcome(True, now):
        pass
    assert b.holds(clock) and len(read) == 1
    now = 1.0  # the cool-down passed: half-open, records flow again
    assert not b.holds(clock)
    assert b.limit(now) == 2  # the probe's limit: floor(0.5 * 2) + 1
