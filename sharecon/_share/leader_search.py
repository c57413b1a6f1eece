"""Assigned partitions with no known leader: look for their leaders again until found. Pure.

An answer that says a partition's leader moved may name no new leader (the broker that
led it is shutting down and no other can take over), and the metadata lookup it causes may
find none yet, or fail (no broker reachable). Such a partition is fetched by nobody: it is
in no leader's share session. Left to the periodic refresh (``metadata_max_age``, 5
minutes by default), the member would stay in the group, heartbeating, with its partition
unfetched for that long.

Rules of this module:

1. A partition of the assignment is *unrouted* while the metadata names no leader for it
   (:func:`unrouted`).
2. While any partition is unrouted, the metadata of their topics is looked up again after
   :data:`SEARCH_BACKOFF` (0.1 s doubling to 1 s, Java's ``retry.backoff.ms`` and
   ``retry.backoff.max.ms``), whether the last lookup failed or answered without a leader
   (:class:`LeaderSearch`). So a partition is fetched again at most about a second after a
   lookup can find its leader, once the cluster answers.
3. Once none is unrouted the search ends; the next one starts from the shortest wait.
4. No I/O, no clock: the caller sleeps and looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharecon._backoff import RETRY_BACKOFF, Backoff

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Iterable

    from sharecon.types import TopicIdPartition

__all__ = ["SEARCH_BACKOFF", "LeaderSearch", "unrouted"]

#: Between two lookups while a partition has no known leader (rule 2): the retry backoff
#: every other request uses.
SEARCH_BACKOFF = RETRY_BACKOFF


def unrouted(
    assignment: Iterable[TopicIdPartition], leader_for: Callable[[uuid.UUID, int], int | None]
) -> list[TopicIdPartition]:
    """The partitions of ``assignment`` whose leader ``leader_for`` does not know (rule 1)."""
    return [tp for tp in assignment if leader_for(tp.topic_id, tp.partition) is None]


@dataclass(slots=True)
class LeaderSearch:
    """The waits of one search for missing leaders (rules 2 and 3)."""

    backoff: Backoff = SEARCH_BACKOFF
    #: Lookups made in this search so far.
    lookups: int = 0

    def next_wait(self, missing: bool) -> float | None:
        """Seconds to wait before the next lookup while leaders are ``missing``; ``None``
        once none is: the search is over (and the next starts afresh)."""
        if not missing:
            self.lookups = 0
            return None
        wait = self.backoff.delay(self.lookups)
        self.lookups += 1
        return wait
