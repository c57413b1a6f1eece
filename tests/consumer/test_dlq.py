"""Dead-letter routing against a real broker: copies land with their headers, originals are
archived, a failed copy releases instead, delivery limits route, and Kafka 4.4's own DLQ."""

from __future__ import annotations

import os
import pathlib
import sys
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, ResourceType
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DLQ_HEADERS, DeadLetterPolicy, dead_letter_info
from sharecon.producer import Producer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import BrokerFactory, ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

ROOT = pathlib.Path(__file__).resolve().parents[2]


async def read_all(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[Record]:
    """Read ``n`` records of ``topic`` through a fresh share group (earliest)."""
    group = f"reader-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    out: list[Record] = []
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.fail_after(timeout):
            async for record in consumer:
                out.append(record)
                if len(out) == n:
                    break
    return out


async def test_reject_to_dlq_copies_then_archives(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [b"poison", b"fine"], key=b"k1")
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], dlq_topic=dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            poison = await consumer.__anext__()
        written = await consumer.reject_to_dlq(poison, reason="bad payload")
        assert written is not None and written.topic == dlq
        with anyio.fail_after(30):
            fine = await consumer.__anext__()
        assert fine.value == b"fine"
        fine.accept()
        await consumer.commit()
        # The original is archived: a later record arrives, the poison never again.
        await produce(kafka_bootstrap, topic, [b"marker"])
        with anyio.fail_after(30):
            nxt = await consumer.__anext__()
        nxt.accept()
        assert nxt.value == b"marker"
    [copy] = await read_all(kafka_bootstrap, dlq, 1)
    assert (copy.key, copy.value) == (b"k1", b"poison")
    info = dead_letter_info(copy.headers)
    assert info is not None
    assert (info.topic, info.partition, info.offset) == (topic, 0, poison.offset)
    assert (info.delivery_count, info.group, info.reason) == (1, share_group, "bad payload")
    assert info.time_ms > 0
    assert [k for k, _ in copy.headers] == list(DLQ_HEADERS)


async def test_a_record_too_large_for_the_dlq_gets_a_stub_and_is_rejected(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """The whole copy is too large for the DLQ topic (MESSAGE_TOO_LARGE): released, the
    record would come back until the broker archived it with no copy at all. The copy is
    written without the value instead (a stub naming the value's size), the original is
    rejected and not delivered again, and the metric counts it."""
    topic = topic_factory(1)
    dlq = topic_factory(1, config={"max.message.bytes": "4000"})
    await produce(kafka_bootstrap, topic, [b"x" * 10_000])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], dlq_topic=dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        written = await consumer.reject_to_dlq(record, reason="too big to copy")
        assert written is not None and written.topic == dlq
        assert consumer.metrics().dlq_values_dropped_total == 1
        assert consumer.metrics().dlq_records_total == 1
        assert consumer.metrics().dlq_errors_total == 0
        verdict = await consumer.commit()
        assert all(e is None for e in verdict.values()), verdict
        # Rejected, not released: nothing comes back.
        with anyio.move_on_after(6) as waited:
            again = await consumer.__anext__()
            pytest.fail(f"delivered again: {again!r}")
        assert waited.cancelled_caught
    (stub,) = await read_all(kafka_bootstrap, dlq, 1)
    assert stub.value is None and stub.key == record.key
    info = dead_letter_info(stub.headers)
    assert info is not None
    assert (info.topic, info.offset, info.reason) == (topic, record.offset, "too big to copy")
    assert info.value_dropped == 10_000


async def test_failed_dlq_write_releases_instead_of_rejecting(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """Even the copy without its value is too large for the DLQ topic (its headers alone
    pass 200 bytes): the original comes back, nothing is lost."""
    topic = topic_factory(1)
    dlq = topic_factory(1, config={"max.message.bytes": "200"})
    await produce(kafka_bootstrap, topic, [b"x" * 1000])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], dlq_topic=dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        with pytest.raises(errors.DeadLetterError, match=dlq):
            await consumer.reject_to_dlq(record, reason="too big to copy")
        with anyio.fail_after(30):
            again = await consumer.__anext__()
        assert (again.offset, again.delivery_count) == (record.offset, 2)
        again.accept()


