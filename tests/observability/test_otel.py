"""OpenTelemetry spans and metrics from real traffic: produce with context, consume, accept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from sharecon import Producer, ProducerRecord, ShareConsumer, errors
from sharecon.otel import ShareconInstrumentor, process_span

if TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.sdk.trace import ReadableSpan

    from sharecon.record import Record
    from tests.observability.conftest import Otel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _by_op(spans: tuple[ReadableSpan, ...], op: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("messaging.operation.type") == op]


def _metric_points(otel: Otel) -> dict[str, list[Any]]:
    data = otel.metrics.get_metrics_data()
    assert data is not None
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def test_instrument_patches_and_uninstrument_restores() -> None:
    before = (ShareConsumer.__anext__, ShareConsumer.poll, Producer.send)
    first = ShareconInstrumentor()
    first.instrument()
    try:
        assert first.is_instrumented
        assert ShareConsumer.__anext__ is not before[0] and Producer.send is not before[2]
        first.instrument()  # again: nothing changes
        with pytest.raises(RuntimeError, match="already instrumented"):
            ShareconInstrumentor().instrument()
    finally:
        first.uninstrument()
    assert (ShareConsumer.__anext__, ShareConsumer.poll, Producer.send) == before
    assert not first.is_instrumented


@pytest.mark.broker
async def test_send_receive_process_settle_spans_share_one_trace(
    otel: Otel, kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, client_id="otel-p") as producer:
            for i in range(3):
                await producer.send_and_wait(
                    topic, b"v%d" % i, key=b"key-%d" % i, headers={"app": b"x"}, partition=0
                )
            await producer.send_batch(
                [ProducerRecord(topic, b"b%d" % i, partition=1) for i in range(2)]
            )
        got: list[Record] = []
        async with ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], client_id="otel-c"
        ) as consumer:
            async for record in consumer:
                with process_span(record):
                    got.append(record)
                if len(got) == 5:
                    break
            results = await consumer.commit()
            assert all(err is None for err in results.values())
            points = _metric_points(otel)

    spans = otel.spans.get_finished_spans()
    sends = _by_op(spans, "send")
    assert len(sends) == 4
    single = [s for s in sends if s.attributes and "messaging.kafka.offset" in s.attributes]
    batch = [s for s in sends if s.attributes and "messaging.batch.message_count" in s.attributes]
    assert len(single) == 3 and len(batch) == 1
    for s in sends:
        assert s.kind is SpanKind.PRODUCER and s.name == f"send {topic}"
        assert s.attributes is not None
        assert s.attributes["messaging.system"] == "kafka"
        assert s.attributes["messaging.destination.name"] == topic
        assert s.attributes["messaging.client.id"] == "otel-p"
    assert {s.attributes["messaging.kafka.message.key"] for s in single if s.attributes} == {
        "key-0",
        "key-1",
        "key-2",
    }
    assert batch[0].attributes is not None
    assert batch[0].attributes["messaging.batch.message_count"] == 2
    by_offset = {
        (
            s.attributes["messaging.destination.partition.id"],
            s.attributes["messaging.kafka.offset"],
        ): s
        for s in single
        if s.attributes
    }

    # The producer's context travelled in the headers; the application's own header too.
    for record in got:
        assert record.header("traceparent") is not None
    assert all(r.header("app") == b"x" for r in got if r.partition == 0)

    receives = _by_op(spans, "receive")
    processes = _by_op(spans, "process")
    assert len(receives) == 5 and len(processes) == 5
    for record in got:
        producing = (
            by_offset[(str(record.partition), record.offset)] if record.partition == 0 else batch[0]
        )
        ctx = producing.context
        assert ctx is not None
        (recv,) = [
            s
            for s in receives
            if s.attributes
            and s.attributes["messaging.kafka.offset"] == record.offset
            and s.attributes["messaging.destination.partition.id"] == str(record.partition)
        ]
        assert recv.kind is SpanKind.CONSUMER and recv.name == f"receive {topic}"
        assert [(link.context.trace_id, link.context.span_id) for link in recv.links] == [
            (ctx.trace_id, ctx.span_id)
        ]
        assert recv.attributes is not None
        assert recv.attributes["messaging.consumer.group.name"] == share_group
        assert recv.attributes["sharecon.delivery_count"] == 1
        (proc,) = [
            s
            for s in processes
            if s.attributes
            and s.attributes["messaging.kafka.offset"] == record.offset
            and s.attributes["messaging.destination.partition.id"] == str(record.partition)
        ]
        # The process span continues the producer's trace, as its child.
        assert proc.parent is not None and proc.parent.span_id == ctx.span_id
        assert proc.context is not None and proc.context.trace_id == ctx.trace_id
        assert proc.name == f"process {topic}"

    settles = _by_op(spans, "settle")
    assert settles and all(s.status.status_code is not StatusCode.ERROR for s in settles)
    assert (
        sum(int(s.attributes["messaging.batch.message_count"]) for s in settles if s.attributes)
        >= 5
    )
    assert all(s.kind is SpanKind.CLIENT and s.name == f"settle {topic}" for s in settles)

    # Metrics mirror consumer.metrics() and producer.metrics().
    consumed = points["sharecon.consumer.records_consumed"]
    assert [p.attributes["messaging.consumer.group.name"] for p in consumed] == [share_group]
    assert consumed[0].value >= 5
    assert points["messaging.client.consumed.messages"][0].value >= 5
    sent = [
        p
        for p in points["messaging.client.sent.messages"]
        if p.attributes["messaging.client.id"] == "otel-p"
    ]
    assert [p.value for p in sent] == [5]
    assert points["sharecon.consumer.assigned_partitions"][0].value == 3


@pytest.mark.broker
async def test_process_makes_a_span_per_handler_call_and_marks_failures(
    otel: Otel, kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    handled: list[int] = []
    done = anyio.Event()

    async def handler(record: Record) -> None:
        handled.append(record.offset)
        if len(handled) == 3:
            done.set()
        if record.value == b"bad" and record.delivery_count == 1:
            raise ValueError("cannot handle this one")

    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap) as producer:
            for value in (b"ok", b"bad"):
                await producer.send(topic, value, partition=0)
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await done.wait()  # ok, bad (released), bad again
                tg.cancel_scope.cancel()
            await consumer.commit()

    spans = otel.spans.get_finished_spans()
    processes = _by_op(spans, "process")
    assert len(processes) >= 3
    failed = [s for s in processes if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1 and failed[0].attributes is not None
    assert failed[0].attributes["error.type"] == "ValueError"
    assert failed[0].attributes["sharecon.delivery_count"] == 1
    redelivered = [
        s for s in processes if s.attributes and s.attributes["sharecon.delivery_count"] == 2
    ]
    assert len(redelivered) == 1 and redelivered[0].status.status_code is not StatusCode.ERROR
    sends = {s.context.span_id: s for s in _by_op(spans, "send") if s.context}
    assert all(p.parent is not None and p.parent.span_id in sends for p in processes)


@pytest.mark.broker
async def test_poll_makes_one_receive_span_linking_every_record(
    otel: Otel, kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str
) -> None:
    topic = topic_factory(1)
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap) as producer:
            # Headers from an iterator: read once, the trace context added.
            await producer.send_batch(
                [
                    ProducerRecord(topic, b"p%d" % i, headers=iter([("n", b"%d" % i)]))
                    for i in range(3)
                ]
            )
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as c:
            records: list[Record] = []
            while len(records) < 3:
                records += await c.poll(timeout=10)
            await c.commit()
    assert [r.header("n") for r in records] == [b"0", b"1", b"2"]
    spans = otel.spans.get_finished_spans()
    (send,) = _by_op(spans, "send")
    assert send.context is not None
    receives = _by_op(spans, "receive")
    assert sum(len(s.links) for s in receives) == 3
    for s in receives:
        assert s.name == f"receive {topic}" and s.attributes is not None
        assert all(link.context.span_id == send.context.span_id for link in s.links)
        if len(s.links) > 1:
            assert s.attributes["messaging.batch.message_count"] == len(s.links)


@pytest.mark.broker
async def test_failures_set_error_status_on_send_and_settle_spans(
    otel: Otel,
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str],
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    missing = f"missing-{topic}"
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, metadata_timeout=1.0) as producer:
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await producer.send(missing, b"x")
            await producer.send(topic, b"late")
        async with ShareConsumer(
            kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
        ) as consumer:
            record = await consumer.__anext__()
            await anyio.sleep(2.5)  # past the 1 s lock: the broker refuses the accept
            record.accept()
            results = await consumer.commit()
            assert any(err is not None for err in results.values())
    spans = otel.spans.get_finished_spans()
    (failed_send,) = [s for s in _by_op(spans, "send") if s.name == f"send {missing}"]
    assert failed_send.status.status_code is StatusCode.ERROR
    assert failed_send.attributes is not None
    assert failed_send.attributes["error.type"] == "UnknownTopicOrPartitionError"
    failed_settles = [
        s for s in _by_op(spans, "settle") if s.status.status_code is StatusCode.ERROR
    ]
    assert failed_settles, [s.attributes for s in _by_op(spans, "settle")]
    assert all(s.attributes and "error.type" in s.attributes for s in failed_settles)


def test_context_goes_into_every_kind_of_headers() -> None:
    from sharecon.otel import _with_context
    from sharecon.types import Header

    carrier = {"traceparent": "00-abc-def-01"}
    tp = ("traceparent", b"00-abc-def-01")
    assert _with_context(None, carrier) == [tp]
    assert _with_context({"a": b"1", "traceparent": b"old"}, carrier) == [("a", b"1"), tp]
    assert _with_context([Header("a", b"1")], carrier) == [Header("a", b"1"), tp]
    assert _with_context(iter([("a", None)]), carrier) == [("a", None), tp]
    assert _with_context({"a": b"1"}, {}) == {"a": b"1"}
    assert _with_context([1, 2], carrier) == [1, 2]  # left for the producer to refuse


@pytest.mark.broker
async def test_a_send_span_lasts_until_its_record_is_delivered(
    otel: Otel, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """send() returns once the record is queued; its span ends when the delivery is over,
    with the offset, or with an error status, whether or not the future is awaited."""
    topic = topic_factory(1, config={"max.message.bytes": "2000"})
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, linger=600) as producer:
            ok = await producer.send(topic, b"fits")
            await producer.send(topic, b"x" * 5000)  # never awaited
            assert _by_op(otel.spans.get_finished_spans(), "send") == []
            await producer.flush()
            offset = ok.result().offset
    sends = _by_op(otel.spans.get_finished_spans(), "send")
    assert len(sends) == 2
    delivered = [s for s in sends if s.status.status_code is not StatusCode.ERROR]
    failed = [s for s in sends if s.status.status_code is StatusCode.ERROR]
    assert len(delivered) == 1 and len(failed) == 1
    assert delivered[0].attributes is not None and failed[0].attributes is not None
    assert delivered[0].attributes["messaging.kafka.offset"] == offset
    assert failed[0].attributes["error.type"] == "MessageTooLargeError"
    assert "messaging.kafka.offset" not in failed[0].attributes
