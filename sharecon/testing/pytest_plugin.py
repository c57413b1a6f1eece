"""pytest fixtures for testing share-group code against a real Kafka broker.

Installing ``sharecon[testing]`` registers this plugin with pytest (entry point
``pytest11``, name ``sharecon``): the fixtures are there without any ``conftest.py`` line.
``-p no:sharecon`` turns it off; with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set, load it with
``-p sharecon.testing.pytest_plugin``.

Fixtures (see ``docs/testing.md``):

* ``kafka_broker`` (session): the cluster, started once (a local JVM, a container under
  ``SHARECON_BROKER=docker``, or the existing ``SHARECON_BOOTSTRAP``).
* ``kafka_bootstrap`` (session): its ``host:port``.
* ``kafka_tools`` (session): Kafka's Java tools pointed at it (with ``SHARECON_BOOTSTRAP``
  or Docker, this and ``kafka_cluster`` are the only fixtures that need a local Java).
* ``kafka_broker_factory``: ``factory(version, *, shared=True, **kwargs)``: a
  ``KafkaBroker``, or a ``DockerKafka`` under ``SHARECON_BROKER=docker``.
* ``topic`` / ``topic_factory``: a fresh topic per test (3 partitions by default).
* ``share_group`` / ``share_group_factory``: a fresh group id, ``share.auto.offset.reset=earliest``.
* ``produce_records``: ``produce_records(topic, n, *, record_size=100) -> ProduceResult``.
* ``kafka_cluster``: a :class:`~sharecon.testing.cluster.KafkaCluster` of three brokers
  behind fault proxies, started once per session and healed after each test (proxies
  healed, stopped brokers started, replicas back in sync).
* ``fake_kafka``: a :class:`~sharecon.testing.fake.FakeKafka` of its own per test (no JVM;
  Kafka line from ``SHARECON_FAKE_KAFKA_VERSION``, default 4.4); ``fake_kafka_factory``:
  ``factory(version="4.4", **kwargs)`` for more, or other lines. Not marked ``broker``.

A broker that cannot start is an error in every test that needs it, never a skip.
Tests using these fixtures get the ``broker`` marker, so ``-m "not broker"`` leaves them out.
A project can opt into failing skipped ``broker`` tests under ``CI=true`` with the ini
option ``sharecon_ci_forbid_broker_skips = true`` (sharecon's own suite does); without it a
``pytest.skip`` stays a skip.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    find_java,
    resolve_version,
)
from sharecon.testing._sync import produce_random, with_admin
from sharecon.testing.broker import KafkaBroker
from sharecon.testing.cluster import KafkaCluster
from sharecon.testing.env import (
    ClusterHandle,
    DockerKafka,
    ExternalKafka,
    cluster_from_env,
    env_version,
    requested_kind,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.tools import KafkaTools, ProduceResult

__all__ = [
    "BrokerFactory",
    "BrokerPool",
    "FakeKafkaFactory",
    "ProduceRecords",
    "ShareGroupFactory",
    "TopicFactory",
]

T = TypeVar("T")

#: Fixtures that need a live cluster; a test using any of them is marked ``broker``.
BROKER_FIXTURES = frozenset(
    {
        "kafka_broker",
        "kafka_bootstrap",
        "kafka_tools",
        "kafka_broker_factory",
        "topic",
        "topic_factory",
        "share_group",
        "share_group_factory",
        "produce_records",
        "kafka_cluster",
    }
)

#: Group config every ``share_group`` starts with: records produced before the consumer
#: joined are delivered (the broker default, ``latest``, would skip them).
DEFAULT_GROUP_CONFIG: dict[str, str] = {"share.auto.offset.reset": "earliest"}


class BrokerFactory(Protocol):
    """``kafka_broker_factory``: a started broker of ``version`` (a container under
    ``SHARECON_BROKER=docker``)."""

    def __call__(
        self, version: str = DEFAULT_KAFKA_VERSION, *, shared: bool = True, **kwargs: Any
    ) -> KafkaBroker | DockerKafka:
        """``shared=True``: one per (version, kwargs) for the session. ``False``: this test's own."""


