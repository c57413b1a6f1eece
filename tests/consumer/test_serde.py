"""Serializers and deserializers against a real broker: a JSON round trip, a poison value
that raises DeserializationError at its own record and comes back (or goes to the DLQ
under a policy), and consuming that goes on afterwards, in every hand-out style."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy, dead_letter_info
from sharecon.producer import Producer, ProducerRecord
from sharecon.serde import (
    json_deserializer,
    json_serializer,
    string_deserializer,
    string_serializer,
)
from tests.consumer.conftest import produce
from tests.consumer.test_dlq import read_all
from tests.test_serde_context_unit import Registry, confluent

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

POISON = b'{"id": 2, "broken'


def json_consumer(bootstrap: str, group: str, topic: str, **kwargs: Any) -> ShareConsumer[str, Any]:
    return ShareConsumer(
        bootstrap,
        group_id=group,
        topics=[topic],
        key_deserializer=string_deserializer(),
        value_deserializer=json_deserializer(),
        **kwargs,
    )


async def test_json_round_trip_from_producer_to_consumer(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    docs = [{"id": 1, "total": 12.5, "note": "café"}, {"id": 2, "items": [1, 2]}]
    async with Producer(
        kafka_bootstrap, key_serializer=string_serializer(), value_serializer=json_serializer()
    ) as producer:
        await producer.send(topic, docs[0], key="customer-1")
        await producer.send_batch([ProducerRecord(topic, docs[1], key="customer-2")])
        await producer.send(topic, None, key="customer-3")  # a tombstone stays one
    seen: list[Record[str, Any]] = []
    async with json_consumer(kafka_bootstrap, share_group, topic) as consumer:
        with anyio.fail_after(30):
            async for record in consumer:
                seen.append(record)
                if len(seen) == 3:
                    break
    assert [(r.key, r.value) for r in seen] == [
        ("customer-1", docs[0]),
        ("customer-2", docs[1]),
        ("customer-3", None),
    ]
    # The bytes as fetched stay readable: compact UTF-8 JSON, the key as UTF-8.
    first = seen[0]
    assert first.serialized_value == json.dumps(
        docs[0], separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    assert first.serialized_key == b"customer-1"
    assert first.serialized_value_size == len(first.serialized_value)
    assert seen[2].serialized_value is None and seen[2].serialized_value_size == -1


async def test_a_failing_serializer_sends_nothing_and_names_the_field(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)

    def bad_key(key: int) -> bytes:
        raise ValueError(f"no key {key}")

    async with Producer(
        kafka_bootstrap,
        key_serializer=bad_key,
        value_serializer=lambda v: v,  # returns what it is given: a dict is not bytes
    ) as producer:
        with pytest.raises(errors.SerializationError) as raised:
            await producer.send(topic, b"fine", key=7)
        assert (raised.value.topic, raised.value.field) == (topic, "key")
        assert isinstance(raised.value.__cause__, ValueError)
        with pytest.raises(errors.SerializationError, match="returned a dict") as raised:
            await producer.send(topic, {"not": "bytes"})
        assert raised.value.field == "value"
        # Neither reached the topic: a record that serializes fine is the first one.
        meta = await producer.send_and_wait(topic, b"ok")
    assert meta.offset == 0


async def test_a_poison_value_raises_at_its_record_is_released_and_iteration_goes_on(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produced = await produce(kafka_bootstrap, topic, [b'{"id": 1}', POISON, b'{"id": 3}'])
    poison_offset = produced[1].offset
    values: list[Any] = []
    failures: list[errors.DeserializationError] = []
    async with json_consumer(kafka_bootstrap, share_group, topic) as consumer:
        with anyio.fail_after(60):
            # Each failure ends one `async for`; the next loop goes on from the next record.
            while not (len(values) == 2 and len(failures) == 2):
                try:
                    async for record in consumer:
                        values.append(record.value)
                except errors.DeserializationError as exc:
                    failures.append(exc)
    assert values == [{"id": 1}, {"id": 3}]
    first, second = failures
    assert (first.topic, first.partition, first.offset) == (topic, 0, poison_offset)
    assert (first.field, first.data, first.dead_lettered) == ("value", POISON, False)
    assert isinstance(first.__cause__, json.JSONDecodeError)
    assert f"{topic}-0 offset {poison_offset}" in str(first)
    # Released, not lost: the broker delivered it again, its count one higher.
    assert (first.delivery_count, second.delivery_count) == (1, 2)
    assert second.offset == poison_offset


async def test_poll_hands_out_the_records_before_a_poison_one_then_raises(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produced = await produce(
        kafka_bootstrap, topic, [b'{"n": 0}', b'{"n": 1}', POISON, b'{"n": 3}']
    )
    events: list[object] = []
    async with json_consumer(kafka_bootstrap, share_group, topic) as consumer:
        with anyio.fail_after(60):
            while {"n": 3} not in events:
                try:
                    events.extend(r.value for r in await consumer.poll(1.0, max_records=10))
                except errors.DeserializationError as exc:
                    events.append(exc)
    failure_at = next(i for i, e in enumerate(events) if isinstance(e, errors.DeserializationError))
    # The error comes exactly where the poison record is: after n=0 and n=1, before n=3.
    assert events[:failure_at] == [{"n": 0}, {"n": 1}]
    failure = events[failure_at]
    assert isinstance(failure, errors.DeserializationError)
    assert failure.offset == produced[2].offset and failure.delivery_count == 1
    assert events[failure_at + 1 :] == [{"n": 3}]


async def test_a_poison_record_goes_to_the_dlq_under_a_policy(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    produced = await produce(kafka_bootstrap, topic, [POISON, b'{"id": 2}'])
    policy = DeadLetterPolicy(topic=dlq, max_deliveries=1)
    async with json_consumer(
        kafka_bootstrap, share_group, topic, dead_letter=policy, ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            with pytest.raises(errors.DeserializationError) as raised:
                await consumer.__anext__()
            good = await consumer.__anext__()
        assert raised.value.dead_lettered and raised.value.offset == produced[0].offset
        assert good.value == {"id": 2}
        # A deserialized record sent to the DLQ by hand: the copy carries the bytes as fetched.
        await consumer.reject_to_dlq(good, reason="by hand")
    copies = sorted(await read_all(kafka_bootstrap, dlq, 2), key=lambda r: r.offset)
    assert [c.value for c in copies] == [POISON, b'{"id": 2}']
    infos = [dead_letter_info(c.headers) for c in copies]
    assert infos[0] is not None and infos[0].reason.startswith("DeserializationError: ")
    assert (infos[0].offset, infos[0].delivery_count) == (produced[0].offset, 1)
    assert infos[1] is not None and infos[1].reason == "by hand"


async def test_process_skips_poison_records_and_routes_them_on_their_last_delivery(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    produced = await produce(kafka_bootstrap, topic, [POISON, b'{"id": 2}'])
    handled: list[Any] = []
    policy = DeadLetterPolicy(topic=dlq, max_deliveries=2)
    async with json_consumer(kafka_bootstrap, share_group, topic, dead_letter=policy) as consumer:

        async def handler(record: Record[str, Any]) -> None:
            handled.append(record.value)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                [copy] = await read_all(kafka_bootstrap, dlq, 1, timeout=50)
                tg.cancel_scope.cancel()
        failures = [e for e in consumer.recent_errors if isinstance(e, errors.DeserializationError)]
    # Delivery 1 was released, delivery 2 (the last allowed) was routed; the handler
    # only ever saw the good record.
    assert handled == [{"id": 2}]
    assert [(f.offset, f.delivery_count, f.dead_lettered) for f in failures] == [
        (produced[0].offset, 1, False),
        (produced[0].offset, 2, True),
    ]
    assert copy.value == POISON


async def test_async_confluent_serde_round_trip_and_a_poison_record_to_the_dlq(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """An async serializer frames values in the Confluent wire format with a schema id
    looked up asynchronously; an async context deserializer decodes them in process();
    a value it cannot decode goes to the DLQ under the policy, the others are handled."""
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    registry = Registry()
    encode, decode = confluent(registry)
    async with Producer(kafka_bootstrap, value_serializer=encode) as producer:
        first = await producer.send_and_wait(topic, {"id": 1}, headers={"trace": b"a"})
        await producer.send_and_wait(topic, {"id": 3})
    [poison] = await produce(kafka_bootstrap, topic, [b"\0\0\0\0\x63{}"])  # id 99: unknown
    handled: list[Any] = []
    policy = DeadLetterPolicy(topic=dlq, max_deliveries=1)
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        value_deserializer=decode,
        dead_letter=policy,
    ) as consumer:

        async def handler(record: Record[Any, Any]) -> None:
            handled.append(record.value)
            if len(handled) == 2:
                both.set()

        both = anyio.Event()
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                [copy] = await read_all(kafka_bootstrap, dlq, 1, timeout=80)
                await both.wait()
                tg.cancel_scope.cancel()
        failures = [e for e in consumer.recent_errors if isinstance(e, errors.DeserializationError)]
    assert sorted(handled, key=lambda v: v["offset"]) == [
        {"subject": f"{topic}-value", "offset": first.offset, "doc": {"id": 1}},
        {"subject": f"{topic}-value", "offset": first.offset + 1, "doc": {"id": 3}},
    ]
    assert [(f.offset, f.field, f.dead_lettered) for f in failures] == [
        (poison.offset, "value", True)
    ]
    assert copy.value == b"\0\0\0\0\x63{}"
    info = dead_letter_info(copy.headers)
    assert info is not None and "unknown schema id 99" in info.reason
