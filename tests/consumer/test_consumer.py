"""The share consumer against a real broker: the behaviour KIP-932 promises.

Each test states the rule it proves. Records are produced by librdkafka (confluent-kafka),
so every codec's batches from another implementation pass through our decoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.types import AckType, TopicPartition
from tests.consumer.conftest import assert_clean_commit, produce

if TYPE_CHECKING:
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


async def next_record(consumer: ShareConsumer, timeout: float = 30) -> Record:
    with anyio.fail_after(timeout):
        return await consumer.__anext__()


async def test_three_consumers_share_every_record_exactly_once(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    """All accept: each produced record is delivered once to one of three members."""
    produced = []
    for codec in CODECS:
        values = [f"{codec}-{i}".encode() * 3 for i in range(120)]
        produced += await produce(kafka_bootstrap, topic, values, codec=codec)
    expected = {(p.partition, p.offset): p.value for p in produced}
    seen: dict[tuple[int, int], bytes | None] = {}
    duplicates: list[tuple[int, int]] = []
    done = anyio.Event()

    async def member() -> None:
        async with ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], max_records=50
        ) as consumer:
            while not done.is_set():
                with anyio.move_on_after(0.5):
                    record = await consumer.__anext__()
                    key = (record.partition, record.offset)
                    if key in seen:
                        duplicates.append(key)
                    seen[key] = record.value
                    if len(seen) >= len(expected):
                        done.set()
            await consumer.commit()

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(member)
    assert not duplicates
    assert seen == expected


async def test_release_redelivers_with_higher_delivery_count(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    [p] = await produce(kafka_bootstrap, topic, [b"again"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        first = await next_record(consumer)
        assert (first.offset, first.delivery_count, first.value) == (p.offset, 1, b"again")
        first.release()
        second = await next_record(consumer)
        assert (second.offset, second.delivery_count) == (p.offset, 2)
        second.accept()
        assert await consumer.commit() == {TopicPartition(topic, 0): None}


async def test_reject_archives_the_record(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """A rejected record never comes back; later records still flow."""
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"poison", b"fine"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        poison = await next_record(consumer)
        assert poison.value == b"poison"
        poison.reject()
        fine = await next_record(consumer)
        assert fine.value == b"fine"
        fine.accept()
        await consumer.commit()
        await produce(kafka_bootstrap, topic, [b"marker"])
        after = [(await next_record(consumer))]
        after[-1].accept()
        assert [r.value for r in after] == [b"marker"]


async def test_delivery_count_limit_archives_repeatedly_released_record(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.delivery.count.limit": "2"})
    await produce(kafka_bootstrap, topic, [b"flaky"])
    counts = []
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        for _ in range(2):
            record = await next_record(consumer)
            assert record.value == b"flaky"
            counts.append(record.delivery_count)
            record.release()
        await consumer.commit()
        await produce(kafka_bootstrap, topic, [b"marker"])
        nxt = await next_record(consumer)
        nxt.accept()
    assert counts == [1, 2]
    assert nxt.value == b"marker"


async def test_clean_close_in_implicit_mode_releases_at_once(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """A handler that raises: the unanswered record is released, not held until the lock
    (60 s here) expires, so another member gets it with delivery_count 2 right away."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    await produce(kafka_bootstrap, topic, [b"boom"])

    class HandlerError(Exception):
        pass

    with pytest.raises(HandlerError):
        async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as consumer:
            async for record in consumer:
                assert record.value == b"boom"
                raise HandlerError
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
        again = await next_record(other, timeout=20)
    assert (again.value, again.delivery_count) == (b"boom", 2)


async def test_renew_keeps_the_lock_past_its_duration(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """Lock of 2 s; the record is renewed every 0.5 s for 5 s, then accepted successfully."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    await produce(kafka_bootstrap, topic, [b"slow"])
    results: list[AckResult] = []
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        on_acknowledged=results.extend,
    ) as consumer:
        record = await next_record(consumer)
        first_deadline = record.lock_deadline
        assert first_deadline is not None
        for _ in range(10):
            await anyio.sleep(0.5)
            record.renew()
        await anyio.sleep(0.5)
        assert record.lock_deadline is not None and record.lock_deadline > first_deadline + 3
        record.accept()
        verdict = await consumer.commit()
    assert_clean_commit(verdict, {TopicPartition(topic, 0)})
    assert results and all(r.ok for r in results)


async def test_expired_lock_ack_reports_invalid_record_state(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """Answering after the lock expired: the broker refuses with INVALID_RECORD_STATE,
    and both commit() and the callback say so for that partition."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    await produce(kafka_bootstrap, topic, [b"a", b"b"])
    results: list[AckResult] = []
    # A buffer of one record: the second record fills it, so no fetch takes the expired
    # record back while we hold the first.
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        max_buffered_records=1,
        on_acknowledged=results.extend,
    ) as consumer:
        record = await next_record(consumer)
        await anyio.sleep(2.5)
        record.accept()
        verdict = await consumer.commit()
    assert isinstance(verdict[TopicPartition(topic, 0)], errors.InvalidRecordStateError)
    failed = [r for r in results if not r.ok]
    assert failed and failed[0].error_code == errors.InvalidRecordStateError.code


async def test_explicit_mode_requires_an_answer(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"1", b"2"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        record = await next_record(consumer)
        with pytest.raises(errors.UnacknowledgedRecordsError, match=f"offset {record.offset}"):
            await next_record(consumer)
        consumer.acknowledge(record, AckType.ACCEPT)
        with pytest.raises(errors.InvalidRecordStateError, match="already"):
            record.reject()
        second = await next_record(consumer)
        second.accept()


async def test_batches_accept_previous_batch_in_implicit_mode(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"%d" % i for i in range(200)])
    got = 0
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], max_records=64
    ) as consumer:
        with anyio.fail_after(30):
            async for batch in consumer.batches():
                assert 0 < len(batch) <= 64
                got += len(batch)
                if got >= 200:
                    break
        verdict = await consumer.commit()
    assert got == 200
    assert_clean_commit(verdict, {TopicPartition(topic, 0)})


async def test_cancelling_the_iterating_task_closes_cleanly(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """An enclosing cancel scope cancels the consumer's own loops too: close still sends
    the final acknowledgements and the leave heartbeat (shielded, bounded)."""
    topic = topic_factory(1)
    with anyio.move_on_after(3):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
            member = consumer.member_id
            async for _ in consumer:
                pytest.fail("the topic is empty")
    async with Admin(kafka_bootstrap) as admin:
        described = await admin.describe_share_group(share_group)
    assert member not in {m.member_id for m in described.members}


async def test_unreachable_bootstrap_is_a_clear_error() -> None:
    with pytest.raises(errors.BrokerConnectError, match="127.0.0.1:1"), anyio.fail_after(30):
        async with ShareConsumer("127.0.0.1:1", group_id="g", topics=["t"], connect_timeout=1):
            pass


def test_wrong_config_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="ack_mode"):
        ShareConsumer("x:1", group_id="g", topics=["t"], ack_mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="topics"):
        ShareConsumer("x:1", group_id="g", topics="t")
    with pytest.raises(errors.ConfigError, match="max_records"):
        ShareConsumer("x:1", group_id="g", topics=["t"], max_records=0)
