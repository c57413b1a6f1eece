"""Deserializers and serializers with context, and async ones (sharecon.serde rule 4):
the context each is given, the async path in every hand-out style, the errors, and plain
callables left on their own path. Against FakeKafka (no JVM); the real broker is in
tests/consumer/test_serde.py."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon._consumer.deserialize import Deserializers
from sharecon._producer.serialize import ContextSerializers
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy, dead_letter_info
from sharecon.producer import Producer
from sharecon.record import Record
from sharecon.serde import (
    AsyncWithContext,
    SerdeContext,
    WithContext,
    async_deserializer,
    async_serializer,
    with_context,
)

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio

EARLIEST = {"share.auto.offset.reset": "earliest"}


class Registry:
    """A schema registry held in a dict, looked up asynchronously (as over HTTP)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.lookups = 0

    async def id_for(self, subject: str) -> int:
        await anyio.lowlevel.checkpoint()
        return self.ids.setdefault(subject, len(self.ids) + 1)

    async def subject(self, schema_id: int) -> str:
        await anyio.lowlevel.checkpoint()
        self.lookups += 1
        for subject, known in self.ids.items():
            if known == schema_id:
                return subject
        raise LookupError(f"unknown schema id {schema_id}")


def confluent(registry: Registry) -> tuple[AsyncWithContext[Any, Any], AsyncWithContext[Any, Any]]:
    """An async serializer and deserializer of the Confluent wire format (magic byte 0,
    4-byte big-endian schema id, then the payload: JSON here)."""

    async def encode(obj: Any, ctx: SerdeContext) -> bytes:
        schema_id = await registry.id_for(f"{ctx.topic}-{ctx.field}")
        return b"\0" + schema_id.to_bytes(4, "big") + json.dumps(obj).encode()

    async def decode(data: bytes, ctx: SerdeContext) -> Any:
        if len(data) < 5 or data[0] != 0:
            raise ValueError("not in the Confluent wire format")
        subject = await registry.subject(int.from_bytes(data[1:5], "big"))
        return {"subject": subject, "offset": ctx.offset, "doc": json.loads(data[5:])}

    return async_serializer(encode), async_deserializer(decode)


def _rec(
    key: bytes | None = b"k", value: bytes | None = b"v", headers: Any = ()
) -> Record[Any, Any]:
    return Record.build(
        "orders", value, key=key, partition=3, offset=41, headers=headers, delivery_count=2
    )


# -- the consumer's step, on one record --------------------------------------------------------


def test_context_deserializers_see_the_record_and_their_field() -> None:
    seen: list[SerdeContext] = []

    def decode(data: bytes, ctx: SerdeContext) -> str:
        seen.append(ctx)
        return data.decode()

    d = Deserializers(with_context(decode), with_context(decode))
    assert not d.plain and not d.awaits
    record = _rec(headers=[("trace", b"t1"), ("empty", None)])
    d.apply_sync(record)
    assert (record.key, record.value) == ("k", "v")
    assert (record.serialized_key, record.serialized_value) == (b"k", b"v")
    headers = (("trace", b"t1"), ("empty", None))
    assert seen == [
        SerdeContext("orders", 3, 41, headers, "key"),
        SerdeContext("orders", 3, 41, headers, "value"),
    ]
    with pytest.raises(AttributeError):
        seen[0].topic = "other"  # type: ignore[misc]  # frozen


def test_a_context_deserializer_mixes_with_a_plain_one_and_none_stays_none() -> None:
    fields: list[str] = []

    def value(data: bytes, ctx: SerdeContext) -> int:
        fields.append(ctx.field)
        return int(data)

    d = Deserializers(bytes.decode, with_context(value))
    record = _rec(b"id", b"42")
    d.apply_sync(record)
    assert (record.key, record.value, fields) == ("id", 42, ["value"])
    tombstone = _rec(None, None)
    d.apply_sync(tombstone)
    assert (tombstone.key, tombstone.value, fields) == (None, None, ["value"])


