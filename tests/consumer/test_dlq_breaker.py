"""The dead-letter circuit breaker against a real broker: a handler that raises on every
record dead-letters exactly the breaker's threshold of a window plus one, then nothing more goes
to the dead-letter topic, and no delivery attempt is spent unseen (health() counts none
expired, released unreachable or past the limit), until the breaker is reset; health()
says why meanwhile."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.types import TopicPartition
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

RECORDS = 300
WINDOW = 40


async def dead_lettered(bootstrap: str, dlq: str) -> int:
    async with Admin(bootstrap) as admin:
        if dlq not in await admin.list_topics():
            return 0
        ends = await admin.list_offsets([TopicPartition(dlq, 0)], "latest")
    return ends[TopicPartition(dlq, 0)]


async def test_a_poison_flood_stops_after_a_window_until_reset(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(RECORDS)])
    broken = True
    accepted: set[bytes | None] = set()

    async def handler(record: Record) -> None:
        if broken:
            raise ValueError("bad deploy")
        accepted.add(record.value)

    policy = DeadLetterPolicy(
        topic=dlq, max_deliveries=1, breaker_window=WINDOW, breaker_cooldown=None
    )
    async with (
        ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], dead_letter=policy
        ) as consumer,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(consumer.process, handler)
        with anyio.fail_after(90):
            while consumer.health().dead_letter_breaker is None:  # noqa: ASYNC110 - polled state
                await anyio.sleep(0.1)
        health = consumer.health()
        assert not health.ok
        assert "went to the dead-letter path (more than 50% of 40)" in (
            health.dead_letter_breaker or ""
        )
        first = await dead_lettered(kafka_bootstrap, dlq)
        # Rule 2 of sharecon._share.breaker: with every record failing it opens at the
        # floor(0.5 x 40) + 1 = 21st dead letter. One worker (concurrency=1): no other
        # record was in a handler when it opened, and every record of a fresh group
        # arrives on its first delivery (none is routed on arrival, past max_deliveries).
        assert first == WINDOW // 2 + 1
        # Open: nothing more is routed, however long it stays so, and no delivery attempt
        # is spent unseen (nothing expires in the buffer, is released unreachable, or
        # arrives past the limit): what is buffered stays buffered, nothing is archived.
        await anyio.sleep(5)
        assert await dead_lettered(kafka_bootstrap, dlq) == first
        health = consumer.health()
        assert not health.ok and health.dead_letter_breaker is not None
        assert health.expired_in_buffer == 0
        assert health.released_unreachable == 0
        assert health.past_limit_unseen == 0
        assert health.buffered_records > 0
        # The fix is deployed: reset, and the rest is handled.
        broken = False
        assert consumer.reset_dead_letter_breaker()
        with anyio.fail_after(90):
            while len(accepted) < RECORDS - first:  # noqa: ASYNC110 - polled state
                await anyio.sleep(0.1)
        assert consumer.health().dead_letter_breaker is None
        tg.cancel_scope.cancel()
    assert await dead_lettered(kafka_bootstrap, dlq) == first
    assert len(accepted) == RECORDS - first


async def test_turned_off_the_flood_goes_through(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """What the breaker prevents (and what every flood did before it)."""
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(100)])

    async def handler(record: Record) -> None:
        raise ValueError("bad deploy")

    policy = DeadLetterPolicy(topic=dlq, max_deliveries=1, breaker_threshold=None)
    async with (
        ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], dead_letter=policy
        ) as consumer,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(consumer.process, handler)
        with anyio.fail_after(90):
            while await dead_lettered(kafka_bootstrap, dlq) < 100:  # noqa: ASYNC110
                await anyio.sleep(0.5)
        assert consumer.health().dead_letter_breaker is None
        tg.cancel_scope.cancel()
