"""The whole-client simulation: the real ``ShareConsumer`` and ``Producer``, unchanged, on a
virtual clock, against an in-memory FakeKafka, under seeded faults.

``python -m sharecon.testing.sim.client --seed N`` replays one schedule, ``--count``
searches. Where :mod:`sharecon.testing.sim.world` drives the consumer's sans-I/O core
(a million schedules per CPU-hour), this runs what users run: ``async for`` (implicit and
explicit answers), ``poll()``, ``batches()`` and ``process(concurrency=...)`` with
``RetryLater`` (4.2+) and handlers that wait for the next record, the producer, the heartbeat and fetch loops, connections, reconnects and
closes: every line of the clients between the application and the socket.

How: the clients open connections through :data:`sharecon._net.connect.dialer`, which
this module points at :class:`MemoryKafka` (FakeKafka's request handling, serving
in-memory byte streams in the same event loop). The loop is trio's with a
``MockClock(autojump_threshold=0)``: whenever every task waits, the clock jumps to the
next deadline, so a minute of lock timeouts and back-offs runs in a fraction of a second.
The seed fixes the schedule (topic, members and their styles, records, faults), the
scheduler's choices (trio's run-queue shuffle), the clients' jitter (``random``) and
their member ids.

Faults (1 to 3 per schedule, in the first 20 virtual seconds): every connection cut (the
broker releases what the sessions held), a broker crash (sessions and acquisitions lost,
nothing released) or clean restart, with the broker refusing connections for a while
(0 to 8 s), and a partition's leadership moving. Fault classes of their own modules,
drawn from random sources of their own (so the schedules above stay as they were): dead
letters refused for a while (:mod:`~sharecon.testing.sim.client_dlq`, invariants D1-D3),
an OAuth token endpoint outage (:mod:`~sharecon.testing.sim.client_auth`, A1-A3),
handlers slower than the lock (:mod:`~sharecon.testing.sim.client_slow`, S1), the
transport's own faults: stalls, lost answers, cuts mid-request, a slow link
(:mod:`~sharecon.testing.sim.client_net`, N1-N4), and several broker nodes, one of
them crashing, a leader moving to another node, the coordinator's node down
(:mod:`~sharecon.testing.sim.client_nodes`, M1). Applications that commit now and then:
:mod:`~sharecon.testing.sim.client_commit` (C1-C2).

Invariants (each violation names the seed and prints a one-line replay):

1. *No exception reaches the application*: every fault is transient, handled inside.
2. *Progress*: every record written is accepted (or rejected by the application, then
   archived) within :data:`BOUND` virtual seconds of the last fault healing and the last
   write.
3. *No record archived unseen*: a record the broker archives is one the application
   rejected (the delivery limit, 10, is above what the faults and the application's
   releases can spend).
4. *Integrity*: every record the application is handed is one that was written, with its
   value.
5. *Close*: once the schedule is over, every client closes within :data:`CLOSE_BOUND`
   (the consumer's ``close_timeout``).
6. *No stall*: once the faults healed, a member with a free worker never goes
   :data:`STALL` seconds without a record while records of its partitions are available
   at the broker.

Also 7 (the ledger is what the application holds) and 8 (every attempt spent unseen is
counted), in docs/testing.md, and:

9. *No spin*: the clients never go :data:`SPIN_BATCHES` scheduler passes at one virtual
   instant (a loop that never waits would hold the virtual clock for good).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import math
import random
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

import anyio
import anyio.abc

from sharecon._net.connect import dialer
from sharecon.config import ConnectionConfig, SaslConfig
from sharecon.consumer import ShareConsumer
from sharecon.errors import (
    BrokerConnectError,
    DeadLetterError,
    DeadLetterTopicError,
    KafkaTimeoutError,
)
from sharecon.producer import Producer
from sharecon.protocol.api import encode_response
from sharecon.protocol.messages.share_fetch import ShareFetchRequest
from sharecon.record import RetryLater
from sharecon.testing.fake.cluster import FakeCluster
from sharecon.testing.fake.server import FakeKafka
from sharecon.testing.model import RecordState
from sharecon.testing.sim import mutants
from sharecon.testing.sim.client_auth import (
    HEALTH_BOUND,
    AuthPlan,
    BrokerAuth,
    SimTokenProvider,
    TokenEndpoint,
    give_up_for_good,
)
from sharecon.testing.sim.client_commit import (
    CommitPlan,
    CommitWatch,
    commit_early,
    commit_waits,
)
from sharecon.testing.sim.client_dlq import (
    DlqPlan,
    DlqWatch,
    no_stub,
    release_at_once,
    spent_bound,
)
from sharecon.testing.sim.client_leader import LeaderPlan, search_off
from sharecon.testing.sim.client_net import HEALTH_BOUND as NET_HEALTH_BOUND
from sharecon.testing.sim.client_net import (
    NetFaults,
    NetPlan,
    fetch_waits_forever,
    guard_forgets,
)
from sharecon.testing.sim.client_nodes import (
    BASE_PORT,
    NodeBroker,
    NodeCluster,
    NodesPlan,
    Topology,
    build_nodes,
    new_leader_unfetched,
)
from sharecon.testing.sim.client_restart import RestartPlan, UnseenWatch
from sharecon.testing.sim.client_slow import SlowPlan, SlowWatch, keeper_off
from sharecon.testing.sim.intercept import CLOSE, Close

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from anyio.abc import ByteStream, TaskGroup

    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response
    from sharecon.record import Record
    from sharecon.testing.sim.intercept import Intercept

__all__ = ["BOUND", "MUTANTS", "STYLES", "ClientOutcome", "MemoryKafka", "main", "run", "search"]

TOPIC = "t"
GROUP = "g"
HOST, PORT = "fake.sim", 9092
#: Invariant 9: scheduler passes at one virtual instant that make a spin (a normal run
#: makes at most about 130: seeds 0 to 39 on 4.4).
SPIN_BATCHES = 20_000
#: Progress bound (invariant 2), virtual seconds after the last fault healed and the last
#: write: a lock (15 s here) for records a fault stranded, plus back-offs and a rejoin.
BOUND = 45.0
#: The lock duration of the schedules' share group (ms).
LOCK_MS = 15_000
#: The delivery limit: above what faults (at most 3) and releases (at most 1) can spend.
DELIVERY_LIMIT = 10
#: What a member does with its records.
STYLES = ("iter", "explicit", "poll", "batches", "process", "gather")
#: Invariant 7 reads a member's ledger at every this many records it is handed.
HELD_EVERY = 3
#: Invariant 6: the longest a member with a free worker may go without a record while
#: records of its partitions wait at the broker, virtual seconds.
STALL = 10.0
#: How often a restarting member's buffer is looked at (virtual seconds).
RESTART_LOOK = 0.02

#: A restarted member (sim.client_restart) tries to open its consumer this many times, a
#: second apart, while its start fails for a broker that is down.
REOPEN_TRIES = 60

#: Invariant 5: the longest the clients may take to close once cancelled, virtual
#: seconds (the consumer's default close_timeout).
CLOSE_BOUND = 30.0
#: M1: a node outage is judged only if no other fault acted this long before it, seconds.
QUIET = 2.0
#: How long a schedule may run at all, virtual seconds (a stuck one is a violation).
HORIZON = 600.0


# -- the in-memory broker --------------------------------------------------------------------


class MemoryKafka(FakeKafka):
    """FakeKafka serving in-memory connections in the caller's event loop, on its clock.

    :meth:`serve` starts it in a task group; :meth:`dial` is a
    :data:`~sharecon._net.connect.Dialer`. The ``..._now`` faults act at once, in the
    loop (FakeKafka's own go through its thread).
    """

    def __init__(self, version: str = "4.4", nodes: NodesPlan | None = None) -> None:
        super().__init__(version, host=HOST, port=PORT, heartbeat_interval_ms=1000)
        self.refuse_until = -math.inf
        #: several nodes (sim.client_nodes): the plan, then the topology and the nodes
        self.nodes_plan = nodes
        self.topology: Topology | None = None
        self.nodes: dict[int, NodeCluster] = {}
        #: ShareFetch requests each node served; answers naming another leader
        self.node_fetches: dict[int, int] = {}
        self.not_leader = 0
        #: Fault classes' say over requests before FakeKafka's (``sim.client_dlq``,
        #: ``sim.client_auth``): each may answer a request itself, in order.
        self.intercepts: list[Intercept] = []
        # (connection, correlation id) of waiting fetches the intercepts passed on arrival
        self._cleared: set[tuple[str, int]] = set()
        #: the transport's faults (``sim.client_net``): shaped pipes, lost or cut answers
        self.net: NetFaults | None = None

    async def _answer_later(
        self, conn: Any, header: RequestHeader, body: Request[Response]
    ) -> None:
        # A fetch that waits at the broker is judged when it arrives, as Kafka judges a
        # request when it reads it (a session that ends during the wait does not end it).
        if await self._intercepted(conn, header, body):
            return
        self._cleared.add((conn.name, header.correlation_id))
        await super()._answer_later(conn, header, body)

    async def _answer(self, conn: Any, header: RequestHeader, body: Request[Response]) -> None:
        key = (conn.name, header.correlation_id)
        if key in self._cleared:
            self._cleared.discard(key)
        elif await self._intercepted(conn, header, body):
            return
        if self.nodes and header.api_key == ShareFetchRequest.api_key:
            node = int(conn.name[1 : conn.name.index("c")])
            self.node_fetches[node] = self.node_fetches.get(node, 0) + 1
            tid = self.cluster.model.topics.get(TOPIC)
            topology = self.topology
            assert topology is not None and isinstance(body, ShareFetchRequest)
            for t in body.topics:
                if tid is not None and t.topic_id == tid:
                    led = [topology.leader((tid, p.partition_index)) for p in t.partitions]
                    self.not_leader += sum(n != node for n in led)
        if self.net is not None:
            await self.net.answer(self, conn, header, body)
            return
        await super()._answer(conn, header, body)

    async def _intercepted(self, conn: Any, header: RequestHeader, body: Request[Response]) -> bool:
        """Whether a fault class answered the request (or closed the connection)."""
        for intercept in self.intercepts:
            verdict = intercept(conn.name, header, body)
            if verdict is None:
                continue
            if verdict is CLOSE:  # the broker closes the connection instead of answering
                conn.scope.cancel()
                return True
            assert not isinstance(verdict, Close)
            self.requests_served += 1
            frame = encode_response(
                header.api_key, header.api_version, header.correlation_id, verdict
            )
            try:
                await conn.stream.send(frame)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                conn.scope.cancel()
            return True
        return False

    def _wall(self) -> float:
        return anyio.current_time()

    def _cluster_of(self, name: str) -> FakeCluster:
        # Several nodes: a connection's name says which node it reached ("n2c17").
        if self.nodes and name.startswith("n"):
            return self.nodes[int(name[1 : name.index("c")])]
        return self.cluster

    def _models(self) -> list[Any]:
        return [c.model for c in self.nodes.values()] or [self.cluster.model]

    def _leader_model(self, partition: int) -> Any:
        """The model of the node leading ``partition`` of the schedule's topic."""
        if self.topology is None:
            return self.cluster.model
        tid = self.cluster.model.topics[TOPIC]
        return self.nodes[self.topology.leader((tid, partition))].model

    async def serve(self, tg: TaskGroup) -> None:
        """Serve from now on, in ``tg``."""
        self._changed = anyio.Event()
        self._origin = anyio.current_time()
        if self.nodes_plan is not None:
            self.topology, self.nodes = build_nodes(
                self.version,
                HOST,
                self.nodes_plan,
                session_timeout_ms=self._session_timeout_ms,
                heartbeat_interval_ms=self._heartbeat_interval_ms,
            )
            self._cluster = self.nodes[1]
        else:
            self._cluster = FakeCluster(
                self.version,
                HOST,
                PORT,
                session_timeout_ms=self._session_timeout_ms,
                heartbeat_interval_ms=self._heartbeat_interval_ms,
            )
        # ShareFetch's MaxBytes honoured as Kafka does (at least one batch a partition):
        # what a slow link's fetch sizing (sim.client_net) relies on.
        logs = self._cluster.logs
        for model in self._models():
            model.batch_bytes = lambda tp, first: logs[tp].size_of(first)
        self._tg = tg

    async def dial(self, host: str, port: int) -> ByteStream:
        """A new connection, or :class:`OSError` (refused) while the broker is down."""
        prefix = "c"
        if self.topology is not None:
            node = port - BASE_PORT + 1
            if host != HOST or node not in self.nodes or node in self.topology.down:
                raise OSError(errno.ECONNREFUSED, "connection refused")
            prefix = f"n{node}c"
        elif (host, port) != (HOST, PORT):
            raise OSError(errno.ECONNREFUSED, "connection refused")
        if anyio.current_time() < self.refuse_until:
            raise OSError(errno.ECONNREFUSED, "connection refused")
        assert self._tg is not None
        from sharecon.testing.sim.pipe import memory_pipe  # trio's: only this needs it

        if self.net is not None:
            down, up = self.net.pipe_shapers()
            client, server = memory_pipe(down=down, up=up)
        else:
            client, server = memory_pipe()
        self._tg.start_soon(self._serve_conn, server, prefix)
        return client

    def close_all(self, *, silent: bool, prefix: str = "") -> None:
        """Close every connection (``silent``: without the broker-side release; ``prefix``:
        only those whose name starts with it, e.g. one node's)."""
        for name, conn in list(self._conns.items()):
            if name.startswith(prefix):
                conn.silent = silent
                conn.scope.cancel()

    def crash_now(self) -> None:
        """Sessions and in-memory share partitions lost, nothing released (every node)."""
        for model in self._models():
            model.restart(self.now())
        self.close_all(silent=True)
        self._notify()

    def restart_now(self) -> None:
        """A clean restart: sessions closed (what they held released), then rebuilt."""
        now = self.now()
        clusters: list[FakeCluster] = list(self.nodes.values()) or [self.cluster]
        for c in clusters:
            c.model.disconnect_many(list(self._conns), now, concurrent=False)
            c.connection_members.clear()
            c.model.restart(now)
        self.close_all(silent=True)
        self._notify()

    def node_crash_now(self, node: int) -> None:
        """Node ``node`` dies (sim.client_nodes): its connections drop, its sessions and
        share partitions are lost, nothing released; what it led moves to live nodes."""
        topology = self.topology
        assert topology is not None
        now = self.now()
        topology.down.add(node)
        self.close_all(silent=True, prefix=f"n{node}c")
        c = self.nodes[node]
        assert isinstance(c.model, NodeBroker)
        c.model.crash(now)
        c.connection_members.clear()
        live = topology.live()
        for tp in sorted(c.model.leader_epochs):
            if live and topology.leader(tp) == node:
                self._move(tp, live[tp[1] % len(live)])
        self._notify()

    def node_back_now(self, node: int) -> None:
        """Node ``node`` is back: it leads its partitions again (a preferred-leader
        election); as the coordinator, the members' session timers start afresh."""
        topology = self.topology
        assert topology is not None
        topology.down.discard(node)
        for tp in sorted(self.cluster.model.leader_epochs):
            if topology.preferred(tp) == node and topology.leader(tp) != node:
                self._move(tp, node)
        if topology.coordinator == node:
            for group in self.cluster.groups.values():
                for member in group.members.values():
                    member.last_seen = self.now()
        self._notify()

    def node_move_now(self, partition: int) -> None:
        """The partition's leadership moves to the next live node, if there is one."""
        topology = self.topology
        assert topology is not None
        tp = (self.cluster.model.topics[TOPIC], partition)
        old = topology.leader(tp)
        others = [n for n in topology.live() if n != old]
        if others:
            self._move(tp, min(others, key=lambda n: (n - old) % len(topology.nodes)))
        self._notify()

    def _move(self, tp: tuple[Any, int], to: int) -> None:
        topology = self.topology
        assert topology is not None
        old = self.nodes[topology.leader(tp)].model
        topic = next(name for name, tid in old.topics.items() if tid == tp[0])
        old.move_leader(topic, tp[1], self.now())  # its share partitions dropped, epoch up
        topology.leaders[tp] = to

    def cut_now(self) -> None:
        """Every connection closes; the broker releases what their sessions held."""
        self.close_all(silent=False)

    def move_now(self, partition: int) -> None:
        """The partition's leadership moves (a new incarnation of this node)."""
        self._leader_model(partition).move_leader(TOPIC, partition, self.now())
        self._notify()

    def withdraw_now(self, partition: int) -> None:
        """The partition has no leader until :meth:`restore_now` (sim.client_leader)."""
        self._leader_model(partition).withdraw_leader(TOPIC, partition, self.now())
        self._notify()

    def restore_now(self, partition: int) -> None:
        """A leader is elected for the partition again."""
        self._leader_model(partition).restore_leader(TOPIC, partition, self.now())
        self._notify()

    def lock_of(self, partition: int, offset: int) -> tuple[str, int, float] | None:
        """The share group's lock on a record now, at the node that leads its partition:
        (member id, delivery count, deadline), or ``None`` if it is not acquired."""
        model = self.cluster.model
        key = (GROUP, (model.topics[TOPIC], partition))
        sp = self._leader_model(partition).partitions.get(key)
        st = sp.states.get(offset) if sp is not None else None
        if st is None or st.state is not RecordState.ACQUIRED:
            return None
        return st.member, st.count, st.deadline

    def states(self, partitions: int, ends: list[int]) -> dict[tuple[int, int], RecordState]:
        """The share group's state of every record written, by (partition, offset): how
        it ended, once the start offset moved past it."""
        model = self.cluster.model
        tid = model.topics[TOPIC]
        out: dict[tuple[int, int], RecordState] = {}
        for p in range(partitions):
            key = (GROUP, (tid, p))
            finished = model.finished.get(key, {})
            sp = next((s for m in self._models() if (s := m.partitions.get(key)) is not None), None)
            if sp is not None:
                states = {o: st.state for o, st in sp.states.items()}
            else:  # not loaded (after a restart, until fetched): what was persisted
                states = {o: st for o, (st, _) in model.persister.get(key, (0, {}))[1].items()}
            for offset in range(ends[p]):
                done = finished.get(offset)
                out[(p, offset)] = (
                    done if done is not None else states.get(offset, RecordState.AVAILABLE)
                )
        return out


# -- a schedule --------------------------------------------------------------------------------


@dataclass(slots=True)
class ClientOutcome:
    """One schedule's result."""

    seed: int
    version: str
    violation: str | None
    #: what the schedule was: members' styles, records, faults
    plan: list[str] = field(default_factory=list)
    #: records handed to the application (deliveries, not distinct records)
    handed: int = 0
    #: virtual seconds the schedule ran
    elapsed: float = 0.0
    #: what the fault classes saw, by name (e.g. ``dlq_refused``: dead-letter copies the
    #: broker refused; ``dlq_copies``: records with a copy): proof a fault was exercised
    counters: dict[str, int] = field(default_factory=dict)

    def replay(self, mutant: str | None = None) -> str:
        """The one-line command that replays this schedule."""
        planted = f" --mutant {mutant}" if mutant else ""
        return (
            f"python -m sharecon.testing.sim.client --seed {self.seed} "
            f"--version {self.version}{planted}"
        )


@dataclass(slots=True)
class _Watch:
    """What invariant 6 knows of one member."""

    consumer: ShareConsumer[Any, Any] | None = None
    last_handed: float = 0.0
    #: ``process()``: its workers, and how many run a handler now
    concurrency: int = 0
    running: int = 0
    #: records handed out by ``async for`` (invariant 7 checks every HELD_EVERY-th)
    handed: int = 0
    #: the application waits in ``reject_to_dlq`` for a dead-letter copy to be written
    writing_dlq: bool = False

    def assigned(self) -> set[int]:
        c = self.consumer
        if c is None:
            return set()
        with contextlib.suppress(Exception):  # closing
            return {tp.partition for tp in c.assignment}
        return set()

    def free(self) -> bool:
        # Other styles ask for the next record as soon as they have one, unless waiting
        # for a dead-letter copy.
        if self.writing_dlq:
            return False
        return self.concurrency == 0 or self.running < self.concurrency


@dataclass(slots=True)
class _Plan:
    partitions: int
    records: int
    gaps: list[float]
    styles: list[str]
    faults: list[tuple[float, str, float]]  # (at, kind, refuse for)
    #: dead letters (sim.client_dlq), drawn from a random source of their own
    dlq: DlqPlan | None = None
    #: OAUTHBEARER and the token endpoint's outage (sim.client_auth), the same way
    auth: AuthPlan | None = None
    #: handlers slower than the lock (sim.client_slow), the same way
    slow: SlowPlan | None = None
    #: transport faults (sim.client_net), the same way
    net: NetPlan | None = None
    #: a partition without a leader for a while (sim.client_leader), the same way
    leader: LeaderPlan | None = None
    #: several broker nodes and their faults (sim.client_nodes), the same way
    nodes: NodesPlan | None = None
    #: a member that closes and opens again (sim.client_restart), the same way
    restart: RestartPlan | None = None
    #: members that commit (sim.client_commit), the same way
    commit: CommitPlan | None = None

    @classmethod
    def draw(cls, rng: random.Random) -> _Plan:
        partitions = rng.randint(1, 3)
        records = rng.randint(20, 80)
        # Writes go on past the faults (mean gap ~0.6 s): invariant 6 watches them arrive.
        gaps = [rng.choice([0.0, 0.0, 0.01, 0.1, 0.5, 1.0, 2.0]) for _ in range(records)]
        styles = [rng.choice(STYLES) for _ in range(rng.randint(1, 3))]
        faults = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["cut", "crash", "restart", "move"])
            down = rng.choice([0.0, 0.0, 2.0, 8.0]) if kind in ("crash", "restart") else 0.0
            faults.append((round(rng.uniform(0.5, 20.0), 3), kind, down))
        faults.sort()
        return cls(partitions, records, gaps, styles, faults)

    def describe(self) -> list[str]:
        return [
            f"{self.partitions} partitions, {self.records} records",
            "members: " + ", ".join(self.styles),
            "faults: "
            + ", ".join(f"{k}@{t:g}" + (f"+down {d:g}s" if d else "") for t, k, d in self.faults),
            *([self.dlq.describe()] if self.dlq is not None else []),
            *([self.auth.describe()] if self.auth is not None else []),
            *([self.slow.describe()] if self.slow is not None else []),
            *([self.net.describe()] if self.net is not None else []),
            *([self.leader.describe()] if self.leader is not None else []),
            *([self.nodes.describe()] if self.nodes is not None else []),
            *([self.restart.describe()] if self.restart is not None else []),
            *([self.commit.describe()] if self.commit is not None else []),
        ]

    @property
    def last_fault(self) -> float:
        """When the last fault starts, or the last refusal ends (schedule seconds)."""
        last = self.faults[-1][0] if self.faults else 0.0
        if self.dlq is not None:
            last = max(last, self.dlq.heals_at)
        if self.auth is not None:
            last = max(last, self.auth.heals_at)
        if self.net is not None:
            last = max(last, self.net.heals_at)
        if self.leader is not None:
            last = max(last, self.leader.heals_at)
        if self.nodes is not None:
            last = max(last, self.nodes.heals_at)
        if self.restart is not None:
            last = max(last, self.restart.heals_at)
        return last


