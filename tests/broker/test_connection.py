"""Connections and the cluster view against a real broker, under asyncio and trio.

Negotiation, metadata, coordinator lookup, hundreds of pipelined requests on one connection,
connection replacement, and a broker restart under a live connection.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from sharecon import errors
from sharecon._net.cluster import Cluster, require_share_groups
from sharecon._net.connect import ConnectionConfig
from sharecon.admin import Admin
from sharecon.protocol import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ShareGroupDescribeRequest,
)
from sharecon.protocol.messages.fetch import FetchPartition, FetchTopic
from sharecon.protocol.messages.metadata import MetadataRequestTopic
from sharecon.protocol.versions import CLIENT_VERSIONS, SHARE_CONSUMER_APIS
from sharecon.testing import KafkaBroker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from sharecon.testing.pytest_plugin import BrokerFactory, TopicFactory

pytestmark = pytest.mark.anyio

# ApiVersions v3+ must name the client software, or the broker answers INVALID_REQUEST.
API_VERSIONS = ApiVersionsRequest(
    client_software_name="sharecon-tests", client_software_version="0"
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.asynccontextmanager
async def open_cluster(
    bootstrap: str, config: ConnectionConfig | None = None, **kwargs: Any
) -> AsyncIterator[Cluster]:
    """A connected Cluster in its own task group; a connect failure is raised as itself."""
    config = config or ConnectionConfig(client_id="sharecon-net-tests")
    async with anyio.create_task_group() as tg:
        cluster = Cluster(bootstrap, config, tg, **kwargs)
        failure: BaseException | None = None
        try:
            await cluster.connect()
        except errors.KafkaError as exc:
            failure = exc
        if failure is None:
            try:
                yield cluster
            finally:
                await cluster.aclose()
                tg.cancel_scope.cancel()
        else:
            await cluster.aclose()
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    """Poll ``check`` until it holds; fail the test after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        for _ in range(10**6):
            if await check():
                return
            await anyio.sleep(0.1)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- negotiation ----------------------------------------------------------------------------


async def test_negotiated_versions_and_features(kafka_bootstrap: str) -> None:
    async with open_cluster(kafka_bootstrap, required_apis=SHARE_CONSUMER_APIS) as cluster:
        versions = cluster.versions
        assert versions.broker_ranges, "ApiVersions must list the broker's APIs"
        for key, (lo, hi) in CLIENT_VERSIONS.items():
            offered = versions.broker_ranges.get(key)
            if offered is None or min(hi, offered[1]) < max(lo, offered[0]):
                assert not versions.supports(key)
            else:
                assert versions.version(key) == min(hi, offered[1])
        assert versions.version(ApiVersionsRequest) >= 3  # client software name/version sent
        assert versions.feature_level("share.version") >= 1
        assert versions.features_epoch >= 0
        require_share_groups(versions, kafka_bootstrap)
        # Every connection of the cluster negotiated the same way.
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        assert conn.versions is not None
        assert conn.versions.versions == versions.versions


async def test_share_groups_disabled_is_told_apart_from_too_old(
    kafka_broker_factory: BrokerFactory,
) -> None:
    broker = kafka_broker_factory(features={"share.version": 0})
    async with open_cluster(broker.bootstrap) as cluster:
        # The broker still lists the share APIs: only the finalized feature says they are off.
        assert cluster.versions.supports(78)
        with pytest.raises(errors.IncompatibleBrokerError, match="disabled") as info:
            require_share_groups(cluster.versions, broker.bootstrap)
        assert "share.version" in str(info.value)
        assert "too old" not in str(info.value)
        assert broker.bootstrap in str(info.value)


# -- metadata -------------------------------------------------------------------------------


