"""KIP-714 client telemetry against a real broker: a receiver plugin the test kit compiles
with the local JDK is loaded by the broker and writes every push it accepts to a file.

One broker serves the module; each test reads only the pushes made after it began (every
client of an earlier test has closed, so its last push is written by then)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.admin import Admin, ResourceType
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing import KafkaBroker
from sharecon.testing.telemetry import TelemetryPush, build_receiver, read_pushes, subscribe
from tests.otlp_reader import read_metrics_data

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

CONSUMED = "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"


def _consumed(pushes: list[TelemetryPush]) -> float:
    return sum(read_metrics_data(p.data)[1][CONSUMED].value for p in pushes)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def receiving_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A broker with the receiver plugin: ``(bootstrap, the file of pushes)``."""
    folder = tmp_path_factory.mktemp("telemetry")
    receiver = build_receiver(folder / "plugin")
    out = folder / "pushes.txt"
    broker = KafkaBroker(extra_config=receiver.broker_config(out), plugins=[receiver.classes])
    broker.start()
    try:
        yield broker.bootstrap, out
    finally:
        broker.stop()


async def test_consumer_pushes_its_metrics_when_subscribed_and_a_last_push_at_close(
    receiving_broker: tuple[str, Path],
) -> None:
    bootstrap, out = receiving_broker
    before = len(read_pushes(out))
    async with Admin(bootstrap) as admin:
        await admin.create_topics(["t"], num_partitions=1)
        await admin.alter_group_config("g", {"share.auto.offset.reset": "earliest"})
        await subscribe(
            admin, "sharecon-test", metrics="org.apache.kafka.consumer.", interval_ms=500
        )
    async with Producer(bootstrap, enable_metrics_push=False) as producer:
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
                if _consumed(read_pushes(out)[before:]) >= 10:
                    break
                await anyio.sleep(0.1)
    pushes = read_pushes(out)[before:]
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


PRODUCER_SENT = "org.apache.kafka.producer.record.send.total"
ADMIN_REQUESTS = "org.apache.kafka.admin.client.request.total"


async def test_producer_and_admin_push_their_metrics_and_a_last_push_at_close(
    receiving_broker: tuple[str, Path],
) -> None:
    bootstrap, out = receiving_broker
    before = len(read_pushes(out))
    name = "sharecon-clients"
    async with Admin(bootstrap) as setup:  # pushing is off by default for an Admin, as in Java
        await setup.create_topics(["p"], num_partitions=2)
        await subscribe(
            setup,
            name,
            metrics="org.apache.kafka.producer.,org.apache.kafka.admin.client.",
            interval_ms=500,
        )
    try:
        quiet = Producer(bootstrap, client_id="quiet", enable_metrics_push=False)
        producer = Producer(bootstrap, client_id="tp")
        admin = Admin(bootstrap, client_id="ta", enable_metrics_push=True)
        default_admin = Admin(bootstrap, client_id="quiet-admin")
        async with quiet, producer, admin, default_admin:
            await quiet.send("p", b"not counted")
            await default_admin.describe_topics(["p"])
            for i in range(25):
                await producer.send("p", f"v{i}".encode(), key=str(i).encode())
            await producer.flush()
            await admin.describe_topics(["p"])
            # Both push every 0.5 s once subscribed: wait for a push of each before closing.
            with anyio.fail_after(20):
                while True:
                    if len(_by_client(read_pushes(out)[before:])) == 2:
                        break
                    await anyio.sleep(0.1)
            await admin.list_share_groups()
    finally:
        async with Admin(bootstrap) as cleanup:
            await cleanup.alter_configs(
                ResourceType.CLIENT_METRICS, name, {"metrics": None, "interval.ms": None}
            )
    pushes = _by_client(read_pushes(out)[before:])
    # Only the two clients with pushing on pushed (not the quiet producer, not the Admin
    # left at its default, off as in Java), each as one client instance.
    assert set(pushes) == {"tp", "ta"}
    for client, theirs in pushes.items():
        assert len({p.client_instance_id for p in theirs}) == 1, client
        assert theirs[-1].terminating, client
        assert not any(p.terminating for p in theirs[:-1]), client
        assert len(theirs) >= 2, client  # at least one push before the last
    # Counters go as deltas that add up to the client's own totals at close.
    sent = [read_metrics_data(p.data)[1] for p in pushes["tp"]]
    assert all(name.startswith("org.apache.kafka.producer.") for m in sent for name in m)
    assert sent[-1][PRODUCER_SENT].kind == "sum" and sent[-1][PRODUCER_SENT].temporality == 1
    assert sum(m[PRODUCER_SENT].value for m in sent) == 25 == producer.metrics().record_send_total
    assert "org.apache.kafka.producer.request.latency.avg" in sent[-1]
    asked = [read_metrics_data(p.data)[1] for p in pushes["ta"]]
    assert all(name.startswith("org.apache.kafka.admin.client.") for m in asked for name in m)
    total = admin.metrics().request_total
    assert total >= 2
    assert sum(m[ADMIN_REQUESTS].value for m in asked) == total
    assert asked[-1]["org.apache.kafka.admin.client.request.latency.max"].kind == "gauge"


def _by_client(pushes: list[TelemetryPush]) -> dict[str, list[TelemetryPush]]:
    """Pushes grouped by the ``client_id`` resource attribute they carry, in order."""
    out: dict[str, list[TelemetryPush]] = defaultdict(list)
    for p in pushes:
        out[read_metrics_data(p.data)[0]["client_id"]].append(p)
    return dict(out)