class _Schedule:
    """The application side of one schedule: the writer, the members, the watch."""

    def __init__(self, seed: int, version: str, plan: _Plan) -> None:
        self.seed = seed
        self.version = version
        self.plan = plan
        self.rng = random.Random(seed * 7919 + 1)
        self.kafka = MemoryKafka(version, plan.nodes)
        #: every node, as users list them (the first alone with one node)
        self.bootstrap = f"{HOST}:{PORT}"
        if plan.nodes is not None:
            ports = range(BASE_PORT, BASE_PORT + plan.nodes.nodes)
            self.bootstrap = ",".join(f"{HOST}:{p}" for p in ports)
        #: M1 (sim.client_nodes): while a node is down, the partitions live nodes lead
        self.outage: set[int] | None = None
        #: M1's looks at a member with records waiting on live nodes' partitions
        self.outage_judged = 0
        #: node outages M1 judged (no other fault acting)
        self.outages_quiet = 0
        #: records handed out while a node was down; of them, while it was the coordinator
        self.outage_handed = 0
        self.coordinator_down_handed = 0
        self.written: dict[tuple[int, int], bytes] = {}
        self.ends = [0] * plan.partitions
        self.rejected: set[tuple[int, int]] = set()
        #: records the application released (DeadLetterPolicy routes such a record once it
        #: arrives past max_deliveries, e.g. after a slow link spent attempts unseen)
        self.released: set[tuple[int, int]] = set()
        self.handed = 0
        self.done_writing = anyio.Event()
        self.healed_at = 0.0
        self.violation: str | None = None
        self.config = ConnectionConfig(request_timeout=10.0)
        self.watches = [_Watch() for _ in plan.styles]
        #: invariant 8 (sim.client_restart): what each consumer's application was handed
        self.unseen = UnseenWatch()
        #: members that closed and opened again (sim.client_restart); of them, those
        #: whose consumer had records buffered when it left
        self.restarts = 0
        self.restarts_buffered = 0
        #: when the restart cancelled the member's first consumer
        self.restart_left: float | None = None
        self.stopped_at = math.inf
        #: the whole run's scope, once it runs: a spin (invariant 9) cancels it
        self.root: anyio.CancelScope | None = None
        self.endpoint: TokenEndpoint | None = None
        self.auth: BrokerAuth | None = None
        if plan.auth is not None:
            self.endpoint = TokenEndpoint(plan.auth)
            self.auth = BrokerAuth(plan.auth, lambda: self.kafka.cluster, self.kafka.now)
            self.kafka.intercepts.append(self.auth.intercept)  # first: logins before all
            self.healed_at = max(self.healed_at, plan.auth.heals_at)
        if plan.leader is not None:
            self.healed_at = max(self.healed_at, plan.leader.heals_at)
        if plan.nodes is not None:
            self.healed_at = max(self.healed_at, plan.nodes.heals_at)
        self.slow: SlowWatch | None = None
        if plan.slow is not None:
            self.slow = SlowWatch(version != "4.1", self.disturbed)
        self.dlq: DlqWatch | None = None
        #: DeadLetterError raised by reject_to_dlq to the application (documented)
        self.dlq_errors = 0
        if plan.dlq is not None:
            faults = len(plan.faults) + (plan.net.count if plan.net is not None else 0)
            faults += plan.leader is not None  # a leaderless window ends locks too
            faults += len(plan.nodes.faults) if plan.nodes is not None else 0
            faults += plan.restart is not None  # its close releases what it held
            bound = spent_bound(plan.dlq.refuse_for, LOCK_MS / 1000, faults)
            self.dlq = DlqWatch(plan.dlq, anyio.current_time, lambda: self.kafka.cluster, bound)
            self.kafka.intercepts.append(self.dlq.intercept)
            self.healed_at = max(self.healed_at, plan.dlq.heals_at)
        self.commit: CommitWatch | None = None
        if plan.commit is not None:
            self.commit = CommitWatch(
                plan.commit,
                lambda a, b: self.disturbed(a, b) or self.slowed(a, b),
                self.kafka.lock_of,
            )
        self.net: NetFaults | None = None
        if plan.net is not None:
            self.net = NetFaults(plan.net, self._partition_of, LOCK_MS / 1000, self._healed)
            self.kafka.net = self.net
            self.healed_at = max(self.healed_at, plan.net.heals_at)

    def _partition_of(self, topic_id: Any, partition: int) -> int | None:
        topic = self.kafka.cluster.topics.get(TOPIC)
        return partition if topic is not None and topic.topic_id == topic_id else None

    def _healed(self, at: float) -> None:
        self.healed_at = max(self.healed_at, at)

    def counters(self) -> dict[str, int]:
        """What the fault classes saw (:attr:`ClientOutcome.counters`)."""
        out: dict[str, int] = {}
        if self.dlq is not None and self.kafka._cluster is not None:
            out["dlq_refused"] = self.dlq.refused
            out["dlq_copies"] = len(self.dlq.copies(self.kafka.cluster))
            stubs = self.dlq.stubs(self.kafka.cluster).values()
            out["dlq_stubs"] = sum(1 for size in stubs if size >= 0)
            out["dlq_errors"] = self.dlq_errors
            out["dlq_spent"] = self.dlq.spent
        if self.slow is not None:
            out["slow_finished"] = self.slow.finished
        if self.commit is not None:
            out["commits"] = self.commit.commits
            out["commits_judged"] = self.commit.judged
            out["commits_timed_out"] = self.commit.timed_out
            out["commit_longest_ms"] = round(self.commit.longest * 1000)
        if self.auth is not None and self.endpoint is not None:
            out["auth_endpoint_refused"] = self.endpoint.refused
            out["auth_tokens"] = self.endpoint.issued
            out["auth_tokens_after"] = self.endpoint.issued_after
            out["auth_logins"] = self.auth.logins
            out["auth_reauths"] = self.auth.reauths
            out["auth_expired_sessions"] = self.auth.expired
            out["auth_tokens_refused"] = self.auth.refused
        if self.kafka.topology is not None:
            out["nodes_fetched"] = len(self.kafka.node_fetches)
            out["nodes_not_leader"] = self.kafka.not_leader
            out["nodes_outage_judged"] = self.outage_judged
            out["nodes_outages_quiet"] = self.outages_quiet
            out["nodes_coordinator_refused"] = self.kafka.topology.coordinator_refused
            out["nodes_handed_in_outage"] = self.outage_handed
            out["nodes_handed_coordinator_down"] = self.coordinator_down_handed
        if self.plan.restart is not None:
            out["restarts"] = self.restarts
            out["restarts_buffered"] = self.restarts_buffered
        out["unseen_counted"] = sum(
            c.machine.released_unseen + c.released_unreachable for c in self.unseen.cores
        )
        if self.net is not None:
            out["net_stalled"] = self.net.stalled
            out["net_lost"] = self.net.lost
            out["net_cut"] = self.net.cut
            out["net_late_closes"] = self.net.late_closes
            out["net_sessions_ended"] = self.net.sessions_ended
            out["net_spent"] = max(self.net.spent.values(), default=0)
        return out

    def disturbed(self, start: float, end: float, *, nodes: bool = True) -> bool:
        """Whether a fault that may end locks (a cut, crash, restart, leader move, or the
        token endpoint's outage) came between ``start`` and ``end`` (without ``nodes``:
        the node faults of sim.client_nodes left out)."""
        if any(start <= at <= end for at, _, _ in self.plan.faults):
            return True
        many = self.plan.nodes
        if nodes and many is not None:
            if any(at <= end and start <= at + down for at, _, _, down in many.faults):
                return True
        leader = self.plan.leader
        if leader is not None and leader.at <= end and start <= leader.heals_at:
            return True
        net = self.net
        if net is not None and any(a <= end and start <= b for a, b in net.windows()):
            return True
        auth = self.plan.auth
        return auth is not None and auth.down_at <= end and start <= auth.heals_at + 5.0

    def slowed(self, start: float, end: float) -> bool:
        """Whether the slow link of sim.client_net is on at some time between ``start``
        and ``end``."""
        slow = self.plan.net.slow if self.plan.net is not None else None
        return slow is not None and slow.at <= end and start <= slow.at + slow.length

    def client_config(self, name: str) -> ConnectionConfig:
        """One client's connection settings: with OAUTHBEARER, a token provider of its own."""
        if self.endpoint is None:
            return self.config
        provider = SimTokenProvider(self.endpoint, name)
        return dataclasses.replace(
            self.config, sasl=SaslConfig("OAUTHBEARER", token_provider=provider)
        )

    def fail(self, why: str) -> None:
        if self.violation is None:
            self.violation = why

    # -- the parts --------------------------------------------------------------------------

    async def write(self) -> None:
        config = self.client_config("writer")
        slow = self.plan.net.slow if self.plan.net is not None else None
        if slow is not None:
            key_bytes = slow.key_bytes(self.plan.partitions, LOCK_MS / 1000)
            await self._write_padded(config, slow.burst, key_bytes)
            return
        async with Producer(self.bootstrap, config=config, linger=0.0) as producer:
            for i in range(self.plan.records):
                value = f"v{i}".encode()
                partition = i % self.plan.partitions
                meta = await producer.send_and_wait(TOPIC, value, partition=partition)
                self.written[(meta.partition, meta.offset)] = value
                self.ends[meta.partition] = max(self.ends[meta.partition], meta.offset + 1)
                if self.plan.gaps[i]:
                    await anyio.sleep(self.plan.gaps[i])
        self.done_writing.set()

    async def _write_padded(self, config: ConnectionConfig, burst: int, key_bytes: int) -> None:
        """With a slow link (sim.client_net): records with a key of ``key_bytes``, the
        first ``burst`` of them sent together (one batch per partition), the rest one at a
        time."""
        key = b"k" * key_bytes
        async with Producer(self.bootstrap, config=config, linger=5.0) as producer:
            futures: list[tuple[bytes, Any]] = []
            for i in range(self.plan.records):
                value = f"v{i}".encode()
                partition = i % self.plan.partitions
                futures.append(
                    (value, await producer.send(TOPIC, value, key=key, partition=partition))
                )
                if i + 1 < burst:
                    continue
                await producer.flush()
                for value, future in futures:
                    meta = await future
                    self.written[(meta.partition, meta.offset)] = value
                    self.ends[meta.partition] = max(self.ends[meta.partition], meta.offset + 1)
                futures.clear()
                if i >= burst and self.plan.gaps[i]:
                    await anyio.sleep(self.plan.gaps[i])
        self.done_writing.set()

    def seen(self, record: Record[bytes, bytes], index: int) -> None:
        self.handed += 1
        topology = self.kafka.topology
        if topology is not None and topology.down:
            self.outage_handed += 1
            self.coordinator_down_handed += topology.coordinator in topology.down
        watch = self.watches[index]
        watch.last_handed = anyio.current_time()
        core = watch.consumer._core if watch.consumer is not None else None
        if core is not None:
            self.unseen.handed(
                core.member_id, record.partition, record.offset, record.delivery_count
            )
        key = (record.partition, record.offset)
        if self.slow is not None:
            why = self.slow.seen(key, record.delivery_count, anyio.current_time())
            if why is not None:
                self.fail(why)
        want = self.written.get(key)
        if want is not None and record.value != want:
            self.fail(f"invariant 4: {key} handed out as {record.value!r}, written {want!r}")

    def _ledger_view(self, consumer: ShareConsumer[bytes, bytes]) -> tuple[Any, int, int] | None:
        """Invariant 7's reading of a member: its ledger, the records it counts acquired
        and not handed out (nor answered) less those past the dead-letter limit (queued
        for the router, or taken by it and not yet settled: neither buffered nor the
        application's), and the records its buffer holds; ``None`` once closed."""
        core = consumer._core
        if core is None:
            return None
        machine = core.machine
        ledger = machine.ledger
        acquired = sum(buffered for buffered, _held, _sent in ledger.counts_by_partition().values())
        routing = len(machine.dead_letters) + machine.dead_letters_routing
        return ledger, acquired - routing, core.buffer.records

    def held(
        self, consumer: ShareConsumer[bytes, bytes], record: Record[bytes, bytes], index: int
    ) -> None:
        """Invariant 7, for ``async for`` (each record answered before the next is asked
        for): the member's acknowledgement ledger counts as acquired and not answered what
        its buffer holds and the record just handed out (``async for`` hands records out
        without telling the ledger; the next step answers them). Checked at every
        HELD_EVERY-th record of a member: reading the ledger writes its pending run of
        implicit accepts (its rule 7), and the run is left to grow in between. Records
        past the dead-letter limit wait acquired for the router, outside the buffer: they
        are counted apart (:meth:`_ledger_view`)."""
        watch = self.watches[index]
        watch.handed += 1
        if watch.handed % HELD_EVERY:
            return
        view = self._ledger_view(consumer)
        if view is None:
            return
        _ledger, acquired, buffered = view
        if acquired != buffered + 1:
            self.fail(
                f"invariant 7: member {index} was handed {(record.partition, record.offset)};"
                f" its ledger counts {acquired} records acquired and not answered, its"
                f" buffer holds {buffered} besides that one"
            )

    def held_batch(
        self, consumer: ShareConsumer[bytes, bytes], batch: list[Record[bytes, bytes]], index: int
    ) -> None:
        """Invariant 7, for ``poll()`` and ``batches()`` (implicit answers: the previous
        batch is accepted when the next is asked for): the member's ledger holds exactly
        the records of ``batch`` as handed out and unanswered, and counts as acquired and
        not handed out what its buffer holds. Checked at every batch (``poll()`` and
        ``batches()`` tell the ledger what they hand out); dead letters counted apart (as
        :meth:`held`)."""
        view = self._ledger_view(consumer)
        if view is None:
            return
        ledger, acquired, buffered = view
        unanswered = sorted(
            (tp.partition, offset)
            for tp, offsets in ledger.unacknowledged().items()
            for offset in offsets
        )
        handed = sorted((r.partition, r.offset) for r in batch)
        if unanswered != handed or acquired != buffered:
            self.fail(
                f"invariant 7: member {index} was handed {handed[:8]} (of {len(handed)});"
                f" its ledger holds {unanswered[:8]} (of {len(unanswered)}) handed out and"
                f" unanswered, and counts {acquired} records acquired and not handed out,"
                f" its buffer {buffered}"
            )

    async def member(self, style: str, index: int) -> None:
        """One member to the end; with a restart (sim.client_restart), first one consumer
        until the restart's time, closed then with whatever it holds, then another."""
        rng = random.Random(self.seed * 31 + index)
        restart = self.plan.restart
        if restart is not None and restart.member == index:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._leave, scope, index, restart)
                    await self.incarnation(style, index, rng)
            self.restarts += 1
            left = self.restart_left
            if left is not None and self.quiet(left, anyio.current_time()) and self.unseen.cores:
                self.unseen.quiet_close = self.unseen.cores[-1]
            # Opened while a broker is down, a consumer's start fails within about 2 s
            # (BrokerConnectError, documented): the application tries again, as a
            # supervisor would. Only the start: an error raised later is invariant 1's.
            for _ in range(REOPEN_TRIES - 1):
                started: list[bool] = []
                try:
                    await self.incarnation(style, index, rng, started)
                    return
                except BrokerConnectError:
                    if started:
                        raise
                await anyio.sleep(1.0)
        await self.incarnation(style, index, rng)

    async def _leave(self, scope: anyio.CancelScope, index: int, restart: RestartPlan) -> None:
        """sim.client_restart: cancel member ``index``'s first consumer at the first look
        from the restart's time on that finds records in its buffer (so the close has
        prefetch to release), or ``FALLBACK`` seconds after that time."""
        await anyio.sleep(max(0.0, restart.at - anyio.current_time()))
        latest = restart.at + restart.FALLBACK
        while anyio.current_time() < latest:
            consumer = self.watches[index].consumer
            core = consumer._core if consumer is not None else None
            if core is not None and core.buffer.records > 0:
                self.restarts_buffered += 1
                break
            await anyio.sleep(RESTART_LOOK)
        self.restart_left = anyio.current_time()
        scope.cancel()

    def quiet(self, start: float, end: float) -> bool:
        """Whether no fault of the schedule acts within a second of ``start..end``: none
        :meth:`disturbed` knows of, and no broker fault's refusal either."""
        start, end = start - 1.0, end + 1.0
        if self.disturbed(start, end):
            return False
        return not any(at <= end and start <= at + down for at, _, down in self.plan.faults)

    async def incarnation(
        self, style: str, index: int, rng: random.Random, started: list[bool] | None = None
    ) -> None:
        """One consumer of member ``index``, in ``style``, until cancelled (``started``:
        told once the consumer started)."""
        explicit = style in ("explicit",)
        watch = self.watches[index]
        dlq = self.plan.dlq
        async with ShareConsumer(
            self.bootstrap,
            group_id=GROUP,
            topics=[TOPIC],
            ack_mode="explicit" if explicit else "implicit",
            config=self.client_config(f"member-{index}"),
            dead_letter=dlq.policy() if dlq is not None else None,
        ) as consumer:
            if started is not None:
                started.append(True)
            watch.consumer = consumer
            self.unseen.cores.append(consumer._core)
            if style == "iter":
                async for record in consumer:
                    self.seen(record, index)
                    self.held(consumer, record, index)
                    if self._poisoned(record):
                        await self._reject_to_dlq(consumer, record, watch)
                    else:
                        await self._answered(consumer, record, index)
            elif style == "explicit":
                async for record in consumer:
                    self.seen(record, index)
                    self.held(consumer, record, index)
                    if self._poisoned(record):
                        await self._reject_to_dlq(consumer, record, watch)
                        continue
                    roll = rng.random()
                    if roll < 0.1 and record.delivery_count == 1:
                        self.released.add((record.partition, record.offset))
                        record.release()
                    elif roll < 0.15:
                        self.rejected.add((record.partition, record.offset))
                        record.reject()
                    else:
                        record.accept()
                    await self._answered(consumer, record, index)
            elif style == "poll":
                while True:
                    got = await consumer.poll(1.0)
                    for record in got:
                        self.seen(record, index)
                    self.held_batch(consumer, got, index)
            elif style == "batches":
                async for batch in consumer.batches():
                    for record in batch:
                        self.seen(record, index)
                    self.held_batch(consumer, batch, index)
            else:
                concurrency = rng.randint(1, 4)
                watch.concurrency = concurrency
                handler = self._handler(style, rng, index)
                await consumer.process(handler, concurrency=concurrency)

    async def _answered(
        self, consumer: ShareConsumer[bytes, bytes], record: Record[bytes, bytes], index: int
    ) -> None:
        """The application answered ``record`` (or, implicit, holds it): it commits now
        and then (sim.client_commit; C1 and C2 judge each commit)."""
        watch = self.commit
        if watch is None or not watch.answered(
            index,
            (record.partition, record.offset),
            record.delivery_count,
            math.inf if record.lock_deadline is None else record.lock_deadline,
        ):
            return
        core = consumer._core
        member_id = core.member_id if core is not None else ""
        start = anyio.current_time()
        try:
            await consumer.commit()
        except KafkaTimeoutError:
            why = watch.timed_out_at(index, start, anyio.current_time())
        else:
            why = watch.returned(index, member_id, start, anyio.current_time())
        if why is not None:
            self.fail(why)

    def _slow(self, record: Record[bytes, bytes]) -> bool:
        plan = self.plan.slow
        return plan is not None and record.value is not None and int(record.value[1:]) in plan.slow

    def _poisoned(self, record: Record[bytes, bytes]) -> bool:
        dlq = self.plan.dlq
        return dlq is not None and record.value is not None and int(record.value[1:]) in dlq.poison

    async def _reject_to_dlq(
        self, consumer: ShareConsumer[bytes, bytes], record: Record[bytes, bytes], watch: _Watch
    ) -> None:
        """What ``async for`` members do with a poison record: ``reject_to_dlq``, which
        releases it and raises DeadLetterError when the copy cannot be written (documented:
        the application goes on; the record comes back)."""
        # The application waits for the copy (for as long as the dead-letter topic
        # refuses it): no worker of it is free meanwhile (invariants 6 and M1).
        watch.writing_dlq = True
        try:
            await consumer.reject_to_dlq(record, reason="poison")
        except DeadLetterError as exc:
            if isinstance(exc, DeadLetterTopicError):
                raise  # documented to stop the consumer: not a transient fault
            self.dlq_errors += 1
        finally:
            watch.writing_dlq = False

    def _handler(self, style: str, rng: random.Random, index: int) -> Callable[..., Any]:
        watch = self.watches[index]
        box = [anyio.Event()]
        waiting = [0]
        delays = self.version != "4.1"  # a delayed release renews locks: Kafka 4.2+
        slow = self.slow
        slow_for = (self.plan.slow.factor if self.plan.slow else 0.0) * LOCK_MS / 1000

        async def handle(record: Record[bytes, bytes]) -> None:
            watch.running += 1
            handed_at = anyio.current_time()
            try:
                self.seen(record, index)
                old = box[0]
                box[0] = anyio.Event()
                old.set()  # a record arrived: handlers waiting for one go on
                if style == "gather" and waiting[0] + 1 < watch.concurrency:
                    # Answered only once another record arrived (or the writing ended),
                    # as a batching handler does; always leaving a worker free to take
                    # that record. No time bound: the consumer must keep fetching while
                    # it holds records nobody answers.
                    waiting[0] += 1
                    try:
                        while not self.done_writing.is_set() and not box[0].is_set():
                            with anyio.move_on_after(1.0):
                                await box[0].wait()
                    finally:
                        waiting[0] -= 1
                elif style != "gather":
                    await anyio.sleep(rng.choice([0.0, 0.0, 0.05, 0.3]))
                if slow is not None and record.delivery_count == 1 and self._slow(record):
                    key = (record.partition, record.offset)
                    entry = slow.start(key, record.delivery_count, handed_at)
                    try:
                        await anyio.sleep(slow_for)
                    finally:
                        slow.end(key, entry)
                if delays and record.delivery_count == 1 and rng.random() < 0.1:
                    raise RetryLater(rng.choice([0.5, 3.0]))
                if self._poisoned(record):
                    raise ValueError(f"poison {record.value!r}")  # every time: a dead letter
            finally:
                watch.running -= 1

        return handle

    async def faults(self) -> None:
        start = anyio.current_time()
        for at, kind, down in self.plan.faults:
            await anyio.sleep(max(0.0, start + at - anyio.current_time()))
            if kind == "cut":
                self.kafka.cut_now()
            elif kind == "crash":
                self.kafka.refuse_until = anyio.current_time() + down
                self.kafka.crash_now()
            elif kind == "restart":
                self.kafka.refuse_until = anyio.current_time() + down
                self.kafka.restart_now()
            else:
                self.kafka.move_now(self.rng.randrange(self.plan.partitions))
            self.healed_at = max(self.healed_at, anyio.current_time() + down)

    async def leaderless(self, plan: LeaderPlan) -> None:
        """One partition without a leader from ``plan.at`` for ``plan.down`` seconds."""
        start = anyio.current_time()
        await anyio.sleep(max(0.0, start + plan.at - anyio.current_time()))
        self.kafka.withdraw_now(plan.partition)
        await anyio.sleep(plan.down)
        self.kafka.restore_now(plan.partition)

    async def node_faults(self, plan: NodesPlan) -> None:
        """The node faults of sim.client_nodes, in order (one node down at a time)."""
        start = anyio.current_time()
        tid = self.kafka.cluster.model.topics[TOPIC]
        for at, kind, which, down in plan.faults:
            await anyio.sleep(max(0.0, start + at - anyio.current_time()))
            if kind != "crash":
                self.kafka.node_move_now(which)
                continue
            topology = self.kafka.topology
            assert topology is not None
            led = {p for p in range(self.plan.partitions) if topology.leader((tid, p)) != which}
            # Judged only while no other fault acts (nor did just before: a reconnect), nor
            # the slow link: over it a batch may take longer than STALL to arrive, or never
            # fit in the lock (seed 5001 on 4.1).
            quiet = not self.disturbed(at - QUIET, at + down, nodes=False) and not self.slowed(
                at - QUIET, at + down
            )
            self.kafka.node_crash_now(which)
            self.outage = led if quiet else None
            self.outages_quiet += quiet
            await anyio.sleep(down)
            self.outage = None
            self.kafka.node_back_now(which)

    async def outage_stalls(self) -> None:
        """M1 (sim.client_nodes): while one node is down (and no other fault class acts),
        a member with a free worker is never left for :data:`STALL` seconds without a
        record while records of its partitions that live nodes led throughout wait at the
        broker."""
        since: dict[int, float] = {}
        while True:
            await anyio.sleep(0.25)
            led = self.outage
            if not led:
                since.clear()
                continue
            now = anyio.current_time()
            states = self.kafka.states(self.plan.partitions, self.ends)
            for i, w in enumerate(self.watches):
                mine = w.assigned() & led
                waiting = any(
                    s is RecordState.AVAILABLE and p in mine for (p, _), s in states.items()
                )
                if not (waiting and w.free()):
                    since.pop(i, None)
                    continue
                self.outage_judged += 1
                start = since.setdefault(i, max(now, w.last_handed))
                start = since[i] = max(start, w.last_handed)
                if now - start > STALL:
                    self.fail(
                        f"invariant M1: member {i} ({self.plan.styles[i]}) got no record for "
                        f"{now - start:.1f} s while a node was down and records of partitions "
                        f"{sorted(mine)}, led by live nodes, waited at the broker"
                    )

    async def healthy(
        self,
        bound: float = HEALTH_BOUND,
        name: str = "A3",
        after: str = "the token endpoint came back",
    ) -> None:
        """A3 (and N3, with its bound): once the token endpoint is back and every fault
        healed, every running consumer's health() is ok within ``bound`` seconds."""
        while True:
            due = max(self.healed_at, self.plan.last_fault) + bound
            if anyio.current_time() >= due:
                break
            await anyio.sleep(due - anyio.current_time())
        for i, w in enumerate(self.watches):
            c = w.consumer
            if c is None:
                continue
            try:
                health = c.health()
            except Exception:  # closed: nothing to judge
                continue
            if health.running and not health.ok:
                self.fail(
                    f"invariant {name}: member {i} ({self.plan.styles[i]}) not healthy "
                    f"{bound:g} s after {after}: {health}"
                )

    async def stalls(self) -> None:
        """Invariant 6: once the faults healed, a member with a free worker is never left
        for :data:`STALL` seconds without a record while records it may take are
        available at the broker."""
        since: dict[int, float] = {}
        while True:
            await anyio.sleep(0.25)
            now = anyio.current_time()
            if now < self.healed_at or now < self.plan.last_fault:
                since.clear()
                continue
            states = self.kafka.states(self.plan.partitions, self.ends)
            for i, w in enumerate(self.watches):
                mine = w.assigned()
                waiting = any(
                    s is RecordState.AVAILABLE and p in mine for (p, _), s in states.items()
                )
                if not (waiting and w.free()):
                    since.pop(i, None)
                    continue
                start = since.setdefault(i, max(now, w.last_handed))
                start = since[i] = max(start, w.last_handed)
                if now - start > STALL:
                    self.fail(
                        f"invariant 6: member {i} ({self.plan.styles[i]}) got no record for "
                        f"{now - start:.1f} s with a free worker while records of its "
                        f"partitions {sorted(mine)} waited at the broker"
                    )

    async def watch(self, stop: anyio.CancelScope) -> None:
        """Invariants 2 and 3, once everything is written and the faults healed."""
        await self.done_writing.wait()
        await anyio.sleep(max(0.0, self.plan.last_fault - anyio.current_time()))
        # Slow handlers (sim.client_slow) hold a worker for their whole time, one after the
        # other when concurrency is 1, and the records waiting behind them may need a lock
        # more to come back: the bound counts from when they could have finished.
        bound = BOUND + (self.plan.slow.allowance(LOCK_MS / 1000) if self.plan.slow else 0.0)
        deadline = max(self.healed_at, anyio.current_time()) + bound
        while True:
            states = self.kafka.states(self.plan.partitions, self.ends)
            pending = [k for k, s in states.items() if s not in _FINAL]
            archived = {k for k, s in states.items() if s is RecordState.ARCHIVED}
            if self.dlq is not None:
                poison = {k for k, v in self.written.items() if int(v[1:]) in self.dlq.plan.poison}
                poison |= self.released  # routable too: see DeadLetterPolicy.max_deliveries
                why = self.dlq.check(
                    self.kafka.cluster, archived, self.rejected, poison, final=not pending
                )
                if why is not None:
                    self.fail(why)
            else:
                for key in sorted(archived - self.rejected):
                    self.fail(f"invariant 3: {key} archived, the application never rejected it")
            if self.net is not None:
                why = self.net.check()
                if why is not None:
                    self.fail(why)
            if not pending or self.violation is not None:
                break
            if anyio.current_time() >= max(deadline, self.healed_at + bound):
                self.fail(
                    f"invariant 2: {len(pending)} record(s) not accepted {bound:g} s after "
                    f"the faults healed and the last write: {sorted(pending)[:5]}"
                )
                break
            await anyio.sleep(0.25)
        self.stopped_at = anyio.current_time()
        stop.cancel()

    async def main(self) -> None:
        token = dialer.set(self.kafka.dial)
        self.root = root = anyio.CancelScope()
        try:
            with root:
                await self._main()
        finally:
            dialer.reset(token)
        if root.cancelled_caught and self.violation is None:
            self.fail("the run was cancelled")

    async def _main(self) -> None:
        async with anyio.create_task_group() as server:
            await self.kafka.serve(server)
            for model in self.kafka._models():
                model.release_log = []  # invariant 8
            self.kafka.cluster.create_topic(TOPIC, self.plan.partitions)
            self.kafka.cluster.group_configs[GROUP] = {
                "share.auto.offset.reset": "earliest",
                "share.record.lock.duration.ms": str(LOCK_MS),
                "share.delivery.count.limit": str(DELIVERY_LIMIT),
            }
            self.kafka.cluster._apply_group_configs(GROUP)
            with anyio.move_on_after(HORIZON) as horizon:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.watch, tg.cancel_scope)
                    tg.start_soon(self.stalls)
                    if self.plan.auth is not None:
                        tg.start_soon(self.healthy)
                    if self.net is not None:
                        tg.start_soon(self.healthy, NET_HEALTH_BOUND, "N3", "the transport healed")
                        tg.start_soon(self.net.stalls)
                    tg.start_soon(self.faults)
                    if self.plan.leader is not None:
                        tg.start_soon(self.leaderless, self.plan.leader)
                    if self.plan.nodes is not None:
                        tg.start_soon(self.node_faults, self.plan.nodes)
                        tg.start_soon(self.outage_stalls)
                    tg.start_soon(self._guard, self.write, "the producer")
                    for i, style in enumerate(self.plan.styles):
                        tg.start_soon(self._guard, self.member, f"member {i} ({style})", style, i)
            if horizon.cancelled_caught:
                self.fail(f"the schedule did not end within {HORIZON:g} virtual seconds")
            elif anyio.current_time() - self.stopped_at > CLOSE_BOUND:
                took = anyio.current_time() - self.stopped_at
                self.fail(f"invariant 5: the clients took {took:.1f} s to close")
            if self.violation is None:
                limit = self.plan.dlq.max_deliveries if self.plan.dlq is not None else None
                releases = [r for m in self.kafka._models() for r in m.release_log or ()]
                why = self.unseen.check(releases, limit)
                if why is not None:
                    self.fail(why)
            server.cancel_scope.cancel()

    async def _guard(self, fn: Callable[..., Any], what: str, *args: Any) -> None:
        """Invariants 1 and 5: nothing raised out of a client; a close ends in time."""
        try:
            await fn(*args)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a client's, or an application-side bug of this module
            self.fail(f"invariant 1: {what} raised {_name(exc)}")


