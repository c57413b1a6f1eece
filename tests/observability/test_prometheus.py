"""The Prometheus collector: register it in a fresh registry, consume for real, scrape the text."""

from __future__ import annotations

import anyio
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sharecon import Producer, ProducerRecord, ShareConsumer
from sharecon.metrics import CONSUMER_METRICS, PRODUCER_METRICS
from sharecon.prometheus import ShareconCollector, metric_name

pytestmark = pytest.mark.anyio

N = 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_names_follow_prometheus_units() -> None:
    by_field = {m.field: m for m in CONSUMER_METRICS}
    assert metric_name("p", by_field["fetch_latency_avg"]) == ("p_fetch_latency_avg_seconds", 0.001)
    assert metric_name("p", by_field["fetch_size_max"]) == ("p_fetch_size_max_bytes", 1.0)
    assert metric_name("p", by_field["bytes_consumed_total"]) == ("p_bytes_consumed", 1.0)
    assert metric_name("p", by_field["records_consumed_total"]) == ("p_records_consumed", 1.0)


def test_an_empty_collector_scrapes_families_without_samples() -> None:
    registry = CollectorRegistry()
    registry.register(ShareconCollector())
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    assert families["sharecon_consumer_records_consumed"].type == "counter"
    assert families["sharecon_producer_request_latency_avg_seconds"].type == "gauge"
    assert not families["sharecon_consumer_records_consumed"].samples
    with pytest.raises(TypeError):
        ShareconCollector().add(object())  # type: ignore[arg-type]


@pytest.mark.broker
async def test_scrape_after_real_consumption(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    registry = CollectorRegistry()
    collector = ShareconCollector()
    registry.register(collector)
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, client_id="prom-p") as producer:
            collector.add(producer)
            await producer.send_batch([ProducerRecord(topic, b"x" * 10) for _ in range(N)])
        consumer = ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], client_id="prom-c"
        )
        collector.add(consumer)  # not started yet: left out of the scrape until it is
        assert "prom-c" not in generate_latest(registry).decode()
        async with consumer:
            seen = 0
            async for _ in consumer:
                seen += 1
                if seen == N:
                    break
            await consumer.commit()
            text = generate_latest(registry).decode()
            member = consumer.member_id

    samples = _samples(text)
    labels = (("client_id", "prom-c"), ("group", share_group), ("member_id", member))
    assert samples[("sharecon_consumer_records_consumed_total", labels)] >= N
    assert samples[("sharecon_consumer_acknowledgements_send_total", labels)] >= N
    assert samples[("sharecon_consumer_acknowledgements_error_total", labels)] == 0
    assert samples[("sharecon_consumer_assigned_partitions", labels)] == 3
    latency = samples[("sharecon_consumer_fetch_latency_max_seconds", labels)]
    assert 0 < latency < 60  # seconds, not milliseconds
    plabels = (("client_id", "prom-p"),)
    assert samples[("sharecon_producer_record_send_total", plabels)] == N
    assert samples[("sharecon_producer_record_error_total", plabels)] == 0
    # Every metric of both tables is exposed.
    names = {name for name, _ in samples}
    for info in CONSUMER_METRICS:
        name, _ = metric_name("sharecon_consumer", info)
        assert name + ("_total" if info.kind == "counter" else "") in names
    for info in PRODUCER_METRICS:
        name, _ = metric_name("sharecon_producer", info)
        assert name + ("_total" if info.kind == "counter" else "") in names
