"""KIP-714 client telemetry against a real broker: a receiver plugin the test kit compiles
with the local JDK is loaded by the broker and writes every push it accepts to a file."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing import KafkaBroker
from sharecon.testing.telemetry import TelemetryPush, build_receiver, read_pushes, subscribe
from tests.otlp_reader import read_metrics_data

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

CONSUMED = "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"


def _consumed(pushes: list[TelemetryPush]) -> float:
    return sum(read_metrics_data(p.data)[1][CONSUMED].value for p in pushes)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_consumer_pushes_its_metrics_when_subscribed_and_a_last_push_at_close(
    tmp_path: Path,
) -> None:
    receiver = await anyio.to_thread.run_sync(build_receiver, tmp_path / "plugin")
    out = tmp_path / "pushes.txt"
    broker = KafkaBroker(extra_config=receiver.broker_config(out), plugins=[receiver.classes])
    await anyio.to_thread.run_sync(broker.start)
    try:
        bootstrap = broker.bootstrap
        async with Admin(bootstrap) as admin:
            await admin.create_topics(["t"], num_partitions=1)
            await admin.alter_group_config("g", {"share.auto.offset.reset": "earliest"})
            await subscribe(
                admin, "sharecon-test", metrics="org.apache.kafka.consumer.", interval_ms=500
            )
        async with Producer(bootstrap) as producer:
            for i in range(10):
                await producer.send("t", f"v{i}".encode())
        quiet = ShareConsumer(bootstrap, group_id="g2", topics=["t"], enable_metrics_push=False)
        async with quiet, ShareConsumer(bootstrap, group_id="g", topics=["t"]) as consumer:
            got = 0
            with anyio.fail_after(30):
                async for _ in consumer:
                    got += 1
                    if got == 10:
                        break
                # Pushes every 0.5 s once subscribed: wait until they counted all ten.
                while True:
                    if _consumed(read_pushes(out)) >= 10:
                        break
                    await anyio.sleep(0.1)
        pushes = read_pushes(out)
    finally:
        await anyio.to_thread.run_sync(broker.stop)
    # One client pushed (the other had pushing turned off), and its last push said it was
    # terminating.
    assert len({p.client_instance_id for p in pushes}) == 1
    assert pushes[-1].terminating and not any(p.terminating for p in pushes[:-1])
    assert {p.content_type for p in pushes} == {"OTLP"}  # the broker's name for OTLP metrics
    resource, metrics = read_metrics_data(pushes[-1].data)
    assert resource["client_software_name"] == "sharecon"
    assert resource["group_id"] == "g"
    # Only what the subscription asked for; counters as sums of deltas (what brokers ask
    # for by default), which add up to the total.
    assert metrics and all(name.startswith("org.apache.kafka.consumer.") for name in metrics)
    assert metrics[CONSUMED].kind == "sum" and metrics[CONSUMED].temporality == 1
    assert _consumed(pushes) == 10
    assert metrics["org.apache.kafka.consumer.share.fetch.manager.fetch.rate"].kind == "gauge"
