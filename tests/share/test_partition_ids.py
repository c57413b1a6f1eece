"""sharecon._share.partition_ids: one TopicIdPartition per partition, by name, bounded."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sharecon._share import partition_ids
from sharecon._share.partition_ids import topic_partition
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    import pytest


def test_the_same_partition_gives_the_same_object_equal_to_a_new_one() -> None:
    tid = uuid.uuid4()
    first = topic_partition(tid, 3, "orders")
    again = topic_partition(uuid.UUID(int=tid.int), 3, "orders")  # an equal UUID object
    assert again is first
    assert first == TopicIdPartition(tid, 3, "orders") and first.topic == "orders"
    assert topic_partition(tid, 4, "orders") is not first
    assert topic_partition(tid, 4, "orders").partition == 4


def test_another_name_makes_another_object_with_that_name() -> None:
    tid = uuid.uuid4()
    unnamed = topic_partition(tid, 0, None)
    named = topic_partition(tid, 0, "orders")
    assert named is not unnamed and named == unnamed
    assert (unnamed.topic, named.topic) == (None, "orders")
    assert topic_partition(tid, 0, "orders") is named


def test_the_table_starts_again_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_ids, "MAX_KEPT", 4)
    monkeypatch.setattr(partition_ids, "_by_topic", {})
    monkeypatch.setattr(partition_ids, "_kept", [0])
    tid = uuid.uuid4()
    made = [topic_partition(tid, p, "t") for p in range(4)]
    assert [topic_partition(tid, p, "t") for p in range(4)] == made
    assert all(topic_partition(tid, p, "t") is made[p] for p in range(4))
    fifth = topic_partition(tid, 4, "t")  # past the bound: the table starts again
    assert sum(len(parts) for parts in partition_ids._by_topic.values()) == 1
    assert topic_partition(tid, 4, "t") is fifth
    assert topic_partition(tid, 0, "t") is not made[0] and topic_partition(tid, 0, "t") == made[0]
