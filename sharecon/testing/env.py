"""Which Kafka cluster a test session uses: a local broker, an existing cluster, or Docker.

* ``SHARECON_BOOTSTRAP=host:port``: use that cluster as it is (PLAINTEXT listener; share
  groups must already be enabled there). Nothing is started.
* ``SHARECON_BROKER=docker`` (and a reachable Docker engine): run ``apache/kafka:<version>``
  (or ``$SHARECON_KAFKA_IMAGE``) through testcontainers (``pip install 'sharecon[docker]'``),
  on the host's network with listeners on 127.0.0.1 only.
* otherwise: a :class:`~sharecon.testing.broker.KafkaBroker` JVM on this machine.

``SHARECON_KAFKA_VERSION`` picks the version (default :data:`DEFAULT_KAFKA_VERSION`); it
also selects which version's Java tools arrange tests against an external cluster.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sharecon.testing._jvm import STARTED_LINE, free_ports, minor, new_cluster_id
from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    resolve_version,
    tail,
)
from sharecon.testing.broker import CONFIG_4_3, TEST_BROKER_CONFIG, KafkaBroker
from sharecon.testing.tools import KafkaTools

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_IMAGE",
    "DockerKafka",
    "ExternalKafka",
    "ClusterHandle",
    "cluster_from_env",
    "env_version",
    "kafka_image",
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


# Removes the container if the Python process that started it dies without stopping it
# (the job Ryuk does for testcontainers, without pulling Ryuk's image).
_CONTAINER_WATCHDOG = """\
import os, subprocess, sys, time
parent, docker, container = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while os.getppid() == parent:
    time.sleep(0.5)