class TopicFactory(Protocol):
    """``topic_factory``: create a topic and return its name."""

    def __call__(
        self,
        partitions: int = 3,
        *,
        config: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> str:
        """A fresh uniquely named topic unless ``name`` is given."""


class ShareGroupFactory(Protocol):
    """``share_group_factory``: a fresh group id with group configs already set."""

    def __call__(self, config: Mapping[str, str] | None = None, *, name: str | None = None) -> str:
        """``config`` is applied on top of :data:`DEFAULT_GROUP_CONFIG`."""


class ProduceRecords(Protocol):
    """``produce_records``: write ``n`` records of random bytes into ``topic``."""

    def __call__(self, topic: str, n: int, *, record_size: int = 100) -> ProduceResult:
        """``kafka-producer-perf-test`` (acks=all), or sharecon's Producer without Java."""


#: A broker ``kafka_broker_factory`` hands out: a local JVM, or a container under
#: ``SHARECON_BROKER=docker``.
FactoryBroker = KafkaBroker | DockerKafka


class BrokerPool:
    """The session's brokers, keyed by version and settings; stopped at session end.

    Local JVMs, or containers when ``SHARECON_BROKER=docker`` (those take only
    ``extra_config``: SASL, TLS and feature pins are local-broker settings).
    """

    def __init__(self) -> None:
        self._brokers: dict[tuple[str, str], FactoryBroker] = {}

    def get(self, version: str = DEFAULT_KAFKA_VERSION, **kwargs: Any) -> FactoryBroker:
        """The running broker for (version, kwargs), started on first request."""
        key = (resolve_version(version), repr(sorted(kwargs.items())))
        broker = self._brokers.get(key)
        if broker is None or not broker.running:
            if broker is not None:
                broker.stop()  # a test killed it: give later tests a fresh one
            broker = new_broker(key[0], **kwargs)
            self._brokers[key] = broker
            broker.start()
        return broker

    def close(self) -> None:
        """Stop every broker in the pool."""
        brokers, self._brokers = list(self._brokers.values()), {}
        for broker in brokers:
            broker.stop()


def new_broker(version: str, **kwargs: Any) -> FactoryBroker:
    """A broker (not started) of the kind the environment asks for: Docker or a local JVM.

    :raises BrokerStartError: a ``KafkaBroker`` setting other than ``extra_config`` or
        ``start_timeout`` under ``SHARECON_BROKER=docker``.
    """
    if requested_kind() != "docker":
        return KafkaBroker(version, **kwargs)
    unsupported = sorted(set(kwargs) - {"extra_config", "start_timeout"})
    if unsupported:
        raise BrokerStartError(
            f"kafka_broker_factory: {', '.join(unsupported)} not supported with "
            "SHARECON_BROKER=docker (only extra_config and start_timeout)"
        )
    return DockerKafka(version, **kwargs)


#: ini option (bool) that makes skipped ``broker`` tests fail under ``CI=true``.
FORBID_SKIPS_INI = "sharecon_ci_forbid_broker_skips"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ini option :data:`FORBID_SKIPS_INI` (off unless a project sets it)."""
    parser.addini(
        FORBID_SKIPS_INI,
        "under CI=true, report a skipped test marked 'broker' as a failure "
        "(for projects whose CI must prove every broker test ran)",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``broker`` marker (harmless if the project registers it too)."""
    config.addinivalue_line(
        "markers", "broker: needs a real Kafka broker (started by sharecon.testing)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a broker fixture with ``broker``."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if BROKER_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.broker)


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With the ini option :data:`FORBID_SKIPS_INI` and ``CI=true``, a skipped broker test
    is a failure: that project's CI must prove, not assume. Otherwise a skip stays a skip."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("broker") is not None
        and _ci()
        and item.config.getini(FORBID_SKIPS_INI)
    ):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"broker test skipped under CI=true ({FORBID_SKIPS_INI} is set): {reason}"


@pytest.fixture(scope="session")
def kafka_broker_pool() -> Iterator[BrokerPool]:
    """Session cache of local brokers behind ``kafka_broker`` and ``kafka_broker_factory``."""
    pool = BrokerPool()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def kafka_broker(kafka_broker_pool: BrokerPool) -> Iterator[ClusterHandle]:
    """The session's cluster: ``SHARECON_BOOTSTRAP``, or a broker of ``SHARECON_KAFKA_VERSION``
    (a container under ``SHARECON_BROKER=docker``, else a local JVM), shared with
    ``kafka_broker_factory()``."""
    if requested_kind() != "external":
        yield kafka_broker_pool.get(env_version())
        return
    cluster = cluster_from_env()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: ClusterHandle) -> str:
    """``host:port`` of the session cluster."""
    return kafka_broker.bootstrap


@pytest.fixture(scope="session")
def kafka_tools(kafka_broker: ClusterHandle) -> KafkaTools:
    """Kafka's Java tools pointed at the session cluster."""
    return kafka_broker.tools


@pytest.fixture
def kafka_broker_factory(kafka_broker_pool: BrokerPool) -> Iterator[BrokerFactory]:
    """Start brokers of other versions or settings. ``shared=False`` gives a private one
    (stopped after the test), for tests that kill or restart it. Honours
    ``SHARECON_BROKER=docker``: the brokers are then containers."""
    owned: list[FactoryBroker] = []

    def factory(
        version: str = DEFAULT_KAFKA_VERSION, *, shared: bool = True, **kwargs: Any
    ) -> FactoryBroker:
        if shared:
            return kafka_broker_pool.get(version, **kwargs)
        broker = new_broker(resolve_version(version), **kwargs)
        owned.append(broker)
        return broker.start()

    yield factory
    for broker in owned:
        broker.stop()


def _unique(prefix: str, request: pytest.FixtureRequest) -> str:
    # Topic and group names allow [a-zA-Z0-9._-]; the test name helps reading broker logs.
    test = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:60]
    return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"


def _admin_bootstrap(cluster: ClusterHandle) -> str:
    # Fixtures arrange tests over PLAINTEXT even when the client listener has SASL/TLS.
    return getattr(cluster, "plaintext_bootstrap", None) or cluster.bootstrap


