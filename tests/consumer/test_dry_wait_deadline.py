"""A member whose held records are renewed still fetches again after an empty answer
(liveness).

As in ``test_holding_never_starves.py``: ``process(concurrency=2)`` whose first handler
finishes only once a second record was seen holds its record, and the fetches sent
meanwhile do not wait at the broker and come back empty; the member then fetches again a
long poll (``max_wait_ms``) after that empty answer. Here the lock is short and the long
poll long, so the lock keeper renews the held record every second or so, and each
renewal wakes the fetch loop: a wait restarted at each wake-up never ended, and the
record written later never arrived (found by the simulation, mutant ``dry-restarts``).
The wait is a deadline from the empty answer.
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

LOCK_MS = 2000
MAX_WAIT_MS = 2500  #: longer than the keeper's renewals are apart
DEADLINE = 60.0


async def test_renewals_do_not_keep_a_dry_member_from_fetching(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    first_held = anyio.Event()
    second_seen = anyio.Event()
    seen: list[tuple[bytes, int]] = []
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_and_wait(topic, b"first", partition=0)
        async with ShareConsumer(
            kafka_bootstrap, group_id=group, topics=[topic], max_wait_ms=MAX_WAIT_MS
        ) as consumer:

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
                # empty and for renewals to begin.
                await anyio.sleep(3.0)
                await producer.send_and_wait(topic, b"second", partition=0)

            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(write_later)
                    tg.start_soon(partial(consumer.process, handle, concurrency=2))
                    await second_seen.wait()
                    await consumer.commit()
                    tg.cancel_scope.cancel()
    assert seen == [(b"first", 1), (b"second", 1)]
