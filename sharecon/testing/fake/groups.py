"""The fake's share-group coordinator: members, epochs and assignments.

Kafka's coordinator side of KIP-932 in the small: a member joins with epoch 0 and its own
member id, is fenced by a wrong epoch, leaves with epoch -1, and expires when it sends no
heartbeat for the session timeout (on the fake's clock). Assignments are recomputed from
the members (in join order) and the subscribed topics that exist, the way Kafka's simple
assignor spreads them: with fewer members than partitions each partition goes to one
member; with more, each member gets one partition and partitions are shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FakeGroup", "FakeMember", "assign"]

#: (topic name, partition)
TopicPartitionName = tuple[str, int]


@dataclass(slots=True)
class FakeMember:
    """One member of a share group."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    epoch: int = 0
    last_seen: float = 0.0
    #: the assignment last sent to the member (None: never sent)
    sent: frozenset[TopicPartitionName] | None = None


@dataclass(slots=True)
class FakeGroup:
    """One share group as its coordinator keeps it."""

    group_id: str
    epoch: int = 0
    members: dict[str, FakeMember] = field(default_factory=dict)
    assignment: dict[str, frozenset[TopicPartitionName]] = field(default_factory=dict)
    assignment_epoch: int = 0

    @property
    def state(self) -> str:
        """``Empty`` or ``Stable`` (the fake reconciles at once)."""
        return "Stable" if self.members else "Empty"

    def reassign(self, partitions: dict[str, int]) -> bool:
        """Recompute the assignment for topics with ``partitions`` (name -> count);
        bump the group epoch when it changed. Returns whether it changed."""
        new = assign(list(self.members.values()), partitions)
        if new == self.assignment:
            return False
        self.assignment = new
        self.epoch += 1
        self.assignment_epoch = self.epoch
        return True


def assign(
    members: list[FakeMember], partitions: dict[str, int]
) -> dict[str, frozenset[TopicPartitionName]]:
    """Spread every subscribed, existing topic's partitions over its subscribers."""
    out: dict[str, set[TopicPartitionName]] = {m.member_id: set() for m in members}
    topics = sorted({t for m in members for t in m.subscribed if t in partitions})
    for topic in topics:
        subs = [m.member_id for m in members if topic in m.subscribed]
        count = partitions[topic]
        if not subs or count <= 0:
            continue
        if len(subs) <= count:
            for p in range(count):
                out[subs[p % len(subs)]].add((topic, p))
        else:
            for i, member in enumerate(subs):
                out[member].add((topic, i % count))
    return {k: frozenset(v) for k, v in out.items()}
