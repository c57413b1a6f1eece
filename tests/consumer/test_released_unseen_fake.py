"""Prefetch released without being handed out (a close, an unsubscribe) spends a delivery
attempt nobody saw: counted in ``health().released_unseen`` and said in the log. Against
FakeKafka (no JVM)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio

EARLIEST = {"share.auto.offset.reset": "earliest"}
N = 20


async def _records(fake: FakeKafka) -> None:
    fake.create_topic("t")
    fake.configure_group("g", EARLIEST)
    async with Producer(fake.bootstrap) as producer:
        futures = [await producer.send("t", b"v%d" % i, partition=0) for i in range(N)]
        await producer.flush()
        for f in futures:
            await f


async def _take_one_and_wait_for_the_rest(consumer: ShareConsumer[bytes, bytes]) -> None:
    async for record in consumer:
        assert record.offset == 0
        with anyio.fail_after(10):
            while consumer.health().buffered_records < N - 1:  # noqa: ASYNC110 - a gauge
                await anyio.sleep(0.02)
        break


async def test_a_close_counts_and_says_the_buffered_records_it_releases(
    fake_kafka_factory: FakeKafkaFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kafka = fake_kafka_factory("4.4")
    await _records(fake_kafka)
    caplog.set_level(logging.INFO, logger="sharecon")
    with anyio.fail_after(60):
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"]
        )
        async with consumer:
            await _take_one_and_wait_for_the_rest(consumer)
            assert consumer.health().released_unseen == 0
        # Offset 0 was in hand (seen): released, not counted; 1..19 never handed out.
        assert consumer.health().released_unseen == N - 1
        said = [r.getMessage() for r in caplog.records if "never handed out" in r.getMessage()]
        assert len(said) == 1
        assert f"closing released {N - 1} buffered records never handed out" in said[0]
        # They come back, each with the attempt it spent counted.
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as again:
            got: dict[int, int] = {}
            async for record in again:
                got[record.offset] = record.delivery_count
                if len(got) == N:
                    break
    assert got == dict.fromkeys(range(N), 2)


async def test_on_4_1_a_close_leaves_the_buffered_records_to_the_sessions_end(
    fake_kafka_factory: FakeKafkaFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The fake imitates 4.1 (its model lowers the count of what a session's end gives
    back, as the conformance scenarios hold it to the real broker): the 19 come back at
    delivery 1, nothing is counted or said; the record in hand, seen, at delivery 2."""
    fake_kafka = fake_kafka_factory("4.1")
    await _records(fake_kafka)
    caplog.set_level(logging.INFO, logger="sharecon")
    with anyio.fail_after(60):
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"]
        )
        async with consumer:
            await _take_one_and_wait_for_the_rest(consumer)
        assert consumer.health().released_unseen == 0
        assert not [r for r in caplog.records if "never handed out" in r.getMessage()]
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as again:
            got: dict[int, int] = {}
            async for record in again:
                got[record.offset] = record.delivery_count
                if len(got) == N:
                    break
    assert got == {0: 2, **dict.fromkeys(range(1, N), 1)}


async def test_an_unsubscribe_counts_the_buffered_records_it_releases(
    fake_kafka: FakeKafka,
) -> None:
    await _records(fake_kafka)
    with anyio.fail_after(60):
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as consumer:
            await _take_one_and_wait_for_the_rest(consumer)
            consumer.unsubscribe()
            health = consumer.health()
            assert health.released_unseen == N - 1
            assert health.buffered_records == 0
            # The same count where exporters read it.
            assert consumer.metrics().released_unseen_records_total == N - 1


async def test_a_drain_before_the_close_releases_nothing_unseen(fake_kafka: FakeKafka) -> None:
    """What docs/consumer.md says spends none: stop fetching, wait until nothing more
    arrives, hand out what is left, then close."""
    await _records(fake_kafka)
    with anyio.fail_after(60):
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            fake_kafka.bootstrap, group_id="g", topics=["t"]
        )
        async with consumer:
            await _take_one_and_wait_for_the_rest(consumer)
            consumer.stop_fetching()
            assert await consumer.fetching_stopped(10)
            left = await consumer.poll(max_records=N, timeout=1)
            # 0, in hand at the break, was given back (seen); fetching stopped, so it
            # does not come back to this member.
            assert [r.offset for r in left] == list(range(1, N))
            await consumer.commit()
        assert consumer.health().released_unseen == 0


@pytest.mark.parametrize("fault", ["cut", "leaderless"])
async def test_buffered_records_lost_with_their_session_or_leader_are_counted(
    fake_kafka_factory: FakeKafkaFactory, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """The member's connection is cut (its share session ends, and the broker releases
    what it held), or the partition's leader goes away (NOT_LEADER_OR_FOLLOWER) and comes
    back: the 19 buffered records are dropped unseen, counted in
    ``health().lost_unseen``, and delivered again (each at delivery 2, the attempt it
    spent)."""
    fake_kafka = fake_kafka_factory("4.4")
    await _records(fake_kafka)
    caplog.set_level(logging.INFO, logger="sharecon")
    got: dict[int, int] = {}
    with anyio.fail_after(60):
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as consumer:
            await _take_one_and_wait_for_the_rest(consumer)
            assert consumer.health().lost_unseen == 0
            if fault == "cut":
                fake_kafka.cut(consumer.member_id)
            else:
                fake_kafka.withdraw_leader("t", 0)
            while consumer.health().lost_unseen < N - 1:  # noqa: ASYNC110 - a counter
                await anyio.sleep(0.02)
            if fault == "leaderless":
                fake_kafka.restore_leader("t", 0)
            async for record in consumer:
                got[record.offset] = record.delivery_count
                if len(got) == N:
                    break
            assert consumer.health().lost_unseen == N - 1
            assert consumer.metrics().lost_unseen_records_total == N - 1
    assert got == {0: 2, **dict.fromkeys(range(1, N), 2)}
    if fault == "cut":
        said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
        assert any(f"dropped {N - 1} buffered records" in m for m in said), said


async def test_a_partition_rebuilt_on_the_same_leader_hands_out_no_record_twice(
    fake_kafka: FakeKafka,
) -> None:
    """The partition moves away and back between two fetches (FakeKafka's
    ``move_leader`` on its one node): the leader forgets its acquisitions and hands the
    member offsets 0 to 19 again, though the member's locks on them have not expired.
    The 19 old copies still buffered are dropped before the new delivery (counted in
    ``health().lost_unseen``), so the application gets each record once more, not
    twice (seed 60019839 of the simulation)."""
    await _records(fake_kafka)
    seen: list[int] = []
    with anyio.fail_after(60):
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as consumer:
            await _take_one_and_wait_for_the_rest(consumer)
            fake_kafka.move_leader("t", 0)
            while consumer.health().lost_unseen < N - 1:  # noqa: ASYNC110 - a counter
                await anyio.sleep(0.02)
            async for record in consumer:
                seen.append(record.offset)
                if len(seen) == N:
                    break
            health = consumer.health()
            lost_metric = consumer.metrics().lost_unseen_records_total
    assert sorted(seen) == list(range(N)), seen
    assert health.lost_unseen == lost_metric == N - 1
