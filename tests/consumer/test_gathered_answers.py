"""A handler that awaits something for each record, working through a batch it holds: the
answers gather for ``ack_linger`` and ride one fetch (rule 2 of
``sharecon._share.fetch_policy``). Before, each answer woke the fetch loop, whose no-wait
fetch had come back empty, and it fetched again at once: one request per record or two
(about 1,000 for 2,000 records at 1 ms each), every one of them empty."""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer, ProducerRecord

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = pytest.mark.anyio

RECORDS, PER_BATCH = 600, 300
_SENT = re.compile(r"sent (Share\w+) gen \d+ epoch \d+ on ")


async def write(bootstrap: str, topic: str) -> None:
    async with Producer(bootstrap) as producer:
        for b in range(RECORDS // PER_BATCH):
            await producer.send_batch(
                ProducerRecord(topic, b"%d" % (b * PER_BATCH + i), partition=0)
                for i in range(PER_BATCH)
            )


async def requests_for_a_slow_handler(
    bootstrap: str, topic: str, group: str, caplog: pytest.LogCaptureFixture
) -> Counter[str]:
    """Every record handled once by a handler that awaits 1 ms; the requests sent."""
    caplog.clear()
    seen: Counter[bytes | None] = Counter()
    with caplog.at_level(logging.DEBUG, logger="sharecon.consumer"):
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
            with anyio.fail_after(60):
                async for record in consumer:
                    seen[record.value] += 1
                    if len(seen) == RECORDS:
                        break
                    await anyio.sleep(0.001)
        sent = Counter(m.group(1) for r in caplog.records if (m := _SENT.search(r.getMessage())))
    assert len(seen) == RECORDS and set(seen.values()) == {1}
    return sent


def _few(sent: Counter[str]) -> None:
    # At least 0.6 s of handling, a fetch per ack_linger (0.1 s) at most while the answers
    # gather, and the fetches that bring the two batches: a few dozen, not hundreds.
    assert sum(sent.values()) <= RECORDS // 10, sent


async def test_a_slow_handler_s_answers_ride_one_fetch_per_linger(
    fake_kafka: FakeKafka, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kafka.create_topic("t", partitions=1)
    fake_kafka.configure_group("g", {"share.auto.offset.reset": "earliest"})
    await write(fake_kafka.bootstrap, "t")
    _few(await requests_for_a_slow_handler(fake_kafka.bootstrap, "t", "g", caplog))


@pytest.mark.broker
async def test_a_slow_handler_s_answers_ride_one_fetch_per_linger_on_a_broker(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(1)
    await write(kafka_bootstrap, topic)
    group = share_group_factory()
    _few(await requests_for_a_slow_handler(kafka_bootstrap, topic, group, caplog))
