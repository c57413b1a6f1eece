"""KIP-714 telemetry: the decisions (sans-I/O) and the OTLP encoding, without a broker."""

from __future__ import annotations

import random
import struct
import uuid

from sharecon._share.telemetry import TelemetryAction, TelemetryPlan
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.otlp import CUMULATIVE, DELTA, MetricPoint, encode_metrics_data
from tests.otlp_reader import every, one, read_metrics_data

ID = uuid.UUID(int=42)


def _subscribe(plan: TelemetryPlan, now: float, requested: list[str], interval: int = 1000) -> None:
    plan.on_subscription(
        now,
        error_code=0,
        instance_id=ID,
        subscription_id=7,
        push_interval_ms=interval,
        max_bytes=1 << 20,
        delta=False,
        requested=requested,
    )


def test_first_subscribe_then_push_after_a_jittered_interval_then_every_interval() -> None:
    plan = TelemetryPlan(random.Random(1))
    assert plan.next(0.0) == (TelemetryAction.SUBSCRIBE, None)
    _subscribe(plan, 0.0, ["org.apache.kafka.consumer."], interval=2000)
    assert plan.instance_id == ID
    action, due = plan.next(0.0)
    assert action is TelemetryAction.PUSH and due is not None and 1.0 <= due <= 3.0
    plan.on_pushed(due, ErrorCode.NONE)
    assert plan.next(due) == (TelemetryAction.PUSH, due + 2.0)


def test_no_requested_metric_asks_again_after_the_interval_and_never_pushes() -> None:
    plan = TelemetryPlan()
    _subscribe(plan, 10.0, [], interval=5000)
    assert plan.next(10.0) == (TelemetryAction.SUBSCRIBE, 15.0)
    assert plan.terminate() is False  # nothing subscribed: no terminating push


def test_prefixes_select_metrics_and_an_empty_prefix_selectsevery() -> None:
    names = ["org.apache.kafka.consumer.a", "org.apache.kafka.producer.b", "x"]
    plan = TelemetryPlan()
    _subscribe(plan, 0.0, ["org.apache.kafka.consumer."])
    assert plan.selected(names) == ["org.apache.kafka.consumer.a"]
    _subscribe(plan, 1.0, [""])
    assert plan.selected(names) == names


def test_push_errors() -> None:
    plan = TelemetryPlan()
    _subscribe(plan, 0.0, [""])
    plan.on_pushed(1.0, ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
    assert plan.next(1.0) == (TelemetryAction.SUBSCRIBE, None)
    _subscribe(plan, 1.0, [""])
    plan.on_pushed(2.0, ErrorCode.TELEMETRY_TOO_LARGE)
    assert plan.next(2.0) == (TelemetryAction.PUSH, 3.0)
    plan.on_pushed(3.0, ErrorCode.INVALID_REQUEST)
    assert plan.next(3.0) == (None, None)
    assert plan.disabled_reason is not None and "error code" in plan.disabled_reason
    assert plan.terminate() is False


def test_failed_subscriptions_back_off_then_give_up() -> None:
    plan = TelemetryPlan()
    for i in range(4):
        plan.on_subscription_failed(float(i), "refused")
        action, due = plan.next(float(i))
        assert action is TelemetryAction.SUBSCRIBE and due == i + 5.0
    plan.on_subscription_failed(4.0, "refused")
    assert plan.next(4.0) == (None, None)


def test_terminate_pushes_once_when_subscribed() -> None:
    plan = TelemetryPlan()
    _subscribe(plan, 0.0, ["org."])
    assert plan.terminate() is True
    assert plan.terminate() is False
    assert plan.next(0.0) == (None, None)


# -- OTLP: read back with the test suite's own protobuf wire reader -----------------------


def test_otlp_metrics_data_layout() -> None:
    data = encode_metrics_data(
        [
            MetricPoint("org.apache.kafka.consumer.records.total", 12.0, monotonic=True),
            MetricPoint("org.apache.kafka.consumer.buffered", 3.5, attributes=(("topic", "t"),)),
        ],
        resource={"client_id": "c1"},
        scope="sharecon",
        scope_version="1.0",
        start_ns=1_000,
        time_ns=2_000,
        temporality=DELTA,
    )
    rm = one(data, 1)
    resource = one(rm, 1)
    kv = one(resource, 1)
    assert one(kv, 1) == b"client_id" and one(one(kv, 2), 1) == b"c1"
    sm = one(rm, 2)
    assert one(one(sm, 1), 1) == b"sharecon"
    counter, gauge = every(sm, 2)
    assert one(counter, 1) == b"org.apache.kafka.consumer.records.total"
    total = one(counter, 7)
    assert one(total, 2) == DELTA and one(total, 3) == 1
    point = one(total, 1)
    assert struct.unpack("<Q", one(point, 2))[0] == 1_000
    assert struct.unpack("<Q", one(point, 3))[0] == 2_000
    assert struct.unpack("<d", one(point, 4))[0] == 12.0
    g = one(one(gauge, 5), 1)
    assert struct.unpack("<d", one(g, 4))[0] == 3.5
    attr = one(g, 7)
    assert one(attr, 1) == b"topic" and one(one(attr, 2), 1) == b"t"
    resource, metrics = read_metrics_data(data)
    assert resource == {"client_id": "c1"}
    assert metrics["org.apache.kafka.consumer.buffered"].kind == "gauge"
    assert CUMULATIVE == 2


def test_a_broker_without_a_receiver_stops_telemetry_quietly() -> None:
    plan = TelemetryPlan()
    plan.on_subscription(
        0.0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        instance_id=ID,
        subscription_id=0,
        push_interval_ms=0,
        max_bytes=0,
        delta=False,
        requested=[],
    )
    assert plan.next(0.0) == (None, None)
    assert plan.quiet and plan.disabled_reason is not None
