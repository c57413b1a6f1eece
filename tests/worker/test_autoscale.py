"""The autoscaling rule, without processes or a broker: samples in, decisions out."""

from __future__ import annotations

import pytest

from sharecon import errors
from sharecon.worker._autoscale import AutoscalePolicy, Autoscaler, Sample, parse_range

POLICY = AutoscalePolicy(
    minimum=1,
    maximum=3,
    busy_high=0.8,
    busy_low=0.2,
    backlog_high=100,
    backlog_low=10,
    up_after=2.0,
    down_after=5.0,
    cooldown=10.0,
)


def feed(
    scaler: Autoscaler, start: float, end: float, processes: int, busy: float, backlog: int | None
) -> list[tuple[float, int]]:
    """Samples every 0.5 s from ``start`` to ``end``; the process count follows the
    decisions. Returns (time, new count) of each change."""
    changes = []
    t = start
    while t <= end:
        d = scaler.observe(Sample(t, processes, busy, backlog))
        if d is not None:
            assert d.current == processes
            processes = d.target
            changes.append((t, processes))
        t += 0.5
    return changes


def test_busy_with_a_growing_backlog_adds_one_process_per_cooldown() -> None:
    scaler = Autoscaler(POLICY)
    changes = feed(scaler, 0.0, 30.0, 1, 1.0, 500)
    # After up_after (2 s), then one per cool-down (10 s), never above the maximum.
    assert changes == [(2.0, 2), (12.0, 3)]


def test_idle_with_no_backlog_removes_down_to_the_minimum() -> None:
    scaler = Autoscaler(POLICY)
    changes = feed(scaler, 0.0, 40.0, 3, 0.0, 0)
    assert changes == [(5.0, 2), (15.0, 1)]


def test_a_falling_backlog_does_not_scale_up() -> None:
    scaler = Autoscaler(POLICY)
    backlog = 10_000
    for i in range(100):
        assert scaler.observe(Sample(i * 0.5, 1, 1.0, backlog)) is None
        backlog -= 50


def test_a_load_between_the_thresholds_moves_nothing() -> None:
    scaler = Autoscaler(POLICY)
    assert feed(scaler, 0.0, 60.0, 2, 0.5, 500) == []
    # Busy but no backlog to speak of: nothing to gain from another process.
    assert feed(scaler, 60.0, 120.0, 2, 1.0, 50) == []
    # Idle but a backlog: the lag is not served yet (assignment), keep them.
    assert feed(scaler, 120.0, 180.0, 2, 0.0, 50) == []


def test_a_broken_window_starts_again() -> None:
    scaler = Autoscaler(POLICY)
    t = 0.0
    for _ in range(3):  # busy 1.5 s, then one quiet sample: never 2 s in a row
        for _ in range(3):
            assert scaler.observe(Sample(t, 1, 1.0, 500)) is None
            t += 0.5
        assert scaler.observe(Sample(t, 1, 0.5, 500)) is None
        t += 0.5
    assert scaler.observe(Sample(t, 1, 1.0, 500)) is None
    d = scaler.observe(Sample(t + 2.0, 1, 1.0, 500))
    assert d is not None and d.target == 2


def test_cooldown_holds_back_the_opposite_change_too() -> None:
    scaler = Autoscaler(POLICY)
    assert feed(scaler, 0.0, 2.0, 1, 1.0, 500) == [(2.0, 2)]
    # The load stops at once: idle from 2.5 s on, but nothing before the cool-down ends.
    changes = feed(scaler, 2.5, 30.0, 2, 0.0, 0)
    assert changes == [(12.0, 1)]


def test_an_unknown_backlog_leaves_the_decision_to_busyness() -> None:
    scaler = Autoscaler(POLICY)
    assert feed(scaler, 0.0, 3.0, 1, 1.0, None) == [(2.0, 2)]
    scaler = Autoscaler(POLICY)
    assert feed(scaler, 0.0, 6.0, 2, 0.0, None) == [(5.0, 1)]


def test_out_of_range_counts_are_corrected_at_once() -> None:
    scaler = Autoscaler(POLICY)
    d = scaler.observe(Sample(0.0, 5, 0.5, 0))
    assert d is not None and (d.current, d.target) == (5, 3) and "maximum" in d.reason
    # Even during the cool-down that change started.
    d = scaler.observe(Sample(1.0, 0, 0.5, 0))
    assert d is not None and d.target == 1 and "minimum" in d.reason


def test_each_decision_says_why() -> None:
    scaler = Autoscaler(POLICY)
    d = None
    t = 0.0
    while d is None:
        d = scaler.observe(Sample(t, 1, 0.9, 1234))
        t += 0.5
    assert d.reason == "handlers 90% busy and backlog 1,234 not falling for 2.0 s"


