"""The dead-letter circuit breaker: a poison flood stops instead of emptying the topic.

Rules of this module (sans-I/O; the time is passed in):

1. It counts final outcomes, one per record: accepted (``dead=False``) or sent to the
   dead-letter path (``dead=True``). Releases for another try are not outcomes: a record
   that fails and is tried again counts once, when it is finally done.
2. Closed, it keeps the last ``window`` outcomes and opens as soon as more than
   ``threshold`` of a whole window are dead (``dead > threshold * window``): with every
   record failing that is the ``floor(threshold * window) + 1``-th dead letter, so at most
   a window's worth goes to the dead-letter path before it opens.
3. Open, it refuses every record (the consumer hands none to the handler and fetches no
   more) until ``cooldown`` seconds passed (``None``: until :meth:`reset`). Outcomes of
   records already being handled when it opened are not counted.
4. After the cool-down it is half-open: the next ``probe`` outcomes decide. More than
   ``threshold`` of ``probe`` dead opens it again at once (so a deploy that is still bad
   dead-letters at most ``floor(threshold * probe) + 1`` records per cool-down); ``probe``
   outcomes without that close it.
5. :meth:`reset` closes it at once, with an empty window.
6. Its state is a function of the time passed in: :meth:`is_open`, :meth:`is_half_open`
   and :meth:`remaining` only read it (the cool-down ending changes nothing stored), so
   any reader (``health()``, the dead-letter job, a fetcher asking for room) sees the same
   answer and none of them can hide the end of the cool-down from another.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DeadLetterBreaker"]


@dataclass(slots=True)
class DeadLetterBreaker:
    """The breaker's state (rules 1-5).

    :param threshold: the share of dead outcomes past which it opens (0 < threshold < 1).
    :param window: how many of the latest outcomes are judged.
    :param cooldown: seconds it stays open, or ``None`` for until :meth:`reset`.
    :param probe: outcomes judged while half-open.
    """

    threshold: float
    window: int
    cooldown: float | None
    probe: int = 20
    #: When it last opened (the caller's clock), or None while closed. Past the cool-down
    #: it stays set: the breaker is then half-open until the probe decides (rule 4).
    opened_at: float | None = None
    #: How many times it opened.
    trips: int = 0
    #: Why it last opened ("" while closed).
    reason: str = ""
    _outcomes: deque[bool] = field(default_factory=deque)
    _dead: int = 0
    #: Dead outcomes at which it opens, closed and half-open (rules 2 and 4).
    _window_limit: int = field(init=False, repr=False)
    _probe_limit: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.probe = min(self.probe, self.window)
        self._window_limit = self._limit_of(self.window)
        self._probe_limit = self._limit_of(self.probe)

    def _limit_of(self, size: int) -> int:
        # More than threshold of a whole window: floor(threshold * size) + 1 (rule 2).
        return math.floor(self.threshold * size) + 1

    def limit(self, now: float) -> int:
        """Dead outcomes in the current window at which it opens."""
        return self._probe_limit if self.is_half_open(now) else self._window_limit

    def holds(self, clock: Callable[[], float]) -> bool:
        """Whether records are held back now (open, rule 3). The clock is read only once
        it has opened: while closed (the usual case, asked per record) this is one test."""
        return self.opened_at is not None and self.is_open(clock())

    def is_open(self, now: float) -> bool:
        """Whether records are refused at ``now`` (rule 3; reads only, rule 6)."""
        opened = self.opened_at
        if opened is None:
            return False
        return self.cooldown is None or now < opened + self.cooldown

    def is_half_open(self, now: float) -> bool:
        """Whether the cool-down passed and the probe has not decided yet (rule 4)."""
        return self.opened_at is not None and not self.is_open(now)

    def remaining(self, now: float) -> float | None:
        """Seconds until the cool-down ends (None: open until reset; 0: not open)."""
        if self.opened_at is None:
            return 0.0
        if self.cooldown is None:
            return None
        return max(0.0, self.opened_at + self.cooldown - now)

    def outcome(self, dead: bool, now: float) -> bool:
        """Count one record's final outcome; True when this opens the breaker (rule 1-4)."""
        if self.is_open(now):
            return False  # handled before it opened (rule 3)
        half_open = self.opened_at is not None  # and not open: the cool-down passed
        if half_open:
            size, limit = self.probe, self._probe_limit
        else:
            size, limit = self.window, self._window_limit
        self._outcomes.append(dead)
        self._dead += dead
        if len(self._outcomes) > size:
            self._dead -= self._outcomes.popleft()
        if self._dead >= limit:
            self.trips += 1
            self.opened_at = now
            self.reason = (
                f"{self._dead} of the last {len(self._outcomes)} records went to the "
                f"dead-letter path (more than {self.threshold:.0%} of {size})"
            )
            self._clear()
            return True
        if half_open and len(self._outcomes) >= size:
            self.reset()  # the probe passed: closed (rule 4)
        return False

    def reset(self) -> None:
        """Close it now, with an empty window (rule 5)."""
        self.opened_at, self.reason = None, ""
        self._clear()

    def _clear(self) -> None:
        self._outcomes.clear()
        self._dead = 0
