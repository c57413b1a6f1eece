"""The metric counters, driven with plain numbers for time (no broker, no clock)."""

from __future__ import annotations

import dataclasses
import math
import uuid

import pytest

from sharecon import Producer, ShareConsumer
from sharecon._share.acks import batches_from_runs
from sharecon._share.ledger import AckFailure, AckResult
from sharecon._stats import ConsumerStats, ProducerStats, Sensor
from sharecon.metrics import (
    ADMIN_METRICS,
    CONSUMER_METRICS,
    PRODUCER_METRICS,
    AdminMetrics,
    ConsumerMetrics,
    ProducerMetrics,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition


def test_rate_counts_the_window_and_never_less_than_one_sample_of_time() -> None:
    s = Sensor(0.0, width=30.0, samples=2)
    s.record(1.0, 60)
    # Just started: the 60 records are spread over at least one 30 s sample, as Java does.
    assert s.rate(2.0) == pytest.approx(60 / 30)
    s.record(40.0, 30)
    # Both samples live: 90 records over the 40 s since the sensor started.
    assert s.rate(40.0) == pytest.approx(90 / 40)
    assert s.total == 90 and s.events == 2


def test_old_samples_leave_the_window_but_stay_in_the_totals() -> None:
    s = Sensor(0.0, width=30.0, samples=2)
    s.record(1.0, 5.0)
    s.record(2.0, 9.0)
    assert s.avg(3.0) == pytest.approx(7.0)
    assert s.max(3.0) == 9.0
    # Two sub-windows later the first one is gone: nothing in the window.
    assert math.isnan(s.avg(61.0)) and math.isnan(s.max(61.0))
    assert s.rate(61.0) == 0.0 and s.event_rate(61.0) == 0.0
    assert s.total == 14.0 and s.events == 2
    s.record(200.0, 1.0)
    assert s.max(200.0) == 1.0


def test_event_rate_counts_events_not_values() -> None:
    s = Sensor(0.0, width=10.0, samples=2)
    for t in range(20):
        s.record(float(t), 100.0)
    assert s.event_rate(20.0) == pytest.approx(20 / 20)
    assert s.rate(20.0) == pytest.approx(2000 / 20)


def test_a_sensor_needs_a_window() -> None:
    with pytest.raises(ValueError):
        Sensor(0.0, width=0.0)


def _result(ok: bool, first: int, last: int) -> AckResult:
    tp = TopicIdPartition(uuid.uuid4(), 0, "t")
    batches = tuple(batches_from_runs([(first, last, int(AckType.ACCEPT))]))
    if ok:
        return AckResult(tp, batches)
    return AckResult(tp, batches, ErrorCode.INVALID_RECORD_STATE, AckFailure.LOCK_LOST)


def _snapshot(stats: ConsumerStats, now: float) -> ConsumerMetrics:
    return stats.snapshot(
        now,
        assigned_partitions=3,
        buffered_records=7,
        buffered_bytes=700,
        held_records=2,
        lock_expired=4,
        renewals_failed=1,
    )


def test_consumer_stats_follow_the_java_names_and_meanings() -> None:
    stats = ConsumerStats(0.0, client_id="c1", group_id="g1")
    stats.poll_timer_from(4.0)  # ready at 4: the first gap (1 s) counts from there
    stats.on_fetch(1.0, 0.020, 10, 1000)
    stats.on_fetch(2.0, 0.040, 30, 3000, throttle_ms=8)
    stats.on_acks_sent(2.5, 40)
    stats.on_acks_sent(2.5, 0)
    stats.on_ack_results(3.0, [_result(True, 0, 9), _result(False, 10, 14)])
    stats.on_heartbeat(3.0, 0.005)
    stats.on_heartbeat(4.0, 0.015)
    stats.on_rebalance(4.0)
    for t in (5.0, 5.5, 7.5):
        stats.on_poll(t)
    stats.renewals_sent = 3
    stats.dlq_records = 2
    m = _snapshot(stats, 10.0)
    assert (m.client_id, m.group_id) == ("c1", "g1")
    assert m.records_consumed_total == 40 and m.bytes_consumed_total == 4000
    assert m.records_per_request_avg == 20 and m.records_per_request_max == 30
    assert m.fetch_size_avg == 2000 and m.fetch_size_max == 3000
    assert m.fetch_latency_avg == pytest.approx(30.0) and m.fetch_latency_max == pytest.approx(40.0)
    assert m.fetch_total == 2 and m.fetch_rate == pytest.approx(2 / 30)
    assert m.fetch_throttle_time_avg == 4 and m.fetch_throttle_time_max == 8
    assert m.acknowledgements_send_total == 40
    assert m.acknowledgements_error_total == 5
    assert m.heartbeat_total == 2 and m.heartbeat_response_time_max == pytest.approx(15.0)
    assert m.last_heartbeat_seconds_ago == pytest.approx(6.0)
    assert m.rebalance_total == 1 and m.rebalance_rate_per_hour == pytest.approx(1.0)
    assert m.last_poll_seconds_ago == pytest.approx(2.5)
    # Gaps of 1, 0.5 and 2 s.
    assert m.time_between_poll_avg == pytest.approx(3500.0 / 3)
    assert m.time_between_poll_max == pytest.approx(2000.0)
    assert (m.assigned_partitions, m.buffered_records, m.buffered_bytes) == (3, 7, 700)
    assert (m.held_records, m.lock_expired_records_total) == (2, 4)
    assert (m.renewals_sent_total, m.renewals_failed_total) == (3, 1)
    assert (m.dlq_records_total, m.dlq_errors_total) == (2, 0)
    d = m.as_dict()
    assert d["records-consumed-total"] == 40
    assert d["acknowledgements-error-total"] == 5
    assert d["time-between-poll-max"] == pytest.approx(2000.0)
    assert "client-id" not in d and len(d) == len(CONSUMER_METRICS)


def test_before_any_event_the_ago_values_are_minus_one() -> None:
    m = _snapshot(ConsumerStats(0.0, client_id="c", group_id="g"), 1.0)
    assert m.last_poll_seconds_ago == -1 and m.last_heartbeat_seconds_ago == -1
    assert math.isnan(m.fetch_latency_avg) and m.fetch_total == 0


def test_producer_stats() -> None:
    stats = ProducerStats(0.0, client_id="p")
    stats.on_request(1.0, [100, 300])
    stats.on_response(1.01, 0.010, 12, throttle_ms=3)
    stats.on_batch_done(1.01, 5, failed=False)
    stats.on_batch_done(1.01, 7, failed=False)
    stats.on_retry(1.5, 3)
    stats.on_batch_done(2.0, 3, failed=True)
    m = stats.snapshot(3.0, buffer_total_bytes=1000, buffer_available_bytes=900, in_flight=1)
    assert m.record_send_total == 12 and m.record_error_total == 3 and m.record_retry_total == 3
    assert m.request_total == 1 and m.request_latency_avg == pytest.approx(10.0)
    assert m.records_per_request_avg == 12
    assert m.produce_throttle_time_avg == 3 and m.produce_throttle_time_max == 3
    assert m.batch_size_avg == 200 and m.batch_size_max == 300
    assert (m.buffer_total_bytes, m.buffer_available_bytes, m.batches_in_flight) == (1000, 900, 1)
    d = m.as_dict()
    assert d["record-send-total"] == 12 and d["request-latency-avg"] == pytest.approx(10.0)
    assert len(d) == len(PRODUCER_METRICS)


@pytest.mark.parametrize(
    ("cls", "table"),
    [
        (ConsumerMetrics, CONSUMER_METRICS),
        (ProducerMetrics, PRODUCER_METRICS),
        (AdminMetrics, ADMIN_METRICS),
    ],
)
def test_the_tables_describe_every_field_in_order(cls: type, table: tuple) -> None:  # type: ignore[type-arg]
    numbers = [f.name for f in dataclasses.fields(cls) if f.name not in ("client_id", "group_id")]
    assert numbers == [m.field for m in table]
    for m in table:
        assert m.name == m.field.replace("_", "-")
        assert (m.kind == "counter") == m.name.endswith("-total")
        assert m.description.endswith(".")


def test_metrics_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        ShareConsumer("localhost:1", group_id="g", topics=["t"]).metrics()
    # A producer counts from its creation: zeros until it sends.
    pm = Producer("localhost:1", client_id="p0").metrics()
    assert pm.client_id == "p0" and pm.record_send_total == 0 and pm.batches_in_flight == 0


def test_poll_gaps_are_folded_into_the_window_per_fetch_and_read_before() -> None:
    stats = ConsumerStats(100.0, client_id="c", group_id="g")
    for now in (100.0, 100.1, 103.1):  # gaps 0, 0.1 and 3 s
        stats.on_poll(now)
    stats.on_fetch(103.2, 0.01, 1, 1)  # folds the three asks into the window
    stats.on_poll(103.3)  # not folded: a snapshot counts it all the same, and changes nothing
    gauges = {
        "assigned_partitions": 0,
        "buffered_records": 0,
        "buffered_bytes": 0,
        "held_records": 0,
        "lock_expired": 0,
        "renewals_failed": 0,
    }
    for _ in range(2):
        m = stats.snapshot(105.3, **gauges)
        assert m.time_between_poll_max == pytest.approx(3000.0)
        assert m.time_between_poll_avg == pytest.approx(3300.0 / 4)
        assert m.last_poll_seconds_ago == pytest.approx(2.0)
    stats.on_fetch(106.0, 0.01, 1, 1)
    assert stats.snapshot(106.0, **gauges).time_between_poll_avg == pytest.approx(3300.0 / 4)
    # Two sub-windows later the gaps are out of the window.
    later = stats.snapshot(183.3, **gauges)
    assert math.isnan(later.time_between_poll_max)
    assert later.last_poll_seconds_ago == pytest.approx(80.0)
