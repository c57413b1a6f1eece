"""A dead-letter copy waiting to be tried again is cancelled: the record is given back at
once (released), not left held until its lock ends."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio

POLICY_VIOLATION = 44  # refused, but may pass: the copy is tried again while the lock lasts


async def test_a_cancelled_retry_wait_releases_the_record(
    fake_kafka_factory: FakeKafkaFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_kafka_factory()
    fake.create_topic("t", 1)
    fake.create_topic("dlq-t", 1)
    fake.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with Producer(fake.bootstrap) as producer:
        await producer.send_and_wait("t", b"poison")
    caplog.set_level(logging.INFO, logger="sharecon.consumer")
    async with ShareConsumer(
        fake.bootstrap, group_id="g", topics=["t"], ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(20):
            record = await consumer.__anext__()
        assert record.delivery_count == 1
        fake.fail_next("Produce", 1000, POLICY_VIOLATION)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: consumer.reject_to_dlq(record, topic="dlq-t"))
            with anyio.fail_after(20):
                while not any("trying again" in r.getMessage() for r in caplog.records):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()  # in the wait between two tries
        assert consumer.metrics().dlq_records_total == 0
        # Released by the cancellation: delivered again now, long before its 30 s lock ends.
        with anyio.fail_after(10):
            again = await consumer.__anext__()
        assert (again.offset, again.delivery_count) == (record.offset, 2)
        consumer.acknowledge(again)