async def test_async_deserializers_are_awaited_with_their_context() -> None:
    registry = Registry()
    encode, decode = confluent(registry)
    framed = await encode.fn({"id": 7}, SerdeContext("orders", None, None, (), "value"))
    d = Deserializers(bytes.decode, decode)
    assert d.awaits and not d.plain
    record = _rec(b"id", framed)
    await d.apply_async(record)
    assert record.key == "id"
    assert record.value == {"subject": "orders-value", "offset": 41, "doc": {"id": 7}}
    assert record.serialized_value == framed and registry.lookups == 1


async def test_an_async_deserializer_that_raises_names_the_record_and_changes_nothing() -> None:
    _, decode = confluent(Registry())
    d = Deserializers(decode, None)
    record = _rec(b"\x01junk", b"v")
    with pytest.raises(errors.DeserializationError) as caught:
        await d.apply_async(record)
    err = caught.value
    assert (err.topic, err.partition, err.offset, err.field) == ("orders", 3, 41, "key")
    assert (err.delivery_count, err.data) == (2, b"\x01junk")
    assert "orders-3 offset 41 (delivery 2): the key_deserializer failed on 5 bytes" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert (record.key, record.value) == (b"\x01junk", b"v")  # unchanged
    unknown = _rec(b"k", b"\0\0\0\0\x09{}")
    with pytest.raises(errors.DeserializationError, match="unknown schema id 9") as caught:
        await Deserializers(None, decode).apply_async(unknown)
    assert caught.value.field == "value" and unknown.value == b"\0\0\0\0\x09{}"


def test_plain_callables_keep_their_path_and_are_never_given_a_context() -> None:
    calls: list[tuple[Any, ...]] = []

    def plain(*args: Any) -> Any:
        calls.append(args)
        return args[0].upper()

    d = Deserializers(plain, plain)
    assert d.plain and not d.awaits
    assert d.apply_sync == d.apply  # the same step as before contexts existed
    record = _rec()
    d.apply_sync(record)
    assert (record.key, record.value, calls) == (b"K", b"V", [(b"k",), (b"v",)])


def test_the_wrappers_refuse_what_is_not_callable_and_the_clients_take_them() -> None:
    for make in (with_context, async_deserializer, async_serializer):
        with pytest.raises(errors.ConfigError, match="takes a callable, not int"):
            make(3)  # type: ignore[arg-type]
    wrapped = with_context(lambda data, ctx: data)
    assert isinstance(wrapped, WithContext) and not callable(wrapped)
    ShareConsumer("localhost:1", group_id="g", topics=["t"], value_deserializer=wrapped)
    Producer("localhost:1", value_serializer=with_context(lambda obj, ctx: obj))
    with pytest.raises(errors.ConfigError, match="value_deserializer must be a callable"):
        ShareConsumer("localhost:1", group_id="g", topics=["t"], value_deserializer=3)  # type: ignore[arg-type]


# -- the producer's step, on one record --------------------------------------------------------


async def test_context_serializers_see_topic_partition_headers_and_field() -> None:
    seen: list[SerdeContext] = []

    def encode(obj: str, ctx: SerdeContext) -> bytes:
        seen.append(ctx)
        return obj.encode()

    s = ContextSerializers(with_context(encode), str.encode)
    assert not s.awaits
    assert s.apply("orders", "k", "v", (("h", b"1"),), 2) == (b"k", b"v")
    assert seen == [SerdeContext("orders", 2, None, (("h", b"1"),), "key")]
    encode_async, _ = confluent(Registry())
    s = ContextSerializers(None, encode_async)
    assert s.awaits
    assert await s.apply_async("orders", b"k", {"a": 1}, (), None) == (
        b"k",
        b'\0\0\0\0\x01{"a": 1}',
    )
    assert await s.apply_async("orders", None, None, (), None) == (None, None)


