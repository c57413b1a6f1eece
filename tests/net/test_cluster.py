"""Cluster-layer logic that needs no broker: bootstrap parsing, backoff, the share-group
feature check, metadata merging and leader hints, and bounded bootstrap failure.

The behaviour against a real broker is in tests/broker/test_connection.py.
"""

from __future__ import annotations

import socket
import uuid
from types import MappingProxyType

import anyio
import pytest

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._net.cluster import (
    Cluster,
    ClusterMetadata,
    _merge,
    parse_bootstrap,
    require_share_groups,
)
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon.protocol import MetadataResponse
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.metadata import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from sharecon.protocol.versions import VersionTable

pytestmark = pytest.mark.anyio

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


# -- bootstrap parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:9092", [("localhost", 9092)]),
        ("a:1, b:2 ,", [("a", 1), ("b", 2)]),
        ("kafka", [("kafka", 9092)]),
        ("[::1]:9093,[fe80::1]", [("::1", 9093), ("fe80::1", 9092)]),
        (["x:1", "y"], [("x", 1), ("y", 9092)]),
    ],
)
def test_parse_bootstrap(text: str | list[str], expected: list[tuple[str, int]]) -> None:
    assert [(a.host, a.port) for a in parse_bootstrap(text)] == expected
    assert all(a.node_id == -1 for a in parse_bootstrap(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no bootstrap"),
        (" , ", "no bootstrap"),
        ("host:port", "bad port"),
        ("host:0", "bad port"),
        ("host:70000", "bad port"),
        ("host:\u00b2", "bad port"),  # a digit to str.isdigit, not to int()
        (":9092", "empty host"),
        ("::1:9092", "IPv6"),
        ("[::1", "unclosed"),
        ("[::1]9092", "':port'"),
        ("kafka://broker:9092", r"URL scheme \(kafka://\) is not accepted; write host:port"),
        ("a:1,SASL_SSL://b:9093", r"'SASL_SSL://b:9093': a URL scheme"),
    ],
)
def test_parse_bootstrap_rejects(text: str, message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        parse_bootstrap(text)


# -- backoff --------------------------------------------------------------------------------


def test_backoff_grows_and_is_capped() -> None:
    backoff = Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(10_000) == 1.0


def test_backoff_jitter_spreads_within_bounds() -> None:
    low = Backoff(initial=1.0, maximum=10.0, jitter=0.2, rand=lambda: 0.0)
    high = Backoff(initial=1.0, maximum=10.0, jitter=0.2, rand=lambda: 0.999999)
    assert low.delay(0) == pytest.approx(0.8)
    assert high.delay(0) == pytest.approx(1.2, abs=1e-5)
    assert high.delay(20) == 10.0


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0.0}, {"initial": 2.0, "maximum": 1.0}, {"multiplier": 0.5}, {"jitter": 1.0}],
)
def test_backoff_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(errors.ConfigError):
        Backoff(**kwargs)  # type: ignore[arg-type]


# -- share-group feature check --------------------------------------------------------------


def table(
    ranges: dict[int, tuple[int, int]], *, level: int | None, supported: bool = True
) -> VersionTable:
    chosen = {k: hi for k, (lo, hi) in ranges.items() if hi >= 1}
    return VersionTable(
        versions=chosen,
        broker_ranges=ranges,
        features={"share.version": level} if level else {},
        supported_features={"share.version": (0, 2)} if supported else {},
    )


SHARE = {76: (1, 1), 78: (1, 2), 79: (1, 2)}


def test_share_groups_available() -> None:
    require_share_groups(table(SHARE, level=1), "b1")


def test_share_groups_disabled_by_feature() -> None:
    with pytest.raises(errors.IncompatibleBrokerError, match="disabled") as info:
        require_share_groups(table(SHARE, level=0), "broker 1 (h:1)")
    assert "share.version" in str(info.value) and "broker 1 (h:1)" in str(info.value)


def test_broker_without_share_apis_is_too_old() -> None:
    with pytest.raises(errors.IncompatibleBrokerError, match="too old") as info:
        require_share_groups(table({3: (0, 12)}, level=None, supported=False), "b1")
    text = str(info.value)
    assert "ShareFetch not offered" in text and "4.1" in text


