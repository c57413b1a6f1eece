"""A backlog larger than what a slow link carries in one lock duration (issue 20 part 5).

Through Toxiproxy's bandwidth limit, a fetch sized by ``fetch_max_bytes`` alone cannot
arrive before the locks of its records end: they come back unseen and burn delivery
attempts until the broker archives them. Sized fetches (``sharecon._share.fetch_size``)
ask only for what arrives in time, so every record arrives once. A record that cannot
arrive in time at all makes ``health()`` report the consumer stuck.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest
from confluent_kafka import Producer

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer as SharePro

if TYPE_CHECKING:
    from sharecon.testing.cluster import KafkaCluster

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

KIB_PER_S = 20
LOCK_MS = 5000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _setup(cluster: KafkaCluster, *, lock_ms: int) -> tuple[str, str]:
    topic = f"slow-{uuid.uuid4().hex[:8]}"
    group = f"slow-g-{uuid.uuid4().hex[:8]}"
    async with Admin(cluster.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1, replication_factor=1)
        await admin.alter_group_config(
            group,
            {
                "share.auto.offset.reset": "earliest",
                "share.record.lock.duration.ms": str(lock_ms),
            },
        )
    return topic, group


def _produce(bootstrap: str, topic: str, values: list[bytes], batch_size: int) -> None:
    # Small batches: the broker returns (and acquires) at least one whole batch per fetch.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "batch.size": batch_size,
            "linger.ms": 5,
            "compression.type": "none",
            "acks": "all",
        }
    )
    for value in values:
        producer.produce(topic, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0


async def test_a_backlog_over_a_slow_link_arrives_once(kafka_cluster: KafkaCluster) -> None:
    """250 KB behind a 20 KiB/s link (12.5 s of transfer) with a 5 s lock: every record
    arrives, each on its first delivery, and no fetch comes back after its lock ended."""
    n, size = 250, 1000
    topic, group = await _setup(kafka_cluster, lock_ms=LOCK_MS)
    values = [os.urandom(size) for _ in range(n)]
    await anyio.to_thread.run_sync(
        lambda: _produce(kafka_cluster.plaintext_bootstrap, topic, values, 10_000)
    )
    for proxy in kafka_cluster.proxies:
        proxy.bandwidth(KIB_PER_S)
    counts: dict[int, int] = {}
    started = time.monotonic()
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        with anyio.fail_after(90):
            async for record in c:
                assert record.value == values[record.offset]
                counts[record.offset] = record.delivery_count
                if len(counts) == n:
                    break
        await c.commit()
        late = c.metrics().fetches_late_total
        ok = c.health().ok
    elapsed = time.monotonic() - started
    assert sorted(counts) == list(range(n))  # none archived: every offset arrived
    redelivered = {o: d for o, d in counts.items() if d != 1}
    assert not redelivered, f"records delivered more than once: {redelivered}"
    assert late == 0 and ok
    # The link, not the sizing, is the limit: 250 KB at 20 KiB/s is 12.2 s (28 s measured
    # on a loaded machine). Printed, not asserted: the counts above are the test.
    print(f"250 KB over the 20 KiB/s link in {elapsed:.1f} s")


async def test_a_record_that_cannot_arrive_within_the_lock(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """One 120 KB record over 20 KiB/s (6 s) with a 2 s lock: it is still fetched, the
    user is warned and it is counted, and ``health()`` says the consumer is stuck."""
    topic, group = await _setup(kafka_cluster, lock_ms=2000)
    await anyio.to_thread.run_sync(
        lambda: _produce(kafka_cluster.plaintext_bootstrap, topic, [os.urandom(120_000)], 200_000)
    )
    for proxy in kafka_cluster.proxies:
        proxy.bandwidth(KIB_PER_S)
    caplog.set_level(logging.WARNING, logger="sharecon")
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        assert c.health().ok or c.health().member_state != "stable"
        with anyio.fail_after(40):
            while not c.health().stuck_for:  # noqa: ASYNC110 - polled state, no event
                await anyio.sleep(0.2)
        health = c.health()
        assert not health.ok and health.stuck_for > 2.0
        assert health.cluster.ok  # every broker reachable: only the link is too slow
        assert c.metrics().fetches_late_total >= 1
    assert any("longer than the 2.0 s acquisition lock" in r.getMessage() for r in caplog.records)


# -- a batch that cannot cross the link within the lock (issue 30, behaviour 3) ---------------

#: Records of one batch, written by sharecon's producer at its default batch size (512 KiB):
#: 80 KB, 8 s at 10 KiB/s, over a 5 s lock (the issue: 512 KiB, 51 s, over 30 s).
OVERSIZED_RECORDS = 80
OVERSIZED_KIB_PER_S = 10
OVERSIZED_LOCK_MS = 5000


async def _oversized_batch(cluster: KafkaCluster) -> tuple[str, str]:
    topic = f"slow-{uuid.uuid4().hex[:8]}"
    group = f"slow-g-{uuid.uuid4().hex[:8]}"
    async with Admin(cluster.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1, replication_factor=1)
        await admin.alter_group_config(
            group,
            {
                "share.auto.offset.reset": "earliest",
                "share.record.lock.duration.ms": str(OVERSIZED_LOCK_MS),
                # Room to count the attempts: nothing is archived before the check.
                "share.delivery.count.limit": "10",
            },
        )
    async with SharePro(cluster.plaintext_bootstrap, linger=1.0) as producer:
        for i in range(OVERSIZED_RECORDS):
            await producer.send(topic, i.to_bytes(4, "big") + os.urandom(996), partition=0)
        await producer.flush()
    return topic, group


async def _delivery_counts(cluster: KafkaCluster, topic: str, group: str) -> dict[int, int]:
    """Each record's delivery count as a fresh member on a healed link sees it."""
    for proxy in cluster.proxies:
        proxy.heal()
    counts: dict[int, int] = {}
    async with ShareConsumer(cluster.bootstrap, group_id=group, topics=[topic]) as c:
        with anyio.fail_after(60):
            async for record in c:
                counts[record.offset] = record.delivery_count
                if len(counts) == OVERSIZED_RECORDS:
                    break
        await c.commit()
    return counts


