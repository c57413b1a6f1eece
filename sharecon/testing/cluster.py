"""A real multi-broker Kafka 4.x cluster on loopback: a KRaft controller quorum and N brokers.

::

    with KafkaCluster(brokers=3, proxy=True) as cluster:
        cluster.tools.create_topic("orders", partitions=3, replication_factor=3)
        leader = cluster.leader_of("orders", 0)
        leader.kill()  # SIGKILL; leadership moves to another replica
        leader.start()  # back on the same data and ports
        cluster.brokers[0].proxy.cut()  # every client connection to broker 1 is cut

Every node is its own JVM with its own folder, killed (and the folder removed) however the
Python process ends, like :class:`~sharecon.testing.broker.KafkaBroker`.

Each broker has two listeners. ``CLIENT`` is what :attr:`KafkaCluster.bootstrap` names and
what clients under test use; with ``proxy=True`` the brokers advertise a
:class:`~sharecon.testing.fault_proxy.FaultProxy` port in front of it, so every byte a client
exchanges with any broker goes through a proxy the test controls. ``INTERNAL`` carries
replication and :attr:`KafkaCluster.tools`, so faults injected for clients never disturb
the cluster itself or the test's own arranging.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.errors import UnknownTopicOrPartitionError
from sharecon.testing._jvm import (
    DEFAULT_JVM_OPTS,
    NodeProcess,
    PortTaken,
    free_ports,
    minor,
    new_cluster_id,
)
from sharecon.testing._managed import Server
from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    ClassArchive,
    KafkaInstall,
    find_java,
    provision,
    resolve_version,
)
from sharecon.testing._sync import with_admin
from sharecon.testing.broker import TEST_BROKER_CONFIG
from sharecon.testing.tools import KafkaTools

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from typing_extensions import Self

    from sharecon.admin import PartitionDescription, TopicDescription
    from sharecon.testing.fault_proxy import FaultProxy, ToxiproxyServer

__all__ = ["CLUSTER_BROKER_CONFIG", "ClusterBroker", "ClusterController", "KafkaCluster"]

log = logging.getLogger("sharecon.testing")

_START_TIMEOUT = 180.0  # several cold JVMs share 2 cores
_CONTROLLER_JVM = [
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]
_BROKER_JVM = [
    "-Xms128m",
    "-Xmx512m",
    *DEFAULT_JVM_OPTS[2:],
]
_FIRST_CONTROLLER_ID = 100  # broker ids are 1..N, so the ids say which kind a node is
#: How long a new topic may take to reach the metadata of the broker asked about it.
_NEW_TOPIC_WAIT = 30.0

#: Settings every cluster broker gets on top of
#: :data:`~sharecon.testing.broker.TEST_BROKER_CONFIG`: the internal topics (offsets,
#: share-group state, transactions) are replicated to 3 brokers with ``min.insync.replicas=2``,
#: as in production, so losing one broker loses nothing. Fewer brokers lower both.
CLUSTER_BROKER_CONFIG: dict[str, str] = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # A restarted broker rejoins the ISR within seconds instead of the default 30.
    "replica.lag.time.max.ms": "10000",
    # Leadership goes back to the preferred replica only when a test asks for it.
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.enable": "true",
}

_CONFIG_4_3: dict[str, str] = {
    "group.share.assignment.interval.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
}


class _Node:
    """What controllers and brokers share: a folder, a config, a JVM."""

    kind = "node"

    def __init__(self, cluster: KafkaCluster, node_id: int, jvm_opts: list[str]) -> None:
        self.node_id = node_id
        self._cluster = weakref.proxy(cluster)
        self._jvm_opts = jvm_opts
        self._res = NodeProcess()
        self._finalizer = weakref.finalize(self, self._res.cleanup)

    @property
    def running(self) -> bool:
        """Whether this node's JVM is alive."""
        return self._res.running

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        proc = self._res.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def log_path(self) -> Path:
        """This node's log file (inside the cluster's temporary folder)."""
        if self._res.dir is None:
            raise BrokerStartError(f"{self} has not been started")
        return self._res.dir / "broker.log"

    def __repr__(self) -> str:
        return f"<{self.kind} {self.node_id} {'running' if self.running else 'stopped'}>"

    def _ready_port(self) -> int:
        raise NotImplementedError

    def _prepare(self, folder: Path, config: Mapping[str, str], archive: ClassArchive) -> None:
        folder.mkdir()
        self._res.dir = folder
        self._res.archive = archive
        self._res.write_config(config)

    def _launch(self) -> int:
        c = self._cluster
        return self._res.launch(c._java, self._jvm_opts, c._require_install())

    def _wait(self, offset: int, started: float) -> None:
        try:
            self._res.wait_ready(
                offset,
                port=self._ready_port(),
                what=f"Kafka {self._cluster.version} {self.kind} {self.node_id}",
                started=started,
                timeout=self._cluster.start_timeout,
                ports_fixed=False,
            )
        except BaseException:
            self._res.stop_jvm(graceful=False)
            raise

    def start(self) -> None:
        """Start this node again (after :meth:`stop` or :meth:`kill`) on the same data and
        ports, and wait until it serves. Does nothing while it runs."""
        if self.running:
            return
        if self._res.dir is None:
            raise BrokerStartError(f"{self} belongs to a cluster that is not started")
        started = time.monotonic()
        self._wait(self._launch(), started)
        log.info("%s started in %.1f s", self, time.monotonic() - started)

    def stop(self) -> None:
        """Stop this node cleanly (SIGTERM: a broker hands its leaderships over first)."""
        self._res.stop_jvm(graceful=True)

    def kill(self) -> None:
        """SIGKILL this node, keeping its data so :meth:`start` brings it back."""
        self._res.stop_jvm(graceful=False)

    def restart(self) -> None:
        """:meth:`stop` (if running) then :meth:`start`."""
        self.stop()
        self.start()