def test_broker_with_early_access_share_rpcs_is_too_old() -> None:
    # Kafka 4.0 offered share RPCs at v0 only (early access); we speak v1+.
    early = {76: (0, 0), 78: (0, 0), 79: (0, 0)}
    with pytest.raises(errors.IncompatibleBrokerError, match="offered at v0-0"):
        require_share_groups(table(early, level=None, supported=False), "b1")


# -- metadata merging -----------------------------------------------------------------------


def response(*topics: MetadataResponseTopic, brokers: int = 1) -> MetadataResponse:
    return MetadataResponse(
        brokers=tuple(
            MetadataResponseBroker(node_id=n, host=f"h{n}", port=9000 + n)
            for n in range(1, brokers + 1)
        ),
        cluster_id="c",
        controller_id=1,
        topics=topics,
    )


def topic(
    name: str, tid: uuid.UUID, leaders: list[tuple[int, int]], error: int = 0
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=tid,
        partitions=tuple(
            MetadataResponsePartition(partition_index=i, leader_id=leader, leader_epoch=epoch)
            for i, (leader, epoch) in reversed(list(enumerate(leaders)))
        ),
    )


def test_merge_builds_both_maps_sorted_partitions() -> None:
    meta = _merge(
        ClusterMetadata(), response(topic("a", T1, [(1, 0), (2, 3)]), brokers=2), all_topics=False
    )
    assert meta.topic_ids == {"a": T1} and meta.topic_names == {T1: "a"}
    assert [p.partition for p in meta.partitions["a"]] == [0, 1]
    assert meta.leader_for(T1, 1) == 2
    assert meta.partition(T1, 1) is not None and meta.partition(T1, 1).leader_epoch == 3  # type: ignore[union-attr]
    assert meta.brokers[2] == BrokerAddress("h2", 9002, 2)
    assert isinstance(meta.partitions, MappingProxyType)


