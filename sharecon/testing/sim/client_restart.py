"""A member that closes in the middle of the schedule and opens again, and the count of
the delivery attempts spent where no application saw them, in the whole-client
simulation (:mod:`sharecon.testing.sim.client`).

A fraction of seeds (``SHARE``) make one member leave its loop at the first moment from
a time in the first 20 virtual seconds on when its consumer has records buffered (or 5 s
later, when it has none), by cancelling it as an application's timeout would (whatever it
was
waiting for, a record, a handler, a dead-letter write), close its consumer with whatever
it holds and buffers, and open a new one in the same group, which runs to the end. Not
with handlers slower than the lock or transport faults (their own bounds on spent
attempts, sim.client_slow and N4, count no restart), nor with the token endpoint's
outage (a consumer opened while it is down cannot log in, and its start fails with
``BrokerConnectError``, as documented for a new client).

What it checks (docs/testing.md, invariant 8), in every schedule, with a restart or
without: **every delivery attempt spent unseen is counted.** The broker's model logs each
record a member's acknowledgement released (``ModelBroker.release_log``) with its delivery
count; a release of a delivery that member's application was never handed spent an
attempt nobody saw, and the member must count it in what ``health()`` reports
(``released_unseen``, or ``released_unreachable`` for records released because they could
not be reached within their locks). Records past the dead-letter limit are the router's
and are left out (it reports its failures itself). And the other way, for the consumer a
restart closed with no fault acting around its close: what it counted released at the
close reached the broker (the close's answers went out, though the cancellation that
ended its loop came from a scope around it).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["RestartPlan", "UnseenWatch"]

#: Share of seeds with a member that closes and opens again.
SHARE = 0.3


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """One seed's restart: which member, and when it leaves its loop."""

    member: int
    at: float

    #: Seconds after :attr:`at` the member leaves at the latest, with nothing buffered.
    FALLBACK = 5.0

    @classmethod
    def draw(cls, seed: int, members: int) -> RestartPlan | None:
        """The plan of ``seed`` (``None``: no member restarts), from a random source of its
        own, so every other draw of the seed stays as it was."""
        rng = random.Random(seed * 2750159 + 0xC105E)
        if rng.random() >= SHARE:
            return None
        return cls(member=rng.randrange(members), at=round(rng.uniform(1.0, 20.0), 3))

    @property
    def heals_at(self) -> float:
        """When the member has closed and begins to open again at the latest (schedule
        seconds; its close takes under a virtual second)."""
        return self.at + self.FALLBACK + 1.0

    def describe(self) -> str:
        return f"restart: member {self.member} closes at {self.at:g} s and opens again"


@dataclass(slots=True)
class UnseenWatch:
    """Invariant 8: what each consumer's application was handed, and the check."""

    #: (member id, partition, offset, delivery count) of every record handed out
    seen: set[tuple[str, int, int, int]] = field(default_factory=set)
    #: every consumer's core, once started (kept past its close: its counts stay)
    cores: list[Any] = field(default_factory=list)
    #: the consumer a restart closed with no fault acting around it, if any
    quiet_close: Any = None

    def handed(self, member_id: str, partition: int, offset: int, delivery_count: int) -> None:
        self.seen.add((member_id, partition, offset, delivery_count))

    def check(
        self,
        releases: Iterable[tuple[str, str, Any, int, int]],
        dead_letter_limit: int | None,
    ) -> str | None:
        """The first member whose count of attempts spent unseen falls short of what its
        acknowledgements released unseen at the broker (``releases``: the models' logs)."""
        unseen: Counter[str] = Counter()
        first: dict[str, tuple[int, int, int]] = {}
        for _group, member, tp, offset, count in releases:
            if dead_letter_limit is not None and count > dead_letter_limit:
                continue  # the dead-letter router's: it reports failed copies itself
            partition = tp[1]
            if (member, partition, offset, count) in self.seen:
                continue
            unseen[member] += 1
            first.setdefault(member, (partition, offset, count))
        for core in self.cores:
            member = core.member_id
            counted = core.machine.released_unseen + core.released_unreachable
            if core is self.quiet_close and unseen[member] < counted:
                return (
                    f"invariant 8: member {member[:8]}, closed by the restart with no fault"
                    f" acting, counts {counted} records released unseen, and"
                    f" {unseen[member]} such releases reached the broker"
                )
            if unseen[member] > counted:
                p, o, c = first[member]
                return (
                    f"invariant 8: member {member[:8]} released {unseen[member]} record(s)"
                    f" its application was never handed (first {(p, o)} on delivery {c}),"
                    f" and counts {counted} spent unseen"
                    f" (released_unseen {core.machine.released_unseen},"
                    f" released_unreachable {core.released_unreachable})"
                )
        return None
