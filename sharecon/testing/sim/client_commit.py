"""``commit()`` in the whole-client simulation (:mod:`sharecon.testing.sim.client`).

In a share of the seeds with an ``iter`` or ``explicit`` member, the application calls
``await consumer.commit()`` after every few records it answers (1, 3 or 7, drawn per
seed): the explicit member after its ``accept()``, ``release()`` or ``reject()``, the
implicit one with the record in hand (``commit()`` accepts the records delivered so far
first). A commit that times out while a fault acts is the documented
``KafkaTimeoutError``, which the application catches and goes on.

What this module checks (docs/testing.md, "commit()"):

* *C1, a commit answers in time*: when no fault (a cut, crash, restart, leader move, a
  transport fault, the token endpoint's outage) came from :data:`QUIET_BEFORE` seconds
  before it to its end, ``commit()`` returns within :data:`BOUND` virtual seconds and
  does not raise.
* *C2, nothing is left unsent*: when ``commit()`` returns, every answer the member gave
  before it, to a record whose lock the consumer still counted as lasting, has reached
  the broker: the broker no longer holds that delivery for the member under a live lock
  (again when no fault came in between).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

from sharecon._consumer.core import ConsumerCore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["BOUND", "QUIET_BEFORE", "CommitPlan", "CommitWatch", "commit_early", "commit_waits"]

#: Share of seeds whose ``iter`` and ``explicit`` members commit (of those with one).
SHARE = 0.3
#: C1: a commit with no fault near it returns within this many virtual seconds: a
#: long poll in flight on the member's session ends first (``max_wait_ms``, 0.5 s by
#: default), then the acknowledgements go and are answered; four times that to spare.
BOUND = 2.0
#: C1 and C2 judge a commit only when no fault came this long before it (the request
#: timeout of the schedules' clients: a request sent before a fault may be answered
#: only then).
QUIET_BEFORE = 10.0


@dataclass(frozen=True, slots=True)
class CommitPlan:
    """One seed's commits: after how many answered records an application commits."""

    every: int

    @classmethod
    def draw(cls, seed: int, styles: Sequence[str]) -> CommitPlan | None:
        """The plan of ``seed`` (``None``: no commits in this schedule)."""
        rng = random.Random(seed * 15485863 + 0xC0317)
        if not any(s in ("iter", "explicit") for s in styles) or rng.random() >= SHARE:
            return None
        return cls(every=rng.choice((1, 3, 7)))

    def describe(self) -> str:
        return f"commits: iter and explicit members commit every {self.every} records"


#: What C2 remembers of one answered record: (partition, offset), its delivery count,
#: and the lock deadline the consumer gave it (on the virtual clock).
Answered = tuple[tuple[int, int], int, float]


@dataclass(slots=True)
class CommitWatch:
    """C1 and C2 for every member's commits."""

    plan: CommitPlan
    #: whether a fault came between two times (the schedule's own judgement)
    disturbed: Callable[[float, float], bool]
    #: the broker's lock on a record now: (member id, delivery count, deadline), if held
    lock_of: Callable[[int, int], tuple[str, int, float] | None]
    #: member index -> the records it answered since its last commit
    pending: dict[int, list[Answered]] = field(default_factory=dict)
    #: commits that returned; judged by C1 and C2; timed out during a fault
    commits: int = 0
    judged: int = 0
    timed_out: int = 0
    #: the longest judged commit (virtual seconds)
    longest: float = 0.0

    def answered(self, index: int, key: tuple[int, int], delivery: int, deadline: float) -> bool:
        """Member ``index`` answered a record; whether it commits now."""
        mine = self.pending.setdefault(index, [])
        mine.append((key, delivery, deadline))
        return len(mine) >= self.plan.every

    def returned(self, index: int, member_id: str, start: float, end: float) -> str | None:
        """A commit of member ``index`` ran from ``start`` to ``end`` and returned: the
        violation of C1 or C2, if any."""
        self.commits += 1
        answered = self.pending.pop(index, [])
        if self.disturbed(start - QUIET_BEFORE, end):
            return None
        self.judged += 1
        took = end - start
        self.longest = max(self.longest, took)
        if took > BOUND:
            return (
                f"invariant C1: member {index}'s commit() took {took:.2f} s with no fault"
                f" near it (bound {BOUND:g} s)"
            )
        for key, delivery, deadline in answered:
            if deadline <= end:
                continue  # the consumer counted the lock as ended: the answer was refused
            lock = self.lock_of(*key)
            if lock is not None and lock[0] == member_id and lock[1] == delivery and lock[2] > end:
                return (
                    f"invariant C2: member {index}'s commit() returned at {end:.2f}, but the"
                    f" broker still holds {key} (delivery {delivery}) for it under a live"
                    " lock: the answer given before the commit never reached the broker"
                )
        return None

    def timed_out_at(self, index: int, start: float, end: float) -> str | None:
        """A commit of member ``index`` raised KafkaTimeoutError: the C1 violation, unless
        a fault came near it."""
        self.pending.pop(index, None)
        if self.disturbed(start - QUIET_BEFORE, end):
            self.timed_out += 1
            return None
        return (
            f"invariant C1: member {index}'s commit() timed out after {end - start:.2f} s"
            " with no fault near it"
        )


# The two mutants patch ConsumerCore.pending_acks, which commit() (pure Python in both
# builds) calls: in the compiled build a compiled caller calls a compiled method directly,
# past any patch, so patching the machine's would plant nothing there.


def commit_waits() -> Any:
    """Mutant ``commit-waits``: the consumer always says answers are pending, so a commit
    waits for its whole timeout (as the survivor of the mutation sample, ``pending_acks``
    inverted, had it whenever nothing was marked)."""
    return mock.patch.object(ConsumerCore, "pending_acks", lambda self: True)


def commit_early() -> Any:
    """Mutant ``commit-early``: the consumer never says answers are pending, so a commit
    returns before its answers were sent."""
    return mock.patch.object(ConsumerCore, "pending_acks", lambda self: False)
