"""sharecon._share.leader_search: which assigned partitions have no known leader, and how
long to wait between lookups while any has none."""

from __future__ import annotations

import uuid

import pytest

from sharecon._backoff import Backoff
from sharecon._share.leader_search import SEARCH_BACKOFF, LeaderSearch, unrouted
from sharecon.types import TopicIdPartition

T = uuid.UUID(int=7)
A, B, C = (TopicIdPartition(T, p, "t") for p in range(3))


def test_unrouted_names_the_partitions_whose_leader_is_unknown() -> None:
    leaders = {0: 1, 1: None, 2: 3}
    assert unrouted([A, B, C], lambda _tid, p: leaders[p]) == [B]
    assert unrouted([A, C], lambda _tid, p: leaders[p]) == []


def test_waits_grow_to_a_second_while_a_leader_is_missing_then_the_search_ends() -> None:
    search = LeaderSearch(Backoff(initial=0.1, maximum=1.0, jitter=0.0))
    waits = [search.next_wait(True) for _ in range(6)]
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert search.next_wait(False) is None
    # The next search starts from the shortest wait again.
    assert search.next_wait(True) == pytest.approx(0.1)


def test_the_default_waits_are_javas_retry_backoff() -> None:
    assert (SEARCH_BACKOFF.initial, SEARCH_BACKOFF.maximum) == (0.1, 1.0)
    search = LeaderSearch()
    assert all(w is not None and w <= 1.0 for w in (search.next_wait(True) for _ in range(50)))
