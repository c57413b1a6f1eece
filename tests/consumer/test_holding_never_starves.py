"""A record held unanswered never stops fetching (liveness).

``process(concurrency=2)`` whose first handler finishes only once a second record has
been seen (handlers that wait for each other, as a batching handler does) holds its
first record while it waits for the next. A fetch sent while records are held does not
wait at the broker and may come back empty; the consumer then waits for an answer before
fetching again, but not for ever: before the fix it sent no fetch until an answer came,
so a record written after that empty answer never arrived while the first was held
(here: not within 20 s, with a 60 s lock).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

LOCK_MS = 60_000
DEADLINE = 20.0


async def test_a_record_written_while_another_is_held_arrives(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    first_held = anyio.Event()
    second_seen = anyio.Event()
    seen: list[tuple[bytes, int]] = []
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_and_wait(topic, b"first", partition=0)
        async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as consumer:

            async def handle(record: Record[bytes, bytes]) -> None:
                seen.append((record.value or b"", record.delivery_count))
                if record.value == b"first":
                    first_held.set()
                    await second_seen.wait()  # answered only once the next one is here
                else:
                    second_seen.set()

            async def write_later() -> None:
                await first_held.wait()
                # Long enough for the fetches sent while "first" is held to come back
                # empty: the consumer then waits for an answer.
                await anyio.sleep(2.0)
                await producer.send_and_wait(topic, b"second", partition=0)

            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(write_later)
                    tg.start_soon(partial(consumer.process, handle, concurrency=2))
                    await second_seen.wait()
                    await consumer.commit()
                    tg.cancel_scope.cancel()
    assert seen == [(b"first", 1), (b"second", 1)]
