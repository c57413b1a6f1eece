"""Jittered exponential backoff, as a pure function of the attempt number.

Rules of this module:

1. ``delay(attempt)`` is ``initial * multiplier**attempt``, scaled by a random factor in
   ``[1 - jitter, 1 + jitter)``, and never more than ``maximum``.
2. The random source is injected (a zero-argument callable returning ``[0, 1)``), so tests
   are deterministic. No clock, no sleeping: callers add the delay to their ``now``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """A jittered exponential backoff policy (seconds).

    The defaults follow the reference client's ``retry.backoff.ms`` (100 ms) and
    ``retry.backoff.max.ms`` (1000 ms), with 20% jitter.
    """

    initial: float = 0.1
    maximum: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rand: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff needs 0 < initial <= maximum, got {self.initial}, {self.maximum}"
            )
        if self.multiplier < 1:
            raise ValueError(f"backoff multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0 for the first retry)."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        # Cap the exponent so huge attempt counts cannot overflow the float.
        term = self.initial * self.multiplier ** min(attempt, 64)
        if self.jitter:
            term *= 1.0 - self.jitter + 2.0 * self.jitter * self.rand()
        return min(term, self.maximum)
