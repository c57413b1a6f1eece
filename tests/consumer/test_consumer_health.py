"""A broker that dies mid-consume is visible: a WARNING, recent_errors, and health()."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


async def test_a_dead_broker_is_reported(
    kafka_broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    broker = kafka_broker_factory(shared=False)
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics(["health"], num_partitions=1)
        await admin.alter_group_config("health-g", {"share.auto.offset.reset": "earliest"})
    await produce(broker.bootstrap, "health", [b"a", b"b"])
    caplog.set_level(logging.INFO, logger="sharecon")
    async with ShareConsumer(
        broker.bootstrap,
        group_id="health-g",
        topics=["health"],
        request_timeout=2.0,
        connect_timeout=1.0,
        close_timeout=3.0,
    ) as consumer:
        with anyio.fail_after(30):
            await consumer.__anext__()
            while not consumer.health().ok:
                await anyio.sleep(0.1)
        assert consumer.health().member_state == "stable"
        await anyio.to_thread.run_sync(broker.kill)
        # Within a few request timeouts: unhealthy, a WARNING naming the broker, errors kept.
        with anyio.fail_after(30):
            while consumer.health().ok or not consumer.recent_errors:
                await anyio.sleep(0.2)
            while not any(
                r.levelno == logging.WARNING and "unreachable" in r.getMessage()
                for r in caplog.records
            ):
                await anyio.sleep(0.2)
        health = consumer.health()
        assert not health.ok and health.running and health.failed is None
        down = [b for b in health.cluster.brokers if not b.reachable]
        assert down and down[0].last_error
        await anyio.to_thread.run_sync(broker.restart)
        with anyio.move_on_after(60):
            while not consumer.health().ok:
                await anyio.sleep(0.2)
        assert consumer.health().ok, consumer.health()
