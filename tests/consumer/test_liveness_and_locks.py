"""The lock keeper (automatic RENEW, Kafka 4.2+) and liveness (max_poll_interval)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._share.lock_keeper import LockKeeper
from sharecon._share.membership import MemberState
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import BrokerFactory, ShareGroupFactory, TopicFactory

pytestmark = pytest.mark.anyio

LOCK_MS = 2000  # the group's lock: short, so holding past it takes seconds


# -- the keeper's decisions (no broker) --------------------------------------------------


def test_the_keeper_renews_near_the_end_and_gives_up_after_max_hold() -> None:
    keeper: LockKeeper[str] = LockKeeper(max_hold=10.0, min_margin=1.0)
    keeper.hold("a", now=0.0, deadline=6.0)  # margin: a third of 6 s
    keeper.hold("b", now=0.0, deadline=1.5)  # margin: at least 1 s
    assert keeper.due(0.2, {"a": 6.0, "b": 1.5}) == ([], [])
    assert keeper.due(0.6, {"a": 6.0, "b": 1.5}) == (["b"], [])
    assert keeper.due(4.1, {"a": 6.0, "b": 5.0}) == (["a", "b"], [])
    keeper.drop("b")
    assert keeper.due(10.0, {"a": 16.0}) == ([], ["a"])  # held 10 s: given up, dropped
    assert len(keeper) == 0
    with pytest.raises(ValueError, match="max_hold"):
        LockKeeper(max_hold=0)


# -- against a broker ----------------------------------------------------------------------


@pytest.mark.broker
async def test_keep_locks_holds_a_record_past_its_lock(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"slow"])
    results: list[AckResult] = []
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        keep_locks=True,
        on_acknowledged=results.extend,
    ) as keeper:
        with anyio.fail_after(60):
            record = await keeper.__anext__()
            assert record.delivery_count == 1
            async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
                # Three lock durations: without renewal the other member would get it.
                with anyio.move_on_after(3 * LOCK_MS / 1000):
                    stolen = await other.__anext__()
                    pytest.fail(f"the lock was not kept: {stolen} went to the other member")
            record.accept()
            verdict = await keeper.commit()
    assert all(err is None for err in verdict.values()), verdict
    assert record.delivery_count == 1
    assert results and all(r.ok for r in results)


@pytest.mark.broker
async def test_process_keeps_locks_while_the_handler_runs(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"a", b"b"])
    seen: list[tuple[bytes | None, int]] = []
    failed: list[AckResult] = []

    # One record held at a time: a record waiting in the buffer behind a slow handler is
    # not being worked on, so its lock is not renewed (and it is never handed out late).
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=group,
        topics=[topic],
        acquire_mode="record_limit",
        max_records=1,
        on_acknowledged=lambda rs: failed.extend(r for r in rs if not r.ok),
    ) as consumer:

        async def handler(record: Record) -> None:
            seen.append((record.value, record.delivery_count))
            await anyio.sleep(2.5 * LOCK_MS / 1000)  # longer than the lock
            if len(seen) == 2:
                consumer_done.set()

        consumer_done = anyio.Event()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await consumer_done.wait()
                await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
            await consumer.commit()
    assert sorted(seen) == [(b"a", 1), (b"b", 1)]  # never delivered again
    assert not failed


@pytest.mark.broker
async def test_renewing_stops_after_max_hold(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"stuck"])
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        keep_locks=True,
        max_hold=3.0,
    ) as stuck:
        with anyio.fail_after(60):
            record = await stuck.__anext__()
            assert record.delivery_count == 1
            async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
                again = await other.__anext__()  # after max_hold and then the lock's end
                assert (again.offset, again.delivery_count) == (record.offset, 2)
        record.accept()  # too late: reported, never raised


@pytest.mark.broker
async def test_keep_locks_on_kafka_41_is_refused(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory("4.1")
    topic = f"kl-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    consumer = ShareConsumer(broker.bootstrap, group_id="g-kl", topics=[topic], keep_locks=True)
    with pytest.raises(errors.UnsupportedVersionError, match="4.2"):
        await consumer.start()


@pytest.mark.broker
async def test_an_idle_application_leaves_the_group_and_rejoins_when_it_asks(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"r%d" % i for i in range(5)])
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        ack_mode="explicit",
        max_poll_interval=2.0,
    ) as idle:
        with anyio.fail_after(60):
            first = await idle.__anext__()  # alone in the group: it acquires the records
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as other:
            await _idle_then_rejoin(kafka_bootstrap, topic, idle, other, first)


async def _idle_then_rejoin(
    kafka_bootstrap: str, topic: str, idle: ShareConsumer, other: ShareConsumer, first: Record
) -> None:
    with anyio.fail_after(60):
        core = idle._core
        assert core is not None
        # The application sits on the record and asks for nothing: past the interval
        # the member leaves and its records go back to the group.
        offsets: set[int] = set()
        while len(offsets) < 5:
            offsets.add((await other.__anext__()).offset)
        assert first.offset in offsets
        for _ in range(50):  # the leave heartbeat follows the releases
            if core.membership.state is MemberState.LEFT:
                break
            await anyio.sleep(0.1)
        assert core.membership.state is MemberState.LEFT
        verdict = await other.commit()
        assert verdict and all(err is None for err in verdict.values()), verdict
        # Asking again rejoins, as the same member.
        member = idle.member_id
        await produce(kafka_bootstrap, topic, [b"later"])
        with anyio.move_on_after(5):
            async for rec in idle:  # the other member may take it: either is fine
                assert rec.value == b"later", (rec, sorted(offsets))
                rec.accept()
                break
        assert core.membership.state is MemberState.STABLE
        assert idle.member_id == member
