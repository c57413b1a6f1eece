"""A record waiting out a delay never holds up the other records (issue 30, behaviour 1),
against a real broker (Kafka 4.2+: delays renew locks).

With ONE member (a second one hid the bug), one partition and a record written every
0.5 s, the records written during the delay arrive during the delay: before the fix, a
member holding only a delayed record sent no fetch until the delay ended (0 of ~9). The
delay (50 s) is far longer than the generous deadline (30 s) the writes must arrive in;
it is within the lock (60 s), so no renew goes out meanwhile (a renew's answer used to
end the stall early, hiding it). Closing releases the delayed record at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import RetryLater
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

LOCK_MS = 60_000
DELAY = 50.0
WRITES = 5
DEADLINE = 30.0


async def _write_during_the_delay(bootstrap: str, topic: str, started: anyio.Event) -> None:
    async with Producer(bootstrap) as producer:
        await started.wait()
        for i in range(WRITES):
            await anyio.sleep(0.5)
            await producer.send_and_wait(topic, f"during-{i}".encode(), partition=0)


async def _setup(
    bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> tuple[str, str]:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    async with Producer(bootstrap) as producer:
        await producer.send_and_wait(topic, b"later", partition=0)
    return topic, group


async def test_records_written_during_a_delayed_release_arrive_during_it(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic, group = await _setup(kafka_bootstrap, topic_factory, share_group_factory)
    seen: list[tuple[str, int]] = []
    started = anyio.Event()
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write_during_the_delay, kafka_bootstrap, topic, started)
            with anyio.fail_after(DEADLINE):
                async for record in consumer:
                    value = (record.value or b"").decode()
                    seen.append((value, record.delivery_count))
                    if value == "later":
                        record.release(delay=DELAY)
                        started.set()
                        continue
                    record.accept()
                    if len(seen) == 1 + WRITES:
                        break
        await consumer.commit()
    assert seen == [("later", 1)] + [(f"during-{i}", 1) for i in range(WRITES)]


async def test_process_with_retry_later_goes_on_with_other_records_during_the_delay(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic, group = await _setup(kafka_bootstrap, topic_factory, share_group_factory)
    seen: list[tuple[str, int]] = []
    started = anyio.Event()
    done = anyio.Event()
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as consumer:

        async def handler(record: Record) -> object:
            value = (record.value or b"").decode()
            seen.append((value, record.delivery_count))
            if value == "later":
                started.set()
                raise RetryLater(DELAY)
            if len(seen) == 1 + WRITES:
                done.set()
            return None

        async with anyio.create_task_group() as tg:
            tg.start_soon(_write_during_the_delay, kafka_bootstrap, topic, started)
            tg.start_soon(consumer.process, handler)
            with anyio.fail_after(DEADLINE):
                await done.wait()
            await anyio.sleep(0.2)  # the handler returned: its record is accepted
            tg.cancel_scope.cancel()
        await consumer.commit()
    assert seen == [("later", 1)] + [(f"during-{i}", 1) for i in range(WRITES)]