def _name(exc: BaseException) -> str:
    # The innermost error of a task group's group, with its type.
    # (Duck-typed: BaseExceptionGroup is not a builtin before Python 3.11.)
    inner: tuple[BaseException, ...] = getattr(exc, "exceptions", ())
    while len(inner) == 1:
        exc = inner[0]
        inner = getattr(exc, "exceptions", ())
    return f"{type(exc).__name__}: {exc}"


_FINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class _SpinWatch:
    """Invariant 9, *no spin*: the virtual clock moves only when every task waits, so
    clients that never wait (a loop that finds nothing to do and goes round again without
    a deadline) stop it for good, and the run would never end. Counted per scheduler
    batch (trio's ``before_io_wait``, once per pass over the runnable tasks): after
    :data:`SPIN_BATCHES` passes at one virtual instant the run fails and is cancelled."""

    def __init__(self, schedule: _Schedule, clock: Any) -> None:
        self.schedule = schedule
        self.clock = clock
        self.at = -1.0
        self.batches = 0
        #: the most passes seen at one instant (a normal run's stays far below the bound)
        self.most = 0

    def before_io_wait(self, timeout: float) -> None:
        del timeout
        now = self.clock.current_time()
        if now != self.at:
            self.at = now
            self.batches = 0
            return
        self.batches += 1
        if self.batches > self.most:
            self.most = self.batches
            if self.batches == SPIN_BATCHES:
                self.schedule.fail(
                    f"invariant 9: the clients ran {SPIN_BATCHES:,} scheduler passes at"
                    f" virtual time {now:.3f} without waiting (a busy loop)"
                )
                root = self.schedule.root
                if root is not None:
                    root.cancel()


