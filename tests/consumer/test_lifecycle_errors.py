"""Lifecycle mistakes get a clear error: arguments checked before anything waits, no second
life after close, answers after close say so."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("bad", [-1, 0, 1.5, 10**12, True])
async def test_poll_and_batches_refuse_bad_max_records(bad: object) -> None:
    # Checked before the consumer is even asked whether it runs: it never blocks.
    consumer = ShareConsumer("127.0.0.1:9", group_id="g", topics=["t"])
    with anyio.fail_after(5), pytest.raises(errors.ConfigError, match="max_records"):
        await consumer.poll(0.1, max_records=bad)  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="max_records"):
        consumer.batches(max_records=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [float("nan"), -1.0, "5", True])
async def test_poll_refuses_a_bad_timeout(bad: object) -> None:
    consumer = ShareConsumer("127.0.0.1:9", group_id="g", topics=["t"])
    with pytest.raises(errors.ConfigError, match="timeout"):
        await consumer.poll(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["bad topic!", "..", "a/b", "x" * 300, "nul\0"])
async def test_subscribe_refuses_illegal_topic_names(name: str) -> None:
    consumer = ShareConsumer("127.0.0.1:9", group_id="g", topics=["t"])
    with pytest.raises(errors.ConfigError, match="topic"):
        consumer.subscribe([name])


@pytest.mark.broker
async def test_a_closed_consumer_cannot_start_again(kafka_bootstrap: str, topic: str) -> None:
    consumer = ShareConsumer(kafka_bootstrap, group_id="closed-once", topics=[topic])
    async with consumer:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        async with consumer:
            pass  # pragma: no cover - never reached


@pytest.mark.broker
async def test_an_answer_after_close_says_the_consumer_is_closed(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"one", b"two"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
    with pytest.raises(errors.InvalidRecordStateError, match="consumer is closed"):
        record.accept()
