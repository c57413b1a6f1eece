"""Delayed releases' decisions (sans-I/O, time passed in): renew while the delay runs,
release when it is over; and the public checks of ``release(delay=...)``."""

from __future__ import annotations

import math

import pytest

from sharecon import Backoff, DeadLetterPolicy, errors
from sharecon._share.delayed import DelayedReleases
from sharecon.record import Record, RecordedAcks, RetryLater
from sharecon.types import AckType


def test_renews_near_each_lock_end_until_the_release_is_due() -> None:
    d: DelayedReleases[str] = DelayedReleases(min_margin=1.0)
    d.add("a", now=0.0, delay=10.0, deadline=3.0)  # lock of 3 s: margin 1 s
    assert "a" in d and d.release_at("a") == 10.0
    assert d.due(1.0, {"a": 3.0}) == ([], [])
    assert d.due(2.0, {"a": 3.0}) == (["a"], [])  # within the margin: renew
    assert d.due(2.5, {"a": 5.0}) == ([], [])  # renewed: not yet
    assert d.due(4.0, {"a": 5.0}) == (["a"], [])
    # The lock outlasts the release time (rule 1): no renew, only the release when due.
    assert d.due(9.5, {"a": 11.0}) == ([], [])
    assert d.due(10.0, {"a": 11.0}) == ([], ["a"])
    assert "a" not in d and len(d) == 0
    assert d.due(20.0, {"a": 11.0}) == ([], [])  # released once only


def test_unknown_deadline_and_drop() -> None:
    d: DelayedReleases[str] = DelayedReleases()
    d.add("a", now=0.0, delay=5.0, deadline=None)
    d.add("b", now=0.0, delay=1.0, deadline=30.0)
    assert d.due(0.5, {"a": None, "b": 30.0}) == ([], [])  # nothing to renew by
    d.drop("a")
    d.drop("a")  # dropping twice is fine
    assert d.keys() == ["b"]
    assert d.due(1.0, {"b": 30.0}) == ([], ["b"])


def test_release_with_delay_is_recorded_and_checked() -> None:
    acks = RecordedAcks()
    record = Record.build("t", b"v", acks=acks)
    record.release(delay=2.5)
    assert acks.answer(record) is AckType.RELEASE and acks.delay(record) == 2.5
    with pytest.raises(errors.InvalidRecordStateError, match="already answered"):
        record.release(delay=1.0)
    plain = Record.build("t", b"v", acks=acks)
    plain.release()
    assert acks.delay(plain) is None
    for bad in (-1.0, math.nan, math.inf, "3", True):
        with pytest.raises(errors.ConfigError, match="delay"):
            Record.build("t", b"v", acks=RecordedAcks()).release(delay=bad)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidRecordStateError, match="without a consumer"):
        Record.build("t", b"v").release(delay=1.0)


def test_retry_later_and_the_policy_backoff() -> None:
    assert RetryLater(1.5).delay == 1.5
    with pytest.raises(errors.ConfigError, match="delay"):
        RetryLater(-1)
    policy = DeadLetterPolicy(
        max_deliveries=6, retry_backoff=Backoff(initial=1.0, maximum=5.0, jitter=0)
    )
    assert policy.retry_backoff is not None
    assert [policy.retry_backoff.delay(n - 1) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    with pytest.raises(errors.ConfigError, match="retry_backoff"):
        DeadLetterPolicy(retry_backoff=2.0)  # type: ignore[arg-type]


def test_wake_at_is_the_next_renew_or_the_release() -> None:
    d: DelayedReleases[str] = DelayedReleases(min_margin=1.0)
    d.add("r", 0.0, 60.0, 30.0)  # lock ends at 30, release at 60: renew 10 s before
    assert d.wake_at("r", 30.0) == 20.0
    assert d.wake_at("r", 70.0) == 60.0  # the lock outlasts the release
    assert d.wake_at("r", None) == 60.0
    assert d.wake_at("other", 30.0) is None
