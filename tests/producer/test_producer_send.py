"""``send()`` queues and returns a :class:`RecordFuture`; ``send_and_wait()`` waits.

Invariants: ``send`` returns before the broker answered (a long ``linger`` keeps the
record unsent until ``flush``); the future yields the offset a reader finds, as often as
it is awaited; a failed delivery raises the typed error through the future and, when no
one awaited it, is logged once as a WARNING; queueing is bounded by ``max_buffer_bytes``
(``send`` suspends until delivered records free space). Under asyncio and trio.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import RecordFuture, errors
from sharecon.producer import Producer, RecordMetadata
from tests.producer.conftest import read_back

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio]


def test_a_record_future_is_made_by_send_only() -> None:
    with pytest.raises(TypeError, match=r"Producer\.send"):
        RecordFuture()


@pytest.mark.broker
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_send_returns_before_the_broker_answers(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """With a long linger nothing is sent until flush: the futures are pending, then done
    with the offsets a reader finds; awaiting twice gives the same metadata."""
    topic = topic_factory(1)
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, linger=600) as producer:
            futures = [await producer.send(topic, b"v%d" % i) for i in range(5)]
            assert all(isinstance(f, RecordFuture) for f in futures)
            assert not any(f.done() for f in futures)
            with pytest.raises(RuntimeError, match="not delivered yet"):
                futures[0].result()
            assert (futures[0].topic, futures[0].partition) == (topic, 0)
            await producer.flush()
            assert all(f.done() for f in futures)
            metas = [await f for f in futures]
            assert [await f for f in futures] == metas  # awaiting again
            assert [f.result() for f in futures] == metas
    assert all(isinstance(m, RecordMetadata) and m.topic == topic for m in metas)
    assert [m.offset for m in metas] == list(range(metas[0].offset, metas[0].offset + 5))
    reads = await read_back(kafka_bootstrap, topic, 1, 5)
    assert {r.offset: r.value for r in reads} == {m.offset: b"v%d" % i for i, m in enumerate(metas)}


@pytest.mark.broker
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_send_and_wait_returns_the_metadata(kafka_bootstrap: str, topic: str) -> None:
    """send_and_wait is send plus awaiting the future: the record is written when it returns."""
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap) as producer:
            meta = await producer.send_and_wait(topic, b"waited", partition=2)
            plain = await (await producer.send(topic, b"plain", partition=2))
    assert isinstance(meta, RecordMetadata)
    assert (meta.topic, meta.partition) == (topic, 2)
    assert plain.offset == meta.offset + 1
    reads = await read_back(kafka_bootstrap, topic, 3, 2)
    assert {(r.partition, r.offset): r.value for r in reads} == {
        (2, meta.offset): b"waited",
        (2, plain.offset): b"plain",
    }


@pytest.mark.broker
async def test_a_failed_delivery_raises_through_the_future_and_is_logged_once(
    kafka_bootstrap: str, topic_factory: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A record the broker refuses fails its future with MessageTooLargeError (every time it
    is awaited); as nobody awaited it when it failed, one WARNING names the batch. A failure
    that a caller is waiting for (send_and_wait) is raised, not logged."""
    topic = topic_factory(1, config={"max.message.bytes": "2000"})
    caplog.set_level(logging.WARNING, logger="sharecon.producer")
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap) as producer:
            small = await producer.send(topic, b"small")
            big = await producer.send(topic, b"x" * 5000)
            await producer.flush()  # does not raise the failure
            assert big.done()
            for _ in range(2):
                with pytest.raises(errors.MessageTooLargeError) as info:
                    await big
                assert topic in str(info.value)
            with pytest.raises(errors.MessageTooLargeError):
                big.result()
            assert "failed: MessageTooLargeError" in repr(big)
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            assert warnings[0].name == "sharecon.producer"
            assert topic in warnings[0].getMessage()
            assert "larger than the broker accepts" in warnings[0].getMessage()
            caplog.clear()
            with pytest.raises(errors.MessageTooLargeError):
                await producer.send_and_wait(topic, b"y" * 5000)
            after = await producer.send_and_wait(topic, b"small again")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (await small).offset + 1 == after.offset


