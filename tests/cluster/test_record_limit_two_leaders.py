"""A strict record limit shared by two leaders (KIP-1206, Kafka 4.2+), one of them with no
records: the records at the other one are not held up by its long polls (issue 30).

One member, ``acquire_mode="record_limit"`` and ``max_records=1``, a topic of two
partitions led by two brokers, records written to one partition only. The one-record
budget is shared by both leaders' fetch loops. Before the fix, after each record the
budget went to the empty leader at its next idle wake-up, which then held it for a whole
long poll (``max_wait_ms``, 15 s here): one record per 16 s, so the six records took
over 80 s. Now a finished record hands the budget on at once, and a fetch granted while
the other leader waits for the budget does not wait at the broker: once the first long
poll (at most 15 s) is over the records follow one another at once. The deadline (45 s)
is generous for that and far shorter than the old pace.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing.env import env_version

if TYPE_CHECKING:
    from sharecon.testing.cluster import KafkaCluster

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

RECORDS = 6
MAX_WAIT_MS = 15_000
DEADLINE = 45.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_records_at_one_leader_are_not_held_up_by_the_other_leaders_long_polls(
    kafka_cluster: KafkaCluster,
) -> None:
    if tuple(int(x) for x in env_version().split(".")[:2]) < (4, 2):
        pytest.skip("acquire_mode='record_limit' needs Kafka 4.2+")
    topic = f"rl2-{uuid.uuid4().hex[:8]}"
    group = f"rl2-g-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_cluster.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=2, replication_factor=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    leaders = [kafka_cluster.leader_of(topic, p).node_id for p in (0, 1)]
    if leaders[0] == leaders[1]:
        other = next(b.node_id for b in kafka_cluster.brokers if b.node_id != leaders[0])
        await anyio.to_thread.run_sync(lambda: kafka_cluster.move_leader(topic, 1, other))
    assert kafka_cluster.leader_of(topic, 0).node_id != kafka_cluster.leader_of(topic, 1).node_id
    async with Producer(kafka_cluster.bootstrap) as producer:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, b"r%d" % i, partition=0)
    got: list[int] = []
    async with ShareConsumer(
        kafka_cluster.bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        acquire_mode="record_limit",
        max_records=1,
        max_wait_ms=MAX_WAIT_MS,
    ) as consumer:
        with anyio.move_on_after(DEADLINE) as scope:
            async for record in consumer:
                got.append(record.offset)
                record.accept()
                if len(got) == RECORDS:
                    break
        assert not scope.cancelled_caught, f"{len(got)} of {RECORDS} records in {DEADLINE} s"
        await consumer.commit()
    assert sorted(got) == list(range(RECORDS))