class ClusterController(_Node):
    """One KRaft controller of a :class:`KafkaCluster`."""

    kind = "controller"

    def __init__(self, cluster: KafkaCluster, node_id: int, port: int) -> None:
        super().__init__(cluster, node_id, list(_CONTROLLER_JVM))
        self.port = port  #: the CONTROLLER listener

    def _ready_port(self) -> int:
        return self.port


class ClusterBroker(_Node):
    """One broker of a :class:`KafkaCluster`: ``node_id``, its ports and its proxy."""

    kind = "broker"

    def __init__(
        self,
        cluster: KafkaCluster,
        node_id: int,
        *,
        client_port: int,
        internal_port: int,
        jvm_opts: list[str],
    ) -> None:
        super().__init__(cluster, node_id, jvm_opts)
        self.client_port = client_port  #: the CLIENT listener itself (behind the proxy)
        self.internal_port = internal_port  #: the INTERNAL listener (replication, tools)
        self.proxy: FaultProxy | None = None  #: the fault proxy in front of CLIENT, if any

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` clients are told to use: the proxy's when there is one."""
        if self.proxy is not None:
            return self.proxy.address
        return f"127.0.0.1:{self.client_port}"

    @property
    def advertised_port(self) -> int:
        """The port in :attr:`address`."""
        return self.proxy.listen_port if self.proxy is not None else self.client_port

    def _ready_port(self) -> int:
        return self.client_port


def describe_partition(
    bootstrap: str, topic: str, partition: int, *, timeout: float = _NEW_TOPIC_WAIT
) -> PartitionDescription:
    """``topic``-``partition`` as the cluster at ``bootstrap`` describes it.

    Waits, up to ``timeout`` seconds, while the broker asked does not know the topic or the
    partition yet: right after ``create_topic`` the other brokers' metadata lags the
    controller's by a moment, and a test asking then must not fail for it.

    :raises UnknownTopicOrPartitionError: still unknown after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            described: dict[str, TopicDescription] = with_admin(
                bootstrap, lambda a: a.describe_topics([topic])
            )
            partitions = described[topic].partitions
            for p in partitions:
                if p.partition == partition:
                    return p
            problem = f"topic {topic!r} has {len(partitions)} partitions here"
        except UnknownTopicOrPartitionError as e:
            problem = str(e)
        if time.monotonic() >= deadline:
            raise UnknownTopicOrPartitionError(
                f"{topic}-{partition} still unknown after {timeout:.0f} s: {problem}"
            )
        time.sleep(0.25)


class KafkaCluster(Server):
    """A KRaft controller quorum and ``brokers`` brokers on 127.0.0.1, share groups on.

    :param brokers: how many brokers (node ids 1..N).
    :param version: a Kafka 4.1+ version or line, as for :class:`~sharecon.testing.KafkaBroker`.
    :param controllers: how many dedicated controllers (node ids 100, 101, ...); 1 is enough
        for tests that kill brokers, 3 survive the loss of a controller too.
    :param extra_config: broker properties over :data:`CLUSTER_BROKER_CONFIG`.
    :param features: ``--feature name=level`` at format time (4.1 gets ``share.version=1``).
    :param proxy: put a :class:`~sharecon.testing.fault_proxy.FaultProxy` in front of each
        broker's client listener and advertise it (needs Toxiproxy; see ``docs/testing.md``).
    :param start_timeout: seconds each node may take to serve.
    :param jvm_opts: broker JVM options replacing the defaults (512 MiB heap, serial GC).

    Use as a context manager (sync or async), or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        brokers: int = 3,
        version: str = DEFAULT_KAFKA_VERSION,
        *,
        controllers: int = 1,
        extra_config: Mapping[str, str] | None = None,
        features: Mapping[str, int] | None = None,
        proxy: bool = False,
        start_timeout: float | None = None,
        jvm_opts: list[str] | None = None,
    ) -> None:
        if not 1 <= brokers <= 9:
            raise BrokerStartError(f"brokers={brokers}: a test cluster has 1 to 9 brokers")
        if controllers not in (1, 3, 5):
            raise BrokerStartError(f"controllers={controllers}: use 1, 3 or 5 (a quorum)")
        self.version = resolve_version(version)
        self._n_brokers = brokers
        self._n_controllers = controllers
        self._extra = dict(extra_config or {})
        self._features = dict(features or {})
        if self.version.startswith("4.1.") and "share.version" not in self._features:
            self._features["share.version"] = 1
        self._want_proxy = proxy
        env_timeout = os.environ.get("SHARECON_BROKER_START_TIMEOUT")
        self.start_timeout = start_timeout or (
            float(env_timeout) if env_timeout else _START_TIMEOUT
        )
        self._jvm_opts = jvm_opts or list(_BROKER_JVM)
        self._install: KafkaInstall | None = None
        self._java = ""
        self._dir: Path | None = None
        self._proxy_server: ToxiproxyServer | None = None
        self._tools: KafkaTools | None = None
        self.brokers: list[ClusterBroker] = []  #: the brokers, node ids 1..N in order
        self.controllers: list[ClusterController] = []  #: the KRaft controllers

    # -- public surface -------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every broker's client address (proxied when ``proxy=True``), comma-separated."""
        self._require_started()
        return ",".join(b.address for b in self.brokers)

    @property
    def plaintext_bootstrap(self) -> str:
        """Every broker's INTERNAL listener: never proxied, for arranging tests."""
        self._require_started()
        return ",".join(f"127.0.0.1:{b.internal_port}" for b in self.brokers)

    @property
    def tools(self) -> KafkaTools:
        """Kafka's Java tools (same version) on the INTERNAL listeners."""
        self._require_started()
        if self._tools is None:
            self._tools = KafkaTools(self.plaintext_bootstrap, install=self._require_install())
        return self._tools

    @property
    def proxies(self) -> list[FaultProxy]:
        """The brokers' fault proxies in node id order (empty without ``proxy=True``)."""
        return [b.proxy for b in self.brokers if b.proxy is not None]

    def broker(self, node_id: int) -> ClusterBroker:
        """The broker with this node id."""
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        raise KeyError(f"no broker {node_id} in {self}")

    def leader_of(self, topic: str, partition: int) -> ClusterBroker:
        """The broker leading ``topic``-``partition`` now (asked over INTERNAL).

        A topic created a moment ago is waited for (up to 30 s) until the broker asked knows
        it: each broker learns a new topic from the controller on its own schedule.

        :raises BrokerStartError: the partition has no leader (all its replicas are down).
        """
        leader = describe_partition(self.plaintext_bootstrap, topic, partition).leader_id
        if leader < 0:
            raise BrokerStartError(f"{topic}-{partition} has no leader now")
        return self.broker(leader)

    def coordinator_of(self, group: str) -> ClusterBroker:
        """The broker that is the group coordinator of ``group`` (share groups included)."""
        node = with_admin(self.plaintext_bootstrap, lambda a: a.find_coordinator(group))
        return self.broker(node)

    def wait_in_sync(self, timeout: float = 120.0, *, topics: Iterable[str] | None = None) -> None:
        """Wait until every partition (internal topics too) has a leader and all replicas in sync.

        A rolling restart waits for this between brokers, as an operator would.

        :raises BrokerStartError: still under-replicated after ``timeout`` seconds.
        """
        names = None if topics is None else list(topics)
        deadline = time.monotonic() + timeout
        lagging: list[str] = []
        for _ in range(int(timeout / 0.5) + 1):
            described = with_admin(
                self.plaintext_bootstrap,
                lambda a: (
                    a.list_topics(internal=True) if names is None else a.describe_topics(names)
                ),
            )
            lagging = [
                f"{t.name}-{p.partition} (leader {p.leader_id}, isr {list(p.isr)})"
                for t in described.values()
                for p in t.partitions
                if p.leader_id < 0 or set(p.isr) != set(p.replicas)
            ]
            if not lagging or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if lagging:
            raise BrokerStartError(
                f"{len(lagging)} partitions not in sync after {timeout:.0f} s: {lagging[:5]}"
            )

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker ``to`` lead ``topic``-``partition`` without stopping anyone.

        Reorders the replicas so ``to`` is preferred (a reassignment that moves no data when
        ``to`` already holds a replica), then runs a preferred-leader election: what an
        operator does with ``kafka-reassign-partitions`` and ``kafka-leader-election``.
        """
        replicas = list(describe_partition(self.plaintext_bootstrap, topic, partition).replicas)
        if to in replicas:
            replicas.remove(to)
        else:
            replicas.pop()
        plan = {
            "version": 1,
            "partitions": [{"topic": topic, "partition": partition, "replicas": [to, *replicas]}],
        }
        assert self._dir is not None
        plan_file = self._dir / f"reassign-{topic}-{partition}-{time.monotonic_ns()}.json"
        plan_file.write_text(json.dumps(plan))
        cmd = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
        server = ("--bootstrap-server", self.plaintext_bootstrap)
        self.tools.run(cmd, *server, "--reassignment-json-file", str(plan_file), "--execute")
        for _ in range(120):
            out = self.tools.run(
                cmd, *server, "--reassignment-json-file", str(plan_file), "--verify"
            )
            if "is completed" in out and "still in progress" not in out:
                break
            time.sleep(0.5)
        else:
            raise BrokerStartError(f"reassigning {topic}-{partition} did not complete: {out}")
        self.tools.run(
            "org.apache.kafka.tools.LeaderElectionCommand",
            *server,
            "--election-type",
            "PREFERRED",
            "--topic",
            topic,
            "--partition",
            str(partition),
        )
        for _ in range(60):
            if self.leader_of(topic, partition).node_id == to:
                return
            time.sleep(0.5)
        raise BrokerStartError(f"broker {to} did not become leader of {topic}-{partition}")

    def __repr__(self) -> str:
        up = sum(b.running for b in self.brokers)
        return f"<KafkaCluster {self.version} {up}/{self._n_brokers} brokers up>"

    def start(self) -> Self:
        """Provision, format every node, start the controllers, then the brokers (in parallel).

        :raises BrokerStartError: naming the node and step that failed.
        """
        if self.brokers:
            return self
        self._java = find_java()
        self._install = provision(self.version)
        for attempt in range(1, 4):
            try:
                self._start_once()
                return self
            except PortTaken as exc:
                self.stop()
                if attempt == 3:
                    raise BrokerStartError(str(exc)) from None
                log.info("port race on start (%s), retrying with new ports", exc)
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop every node (brokers cleanly, in parallel) and remove the folder. Idempotent."""
        brokers, self.brokers = self.brokers, []
        controllers, self.controllers = self.controllers, []
        # Clean stops in parallel: a broker's controlled shutdown waits for the controller.
        with ThreadPoolExecutor(max(1, len(brokers))) as pool:
            list(pool.map(lambda b: b._res.stop_jvm(graceful=True), brokers))
        for node in [*brokers, *controllers]:
            node._res.cleanup()
        server, self._proxy_server = self._proxy_server, None
        if server is not None:
            server.stop()
        self._tools = None
        folder, self._dir = self._dir, None
        if folder is not None and not os.environ.get("SHARECON_KEEP_BROKER_DIR"):
            shutil.rmtree(folder, ignore_errors=True)

    # -- internals ------------------------------------------------------------

    def _require_started(self) -> None:
        if not self.brokers:
            raise BrokerStartError("the cluster has not been started")

    def _require_install(self) -> KafkaInstall:
        if self._install is None:
            raise BrokerStartError("the cluster has not been started")
        return self._install

    def _start_once(self) -> None:
        install = self._require_install()
        started = time.monotonic()
        self._dir = Path(tempfile.mkdtemp(prefix=f"sharecon-cluster-{self.version}-"))
        ports = free_ports(self._n_controllers + 2 * self._n_brokers)
        self.controllers = [
            ClusterController(self, _FIRST_CONTROLLER_ID + i, ports[i])
            for i in range(self._n_controllers)
        ]
        rest = ports[self._n_controllers :]
        self.brokers = [
            ClusterBroker(
                self,
                i + 1,
                client_port=rest[2 * i],
                internal_port=rest[2 * i + 1],
                jvm_opts=list(self._jvm_opts),
            )
            for i in range(self._n_brokers)
        ]
        if self._want_proxy:
            self._start_proxies()
        voters = ",".join(f"{c.node_id}@127.0.0.1:{c.port}" for c in self.controllers)
        cluster_id = new_cluster_id()
        archive = ClassArchive(install, self._java, "broker")
        nodes: list[_Node] = [*self.controllers, *self.brokers]
        for node in nodes:
            config = (
                self._controller_config(node, voters)
                if isinstance(node, ClusterController)
                else self._broker_config(node, voters)  # type: ignore[arg-type]
            )
            assert self._dir is not None
            node._prepare(self._dir / f"{node.kind}-{node.node_id}", config, archive)
        # Formatting is a short JVM each: in parallel it takes about as long as one.
        with ThreadPoolExecutor(len(nodes)) as pool:
            list(
                pool.map(
                    lambda n: n._res.format(
                        self._java, install, cluster_id, features=self._features
                    ),
                    nodes,
                )
            )
        for group in (self.controllers, self.brokers):
            launched = [(node, node._launch()) for node in group]
            with ThreadPoolExecutor(len(launched)) as pool:
                list(pool.map(lambda pair: pair[0]._wait(pair[1], started), launched))
        log.info(
            "Kafka %s cluster (%d controllers, %d brokers) up in %.1f s: %s",
            self.version,
            self._n_controllers,
            self._n_brokers,
            time.monotonic() - started,
            self.bootstrap,
        )

    def _start_proxies(self) -> None:
        from sharecon.testing.fault_proxy import ToxiproxyServer

        self._proxy_server = ToxiproxyServer()
        self._proxy_server.start()
        for b in self.brokers:
            b.proxy = self._proxy_server.proxy(
                f"broker-{b.node_id}", upstream=f"127.0.0.1:{b.client_port}"
            )

    def _controller_config(self, node: ClusterController, voters: str) -> dict[str, str]:
        return {
            "process.roles": "controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self._node_dir(node) / "kraft-logs"),
            "num.network.threads": "1",
            "num.io.threads": "2",
            "background.threads": "2",
            # In KRaft the controller validates group configs (IncrementalAlterConfigs on a
            # GROUP resource), against its own group.* bounds: give it the brokers' ones.
            **{
                k: v
                for k, v in {**TEST_BROKER_CONFIG, **self._extra}.items()
                if k.startswith("group.")
            },
        }

    def _broker_config(self, node: ClusterBroker, voters: str) -> dict[str, str]:
        listeners = (
            f"CLIENT://127.0.0.1:{node.client_port},INTERNAL://127.0.0.1:{node.internal_port}"
        )
        conf = {
            "process.roles": "broker",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": (
                f"CLIENT://127.0.0.1:{node.advertised_port},"
                f"INTERNAL://127.0.0.1:{node.internal_port}"
            ),
            "listener.security.protocol.map": (
                "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": str(self._node_dir(node) / "kraft-logs"),
        }
        conf.update(TEST_BROKER_CONFIG)
        conf.update(CLUSTER_BROKER_CONFIG)
        if self._n_brokers < 3:
            rf = str(self._n_brokers)
            for key in (
                "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor",
                "share.coordinator.state.topic.replication.factor",
                "default.replication.factor",
            ):
                conf[key] = rf
            for key in (
                "transaction.state.log.min.isr",
                "share.coordinator.state.topic.min.isr",
                "min.insync.replicas",
            ):
                conf[key] = "1"
        if minor(self.version) >= 3:
            conf.update(_CONFIG_4_3)
        conf.update(self._extra)
        return conf

    def _node_dir(self, node: _Node) -> Path:
        assert self._dir is not None
        return self._dir / f"{node.kind}-{node.node_id}"
