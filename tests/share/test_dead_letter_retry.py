"""sharecon._share.dead_letter_retry: a failed dead-letter copy is tried again while the
record's lock lasts, released only when it cannot be."""

from __future__ import annotations

from sharecon._share.dead_letter_retry import LOCK_MARGIN, RETRY_BACKOFF, retry_in, stub_next


def test_a_failed_copy_is_tried_again_with_a_growing_wait() -> None:
    waits = [retry_in(n, 0.0, 1000.0) for n in range(1, 7)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]  # doubling, capped at 5 s


def test_released_when_the_next_attempt_would_outlast_the_lock() -> None:
    # 2.0 s wait + 1.0 s margin reaches a lock ending at 3.0: release now.
    assert retry_in(3, 0.0, 3.0) is None
    assert retry_in(3, 0.0, 3.0 + 1e-6) == 2.0
    assert retry_in(1, 10.0, 10.0 + 0.5 + LOCK_MARGIN) is None


def test_an_unknown_lock_or_a_failure_that_cannot_pass_releases_at_once() -> None:
    assert retry_in(1, 0.0, None) is None
    assert retry_in(1, 0.0, 1000.0, may_pass=False) is None


def test_a_refusal_costs_at_most_one_delivery_per_lock() -> None:
    """Retrying from a fresh 30 s lock: every attempt before the release happens inside
    that lock, so the record is released (a delivery spent) once for the whole lock."""
    now, failures, lock = 0.0, 0, 30.0
    while (wait := retry_in(failures + 1, now, lock)) is not None:
        failures += 1
        now += wait
        assert now + LOCK_MARGIN < lock
    assert failures >= 6
    assert RETRY_BACKOFF.maximum + LOCK_MARGIN >= lock - now  # released near the end


def test_a_copy_that_never_fits_is_followed_once_by_a_stub() -> None:
    """Rule 4: a stub after a whole copy that never fits, while the record is held; a stub
    that fails too, or any other failure, is not followed by another stub."""
    assert stub_next(never_fits=True, stubbed=False, held=True)
    assert not stub_next(never_fits=True, stubbed=True, held=True)
    assert not stub_next(never_fits=True, stubbed=False, held=False)
    assert not stub_next(never_fits=False, stubbed=False, held=True)
