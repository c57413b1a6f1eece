"""OpenTelemetry tracing and metrics for sharecon (the ``sharecon[otel]`` extra).

::

    from sharecon.otel import ShareconInstrumentor

    ShareconInstrumentor().instrument()          # global tracer and meter providers
    ...
    async for record in consumer:
        with process_span(record):               # a "process <topic>" span for your handler
            await handle(record)

Spans follow the OpenTelemetry semantic conventions for messaging (Kafka):

* ``send <topic>`` (PRODUCER) for :meth:`Producer.send_and_wait`,
  :meth:`Producer.send_batch` and :meth:`Producer.send`, from the call until the broker
  answered (for ``send()``, until its :class:`~sharecon.producer.RecordFuture` is done,
  whether awaited or not), with the offset, or an error status; the span's context is injected into the records' headers with the global
  propagator (W3C ``traceparent`` by default).
* ``receive <topic>`` (CONSUMER) for each record ``async for`` hands out and each
  non-empty :meth:`ShareConsumer.poll`, linked to the context the producer injected.
* ``process <topic>`` (CONSUMER) around each :meth:`ShareConsumer.process` handler call
  (and wherever you use :func:`process_span`), a child of the producer's context.
* ``settle <topic>`` (CLIENT) for each acknowledgement outcome the broker returned
  (``messaging.batch.message_count`` records of one partition; an error status if failed).

Attributes: ``messaging.system`` (``kafka``), ``messaging.operation.type`` and ``.name``,
``messaging.destination.name``, ``messaging.destination.partition.id``,
``messaging.kafka.offset``, ``messaging.consumer.group.name``, ``messaging.client.id``,
``messaging.kafka.message.key`` (keys that are UTF-8 text; ``capture_keys=False`` leaves
them out), ``messaging.kafka.message.tombstone``, and ``sharecon.delivery_count`` (how many
times the share group delivered the record; the conventions have no Kafka name for it).

Metrics: every field of ``consumer.metrics()`` and ``producer.metrics()`` as an
asynchronous instrument named ``sharecon.consumer.<field>`` / ``sharecon.producer.<field>``
(counters without their ``_total`` suffix); every field of ``consumer.partition_metrics()``
as ``sharecon.consumer.partition.<field>`` with ``messaging.destination.name`` and
``messaging.destination.partition.id`` (``records_lag``: the broker's share-partition lag);
plus the conventions' ``messaging.client.consumed.messages`` and
``messaging.client.sent.messages`` counters and two histograms, in seconds:
``messaging.process.duration`` (each handler call that :meth:`ShareConsumer.process` or
:func:`process_span` wraps) and ``messaging.client.operation.duration`` (each ``send``:
``send_and_wait``, ``send`` until its future is done, ``send_batch``; and each ``receive``:
a record from ``async for`` or a non-empty ``poll``), with ``error.type`` on failures.

The instrumentor wraps methods of :class:`ShareConsumer` and :class:`Producer` (every
instance, like OpenTelemetry's own Kafka instrumentations); :meth:`uninstrument` restores
them. Only ``opentelemetry-api`` is needed; importing :mod:`sharecon` never imports this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation, get_meter
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from sharecon import errors
from sharecon._version import __version__
from sharecon.consumer import ShareConsumer
from sharecon.metrics import CONSUMER_METRICS, PARTITION_METRICS, PRODUCER_METRICS, MetricInfo
from sharecon.producer import Producer, ProducerRecord
from sharecon.types import Header

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from opentelemetry.context import Context
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from sharecon._share.ledger import AckResult
    from sharecon.producer import RecordFuture
    from sharecon.record import Record

__all__ = ["ShareconInstrumentor", "process_span"]

_SCOPE = "sharecon"
#: The semantic conventions' advised buckets for messaging durations (seconds).
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
#: Links per receive span of a polled batch: enough to follow, bounded for huge batches.
_MAX_LINKS = 128


class _HeaderGetter(Getter[Sequence[tuple[str, "bytes | None"]]]):
    """Reads a propagator's fields from a record's ``(key, value)`` headers."""

    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        found = [v.decode("utf-8", "replace") for k, v in carrier if k == key and v is not None]
        return found or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier]


_GETTER = _HeaderGetter()


def _creation_context(record: Record) -> Context | None:
    """The context the producer injected into ``record``'s headers, if any."""
    if not record.headers:
        return None
    ctx = propagate.extract(record.headers, getter=_GETTER)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _key_text(key: object) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _with_context(headers: object, carrier: Mapping[str, str]) -> object:
    """``headers`` (a mapping or pairs) with the propagator's fields put in, replacing any
    the caller set (a record carries one trace context)."""
    if not carrier:
        return headers
    items: list[Any]
    if not headers:
        items = []
    elif isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, Iterable) and not isinstance(headers, (str, bytes)):
        items = list(headers)  # pairs or Header objects (an iterator is read once, here)
    else:
        return headers  # not headers: the producer names the mistake
    try:
        kept = [h for h in items if (h.key if isinstance(h, Header) else h[0]) not in carrier]
    except (TypeError, IndexError, KeyError):
        return items  # malformed: the producer names the mistake, as without tracing
    kept.extend((k, v.encode("utf-8")) for k, v in carrier.items())
    return kept