async def test_a_copy_refused_for_now_is_retried_while_the_lock_lasts(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """The dead-letter topic refuses the copy for a while (INVALID_TIMESTAMP, not
    retriable: the original is an hour old, the topic takes a minute), then takes it: the
    copy is retried within the record's lock and written on its first delivery. Before,
    the record was released at once, one delivery spent per refused copy."""
    topic = topic_factory(1)
    dlq = topic_factory(1, config={"message.timestamp.before.max.ms": "60000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_and_wait(topic, b"poison", timestamp=hour_ago)
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], dlq_topic=dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        assert record.delivery_count == 1

        async def heal() -> None:
            await anyio.sleep(2.0)
            async with Admin(kafka_bootstrap) as admin:
                await admin.alter_configs(
                    ResourceType.TOPIC, dlq, {"message.timestamp.before.max.ms": None}
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(heal)
            written = await consumer.reject_to_dlq(record, reason="poison")
        assert written is not None and written.topic == dlq
        assert consumer.metrics().dlq_errors_total == 0
    [copy] = await read_all(kafka_bootstrap, dlq, 1)
    info = dead_letter_info(copy.headers)
    assert info is not None and (info.offset, info.delivery_count) == (record.offset, 1)


async def test_policy_routes_after_max_deliveries(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """max_deliveries=2: after two releases the third delivery goes to the DLQ, not the app."""
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [b"flaky"])
    seen = []
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        ack_mode="explicit",
        dead_letter=DeadLetterPolicy(topic=dlq, max_deliveries=2),
    ) as consumer:
        for _ in range(2):
            with anyio.fail_after(30):
                record = await consumer.__anext__()
            seen.append(record.delivery_count)
            record.release()
        [copy] = await read_all(kafka_bootstrap, dlq, 1)
        with anyio.move_on_after(2):
            extra = await consumer.__anext__()
            pytest.fail(f"a record past the limit was delivered: {extra}")
    assert seen == [1, 2]
    info = dead_letter_info(copy.headers)
    assert info is not None and info.delivery_count == 3 and "max_deliveries=2" in info.reason


async def test_process_routes_handler_failures_on_last_delivery(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [b"ok-1", b"boom", b"ok-2"])
    handled: list[tuple[bytes | None, int]] = []

    async def handler(record: Record) -> None:
        handled.append((record.value, record.delivery_count))
        if record.value == b"boom":
            raise ValueError("cannot parse")

    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        dead_letter=DeadLetterPolicy(topic=dlq, max_deliveries=2),
    ) as consumer:
        with anyio.move_on_after(15):
            await consumer.process(handler, concurrency=3)
    [copy] = await read_all(kafka_bootstrap, dlq, 1)
    assert copy.value == b"boom"
    info = dead_letter_info(copy.headers)
    assert (
        info is not None and info.reason == "ValueError: cannot parse" and info.delivery_count == 2
    )
    assert sorted(v for v, _ in handled if v != b"boom") == [b"ok-1", b"ok-2"]
    assert [dc for v, dc in handled if v == b"boom"] == [1, 2]


async def test_broker_side_dlq_on_kafka_44(
    kafka_broker_factory: BrokerFactory, share_group_factory: ShareGroupFactory
) -> None:
    """Kafka 4.4 with share.version=2 and a group DLQ: rejecting is enough, the broker copies."""
    broker = kafka_broker_factory("4.4")
    topic, dlq = f"src-{uuid.uuid4().hex[:8]}", f"dlq.{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics([topic])
        await admin.create_topics([dlq], configs={"errors.deadletterqueue.group.enable": "true"})
        await admin.alter_group_config(
            group,
            {
                "share.auto.offset.reset": "earliest",
                "errors.deadletterqueue.topic.name": dlq,
                "errors.deadletterqueue.copy.record.enable": "true",
            },
        )
    await produce(broker.bootstrap, topic, [b"poison"])
    async with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], dlq_topic=dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        assert await consumer.reject_to_dlq(record, reason="ignored: the broker copies") is None
        await consumer.commit()
    [copy] = await read_all(broker.bootstrap, dlq, 1)
    assert copy.value == b"poison"
    assert dead_letter_info(copy.headers) is None  # written by the broker, not by us


async def test_a_dlq_topic_other_than_the_brokers_gets_both_copies(
    kafka_broker_factory: BrokerFactory,
) -> None:
    """docs/dlq.md: with dlq_topic unlike the group's errors.deadletterqueue.topic.name,
    sharecon copies to dlq_topic, and the broker copies the rejected record to its own."""
    broker = kafka_broker_factory("4.4")
    topic, group = f"src-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    broker_dlq, client_dlq = f"dlq.b-{uuid.uuid4().hex[:8]}", f"dlq.c-{uuid.uuid4().hex[:8]}"
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics([topic, client_dlq])
        await admin.create_topics(
            [broker_dlq], configs={"errors.deadletterqueue.group.enable": "true"}
        )
        await admin.alter_group_config(
            group,
            {
                "share.auto.offset.reset": "earliest",
                "errors.deadletterqueue.topic.name": broker_dlq,
                "errors.deadletterqueue.copy.record.enable": "true",
            },
        )
    await produce(broker.bootstrap, topic, [b"poison"])
    async with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], dlq_topic=client_dlq, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        written = await consumer.reject_to_dlq(record, reason="both")
        assert written is not None and written.topic == client_dlq
        await consumer.commit()
    [ours] = await read_all(broker.bootstrap, client_dlq, 1)
    [theirs] = await read_all(broker.bootstrap, broker_dlq, 1)
    assert ours.value == theirs.value == b"poison"
    assert dead_letter_info(ours.headers) is not None
    assert dead_letter_info(theirs.headers) is None


async def test_dlq_example_runs(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """examples/dlq.py: the poison record lands in dlq.<group>, the good one is processed."""
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"ok-1", b"poison-1"])
    root = ROOT
    env = {**os.environ, "SHARECON_BOOTSTRAP": kafka_bootstrap, "PYTHONPATH": str(root)}
    with anyio.fail_after(90):
        result = await anyio.run_process(
            [sys.executable, str(root / "examples" / "dlq.py"), topic, share_group, "2"],
            env=env,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert f"processed {topic}-0@0: b'ok-1'" in out
    assert f"dead-lettered {topic}-0@1" in out
    [copy] = await read_all(kafka_bootstrap, f"dlq.{share_group}", 1)
    assert copy.value == b"poison-1"
