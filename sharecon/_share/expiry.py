"""When to say that records' locks ended while they waited in a member's buffer.

Such a record cost a delivery attempt nobody saw (the broker counted it when it acquired
the record, and archives a record after ``share.delivery.count.limit`` of them), so it is
counted always and said at WARNING, at most once per :data:`EVERY` seconds, with the
count since the last warning and the cause: the member held more than it could handle
within the lock.

Rules of this module:

1. Every expiry is counted (:attr:`ExpiryNotice.total`).
2. The first expiry is said at once; later ones at most once per :data:`EVERY` seconds,
   each warning carrying the count since the previous one.
3. Nothing counted stays unsaid: expiries held back by rule 2 with none following are
   said at the first :meth:`ExpiryNotice.tick` once :data:`EVERY` seconds passed since
   the last warning (the consumer ticks at least every few seconds), and at close
   (:meth:`ExpiryNotice.flush`).
4. No I/O, no clock: time is the caller's ``now`` (seconds, monotonic).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EVERY", "ExpiryNotice", "ExpiryWarning"]

#: Seconds between two warnings (rule 2).
EVERY = 60.0


@dataclass(frozen=True, slots=True)
class ExpiryWarning:
    """What to say: ``count`` records expired since the last warning, ``total`` in all."""

    count: int
    total: int


class ExpiryNotice:
    """Counts records whose locks ended in the buffer and decides when to warn (rules 1-4)."""

    __slots__ = ("_last", "_unsaid", "total")

    def __init__(self) -> None:
        #: Records expired in the buffer, in all.
        self.total = 0
        self._unsaid = 0
        self._last: float | None = None

    def expired(self, now: float, count: int) -> ExpiryWarning | None:
        """``count`` records' locks ended in the buffer at ``now``: a warning to log, or
        ``None`` (one was logged less than :data:`EVERY` seconds ago)."""
        if count <= 0:
            return None
        self.total += count
        self._unsaid += count
        if self._last is not None and now - self._last < EVERY:
            return None
        return self._say(now)

    def tick(self, now: float) -> ExpiryWarning | None:
        """Time passed: the expiries held back since the last warning, if :data:`EVERY`
        seconds passed since it (rule 3); else ``None``."""
        if not self._unsaid or self._last is None or now - self._last < EVERY:
            return None
        return self._say(now)

    def flush(self) -> ExpiryWarning | None:
        """The consumer closes: whatever is still unsaid (rule 3), or ``None``."""
        if not self._unsaid:
            return None
        return self._say(self._last)  # no time passed in: the last warning's stays

    def _say(self, at: float | None) -> ExpiryWarning:
        """The warning for what is unsaid, said ``at`` (the time rule 2 counts from)."""
        said, self._unsaid, self._last = self._unsaid, 0, at
        return ExpiryWarning(said, self.total)