def _owner_consumer(record: Record) -> ShareConsumer | None:
    consumer = getattr(record._owner, "consumer", None)
    return consumer if isinstance(consumer, ShareConsumer) else None


class ShareconInstrumentor:
    """Traces and measures every :class:`ShareConsumer` and :class:`Producer` once
    :meth:`instrument` has run (see the module docs for the spans and instruments)."""

    _active: ShareconInstrumentor | None = None

    def __init__(self) -> None:
        self._tracer: Tracer | None = None
        self._capture_keys = True
        self._settle_spans = True
        self._originals: dict[tuple[type[Any], str], Any] = {}
        self._consumers: weakref.WeakSet[ShareConsumer] = weakref.WeakSet()
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        self._process_duration: Histogram | None = None
        self._operation_duration: Histogram | None = None

    @property
    def is_instrumented(self) -> bool:
        """Whether this instrumentor is the one in effect."""
        return ShareconInstrumentor._active is self

    def instrument(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_keys: bool = True,
        settle_spans: bool = True,
    ) -> None:
        """Start tracing and measuring sharecon's clients.

        :param tracer_provider: where spans go (default: the global one).
        :param meter_provider: where metrics go (default: the global one).
        :param capture_keys: put UTF-8 record keys in ``messaging.kafka.message.key``.
        :param settle_spans: make a ``settle`` span per acknowledgement outcome.
        :raises RuntimeError: another instrumentor is in effect (uninstrument it first).
        """
        if ShareconInstrumentor._active is self:
            return
        if ShareconInstrumentor._active is not None:
            raise RuntimeError("sharecon is already instrumented; call uninstrument() first")
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider)
        self._capture_keys = capture_keys
        self._settle_spans = settle_spans
        meter = get_meter(_SCOPE, __version__, meter_provider)
        self._register_instruments(meter)
        self._patch()
        ShareconInstrumentor._active = self

    def uninstrument(self) -> None:
        """Stop: the clients' methods are restored, and the instruments report nothing more."""
        if ShareconInstrumentor._active is not self:
            return
        for (cls, name), original in self._originals.items():
            setattr(cls, name, original)
        self._originals.clear()
        self._consumers = weakref.WeakSet()
        self._producers = weakref.WeakSet()
        ShareconInstrumentor._active = None

    # -- patching -------------------------------------------------------------------------

    def _patch(self) -> None:
        wrappers: dict[tuple[type[Any], str], Callable[[Any], Any]] = {
            (ShareConsumer, "start"): self._wrap_start,
            (ShareConsumer, "__anext__"): self._wrap_anext,
            (ShareConsumer, "poll"): self._wrap_poll,
            (ShareConsumer, "process"): self._wrap_process,
            (Producer, "send"): partial(self._wrap_send, waits=False),
            (Producer, "send_and_wait"): partial(self._wrap_send, waits=True),
            (Producer, "send_batch"): self._wrap_send_batch,
        }
        for (cls, name), wrap in wrappers.items():
            original = cls.__dict__[name]
            self._originals[(cls, name)] = original
            setattr(cls, name, wrap(original))

    @property
    def _t(self) -> Tracer:
        assert self._tracer is not None
        return self._tracer

    def _wrap_start(self, original: Callable[[ShareConsumer], Awaitable[None]]) -> Any:
        async def start(consumer: ShareConsumer) -> None:
            await original(consumer)
            self._consumers.add(consumer)
            core = consumer._core
            if core is not None and self._settle_spans:
                core.outcomes.listeners.append(partial(self._settled, consumer))

        return start

    def _wrap_anext(self, original: Callable[[ShareConsumer], Awaitable[Record]]) -> Any:
        async def __anext__(consumer: ShareConsumer) -> Record:
            started = time.perf_counter()
            record = await original(consumer)
            self._received(consumer, [record], None)
            self._operation(started, self._receive_attributes(consumer, [record]))
            return record

        return __anext__

    def _wrap_poll(self, original: Callable[..., Awaitable[list[Record]]]) -> Any:
        async def poll(consumer: ShareConsumer, *args: Any, **kwargs: Any) -> list[Record]:
            started = time.time_ns()  # OpenTelemetry's timestamps
            clock = time.perf_counter()
            records = await original(consumer, *args, **kwargs)
            if records:
                self._received(consumer, records, started)
                self._operation(clock, self._receive_attributes(consumer, records))
            return records

        return poll

    def _wrap_process(self, original: Callable[..., Awaitable[None]]) -> Any:
        async def process(
            consumer: ShareConsumer,
            handler: Callable[[Record], Awaitable[object]],
            *args: Any,
            **kwargs: Any,
        ) -> None:
            async def traced(record: Record) -> object:
                with self._process_span(record, consumer):
                    return await handler(record)

            await original(consumer, traced, *args, **kwargs)

        return process

    def _wrap_send(self, original: Callable[..., Awaitable[Any]], *, waits: bool) -> Any:
        # send_and_wait() spans the delivery within the call; send() returns once the
        # record is queued, so its span ends when the future is done (a done callback),
        # awaited or not.
        async def send(producer: Producer, topic: str, *args: Any, **kwargs: Any) -> Any:
            self._producers.add(producer)
            attrs = self._send_attributes(producer, topic)
            key = _key_text(kwargs.get("key")) if self._capture_keys else None
            if key is not None:
                attrs["messaging.kafka.message.key"] = key
            value = args[0] if args else kwargs.get("value")
            if value is None:
                attrs["messaging.kafka.message.tombstone"] = True
            span = self._t.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attrs)
            started = time.perf_counter()
            measured = self._send_metric_attributes(producer, topic)
            with trace.use_span(span, end_on_exit=False):
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                kwargs["headers"] = _with_context(kwargs.get("headers"), carrier)
                try:
                    out = await original(producer, topic, *args, **kwargs)
                except BaseException as exc:
                    _fail_span(span, exc)
                    span.end()
                    self._operation(started, measured, exc)
                    raise
            span.set_attribute("messaging.destination.partition.id", str(out.partition))
            if waits:
                span.set_attribute("messaging.kafka.offset", out.offset)
                span.end()
                self._operation(started, measured)
            else:
                out.add_done_callback(partial(self._end_send, span, started, measured))
            return out

        return send

    def _wrap_send_batch(self, original: Callable[..., Awaitable[list[Any]]]) -> Any:
        async def send_batch(
            producer: Producer, records: Iterable[ProducerRecord], *args: Any, **kwargs: Any
        ) -> list[Any]:
            self._producers.add(producer)
            records = list(records)
            topics = sorted({r.topic for r in records if isinstance(r, ProducerRecord)})
            name = f"send {topics[0]}" if len(topics) == 1 else "send"
            attrs = self._send_attributes(producer, topics[0] if len(topics) == 1 else None)
            attrs["messaging.batch.message_count"] = len(records)
            started = time.perf_counter()
            measured = self._send_metric_attributes(
                producer, topics[0] if len(topics) == 1 else None
            )
            with self._t.start_as_current_span(
                name, kind=SpanKind.PRODUCER, attributes=attrs
            ) as span:
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                if carrier:
                    records = [
                        dataclasses.replace(r, headers=_with_context(r.headers, carrier))  # type: ignore[arg-type]
                        if type(r) is ProducerRecord
                        else r
                        for r in records
                    ]
                try:
                    out = await original(producer, records, *args, **kwargs)
                except BaseException as exc:
                    span.set_attribute("error.type", type(exc).__qualname__)
                    self._operation(started, measured, exc)
                    raise
                failed = [r for r in out if isinstance(r, errors.KafkaError)]
                if failed:
                    span.set_attribute("error.type", type(failed[0]).__qualname__)
                    span.set_status(
                        Status(StatusCode.ERROR, f"{len(failed)} of {len(out)} records failed")
                    )
                self._operation(started, measured, failed[0] if failed else None)
                return out

        return send_batch

    # -- spans ----------------------------------------------------------------------------

    def _send_attributes(self, producer: Producer, topic: str | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.client.id": producer._config.client_id,
        }
        if topic is not None:
            attrs["messaging.destination.name"] = topic
        return attrs

    def _record_attributes(
        self, record: Record, consumer: ShareConsumer | None, operation: str
    ) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": operation,
            "messaging.operation.name": operation,
            "messaging.destination.name": record.topic,
            "messaging.destination.partition.id": str(record.partition),
            "messaging.kafka.offset": record.offset,
            "sharecon.delivery_count": record.delivery_count,
        }
        if consumer is not None:
            attrs["messaging.consumer.group.name"] = consumer.group_id
            attrs["messaging.client.id"] = consumer._connection.client_id
        if self._capture_keys and record.key is not None:
            key = _key_text(record.key)
            if key is not None:
                attrs["messaging.kafka.message.key"] = key
        if record.value is None:
            attrs["messaging.kafka.message.tombstone"] = True
        return attrs

    def _received(
        self, consumer: ShareConsumer, records: list[Record], started: int | None
    ) -> None:
        first = records[0]
        links = []
        for record in records[:_MAX_LINKS]:
            ctx = _creation_context(record)
            if ctx is not None:
                links.append(Link(trace.get_current_span(ctx).get_span_context()))
        if len(records) == 1:
            attrs = self._record_attributes(first, consumer, "receive")
        else:
            attrs = {
                "messaging.system": "kafka",
                "messaging.operation.type": "receive",
                "messaging.operation.name": "receive",
                "messaging.consumer.group.name": consumer.group_id,
                "messaging.client.id": consumer._connection.client_id,
                "messaging.batch.message_count": len(records),
            }
            topics = {r.topic for r in records}
            if len(topics) == 1:
                attrs["messaging.destination.name"] = first.topic
        name = f"receive {first.topic}" if "messaging.destination.name" in attrs else "receive"
        span = self._t.start_span(
            name, kind=SpanKind.CONSUMER, attributes=attrs, links=links, start_time=started
        )
        span.end()

    @contextlib.contextmanager
    def _process_span(self, record: Record, consumer: ShareConsumer | None) -> Iterator[Span]:
        attrs = self._record_attributes(record, consumer, "process")
        parent = _creation_context(record)
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            with self._t.start_as_current_span(
                f"process {record.topic}",
                context=parent,
                kind=SpanKind.CONSUMER,
                attributes=attrs,
            ) as span:
                try:
                    yield span
                except BaseException as exc:
                    span.set_attribute("error.type", type(exc).__qualname__)
                    failure = exc
                    raise
        finally:
            histogram = self._process_duration
            if histogram is not None and self.is_instrumented:
                measured: dict[str, AttributeValue] = {
                    "messaging.system": "kafka",
                    "messaging.operation.name": "process",
                    "messaging.destination.name": record.topic,
                    "messaging.destination.partition.id": str(record.partition),
                }
                if consumer is not None:
                    measured["messaging.consumer.group.name"] = consumer.group_id
                if failure is not None:
                    measured["error.type"] = type(failure).__qualname__
                histogram.record(time.perf_counter() - started, measured)

    def _settled(self, consumer: ShareConsumer, results: list[AckResult]) -> None:
        if not self.is_instrumented:
            return
        for r in results:
            tp = r.partition
            topic = tp.topic or str(tp.topic_id)
            attrs: dict[str, AttributeValue] = {
                "messaging.system": "kafka",
                "messaging.operation.type": "settle",
                "messaging.operation.name": "settle",
                "messaging.destination.name": topic,
                "messaging.destination.partition.id": str(tp.partition),
                "messaging.consumer.group.name": consumer.group_id,
                "messaging.client.id": consumer._connection.client_id,
                "messaging.batch.message_count": r.count,
            }
            span = self._t.start_span(f"settle {topic}", kind=SpanKind.CLIENT, attributes=attrs)
            if not r.ok:
                err = r.error()
                span.set_attribute(
                    "error.type", r.reason.value if r.reason else type(err).__qualname__
                )
                span.set_status(Status(StatusCode.ERROR, str(err)))
            span.end()

    # -- metrics --------------------------------------------------------------------------

    def _register_instruments(self, meter: Meter) -> None:
        for info in CONSUMER_METRICS:
            self._instrument(meter, "sharecon.consumer", info, self._consumer_values)
        for info in PARTITION_METRICS:
            self._instrument(meter, "sharecon.consumer.partition", info, self._partition_values)
        self._process_duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of processing operation.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._operation_duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of messaging operation initiated by a producer or consumer client.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        for info in PRODUCER_METRICS:
            self._instrument(meter, "sharecon.producer", info, self._producer_values)
        meter.create_observable_counter(
            "messaging.client.consumed.messages",
            [partial(self._observe, self._consumer_values, "records_consumed_total")],
            unit="{message}",
            description="Messages a consumer received from the broker.",
        )
        meter.create_observable_counter(
            "messaging.client.sent.messages",
            [partial(self._observe, self._producer_values, "record_send_total")],
            unit="{message}",
            description="Messages a producer sent and the broker acknowledged.",
        )

    def _instrument(
        self,
        meter: Meter,
        prefix: str,
        info: MetricInfo,
        values: Callable[[], list[tuple[Any, dict[str, AttributeValue]]]],
    ) -> None:
        callbacks = [partial(self._observe, values, info.field)]
        if info.kind == "counter":
            name = f"{prefix}.{info.field.removesuffix('_total')}"
            meter.create_observable_counter(
                name, callbacks, unit=info.unit, description=info.description
            )
        else:
            meter.create_observable_gauge(
                f"{prefix}.{info.field}", callbacks, unit=info.unit, description=info.description
            )

    def _observe(
        self,
        values: Callable[[], list[tuple[Any, dict[str, AttributeValue]]]],
        field: str,
        options: CallbackOptions,
    ) -> Iterable[Observation]:
        out = []
        for snapshot, attrs in values():
            value = getattr(snapshot, field)
            if value == value:  # NaN: nothing in the window, nothing to report
                out.append(Observation(value, attrs))
        return out

    def _consumer_values(self) -> list[tuple[Any, dict[str, AttributeValue]]]:
        if not self.is_instrumented:
            return []
        out: list[tuple[Any, dict[str, AttributeValue]]] = []
        for consumer in list(self._consumers):
            m = consumer.metrics()
            out.append(
                (
                    m,
                    {
                        "messaging.system": "kafka",
                        "messaging.client.id": m.client_id,
                        "messaging.consumer.group.name": m.group_id,
                    },
                )
            )
        return out

    def _partition_values(self) -> list[tuple[Any, dict[str, AttributeValue]]]:
        if not self.is_instrumented:
            return []
        out: list[tuple[Any, dict[str, AttributeValue]]] = []
        for consumer in list(self._consumers):
            client_id = consumer._connection.client_id
            for p in consumer.partition_metrics():
                out.append(
                    (
                        p,
                        {
                            "messaging.system": "kafka",
                            "messaging.client.id": client_id,
                            "messaging.consumer.group.name": consumer.group_id,
                            "messaging.destination.name": p.topic,
                            "messaging.destination.partition.id": str(p.partition),
                        },
                    )
                )
        return out

    # -- duration histograms --------------------------------------------------------------

    def _operation(
        self,
        started: float,
        attrs: dict[str, AttributeValue],
        failure: BaseException | None = None,
    ) -> None:
        """Record one operation's duration in ``messaging.client.operation.duration``."""
        histogram = self._operation_duration
        if histogram is None or not self.is_instrumented:
            return
        if failure is not None:
            attrs = {**attrs, "error.type": type(failure).__qualname__}
        histogram.record(time.perf_counter() - started, attrs)

    def _end_send(
        self,
        span: Span,
        started: float,
        attrs: dict[str, AttributeValue],
        future: RecordFuture,
    ) -> None:
        """A ``send()``'s record is delivered or given up on: end its span, measure it."""
        _end_send_span(span, future)
        failure: BaseException | None = None
        try:
            future.result()
        except errors.KafkaError as exc:
            failure = exc
        self._operation(started, attrs, failure)

    @staticmethod
    def _send_metric_attributes(producer: Producer, topic: str | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
        }
        if topic is not None:
            attrs["messaging.destination.name"] = topic
        return attrs

    @staticmethod
    def _receive_attributes(
        consumer: ShareConsumer, records: list[Record]
    ) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "receive",
            "messaging.operation.name": "receive",
            "messaging.consumer.group.name": consumer.group_id,
        }
        topic = records[0].topic
        if all(r.topic == topic for r in records):
            attrs["messaging.destination.name"] = topic
        return attrs

    def _producer_values(self) -> list[tuple[Any, dict[str, AttributeValue]]]:
        if not self.is_instrumented:
            return []
        out: list[tuple[Any, dict[str, AttributeValue]]] = []
        for producer in list(self._producers):
            m = producer.metrics()
            out.append((m, {"messaging.system": "kafka", "messaging.client.id": m.client_id}))
        return out


@contextlib.contextmanager
def process_span(record: Record) -> Iterator[Span]:
    """A ``process <topic>`` span around your handling of ``record``, a child of the
    context its producer injected (use it with ``async for``; :meth:`ShareConsumer.process`
    makes these spans itself once instrumented). Without an instrumentor in effect it
    uses the global tracer provider."""
    instrumentor = ShareconInstrumentor._active
    if instrumentor is None:
        instrumentor = ShareconInstrumentor()
        instrumentor._tracer = trace.get_tracer(_SCOPE, __version__)
    with instrumentor._process_span(record, _owner_consumer(record)) as span:
        yield span


def _fail_span(span: Span, exc: BaseException) -> None:
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(exc)))


def _end_send_span(span: Span, future: RecordFuture) -> None:
    """End a ``send()`` span when its record's delivery is over."""
    try:
        metadata = future.result()
    except errors.KafkaError as exc:
        _fail_span(span, exc)
    else:
        span.set_attribute("messaging.kafka.offset", metadata.offset)
    span.end()