def _spin_instrument(watch: _SpinWatch) -> Any:
    """``watch`` as a trio instrument (trio is imported only to run a schedule)."""
    import trio.abc

    class SpinInstrument(trio.abc.Instrument):
        def before_io_wait(self, timeout: float) -> None:
            watch.before_io_wait(timeout)

    return SpinInstrument()


#: Deliberate bugs (``--mutant``), planted in the real clients for one run: each must
#: make some schedule fail (tests/testing/test_client_simulation.py).
MUTANTS: dict[str, Callable[[], Any]] = {
    "dry-forever": mutants.dry_forever,
    "handed-short": mutants.handed_short,
    "dlq-release-at-once": release_at_once,
    "dlq-no-stub": no_stub,
    "token-give-up": give_up_for_good,
    "keeper-off": keeper_off,
    "oversize-off": guard_forgets,
    "fetch-waits-forever": fetch_waits_forever,
    "leader-search-off": search_off,
    "new-leader-unfetched": new_leader_unfetched,
    "commit-waits": commit_waits,
    "commit-early": commit_early,
}


def draw_plan(seed: int, *, net: bool = True) -> _Plan:
    """The schedule of ``seed``, every fault class's draw included, without running it
    (without ``net``, its transport faults left out)."""
    plan = _Plan.draw(random.Random(seed))
    plan.dlq = DlqPlan.draw(seed, plan.records, plan.styles)
    plan.auth = AuthPlan.draw(seed)
    plan.slow = SlowPlan.draw(seed, plan.records, plan.styles)
    net_plan = NetPlan.draw(seed, plan.records)
    plan.net = net_plan if net else None
    plan.leader = LeaderPlan.draw(seed, plan.partitions)
    plan.nodes = NodesPlan.draw(seed, plan.partitions)
    if plan.slow is None and net_plan is None and plan.auth is None:
        # Not with slow handlers or transport faults: their bounds on attempts spent count
        # no restart (and the draw does not depend on whether net faults are left out).
        # Not with the token endpoint's outage: a consumer opened while it is down cannot
        # log in, and its start fails (BrokerConnectError) as documented.
        plan.restart = RestartPlan.draw(seed, len(plan.styles))
    plan.commit = CommitPlan.draw(seed, plan.styles)
    return plan


