"""Several broker nodes in the whole-client simulation (:mod:`sharecon.testing.sim.client`).

A fraction of seeds run on a cluster of 2 or 3 in-memory nodes instead of one: node ``n``
listens on ``fake.sim:9091+n``, the partitions' leadership is spread over the nodes, the
share-group coordinator lives on one of them, and Metadata and FindCoordinator name them
all. Records, producer state, persisted share state and the group's assignment are shared
(one replicated log, as Kafka's replicas and its ``__share_group_state`` topic make them);
what a node holds in memory is its own: share sessions (Kafka keys them by group and member
on each broker), the share partitions it leads, its connections. A request for a partition
the node does not lead is answered NOT_LEADER_OR_FOLLOWER naming the leader, a group
heartbeat that is not the coordinator's NOT_COORDINATOR, as Kafka answers them.

Faults, from a random source of their own (so every other draw of a seed stays as it was):

* ``crash``: one node dies for 2 to 12 virtual seconds (connections refused, its share
  sessions and in-memory share partitions lost, nothing released); the partitions it led
  move to the other nodes at once (a new leader epoch, the persisted state read again), and
  back when it returns (a preferred-leader election). When it is the coordinator, the group
  has none meanwhile (FindCoordinator answers COORDINATOR_NOT_AVAILABLE), and the members'
  session timers start afresh when it is back (as a coordinator that loads a group does).
* ``move``: one partition's leadership moves to another live node.

What it checks besides invariants 1-6 (docs/testing.md): **M1**, while a node is down, a
member with a free worker gets records of its partitions that live nodes led throughout
the outage within ``STALL`` seconds while such records wait at the broker (the other
leaders' fetchers, and the member's heartbeat-less assignment, keep going).
``--mutant new-leader-unfetched`` stops the consumer from starting a fetcher for a leader
it had none for.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

from sharecon._consumer.fetcher import FetcherPool
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages import find_coordinator as fc
from sharecon.protocol.messages import metadata as md
from sharecon.protocol.messages import produce as pr
from sharecon.protocol.messages import share_group_heartbeat as sgh
from sharecon.protocol.messages.share_fetch import LeaderIdAndEpoch
from sharecon.testing.fake.cluster import FakeCluster
from sharecon.testing.model import ModelBroker

if TYPE_CHECKING:
    import uuid

    from sharecon.protocol.messages._base import Request, Response
    from sharecon.protocol.messages.share_fetch import ShareFetchRequest

__all__ = [
    "NodeBroker",
    "NodeCluster",
    "NodesPlan",
    "Topology",
    "build_nodes",
    "new_leader_unfetched",
]

#: Share of seeds that run on several nodes.
SHARE = 0.35
#: The first node's port; node ``n`` listens on ``BASE_PORT + n - 1``.
BASE_PORT = 9092

TopicPartitionId = tuple["uuid.UUID", int]


@dataclass(frozen=True, slots=True)
class NodesPlan:
    """One seed's cluster: how many nodes, the coordinator, the node faults."""

    nodes: int
    coordinator: int
    #: (at, "crash", node, down) or (at, "move", partition, 0.0), in order
    faults: tuple[tuple[float, str, int, float], ...]

    @classmethod
    def draw(cls, seed: int, partitions: int) -> NodesPlan | None:
        """The plan of ``seed`` (``None``: one node), from a random source of its own."""
        rng = random.Random(seed * 2147483647 + 0x40DE)
        if rng.random() >= SHARE:
            return None
        nodes = rng.choice([2, 2, 3])
        coordinator = rng.randint(1, nodes)
        faults: list[tuple[float, str, int, float]] = []
        at = rng.uniform(0.5, 8.0)
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.6:
                down = rng.choice([2.0, 6.0, 12.0])
                node = coordinator if rng.random() < 0.4 else rng.randint(1, nodes)
                faults.append((round(at, 3), "crash", node, down))
                at += down + rng.uniform(1.0, 6.0)  # one node down at a time
            else:
                faults.append((round(at, 3), "move", rng.randrange(partitions), 0.0))
                at += rng.uniform(1.0, 6.0)
        return cls(nodes, coordinator, tuple(faults))

    @property
    def heals_at(self) -> float:
        """When the last node fault ends (schedule seconds)."""
        return max((at + down for at, _, _, down in self.faults), default=0.0)

    def describe(self) -> str:
        parts = [
            f"crash of node {n}@{at:g}+down {down:g}s"
            if kind == "crash"
            else f"partition {n} to another node@{at:g}"
            for at, kind, n, down in self.faults
        ]
        return f"nodes: {self.nodes}, coordinator node {self.coordinator}; " + ", ".join(parts)


