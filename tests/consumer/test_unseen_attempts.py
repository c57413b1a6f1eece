"""Issue 32 on a real broker, in one consumer: a record nobody saw is never dead-lettered,
a member holds what it handles within the lock, and attempts spent are counted and said.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.record import RetryLater
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


async def test_process_with_a_slow_handler_and_dlq_after_1_handles_every_record(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """process(concurrency=2), 25 ms a record, a 2 s lock, max_deliveries=1, a delayed
    retry of every 10th record: every record is handled, none dead-lettered, and what
    the member holds stays within what it handles in half the lock."""
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    topic = topic_factory(3)
    values = [b"%d" % i for i in range(150)]
    await produce(kafka_bootstrap, topic, values)
    handled: dict[bytes, int] = {}
    retried: set[bytes] = set()
    most_held = 0

    async def handler(record: Record) -> RetryLater | None:
        await anyio.sleep(0.025)
        value = record.value or b""
        if record.delivery_count == 1 and int(value) % 10 == 0:
            retried.add(value)
            return RetryLater(0.5)
        handled.setdefault(value, record.delivery_count)
        return None

    policy = DeadLetterPolicy(max_deliveries=1)
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], dead_letter=policy, acquire_mode="auto"
    ) as consumer:
        core = consumer._core
        assert core is not None and core.machine.budget is not None  # record limit (4.2+)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: consumer.process(handler, concurrency=2))
            with anyio.fail_after(90):
                while len(handled) < len(values):
                    most_held = max(most_held, core.ledger.outstanding_all())
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        assert consumer.metrics().dlq_records_total == 0
        budget = core.machine.budget
        assert most_held <= budget.ceiling and budget.limit < budget.ceiling
    assert set(handled) == set(values)
    assert retried and retried <= {v for v in values if int(v) % 10 == 0}
    assert all(handled[v] >= 2 for v in retried)  # retried on a later delivery


async def test_locks_ending_in_the_buffer_are_counted_said_and_not_dead_lettered(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Batch acquisition (Kafka 4.1's only mode): one producer batch of 16 records comes
    whole, a handler of 80 ms cannot reach them all within a 1 s lock; the rest's locks
    end in the buffer. They are counted (health), said (one WARNING with the cause), and,
    back at delivery 2 past max_deliveries=1, handed to the handler, not dead-lettered."""
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    topic = topic_factory(1)
    values = [b"%d" % i for i in range(16)]
    # One batch, so one chunk: with two, the second is released as unreachable once the
    # handling rate is measured (rule 1 of _share/reach.py), not left to expire here.
    await produce(kafka_bootstrap, topic, values, partition=0, linger_ms=3000)
    handled: set[bytes] = set()
    all_handled = anyio.Event()

    async def handler(record: Record) -> None:
        await anyio.sleep(0.08)
        handled.add(record.value or b"")
        if len(handled) == len(values):
            all_handled.set()

    policy = DeadLetterPolicy(max_deliveries=1)
    with caplog.at_level(logging.WARNING, logger="sharecon.consumer"):
        async with ShareConsumer(
            kafka_bootstrap, group_id=group, topics=[topic], dead_letter=policy
        ) as consumer:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                with anyio.fail_after(90):
                    await all_handled.wait()
                tg.cancel_scope.cancel()
            health = consumer.health()
            assert consumer.metrics().dlq_records_total == 0
    assert handled == set(values)
    assert health.expired_in_buffer > 0
    assert health.past_limit_unseen > 0
    said = [
        r.getMessage()
        for r in caplog.records
        if "waited in this consumer's buffer" in r.getMessage()
    ]
    # The first at once; any held back by the once-a-minute rule later (at the latest at
    # close): every record counted is said, none twice.
    assert 1 <= len(said) <= 2, said
    assert "acquire_mode='record_limit'" in said[0] and "handling rate" in said[0]
    counts = [re.search(r"locks of (\d+) records \((\d+) in all\)", m) for m in said]
    assert all(counts), said
    assert sum(int(c[1]) for c in counts if c) == health.expired_in_buffer
    assert counts[-1] is not None and int(counts[-1][2]) == health.expired_in_buffer


async def test_batch_acquisition_releases_at_once_what_it_cannot_reach_in_time(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """Kafka 4.1's way (batch acquisition): a slow member that took three producer batches
    releases, once its handling rate is measured, the ones it cannot reach before their
    locks end; with a second member in the group every record is handled (by whichever
    member the partitions are assigned to: not asserted), nothing is dead-lettered."""
    group = share_group_factory({"share.record.lock.duration.ms": "3000"})
    topic = topic_factory(3)
    values = [b"%d" % i for i in range(180)]
    await produce(kafka_bootstrap, topic, values)
    by_slow: set[bytes] = set()
    by_fast: set[bytes] = set()
    started, done = anyio.Event(), anyio.Event()

    def note(into: set[bytes], record: Record) -> None:
        into.add(record.value or b"")
        started.set()
        if len(by_slow | by_fast) == len(values):
            done.set()

    async def slow(record: Record) -> None:
        await anyio.sleep(0.05)
        note(by_slow, record)

    async def fast(record: Record) -> None:
        note(by_fast, record)

    policy = DeadLetterPolicy(max_deliveries=1)
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], dead_letter=policy, acquire_mode="batch"
    ) as member:
        async with anyio.create_task_group() as tg:
            tg.start_soon(member.process, slow)
            with anyio.fail_after(60):
                await started.wait()
            async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
                tg.start_soon(other.process, fast)
                with anyio.fail_after(90):
                    await done.wait()
                tg.cancel_scope.cancel()
        health = member.health()
        assert member.metrics().dlq_records_total == 0
    assert by_slow | by_fast == set(values)
    assert health.released_unreachable > 0
