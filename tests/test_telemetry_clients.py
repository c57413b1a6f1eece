"""KIP-714 pushing shared by every client: its option checked, metric names, admin counters."""

from __future__ import annotations

import math

import pytest

from sharecon import errors
from sharecon._stats import AdminStats
from sharecon._telemetry import metric_points, telemetry_name
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.metrics import ADMIN_METRICS, PRODUCER_METRICS, AdminMetrics
from sharecon.producer import Producer


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_enable_metrics_push_must_be_a_bool_for_every_client(value: object) -> None:
    for make in (
        lambda: Producer("localhost:9092", enable_metrics_push=value),  # type: ignore[arg-type]
        lambda: Admin("localhost:9092", enable_metrics_push=value),  # type: ignore[arg-type]
        lambda: ShareConsumer(
            "localhost:9092",
            group_id="g",
            topics=["t"],
            enable_metrics_push=value,  # type: ignore[arg-type]
        ),
    ):
        with pytest.raises(errors.ConfigError, match="enable_metrics_push"):
            make()


def test_names_follow_the_java_clients() -> None:
    producer = {telemetry_name(m, "producer") for m in PRODUCER_METRICS}
    assert "org.apache.kafka.producer.record.send.total" in producer
    assert "org.apache.kafka.producer.request.latency.avg" in producer
    # sharecon's own metrics are under its own prefix, per client.
    assert "org.sharecon.producer.batches.in.flight" in producer
    admin = [telemetry_name(m, "admin") for m in ADMIN_METRICS]
    assert admin == [
        "org.apache.kafka.admin.client.request.rate",
        "org.apache.kafka.admin.client.request.total",
        "org.apache.kafka.admin.client.request.latency.avg",
        "org.apache.kafka.admin.client.request.latency.max",
    ]


def test_admin_counts_answers_and_their_latency() -> None:
    stats = AdminStats(0.0, client_id="a")
    empty = stats.snapshot(1.0)
    assert empty.request_total == 0 and math.isnan(empty.request_latency_avg)
    stats.on_response(1.0, 0.010)
    stats.on_response(2.0, 0.030)
    snap = stats.snapshot(3.0)
    assert snap.request_total == 2
    assert snap.request_latency_avg == pytest.approx(20.0)
    assert snap.request_latency_max == pytest.approx(30.0)
    points = {p.name: p for p in metric_points(ADMIN_METRICS, "admin")(snap)}
    total = points["org.apache.kafka.admin.client.request.total"]
    assert total.monotonic and total.value == 2 and total.unit == ""
    latency = points["org.apache.kafka.admin.client.request.latency.max"]
    assert not latency.monotonic and latency.unit == "ms"


def test_admin_metrics_are_readable_before_start() -> None:
    snap = Admin("localhost:9092", client_id="x").metrics()
    assert isinstance(snap, AdminMetrics) and snap.client_id == "x" and snap.request_total == 0
    assert set(snap.as_dict()) == {m.name for m in ADMIN_METRICS}