@pytest.mark.broker
async def test_send_suspends_while_the_buffer_is_full(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Queued records are bounded by max_buffer_bytes: the send that does not fit returns
    only after earlier records were delivered and freed space (the long linger would
    otherwise keep them queued)."""
    topic = topic_factory(1)
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, linger=600, max_buffer_bytes=4096) as producer:
            value = b"x" * 1000  # about 1 KiB buffered per record; the four share a batch
            first = [await producer.send(topic, value) for _ in range(4)]
            assert not any(f.done() for f in first)
            returned: list[RecordFuture] = []

            async def overflow() -> None:
                returned.append(await producer.send(topic, value))

            async with anyio.create_task_group() as tg:
                tg.start_soon(overflow)
                await anyio.wait_all_tasks_blocked()
                # Either still suspended, or it returned because the first ones are done.
                assert not returned or all(f.done() for f in first)
            assert returned and all(f.done() for f in first)
            metas = [await f for f in first]
            await producer.flush()
            last = await returned[0]
    assert [m.offset for m in metas] == list(range(metas[0].offset, metas[0].offset + 4))
    assert last.offset == metas[-1].offset + 1


@pytest.mark.broker
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_done_callbacks_run_once_when_the_delivery_is_over(
    kafka_bootstrap: str, topic_factory: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback added before delivery runs once it is over, one added after runs at once;
    a callback that raises is logged and harms neither the others nor the producer; a
    failure observed through a callback is not also reported as unawaited."""
    topic = topic_factory(1, config={"max.message.bytes": "2000"})
    caplog.set_level(logging.WARNING, logger="sharecon.producer")
    seen: list[tuple[str, object]] = []

    def note(name: str) -> Callable[[RecordFuture], None]:
        def callback(future: RecordFuture) -> None:
            try:
                seen.append((name, future.result().offset))
            except errors.KafkaError as exc:
                seen.append((name, type(exc).__name__))

        return callback

    def broken(future: RecordFuture) -> None:
        raise RuntimeError("a user's callback failed")

    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, linger=600) as producer:
            ok = await producer.send(topic, b"fits")
            big = await producer.send(topic, b"x" * 5000)
            ok.add_done_callback(broken)
            ok.add_done_callback(note("ok"))
            big.add_done_callback(note("big"))
            assert seen == []  # nothing is sent before flush (the long linger)
            await producer.flush()
            assert sorted(seen, key=str) == [("big", "MessageTooLargeError"), ("ok", 0)]
            ok.add_done_callback(note("late"))
            assert seen[-1] == ("late", 0)
            after = await producer.send(topic, b"after")
            await producer.flush()  # the producer goes on after the raising callback
            assert after.result().offset == 1
    assert len(seen) == 3
    messages = [r.getMessage() for r in caplog.records]
    assert any("callback raised" in m for m in messages), messages
    assert not any("futures were not awaited" in m for m in messages), messages


@pytest.mark.broker
async def test_send_nowait_queues_without_waiting_or_refuses_with_a_typed_error(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """send_nowait is a plain call: it queues like send, or raises WouldBlockError and
    queues nothing, for an unknown topic's first record and for a full buffer; a send
    that waits then takes the refused record, and every record is written once."""
    topic = topic_factory(1)
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, linger=600, max_buffer_bytes=4096) as producer:
            with pytest.raises(errors.WouldBlockError, match="not known yet") as unknown:
                producer.send_nowait(topic, b"first")
            assert unknown.value.reason == "metadata"
            assert await producer.partitions_for(topic) == 1
            futures = []
            refused = None
            for i in range(100):
                try:
                    futures.append(producer.send_nowait(topic, b"%03d" % i + b"x" * 1000))
                except errors.WouldBlockError as full:
                    refused = (i, full)
                    break
            assert refused is not None, "a 4 KiB buffer took 100 KiB"
            i, error = refused
            assert error.reason == "buffer" and "max_buffer_bytes=4096" in str(error)
            assert 2 <= i <= 4 and not any(f.done() for f in futures)
            # The waiting send takes the refused record once the buffer drains (flush).
            waiting = await producer.send(topic, b"%03d" % i + b"x" * 1000)
            futures.append(waiting)
            await producer.flush()
            metas = [await f for f in futures]
    assert [m.offset for m in metas] == list(range(metas[0].offset, metas[0].offset + i + 1))
    reads = await read_back(kafka_bootstrap, topic, 1, i + 1)
    assert [r.value[:3] for r in reads if r.value] == [b"%03d" % n for n in range(i + 1)]
