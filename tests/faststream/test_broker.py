"""sharecon.faststream against a real broker: typed handlers, the three answers, the ack
policies, dead letters, delayed retry, concurrency and publishing."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from faststream import AckPolicy
from faststream.exceptions import NackMessage
from pydantic import BaseModel

from sharecon import DeadLetterPolicy, ShareConsumer
from sharecon.faststream import ShareBroker

# At run time: FastStream reads the handlers' annotations to inject the message.
from sharecon.faststream.annotations import ShareMessage  # noqa: TC001

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

#: Every wait in these tests: generous, as the machine may be loaded (never asserted).
DEADLINE = 90


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # FastStream runs on asyncio


class Order(BaseModel):
    id: int
    total: float


class Seen:
    """What handlers saw: (body, delivery count) in order, and an event per awaited count."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, int]] = []
        self._changed = anyio.Event()

    def add(self, body: Any, count: int) -> None:
        self.items.append((body, count))
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, predicate: Any) -> None:
        with anyio.fail_after(DEADLINE):
            while not predicate(self.items):
                await self._changed.wait()


async def test_typed_messages_from_a_share_group(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    """Published with broker.publish(), each order reaches the handler once, decoded into
    its pydantic model, on its first delivery."""
    broker = ShareBroker(kafka_bootstrap)
    seen = Seen()

    @broker.subscriber(topic, group_id=share_group)
    async def handle(order: Order, msg: ShareMessage) -> None:
        seen.add(order, msg.delivery_count)

    async with broker:
        await broker.start()
        for i in range(20):
            meta = await broker.publish(Order(id=i, total=i * 1.5), topic, key=str(i))
            assert meta.topic == topic
        await seen.until(lambda items: len(items) >= 20)
    orders = [o for o, _ in seen.items]
    assert all(isinstance(o, Order) for o in orders)
    assert sorted(o.id for o in orders) == list(range(20))
    assert {o.id: o.total for o in orders} == {i: i * 1.5 for i in range(20)}
    assert {count for _, count in seen.items} == {1}


async def test_ack_nack_reject_map_to_accept_release_reject(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """MANUAL policy, answers from the handler: nack() comes back with delivery count 2,
    reject() never comes back, ack() never comes back."""
    topic = topic_factory(1)
    broker = ShareBroker(kafka_bootstrap)
    seen = Seen()

    @broker.subscriber(topic, group_id=share_group, ack_policy=AckPolicy.MANUAL)
    async def handle(body: dict[str, str], msg: ShareMessage) -> None:
        seen.add(body["do"], msg.delivery_count)
        if body["do"] == "nack" and msg.delivery_count == 1:
            await msg.nack()
        elif body["do"] == "reject":
            await msg.reject()
        else:
            await msg.ack()

    async with broker:
        await broker.start()
        for do in ("reject", "nack", "ack"):
            await broker.publish({"do": do}, topic)
        await seen.until(lambda items: ("nack", 2) in items and ("ack", 1) in items)
        # A marker after them: once it is handled, a released or unanswered record would
        # have come back first (one partition, lowest offsets first).
        await broker.publish({"do": "marker"}, topic)
        await seen.until(lambda items: ("marker", 1) in items)
    assert Counter(seen.items) == Counter(
        {("reject", 1): 1, ("nack", 1): 1, ("nack", 2): 1, ("ack", 1): 1, ("marker", 1): 1}
    )


@pytest.mark.parametrize(
    ("policy", "comes_back"),
    [
        (AckPolicy.NACK_ON_ERROR, True),
        (AckPolicy.REJECT_ON_ERROR, False),
        (AckPolicy.ACK, False),
        (AckPolicy.ACK_FIRST, False),
    ],
)
async def test_handler_error_follows_the_ack_policy(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group: str,
    policy: AckPolicy,
    comes_back: bool,
) -> None:
    """A handler that raises on the first delivery: released (delivered again, count 2)
    under NACK_ON_ERROR; rejected or accepted (never again) under the others."""
    topic = topic_factory(1)
    broker = ShareBroker(kafka_bootstrap, ack_policy=policy)
    seen = Seen()

    @broker.subscriber(topic, group_id=share_group)
    async def handle(body: str, msg: ShareMessage) -> None:
        seen.add(body, msg.delivery_count)
        if body == "flaky" and msg.delivery_count == 1:
            raise RuntimeError("first delivery fails")

    async with broker:
        await broker.start()
        await broker.publish("flaky", topic)
        await seen.until(lambda items: ("flaky", 1) in items)
        await broker.publish("marker", topic)
        await seen.until(lambda items: ("marker", 1) in items)
        if comes_back:
            await seen.until(lambda items: ("flaky", 2) in items)
    expected = {("flaky", 1): 1, ("marker", 1): 1}
    if comes_back:
        expected[("flaky", 2)] = 1
    assert Counter(seen.items) == Counter(expected)


async def test_default_policy_dead_letters_on_the_last_delivery(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """With a DeadLetterPolicy, a handler that always fails sees the record
    ``max_deliveries`` times; then it is in the dead-letter topic, with its origin."""
    topic = topic_factory(1)
    dlq_topic = f"{topic}.dlq"
    group = share_group_factory()
    broker = ShareBroker(kafka_bootstrap)
    seen = Seen()
    dead = Seen()

    @broker.subscriber(
        topic, group_id=group, dead_letter=DeadLetterPolicy(topic=dlq_topic, max_deliveries=2)
    )
    async def handle(body: str, msg: ShareMessage) -> None:
        seen.add(body, msg.delivery_count)
        raise ValueError("poison")

    @broker.subscriber(dlq_topic, group_id=share_group_factory())
    async def dead_letters(body: str, msg: ShareMessage) -> None:
        dead.add((body, msg.headers.get("sharecon.dlq.topic")), msg.delivery_count)

    async with broker:
        await broker.start()
        await broker.publish("bad", topic)
        await dead.until(lambda items: len(items) >= 1)
    assert seen.items == [("bad", 1), ("bad", 2)]
    assert dead.items == [(("bad", topic), 1)]


async def test_nack_with_delay_and_nack_message(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """``msg.nack(delay=...)`` and ``raise NackMessage(delay=...)`` release the record after
    the delay (Kafka 4.2+): it comes back once, with delivery count 2."""
    topic = topic_factory(1)
    broker = ShareBroker(kafka_bootstrap)
    seen = Seen()

    @broker.subscriber(topic, group_id=share_group)
    async def handle(body: str, msg: ShareMessage) -> None:
        seen.add(body, msg.delivery_count)
        if msg.delivery_count == 1:
            if body == "method":
                await msg.nack(delay=0.2)
            else:
                raise NackMessage(delay=0.2)

    async with broker:
        await broker.start()
        await broker.publish("method", topic)
        await broker.publish("raised", topic)
        await seen.until(lambda items: ("method", 2) in items and ("raised", 2) in items)
    assert Counter(seen.items) == Counter(
        {("method", 1): 1, ("method", 2): 1, ("raised", 1): 1, ("raised", 2): 1}
    )


async def test_max_workers_runs_handlers_concurrently(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    """``max_workers=4``: four handlers run at once (each waits until all four started).
    The records are in the topic before the subscriber starts, so that its first fetches
    bring more than four (how many one fetch brings is the consumer's business)."""
    broker = ShareBroker(kafka_bootstrap)
    running = 0
    peak = 0
    four = anyio.Event()
    done = Seen()

    @broker.subscriber(topic, group_id=share_group, max_workers=4)
    async def handle(n: int) -> None:
        nonlocal running, peak
        running += 1
        try:
            peak = max(peak, running)
            if running >= 4:
                four.set()
            with anyio.fail_after(DEADLINE):
                await four.wait()
        finally:
            running -= 1
        done.add(n, 1)

    async with broker:  # connected (the producer), subscribers not started yet
        for i in range(8):
            await broker.publish(i, topic)
        await broker.start()
        await done.until(lambda items: len(items) >= 8)
    assert peak == 4
    assert sorted(n for n, _ in done.items) == list(range(8))


async def test_publisher_round_trip(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """``@broker.publisher`` publishes a handler's return value, and ``publisher.publish()``
    sends with key and headers: a plain ShareConsumer reads both."""
    orders, invoices = topic_factory(), topic_factory()
    broker = ShareBroker(kafka_bootstrap)
    invoice_out = broker.publisher(invoices, headers={"source": "billing"})

    @broker.subscriber(orders, group_id=share_group_factory())
    @invoice_out
    async def bill(order: Order) -> dict[str, Any]:
        return {"order": order.id, "amount": order.total}

    async with broker:
        await broker.start()
        await broker.publish(Order(id=7, total=9.5), orders)
        await invoice_out.publish({"order": 8, "amount": 1.0}, key=b"k8")
        got: dict[int, Any] = {}
        async with ShareConsumer(
            kafka_bootstrap, group_id=share_group_factory(), topics=[invoices]
        ) as consumer:
            with anyio.fail_after(DEADLINE):
                async for record in consumer:
                    assert record.value is not None
                    body = json.loads(record.value)
                    got[body["order"]] = (body["amount"], record.key, dict(record.headers))
                    if len(got) == 2:
                        break
    assert got[7][0] == 9.5
    assert got[8][:2] == (1.0, b"k8")
    for _, _, headers in got.values():
        assert headers["source"] == b"billing"
        assert headers["content-type"] == b"application/json"
