"""Jittered exponential backoff, pure, for every layer: reconnects, retries, heartbeats.

Rules of this module:

1. Pure: no clock and no sleeping. ``delay(attempt)`` says how long; the caller waits.
   So the sans-I/O layers (``_share``) and the I/O layers may both import it.
2. The random source is injected so tests are deterministic.
3. Every delay is capped by ``maximum``, so a retry loop bounded by a deadline stays bounded
   however many attempts it makes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon import errors

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["RECONNECT_BACKOFF", "RETRY_BACKOFF", "Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """``initial * multiplier**attempt`` seconds, jittered by ``±jitter``, at most ``maximum``.

    :param initial: the first delay (attempt 0).
    :param maximum: no delay is longer than this.
    :param multiplier: growth per attempt (>= 1).
    :param jitter: relative spread in ``[0, 1)``; 0.2 means each delay is scaled by 0.8-1.2,
        so many clients restarting together do not reconnect in lockstep.
    :param rand: a source of floats in ``[0, 1)``.
    """

    initial: float = 0.05
    maximum: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rand: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise errors.ConfigError(
                f"backoff needs 0 < initial <= maximum, got {self.initial} and {self.maximum}"
            )
        if self.multiplier < 1:
            raise errors.ConfigError(f"backoff multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise errors.ConfigError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        # Cap the exponent so huge attempt counts cannot overflow the float.
        base = self.initial * self.multiplier ** min(attempt, 64)
        if self.jitter:
            base *= 1.0 - self.jitter + 2.0 * self.jitter * self.rand()
        return min(base, self.maximum)


#: Between connection attempts to one broker, and between bootstrap rounds
#: (the Java client's reconnect.backoff.ms 50 ms .. reconnect.backoff.max.ms 1 s).
RECONNECT_BACKOFF = Backoff(initial=0.05, maximum=1.0)
#: Between retries of a request that failed retriably (retry.backoff.ms 100 ms .. 1 s).
RETRY_BACKOFF = Backoff(initial=0.1, maximum=1.0)
