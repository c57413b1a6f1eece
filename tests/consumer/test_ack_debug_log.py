"""At DEBUG the consumer logs which offsets each request acknowledged, on which session,
and each partition's answer: what a doubled or lost acceptance is traced back with."""

from __future__ import annotations

import logging
import re
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon._share.acks import AckBatch, describe
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio


def test_describe_names_each_range_and_answer() -> None:
    tp = TopicIdPartition(uuid.UUID(int=1), 2, "orders")
    acks = {
        tp: [
            AckBatch(5, 9, (AckType.ACCEPT,)),
            AckBatch(10, 11, (AckType.RELEASE, AckType.ACCEPT)),
        ]
    }
    assert describe(acks) == "orders-2 5-9:ACCEPT,10-11:MIXED"
    assert describe(acks, {tp: 0}) == "orders-2 5-9:ACCEPT,10-11:MIXED -> 0"
    assert describe(acks, {}) == "orders-2 5-9:ACCEPT,10-11:MIXED -> missing"
    assert describe({}) == "none"


async def test_each_acknowledgement_and_its_answer_are_logged_at_debug(
    fake_kafka: FakeKafka, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kafka.create_topic("t", partitions=1)
    fake_kafka.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with Producer(fake_kafka.bootstrap) as producer:
        for i in range(3):
            await producer.send("t", b"v%d" % i, partition=0)
    with caplog.at_level(logging.DEBUG, logger="sharecon.consumer"):
        async with ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"], ack_mode="explicit"
        ) as consumer:
            seen = 0
            with anyio.fail_after(30):
                async for record in consumer:
                    record.accept()
                    seen += 1
                    if seen == 3:
                        break
                await consumer.commit()
    lines = [r.getMessage() for r in caplog.records]
    sent = [m for m in lines if re.search(r"sent Share\w+ gen 0 epoch \d+ on .*acks t-0 ", m)]
    answered = [m for m in lines if re.search(r"answered: error 0, acks t-0 .* -> 0", m)]
    assert sent, lines
    assert answered, lines
    # Every offset accepted appears in some acknowledged range.
    ranges = [tuple(map(int, r)) for m in answered for r in re.findall(r"(\d+)-(\d+):ACCEPT", m)]
    assert {o for lo, hi in ranges for o in range(lo, hi + 1)} >= {0, 1, 2}
