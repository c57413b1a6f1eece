"""Answers given while the buffer is full wait for room to ride the next fetch (rule 1 of
``sharecon/_share/fetch_policy.py``): sent alone, each would hold the session's one
request slot for a round trip just as the buffer frees up (found on a real broker: one
ShareAcknowledge in four fetches, a quarter of ``async for``'s rate)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer, ProducerRecord

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio

BATCHES, PER_BATCH = 6, 50


async def consume_all(fake: FakeKafka, group: str, linger: float) -> list[str]:
    """Every record taken with ``async for`` (implicit answers), each handled for a
    millisecond; the kinds of the requests that carried answers before the close."""
    fake.configure_group(group, {"share.auto.offset.reset": "earliest"})
    kinds = []
    handler = _Kinds(kinds)
    logger = logging.getLogger("sharecon.consumer")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        async with ShareConsumer(
            fake.bootstrap, group_id=group, topics=["t"], max_records=10, ack_linger=linger
        ) as consumer:
            seen = 0
            with anyio.fail_after(60):
                async for _record in consumer:
                    seen += 1
                    if seen == BATCHES * PER_BATCH:
                        break
                    await anyio.sleep(0.001)
            during = list(kinds)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return during


class _Kinds(logging.Handler):
    def __init__(self, out: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"sent (Share\w+) gen \d+ epoch \d+ on .*acks", record.getMessage())
        if m:
            self.out.append(m.group(1))


async def test_answers_given_while_the_buffer_is_full_ride_the_next_fetch(
    fake_kafka: FakeKafka,
) -> None:
    fake_kafka.create_topic("t", partitions=1)
    async with Producer(fake_kafka.bootstrap) as producer:
        for b in range(BATCHES):  # answers of 50 records, past the buffer's bound of 20
            await producer.send_batch(
                ProducerRecord("t", b"%d-%d" % (b, i), partition=0) for i in range(PER_BATCH)
            )
    # A linger longer than the test: only room in the buffer sends the answers.
    held = await consume_all(fake_kafka, "held", linger=30.0)
    assert held and set(held) == {"ShareFetch"}, held
    # A linger of a millisecond: the same answers go alone while the buffer is full (as
    # every such answer did before), so the shape the first run avoided did occur.
    alone = await consume_all(fake_kafka, "alone", linger=0.001)
    assert "ShareAcknowledge" in alone, alone