@pytest.fixture
def topic_factory(
    kafka_broker: ClusterHandle, request: pytest.FixtureRequest
) -> Iterator[TopicFactory]:
    """Create topics on the session cluster (with sharecon's Admin); ready to use on return.

    They are removed afterwards only on an external cluster (``SHARECON_BOOTSTRAP``).
    """
    bootstrap = _admin_bootstrap(kafka_broker)
    created: list[str] = []

    def factory(
        partitions: int = 3, *, config: Mapping[str, str] | None = None, name: str | None = None
    ) -> str:
        topic = name or _unique("t", request)
        with_admin(
            bootstrap,
            lambda admin: admin.create_topics(
                [topic], num_partitions=partitions, configs=dict(config or {})
            ),
        )
        created.append(topic)
        return topic

    yield factory
    if created and isinstance(kafka_broker, ExternalKafka):
        with_admin(bootstrap, lambda admin: admin.delete_topics(created))


@pytest.fixture
def topic(topic_factory: TopicFactory) -> str:
    """A fresh topic with 3 partitions."""
    return topic_factory()


@pytest.fixture
def share_group_factory(
    kafka_broker: ClusterHandle, request: pytest.FixtureRequest
) -> ShareGroupFactory:
    """Fresh share group ids with group configs set, e.g. ``{"share.record.lock.duration.ms": "1000"}``."""
    bootstrap = _admin_bootstrap(kafka_broker)

    def factory(config: Mapping[str, str] | None = None, *, name: str | None = None) -> str:
        group = name or _unique("g", request)
        settings: dict[str, str | None] = {**DEFAULT_GROUP_CONFIG, **(config or {})}
        with_admin(bootstrap, lambda admin: admin.alter_group_config(group, settings))
        return group

    return factory


@pytest.fixture
def share_group(share_group_factory: ShareGroupFactory) -> str:
    """A fresh share group id with ``share.auto.offset.reset=earliest``."""
    return share_group_factory()


class FakeKafkaFactory(Protocol):
    """``fake_kafka_factory``: a started :class:`~sharecon.testing.fake.FakeKafka`."""

    def __call__(self, version: str | None = None, **kwargs: Any) -> FakeKafka:
        """A fake imitating Kafka ``version`` (default: ``SHARECON_FAKE_KAFKA_VERSION``
        or 4.4), stopped after the test."""


def fake_kafka_version() -> str:
    """The Kafka line fakes imitate unless told: ``SHARECON_FAKE_KAFKA_VERSION``, or 4.4."""
    return os.environ.get("SHARECON_FAKE_KAFKA_VERSION", "") or "4.4"


@pytest.fixture
def fake_kafka_factory() -> Iterator[FakeKafkaFactory]:
    """Start in-process fake brokers (each in a few milliseconds); all stop after the test."""
    from sharecon.testing.fake import FakeKafka

    owned: list[FakeKafka] = []

    def factory(version: str | None = None, **kwargs: Any) -> FakeKafka:
        fake = FakeKafka(version or fake_kafka_version(), **kwargs)
        owned.append(fake)
        return fake.start()

    yield factory
    for fake in owned:
        fake.stop()


@pytest.fixture
def fake_kafka(fake_kafka_factory: FakeKafkaFactory) -> FakeKafka:
    """A fresh :class:`~sharecon.testing.fake.FakeKafka` for this test: point clients at
    ``fake_kafka.bootstrap``."""
    return fake_kafka_factory()


def java_available() -> bool:
    """Whether a usable local Java (17+) exists for Kafka's tools."""
    try:
        find_java()
    except BrokerStartError:
        return False
    return True


@pytest.fixture
def produce_records(kafka_broker: ClusterHandle) -> ProduceRecords:
    """Write ``n`` keyless records into a topic of the session cluster (acks=all).

    With a local Java this is Kafka's ``kafka-producer-perf-test`` (a second, independent
    producer implementation); without one (an external cluster or Docker on a machine
    with no JVM) sharecon's own Producer writes them.
    """
    use_java = java_available()
    bootstrap = _admin_bootstrap(kafka_broker)

    def produce(topic: str, n: int, *, record_size: int = 100) -> ProduceResult:
        if use_java:
            return kafka_broker.tools.produce(topic, n, record_size=record_size)
        return produce_random(bootstrap, topic, n, record_size=record_size)

    return produce


@pytest.fixture(scope="session")
def kafka_cluster_session() -> Iterator[KafkaCluster]:
    """The session's three-broker cluster (``SHARECON_KAFKA_VERSION``), proxied."""
    cluster = KafkaCluster(3, env_version(), proxy=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster(kafka_cluster_session: KafkaCluster) -> Iterator[KafkaCluster]:
    """Three brokers behind fault proxies; a test may kill, stop, cut or stall them.

    Afterwards every proxy is healed, every broker runs again and all replicas are in
    sync, so the next test finds a whole cluster.
    """
    cluster = kafka_cluster_session
    yield cluster
    for proxy in cluster.proxies:
        proxy.heal()
    for broker in cluster.brokers:
        broker.start()
    cluster.wait_in_sync()
