"""Refused lock renewals are told once per record (sans-I/O)."""

from __future__ import annotations

import uuid

from sharecon._share.renew_refusals import RenewRefusals
from sharecon.types import TopicIdPartition

A = TopicIdPartition(uuid.UUID(int=1), 0)
B = TopicIdPartition(uuid.UUID(int=1), 1)


def test_a_record_refused_on_every_tick_is_news_once() -> None:
    refusals = RenewRefusals()
    assert refusals.news([(A, 5)]) == 1
    for _ in range(10):  # the keeper's ticks until the lock ends
        assert refusals.news([(A, 5)]) == 0


def test_new_records_and_partitions_are_news_and_repeats_are_not() -> None:
    refusals = RenewRefusals()
    assert refusals.news([(A, 5), (A, 6), (B, 1)]) == 3
    assert refusals.news([(A, 5), (A, 6), (A, 7)]) == 1  # 7 is new; B not refused now
    assert refusals.news([(B, 1)]) == 0  # B's memory stands until B is refused again


def test_a_record_renewed_in_between_is_news_again() -> None:
    refusals = RenewRefusals()
    assert refusals.news([(A, 5), (A, 6)]) == 2
    # Offset 5 was renewed (or answered) this time: only 6 refused; later 5 again is news.
    assert refusals.news([(A, 6)]) == 0
    assert refusals.news([(A, 5), (A, 6)]) == 1


def test_memory_is_the_last_refusal_per_partition() -> None:
    refusals = RenewRefusals()
    refusals.news([(A, offset) for offset in range(1000)])
    refusals.news([(A, 1)])
    assert refusals._told == {A: frozenset({1})}