async def test_metadata_names_ids_partitions_leaders(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    one, four = topic_factory(1), topic_factory(4)
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    async with open_cluster(kafka_bootstrap) as cluster:
        meta = await cluster.refresh_metadata([one, four, missing])
        assert meta.cluster_id
        assert set(meta.partitions) == {one, four}
        assert [p.partition for p in meta.partitions[four]] == [0, 1, 2, 3]
        assert meta.topic_errors == {missing: errors.UnknownTopicOrPartitionError.code}
        for name in (one, four):
            tid = meta.topic_ids[name]
            assert meta.topic_names[tid] == name
            for p in meta.partitions[name]:
                assert p.topic_id == tid and p.leader_epoch >= 0
                assert p.leader_id in meta.brokers
                assert meta.leader_for(tid, p.partition) == p.leader_id
        assert meta.leader_for(meta.topic_ids[four], 4) is None
        assert meta.leader_for(uuid.uuid4(), 0) is None
        # Named topics are remembered: a plain refresh describes them again.
        again = await cluster.refresh_metadata()
        assert set(again.partitions) == {one, four}

    # A fresh client that knows only the id (as a share assignment names it) finds the name.
    async with open_cluster(kafka_bootstrap) as fresh:
        unknown = uuid.uuid4()
        meta = await fresh.refresh_metadata([], topic_ids=[again.topic_ids[four], unknown])
        assert meta.topic_names[again.topic_ids[four]] == four
        assert meta.partition_count(four) == 4
        assert meta.topic_errors == {unknown: errors.UnknownTopicIdError.code}


async def test_metadata_follows_deletion_and_recreation(kafka_bootstrap: str) -> None:
    name = f"recreated-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_bootstrap) as admin, open_cluster(kafka_bootstrap) as cluster:
        (first,) = await admin.create_topics([name], num_partitions=2)
        meta = await cluster.refresh_metadata([name])
        assert meta.topic_ids[name] == first.topic_id
        await admin.delete_topics([name])

        async def recreated() -> bool:
            try:
                await admin.create_topics([name], num_partitions=3)
            except errors.TopicAlreadyExistsError:
                return False  # deletion still in progress
            return True

        await eventually(recreated)
        meta = await cluster.refresh_metadata([name])
        second = meta.topic_ids[name]
        assert second != first.topic_id
        assert first.topic_id not in meta.topic_names
        assert meta.partition_count(name) == 3
        assert all(p.topic_id == second for p in meta.partitions[name])
        await admin.delete_topics([name])


async def test_periodic_refresh_notices_a_deleted_topic(kafka_bootstrap: str) -> None:
    name = f"periodic-{uuid.uuid4().hex[:8]}"
    async with (
        Admin(kafka_bootstrap) as admin,
        open_cluster(kafka_bootstrap, metadata_max_age=0.3) as cluster,
    ):
        await admin.create_topics([name])
        assert name in (await cluster.refresh_metadata([name])).topic_ids
        await admin.delete_topics([name])

        async def gone() -> bool:
            return name not in cluster.metadata.topic_ids  # no explicit refresh here

        await eventually(gone)


# -- coordinators ---------------------------------------------------------------------------


async def test_coordinator_lookup_is_cached_and_invalidated(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = f"coord-{uuid.uuid4().hex[:8]}"
    async with open_cluster(kafka_bootstrap) as cluster:
        # Warm up: on a fresh broker the first lookups wait for __consumer_offsets (retried).
        await cluster.coordinator("warm-up")
        lookups = 0
        real = cluster.request_any

        async def counting(body: Any, **kwargs: Any) -> Any:
            nonlocal lookups
            lookups += type(body).__name__ == "FindCoordinatorRequest"
            return await real(body, **kwargs)

        monkeypatch.setattr(cluster, "request_any", counting)
        node = await cluster.coordinator(group)
        assert node in cluster.metadata.brokers
        assert lookups == 1
        assert await cluster.coordinator(group) == node
        assert lookups == 1
        cluster.invalidate_coordinator(group)
        assert await cluster.coordinator(group) == node
        assert lookups == 2
        # The node really coordinates the group: it answers for it, not NOT_COORDINATOR.
        response = await cluster.request(node, ShareGroupDescribeRequest(group_ids=(group,)))
        assert response.groups[0].error_code == errors.GroupIdNotFoundError.code


async def test_concurrent_coordinator_lookups_share_one_request(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = f"coord-{uuid.uuid4().hex[:8]}"
    async with open_cluster(kafka_bootstrap) as cluster:
        # Warm up: on a fresh broker the first lookups wait for __consumer_offsets (retried).
        await cluster.coordinator("warm-up")
        lookups = 0
        real = cluster.request_any

        async def counting(body: Any, **kwargs: Any) -> Any:
            nonlocal lookups
            lookups += 1
            return await real(body, **kwargs)

        monkeypatch.setattr(cluster, "request_any", counting)
        found: list[int] = []

        async def look() -> None:
            found.append(await cluster.coordinator(group))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(look)
        assert len(set(found)) == 1 and len(found) == 20
        assert lookups == 1


# -- pipelining -----------------------------------------------------------------------------


async def test_hundreds_of_pipelined_requests_on_one_connection(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topics = [topic_factory(n) for n in (1, 2, 3, 4, 5)]
    async with open_cluster(kafka_bootstrap) as cluster:
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        total = 600
        peak = 0
        mismatches: list[str] = []
        done = anyio.Event()

        async def one(i: int) -> None:
            if i % 3 == 0:
                av = await conn.request(API_VERSIONS, timeout=30)
                if av.error_code != 0:
                    mismatches.append(f"{i}: ApiVersions error {av.error_code}")
                return
            name = topics[i % 5]
            response = await conn.request(
                MetadataRequest(topics=(MetadataRequestTopic(name=name),)), timeout=30
            )
            (t,) = response.topics
            # Each response reaches the request it answers: names and partition counts match.
            if t.name != name or len(t.partitions) != i % 5 + 1:
                mismatches.append(f"{i}: asked {name}, got {t.name} x{len(t.partitions)}")

        async def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, conn.in_flight)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            async with anyio.create_task_group() as requests:
                for i in range(total):
                    requests.start_soon(one, i)
            done.set()
        assert mismatches == []
        assert peak >= 100, f"only {peak} requests were ever in flight together"
        assert conn.in_flight == 0 and not conn.closed
        assert await cluster.connection(node) is conn  # still the one cached connection


# -- connection replacement -----------------------------------------------------------------


async def test_bootstrap_skips_unreachable_addresses(kafka_bootstrap: str) -> None:
    dead = f"127.0.0.1:{closed_port()}"
    with anyio.fail_after(20):
        async with open_cluster(f"{dead},{kafka_bootstrap}") as cluster:
            assert cluster.metadata.brokers
            assert (await cluster.request_any(API_VERSIONS)).error_code == 0


async def test_closed_and_idle_connections_are_replaced(kafka_bootstrap: str) -> None:
    async with open_cluster(kafka_bootstrap, idle_timeout=0.3) as cluster:
        node = next(iter(cluster.metadata.brokers))
        first = await cluster.connection(node)
        await first.aclose()
        second = await cluster.connection(node)
        assert second is not first and not second.closed
        assert (await cluster.request(node, API_VERSIONS)).error_code == 0

        await anyio.sleep(0.5)  # idle past idle_timeout
        third = await cluster.connection(node)
        assert third is not second
        assert [c.closed for c in (first, second, third)] == [True, True, False]
        assert (await cluster.request(node, API_VERSIONS)).error_code == 0


# -- broker restart -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def restartable_broker() -> Iterator[KafkaBroker]:
    """A private broker this module may kill and restart (the session broker stays up)."""
    broker = KafkaBroker()
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def running_broker(restartable_broker: KafkaBroker) -> KafkaBroker:
    """The private broker, brought back up if an earlier test left it down."""
    if not restartable_broker.running:
        restartable_broker.restart()
    return restartable_broker


def long_poll(topic_id: uuid.UUID) -> FetchRequest:
    """A Fetch the broker holds for 30 s (nothing to read), i.e. a request left pending."""
    return FetchRequest(
        max_wait_ms=30_000,
        min_bytes=1,
        topics=(
            FetchTopic(
                topic_id=topic_id,
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),),
            ),
        ),
    )


@pytest.mark.broker  # its own KafkaBroker, not a plugin fixture: mark it by hand
async def test_broker_restart_under_a_live_connection(running_broker: KafkaBroker) -> None:
    broker = running_broker
    name = f"restart-{uuid.uuid4().hex[:8]}"
    config = ConnectionConfig(client_id="restart-test", connect_timeout=2.0)
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics([name])
    async with open_cluster(broker.bootstrap, config=config) as cluster:
        meta = await cluster.refresh_metadata([name])
        leader = meta.leader_for(meta.topic_ids[name], 0)
        assert leader is not None
        conn = await cluster.connection(leader)
        failures: list[BaseException] = []

        async def pending() -> None:
            try:
                while True:
                    # An early answer (a new topic's leader not ready yet, on a loaded
                    # machine) just parks the request again.
                    await cluster.request(leader, long_poll(meta.topic_ids[name]), timeout=60)
            except errors.KafkaError as exc:
                failures.append(exc)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(pending)
                await eventually(lambda: _true_if(conn.in_flight == 5))
                await anyio.to_thread.run_sync(broker.kill)
        # Every pending request failed at once, clearly, naming the broker.
        assert len(failures) == 5
        for exc in failures:
            assert isinstance(exc, errors.BrokerDisconnectedError)
            assert f"broker {leader}" in str(exc)
        assert conn.closed

        # While the broker is down, a call fails as a connect error, bounded by the timeout.
        with (
            anyio.fail_after(20),
            pytest.raises(errors.BrokerConnectError, match=f"broker {leader}"),
        ):
            await cluster.request(leader, API_VERSIONS)
        # ... and the health status says which broker is down, and why.
        down = next(b for b in cluster.health().brokers if b.node_id == leader)
        assert not down.reachable and down.unreachable_since is not None
        assert down.last_error is not None and f"broker {leader}" in down.last_error

        await anyio.to_thread.run_sync(broker.restart)
        # The next call reconnects on its own.
        with anyio.fail_after(30):
            response = await cluster.request(
                leader, MetadataRequest(topics=(MetadataRequestTopic(name=name),))
            )
        assert response.topics[0].name == name
        assert await cluster.connection(leader) is not conn
        assert next(b for b in cluster.health().brokers if b.node_id == leader).reachable


async def _true_if(value: bool) -> bool:
    return value
