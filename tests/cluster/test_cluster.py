"""KafkaCluster itself: who advertises what, and the roles it reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sharecon.testing._sync import with_admin

if TYPE_CHECKING:
    from sharecon.testing.cluster import KafkaCluster

pytestmark = pytest.mark.broker


def test_clients_are_told_the_proxies_and_tools_are_not(kafka_cluster: KafkaCluster) -> None:
    proxied = with_admin(kafka_cluster.bootstrap, lambda a: a.describe_cluster())
    ports = {b.node_id: b.port for b in proxied.brokers}
    assert ports == {b.node_id: b.proxy.listen_port for b in kafka_cluster.brokers if b.proxy}
    assert len(ports) == 3
    internal = with_admin(kafka_cluster.plaintext_bootstrap, lambda a: a.describe_cluster())
    assert {b.node_id: b.port for b in internal.brokers} == {
        b.node_id: b.internal_port for b in kafka_cluster.brokers
    }
    assert internal.controller_id in {c.node_id for c in kafka_cluster.controllers} or (
        internal.controller_id in ports  # KRaft reports a random broker as "controller"
    )


def test_internal_topics_are_replicated_three_times(kafka_cluster: KafkaCluster) -> None:
    name = "sharecon-rf-check"
    if name not in kafka_cluster.tools.list_topics():
        kafka_cluster.tools.create_topic(name, partitions=1, replication_factor=3)
    kafka_cluster.coordinator_of("sharecon-rf-check-group")  # makes __consumer_offsets exist
    described = with_admin(
        kafka_cluster.plaintext_bootstrap, lambda a: a.list_topics(internal=True)
    )
    offsets = described["__consumer_offsets"]
    assert all(len(p.replicas) == 3 for p in offsets.partitions)
    assert all(len(p.replicas) == 3 for p in described[name].partitions)
    leader = kafka_cluster.leader_of(name, 0)
    assert leader.running and leader.node_id in {1, 2, 3}
