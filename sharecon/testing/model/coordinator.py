"""A sans-I/O model of a share group's coordinator: ShareGroupHeartbeat, and losing it.

:class:`ModelCoordinator` answers :class:`~sharecon.protocol.ShareGroupHeartbeatRequest`
bodies at a virtual time, as Kafka's group coordinator does for one share group, and takes
the faults a client sees from outside: the coordinator unavailable for a while
(``COORDINATOR_NOT_AVAILABLE``, FindCoordinator fails too), the coordinator moving to
another broker (the old one answers ``NOT_COORDINATOR``; the new one answers
``COORDINATOR_LOAD_IN_PROGRESS`` while it loads the group), and a member's session timing
out. Like :class:`~sharecon.testing.model.ModelBroker` it never reads a clock and draws no
random numbers.

The rules follow Kafka's ``GroupMetadataManager`` for share groups (4.1 to 4.4):

* Epoch 0 joins: the member gets the next group epoch. The first answer to a join carries
  an *empty* assignment, since the coordinator first initialises the share-partition state
  of newly subscribed partitions; the partitions come on a later heartbeat.
* Partitions are spread over the members round-robin, in member-id order; an answer
  carries the assignment only when it changed since the member last got it.
* A known member with another epoch is ``FENCED_MEMBER_EPOCH``; an unknown member (never
  joined, left, or timed out) with a non-zero epoch is ``UNKNOWN_MEMBER_ID``. Epoch -1
  leaves.
* A member not heard from for ``session_timeout`` seconds is removed (its partitions go to
  the others). Session timers live in the coordinator's memory: when the group is loaded
  again (after the coordinator was unavailable or moved) every member's timer starts over.
* Losing the coordinator does not touch share sessions or share partitions: those live on
  the partition leaders (:class:`~sharecon.testing.model.ModelBroker`), which do not check
  group membership on ShareFetch, so records a member holds stay answerable until their
  locks end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.share_group_heartbeat import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    import uuid
    from collections.abc import Mapping

    from sharecon.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

__all__ = ["CoordinatorEvent", "ModelCoordinator"]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class CoordinatorEvent:
    """Something the coordinator would log (the model's trace)."""

    at: float
    what: str
    member: str = ""


@dataclass(slots=True)
class _Member:
    epoch: int
    topics: tuple[str, ...]
    last_seen: float
    #: the assignment this member was last sent (``None``: not yet sent one)
    sent: frozenset[tuple[uuid.UUID, int]] | None = None
    #: the initialisation answer (empty assignment) was sent
    initialised: bool = False


@dataclass(slots=True)
class ModelCoordinator:
    """The coordinator of one share group.

    :param group: the share group's id.
    :param topics: topic name -> (topic id, partition count) of the topics members may
        subscribe to.
    :param node_id: the broker that coordinates the group now.
    :param heartbeat_interval_ms: sent in every successful answer.
    :param session_timeout: seconds without a heartbeat before a member is removed.
    """

    group: str
    topics: Mapping[str, tuple[uuid.UUID, int]]
    node_id: int = 1
    heartbeat_interval_ms: int = 5000
    session_timeout: float = 45.0
    group_epoch: int = field(default=0, init=False)
    members: dict[str, _Member] = field(default_factory=dict, init=False)
    #: until when the coordinator is unavailable (``COORDINATOR_NOT_AVAILABLE``)
    down_until: float = field(default=float("-inf"), init=False)
    #: until when the (new) coordinator loads the group (``COORDINATOR_LOAD_IN_PROGRESS``)
    loading_until: float = field(default=float("-inf"), init=False)
    events: list[CoordinatorEvent] = field(default_factory=list, init=False)

    # -- faults ------------------------------------------------------------------------------

    def unavailable(self, now: float, until: float) -> None:
        """The coordinator is unavailable from ``now`` to ``until`` (its partition of
        ``__consumer_offsets`` has no leader): heartbeats and FindCoordinator fail with
        ``COORDINATOR_NOT_AVAILABLE``. The group is loaded again afterwards, so session
        timers start over then."""
        self.down_until = max(self.down_until, until)
        self._reload(until)
        self._event(now, f"coordinator unavailable until {until:.3f}")

    def move(self, now: float, node_id: int, loaded_at: float) -> None:
        """The coordinator moves to ``node_id`` at ``now``: the old broker answers
        ``NOT_COORDINATOR``, the new one ``COORDINATOR_LOAD_IN_PROGRESS`` until
        ``loaded_at``. Members keep their epochs (the group is persisted)."""
        self.node_id = node_id
        self.loading_until = max(self.loading_until, loaded_at)
        self._reload(loaded_at)
        self._event(now, f"coordinator moved to node {node_id}, loaded at {loaded_at:.3f}")

    def find(self, now: float) -> int | None:
        """FindCoordinator at ``now``: the coordinating node, or ``None``
        (``COORDINATOR_NOT_AVAILABLE``)."""
        return None if now < self.down_until else self.node_id

    def advance(self, now: float) -> None:
        """Let time reach ``now``: members whose session timed out are removed."""
        if now < self.down_until or now < self.loading_until:
            return  # timers do not run while the group is not loaded
        late = [m for m, s in self.members.items() if now - s.last_seen > self.session_timeout]
        for member in late:
            del self.members[member]
            self._event(now, "member session timed out", member)
        if late:
            self._bump()

    # -- requests ----------------------------------------------------------------------------

    def heartbeat(
        self, request: ShareGroupHeartbeatRequest, node_id: int, now: float
    ) -> ShareGroupHeartbeatResponse:
        """Answer a ShareGroupHeartbeat that reached broker ``node_id`` at ``now``."""
        if now < self.down_until:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if node_id != self.node_id:
            return _error(ErrorCode.NOT_COORDINATOR)
        if now < self.loading_until:
            return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if request.group_id != self.group:
            return _error(ErrorCode.GROUP_ID_NOT_FOUND)
        self.advance(now)
        member_id = request.member_id
        epoch = request.member_epoch
        member = self.members.get(member_id)
        if epoch == LEAVE_EPOCH:
            if member is not None:
                del self.members[member_id]
                self._bump()
                self._event(now, "member left", member_id)
            return ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=LEAVE_EPOCH)
        if epoch == JOIN_EPOCH:
            topics = request.subscribed_topic_names
            if not topics:
                return _error(ErrorCode.INVALID_REQUEST)
            if member is None or member.topics != tuple(topics):
                if member is None:
                    self._event(now, "member joined", member_id)
                member = self.members[member_id] = _Member(0, tuple(topics), now)
                self._bump()
            member.epoch = self.group_epoch
            member.sent = None
            member.initialised = False
        elif member is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        elif epoch != member.epoch:
            return _error(ErrorCode.FENCED_MEMBER_EPOCH)
        elif (
            request.subscribed_topic_names is not None
            and tuple(request.subscribed_topic_names) != member.topics
        ):
            member.topics = tuple(request.subscribed_topic_names)
            self._bump()
            member.epoch = self.group_epoch
        member.last_seen = now
        assignment = None
        if not member.initialised:
            member.initialised = True
            assignment = Assignment()
            member.sent = frozenset()
        else:
            mine = self.assignment_of(member_id)
            if mine != member.sent:
                member.sent = mine
                member.epoch = self.group_epoch
                assignment = _assignment(mine)
        return ShareGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=assignment,
        )

    # -- inspection --------------------------------------------------------------------------

    def assignment_of(self, member_id: str) -> frozenset[tuple[uuid.UUID, int]]:
        """The partitions (topic id, partition) the coordinator assigns ``member_id`` now:
        every subscribed partition, round-robin over the members in id order."""
        order = sorted(self.members)
        if member_id not in order:
            return frozenset()
        mine = []
        i = 0
        for name in sorted(self.topics):
            tid, count = self.topics[name]
            for p in range(count):
                subscribers = [m for m in order if name in self.members[m].topics]
                if subscribers and subscribers[i % len(subscribers)] == member_id:
                    mine.append((tid, p))
                i += 1
        return frozenset(mine)

    # -- internals ---------------------------------------------------------------------------

    def _bump(self) -> None:
        self.group_epoch += 1

    def _reload(self, at: float) -> None:
        for m in self.members.values():
            m.last_seen = max(m.last_seen, at)

    def _event(self, now: float, what: str, member: str = "") -> None:
        self.events.append(CoordinatorEvent(now, what, member))


def _error(code: ErrorCode) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code)


def _assignment(parts: frozenset[tuple[uuid.UUID, int]]) -> Assignment:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(parts):
        by_topic.setdefault(tid, []).append(p)
    return Assignment(
        topic_partitions=tuple(
            TopicPartitions(topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items()
        )
    )
