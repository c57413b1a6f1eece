"""When one hand-out style takes over from another (``poll()``, ``batches()`` or
``process()`` after an ``async for`` that ended early) the record in hand was never moved
past: it is released, never accepted with the next batch; and a loop cancelled at its
periodic yield has no record in hand. Against FakeKafka (no JVM)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon._consumer.cursor import CHECKPOINT_EVERY
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer, ProducerRecord

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.fake import FakeKafka
    from sharecon.types import AckResult

pytestmark = pytest.mark.anyio

EARLIEST = {"share.auto.offset.reset": "earliest"}


async def _three_records(fake: FakeKafka) -> None:
    fake.create_topic("t")
    fake.configure_group("g", EARLIEST)
    async with Producer(fake.bootstrap) as producer:
        for i in range(3):
            await producer.send_and_wait("t", b"v%d" % i, partition=0)


class Answers:
    """What the broker was told, per offset, in order (``on_acknowledged``)."""

    def __init__(self) -> None:
        self.by_offset: dict[int, list[str]] = {}

    def __call__(self, results: list[AckResult]) -> None:
        for result in results:
            for batch in result.batches:
                for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                    kind = batch.types[0 if len(batch.types) == 1 else i]
                    self.by_offset.setdefault(offset, []).append(kind.name)


async def _take_over(consumer: ShareConsumer[Any, Any], how: str) -> list[tuple[int, int]]:
    """(offset, delivery) of what ``how`` hands out until offset 0 comes back (or 10 s
    pass: accepted by mistake, it never does)."""
    seen: list[tuple[int, int]] = []
    with anyio.move_on_after(10):
        await _hand_out(consumer, how, seen)
    return seen


async def _hand_out(consumer: ShareConsumer[Any, Any], how: str, seen: list[Any]) -> None:
    if how == "poll":
        while (0, 2) not in seen:
            seen += [(r.offset, r.delivery_count) for r in await consumer.poll(5)]
    elif how == "batches":
        async for batch in consumer.batches():
            seen += [(r.offset, r.delivery_count) for r in batch]
            if (0, 2) in seen:
                break
    else:
        back = anyio.Event()

        async def handler(record: Record[Any, Any]) -> None:
            seen.append((record.offset, record.delivery_count))
            if record.offset == 0:
                back.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.process, handler)
            await back.wait()
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["poll", "batches", "process"])
async def test_the_record_in_hand_of_a_failed_loop_is_released_when_another_style_takes_over(
    fake_kafka: FakeKafka, how: str
) -> None:
    await _three_records(fake_kafka)
    answers = Answers()
    with anyio.fail_after(60):
        async with ShareConsumer(
            fake_kafka.bootstrap,
            group_id="g",
            topics=["t"],
            max_records=1,
            on_acknowledged=answers,
        ) as consumer:
            with pytest.raises(ValueError, match="handler failed on 0"):
                async for record in consumer:
                    raise ValueError(f"handler failed on {record.offset}")
            seen = await _take_over(consumer, how)
            await consumer.commit()
    # Offset 0 failed in the loop: its first answer is a release (not an accept with the
    # next batch), and it came back as delivery 2; the others were handled once.
    assert answers.by_offset[0][0] == "RELEASE"
    assert (0, 2) in seen
    assert (0, 1) not in seen
    assert sorted({o for o, d in seen if d == 1}) == [1, 2]


async def test_commit_after_a_break_still_accepts_the_record_in_hand(fake_kafka: FakeKafka) -> None:
    # docs/consumer.md: "Call record.accept() or await consumer.commit() after the break
    # to keep it accepted".
    await _three_records(fake_kafka)
    answers = Answers()
    with anyio.fail_after(60):
        async with ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"], on_acknowledged=answers
        ) as consumer:
            async for record in consumer:
                assert record.offset == 0
                break
            await consumer.commit()
    assert answers.by_offset[0] == ["ACCEPT"]


@pytest.mark.parametrize("deserializer", [None, bytes.decode], ids=["plain", "deserialized"])
async def test_a_cancel_at_the_periodic_yield_leaves_the_next_record_buffered(
    fake_kafka: FakeKafka, deserializer: Any
) -> None:
    # Every CHECKPOINT_EVERY records the loop yields to the event loop; a cancel delivered
    # there must not leave a record nobody saw as the one in hand (commit() accepts that).
    n = CHECKPOINT_EVERY + 10
    fake_kafka.create_topic("t")
    fake_kafka.configure_group("g", EARLIEST)
    async with Producer(fake_kafka.bootstrap) as producer:
        await producer.send_batch([ProducerRecord("t", b"v%d" % i, partition=0) for i in range(n)])
    answers = Answers()
    seen: list[int] = []
    with anyio.fail_after(60):
        async with ShareConsumer(
            fake_kafka.bootstrap,
            group_id="g",
            topics=["t"],
            value_deserializer=deserializer,
            on_acknowledged=answers,
        ) as consumer:
            while consumer.metrics().buffered_records < n:  # noqa: ASYNC110 - polled state
                await anyio.sleep(0.02)
            with anyio.CancelScope() as scope:
                async for record in consumer:
                    seen.append(record.offset)
                    if len(seen) == CHECKPOINT_EVERY - 1:
                        scope.cancel()  # delivered at the next yield: the periodic one
            assert seen == list(range(CHECKPOINT_EVERY - 1))
            await consumer.commit()
            # The record after the last one seen was never handed out: not accepted, and
            # the next loop gets it first, on its first delivery.
            assert CHECKPOINT_EVERY - 1 not in answers.by_offset
            async for record in consumer:
                assert (record.offset, record.delivery_count) == (CHECKPOINT_EVERY - 1, 1)
                break


async def test_process_cancelled_while_its_handler_runs_releases_that_record(
    fake_kafka: FakeKafka,
) -> None:
    fake_kafka.create_topic("t")
    # A lock far longer than the test waits: only a release brings the record back in time.
    fake_kafka.configure_group("g", {**EARLIEST, "share.record.lock.duration.ms": "60000"})
    async with Producer(fake_kafka.bootstrap) as producer:
        await producer.send_and_wait("t", b"job", partition=0)
    answers = Answers()
    started = anyio.Event()

    async def handler(record: Record[Any, Any]) -> None:
        started.set()
        await anyio.sleep_forever()

    seen: list[tuple[int, int]] = []
    with anyio.fail_after(60):
        async with ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"], on_acknowledged=answers
        ) as consumer:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await started.wait()
                tg.cancel_scope.cancel()  # process() ends with the handler unfinished
            with anyio.move_on_after(10):
                while not seen:
                    seen += [(r.offset, r.delivery_count) for r in await consumer.poll(1)]
            await consumer.commit()
    assert answers.by_offset[0][0] == "RELEASE"
    assert seen == [(0, 2)]
