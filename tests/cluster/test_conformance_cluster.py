"""Differential conformance across a leader change: the scenarios that move a partition's
leader or leave it without one (``scenarios.CLUSTER_SCENARIOS``), on the model and on the
session's three-broker cluster. Leadership moves with ``KafkaCluster.move_leader`` (a
replica reorder and a preferred-leader election; no broker stops); a one-replica
partition is left without a leader by stopping its broker cleanly, then starting it
again. The new leader builds the share partition from the persisted state: acquisitions
are forgotten and come back with the same count, acknowledgements and releases
survive."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from sharecon.testing.conformance.runner import compare
from sharecon.testing.conformance.scenarios import cluster_scenarios_for
from sharecon.testing.env import env_version

if TYPE_CHECKING:
    from sharecon.testing.cluster import KafkaCluster

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_model_answers_as_the_cluster_does_across_a_leader_move(
    kafka_cluster: KafkaCluster,
) -> None:
    version = env_version()
    # One reassignment at a time (the controller refuses one while another is in
    # progress), should scenarios ever run together.
    one_at_a_time = threading.Lock()

    def move(topic: str, partition: int) -> None:
        with one_at_a_time:
            leader = kafka_cluster.leader_of(topic, partition).node_id
            to = next(b.node_id for b in kafka_cluster.brokers if b.node_id != leader)
            kafka_cluster.move_leader(topic, partition, to)

    def stop(node_id: int) -> None:
        kafka_cluster.broker(node_id).stop()

    def start_again(node_id: int) -> None:
        kafka_cluster.broker(node_id).start()

    scenarios = cluster_scenarios_for(version)
    start = time.monotonic()
    try:
        # One scenario at a time: each one's locks (MOVE_LOCK) must outlast its own move
        # only, and a stopped broker must not be another scenario's leader.
        outcomes = await compare(
            kafka_cluster.bootstrap,
            version,
            scenarios=scenarios,
            move_leader=move,
            stop_broker=stop,
            start_broker=start_again,
            concurrency=1,
        )
    finally:
        # Whatever happened, the session's cluster is whole for the tests after this one.
        for broker in kafka_cluster.brokers:
            broker.start()
        kafka_cluster.wait_in_sync()
    took = time.monotonic() - start
    print(f"leader-move conformance on {version}: {len(outcomes)} scenarios in {took:.1f} s")
    assert len(outcomes) == len(scenarios) >= 4
    wrong = [
        o.explain() + ("" if o.seconds < 50 else f"\n  (it took {o.seconds:.0f} s: near the lock)")
        for o in outcomes
        if not o.agrees
    ]
    assert not wrong, "\n".join(wrong)
    assert all(o.model for o in outcomes)
