"""How the environment picks the cluster and configures a container (no Docker needed)."""

from __future__ import annotations

import pytest

from sharecon.testing import BrokerStartError
from sharecon.testing.env import DockerKafka, kafka_image, requested_kind
from sharecon.testing.pytest_plugin import new_broker


def test_default_image_is_apache_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARECON_KAFKA_IMAGE", raising=False)
    assert kafka_image("4.4.0") == "apache/kafka:4.4.0"
    assert DockerKafka("4.4").image == "apache/kafka:4.4.0"


def test_image_override_fills_in_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARECON_KAFKA_IMAGE", "registry.example/kafka:{version}-custom")
    assert DockerKafka("4.3").image == "registry.example/kafka:4.3.2-custom"


def test_container_listeners_bind_loopback_only() -> None:
    env = DockerKafka("4.4.0", extra_config={"group.share.delivery.count.limit": "3"}).environment()
    listeners = env["KAFKA_LISTENERS"].split(",")
    assert len(listeners) == 2
    assert all("://127.0.0.1:" in listener for listener in listeners)
    assert env["KAFKA_ADVERTISED_LISTENERS"].startswith("PLAINTEXT://127.0.0.1:")
    assert "jmxremote" not in env["KAFKA_JMX_OPTS"]
    # KafkaDockerWrapper's naming: '.' -> '_', '_' -> '__'.
    assert env["KAFKA_GROUP_SHARE_DELIVERY_COUNT_LIMIT"] == "3"
    assert env["KAFKA_GROUP_SHARE_ASSIGNMENT_INTERVAL_MS"] == "0"  # 4.3+ only


def test_share_groups_are_switched_on_for_4_1() -> None:
    assert DockerKafka("4.1.2").environment()["KAFKA_GROUP_SHARE_ENABLE"] == "true"
    assert "KAFKA_GROUP_SHARE_ENABLE" not in DockerKafka("4.4.0").environment()


def test_requested_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARECON_BOOTSTRAP", raising=False)
    monkeypatch.setenv("SHARECON_BROKER", "docker")
    assert requested_kind() == "docker"
    monkeypatch.setenv("SHARECON_BOOTSTRAP", "127.0.0.1:9092")
    assert requested_kind() == "external"
    monkeypatch.delenv("SHARECON_BOOTSTRAP")
    monkeypatch.setenv("SHARECON_BROKER", "podman")
    with pytest.raises(BrokerStartError, match="expected 'local' or 'docker'"):
        requested_kind()


def test_factory_under_docker_refuses_local_only_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SHARECON_BOOTSTRAP", raising=False)
    monkeypatch.setenv("SHARECON_BROKER", "docker")
    with pytest.raises(BrokerStartError, match="sasl not supported with SHARECON_BROKER=docker"):
        new_broker("4.4.0", sasl="PLAIN")
    assert isinstance(new_broker("4.4.0", extra_config={"a.b": "1"}), DockerKafka)