async def test_a_context_serializer_failure_is_a_serialization_error() -> None:
    async def wrong(obj: Any, ctx: SerdeContext) -> Any:
        return "text"

    async def raises(obj: Any, ctx: SerdeContext) -> bytes:
        raise RuntimeError("registry down")

    with pytest.raises(errors.SerializationError, match="returned a str") as caught:
        await ContextSerializers(None, async_serializer(wrong)).apply_async("t", None, 1, (), None)
    assert caught.value.field == "value"
    with pytest.raises(errors.SerializationError, match="registry down") as caught:
        await ContextSerializers(async_serializer(raises), None).apply_async("t", 1, 1, (), None)
    assert caught.value.field == "key" and isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(errors.ConfigError, match="topic must be"):
        ContextSerializers(with_context(lambda o, c: o), None).apply("", b"k", None, (), None)


# -- end to end, against FakeKafka -------------------------------------------------------------


async def _produce_framed(fake: FakeKafka, registry: Registry, topic: str, docs: list[Any]) -> None:
    encode, _ = confluent(registry)
    async with Producer(fake.bootstrap, value_serializer=encode) as producer:
        for doc in docs:
            await producer.send(topic, doc, headers={"n": str(doc).encode()})
        await producer.flush()


def _consumer(fake: FakeKafka, topic: str, value: Any, **kwargs: Any) -> ShareConsumer[Any, Any]:
    group = f"g-{uuid.uuid4().hex[:8]}"
    fake.configure_group(group, EARLIEST)
    return ShareConsumer(
        fake.bootstrap, group_id=group, topics=[topic], value_deserializer=value, **kwargs
    )


async def test_async_serde_round_trip_in_every_hand_out_style(fake_kafka: FakeKafka) -> None:
    registry = Registry()
    _, decode = confluent(registry)
    fake_kafka.create_topic("orders")
    await _produce_framed(fake_kafka, registry, "orders", [{"id": i} for i in range(4)])
    want = [{"subject": "orders-value", "offset": i, "doc": {"id": i}} for i in range(4)]
    with anyio.fail_after(30):
        async with _consumer(fake_kafka, "orders", decode) as consumer:
            got = []
            async for record in consumer:
                got.append(record.value)
                if len(got) == 4:
                    break
        assert got == want
        async with _consumer(fake_kafka, "orders", decode) as consumer:
            polled: list[Any] = []
            while len(polled) < 4:
                polled += [r.value for r in await consumer.poll(5)]
        assert polled == want
        async with _consumer(fake_kafka, "orders", decode) as consumer:
            batched: list[Any] = []
            async for batch in consumer.batches():
                batched += [r.value for r in batch]
                if len(batched) == 4:
                    break
        assert batched == want
        handled: list[Any] = []
        all_handled = anyio.Event()
        async with _consumer(fake_kafka, "orders", decode) as consumer:

            async def handler(record: Record[Any, Any]) -> None:
                handled.append(record.value)
                if len(handled) == 4:
                    all_handled.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await all_handled.wait()
                tg.cancel_scope.cancel()
        assert sorted(handled, key=lambda v: v["offset"]) == want


