"""sharecon.types value semantics: TopicIdPartition's cached hash and its equality."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import uuid

import pytest

from sharecon.types import TopicIdPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def test_equal_values_hash_equal_and_the_name_is_not_identity() -> None:
    a = TopicIdPartition(T2, 3, "orders")
    b = TopicIdPartition(uuid.UUID(str(T2)), 3)  # equal, built apart, no name
    assert a is not b and a.topic_id is not b.topic_id
    assert a == b and not a != b and hash(a) == hash(b)
    # The hash the generated dataclass __hash__ gave, so nothing keyed by it moves.
    assert hash(a) == hash((T2, 3))


@pytest.mark.parametrize(
    "other",
    [TopicIdPartition(T2, 4), TopicIdPartition(T1, 3), (T2, 3), "x"],
    ids=["partition", "topic id", "tuple", "str"],
)
def test_unequal_values(other: object) -> None:
    a = TopicIdPartition(T2, 3)
    assert a != other and not a == other


def test_a_dict_key_across_instances() -> None:
    d = {TopicIdPartition(T1, p, "t"): p for p in range(5)}
    d[TopicIdPartition(T2, 0)] = 99
    assert d[TopicIdPartition(uuid.UUID(int=1), 2)] == 2
    assert d.get(TopicIdPartition(T2, 0, "other name")) == 99
    assert TopicIdPartition(T2, 1) not in d
    assert len({TopicIdPartition(T1, 0), TopicIdPartition(T1, 0, "t")}) == 1


def test_still_a_frozen_value_after_copy_replace_and_pickle() -> None:
    a = TopicIdPartition(T2, 3, "orders")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.partition = 4  # type: ignore[misc]
    moved = dataclasses.replace(a, partition=4)
    assert moved == TopicIdPartition(T2, 4) and hash(moved) == hash((T2, 4))
    for other in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert other == a and hash(other) == hash(a) and other.topic == "orders"
    assert repr(a) == f"TopicIdPartition(topic_id={T2!r}, partition=3, topic='orders')"
    assert [f.name for f in dataclasses.fields(a) if f.init] == ["topic_id", "partition", "topic"]
