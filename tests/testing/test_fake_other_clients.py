"""FakeKafka with clients other than sharecon's, and its clean and abrupt restarts.

Users' suites mix clients: a confluent-kafka (librdkafka) or aiokafka producer writes what
a sharecon ShareConsumer reads, an AdminClient makes the topics. Those clients speak older
versions than sharecon (CreateTopics v4, FindCoordinator v2, DescribeConfigs v1...), so the
fake offers each API's whole range as Kafka 4.x does, where its codecs can read and write it.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import ShareConsumer
from sharecon.protocol.messages import REQUESTS
from sharecon.protocol.versions import api_name
from sharecon.testing.fake.cluster import FakeCluster
from sharecon.types import AckType
from tests.testing.test_fake import EARLIEST, _records

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio

#: The ranges Kafka 4.4 offers for the APIs other clients use with older versions.
KAFKA_44 = {
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "FindCoordinator": (0, 6),
    "DescribeConfigs": (1, 4),
    "ApiVersions": (0, 4),
    "InitProducerId": (0, 5),
}


def test_the_fake_offers_kafkas_ranges_and_only_what_its_codecs_speak() -> None:
    for line in ("4.1", "4.4"):
        offered = {
            api_name(k): r for k, r in FakeCluster(line, "127.0.0.1", 1).api_ranges().items()
        }
        for name, want in KAFKA_44.items():
            assert offered[name] == want, (line, name)
        assert offered["ShareFetch"][0] == 1  # Kafka 4.1+ dropped the early-access v0
        for name, (lo, hi) in offered.items():
            cls = next(c for c in REQUESTS.values() if c.api_name == name)
            assert cls.min_version <= lo <= hi <= cls.max_version, name


async def _read_all(fake: FakeKafka, topic: str, n: int) -> list[bytes | None]:
    fake.configure_group("mixed", EARLIEST)
    got: list[bytes | None] = []
    async with ShareConsumer(fake.bootstrap, group_id="mixed", topics=[topic]) as c:
        with anyio.fail_after(30):
            async for record in c:
                got.append(record.value)
                if len(got) == n:
                    break
    return got


async def test_confluent_kafka_admin_and_producer_then_a_sharecon_consumer(
    fake_kafka: FakeKafka,
) -> None:
    from confluent_kafka import Producer as CkProducer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": fake_kafka.bootstrap})

    def admin_work() -> tuple[set[str], str | None]:
        for f in admin.create_topics([NewTopic("ck", 2, 1), NewTopic("gone", 1, 1)]).values():
            f.result(30)
        for f in admin.delete_topics(["gone"]).values():
            f.result(30)
        names = set(admin.list_topics(timeout=30).topics)
        (described,) = admin.describe_configs([ConfigResource("topic", "ck")]).values()
        return names, described.result(30).get("cleanup.policy", None) and "found"

    names, _ = await anyio.to_thread.run_sync(admin_work)
    assert "ck" in names and "gone" not in names

    def produce() -> int:
        producer = CkProducer({"bootstrap.servers": fake_kafka.bootstrap, "acks": "all"})
        failed: list[object] = []
        for i in range(20):
            producer.produce(
                "ck", f"ck{i}".encode(), on_delivery=lambda e, m: e and failed.append(e)
            )
        left: int = producer.flush(30)
        assert not failed, failed
        return left

    assert await anyio.to_thread.run_sync(produce) == 0
    got = await _read_all(fake_kafka, "ck", 20)
    assert sorted(got) == sorted(f"ck{i}".encode() for i in range(20))
    assert not fake_kafka.errors


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # aiokafka runs on asyncio only
async def test_aiokafka_producer_then_a_sharecon_consumer(fake_kafka: FakeKafka) -> None:
    if importlib.util.find_spec("aiokafka") is None:
        pytest.fail("aiokafka is in the bench extra: pip install -e '.[bench]'")
    from aiokafka import AIOKafkaProducer

    fake_kafka.create_topic("aio", 1)
    producer = AIOKafkaProducer(bootstrap_servers=fake_kafka.bootstrap)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait("aio", f"aio{i}".encode())
    finally:
        await producer.stop()
    got = await _read_all(fake_kafka, "aio", 10)
    assert sorted(got) == sorted(f"aio{i}".encode() for i in range(10))
    assert not fake_kafka.errors


@pytest.mark.parametrize("how", ["restart", "crash"])
async def test_restart_releases_what_members_held_and_crash_does_not(
    fake_kafka: FakeKafka, how: str
) -> None:
    await _records(fake_kafka, "t", 4)
    fake_kafka.configure_group("g", EARLIEST)
    async with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], ack_mode="explicit"
    ) as holder:
        held = await holder.poll(5)
        assert len(held) == 4
        getattr(fake_kafka, how)()
        for r in held:
            holder.acknowledge(r, AckType.ACCEPT)
    async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as again:
        with anyio.fail_after(15):
            got = await again.poll(5)
    assert sorted(r.offset for r in got) == [0, 1, 2, 3]
    # A clean restart released them as a closing session does (4.2+ keeps the count of
    # that delivery); a crash forgot the acquisition, so the count is as before it.
    keeps = not fake_kafka.cluster.model.behaviour.session_release_decrements
    expected = 2 if how == "restart" and keeps else 1
    assert [r.delivery_count for r in got] == [expected] * 4