@pytest.mark.parametrize(
    ("text", "expected"), [("1:4", (1, 4)), ("2:2", (2, 2)), (" 1 : 8 ", (1, 8))]
)
def test_parse_range(text: str, expected: tuple[int, int]) -> None:
    assert parse_range(text) == expected


@pytest.mark.parametrize("text", ["4", "0:2", "3:2", "a:b", "1:", ":4", "-1:2"])
def test_parse_range_refuses(text: str) -> None:
    with pytest.raises(errors.ConfigError, match="MIN:MAX"):
        parse_range(text)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"minimum": 0, "maximum": 2},
        {"minimum": 3, "maximum": 2},
        {"minimum": 1, "maximum": 2, "busy_low": 0.8, "busy_high": 0.8},
        {"minimum": 1, "maximum": 2, "backlog_low": 10, "backlog_high": 5},
        {"minimum": 1, "maximum": 2, "cooldown": -1.0},
    ],
)
def test_policy_refuses_inconsistent_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(errors.ConfigError, match="autoscale"):
        AutoscalePolicy(**kwargs)  # type: ignore[arg-type]


def feed_growing(
    scaler: Autoscaler, start: float, end: float, processes: int, busy: float, step: int
) -> list[tuple[float, int]]:
    """As :func:`feed`, with a backlog from 500 changing by ``step`` a sample."""
    changes = []
    t, backlog = start, 500
    while t <= end:
        d = scaler.observe(Sample(t, processes, busy, backlog))
        if d is not None:
            processes = d.target
            changes.append((t, processes))
        t += 0.5
        backlog += step
    return changes


def test_a_growing_backlog_with_idle_handlers_adds_processes() -> None:
    # Handlers 10 % busy (each process holds few records: a tiny --max-records) while the
    # backlog grows: more fetching is needed, so up after up_after, one per cool-down.
    scaler = Autoscaler(POLICY)
    assert feed_growing(scaler, 0.0, 30.0, 1, 0.1, 40) == [(2.0, 2), (12.0, 3)]


def test_growth_that_says_why() -> None:
    scaler = Autoscaler(POLICY)
    d = None
    t, backlog = 0.0, 1000
    while d is None:
        d = scaler.observe(Sample(t, 1, 0.125, backlog))
        t += 0.5
        backlog += 100
    assert d.reason == (
        "backlog growing from 1,000 to 1,400 in 2.0 s with handlers only 12% busy "
        "(more fetching needed)"
    )


def test_a_backlog_that_only_holds_steady_or_falls_adds_nothing_when_idle() -> None:
    scaler = Autoscaler(POLICY)
    assert feed_growing(scaler, 0.0, 30.0, 1, 0.1, 0) == []  # steady: keeping up
    assert feed_growing(scaler, 30.0, 60.0, 1, 0.1, -5) == []  # falling: catching up


def test_any_fall_starts_the_growth_window_again() -> None:
    scaler = Autoscaler(POLICY)
    t, backlog = 0.0, 500
    for _ in range(5):  # grows 1.5 s, then one sample lower: never 2 s of growth
        for _ in range(3):
            assert scaler.observe(Sample(t, 1, 0.1, backlog)) is None
            t += 0.5
            backlog += 50
        backlog -= 60
        assert scaler.observe(Sample(t, 1, 0.1, backlog)) is None
        t += 0.5
    # Equal samples (the backlog is read less often than sampled) do not break it.
    for _ in range(4):
        assert scaler.observe(Sample(t, 1, 0.1, backlog)) is None
        t += 0.5
    d = scaler.observe(Sample(t, 1, 0.1, backlog + 1))
    assert d is not None and d.target == 2


def test_growth_below_the_backlog_threshold_or_unknown_adds_nothing() -> None:
    scaler = Autoscaler(POLICY)
    t, backlog = 0.0, 0
    for _ in range(40):  # grows, but never above backlog_high (100)
        assert scaler.observe(Sample(t, 1, 0.1, backlog)) is None
        t += 0.5
        backlog += 2
    assert feed(scaler, t, t + 30.0, 1, 0.1, None) == []


def test_growth_keeps_the_cooldown_and_the_maximum() -> None:
    scaler = Autoscaler(POLICY)
    assert feed(scaler, 0.0, 2.0, 1, 1.0, 500) == [(2.0, 2)]  # busy: up at 2 s
    # Then idle handlers and a growing backlog: the next change waits for the cool-down.
    assert feed_growing(scaler, 2.5, 40.0, 2, 0.1, 40) == [(12.0, 3)]