@pytest.mark.parametrize("request_timeout", [30.0, 3.0], ids=["late-answer", "no-answer"])
async def test_a_batch_that_cannot_arrive_within_the_lock_is_fetched_at_most_twice(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture, request_timeout: float
) -> None:
    """80 KB in one batch over 10 KiB/s (8 s) with a 5 s lock. ``late-answer``: the fetch's
    answer arrives after the lock (one attempt spent, then the partition is no longer
    fetched); ``no-answer``: the fetch times out first (3.5 s), a one-record probe is
    awaited four locks and arrives late (a second attempt). Before the fix the batch was
    fetched again every lock: 4 to 5 attempts each within 30 s."""
    topic, group = await _oversized_batch(kafka_cluster)
    for proxy in kafka_cluster.proxies:
        proxy.bandwidth(OVERSIZED_KIB_PER_S)
    caplog.set_level(logging.WARNING, logger="sharecon")
    async with ShareConsumer(
        kafka_cluster.bootstrap,
        group_id=group,
        topics=[topic],
        request_timeout=request_timeout,
    ) as c:
        with anyio.fail_after(90):
            while not c.health().blocked:  # noqa: ASYNC110 - polled state, no event
                await anyio.sleep(0.2)
        # Three more locks: were it still fetched, each would spend another attempt.
        await anyio.sleep(3 * OVERSIZED_LOCK_MS / 1000)
        health = c.health()
    assert not health.ok and health.cluster.ok
    [cause] = health.blocked
    assert cause.startswith(f"{topic}-0: a ")
    assert "-byte batch needs" in cause and "bytes/s" in cause
    assert "5.0 s acquisition lock" in cause
    assert any("no longer fetched" in r.getMessage() for r in caplog.records)
    counts = await _delivery_counts(kafka_cluster, topic, group)
    assert sorted(counts) == list(range(OVERSIZED_RECORDS))
    # At most two attempts spent by the slow member, plus this delivery.
    spent = {o: d - 1 for o, d in counts.items() if d - 1 > 2}
    assert not spent, f"more than two delivery attempts spent: {spent}"


async def test_a_partition_stopped_over_a_slow_link_is_fetched_again_once_it_heals(
    kafka_cluster: KafkaCluster,
) -> None:
    """The oversized batch stops its partition (the only one: no other answer from the
    leader can show a faster link); the link then heals. The same consumer probes the
    partition again within REPROBE_LOCKS locks and receives every record; ``health()`` is
    ok again. Before, the partition stayed stopped for good (found by the whole-client
    simulation's slow link, seeds 79 and 93)."""
    topic, group = await _oversized_batch(kafka_cluster)
    for proxy in kafka_cluster.proxies:
        proxy.bandwidth(OVERSIZED_KIB_PER_S)
    seen: set[int] = set()
    async with ShareConsumer(
        kafka_cluster.bootstrap, group_id=group, topics=[topic], request_timeout=30.0
    ) as c:
        with anyio.fail_after(90):
            while not c.health().blocked:  # noqa: ASYNC110 - polled state, no event
                await anyio.sleep(0.2)
        for proxy in kafka_cluster.proxies:
            proxy.heal()
        # REPROBE_LOCKS (10) locks of 5 s after the block, a probe, then the batch: with
        # room for a loaded machine.
        with anyio.fail_after(180):
            async for record in c:
                seen.add(int.from_bytes((record.value or b"")[:4], "big"))
                if len(seen) == OVERSIZED_RECORDS:
                    break
        await c.commit()
        health = c.health()
    assert seen == set(range(OVERSIZED_RECORDS))
    assert not health.blocked and health.ok, health
