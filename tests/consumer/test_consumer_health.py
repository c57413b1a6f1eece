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
    from collections.abc import Callable

    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


async def until(check: Callable[[], bool], timeout: float) -> bool:
    """Poll ``check`` every 0.2 s for up to ``timeout`` seconds; its last answer."""
    for _ in range(int(timeout / 0.2)):
        if check():
            return True
        await anyio.sleep(0.2)
    return check()


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
        assert await until(lambda: consumer.health().ok, 30), consumer.health()
        assert consumer.health().member_state == "stable"
        await anyio.to_thread.run_sync(broker.kill)
        # Within a few request timeouts: unhealthy, a WARNING naming the broker, errors kept.
        assert await until(lambda: not consumer.health().ok and bool(consumer.recent_errors), 30)
        assert await until(
            lambda: any(
                r.levelno == logging.WARNING and "unreachable" in r.getMessage()
                for r in caplog.records
            ),
            30,
        )
        health = consumer.health()
        assert not health.ok and health.running and health.failed is None
        down = [b for b in health.cluster.brokers if not b.reachable]
        assert down and down[0].last_error
        await anyio.to_thread.run_sync(broker.restart)
        assert await until(lambda: consumer.health().ok, 60), consumer.health()
    # One WARNING per unreachable address for the whole outage (the consumer retried many
    # times meanwhile), naming it; and an INFO once it is back.
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "unreachable for" in r.getMessage()
    ]
    host_port = broker.bootstrap
    assert warned and all(host_port in m for m in warned), warned
    addresses = [m.split(" unreachable for ")[0] for m in warned]
    assert len(addresses) == len(set(addresses)), warned
    assert any(
        r.levelno == logging.INFO and "reachable again after" in r.getMessage()
        for r in caplog.records
    )
