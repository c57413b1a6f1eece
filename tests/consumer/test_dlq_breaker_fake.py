"""The dead-letter circuit breaker against FakeKafka: its cool-down ends fetching's hold
whoever looks, so a breaker that opened under a ``process()`` that has since ended never
leaves the consumer paused for good (liveness)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.producer import Producer, ProducerRecord
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio

RECORDS = 3000
WINDOW = 4


async def _dead_lettered(bootstrap: str, dlq: str) -> int:
    async with Admin(bootstrap) as admin:
        ends = await admin.list_offsets([TopicPartition(dlq, 0)], "latest")
    return ends[TopicPartition(dlq, 0)]


async def test_a_cool_down_that_ends_with_no_process_running_lets_fetching_go_on(
    fake_kafka: FakeKafka,
) -> None:
    fake_kafka.create_topic("t")
    fake_kafka.create_topic("dlq-t")
    fake_kafka.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with Producer(fake_kafka.bootstrap) as p:
        await p.send_batch([ProducerRecord("t", b"v%d" % i) for i in range(RECORDS)])
    broken = True
    handled: set[bytes | None] = set()

    async def handler(record: Record) -> None:
        if broken:
            raise ValueError("bad deploy")
        handled.add(record.value)

    policy = DeadLetterPolicy(
        topic="dlq-t", max_deliveries=1, breaker_window=WINDOW, breaker_cooldown=1.0
    )
    async with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], dead_letter=policy, max_records=50
    ) as consumer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.process, handler)
            with anyio.fail_after(60):
                while consumer.health().dead_letter_breaker is None:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()  # process() ends while the breaker is open
        # The cool-down passes with nobody in process(); health() and reset look.
        with anyio.fail_after(60):
            while consumer.health().dead_letter_breaker is not None:  # noqa: ASYNC110
                await anyio.sleep(0.1)
        assert not consumer.reset_dead_letter_breaker()  # it was not open any more
        broken = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.process, handler)
            dead = await _dead_lettered(fake_kafka.bootstrap, "dlq-t")
            # Rule 2: floor(0.5 x 4) + 1 dead letters open it when every record fails.
            assert dead == WINDOW // 2 + 1
            with anyio.fail_after(60):  # before the fix: what was buffered, then nothing
                while len(handled) < RECORDS - dead:  # noqa: ASYNC110 - polled state
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        assert consumer.health().dead_letter_breaker is None
    assert len(handled) == RECORDS - dead


def test_a_sync_process_that_returned_while_open_finds_records_after_the_cool_down(
    fake_kafka: FakeKafka,
) -> None:
    """The same through sharecon.sync: ``process(timeout=)`` returns while the breaker is
    open, the cool-down passes with no call running, health() looks; a later call handles
    everything left."""
    import time

    from sharecon.sync import Producer as SyncProducer
    from sharecon.sync import ShareConsumer as SyncConsumer

    fake_kafka.create_topic("t")
    fake_kafka.create_topic("dlq-t")
    fake_kafka.configure_group("g", {"share.auto.offset.reset": "earliest"})
    with SyncProducer(fake_kafka.bootstrap) as p:
        sent = [p.send("t", b"v%d" % i) for i in range(RECORDS)]
        for future in sent:
            future.result(timeout=60)
    broken = True
    handled: set[bytes | None] = set()

    def handler(record: Record) -> None:
        if broken:
            raise ValueError("bad deploy")
        handled.add(record.value)

    policy = DeadLetterPolicy(
        topic="dlq-t", max_deliveries=1, breaker_window=WINDOW, breaker_cooldown=1.0
    )
    with SyncConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], dead_letter=policy, max_records=50
    ) as consumer:
        first_calls = 0
        deadline = time.monotonic() + 60
        while consumer.health().dead_letter_breaker is None:
            assert time.monotonic() < deadline, "the breaker never opened"
            consumer.process(handler, timeout=0.2)
            first_calls += 1
        deadline = time.monotonic() + 60
        while consumer.health().dead_letter_breaker is not None:  # the cool-down passes
            assert time.monotonic() < deadline, "the breaker never half-opened"
            time.sleep(0.1)
        broken = False
        # Every record handled or dead-lettered (the breaker's 3), but for at most one
        # per returning process() call: the record it had in hand is not answered when it
        # returns (a separate matter, not this test's: it waits out its lock, then comes
        # back past max_deliveries=1 and is dead-lettered).
        calls = 0
        deadline = time.monotonic() + 60  # before the fix: what was buffered, then nothing
        while len(handled) + consumer.metrics().dlq_records_total + calls < RECORDS:
            assert time.monotonic() < deadline, f"stuck at {len(handled)} handled"
            consumer.process(handler, timeout=0.5)
            calls += 1
        dead = consumer.metrics().dlq_records_total
    assert WINDOW // 2 + 1 <= dead <= WINDOW // 2 + 1 + first_calls + calls
    assert RECORDS - calls <= len(handled) + dead <= RECORDS
