"""Partitions without a leader for a while in the whole-client simulation
(:mod:`sharecon.testing.sim.client`).

A fraction of seeds take one partition's leader away for 1 to 15 virtual seconds, as while
the broker that led it shuts down and no other can take over: Metadata names no leader for
it (LEADER_NOT_AVAILABLE, under a new leader epoch), fetches and acknowledgements of it are
answered NOT_LEADER_OR_FOLLOWER naming none, and its acquisitions are forgotten
(``FakeKafka.withdraw_leader``). Then a leader is elected again (``restore_leader``).

What it checks (docs/testing.md, "Partitions without a leader"): the invariants every
schedule has, with the window counted as a fault: nothing raised (1), every record handled
or archived by the policy (2, 3), and, once the leader is back, no member with a free
worker left without a record while its partitions have records waiting (6, within
``STALL``). The consumer must look for the leader again by itself
(:mod:`sharecon._share.leader_search`): the periodic metadata refresh (5 minutes) is past
the schedule's end. ``--mutant leader-search-off`` stops it looking.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any
from unittest import mock

from sharecon._consumer.fetcher import FetcherPool

__all__ = ["LeaderPlan", "search_off"]

#: Share of seeds with a partition left without a leader.
SHARE = 0.25


@dataclass(frozen=True, slots=True)
class LeaderPlan:
    """One seed's leaderless window: which partition, from when, for how long."""

    partition: int
    at: float
    down: float

    @classmethod
    def draw(cls, seed: int, partitions: int) -> LeaderPlan | None:
        """The plan of ``seed`` (``None``: every partition keeps its leader), from a random
        source of its own, so every other draw of the seed stays as it was."""
        rng = random.Random(seed * 15485863 + 0x1EAD)
        if rng.random() >= SHARE:
            return None
        return cls(
            partition=rng.randrange(partitions),
            at=round(rng.uniform(0.5, 20.0), 3),
            down=rng.choice([1.0, 4.0, 15.0]),
        )

    @property
    def heals_at(self) -> float:
        """When a leader is elected again (schedule seconds)."""
        return self.at + self.down

    def describe(self) -> str:
        return f"no leader for partition {self.partition} from {self.at:g} s for {self.down:g} s"


def search_off() -> Any:
    """Mutant ``leader-search-off``: the consumer never looks for a missing leader again
    (what it did before the fix: only the periodic refresh, 5 minutes later, found it)."""

    async def nothing(self: FetcherPool) -> None:
        self._searching = False

    return mock.patch.object(FetcherPool, "_search_leaders", nothing)
