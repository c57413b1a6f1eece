"""``ShareConsumer.stop_fetching()`` against a real broker: what was fetched is still handed
out and answered, nothing more is acquired, and the rest stays untouched for others."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_stop_fetching_hands_out_what_was_fetched_and_acquires_nothing_more(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap) as producer:
        for b in range(10):  # ten batches of five: a fetch acquires whole batches
            for i in range(5):
                await producer.send(topic, f"r{b * 5 + i}".encode(), partition=0)
            await producer.flush()
    first: list[str] = []
    with anyio.fail_after(30):
        async with ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], max_records=5
        ) as consumer:
            batch = []
            while not batch:
                batch = await consumer.poll(5.0)
            first += [(r.value or b"").decode() for r in batch]
            consumer.stop_fetching()
            # What was fetched (and a fetch already on its way) still comes out.
            while batch := await consumer.poll(1.5):
                assert all(r.delivery_count == 1 for r in batch)
                first += [(r.value or b"").decode() for r in batch]
            assert await consumer.poll(1.0) == []  # nothing more is fetched
        with pytest.raises(errors.ClientClosedError):
            consumer.stop_fetching()
    assert 0 < len(first) < 50, first
    # The rest was never acquired: a fresh member gets it on its first delivery, and
    # nothing the first member was handed comes back (it was answered, not released).
    rest: list[tuple[str, int]] = []
    with anyio.fail_after(30):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as fresh:
            async for record in fresh:
                rest.append(((record.value or b"").decode(), record.delivery_count))
                if len(rest) == 50 - len(first):
                    break
    assert {v for v, _ in rest} == {f"r{i}" for i in range(50)} - set(first)
    assert {dc for _, dc in rest} == {1}


async def test_fetching_stopped_waits_for_the_fetch_on_its_way_and_nothing_is_released(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """A fetch waiting at the broker when fetching stops brings its records later than a
    quiet window would wait (max_wait_ms 4 s): fetching_stopped() returns only once they
    are in, and handling them all leaves none to be released (delivery counts all 1)."""
    topic = topic_factory(1)
    handled: list[tuple[str, int]] = []
    with anyio.fail_after(40):
        async with (
            Producer(kafka_bootstrap) as producer,
            ShareConsumer(
                kafka_bootstrap, group_id=share_group, topics=[topic], max_wait_ms=4000
            ) as consumer,
        ):
            with pytest.raises(errors.ClientStateError):
                await consumer.fetching_stopped(0.0)
            while not consumer.assignment:  # noqa: ASYNC110 - polled state, no event
                await anyio.sleep(0.05)
            await anyio.sleep(1.0)  # the empty topic's fetch now waits at the broker
            consumer.stop_fetching()
            assert not await consumer.fetching_stopped(1.5)  # that fetch is still out
            for i in range(5):
                await producer.send(topic, f"a{i}".encode(), partition=0)
            await producer.flush()
            assert await consumer.fetching_stopped(10.0)
            # Everything the waiting fetch acquired is in the buffer now: take it all.
            m = consumer.metrics()
            assert m.buffered_records == 5
            while batch := await consumer.poll(0.2):
                handled += [((r.value or b"").decode(), r.delivery_count) for r in batch]
                for r in batch:
                    r.accept()
            await consumer.commit()
            assert consumer.metrics().held_records == 0
            for i in range(5):  # written after the drain: no one acquired them
                await producer.send(topic, f"b{i}".encode(), partition=0)
            await producer.flush()
    assert handled == [(f"a{i}", 1) for i in range(5)]
    # None of the drained member's records comes back; the rest arrives on delivery 1.
    rest: list[tuple[str, int]] = []
    with anyio.fail_after(30):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as fresh:
            async for record in fresh:
                rest.append(((record.value or b"").decode(), record.delivery_count))
                if len(rest) == 5:
                    break
            await fresh.commit()  # accepts the record in hand after the break
            assert await fresh.poll(1.0) == []
    assert rest == [(f"b{i}", 1) for i in range(5)]
