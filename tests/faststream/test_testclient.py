"""TestShareClient: a FastStream app's share broker against FakeKafka (no JVM): the same
answers as on the real broker, and FastStream's handler mocks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from faststream import AckPolicy
from pydantic import BaseModel

from sharecon import Producer, RetryLater, ShareConsumer
from sharecon.faststream import ShareBroker

# At run time: FastStream reads the handlers' annotations to inject the message.
from sharecon.faststream.annotations import ShareMessage  # noqa: TC001
from sharecon.testing.faststream import TestShareClient

pytestmark = pytest.mark.anyio

DEADLINE = 30


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Order(BaseModel):
    id: int
    total: float


async def test_handler_mock_and_typed_body() -> None:
    broker = ShareBroker("unused:9092")
    got: list[Order] = []

    @broker.subscriber("orders", group_id="billing")
    async def bill(order: Order) -> None:
        got.append(order)

    async with TestShareClient(broker) as br:
        await br.publish({"id": 1, "total": 2.5}, "orders")
        await bill.wait_call(DEADLINE)
        await bill.assert_called_once_with({"id": 1, "total": 2.5})
    assert got == [Order(id=1, total=2.5)]
    # The broker's own address is back once the client is left.
    assert broker.config.broker_config.bootstrap == "unused:9092"


async def test_nack_redelivers_and_reject_archives_on_the_fake() -> None:
    broker = ShareBroker("unused:9092")
    seen: list[tuple[str, int]] = []
    marker = anyio.Event()
    nacked_twice = anyio.Event()

    @broker.subscriber("jobs", group_id="workers", ack_policy=AckPolicy.MANUAL)
    async def work(body: dict[str, Any], msg: ShareMessage) -> None:
        seen.append((body["do"], msg.delivery_count))
        if body["do"] == "nack" and msg.delivery_count == 1:
            await msg.nack()
        elif body["do"] == "reject":
            await msg.reject()
        else:
            await msg.ack()
        if body["do"] == "marker":
            marker.set()
        if (body["do"], msg.delivery_count) == ("nack", 2):
            nacked_twice.set()

    async with TestShareClient(broker) as br:
        for do in ("reject", "nack"):
            await br.publish({"do": do}, "jobs")
        with anyio.fail_after(DEADLINE):
            await nacked_twice.wait()
        await br.publish({"do": "marker"}, "jobs")
        with anyio.fail_after(DEADLINE):
            await marker.wait()
    assert Counter(seen) == Counter(
        {("reject", 1): 1, ("nack", 1): 1, ("nack", 2): 1, ("marker", 1): 1}
    )


async def test_retry_later_dead_letter_and_manual_unanswered_on_the_fake() -> None:
    """``RetryLater`` releases after its delay (delivered again, count 2) even under
    REJECT_ON_ERROR; ``msg.dead_letter()`` copies to ``dlq.<group>`` and rejects; under
    MANUAL a handler that returns without answering has its record accepted; under
    ACK_FIRST a later nack() and an error change nothing."""
    broker = ShareBroker("unused:9092")
    seen: list[tuple[str, int]] = []
    dead: list[tuple[str, str | None]] = []
    events = {name: anyio.Event() for name in ("retried", "dead", "marker", "first")}

    @broker.subscriber("jobs", group_id="workers", ack_policy=AckPolicy.REJECT_ON_ERROR)
    async def work(body: str, msg: ShareMessage) -> None:
        seen.append((body, msg.delivery_count))
        if body == "later" and msg.delivery_count == 1:
            raise RetryLater(0.1)
        if body == "later":
            events["retried"].set()
        if body == "poison":
            await msg.dead_letter(reason="bad input")

    @broker.subscriber("dlq.workers", group_id="dlq-reader")
    async def dlq(body: str, msg: ShareMessage) -> None:
        dead.append((body, msg.headers.get("sharecon.dlq.reason")))
        events["dead"].set()

    @broker.subscriber("manual", group_id="m", ack_policy=AckPolicy.MANUAL)
    async def manual(body: str, msg: ShareMessage) -> None:
        seen.append((body, msg.delivery_count))
        if body == "marker":
            events["marker"].set()

    @broker.subscriber("early", group_id="e", ack_policy=AckPolicy.ACK_FIRST)
    async def early(body: str, msg: ShareMessage) -> None:
        seen.append((body, msg.delivery_count))
        if body == "marker-first":
            events["first"].set()
            return
        await msg.nack()  # the record was accepted before the handler ran: ignored
        raise RuntimeError("and so is this error")

    async with TestShareClient(broker) as br:
        await br.publish("early", "early")
        await br.publish("marker-first", "early")
        await br.publish("later", "jobs")
        await br.publish("poison", "jobs")
        await br.publish("quiet", "manual")
        await br.publish("marker", "manual")
        with anyio.fail_after(DEADLINE):
            for event in events.values():
                await event.wait()
    assert Counter(seen) == Counter(
        {
            ("later", 1): 1,
            ("later", 2): 1,
            ("poison", 1): 1,
            ("quiet", 1): 1,
            ("marker", 1): 1,
            ("early", 1): 1,
            ("marker-first", 1): 1,
        }
    )
    assert dead == [("poison", "bad input")]


async def test_stop_lets_the_handler_in_progress_finish() -> None:
    """docs/faststream.md, Starting and stopping: ``broker.stop()`` waits for the handler
    in progress (within ``graceful_timeout``), whose record is then accepted: a new
    member of the group gets only what came after it."""
    broker = ShareBroker("unused:9092", graceful_timeout=60)
    started, go = anyio.Event(), anyio.Event()
    finished: list[str] = []

    @broker.subscriber("slow", group_id="s")
    async def slow(body: str) -> None:
        started.set()
        await go.wait()
        finished.append(body)

    client = TestShareClient(broker)
    async with client as br:
        await br.publish("in-flight", "slow")
        with anyio.fail_after(DEADLINE):
            await started.wait()
        (sub,) = br.subscribers
        async with anyio.create_task_group() as tg:
            tg.start_soon(br.stop)
            with anyio.fail_after(DEADLINE):
                while sub.running:  # noqa: ASYNC110 - stop() has begun: it now waits
                    await anyio.sleep(0.01)
            go.set()
        assert finished == ["in-flight"]
        async with Producer(client.fake.bootstrap) as producer:
            await producer.send_and_wait("slow", b"marker")
        async with ShareConsumer(client.fake.bootstrap, group_id="s", topics=["slow"]) as c:
            with anyio.fail_after(DEADLINE):
                record = await c.__anext__()
        assert record.value == b"marker"