def run(
    seed: int, version: str = "4.4", mutant: str | None = None, *, net: bool = True
) -> ClientOutcome:
    """Run the schedule of ``seed`` against a FakeKafka imitating ``version`` (with the
    deliberate bug ``mutant``, one of :data:`MUTANTS`, planted; without ``net``, the
    schedule's transport faults left out, to show what they alone catch)."""
    import trio
    import trio._core._run as trio_run
    import trio.testing

    planted = MUTANTS[mutant]() if mutant is not None else contextlib.nullcontext()
    plan = draw_plan(seed, net=net)
    schedule = _Schedule(seed, version, plan)
    ids = random.Random(seed ^ 0x5EED)
    state = random.getstate()
    random.seed(seed)
    trio_run._r.seed(seed)
    # Trio's own switch for seeded runs (Hypothesis sets it): the run queue is sorted by
    # task creation, then shuffled by the seeded ``_r``, instead of reversed at random.
    deterministic = trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    clock = trio.testing.MockClock(autojump_threshold=0)
    spin = _spin_instrument(_SpinWatch(schedule, clock))
    try:
        with (
            planted,
            mock.patch("uuid.uuid4", lambda: uuid.UUID(int=ids.getrandbits(128), version=4)),
        ):
            trio.run(schedule.main, clock=clock, instruments=[spin])
    except BaseException as exc:  # a crash of the run itself
        schedule.fail(f"the run crashed: {type(exc).__name__}: {exc}")
    finally:
        random.setstate(state)
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = deterministic  # type: ignore[misc]
    return ClientOutcome(
        seed,
        version,
        schedule.violation,
        plan.describe(),
        schedule.handed,
        clock.current_time(),
        schedule.counters(),
    )


