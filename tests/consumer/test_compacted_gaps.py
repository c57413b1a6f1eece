"""A compacted topic whose log cleaner removed a whole batch, read by a share group,
against a real broker.

Kafka acquires a new range from the first fetched batch's base offset to the last one's
last offset (``SharePartition.acquireNewBatchRecords``), so the offsets of a batch the
cleaner removed between two others are acquired with no record behind them. The
consumer must answer them as gaps at once: left unanswered they would stay acquired
until their lock ends and be delivered again, each time spending a delivery attempt, and
the group's start offset would stay behind them meanwhile. The model broker of the
simulations never makes that shape (``docs/testing.md``, "Mutation testing"); this test
is the real broker's word on it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

N = 10  #: records a batch
#: The topic configs that let the cleaner take a closed segment at once.
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.001",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "100",
}


async def _offsets(bootstrap: str, topic: str, group: str, want: int) -> list[int]:
    """The offsets a fresh share group is handed (up to ``want``, or what 4 s bring)."""
    got: list[int] = []
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.move_on_after(4):
            async for record in consumer:
                got.append(record.offset)
                if len(got) >= want:
                    break
    return sorted(got)


async def test_the_offsets_of_a_batch_the_cleaner_removed_are_answered_as_gaps(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
) -> None:
    topic = topic_factory(1, config=COMPACTED)
    async with Producer(kafka_bootstrap) as producer:
        # Three batches, each flushed alone: keys x0-x9 (offsets 0-9) stay; k0-k9 at
        # 10-19 are overwritten key by key by k0-k9 at 20-29, so the cleaner removes that
        # batch whole. It is not the producer's last batch (that is c's, which keeps the
        # producer's state), so it is not retained empty.
        for prefix in (b"x", b"k", b"k"):
            for i in range(N):
                await producer.send(topic, b"v", key=prefix + str(i).encode(), partition=0)
            await producer.flush()
        await anyio.sleep(0.3)  # past segment.ms: the next record rolls the segment
        await producer.send_and_wait(topic, b"v", key=b"c", partition=0)
    removed = set(range(N, 2 * N))
    # Wait for the cleaner (it looks every 15 s by default), asking throwaway groups.
    deadline = time.monotonic() + 90
    while True:
        seen = await _offsets(kafka_bootstrap, topic, share_group_factory(), 3 * N + 1)
        if len(seen) > N and not removed & set(seen):
            break
        assert time.monotonic() < deadline, f"the cleaner never removed 10-19: {seen}"
        await anyio.sleep(2)
    assert seen == [*range(N), *range(2 * N, 3 * N + 1)]

    group = share_group_factory()
    handed: list[tuple[int, int]] = []
    with anyio.fail_after(60):
        async with ShareConsumer(
            kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
        ) as consumer:
            async for record in consumer:
                handed.append((record.offset, record.delivery_count))
                record.accept()
                if len(handed) == 2 * N + 1:
                    break
    # Every record once, at its first delivery; nothing of the removed batch.
    assert handed == [(o, 1) for o in [*range(N), *range(2 * N, 3 * N + 1)]]
    # The gaps were answered with the records, and the close sent the last answers. The
    # broker moves the group's start offset past an acquired range once every offset of
    # it is answered; it did not move it past the last range it handed out (21 plain
    # records, accepted whole, left it at 0 for seconds on 4.4). So here it stands at
    # the last record (30), past the removed batch; with the gaps unanswered it stays at
    # 0 until their lock (15 s) ends.
    async with Admin(kafka_bootstrap) as admin:
        with anyio.fail_after(10):
            while True:
                offsets = await admin.describe_share_group_offsets(group, [topic])
                [(start, lag)] = [(o.start_offset, o.lag) for o in offsets.values()]
                if start >= 2 * N:
                    break
                await anyio.sleep(0.2)
    assert lag in (0, -1)  # -1: a broker that reports no lag
