"""Which held records need their acquisition lock renewed now (sans-I/O, time passed in).

A record handed to the application stays locked for this member until its lock ends
(``share.record.lock.duration.ms``); a handler slower than that loses it and the record is
delivered again elsewhere. Kafka 4.2 added RENEW answers that restart the lock. The keeper
tracks records handed out and not yet answered, and says which to renew: those whose lock
ends within a margin (a third of the lock they had when handed out, at least
``min_margin`` seconds). It stops renewing a record ``max_hold`` seconds after it was
handed out, so a stuck handler cannot hold a record forever.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LockKeeper"]

K = TypeVar("K", bound=Hashable)


class LockKeeper(Generic[K]):
    """Tracks held records (any hashable key) and picks the ones to renew.

    :param max_hold: seconds after hand-out when renewing stops.
    :param min_margin: renew at least this long before the lock ends.
    """

    __slots__ = ("_held", "max_hold", "min_margin")

    def __init__(self, max_hold: float, *, min_margin: float = 1.0) -> None:
        if max_hold <= 0:
            raise ValueError(f"max_hold must be > 0, not {max_hold}")
        self.max_hold = max_hold
        self.min_margin = min_margin
        # key -> (handed out at, margin)
        self._held: dict[K, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, key: K, now: float, deadline: float | None) -> None:
        """``key`` was handed to the application at ``now``; its lock ends at ``deadline``."""
        remaining = (deadline - now) if deadline is not None else 0.0
        self._held[key] = (now, max(self.min_margin, remaining / 3))

    def drop(self, key: K) -> None:
        """``key`` was answered (or its lock was lost): nothing more to keep."""
        self._held.pop(key, None)

    def keys(self) -> list[K]:
        """Every record held now."""
        return list(self._held)

    def due(self, now: float, deadlines: dict[K, float | None]) -> tuple[list[K], list[K]]:
        """Which held records to renew now, and which were held ``max_hold`` seconds and
        are given up (dropped: their locks end as the broker set them).

        :param deadlines: the current lock deadline of each held record (``None``: unknown,
            never renewed).
        """
        renew: list[K] = []
        given_up: list[K] = []
        for key, (since, margin) in list(self._held.items()):
            if now - since >= self.max_hold:
                given_up.append(key)
                del self._held[key]
                continue
            deadline = deadlines.get(key)
            if deadline is not None and deadline - now <= margin:
                renew.append(key)
        return renew, given_up
