"""A compacted topic whose log cleaner removed a whole batch, read by a share group,
against a real broker.

Kafka acquires a new range from the first fetched batch's base offset to the last one's
last offset (``SharePartition.acquireNewBatchRecords``), so the offsets of a batch the
cleaner removed between two others are acquired with no record behind them. The
consumer must answer them as gaps at once: left unanswered they would stay acquired
until their lock ends and be delivered again, each time spending a delivery attempt, and
the group's start offset would stay behind them meanwhile.

The same log then holds the model broker of the simulations true on this shape: scripted
ShareFetch requests, each script for a group of its own, get the same acquired ranges
and delivery counts from the real broker and from the model given that log (a read that
spans the removed batch acquires its offsets; one that begins in it skips them; a soft
record limit that falls in it ends the range there; available offsets of it that a read
begins in are archived).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing.conformance.broker_runner import BrokerTarget, play_on_broker
from sharecon.testing.conformance.model_runner import play_on_model
from sharecon.testing.conformance.scenario import (
    ACCEPT,
    GAP,
    Fetch,
    Observation,
    Scenario,
    Wait,
)
from sharecon.testing.conformance.scenarios import SHORT_LOCK
from sharecon.testing.model.broker import ModelBroker

if TYPE_CHECKING:
    from sharecon.testing.env import ClusterHandle
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


def _show(seen: list[Observation]) -> list[str]:
    return [str(o) for o in seen]


#: Scripts for the log above (batches 0-9, 20-29 and 30; 10-19 removed), each played by a
#: group of its own on the real broker and on the model. A broker reads one log segment
#: at a time, and 30 is in a segment of its own; the model has no segments, so the
#: record limits keep every read before 30 short of it.
SCRIPTS = (
    # A read from 0 spans the removed batch: one range 0-29, all at delivery 1; answered,
    # the next read hands out 30.
    Scenario(
        "spans",
        (
            Fetch("a", max_records=25),
            Fetch("a", acks=((0, 9, ACCEPT), (10, 19, GAP), (20, 29, ACCEPT))),
        ),
    ),
    # A soft limit of 15 falls in the removed batch: the range ends right there, at 14
    # (Kafka rounds a limit up to the end of the batch it falls in, and there is none).
    Scenario("soft-limit", (Fetch("a", max_records=15),)),
    # 0-9 alone (limit 5), answered: the next read begins in the removed batch and skips it.
    Scenario(
        "skips", (Fetch("a", max_records=5), Fetch("a", max_records=5, acks=((0, 9, ACCEPT),)))
    ),
    # 10-29 unanswered until their lock ends: the next read begins at 10, archives
    # 10-19 (no record there) and hands out 20-29 again.
    Scenario(
        "stale",
        (
            Fetch("a", max_records=25),
            Fetch("a", acks=((0, 9, ACCEPT),), expect=False),
            Wait(SHORT_LOCK / 1000 + 1),
            Fetch("a", max_records=5),
        ),
        lock_ms=SHORT_LOCK,
    ),
)


async def test_the_offsets_of_a_batch_the_cleaner_removed_are_answered_as_gaps(
    kafka_broker: ClusterHandle,
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
    # Wait for the cleaner (the test broker's looks every second), asking throwaway groups.
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

    # The model, given the same log, answers each script as the broker does.
    version = ".".join(kafka_broker.version.split(".")[:2])
    async with Admin(kafka_bootstrap) as admin, anyio.create_task_group() as connections:
        target = BrokerTarget(kafka_bootstrap, kafka_broker.version, admin, connections)
        topic_id = (await admin.describe_topics([topic]))[topic].topic_id
        for script in SCRIPTS:
            real = await play_on_broker(target, script, topic, topic_id, share_group_factory())
            model = ModelBroker(version)
            tid = model.create_topic("t", 1)
            for n in (N, N, N, 1):
                model.produce("t", 0, n)
            model.logs[(tid, 0)].compact(removed)
            said = play_on_model(model, script, tid)
            assert said == real, f"{script.name}: the broker {_show(real)}, the model {_show(said)}"
        connections.cancel_scope.cancel()
