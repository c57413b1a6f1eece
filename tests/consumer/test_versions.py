"""sharecon's own consumer on every Kafka line it supports: 4.1, 4.2, 4.3 and 4.4.

On each: accept, release (delivered again, count raised), reject (archived: never again),
the dead-letter path (``reject_to_dlq``), renew and strict record limits where the broker
has them (4.2+), and a clear error where it does not (4.1).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.mark.parametrize("version", ["4.1", "4.2", "4.3", "4.4"])
async def test_every_answer_on_each_kafka_line(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    broker = kafka_broker_factory(version)
    topic = f"v-{uuid.uuid4().hex[:8]}"
    dlq = f"dlq-{topic}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    broker.tools.create_topic(dlq, 1)
    broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    await produce(broker.bootstrap, topic, [b"accept", b"release", b"reject", b"dlq", b"renew"])
    renews = not version.startswith("4.1")
    seen: list[tuple[bytes | None, int]] = []
    async with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], ack_mode="explicit", dlq_topic=dlq
    ) as consumer:
        with anyio.fail_after(90):
            async for record in consumer:
                seen.append((record.value, record.delivery_count))
                if record.value == b"release" and record.delivery_count == 1:
                    record.release()
                elif record.value == b"reject":
                    record.reject()
                elif record.value == b"dlq":
                    meta = await consumer.reject_to_dlq(record, reason="poison")
                    assert meta is not None and meta.topic == dlq
                elif record.value == b"renew" and renews:
                    before = record.lock_deadline
                    assert before is not None
                    await anyio.sleep(0.5)
                    record.renew()
                    for _ in range(100):  # the renew's answer moves the deadline
                        if record.lock_deadline != before:
                            break
                        await anyio.sleep(0.05)
                    assert record.lock_deadline is not None and record.lock_deadline > before
                    record.accept()
                elif record.value == b"renew":
                    with pytest.raises(errors.UnsupportedVersionError, match="4.2"):
                        record.renew()
                    record.accept()
                else:
                    record.accept()
                if len(seen) == 6:
                    break
            verdict = await consumer.commit()
    assert all(err is None for err in verdict.values()), verdict
    values = sorted(seen)
    assert values == sorted(
        [(b"accept", 1), (b"release", 1), (b"release", 2), (b"reject", 1), (b"dlq", 1),
         (b"renew", 1)]
    )  # fmt: skip
    # Nothing is left for the group: rejected and dead-lettered records never come back.
    async with ShareConsumer(broker.bootstrap, group_id=group, topics=[topic]) as again:
        with anyio.move_on_after(3):
            extra = await again.__anext__()
            pytest.fail(f"{extra} was delivered again")
    # Strict record limits: 4.2+ honours them; 4.1 is refused before anything is acquired.
    limited = ShareConsumer(
        broker.bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        acquire_mode="record_limit",
        max_records=2,
    )
    if renews:
        await produce(broker.bootstrap, topic, [b"more%d" % i for i in range(10)])
        async with limited:
            with anyio.fail_after(60):
                held = await limited.poll(30, max_records=10)
                await anyio.sleep(1)  # its fetch loop keeps going meanwhile
            core = limited._core
            assert core is not None
            assert 1 <= len(held) <= 2 and core.ledger.outstanding_all() == 2
            for r in held:
                r.release()
    else:
        with pytest.raises(errors.UnsupportedVersionError, match="4.2"):
            await limited.start()


@pytest.mark.parametrize("version", ["4.1", "4.4"])
async def test_prefetch_released_at_close_spends_no_attempt_on_4_1(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    """A consumer takes one record of a 20-record batch and closes with the other 19
    buffered, never handed out. Kafka 4.1 lowers the delivery count of what a session's
    end gives back, but not of an explicit release: the close leaves those 19 to the
    session's end there, so they come back at delivery 1 and nothing is counted spent.
    From 4.2 both keep the count: they are released and counted (19 at delivery 2). The
    record in hand was seen: released by an answer on both lines (delivery 2)."""
    broker = kafka_broker_factory(version)
    topic = f"pf-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    n = 20
    broker.tools.create_topic(topic, 1)
    broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    await produce(broker.bootstrap, topic, [b"%d" % i for i in range(n)], linger_ms=500)
    on_41 = version.startswith("4.1")
    with anyio.fail_after(90):
        first: ShareConsumer[bytes, bytes] = ShareConsumer(
            broker.bootstrap, group_id=group, topics=[topic]
        )
        async with first:
            async for record in first:
                assert record.offset == 0
                while first.health().buffered_records < n - 1:  # noqa: ASYNC110 - a gauge
                    await anyio.sleep(0.05)
                break
        assert first.health().released_unseen == (0 if on_41 else n - 1)
        got: dict[int, int] = {}
        async with ShareConsumer(broker.bootstrap, group_id=group, topics=[topic]) as again:
            async for record in again:
                got[record.offset] = record.delivery_count
                if len(got) == n:
                    break
    unseen = 1 if on_41 else 2
    assert got == {0: 2, **dict.fromkeys(range(1, n), unseen)}