async def test_process_routes_a_record_the_async_deserializer_fails_for(
    fake_kafka: FakeKafka,
) -> None:
    registry = Registry()
    _, decode = confluent(registry)
    fake_kafka.create_topic("orders")
    fake_kafka.create_topic("orders.dlq")
    await _produce_framed(fake_kafka, registry, "orders", [{"id": 0}])
    async with Producer(fake_kafka.bootstrap) as producer:
        await producer.send("orders", b"\0\0\0\0\x63{}")  # schema id 99: not registered
    await _produce_framed(fake_kafka, registry, "orders", [{"id": 2}])
    handled: list[Any] = []
    both_handled = anyio.Event()
    policy = DeadLetterPolicy(topic="orders.dlq", max_deliveries=1)
    async with _consumer(fake_kafka, "orders", decode, dead_letter=policy) as consumer:

        async def handler(record: Record[Any, Any]) -> None:
            # one worker, in offset order: offset 1 was routed before offset 2 arrives
            handled.append(record.value["doc"])
            if len(handled) == 2:
                both_handled.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await both_handled.wait()
                tg.cancel_scope.cancel()
        [failure] = consumer.recent_errors
    assert handled == [{"id": 0}, {"id": 2}]
    assert isinstance(failure, errors.DeserializationError)
    assert (failure.offset, failure.field, failure.dead_lettered) == (1, "value", True)
    assert "unknown schema id 99" in str(failure)
    async with _consumer(fake_kafka, "orders.dlq", None) as reader:
        with anyio.fail_after(30):
            copy = await reader.__anext__()
    assert copy.value == b"\0\0\0\0\x63{}"
    info = dead_letter_info(copy.headers)
    assert info is not None and info.reason.startswith("DeserializationError: ")


async def test_an_async_deserializer_failure_in_async_for_and_poll(fake_kafka: FakeKafka) -> None:
    registry = Registry()
    _, decode = confluent(registry)
    fake_kafka.create_topic("orders")
    await _produce_framed(fake_kafka, registry, "orders", [{"id": 0}])
    async with Producer(fake_kafka.bootstrap) as producer:
        await producer.send("orders", b"plain json, no framing")
    await _produce_framed(fake_kafka, registry, "orders", [{"id": 2}])
    with anyio.fail_after(30):
        async with _consumer(fake_kafka, "orders", decode) as consumer:
            first = await consumer.__anext__()
            with pytest.raises(errors.DeserializationError) as caught:
                await consumer.__anext__()
            assert caught.value.offset == 1 and not caught.value.dead_lettered
            # released: it comes back (delivery 2) and fails again; the good one follows
            rest: list[Any] = []
            while len(rest) < 1:
                try:
                    rest.append((await consumer.__anext__()).value["doc"])
                except errors.DeserializationError as exc:
                    assert exc.offset == 1
        assert first.value["doc"] == {"id": 0} and rest == [{"id": 2}]
        async with _consumer(fake_kafka, "orders", decode) as consumer:
            batch = await consumer.poll(5)
            while not batch:
                batch = await consumer.poll(5)
            assert [r.value["doc"] for r in batch] == [{"id": 0}]  # ends before offset 1
            with pytest.raises(errors.DeserializationError):
                await consumer.poll(5)


async def test_the_producer_awaits_an_async_serializer_in_send_not_send_nowait(
    fake_kafka: FakeKafka,
) -> None:
    registry = Registry()
    encode, _ = confluent(registry)
    fake_kafka.create_topic("orders")
    async with Producer(fake_kafka.bootstrap, key_serializer=encode) as producer:
        meta = await producer.send_and_wait("orders", b"v", key={"k": 1}, partition=0)
        assert meta.offset == 0
        with pytest.raises(errors.WouldBlockError, match="send_nowait cannot await") as caught:
            producer.send_nowait("orders", b"v", key={"k": 2})
        assert caught.value.reason == "serializer"
        with pytest.raises(errors.ConfigError, match="topic must be"):
            await producer.send("", b"v", key={"k": 3})
    assert registry.ids == {"orders-key": 1}
    async with _consumer(fake_kafka, "orders", None) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
    assert record.key == b'\0\0\0\0\x01{"k": 1}' and record.value == b"v"