@dataclass(slots=True)
class Topology:
    """What every node agrees on: the nodes, who leads what, who coordinates, who is down."""

    host: str
    nodes: tuple[int, ...]
    coordinator: int
    #: explicit leaders; a partition not named here is led by ``nodes[p % len(nodes)]``
    leaders: dict[TopicPartitionId, int] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    #: FindCoordinator and heartbeat answers that named no coordinator (it was down)
    coordinator_refused: int = 0
    _producer_ids: int = 1000

    def port(self, node: int) -> int:
        return BASE_PORT + node - 1

    def preferred(self, tp: TopicPartitionId) -> int:
        """The partition's first replica: where its leadership starts and returns."""
        return self.nodes[tp[1] % len(self.nodes)]

    def leader(self, tp: TopicPartitionId) -> int:
        return self.leaders.get(tp, self.preferred(tp))

    def live(self) -> list[int]:
        return [n for n in self.nodes if n not in self.down]

    def next_producer_id(self) -> int:
        self._producer_ids += 1
        return self._producer_ids


@dataclass(slots=True)
class NodeBroker(ModelBroker):
    """A model broker that leads only the partitions :class:`Topology` gives its node."""

    topology: Topology | None = None

    def leads(self, tp: TopicPartitionId) -> bool:
        return self.topology is None or self.topology.leader(tp) == self.node_id

    def leader_of(self, tp: TopicPartitionId) -> LeaderIdAndEpoch:
        if tp in self.leaderless or self.topology is None:
            return ModelBroker.leader_of(self, tp)
        return LeaderIdAndEpoch(
            leader_id=self.topology.leader(tp), leader_epoch=self.leader_epochs.get(tp, 0)
        )

    def _acquire(
        self,
        group: str,
        member: str,
        partitions: list[TopicPartitionId],
        request: ShareFetchRequest,
        now: float,
        acquired: dict[TopicPartitionId, list[tuple[int, int]]],
        fetch_errors: dict[TopicPartitionId, ErrorCode],
    ) -> None:
        mine = []
        for tp in partitions:
            if self.leads(tp) or tp in self.leaderless:
                mine.append(tp)
            else:
                fetch_errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        ModelBroker._acquire(self, group, member, mine, request, now, acquired, fetch_errors)

    def _acknowledge(
        self,
        group: str,
        member: str,
        tp: TopicPartitionId,
        batches: list[tuple[int, int, tuple[int, ...]]],
        now: float,
        *,
        settle: float = 0.0,
    ) -> ErrorCode:
        if not self.leads(tp):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ModelBroker._acknowledge(self, group, member, tp, batches, now, settle=settle)

    def crash(self, now: float) -> None:
        """This node dies: its share sessions and in-memory share partitions are lost,
        nothing released (the persisted state stays)."""
        self.advance(now)
        for session in list(self.sessions):
            self._remove_session(session)
        self.connections.clear()
        for key in list(self.partitions):
            self._drop_partition(key, now, "broker crashed")


