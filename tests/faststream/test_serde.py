"""The FastStream broker decodes through the consumer's deserializers: an async
Confluent wire-format decoder as a subscriber's ``value_deserializer`` gives handlers the
decoded body, and a record it fails for is dead-lettered, never handled (FakeKafka)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sharecon.dlq import DeadLetterPolicy
from sharecon.faststream import ShareBroker

# At run time: FastStream reads the handlers' annotations to inject the message.
from sharecon.faststream.annotations import ShareMessage  # noqa: TC001
from sharecon.serde import SerdeContext
from sharecon.testing.faststream import TestShareClient
from tests.test_serde_context_unit import Registry, confluent

pytestmark = pytest.mark.anyio

DEADLINE = 30


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_subscriber_decodes_with_an_async_deserializer_and_dead_letters_poison() -> None:
    registry = Registry()
    encode, decode = confluent(registry)
    ctx = SerdeContext("orders", None, None, (), "value")
    good = [await encode.fn({"id": i}, ctx) for i in (1, 2)]
    poison = b"\0\0\0\0\x63{}"  # schema id 99: not registered
    broker = ShareBroker("unused:9092")
    handled: list[tuple[Any, bytes]] = []
    dead: list[tuple[bytes, str | None]] = []
    both, routed = anyio.Event(), anyio.Event()

    @broker.subscriber(
        "orders",
        group_id="billing",
        value_deserializer=decode,
        dead_letter=DeadLetterPolicy(topic="orders.dlq", max_deliveries=1),
    )
    async def bill(body: dict[str, Any], msg: ShareMessage) -> None:
        handled.append((body["doc"], msg.body))
        if len(handled) == 2:
            both.set()

    @broker.subscriber("orders.dlq", group_id="dlq-reader")
    async def dlq(body: bytes, msg: ShareMessage) -> None:
        dead.append((msg.body, msg.headers.get("sharecon.dlq.reason")))
        routed.set()

    async with TestShareClient(broker) as br:
        for data in (good[0], poison, good[1]):
            await br.publish(data, "orders")
        with anyio.fail_after(DEADLINE):
            await both.wait()
            await routed.wait()
    # The handler's body is the decoder's result; msg.body stays the bytes as fetched.
    assert sorted(handled, key=lambda h: h[0]["id"]) == [
        ({"id": 1}, good[0]),
        ({"id": 2}, good[1]),
    ]
    [(copy, reason)] = dead
    assert copy == poison
    assert reason is not None and reason.startswith("DeserializationError: ")
    assert "unknown schema id 99" in reason


async def test_a_subscriber_without_deserializer_still_decodes_json_itself() -> None:
    broker = ShareBroker("unused:9092")
    got: list[Any] = []
    done = anyio.Event()

    @broker.subscriber("plain", group_id="p")
    async def handle(body: dict[str, Any]) -> None:
        got.append(body)
        done.set()

    async with TestShareClient(broker) as br:
        await br.publish({"id": 5}, "plain")
        with anyio.fail_after(DEADLINE):
            await done.wait()
    assert got == [{"id": 5}]
