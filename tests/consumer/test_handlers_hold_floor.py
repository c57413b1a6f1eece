"""``process(concurrency=2)`` whose handlers wait for each other's records keeps getting
records however slowly they come (liveness). Against FakeKafka and a real broker.

A handler here finishes only once the next record has been handed out. Records come one
at a time, far apart, so the measured handling rate is low: at a 2 s lock it handles less
than two records within half the lock, and the member used to hold one record at most
(rule 1 of ``sharecon._share.record_limit``, rule 3 of ``sharecon._share.reach``): it never
fetched the record the held one waited for. One record per handler may always be held
(found by the simulation's gathering application, ``sharecon.testing.sim``). Without
that, both tests fail: no record past the first two arrives within a minute."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = pytest.mark.anyio

RECORDS = 5
GAP = 1.2  #: seconds between a record being handed out and the next one being written
DEADLINE = 60.0


@pytest.mark.parametrize("acquire_mode", ["batch", "record_limit"])
async def test_handlers_that_wait_for_each_other_get_every_record(
    fake_kafka: FakeKafka, acquire_mode: str
) -> None:
    fake_kafka.create_topic("t")
    fake_kafka.configure_group(
        "g", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000"}
    )
    await _gather(fake_kafka.bootstrap, "t", "g", acquire_mode)


@pytest.mark.broker
@pytest.mark.parametrize("acquire_mode", ["batch", "auto"])
async def test_handlers_that_wait_for_each_other_get_every_record_from_a_broker(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    acquire_mode: str,
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    await _gather(kafka_bootstrap, topic, group, acquire_mode)


async def _gather(bootstrap: str, topic: str, group: str, acquire_mode: str) -> None:
    """Write the records one at a time, each once the one before was handed out; the
    handlers of ``process(concurrency=2)`` each wait for the next record."""
    seen: list[bytes] = []
    handed = [anyio.Event() for _ in range(RECORDS)]

    async def handle(record: Record[Any, Any]) -> None:
        i = int(record.value or b"0")
        if i not in (int(v) for v in seen):
            seen.append(record.value or b"")
        handed[i].set()
        if i + 1 < RECORDS:
            await handed[i + 1].wait()  # answered only once the next one is here

    async with (
        Producer(bootstrap) as producer,
        ShareConsumer(
            bootstrap,
            group_id=group,
            topics=[topic],
            acquire_mode=acquire_mode,  # type: ignore[arg-type]
        ) as consumer,
    ):

        async def write() -> None:
            for i in range(RECORDS):
                if i:
                    await handed[i - 1].wait()
                    await anyio.sleep(GAP)
                await producer.send_and_wait(topic, b"%d" % i, partition=0)

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                tg.start_soon(lambda: consumer.process(handle, concurrency=2))
                await handed[-1].wait()
                tg.cancel_scope.cancel()
    assert seen == [b"%d" % i for i in range(RECORDS)]
