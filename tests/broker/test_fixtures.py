"""The session broker and the per-test fixtures behave as docs/testing.md promises."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sharecon.errors import KafkaError
from sharecon.testing import KafkaToolError
from sharecon.testing.probe import SHARE_APIS, share_support

if TYPE_CHECKING:
    from sharecon.testing.env import ClusterHandle
    from sharecon.testing.pytest_plugin import ProduceRecords, ShareGroupFactory, TopicFactory
    from sharecon.testing.tools import KafkaTools


def test_session_broker_has_share_groups_enabled(kafka_bootstrap: str) -> None:
    support = share_support(kafka_bootstrap)
    assert support.share_version >= 1
    assert set(support.apis) == set(SHARE_APIS)
    assert support.enabled


def test_bootstrap_is_loopback(kafka_broker: ClusterHandle, kafka_bootstrap: str) -> None:
    host, _, port = kafka_bootstrap.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert kafka_broker.bootstrap == kafka_bootstrap


def test_java_tools_see_the_same_features(kafka_tools: KafkaTools, kafka_bootstrap: str) -> None:
    features = kafka_tools.describe_features()
    assert int(features["share.version"].finalized) == share_support(kafka_bootstrap).share_version


def test_topic_is_fresh_with_three_partitions(topic: str, kafka_tools: KafkaTools) -> None:
    assert topic in kafka_tools.list_topics()
    assert kafka_tools.topic_partitions(topic) == 3


def test_topic_factory_makes_distinct_topics(
    topic_factory: TopicFactory, kafka_tools: KafkaTools
) -> None:
    one = topic_factory(1)
    two = topic_factory(5, config={"retention.ms": "60000"})
    assert one != two
    assert kafka_tools.topic_partitions(one) == 1
    assert kafka_tools.topic_partitions(two) == 5


def test_auto_topic_creation_is_off(kafka_tools: KafkaTools) -> None:
    """Typos in topic names must fail, not create a topic silently."""
    with pytest.raises(KafkaToolError):
        kafka_tools.topic_partitions("no-such-topic-created-by-anyone")


def test_share_group_starts_from_earliest(share_group: str, kafka_tools: KafkaTools) -> None:
    assert kafka_tools.describe_group_config(share_group) == {"share.auto.offset.reset": "earliest"}


def test_share_group_factory_applies_overrides(
    share_group_factory: ShareGroupFactory, kafka_tools: KafkaTools
) -> None:
    # 1000 ms is below Kafka's default minimum (15 s): the test broker lowers the minimum.
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    assert kafka_tools.describe_group_config(group) == {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "1000",
    }


def test_group_config_below_the_broker_minimum_is_rejected(
    share_group_factory: ShareGroupFactory,
) -> None:
    with pytest.raises(KafkaError, match="share.record.lock.duration.ms"):
        share_group_factory({"share.record.lock.duration.ms": "500"})


def test_produced_records_reach_a_share_consumer(
    topic: str, share_group: str, produce_records: ProduceRecords, kafka_tools: KafkaTools
) -> None:
    """End to end through Kafka's own share consumer: the broker setup is usable."""
    result = produce_records(topic, 3000, record_size=64)
    assert result.records == 3000
    assert kafka_tools.share_consume(topic, share_group, 3000, timeout=60) == 3000


def test_console_producer_writes_lines(
    topic_factory: TopicFactory, share_group: str, kafka_tools: KafkaTools
) -> None:
    one_partition = topic_factory(1)
    kafka_tools.produce_lines(one_partition, [f"k{i}:v{i}" for i in range(20)], key_separator=":")
    assert kafka_tools.share_consume(one_partition, share_group, 20, timeout=60) == 20
