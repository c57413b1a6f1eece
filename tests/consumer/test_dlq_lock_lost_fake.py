"""A record whose lock is lost while its dead-letter copy is being written: the copy
stands, the loss is reported, and nothing is raised to the application (found by the
whole-client simulation: ``process()`` raised InvalidRecordStateError)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio

NOT_ENOUGH_REPLICAS = 19


async def test_a_lock_lost_during_the_copy_is_not_raised_from_process(
    fake_kafka_factory: FakeKafkaFactory,
) -> None:
    fake = fake_kafka_factory()
    fake.create_topic("t", 1)
    fake.create_topic("dlq-t", 1)
    fake.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with Producer(fake.bootstrap) as producer:
        await producer.send_and_wait("t", b"poison")
    deliveries: list[int] = []
    again = anyio.Event()

    async def handler(record: Record) -> None:
        deliveries.append(record.delivery_count)
        if len(deliveries) == 1:
            # The copy's Produce is refused (retriable) for several seconds; meanwhile the
            # broker ends the member's connections, and with them the record's lock, and
            # delivers the record again, to the other worker.
            fake.fail_next("Produce", 12, NOT_ENOUGH_REPLICAS)
            tg.start_soon(cut_soon)
            raise ValueError("poison")
        again.set()

    async def cut_soon() -> None:
        await anyio.sleep(1.0)
        fake.cut(consumer.member_id)

    policy = DeadLetterPolicy(topic="dlq-t", max_deliveries=1, breaker_threshold=None)
    async with ShareConsumer(
        fake.bootstrap, group_id="g", topics=["t"], dead_letter=policy
    ) as consumer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(consumer.process, handler, concurrency=2))
            with anyio.fail_after(60):
                await again.wait()
                while consumer.metrics().dlq_records_total < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            # process() is still running (it raised nothing) and the consumer is not failed.
            with anyio.fail_after(5):
                await anyio.sleep(0.5)
            assert consumer.health().failed is None
            tg.cancel_scope.cancel()
    assert deliveries[:2] == [1, 2]
