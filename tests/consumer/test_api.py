"""The consumer API of issue 12 against a real broker: answering by position,
unsubscribe / subscription, on_acknowledged set after start, the group's lock duration, and
the record fields read from the batch header. Argument checks run without a broker."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, ResourceType
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.record import TimestampType
from sharecon.types import AckType, TopicPartition
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory


async def next_record(consumer: ShareConsumer, timeout: float = 30) -> Record:
    with anyio.fail_after(timeout):
        return await consumer.__anext__()


# -- without a broker -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", 0, 0), "topic must be a non-empty str"),
        ((b"t", 0, 0), "topic must be a non-empty str"),
        (("t", -1, 0), "partition must be an int >= 0"),
        (("t", True, 0), "partition must be an int >= 0"),
        (("t", 0, -5), "offset must be an int >= 0"),
        (("t", 0, 1.0), "offset must be an int >= 0"),
        (("t", 0, 0, AckType.RENEW), "renew with record.renew"),
        (("t", 0, 0, AckType.GAP), "ACCEPT, RELEASE or REJECT"),
        (("t", 0, 0, 1), "ACCEPT, RELEASE or REJECT"),
        (("t", 0, 0, [1]), "ACCEPT, RELEASE or REJECT"),
    ],
)
def test_acknowledge_offset_refuses_bad_arguments(args: tuple[object, ...], match: str) -> None:
    consumer = ShareConsumer("127.0.0.1:1", group_id="g", topics=["t"])
    with pytest.raises(errors.ConfigError, match=match):
        consumer.acknowledge_offset(*args)  # type: ignore[arg-type]


def test_api_before_start() -> None:
    consumer = ShareConsumer("127.0.0.1:1", group_id="g", topics=["b", "a"])
    with pytest.raises(errors.InvalidRecordStateError, match="t-0 offset 3: the consumer is not"):
        consumer.acknowledge_offset("t", 0, 3)
    assert consumer.subscription == frozenset({"a", "b"})
    with pytest.raises(RuntimeError, match="not started"):
        consumer.unsubscribe()
    assert consumer.on_acknowledged is None
    with pytest.raises(errors.ConfigError, match="on_acknowledged must be a callable"):
        consumer.on_acknowledged = "print"  # type: ignore[assignment]
    assert consumer.on_acknowledged is None


# -- against a broker -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_acknowledge_offset_answers_the_record_at_a_position(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produced = await produce(kafka_bootstrap, topic, [b"a", b"b", b"c", b"d"])
    offsets = {p.value: p.offset for p in produced}
    tp = TopicPartition(topic, 0)
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        first = await next_record(consumer)
        assert first.value == b"a"
        consumer.acknowledge_offset(topic, 0, first.offset, AckType.RELEASE)
        with pytest.raises(errors.InvalidRecordStateError, match="already acknowledged"):
            consumer.acknowledge_offset(topic, 0, first.offset)
        # Explicit mode counts it as answered: the next record comes.
        second = await next_record(consumer)
        assert second.value == b"b"
        # Positions this consumer does not hold: another partition, beyond the log, and a
        # record fetched with the first answer but not handed out yet.
        for partition, offset, match in [
            (1, 0, "not held"),
            (0, 1000, "not held"),
            (0, offsets[b"d"], "not handed out"),
        ]:
            with pytest.raises(errors.InvalidRecordStateError, match=match):
                consumer.acknowledge_offset(topic, partition, offset)
        consumer.acknowledge_offset(topic, 0, second.offset)  # ACCEPT by default
        assert await consumer.commit() == {tp: None}

        seen = {}
        while len(seen) < 3:  # c, d and a again (released)
            rec = await next_record(consumer)
            seen[rec.value] = rec.delivery_count
            ack = AckType.REJECT if rec.value == b"c" else AckType.ACCEPT
            consumer.acknowledge_offset(topic, 0, rec.offset, ack)
        assert seen == {b"a": 2, b"c": 1, b"d": 1}
        assert await consumer.commit() == {tp: None}

        # poll(): a batch answered by position is answered (explicit mode lets poll go on).
        await produce(kafka_bootstrap, topic, [b"e", b"f"])
        batch: list[Record] = []
        with anyio.fail_after(30):
            while len(batch) < 2:
                more = await consumer.poll(timeout=5)
                batch += more
                for rec in more:
                    consumer.acknowledge_offset(rec.topic, rec.partition, rec.offset)
        assert [r.value for r in batch] == [b"e", b"f"]
        assert await consumer.poll(timeout=0) == []
        assert await consumer.commit() == {tp: None}
        # Accepted and rejected records never come back; only new ones do.
        await produce(kafka_bootstrap, topic, [b"marker"])
        last = await next_record(consumer)
        assert last.value == b"marker"
        last.accept()


@pytest.mark.anyio
async def test_unsubscribe_releases_buffered_records_at_once_and_subscribe_resumes(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    # Locks far longer than the test waits: only a release can bring records back in time.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(1)
    produced = await produce(kafka_bootstrap, topic, [b"r%d" % i for i in range(20)])
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        assert consumer.subscription == frozenset({topic})
        held = await next_record(consumer)
        assert consumer.health().buffered_records > 0  # the rest of the fetch waits here
        consumer.unsubscribe()
        assert consumer.subscription == frozenset()
        assert consumer.health().buffered_records == 0

        # Another member gets every record but the one held, long before a lock could end.
        others: dict[int, int] = {}
        async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
            with anyio.fail_after(30):
                while len(others) < len(produced) - 1:
                    rec = await other.__anext__()
                    others[rec.offset] = rec.delivery_count
            await other.commit()
        assert set(others) == {p.offset for p in produced} - {held.offset}
        assert held.offset not in others

        # The record in hand is still answerable, and the coordinator drops the assignment.
        held.accept()
        assert await consumer.commit() == {TopicPartition(topic, 0): None}
        with anyio.fail_after(30):
            while consumer.assignment:  # noqa: ASYNC110 - polled state, no event to wait on
                await anyio.sleep(0.1)
        assert consumer.health().ok  # still a member of the group

        await produce(kafka_bootstrap, topic, [b"later"])
        assert await consumer.poll(timeout=2) == []
        consumer.subscribe([topic])
        assert consumer.subscription == frozenset({topic})
        later = await next_record(consumer)
        assert (later.value, later.delivery_count) == (b"later", 1)
        later.accept()
        assert await consumer.commit() == {TopicPartition(topic, 0): None}


@pytest.mark.anyio
async def test_on_acknowledged_can_be_set_after_start(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"one", b"two"])
    first_results: list[AckResult] = []
    second_results: list[AckResult] = []
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        assert consumer.on_acknowledged is None
        consumer.on_acknowledged = first_results.extend
        assert consumer.on_acknowledged == first_results.extend
        one = await next_record(consumer)
        one.accept()
        await consumer.commit()
        consumer.on_acknowledged = second_results.extend
        two = await next_record(consumer)
        two.reject()
        await consumer.commit()
        consumer.on_acknowledged = None
    assert [(r.ok, [(b.first_offset, b.types) for b in r.batches]) for r in first_results] == [
        (True, [(one.offset, (AckType.ACCEPT,))])
    ]
    assert [(r.ok, [(b.first_offset, b.types) for b in r.batches]) for r in second_results] == [
        (True, [(two.offset, (AckType.REJECT,))])
    ]


@pytest.mark.anyio
async def test_lock_duration_is_the_groups_and_follows_changes(
    kafka_bootstrap: str, topic: str, share_group_factory: ShareGroupFactory
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "5000"})
    await produce(kafka_bootstrap, topic, [b"x"])
    async with (
        Admin(kafka_bootstrap) as admin,
        ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as consumer,
    ):
        assert await consumer.lock_duration() == 5.0
        # A record's lock is at most that long from when it was fetched.
        before = anyio.current_time()
        rec = await next_record(consumer)
        assert rec.lock_deadline is not None
        assert before < rec.lock_deadline <= anyio.current_time() + 5.0

        async def settles_at(expected: float) -> float:
            # A group config reaches the brokers through the metadata log: a read right
            # after the change may still see the old value, so give it a bounded while.
            seen = await consumer.lock_duration()
            with anyio.move_on_after(10):
                while seen != expected:
                    await anyio.sleep(0.1)
                    seen = await consumer.lock_duration()
            return seen

        await admin.alter_group_config(group, {"share.record.lock.duration.ms": "7000"})
        assert await settles_at(7.0) == 7.0
        # Unset on the group: the broker's default applies.
        await admin.alter_group_config(group, {"share.record.lock.duration.ms": None})
        coordinator = await admin._open_cluster.coordinator(group)
        broker = await admin.describe_configs(
            ResourceType.BROKER, str(coordinator), ["group.share.record.lock.duration.ms"]
        )
        default = broker["group.share.record.lock.duration.ms"].value
        assert default is not None
        assert await settles_at(int(default) / 1000) == int(default) / 1000


@pytest.mark.anyio
async def test_record_fields_from_the_batch_header(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "5000"})
    create_time = topic_factory(1)
    append_time = topic_factory(1, config={"message.timestamp.type": "LogAppendTime"})
    start_ms = int(time.time() * 1000)
    start_wall = time.time()
    async with Producer(kafka_bootstrap) as producer:
        await producer.send(create_time, b"value", key=b"key", timestamp=1_600_000_000_000)
        await producer.send(create_time, None, key=None, timestamp=1_600_000_000_001)
        await producer.send(append_time, b"", key=b"k", timestamp=1_600_000_000_002)
    end_ms = int(time.time() * 1000)
    async with (
        Admin(kafka_bootstrap) as admin,
        ShareConsumer(kafka_bootstrap, group_id=group, topics=[create_time, append_time]) as c,
    ):
        epochs = {
            name: d.partitions[0].leader_epoch
            for name, d in (await admin.describe_topics([create_time, append_time])).items()
        }
        got: dict[str, list[Record]] = {create_time: [], append_time: []}
        with anyio.fail_after(30):
            while len(got[create_time]) < 2 or not got[append_time]:
                rec = await c.__anext__()
                got[rec.topic].append(rec)
                assert rec.lock_expires_at is not None
                # The lock's end on the wall clock: a lock duration after the fetch.
                assert start_wall + 5.0 - 1.0 <= rec.lock_expires_at.timestamp()
                assert rec.lock_expires_at.timestamp() <= time.time() + 5.0 + 1.0
        full, tombstone = got[create_time]
        (empty,) = got[append_time]

    assert [(r.timestamp_type, r.timestamp) for r in (full, tombstone)] == [
        (TimestampType.CREATE_TIME, 1_600_000_000_000),
        (TimestampType.CREATE_TIME, 1_600_000_000_001),
    ]
    assert empty.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert start_ms <= empty.timestamp <= end_ms  # the broker's clock, not the producer's
    assert (full.serialized_key_size, full.serialized_value_size) == (3, 5)
    assert (tombstone.serialized_key_size, tombstone.serialized_value_size) == (-1, -1)
    assert (empty.serialized_key_size, empty.serialized_value_size) == (1, 0)
    # Written under the partitions' current leaders (nothing has moved them).
    assert [r.leader_epoch for r in (full, tombstone, empty)] == [
        epochs[create_time],
        epochs[create_time],
        epochs[append_time],
    ]
