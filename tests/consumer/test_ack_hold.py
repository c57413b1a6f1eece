"""Answers given while the buffer is full wait for room to ride the next fetch (rule 1 of
``sharecon/_share/fetch_policy.py``): sent alone, each would hold the session's one
request slot for a round trip just as the buffer frees up (found on a real broker: one
ShareAcknowledge in four requests, a quarter of ``async for``'s rate).

The same scenario runs on FakeKafka and on a real broker: with a linger longer than the
test only fetches carry answers before the close; with a linger of a millisecond answers
go alone while the buffer is full, so the shape the first run avoided did occur. Every
record is handed out once.

An application that stalls while the buffer is full: the answers it gave before the stall
go out within ``ack_linger``, though nothing else wakes the fetch loop (a heartbeat
interval longer than the stall). Before, they waited for the next wake-up, past their
locks, and the records came back to be handled again."""

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
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = pytest.mark.anyio

BATCHES, PER_BATCH = 6, 50
_SENT = re.compile(r"sent (Share\w+) gen \d+ epoch \d+ on .*acks")


async def write(bootstrap: str, topic: str) -> None:
    """Batches of 50 records: answers past the buffer's bound of 20 (``max_records=10``)."""
    async with Producer(bootstrap) as producer:
        for b in range(BATCHES):
            await producer.send_batch(
                ProducerRecord(topic, b"%d-%d" % (b, i), partition=0) for i in range(PER_BATCH)
            )


async def consume_all(
    bootstrap: str, topic: str, group: str, linger: float, caplog: pytest.LogCaptureFixture
) -> list[str]:
    """Every record taken with ``async for`` (implicit answers), each handled for a
    millisecond; the kinds of the requests that carried answers before the close."""
    caplog.clear()
    seen: set[bytes | None] = set()
    with caplog.at_level(logging.DEBUG, logger="sharecon.consumer"):
        async with ShareConsumer(
            bootstrap, group_id=group, topics=[topic], max_records=10, ack_linger=linger
        ) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    seen.add(record.value)
                    if len(seen) == BATCHES * PER_BATCH:
                        break
                    await anyio.sleep(0.001)
            kinds = [m.group(1) for r in caplog.records if (m := _SENT.search(r.getMessage()))]
    assert len(seen) == BATCHES * PER_BATCH
    return kinds


async def test_answers_given_while_the_buffer_is_full_ride_the_next_fetch(
    fake_kafka: FakeKafka, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kafka.create_topic("t", partitions=1)
    await write(fake_kafka.bootstrap, "t")
    for group in ("held", "alone"):
        fake_kafka.configure_group(group, {"share.auto.offset.reset": "earliest"})
    held = await consume_all(fake_kafka.bootstrap, "t", "held", 30.0, caplog)
    assert held and set(held) == {"ShareFetch"}, held
    alone = await consume_all(fake_kafka.bootstrap, "t", "alone", 0.001, caplog)
    assert "ShareAcknowledge" in alone, alone


@pytest.mark.broker
async def test_answers_given_while_the_buffer_is_full_ride_the_next_fetch_on_a_broker(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(1)
    await write(kafka_bootstrap, topic)
    held = await consume_all(kafka_bootstrap, topic, share_group_factory(), 30.0, caplog)
    assert held and set(held) == {"ShareFetch"}, held
    alone = await consume_all(kafka_bootstrap, topic, share_group_factory(), 0.001, caplog)
    assert "ShareAcknowledge" in alone, alone


STALL_GROUP = {
    "share.auto.offset.reset": "earliest",
    "share.record.lock.duration.ms": "1000",
    # Nothing but the application's answer may wake the fetch loop during the stall.
    "share.heartbeat.interval.ms": "8000",
}


async def stall_mid_answer(bootstrap: str, topic: str, group: str) -> dict[bytes, int]:
    """Take 25 records of the first answer of 50 (the buffer past its bound of 20), stall
    for two locks, then take the rest: how many times each record was handed out."""
    seen: dict[bytes, int] = {}
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic], max_records=10) as c:
        with anyio.fail_after(60):
            async for record in c:
                value = record.value or b""
                seen[value] = seen.get(value, 0) + 1
                if len(seen) == 2 * PER_BATCH:
                    break
                # Once: the record in hand comes back after the stall (its lock ended).
                await anyio.sleep(4.0 if len(seen) == 25 and seen[value] == 1 else 0.001)
    return seen


def _handled_twice(seen: dict[bytes, int]) -> list[bytes]:
    # The first two batches, every record of them (records lost to their delivery limit
    # would leave a gap filled by the third batch's).
    assert set(seen) == {b"%d-%d" % (b, i) for b in range(2) for i in range(PER_BATCH)}
    # The record in hand during the stall lost its lock: it alone may come back.
    return sorted(v for v, n in seen.items() if n > 1 and v != b"0-24")


async def test_answers_given_before_a_stall_reach_the_broker_within_the_linger(
    fake_kafka: FakeKafka,
) -> None:
    fake_kafka.create_topic("t", partitions=1)
    await write(fake_kafka.bootstrap, "t")
    fake_kafka.configure_group("stall", STALL_GROUP)
    assert _handled_twice(await stall_mid_answer(fake_kafka.bootstrap, "t", "stall")) == []


@pytest.mark.broker
async def test_answers_given_before_a_stall_reach_the_broker_within_the_linger_on_a_broker(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    await write(kafka_bootstrap, topic)
    group = share_group_factory(STALL_GROUP)
    assert _handled_twice(await stall_mid_answer(kafka_bootstrap, topic, group)) == []
