"""Which Kafka cluster a test session uses: a local broker, an existing cluster, or Docker.

* ``SHARECON_BOOTSTRAP=host:port``: use that cluster as it is (PLAINTEXT listener; share
  groups must already be enabled there). Nothing is started.
* ``SHARECON_BROKER=docker`` (and a reachable Docker engine): run ``apache/kafka:<version>``
  through testcontainers (``pip install testcontainers``).
* otherwise: a :class:`~sharecon.testing.broker.KafkaBroker` JVM on this machine.

``SHARECON_KAFKA_VERSION`` picks the version (default :data:`DEFAULT_KAFKA_VERSION`); it
also selects which version's Java tools arrange tests against an external cluster.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sharecon.testing._provision import DEFAULT_KAFKA_VERSION, BrokerStartError, resolve_version
from sharecon.testing.broker import TEST_BROKER_CONFIG, KafkaBroker
from sharecon.testing.tools import KafkaTools

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DockerKafka",
    "ExternalKafka",
    "ClusterHandle",
    "cluster_from_env",
    "env_version",
    "requested_kind",
]

log = logging.getLogger("sharecon.testing")


class ClusterHandle(Protocol):
    """What fixtures hand to tests: where to connect and how to arrange the cluster."""

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients."""

    @property
    def version(self) -> str:
        """The Kafka version (of the tools, for an external cluster)."""

    @property
    def tools(self) -> KafkaTools:
        """Kafka's Java tools pointed at a PLAINTEXT listener of this cluster."""

    def stop(self) -> None:
        """Release what was started for this cluster (nothing for an external one)."""


def env_version() -> str:
    """``$SHARECON_KAFKA_VERSION`` resolved (``"4.2"`` -> ``"4.2.2"``), or the default."""
    return resolve_version(os.environ.get("SHARECON_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION)


class ExternalKafka:
    """A cluster someone else runs (``SHARECON_BOOTSTRAP``); ``stop()`` does nothing."""

    def __init__(self, bootstrap: str, version: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.version = resolve_version(version or env_version())
        self._tools: KafkaTools | None = None

    @property
    def tools(self) -> KafkaTools:
        """Java tools of :attr:`version`, fetched on first use."""
        if self._tools is None:
            self._tools = KafkaTools(self.bootstrap, version=self.version)
        return self._tools

    def stop(self) -> None:
        """Nothing to stop: the cluster is not ours."""

    def __repr__(self) -> str:
        return f"<ExternalKafka {self.bootstrap}>"


class DockerKafka:
    """``apache/kafka:<version>`` in Docker via testcontainers, configured like :class:`KafkaBroker`.

    The host port equals the container port so the advertised address works from the host.
    4.1 images cannot be formatted with ``share.version=1``, so ``group.share.enable=true``
    turns share groups on there instead.
    """

    def __init__(
        self, version: str | None = None, *, extra_config: Mapping[str, str] | None = None
    ) -> None:
        self.version = resolve_version(version or env_version())
        self._extra = dict(extra_config or {})
        self._container: Any = None
        self._port = 0
        self._tools: KafkaTools | None = None

    def start(self) -> DockerKafka:
        """Pull (if needed) and start the container; wait for ``Kafka Server started``.

        :raises BrokerStartError: testcontainers missing, Docker unreachable, or no start.
        """
        try:
            generic = importlib.import_module("testcontainers.core.container")
            waits = importlib.import_module("testcontainers.core.wait_strategies")
        except ImportError as exc:
            raise BrokerStartError(
                "SHARECON_BROKER=docker needs testcontainers (pip install 'testcontainers>=4.13')"
            ) from exc
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self._port = s.getsockname()[1]
        env = {
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{self._port},CONTROLLER://0.0.0.0:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{self._port}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_HEAP_OPTS": "-Xms128m -Xmx768m",
        }
        config = dict(TEST_BROKER_CONFIG)
        if self.version.startswith("4.1."):
            config["group.share.enable"] = "true"
        config.update(self._extra)
        for key, value in config.items():
            # KafkaDockerWrapper: strip KAFKA_, lower-case, '_' -> '.', '__' -> '_', '___' -> '-'.
            name = key.replace("_", "__").replace("-", "___").replace(".", "_").upper()
            env[f"KAFKA_{name}"] = value
        try:
            container = generic.DockerContainer(f"apache/kafka:{self.version}")
            container = container.with_bind_ports(self._port, self._port)
            for key, value in env.items():
                container = container.with_env(key, value)
            container = container.waiting_for(waits.LogMessageWaitStrategy("Kafka Server started"))
            self._container = container.start()
        except Exception as exc:  # docker's and testcontainers' errors have no common base
            raise BrokerStartError(
                f"could not start apache/kafka:{self.version} in Docker: {exc}"
            ) from exc
        return self

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` (the same port inside and outside the container)."""
        return f"127.0.0.1:{self._port}"

    @property
    def tools(self) -> KafkaTools:
        """Java tools on the host (same version) pointed at the container."""
        if self._tools is None:
            self._tools = KafkaTools(self.bootstrap, version=self.version)
        return self._tools

    def stop(self) -> None:
        """Stop and remove the container."""
        container, self._container = self._container, None
        if container is not None:
            container.stop()


def requested_kind() -> Literal["external", "docker", "local"]:
    """Which cluster the environment asks for (see the module docstring)."""
    if os.environ.get("SHARECON_BOOTSTRAP"):
        return "external"
    kind = os.environ.get("SHARECON_BROKER", "local").lower()
    if kind == "docker":
        return "docker"
    if kind != "local":
        raise BrokerStartError(f"SHARECON_BROKER={kind!r}: expected 'local' or 'docker'")
    return "local"


def cluster_from_env() -> ClusterHandle:
    """The cluster the environment asks for, started (see the module docstring).

    :raises BrokerStartError: if it cannot be started.
    """
    kind = requested_kind()
    if kind == "external":
        bootstrap = os.environ["SHARECON_BOOTSTRAP"]
        log.info("using the existing cluster at %s (SHARECON_BOOTSTRAP)", bootstrap)
        return ExternalKafka(bootstrap)
    if kind == "docker":
        return DockerKafka().start()
    return KafkaBroker(env_version()).start()
