"""OAUTHBEARER tokens: whether a failure to get one can heal, and when to ask again. Pure.

The token providers (``_net/oauth.py``) do the HTTP; every decision about it is here, with
the time passed in, so it is unit-tested without an endpoint or a clock.

Rules of this module:

1. Pure: no clock, no I/O, no logging. ``now`` is passed in (Unix seconds, as token
   expiry times are); the random source is injected.
2. A failure is :attr:`TokenFailure.TRANSIENT` when waiting can help: the endpoint could
   not be reached or timed out, or answered 5xx, 408 or 429. Any other answer that is not
   a token (401 ``invalid_client``, 400 ``invalid_scope`` or ``unsupported_grant_type``, a
   200 with no usable token) is :attr:`TokenFailure.PERMANENT`: the same request gets the
   same answer, so it is raised at once and never waited out.
3. A token is used until :data:`REFRESH_RATIO` of its life (jittered) has passed; then a new
   one is fetched. While a refresh fails and the current token is still valid, the current
   token is used and the refresh is tried again soon (at most every
   :data:`VALID_RETRY_MAX` seconds, sooner near expiry).
4. With no valid token, a transient failure holds further fetches back for a capped,
   growing wait (:data:`HOLD_BACKOFF`, at most 5 s): the many connections of a client that
   all need a token then fail fast together instead of each hammering a struggling endpoint.
   The hold never outlasts its cap, so a client reaches the endpoint again within
   :data:`HOLD_BACKOFF` ``.maximum`` seconds of its coming back. A success ends the hold.
5. A token the broker refused is *stale*, not wrong, when by the refusal it is within
   :data:`EXPIRY_MARGIN` of its expiry or past it (:func:`expired_by`): it was valid when
   sent and expired on the way (a stall, a slow link). That refusal heals with the next
   login, which gets a new token; any other refusal of a token is the credentials' and
   is raised as it is.
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon._backoff import Backoff

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "EXPIRY_MARGIN",
    "HOLD_BACKOFF",
    "REFRESH_RATIO",
    "VALID_RETRY_MAX",
    "Step",
    "TokenFailure",
    "TokenSchedule",
    "classify_status",
    "expired_by",
]

#: When a token is refreshed: this share of its lifetime, times a jitter factor.
REFRESH_RATIO = 0.8
_REFRESH_JITTER = (0.95, 1.05)
#: A token this close to its expiry (seconds) no longer counts as valid: a login with it
#: could reach the broker after it expired.
EXPIRY_MARGIN = 1.0
#: Most seconds between refresh attempts while a still-valid token is in use.
VALID_RETRY_MAX = 5.0
#: How long fetches are held back after a transient failure with no valid token (rule 4).
HOLD_BACKOFF = Backoff(initial=0.5, maximum=5.0)
# HTTP statuses that say "not now" rather than "not you".
_TRANSIENT_STATUS = frozenset({408, 429})


class TokenFailure(enum.Enum):
    """Whether a failure to get a token can heal by waiting (rule 2)."""

    TRANSIENT = "transient"
    PERMANENT = "permanent"


class Step(enum.Enum):
    """What a provider does when asked for a token."""

    #: Return the cached token: it is not due for refresh.
    USE = "use"
    #: Ask the endpoint (refresh due, or no token yet, or the hold ended).
    FETCH = "fetch"
    #: Do not ask: a transient failure's hold is on and no valid token is cached; fail
    #: with the last failure at once.
    HOLD = "hold"


def expired_by(expires_at: float, now: float) -> bool:
    """Whether a token valid until ``expires_at`` counts as expired at ``now`` (rules 3 and
    5: within :data:`EXPIRY_MARGIN` of its expiry, or past it)."""
    return now >= expires_at - EXPIRY_MARGIN


def classify_status(status: int) -> TokenFailure | None:
    """None for 200 (a token, to be read); otherwise whether the failure can heal."""
    if status == 200:
        return None
    if status >= 500 or status in _TRANSIENT_STATUS:
        return TokenFailure.TRANSIENT
    return TokenFailure.PERMANENT


@dataclass(slots=True)
class TokenSchedule:
    """When a provider fetches, uses its cached token, or holds back (rules 3 and 4).

    :param hold: the wait after each transient failure without a valid token.
    :param rand: a source of floats in ``[0, 1)`` for the refresh jitter.
    """

    hold: Backoff = HOLD_BACKOFF
    rand: Callable[[], float] = field(default=random.random, repr=False)
    #: Expiry (Unix seconds) of the cached token; None before the first.
    expires_at: float | None = None
    #: When the cached token is due for refresh.
    refresh_at: float = -math.inf
    #: No fetch before this, unless a valid token is cached (rule 4).
    hold_until: float = -math.inf
    #: Transient failures in a row without a valid token (sizes the hold).
    failures: int = 0

    def valid(self, now: float) -> bool:
        """A cached token is valid at ``now`` (with :data:`EXPIRY_MARGIN` to spare)."""
        return self.expires_at is not None and now < self.expires_at - EXPIRY_MARGIN

    def step(self, now: float) -> Step:
        """What to do when asked for a token at ``now``."""
        if self.expires_at is not None and now < self.refresh_at:
            return Step.USE
        if not self.valid(now) and now < self.hold_until:
            return Step.HOLD
        return Step.FETCH

    def fetched(self, now: float, expires_at: float) -> None:
        """A new token, valid until ``expires_at``, came at ``now``."""
        lifetime = max(expires_at - now, 0.0)
        low, high = _REFRESH_JITTER
        jitter = low + (high - low) * self.rand()
        self.expires_at = expires_at
        self.refresh_at = now + lifetime * REFRESH_RATIO * jitter
        self.hold_until = -math.inf
        self.failures = 0

    def failed(self, now: float, kind: TokenFailure) -> bool:
        """A fetch at ``now`` failed; True when the cached token is still to be used.

        False means the failure is the caller's answer: raise it.
        """
        if self.valid(now):
            assert self.expires_at is not None
            # Rule 3: keep the token, try again soon (sooner as expiry nears).
            self.refresh_at = now + min(VALID_RETRY_MAX, (self.expires_at - now) / 4)
            return True
        if kind is TokenFailure.TRANSIENT:
            self.hold_until = now + self.hold.delay(self.failures)
            self.failures += 1
        else:
            # Rule 2: nothing to wait out; the next ask asks again (the settings may change
            # only by a new provider, so it gets the same answer, promptly).
            self.hold_until = -math.inf
        return False

    def retry_in(self, now: float) -> float:
        """Seconds until the hold ends (0 when none is on)."""
        return max(self.hold_until - now, 0.0)
