from __future__ import annotations
import os, uuid, time
from collections import Counter
import anyio, pytest
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
pytestmark = [pytest.mark.anyio, pytest.mark.broker]

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

async def test_issue_scenario(kafka_cluster) -> None:
    topic = f"slow-{uuid.uuid4().hex[:8]}"; group = f"slow-g-{uuid.uuid4().hex[:8]}"
    async with Admin(kafka_cluster.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1, replication_factor=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "30000", "share.delivery.count.limit": "10"})
    async with Producer(kafka_cluster.plaintext_bootstrap) as p:
        for i in range(600):
            await p.send(topic, os.urandom(1000), partition=0)
        await p.flush()
    for proxy in kafka_cluster.proxies:
        proxy.bandwidth(10)
    import logging; logging.basicConfig(level=logging.DEBUG, format="%(relativeCreated)d %(name)s %(message)s")
    t0 = time.monotonic(); first_blocked = None
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        while time.monotonic() - t0 < 150:
            h = c.health()
            if h.blocked and first_blocked is None:
                first_blocked = time.monotonic() - t0
                print("BLOCKED at", round(first_blocked, 1), h.blocked, "stuck", h.stuck_for)
            await anyio.sleep(1)
        h = c.health()
        print("END", h.ok, h.stuck_for, h.blocked, c.metrics().fetches_late_total)
    for proxy in kafka_cluster.proxies:
        proxy.heal()
    counts = {}
    async with ShareConsumer(kafka_cluster.bootstrap, group_id=group, topics=[topic]) as c:
        with anyio.fail_after(90):
            async for r in c:
                counts[r.offset] = r.delivery_count
                if len(counts) == 600:
                    break
    print("SPENT", sorted(Counter(d - 1 for d in counts.values()).items()), len(counts))