def test_merge_keeps_other_topics_and_drops_unknown_ones() -> None:
    meta = _merge(
        ClusterMetadata(),
        response(topic("a", T1, [(1, 0)]), topic("b", T2, [(1, 0)])),
        all_topics=False,
    )
    meta = _merge(
        meta,
        response(topic("b", T2, [], error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
        all_topics=False,
    )
    assert set(meta.partitions) == {"a"} and T2 not in meta.topic_names
    assert meta.topic_errors == {"b": 3}


def test_merge_replaces_a_recreated_topic() -> None:
    meta = _merge(ClusterMetadata(), response(topic("a", T1, [(1, 4)])), all_topics=False)
    meta = _merge(meta, response(topic("a", T2, [(1, 0), (1, 0)])), all_topics=False)
    assert meta.topic_ids == {"a": T2} and meta.topic_names == {T2: "a"}
    # The new topic's epoch 0 is not "older" than the deleted topic's epoch 4.
    assert [p.leader_epoch for p in meta.partitions["a"]] == [0, 0]


def test_merge_never_moves_a_leader_epoch_backwards() -> None:
    meta = _merge(
        ClusterMetadata(), response(topic("a", T1, [(2, 5)]), brokers=2), all_topics=False
    )
    stale = _merge(meta, response(topic("a", T1, [(1, 4)]), brokers=2), all_topics=False)
    assert stale.leader_for(T1, 0) == 2 and stale.partitions["a"][0].leader_epoch == 5
    newer = _merge(meta, response(topic("a", T1, [(1, 6)]), brokers=2), all_topics=False)
    assert newer.leader_for(T1, 0) == 1


def test_merge_keeps_view_while_a_topic_has_no_leader_yet() -> None:
    meta = _merge(ClusterMetadata(), response(topic("a", T1, [(1, 0)])), all_topics=False)
    meta = _merge(
        meta, response(topic("a", T1, [], error=ErrorCode.LEADER_NOT_AVAILABLE)), all_topics=False
    )
    assert meta.leader_for(T1, 0) == 1 and meta.topic_errors == {"a": 5}


def test_merge_all_topics_forgets_deleted_ones() -> None:
    meta = _merge(ClusterMetadata(), response(topic("a", T1, [(1, 0)])), all_topics=False)
    meta = _merge(meta, response(topic("b", T2, [(1, 0)])), all_topics=True)
    assert set(meta.topic_ids) == {"b"}


def test_leaderless_partition_has_no_leader() -> None:
    meta = _merge(ClusterMetadata(), response(topic("a", T1, [(-1, 0)])), all_topics=False)
    assert meta.leader_for(T1, 0) is None and meta.leader_for(T1, 7) is None


# -- leader hints ---------------------------------------------------------------------------


async def test_leader_hints_apply_only_when_newer() -> None:
    async with anyio.create_task_group() as tg:
        cluster = Cluster("h1:9001", ConnectionConfig(), tg, metadata_max_age=0)
        cluster._metadata = _merge(
            ClusterMetadata(),
            response(topic("a", T1, [(1, 3), (1, 3)]), brokers=2),
            all_topics=False,
        )
        assert not cluster.apply_leader_hint(T1, 0, 2, 2, None)  # stale
        assert not cluster.apply_leader_hint(T1, 0, 1, 3, None)  # same
        assert not cluster.apply_leader_hint(uuid.uuid4(), 0, 2, 9, None)  # unknown topic
        before = cluster.metadata
        assert cluster.apply_leader_hint(T1, 0, 3, 4, BrokerAddress("h3", 9003, 3))
        after = cluster.metadata
        assert before.leader_for(T1, 0) == 1  # snapshots are immutable
        assert after.leader_for(T1, 0) == 3 and after.partitions["a"][0].leader_epoch == 4
        assert after.leader_for(T1, 1) == 1
        assert after.brokers[3] == BrokerAddress("h3", 9003, 3)
        # A later Metadata response from a lagging broker does not undo the hint.
        cluster._metadata = _merge(
            cluster.metadata,
            response(topic("a", T1, [(1, 3), (1, 3)]), brokers=2),
            all_topics=False,
        )
        assert cluster.metadata.leader_for(T1, 0) == 3
        await cluster.aclose()


# -- bootstrap failures, bounded ------------------------------------------------------------


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_unreachable_bootstrap_fails_within_its_timeout() -> None:
    a, b = unused_port(), unused_port()
    async with anyio.create_task_group() as tg:
        cluster = Cluster(
            f"127.0.0.1:{a},127.0.0.1:{b}", ConnectionConfig(), tg, bootstrap_timeout=0.6
        )
        start = anyio.current_time()
        with pytest.raises(errors.BrokerConnectError) as info:
            await cluster.connect()
        elapsed = anyio.current_time() - start
        await cluster.aclose()
    assert 0.2 < elapsed < 1.5  # retried with backoff, then gave up in time
    assert str(info.value) == (
        f"could not reach any bootstrap broker within 0.6 s: 127.0.0.1:{a} refused the "
        f"connection; 127.0.0.1:{b} refused the connection"
    )
    assert isinstance(info.value.__cause__, errors.BrokerConnectError)


async def test_silent_bootstrap_server_times_out() -> None:
    """A listener that accepts but never answers: the handshake deadline applies."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    accepted: list[anyio.abc.SocketStream] = []

    async def hold(stream: anyio.abc.SocketStream) -> None:
        accepted.append(stream)
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        cluster = Cluster(
            f"127.0.0.1:{port}", ConnectionConfig(connect_timeout=0.3), tg, bootstrap_timeout=1.0
        )
        with anyio.fail_after(5), pytest.raises(errors.BrokerConnectError, match="timed out"):
            await cluster.connect()
        await cluster.aclose()
        tg.cancel_scope.cancel()
    await listener.aclose()
    assert accepted


async def test_closed_cluster_refuses_work() -> None:
    async with anyio.create_task_group() as tg:
        cluster = Cluster("127.0.0.1:1", ConnectionConfig(), tg)
        await cluster.aclose()
        with pytest.raises(errors.BrokerConnectError, match="closed"):
            await cluster.connect()
        with pytest.raises(errors.BrokerConnectError, match="closed"):
            await cluster.connection(1)
        with pytest.raises(errors.BrokerConnectError, match="not connected"):
            _ = cluster.versions
