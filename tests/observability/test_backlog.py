"""A member's backlog per partition (``partition_metrics()``): the broker's share-partition
lag, shared by the members in the process, and the member's own held/buffered/in-flight
counts, through metrics, Prometheus and OpenTelemetry; plus the semantic-convention
duration histograms. Real broker, real traffic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sharecon import Producer, ProducerRecord, ShareConsumer
from sharecon._consumer import backlog
from sharecon.metrics import PARTITION_METRICS, PartitionMetrics
from sharecon.otel import process_span
from sharecon.prometheus import ShareconCollector

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import TopicFactory
    from tests.observability.conftest import Otel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _points(otel: Otel) -> dict[str, list[Any]]:
    data = otel.metrics.get_metrics_data()
    assert data is not None
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def test_partition_metrics_are_named_as_java_and_documented() -> None:
    assert [m.name for m in PARTITION_METRICS][:1] == ["records-lag"]
    fields = [f for f in PartitionMetrics.__dataclass_fields__ if f not in ("topic", "partition")]
    assert fields == [m.field for m in PARTITION_METRICS]
    entry = backlog.LagEntry()
    assert not entry.due(0.0, 10.0)  # nobody reads it: nothing is fetched
    entry.read(0.0)
    assert entry.due(0.0, 10.0)
    entry.fetched_at = 0.0
    assert not entry.due(5.0, 10.0) and entry.due(10.0, 10.0)
    assert not entry.due(10.0 + backlog.WANTED_FOR + 1, 10.0)  # no longer read: stops


@pytest.mark.broker
async def test_backlog_per_partition_through_every_exporter(
    otel: Otel,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = topic_factory(3)
    n = 30
    monkeypatch.setattr(backlog.board, "interval", 1.0)
    fetches = 0
    real_fetch = backlog.LagBoard._fetch

    async def counted(self: backlog.LagBoard, *args: Any) -> None:
        nonlocal fetches
        fetches += 1
        await real_fetch(self, *args)

    monkeypatch.setattr(backlog.LagBoard, "_fetch", counted)
    registry = CollectorRegistry()
    collector = ShareconCollector()
    registry.register(collector)

    def lags(c: ShareConsumer) -> dict[int, float]:
        return {p.partition: p.records_lag for p in c.partition_metrics()}

    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap) as producer:
            await producer.send_and_wait(topic, b"v", partition=0)
            await producer.send_batch(
                [ProducerRecord(topic, b"v", partition=(i + 1) % 3) for i in range(n - 1)]
            )
        async with ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
        ) as c1:
            collector.add(c1)
            # One batch, held and not answered: the member's own counts per partition.
            batch: list[Record[bytes, bytes]] = []
            while not batch:
                batch = await c1.poll(5.0)
            in_batch = {p: sum(1 for r in batch if r.partition == p) for p in range(3)}
            by_partition = {p.partition: p for p in c1.partition_metrics()}
            assert set(by_partition) == {0, 1, 2}  # assigned, held or not
            for p in range(3):
                assert by_partition[p].held_records == in_batch[p]
                assert by_partition[p].in_flight_records == 0
                assert by_partition[p].lock_expired_records_total == 0

            # Handled and accepted (process spans around each): held falls to 0, and once
            # the broker has written the partitions' state it reports their lag, which the
            # member fetches shortly after it is first read.
            for r in batch:
                with process_span(r):
                    r.accept()
            await c1.commit()
            after = c1.partition_metrics()
            assert all(p.held_records == 0 and p.in_flight_records == 0 for p in after)
            expected = {p: float(n // 3 - k) for p, k in in_batch.items() if k}
            while {p: v for p, v in lags(c1).items() if p in expected} != expected:  # noqa: ASYNC110 - polled state
                await anyio.sleep(0.2)

            text = generate_latest(registry).decode()
            prom = {
                int(s.labels["partition"]): s.value
                for f in text_string_to_metric_families(text)
                if f.name == "sharecon_consumer_partition_records_lag"
                for s in f.samples
                if s.labels["topic"] == topic
            }
            assert {p: v for p, v in prom.items() if p in expected} == expected
            points = _points(otel)
            otel_lag = {
                int(p.attributes["messaging.destination.partition.id"]): p.value
                for p in points["sharecon.consumer.partition.records_lag"]
            }
            assert {p: v for p, v in otel_lag.items() if p in expected} == expected

            # A second member in this process reads the same entry: one fetch per interval
            # serves both.
            async with ShareConsumer(
                kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
            ) as c2:
                assert backlog._entry_of[id(c2._core)] is backlog._entry_of[id(c1._core)]
                before = fetches
                start = anyio.current_time()
                while anyio.current_time() - start < 4.0:
                    lags(c1), lags(c2)
                    await anyio.sleep(0.1)
                # Two unshared members would fetch about 8 times in 4 s.
                assert 2 <= fetches - before <= 5

    handled = len(batch)
    points = _points(otel)
    process = points["messaging.process.duration"]
    assert sum(p.count for p in process) == handled
    assert all(p.attributes["messaging.operation.name"] == "process" for p in process)
    ops = points["messaging.client.operation.duration"]
    sends = [p for p in ops if p.attributes["messaging.operation.name"] == "send"]
    receives = [p for p in ops if p.attributes["messaging.operation.name"] == "receive"]
    assert sum(p.count for p in sends) == 2  # send_and_wait, send_batch
    assert sum(p.count for p in receives) >= 1  # the polls that returned records
    assert all(p.explicit_bounds[0] == 0.005 for p in ops + process)
