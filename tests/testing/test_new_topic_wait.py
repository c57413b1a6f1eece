"""A topic created a moment ago is waited for, bounded, before the cluster kit describes it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sharecon.admin import PartitionDescription, TopicDescription
from sharecon.errors import UnknownTopicOrPartitionError
from sharecon.testing import cluster

PART = PartitionDescription(partition=1, leader_id=2, leader_epoch=0, replicas=(2, 3), isr=(2, 3))


def _answers(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> list[str]:
    """Make ``with_admin`` give ``answers`` in turn (raising the exceptions among them)."""
    asked: list[str] = []

    def fake_with_admin(bootstrap: str, call: object) -> object:
        asked.append(bootstrap)
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cluster, "with_admin", fake_with_admin)
    monkeypatch.setattr(cluster.time, "sleep", lambda s: None)
    return asked


def _topic(*parts: PartitionDescription) -> dict[str, TopicDescription]:
    return {"orders": TopicDescription("orders", uuid.uuid4(), False, parts)}


def test_an_unknown_topic_is_asked_again_until_known(monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = UnknownTopicOrPartitionError("topic 'orders'")
    first = PartitionDescription(0, 1, 0, (1,), (1,))
    asked = _answers(monkeypatch, [unknown, unknown, _topic(first), _topic(first, PART)])
    assert cluster.describe_partition("b:1", "orders", 1) == PART
    assert asked == ["b:1"] * 4  # twice unknown, once without partition 1, then found


def test_a_topic_never_known_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(cluster.time, "monotonic", lambda: float(next(clock)))
    asked = _answers(monkeypatch, [UnknownTopicOrPartitionError("topic 'orders'")])
    with pytest.raises(UnknownTopicOrPartitionError, match=r"orders-1 still unknown after 30 s"):
        cluster.describe_partition("b:1", "orders", 1)
    assert len(asked) == 6  # the clock reads 5, 10, ... 30 s after each: the 6th is at the bound


def test_other_errors_are_not_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _answers(monkeypatch, [ConnectionRefusedError("down")])
    with pytest.raises(ConnectionRefusedError):
        cluster.describe_partition("b:1", "orders", 0)
    assert asked == ["b:1"]