def search(
    seeds: Iterable[int], versions: tuple[str, ...] = ("4.1", "4.4"), mutant: str | None = None
) -> list[ClientOutcome]:
    """Run every seed on every version; the failing outcomes, in order."""
    bad = []
    for seed in seeds:
        for version in versions:
            out = run(seed, version, mutant)
            if out.violation is not None:
                bad.append(out)
    return bad


def main(argv: list[str] | None = None) -> int:
    """Replay one seed (``--seed``) or search ``--count`` seeds from ``--start``."""
    ap = argparse.ArgumentParser(
        prog="python -m sharecon.testing.sim.client",
        description="The real clients on a virtual clock against an in-memory FakeKafka.",
    )
    ap.add_argument("--seed", type=int, help="replay this seed")
    ap.add_argument("--start", type=int, default=0, help="first seed of a search")
    ap.add_argument("--count", type=int, default=100, help="seeds to search")
    ap.add_argument("--version", default="4.4", help="Kafka line the fake imitates (4.1 .. 4.4)")
    ap.add_argument("--mutant", choices=sorted(MUTANTS), help="run against a deliberate bug")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    failed = 0
    for seed in seeds:
        out = run(seed, args.version, args.mutant)
        if out.violation is not None or args.seed is not None:
            status = out.violation or "ok"
            print(f"seed {seed} ({out.handed} handed out, {out.elapsed:.1f} virtual s): {status}")
            for line in out.plan:
                print("  " + line)
            if out.violation is not None:
                print("  replay:", out.replay(args.mutant))
                failed += 1
    if args.seed is None:
        print(f"{len(seeds)} schedules, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
