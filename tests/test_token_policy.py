"""The OAUTHBEARER token decisions, pure: which failures heal, when to fetch, when to hold."""

from __future__ import annotations

import pytest

from sharecon._backoff import Backoff
from sharecon._token_policy import (
    EXPIRY_MARGIN,
    REFRESH_RATIO,
    VALID_RETRY_MAX,
    Step,
    TokenFailure,
    TokenSchedule,
    classify_status,
    expired_by,
)

T = TokenFailure.TRANSIENT
P = TokenFailure.PERMANENT


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, None),
        (500, T),
        (502, T),
        (503, T),
        (504, T),
        (408, T),
        (429, T),
        (400, P),  # invalid_scope, unsupported_grant_type, invalid_request
        (401, P),  # invalid_client
        (403, P),
        (404, P),  # a wrong token_url
    ],
)
def test_which_answers_heal(status: int, kind: TokenFailure | None) -> None:
    assert classify_status(status) is kind


def schedule() -> TokenSchedule:
    # No jitter in the refresh (rand 0.5 is the middle of 0.95-1.05), none in the hold.
    return TokenSchedule(hold=Backoff(initial=0.5, maximum=5.0, jitter=0.0), rand=lambda: 0.5)


def test_first_ask_fetches_then_the_token_is_used_until_refresh_is_due() -> None:
    s = schedule()
    assert s.step(1000.0) is Step.FETCH
    s.fetched(1000.0, 1100.0)
    assert s.step(1000.0 + 100 * REFRESH_RATIO - 0.1) is Step.USE
    assert s.step(1000.0 + 100 * REFRESH_RATIO + 0.1) is Step.FETCH


def test_a_valid_token_stands_in_while_refreshes_fail_and_is_retried_soon() -> None:
    s = schedule()
    s.fetched(0.0, 100.0)
    for kind in (T, P):
        assert s.failed(85.0, kind) is True  # 15 s left: keep using it
        assert s.refresh_at == 85.0 + min(VALID_RETRY_MAX, 15.0 / 4)
        assert s.step(85.0) is Step.USE
        assert s.hold_until < 0  # no hold while a valid token stands in
    assert s.failed(97.0, T) is True
    assert s.refresh_at == pytest.approx(97.0 + 3.0 / 4)  # sooner near expiry


def test_past_expiry_a_transient_failure_holds_fetches_back_for_a_growing_capped_wait() -> None:
    s = schedule()
    s.fetched(0.0, 100.0)
    now = 100.0 - EXPIRY_MARGIN  # no longer valid
    holds = []
    for _ in range(8):
        assert s.step(now) is Step.FETCH
        assert s.failed(now, T) is False  # the failure is the caller's answer
        holds.append(s.retry_in(now))
        assert s.step(now + holds[-1] - 0.01) is Step.HOLD  # fail fast, no request
        now += holds[-1]
    assert holds[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(holds) == 5.0  # capped: the endpoint is asked again within 5 s
    # The endpoint is back: the next fetch succeeds and ends the hold.
    s.fetched(now, now + 100.0)
    assert s.failures == 0 and s.retry_in(now) == 0.0 and s.step(now) is Step.USE


def test_a_permanent_failure_is_never_held_nor_waited_out() -> None:
    s = schedule()
    assert s.failed(0.0, P) is False
    assert s.step(0.0) is Step.FETCH and s.retry_in(0.0) == 0.0
    # Even after transient failures, a refusal clears the hold: the next ask is answered
    # by the endpoint, promptly, with the same refusal.
    s.failed(1.0, T)
    assert s.step(1.1) is Step.HOLD
    s.failed(1.1, P)
    assert s.step(1.2) is Step.FETCH


def test_no_token_yet_and_the_endpoint_down_holds_too() -> None:
    s = schedule()
    assert s.failed(0.0, T) is False
    assert s.step(0.1) is Step.HOLD
    assert s.step(0.5) is Step.FETCH


def test_a_token_within_the_margin_of_its_expiry_counts_as_expired() -> None:
    """Rule 5: a refused token this close to its expiry, or past it, is stale (it expired
    on the way); one further from it was refused for what it says."""
    assert expired_by(100.0, 100.0 - EXPIRY_MARGIN)
    assert expired_by(100.0, 250.0)
    assert not expired_by(100.0, 100.0 - EXPIRY_MARGIN - 0.01)
