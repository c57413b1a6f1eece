"""Handlers slower than the lock in the whole-client simulation
(:mod:`sharecon.testing.sim.client`).

A fraction of seeds with a ``process`` or ``gather`` member make their handler take 1.5
or 2.5 times the group's lock for some records, on their first delivery. On Kafka 4.2 and
later ``process()`` keeps the locks of the records its handlers hold (``keep_locks``,
RENEW answers, ``sharecon._share.lock_keeper``); on 4.1 it cannot, and the record is
delivered again when its lock ends.

What this module checks (docs/testing.md, "Handlers slower than the lock"):

* *S1, no attempt spent while a handler works* (4.2+): a record whose handler is still
  running is never delivered again (to any member), unless a fault (a cut, crash,
  restart, leader move, or an OAuth outage that ended a session) came in between.
* Invariants 2, 3 and 6 as everywhere: on 4.1 the record delivered again is handled
  (and accepted) elsewhere, the late answer is reported as a lost lock, not counted twice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

from sharecon._share.lock_keeper import LockKeeper

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["SlowPlan", "SlowWatch", "keeper_off"]

#: Share of seeds with slow handlers (of those with a process or gather member).
SHARE = 0.3


@dataclass(frozen=True, slots=True)
class SlowPlan:
    """One seed's slow handlers: which records (by index), how slow (times the lock)."""

    slow: frozenset[int]
    factor: float

    @classmethod
    def draw(cls, seed: int, records: int, styles: Sequence[str]) -> SlowPlan | None:
        """The plan of ``seed`` (``None``: no slow handlers in this schedule)."""
        rng = random.Random(seed * 32452843 + 0x510)
        if not any(s in ("process", "gather") for s in styles) or rng.random() >= SHARE:
            return None
        slow = frozenset(rng.sample(range(records), k=min(records, rng.randint(1, 3))))
        return cls(slow=slow, factor=rng.choice([1.5, 2.5]))

    def describe(self) -> str:
        return f"slow handlers: {len(self.slow)} records take {self.factor:g} x the lock"

    def allowance(self, lock: float) -> float:
        """Seconds invariant 2's bound grows by: every slow handler in turn (a worker of
        concurrency 1 runs them one after the other), and one lock more for the records
        whose locks ended in the buffer behind them (seed 5125 on 4.4)."""
        return len(self.slow) * self.factor * lock + lock


@dataclass(slots=True)
class SlowWatch:
    """S1: who handles what now, and whether a record came back while handled."""

    #: whether S1 is judged (the broker can renew locks: 4.2+)
    judged: bool
    #: whether a fault (lock-ending) happened in a time window
    disturbed: Callable[[float, float], bool]
    #: (partition, offset) -> (delivery, handed out at) of each slow handler running now
    #: (a record may have two: one whose lock a fault ended, and its next delivery's)
    running: dict[tuple[int, int], list[tuple[int, float]]] = field(default_factory=dict)
    #: slow handlers that ran to the end
    finished: int = 0

    def start(self, key: tuple[int, int], delivery: int, handed_at: float) -> tuple[int, float]:
        """A slow handler began on ``key``'s delivery handed out at ``handed_at``."""
        entry = (delivery, handed_at)
        self.running.setdefault(key, []).append(entry)
        return entry

    def end(self, key: tuple[int, int], entry: tuple[int, float]) -> None:
        held = self.running.get(key, [])
        if entry in held:
            held.remove(entry)
            self.finished += 1
        if not held:
            self.running.pop(key, None)

    def seen(self, key: tuple[int, int], delivery: int, now: float) -> str | None:
        """A record was handed out: the S1 violation, if a slow handler of an earlier
        delivery still runs and no fault came since that delivery was handed out."""
        if not self.judged:
            return None
        for held, since in self.running.get(key, ()):
            if delivery > held and not self.disturbed(since, now):
                return (
                    f"invariant S1: {key} delivered again (delivery {delivery}) while its "
                    f"handler had been working on delivery {held} for {now - since:.1f} s: "
                    "its lock was not kept"
                )
        return None


def keeper_off() -> Any:
    """Mutant ``keeper-off``: the lock keeper never renews (a handler slower than the
    lock loses its record, on 4.2+ too)."""

    def due(self: LockKeeper[Any], now: float, deadlines: Any) -> tuple[list[Any], list[Any]]:
        del self, now, deadlines
        return [], []

    return mock.patch.object(LockKeeper, "due", due)
