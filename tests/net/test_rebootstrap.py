"""Rebootstrap (KIP-899 / KIP-1102): the decision without I/O, its settings, and the
cluster view acting on it against FakeKafka.

The real-broker proof (a cluster that moves to new addresses behind the same bootstrap
name) is in tests/cluster/test_rebootstrap_move.py.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net.cluster import Cluster
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon._net.rebootstrap import DEFAULT_TRIGGER_MS, RebootstrapPolicy
from sharecon._net.sasl import SaslConfig
from sharecon.config import from_properties
from sharecon.protocol import MetadataRequest
from sharecon.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

# -- the decision ----------------------------------------------------------------------------


def test_due_only_after_the_trigger_time_without_a_reachable_broker() -> None:
    policy = RebootstrapPolicy("rebootstrap", 2.0)
    assert not policy.due(100.0)  # nothing failed yet
    policy.unreachable(100.0)
    policy.unreachable(101.0)  # the run started at 100, not at the latest failure
    assert not policy.due(101.9)
    assert policy.due(102.0)
    policy.rebootstrapped()
    assert policy.count == 1
    assert not policy.due(200.0)  # a new run of failures must start the clock again


def test_a_reachable_broker_resets_the_clock() -> None:
    policy = RebootstrapPolicy("rebootstrap", 2.0)
    policy.unreachable(0.0)
    policy.reached()
    policy.unreachable(1.5)
    assert not policy.due(3.0)
    assert policy.due(3.5)


def test_strategy_none_never_rebootstraps() -> None:
    policy = RebootstrapPolicy("none", 0.0)
    policy.unreachable(0.0)
    assert not policy.due(1e9)
    assert not policy.required_by(ErrorCode.REBOOTSTRAP_REQUIRED)


def test_rebootstrap_required_is_the_only_code_that_asks() -> None:
    policy = RebootstrapPolicy()
    assert policy.required_by(ErrorCode.REBOOTSTRAP_REQUIRED)
    assert int(ErrorCode.REBOOTSTRAP_REQUIRED) == 129
    assert not policy.required_by(ErrorCode.NONE)
    assert not policy.required_by(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert isinstance(errors.error_for_code(129), errors.RebootstrapRequiredError)


# -- settings --------------------------------------------------------------------------------


def test_defaults_are_javas() -> None:
    config = ConnectionConfig()
    assert config.metadata_recovery_strategy == "rebootstrap"
    assert config.metadata_recovery_rebootstrap_trigger_ms == DEFAULT_TRIGGER_MS == 300_000


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"metadata_recovery_strategy": "REBOOT"}, "metadata_recovery_strategy"),
        ({"metadata_recovery_strategy": None}, "metadata_recovery_strategy"),
        ({"metadata_recovery_rebootstrap_trigger_ms": -1}, "metadata_recovery_rebootstrap"),
        ({"metadata_recovery_rebootstrap_trigger_ms": 2.5}, "metadata_recovery_rebootstrap"),
        ({"metadata_recovery_rebootstrap_trigger_ms": True}, "metadata_recovery_rebootstrap"),
    ],
)
def test_invalid_settings_name_the_setting(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(errors.ConfigError, match=named):
        ConnectionConfig(**kwargs)  # type: ignore[arg-type]


def test_properties_use_javas_names() -> None:
    props = from_properties(
        {
            "bootstrap.servers": "kafka:9092",
            "metadata.recovery.strategy": "NONE",
            "metadata.recovery.rebootstrap.trigger.ms": "2000",
        }
    )
    assert props.config.metadata_recovery_strategy == "none"
    assert props.config.metadata_recovery_rebootstrap_trigger_ms == 2000


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("metadata.recovery.strategy", "sometimes"),
        ("metadata.recovery.rebootstrap.trigger.ms", "5m"),
        ("metadata.recovery.rebootstrap.trigger.ms", "-1"),
        ("metadata.recovery.rebootstrap.trigger.ms", "\u00b2"),  # a digit to str.isdigit
    ],
)
def test_bad_properties_name_the_key(key: str, value: str) -> None:
    with pytest.raises(errors.ConfigError, match=key.replace(".", r"\.")):
        from_properties({"bootstrap.servers": "kafka:9092", key: value})


# -- the cluster view acting on it (FakeKafka) -----------------------------------------------


def _dead_port() -> int:
    # A port nothing listens on: bound, then released (connects are refused at once).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
async def test_rebootstrap_required_drops_the_brokers_and_refreshes(fake_kafka: FakeKafka) -> None:
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, ConnectionConfig(), tg)
        await cluster.connect()
        try:
            fake_kafka.fail_next("Metadata", 1, ErrorCode.REBOOTSTRAP_REQUIRED)
            meta = await cluster.refresh_metadata()
            assert cluster.rebootstraps == 1
            assert len(meta.brokers) == 1
            # The new view works: a request to the broker it names is answered.
            node = next(iter(meta.brokers))
            response = await cluster.request(node, MetadataRequest(topics=()))
            assert response.error_code == 0
        finally:
            await cluster.aclose()


@pytest.mark.anyio
async def test_rebootstrap_required_with_strategy_none_is_an_error(fake_kafka: FakeKafka) -> None:
    config = ConnectionConfig(metadata_recovery_strategy="none")
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, config, tg)
        await cluster.connect()
        try:
            fake_kafka.fail_next("Metadata", 1, ErrorCode.REBOOTSTRAP_REQUIRED)
            with pytest.raises(errors.RebootstrapRequiredError):
                await cluster.refresh_metadata()
            assert cluster.rebootstraps == 0
        finally:
            await cluster.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
async def test_a_moved_broker_is_found_again_through_the_bootstrap_name(
    fake_kafka: FakeKafka, strategy: str
) -> None:
    """The learned address of the only broker goes dead (it "moved"; the bootstrap name
    still leads to it). With rebootstrap and a zero trigger, the second request after the
    failure drops the learned address and reaches the broker again; with "none" every
    request keeps going to the dead address."""
    config = ConnectionConfig(
        metadata_recovery_strategy=strategy, metadata_recovery_rebootstrap_trigger_ms=0
    )
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, config, tg)
        await cluster.connect()
        try:
            node = next(iter(cluster.metadata.brokers))
            cluster._learn_broker(BrokerAddress("127.0.0.1", _dead_port(), node))
            fake_kafka.cut_all()
            with pytest.raises(errors.BrokerConnectError):
                await cluster.request(node, MetadataRequest(topics=()))
            if strategy == "none":
                for _ in range(3):
                    with pytest.raises(errors.BrokerConnectError):
                        await cluster.request(node, MetadataRequest(topics=()))
                assert cluster.rebootstraps == 0
                return
            response = await cluster.request(node, MetadataRequest(topics=()))
            assert response.error_code == 0
            assert cluster.rebootstraps == 1
            assert cluster.metadata.brokers[node].port == int(fake_kafka.bootstrap.split(":")[1])
        finally:
            await cluster.aclose()


@pytest.mark.anyio
async def test_an_identity_provider_outage_starts_no_rebootstrap(fake_kafka: FakeKafka) -> None:
    """Every connection fails for want of an OAUTHBEARER token: the brokers were never
    asked, so the rebootstrap clock does not run (with a zero trigger, a broker failure
    would rebootstrap on the next request, as the test above shows)."""

    def no_token() -> str:
        raise errors.OAuthTokenUnavailableError("the identity provider is down")

    config = ConnectionConfig(
        sasl=SaslConfig("OAUTHBEARER", token_provider=no_token),
        metadata_recovery_rebootstrap_trigger_ms=0,
    )
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, config, tg)
        try:
            cluster._learn_broker(BrokerAddress("127.0.0.1", _dead_port(), 1))
            for _ in range(3):
                with pytest.raises(errors.OAuthTokenUnavailableError):
                    await cluster.request(1, MetadataRequest(topics=()))
            assert cluster.rebootstraps == 0
            assert cluster._recovery.unreachable_since is None
            # Nor when a refresh tries every learned broker and then the bootstrap names.
            for _ in range(3):
                with pytest.raises(errors.BrokerConnectError):
                    await cluster.refresh_metadata()
            assert cluster.rebootstraps == 0
            assert cluster._recovery.unreachable_since is None
        finally:
            await cluster.aclose()


@pytest.mark.anyio
async def test_a_refresh_with_every_learned_broker_dead_reaches_the_bootstrap_name(
    fake_kafka: FakeKafka,
) -> None:
    """Inside a refresh, every learned broker is refused and the rebootstrap falls due
    (a zero trigger) between the first and the second: the refresh tries the second by
    the address it holds (no second lookup, so no refresh from inside the refresh, whose
    lock is held) and then reaches the broker through the bootstrap name."""
    config = ConnectionConfig(metadata_recovery_rebootstrap_trigger_ms=0)
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, config, tg)
        await cluster.connect()
        try:
            node = next(iter(cluster.metadata.brokers))
            cluster._learn_broker(BrokerAddress("127.0.0.1", _dead_port(), node))
            cluster._learn_broker(BrokerAddress("127.0.0.1", _dead_port(), node + 1))
            with anyio.fail_after(30):
                meta = await cluster.refresh_metadata()
            assert meta.brokers[node].port == int(fake_kafka.bootstrap.split(":")[1])
            response = await cluster.request(node, MetadataRequest(topics=()))
            assert response.error_code == 0
        finally:
            await cluster.aclose()


@pytest.mark.anyio
async def test_a_rebootstrap_makes_the_periodic_refresh_run_at_once(fake_kafka: FakeKafka) -> None:
    """The rebootstrap drops the learned brokers; the periodic refresh, asleep for its
    metadata_max_age (300 s by default), is woken and learns them again at once."""
    async with anyio.create_task_group() as tg:
        cluster = Cluster(fake_kafka.bootstrap, ConnectionConfig(), tg)
        await cluster.connect()
        try:
            await anyio.sleep(0.1)  # the refresh loop is asleep, 300 s to go
            cluster._rebootstrap("a test asked")
            assert not cluster.metadata.brokers
            with anyio.fail_after(10):
                while not cluster.metadata.brokers:  # noqa: ASYNC110 - learnt by the loop
                    await anyio.sleep(0.05)
        finally:
            await cluster.aclose()