@dataclass(slots=True)
class NodeCluster(FakeCluster):
    """One node of a several-node fake: the shared state aliased, the node's own kept."""

    topology: Topology | None = None

    def __post_init__(self) -> None:
        FakeCluster.__post_init__(self)
        self.model = NodeBroker(self.version, self.node_id, topology=self.topology)

    @property
    def coordinates(self) -> bool:
        t = self.topology
        return t is None or (t.coordinator == self.node_id and self.node_id not in t.down)

    def handle(
        self,
        api_key: int,
        version: int,
        body: Request[Response],
        connection: str,
        now: float,
        client_id: str | None = None,
    ) -> Response | None:
        if api_key == sgh.ShareGroupHeartbeatRequest.api_key and not self.coordinates:
            assert self.topology is not None
            self.topology.coordinator_refused += 1
            self.tick(now)
            return sgh.ShareGroupHeartbeatResponse(
                error_code=ErrorCode.NOT_COORDINATOR,
                error_message=f"This is not the correct coordinator for {body.group_id}.",  # type: ignore[attr-defined]
            )
        return FakeCluster.handle(self, api_key, version, body, connection, now, client_id)

    def tick(self, now: float) -> None:
        # Only the coordinator times members out (none does while it is down).
        if self.coordinates:
            FakeCluster.tick(self, now)
        else:
            self.model.advance(now)

    def _h3(self, body: Any, version: int, conn: str, now: float) -> Response:  # Metadata
        answer = FakeCluster._h3(self, body, version, conn, now)
        t = self.topology
        if t is None:
            return answer
        assert isinstance(answer, md.MetadataResponse)
        live = t.live()
        topics = []
        for topic in answer.topics:
            parts = tuple(
                p
                if p.leader_id < 0
                else dataclasses.replace(
                    p,
                    leader_id=(n := t.leader((topic.topic_id, p.partition_index))),
                    replica_nodes=tuple(t.nodes),
                    isr_nodes=(n,),
                )
                for p in topic.partitions
            )
            topics.append(dataclasses.replace(topic, partitions=parts))
        return dataclasses.replace(
            answer,
            brokers=tuple(
                md.MetadataResponseBroker(node_id=n, host=t.host, port=t.port(n)) for n in live
            ),
            controller_id=live[0] if live else -1,
            topics=tuple(topics),
        )

    def _h10(self, body: Any, version: int, conn: str, now: float) -> Response:  # FindCoordinator
        t = self.topology
        if t is None:
            return FakeCluster._h10(self, body, version, conn, now)
        up = t.coordinator not in t.down
        node, port = (t.coordinator, t.port(t.coordinator)) if up else (-1, -1)
        code = ErrorCode.NONE if up else ErrorCode.COORDINATOR_NOT_AVAILABLE
        host = t.host if up else ""
        t.coordinator_refused += not up
        if version < 4:
            return fc.FindCoordinatorResponse(
                error_code=code, error_message=None, node_id=node, host=host, port=port
            )
        return fc.FindCoordinatorResponse(
            coordinators=tuple(
                fc.Coordinator(key=k, node_id=node, host=host, port=port, error_code=code)
                for k in body.coordinator_keys
            )
        )

    def _h22(self, body: Any, version: int, conn: str, now: float) -> Response:  # InitProducerId
        if self.topology is None or body.producer_id >= 0:
            return FakeCluster._h22(self, body, version, conn, now)
        from sharecon.protocol.messages import init_producer_id as ipi

        return ipi.InitProducerIdResponse(
            producer_id=self.topology.next_producer_id(), producer_epoch=0
        )

    def _produce_one(self, t: Any, pd: Any) -> pr.PartitionProduceResponse:
        topo = self.topology
        if topo is not None and t is not None and 0 <= pd.index < t.partitions:
            tp = (t.topic_id, pd.index)
            if topo.leader(tp) != self.node_id:
                return pr.PartitionProduceResponse(
                    index=pd.index,
                    error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    base_offset=-1,
                    current_leader=pr.LeaderIdAndEpoch(
                        leader_id=topo.leader(tp),
                        leader_epoch=self.model.leader_epochs.get(tp, 0),
                    ),
                )
        return FakeCluster._produce_one(self, t, pd)


def build_nodes(
    version: str, host: str, plan: NodesPlan, **kwargs: Any
) -> tuple[Topology, dict[int, NodeCluster]]:
    """The nodes of ``plan``: node 1's state is the cluster's; the others share it."""
    topology = Topology(host, tuple(range(1, plan.nodes + 1)), plan.coordinator)
    nodes: dict[int, NodeCluster] = {}
    for n in topology.nodes:
        c = NodeCluster(version, host, topology.port(n), node_id=n, topology=topology, **kwargs)
        first = nodes.get(1)
        if first is not None:
            c.topics, c.logs, c.groups = first.topics, first.logs, first.groups
            c.group_configs, c.broker_configs = first.group_configs, first.broker_configs
            m, m1 = c.model, first.model
            m.topics, m.logs, m.leader_epochs = m1.topics, m1.logs, m1.leader_epochs
            m.leaderless, m.groups, m.persister = m1.leaderless, m1.groups, m1.persister
            m.finished, m.written_starts = m1.finished, m1.written_starts
        nodes[n] = c
    return topology, nodes


def new_leader_unfetched() -> Any:
    """Mutant ``new-leader-unfetched``: once a consumer has a fetcher, a leader it has
    none for gets none (one node's fetchers only: what a single-node run never sees)."""
    real = FetcherPool.ensure

    def ensure(self: FetcherPool) -> None:
        fetchers = self._fetchers
        if not fetchers:
            real(self)
            return
        known = set(fetchers)
        core = self.core
        saved = core.assignment
        # Only the partitions of known (or unknown) leaders are looked at, for this call.
        core.assignment = frozenset(
            tp for tp in saved if core.leader(tp) is None or core.leader(tp) in known
        )
        try:
            real(self)
        finally:
            core.assignment = saved

    return mock.patch.object(FetcherPool, "ensure", ensure)
