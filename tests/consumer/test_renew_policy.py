"""Kafka 4.3+ ``share.renew.acknowledge.enable``: a group that refuses lock renewals is
told at start (keep_locks=True) or once (process()'s default), not by a WARNING per
failed renewal while handlers run."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


async def _group_without_renewals(bootstrap: str, topic: str) -> str:
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([topic])
        await admin.alter_group_config(
            group,
            {"share.auto.offset.reset": "earliest", "share.renew.acknowledge.enable": "false"},
        )
    return group


async def test_keep_locks_on_a_group_refusing_renewals_fails_start(
    kafka_broker_factory: BrokerFactory,
) -> None:
    broker = kafka_broker_factory("4.4")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = await _group_without_renewals(broker.bootstrap, topic)
    consumer = ShareConsumer(broker.bootstrap, group_id=group, topics=[topic], keep_locks=True)
    with pytest.raises(errors.IncompatibleBrokerError, match="share.renew.acknowledge.enable"):
        with anyio.fail_after(10):
            await consumer.start()


async def test_process_says_so_once_and_does_not_renew(
    kafka_broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    broker = kafka_broker_factory("4.4")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = await _group_without_renewals(broker.bootstrap, topic)
    await produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    seen: list[bytes] = []
    done = anyio.Event()

    async def handler(record: Record[Any, Any]) -> None:
        seen.append(record.value)
        if len(seen) == 3:
            done.set()

    with caplog.at_level(logging.WARNING, "sharecon"):
        async with ShareConsumer(broker.bootstrap, group_id=group, topics=[topic]) as consumer:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                with anyio.fail_after(30):
                    await done.wait()
                tg.cancel_scope.cancel()
            assert consumer.metrics().renewals_sent_total == 0
    said = [r for r in caplog.records if "share.renew.acknowledge.enable" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert sorted(seen) == [b"a", b"b", b"c"]


# 4.3 behaves the same (run by hand: back after 1.73 s, 11 WARNINGs); one version is
# enough for the suite.
@pytest.mark.parametrize("version", ["4.4"])
async def test_a_delayed_record_comes_back_at_lock_expiry_when_renewals_are_refused(
    kafka_broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture, version: str
) -> None:
    """docs/consumer.md, delayed retry: a group that refuses renewals makes the renewal of
    a delayed record fail with one WARNING (not one per renewal tick), and the record comes back when its lock ends,
    before the delay (one more delivery), to the other member."""
    broker = kafka_broker_factory(version)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = await _group_without_renewals(broker.bootstrap, topic)
    async with Admin(broker.bootstrap) as admin:
        await admin.alter_group_config(group, {"share.record.lock.duration.ms": "2000"})
    await produce(broker.bootstrap, topic, [b"later"])
    delay = 8.0
    first: list[float] = []
    back: list[tuple[float, str, int]] = []

    def make(bootstrap: str) -> ShareConsumer[Any, Any]:
        return ShareConsumer(bootstrap, group_id=group, topics=[topic], ack_mode="explicit")

    async def read(name: str, consumer: ShareConsumer[Any, Any], tg: Any) -> None:
        async for record in consumer:
            if record.delivery_count == 1:
                first.append(anyio.current_time())
                record.release(delay=delay)
                continue
            back.append((anyio.current_time(), name, record.delivery_count))
            record.accept()
            await consumer.commit()
            tg.cancel_scope.cancel()

    with caplog.at_level(logging.WARNING, "sharecon"):
        async with make(broker.bootstrap) as a, make(broker.bootstrap) as b:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read, "a", a, tg)
                    tg.start_soon(read, "b", b, tg)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(first) == 1 and len(back) == 1, (first, back)
    at, _member, count = back[0]
    assert count == 2
    assert at - first[0] < delay - 2, f"back after {at - first[0]:.2f} s: the lock was renewed"
    # Once for the record, not once per renewal tick until its lock ended (was 11).
    refusals = [m for m in warned if "the locks of" in m]
    assert len(refusals) == 1, warned
