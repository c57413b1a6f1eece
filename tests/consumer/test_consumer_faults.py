"""Consumer behaviour across broker versions, process death, trio, and subscription changes."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sharecon import Backoff, DeadLetterPolicy, errors
from sharecon.consumer import ShareConsumer
from sharecon.types import TopicPartition
from tests.consumer.conftest import assert_clean_commit, produce

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory, ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


async def _round_trip(bootstrap: str, topic: str, group: str, n: int) -> dict[int, int]:
    await produce(bootstrap, topic, [b"v%d" % i for i in range(n)], codec="zstd")
    seen: dict[int, int] = {}
    partitions: set[TopicPartition] = set()
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.fail_after(60):
            async for record in consumer:
                seen[record.offset] = record.delivery_count
                partitions.add(TopicPartition(topic, record.partition))
                if len(seen) == n:
                    break
        verdict = await consumer.commit()
    # The last record was answered by commit() itself; earlier ones may have gone already.
    assert_clean_commit(verdict, {TopicPartition(topic, record.partition)}, partitions)
    return seen


@pytest.mark.parametrize("version", ["4.1", "4.4"])
async def test_round_trip_on_each_protocol_generation(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    """4.1 speaks ShareFetch/ShareAcknowledge v1, 4.4 speaks v2: both consume the same way."""
    broker = kafka_broker_factory(version)
    topic = f"rt-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    seen = await _round_trip(broker.bootstrap, topic, group, 50)
    assert sorted(seen) == list(range(50)) and set(seen.values()) == {1}


async def test_renew_on_kafka_41_is_unsupported(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory("4.1")
    topic = f"rn-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    await produce(broker.bootstrap, topic, [b"x"])
    async with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as c:
        with anyio.fail_after(30):
            record = await c.__anext__()
        with pytest.raises(errors.UnsupportedVersionError, match="4.2"):
            record.renew()
        # A delayed release keeps the lock by renewing it: the same clear error.
        with pytest.raises(errors.UnsupportedVersionError, match="4.2"):
            record.release(delay=5.0)
        record.accept()
    policy = DeadLetterPolicy(retry_backoff=Backoff(initial=1.0, maximum=5.0))
    async with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], dead_letter=policy
    ) as c:
        with pytest.raises(errors.UnsupportedVersionError, match="4.2"), anyio.fail_after(30):
            await c.process(_never_called)


async def _never_called(record: object) -> None:
    raise AssertionError("process() with retry_backoff must refuse to start on 4.1")


_VICTIM = textwrap.dedent(
    """
    import anyio, json, sys
    from sharecon import ShareConsumer

    async def main(bootstrap, group, topic, n):
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic], ack_mode="explicit") as c:
            got = []
            while len(got) < n:   # explicit mode: a batch may be held unanswered
                got += [r.offset for r in await c.poll(30)]
            print(json.dumps(got), flush=True)
            await anyio.sleep(3600)   # holds the records, never answers: killed here

    anyio.run(main, *sys.argv[1:4], int(sys.argv[4]))
    """
)


async def test_records_of_a_killed_consumer_come_back(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """A consumer process dies (SIGKILL, no close): its records are redelivered to the
    others once its locks are gone, with delivery_count 2."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    await produce(kafka_bootstrap, topic, [b"r%d" % i for i in range(5)])
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [sys.executable, "-c", _VICTIM, kafka_bootstrap, group, topic, "5"]
    async with await anyio.open_process(cmd, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            with anyio.fail_after(60):
                line = await BufferedByteReceiveStream(proc.stdout).receive_until(b"\n", 1 << 16)
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            await proc.wait()
            err = await proc.stderr.receive()
            pytest.fail(f"the victim consumer failed: {err.decode(errors='replace')}")
        held = json.loads(line)
        assert len(held) == 5
        proc.send_signal(signal.SIGKILL)  # no close(): the process just dies
        await proc.wait()
    redelivered: dict[int, int] = {}
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
        with anyio.fail_after(30):
            async for record in other:
                redelivered[record.offset] = record.delivery_count
                if len(redelivered) == 5:
                    break
    assert sorted(redelivered) == sorted(held)
    assert set(redelivered.values()) == {2}


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_consume_under_trio(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"t%d" % i for i in range(20)])
    seen = await _round_trip_no_produce(kafka_bootstrap, topic, share_group, 20)
    assert sorted(seen) == list(range(20))


async def _round_trip_no_produce(bootstrap: str, topic: str, group: str, n: int) -> list[int]:
    seen: list[int] = []
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.fail_after(60):
            async for record in consumer:
                seen.append(record.offset)
                if len(seen) == n:
                    break
    return seen


async def test_subscribe_switches_topics(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    first, second = topic_factory(1), topic_factory(1)
    await produce(kafka_bootstrap, first, [b"one"])
    await produce(kafka_bootstrap, second, [b"two"])
    async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[first]) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        assert (record.topic, record.value) == (first, b"one")
        consumer.subscribe([second])
        with anyio.fail_after(30):
            record = await consumer.__anext__()
        assert (record.topic, record.value) == (second, b"two")
        with anyio.fail_after(30):
            # Polling on purpose: the assignment changes on the coordinator's schedule.
            while {tp.topic for tp in consumer.assignment} != {second}:  # noqa: ASYNC110
                await anyio.sleep(0.2)