subprocess.run([docker, "rm", "-f", container], capture_output=True, timeout=60)
"""

#: The image :class:`DockerKafka` runs unless ``SHARECON_KAFKA_IMAGE`` names another.
DEFAULT_IMAGE = "apache/kafka:{version}"


def kafka_image(version: str) -> str:
    """``$SHARECON_KAFKA_IMAGE`` (``{version}`` is filled in), else ``apache/kafka:<version>``."""
    return (os.environ.get("SHARECON_KAFKA_IMAGE") or DEFAULT_IMAGE).format(version=version)


class DockerKafka:
    """Kafka in a container through testcontainers, configured like :class:`KafkaBroker`.

    The image is :func:`kafka_image` (``apache/kafka:<version>``, which
    ``python -m sharecon.testing.image build`` can make locally); it is configured through
    the ``KAFKA_*`` environment variables the official image reads. The container shares
    the host's network (``network_mode="host"``) and its listeners bind to 127.0.0.1 on
    ports chosen free on the host, so nothing listens beyond loopback and the advertised
    address works as it is. 4.1 cannot be formatted with ``share.version=1`` this way, so
    ``group.share.enable=true`` turns share groups on there instead.

    The container is removed by :meth:`stop`, at interpreter exit, or by a watchdog process
    if the Python process is killed outright; Ryuk is not used unless
    ``TESTCONTAINERS_RYUK_DISABLED`` says so.
    """

    def __init__(
        self,
        version: str | None = None,
        *,
        extra_config: Mapping[str, str] | None = None,
        image: str | None = None,
        start_timeout: float | None = None,
    ) -> None:
        self.version = resolve_version(version or env_version())
        self.image = image or kafka_image(self.version)
        self._extra = dict(extra_config or {})
        self._timeout = start_timeout or float(
            os.environ.get("SHARECON_BROKER_START_TIMEOUT") or _DOCKER_START_TIMEOUT
        )
        self._container: Any = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._port, self._controller_port = free_ports(2)
        self._tools: KafkaTools | None = None

    def environment(self) -> dict[str, str]:
        """The ``KAFKA_*`` variables the container gets (listeners on 127.0.0.1 only)."""
        env = {
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": (
                f"PLAINTEXT://127.0.0.1:{self._port},CONTROLLER://127.0.0.1:{self._controller_port}"
            ),
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{self._port}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@127.0.0.1:{self._controller_port}",
            "KAFKA_HEAP_OPTS": "-Xms128m -Xmx768m",
            # Not empty, so neither the image's launch script nor kafka-run-class.sh adds
            # -Dcom.sun.management.jmxremote, whose local agent listens on every interface.
            "KAFKA_JMX_OPTS": "-Dsharecon.jmx=off",
            "CLUSTER_ID": new_cluster_id(),
        }
        config = dict(TEST_BROKER_CONFIG)
        if minor(self.version) >= 3:
            config.update(CONFIG_4_3)
        if minor(self.version) == 1:
            config["group.share.enable"] = "true"
        config.update(self._extra)
        for key, value in config.items():
            # KafkaDockerWrapper: strip KAFKA_, lower-case, '_' -> '.', '__' -> '_', '___' -> '-'.
            name = key.replace("_", "__").replace("-", "___").replace(".", "_").upper()
            env[f"KAFKA_{name}"] = value
        return env

    def start(self) -> DockerKafka:
        """Start the container (the image must be present or pullable); wait until it serves.

        :raises BrokerStartError: testcontainers missing, Docker unreachable, no such image,
            or the broker not started within the start timeout (with its last log lines).
        """
        try:
            generic = importlib.import_module("testcontainers.core.container")
            waits = importlib.import_module("testcontainers.core.wait_strategies")
            tc_config = importlib.import_module("testcontainers.core.config")
        except ImportError as exc:
            raise BrokerStartError(
                "SHARECON_BROKER=docker needs testcontainers: pip install 'sharecon[docker]'"
            ) from exc
        if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
            tc_config.testcontainers_config.ryuk_disabled = True  # the watchdog cleans up
        container = generic.DockerContainer(self.image)
        for key, value in self.environment().items():
            container = container.with_env(key, value)
        container = container.with_kwargs(network_mode="host")
        container = container.waiting_for(
            waits.LogMessageWaitStrategy(STARTED_LINE.decode()).with_startup_timeout(
                int(self._timeout)
            )
        )
        started = time.monotonic()
        try:
            self._container = container.start()
        except Exception as exc:  # docker's and testcontainers' errors have no common base
            logs = _container_logs(container)
            _remove(container)
            raise BrokerStartError(
                f"could not start {self.image} in Docker: {exc}"
                + (f"\n{tail(logs)}" if logs else "")
            ) from exc
        cid = self._container.get_wrapped_container().id
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _CONTAINER_WATCHDOG, str(os.getpid()), _docker_cli(), cid],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        atexit.register(self.stop)
        log.info(
            "Kafka %s in container %s serves %s (%.1f s)",
            self.version,
            cid[:12],
            self.bootstrap,
            time.monotonic() - started,
        )
        return self

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``, the container's PLAINTEXT listener on the host's loopback."""
        return f"127.0.0.1:{self._port}"

    @property
    def plaintext_bootstrap(self) -> str:
        """The same as :attr:`bootstrap` (the container has one client listener)."""
        return self.bootstrap

    @property
    def container_id(self) -> str | None:
        """The Docker container's id while it runs."""
        if self._container is None:
            return None
        return str(self._container.get_wrapped_container().id)

    @property
    def running(self) -> bool:
        """Whether the container was started and not stopped."""
        return self._container is not None

    @property
    def tools(self) -> KafkaTools:
        """Java tools on the host (same version) pointed at the container: needs a local Java."""
        if self._tools is None:
            self._tools = KafkaTools(self.bootstrap, version=self.version)
        return self._tools

    def stop(self) -> None:
        """Stop and remove the container. Idempotent."""
        container, self._container = self._container, None
        if container is not None:
            _remove(container)
        dog, self._watchdog = self._watchdog, None
        if dog is not None:
            dog.kill()
            dog.wait()
        atexit.unregister(self.stop)

    def __repr__(self) -> str:
        return f"<DockerKafka {self.image} {self.bootstrap}>"


_DOCKER_START_TIMEOUT = 120.0


def _docker_cli() -> str:
    return shutil.which("docker") or "docker"


def _container_logs(container: Any) -> str:
    try:
        return str(container.get_wrapped_container().logs().decode(errors="replace"))
    except Exception:  # no container was created, or the engine is gone
        return ""


def _remove(container: Any) -> None:
    try:
        container.stop()
    except Exception as exc:  # already gone, or the engine is gone: nothing left to do
        log.warning("could not remove container %s: %s", container, exc)


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