def test_the_blocking_clients_await_async_serde_on_their_engine_thread() -> None:
    from sharecon.sync import Producer as BlockingProducer
    from sharecon.sync import ShareConsumer as BlockingConsumer
    from sharecon.testing.fake import FakeKafka

    registry = Registry()
    encode, decode = confluent(registry)
    with FakeKafka() as kafka:
        kafka.create_topic("orders")
        kafka.configure_group("blocking", EARLIEST)
        with BlockingProducer(kafka.bootstrap, value_serializer=encode) as producer:
            meta = producer.send("orders", {"id": 1}).result(timeout=30)
        with BlockingConsumer(
            kafka.bootstrap, group_id="blocking", topics=["orders"], value_deserializer=decode
        ) as consumer:
            [record] = consumer.poll(timeout=30)
    assert record.value == {"subject": "orders-value", "offset": meta.offset, "doc": {"id": 1}}


# -- cancelled while an async deserializer is awaited: nothing taken is lost -----------------


class Gate:
    """An async deserializer that stops at offset 1 until :attr:`open` is set."""

    def __init__(self) -> None:
        self.at_one = anyio.Event()
        self.open = anyio.Event()

    async def __call__(self, data: bytes, ctx: SerdeContext) -> str:
        if ctx.offset == 1:
            self.at_one.set()
            await self.open.wait()
        return data.decode()


async def _gated(fake: FakeKafka) -> tuple[Gate, ShareConsumer[Any, Any]]:
    fake.create_topic("t")
    async with Producer(fake.bootstrap) as producer:
        for i in range(3):
            await producer.send_and_wait("t", b"v%d" % i, partition=0)
    gate = Gate()
    return gate, _consumer(fake, "t", async_deserializer(gate), ack_mode="explicit")


async def _buffered(consumer: ShareConsumer[Any, Any], n: int) -> None:
    while consumer.metrics().buffered_records < n:  # noqa: ASYNC110 - polled state
        await anyio.sleep(0.02)


def _seen(records: list[Record[Any, Any]]) -> list[tuple[Any, int]]:
    return [(r.value, r.delivery_count) for r in records]


async def test_a_poll_timeout_mid_deserialize_keeps_what_it_took(fake_kafka: FakeKafka) -> None:
    gate, consumer = await _gated(fake_kafka)
    with anyio.fail_after(30):
        async with consumer:
            await _buffered(consumer, 3)
            # Times out while offset 1 is being deserialized: offset 0 was done already.
            assert await consumer.poll(0.3, max_records=3) == []
            assert gate.at_one.is_set()
            gate.open.set()
            got = await consumer.poll(5, max_records=3)
            # Served next, once each, no delivery attempt spent.
            assert _seen(got) == [("v0", 1), ("v1", 1), ("v2", 1)]
            for r in got:
                r.accept()
            await consumer.commit()


async def test_async_for_cancelled_mid_deserialize_serves_the_record_next(
    fake_kafka: FakeKafka,
) -> None:
    gate, consumer = await _gated(fake_kafka)
    got: list[Record[Any, Any]] = []
    with anyio.fail_after(30):
        async with consumer:
            await _buffered(consumer, 3)
            with anyio.move_on_after(0.3):
                async for record in consumer:
                    got.append(record)
                    record.accept()
            assert gate.at_one.is_set()
            gate.open.set()
            async for record in consumer:
                got.append(record)
                record.accept()
                if len(got) == 3:
                    break
            await consumer.commit()
    assert _seen(got) == [("v0", 1), ("v1", 1), ("v2", 1)]


async def test_process_cancelled_mid_deserialize_leaves_the_record_for_the_next_poll(
    fake_kafka: FakeKafka,
) -> None:
    gate, consumer = await _gated(fake_kafka)
    handled: list[Any] = []

    async def handler(record: Record[Any, Any]) -> None:
        handled.append(record.value)

    with anyio.fail_after(30):
        async with consumer:
            await _buffered(consumer, 3)
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await gate.at_one.wait()  # the worker took offset 1 and awaits its value
                tg.cancel_scope.cancel()
            gate.open.set()
            got = await consumer.poll(5, max_records=3)
            assert _seen(got) == [("v1", 1), ("v2", 1)]
            for r in got:
                r.accept()
            await consumer.commit()
    assert handled == ["v0"]
