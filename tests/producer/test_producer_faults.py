"""Producer under broker failures (private brokers that the tests kill and restart).

Invariant: with idempotence, every record that ``send``/``send_batch`` reported as written
is in the log exactly once at the offset reported, however often the broker went away
mid-stream; a record that cannot be delivered in time fails with a typed error instead.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon.producer import Producer, ProducerRecord, RecordMetadata
from sharecon.protocol import ProduceRequest, ProduceResponse
from sharecon.protocol.messages.produce import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from tests.producer.conftest import read_back

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.mark.parametrize("how", ["restart", "kill"])
async def test_idempotent_stream_survives_broker_restart_exactly_once(
    kafka_broker_factory: BrokerFactory, how: str
) -> None:
    broker = kafka_broker_factory(shared=False)
    topic = "restart-stream"
    broker.tools.create_topic(topic, 3)
    total, chunk, senders = 6000, 50, 4
    acked: list[tuple[RecordMetadata, bytes]] = []
    progress = anyio.Event()

    async def sender(producer: Producer, worker: int) -> None:
        for start in range(worker * chunk, total, chunk * senders):
            values = [f"r{n:06d}".encode() for n in range(start, min(start + chunk, total))]
            metas = await producer.send_batch(ProducerRecord(topic, v, key=v[-2:]) for v in values)
            acked.extend(zip(metas, values, strict=True))
            if len(acked) >= total // 4:
                progress.set()

    async def bounce() -> None:
        await progress.wait()
        if how == "restart":
            await anyio.to_thread.run_sync(broker.restart)
        else:
            broker.kill()
            await anyio.sleep(1.0)
            await anyio.to_thread.run_sync(broker.start)

    with anyio.fail_after(240):
        async with Producer(
            broker.bootstrap, linger=0.01, max_batch_bytes=16 * 1024, request_timeout=10
        ) as producer:
            async with anyio.create_task_group() as tg:
                tg.start_soon(bounce)
                for worker in range(senders):
                    tg.start_soon(sender, producer, worker)

    assert len(acked) == total
    reads = await read_back(broker.bootstrap, topic, 3, total, timeout=120)
    counts = Counter(r.value for r in reads)
    duplicates = {v: c for v, c in counts.items() if c > 1}
    assert not duplicates, f"{len(duplicates)} records written more than once"
    assert len(reads) == total  # no loss
    where = {(r.partition, r.offset): r.value for r in reads}
    for meta, value in acked:
        assert where[(meta.partition, meta.offset)] == value


async def test_broker_down_fails_with_delivery_timeout_then_recovers(
    kafka_broker_factory: BrokerFactory,
) -> None:
    """While the only broker is down, a send fails after delivery_timeout with a
    KafkaTimeoutError naming the partition; once it is back the same producer works."""
    broker = kafka_broker_factory(shared=False)
    topic = "down"
    broker.tools.create_topic(topic, 1)
    async with Producer(broker.bootstrap, delivery_timeout=3.0, request_timeout=2.0) as producer:
        first = await producer.send_and_wait(topic, b"before")
        broker.kill()
        started = anyio.current_time()
        with anyio.fail_after(30), pytest.raises(errors.KafkaTimeoutError) as info:
            await producer.send_and_wait(topic, b"while down")
        assert anyio.current_time() - started < 15
        assert f"topic '{topic}' partition 0" in str(info.value)
        await anyio.to_thread.run_sync(broker.start)
        with anyio.fail_after(60):
            after = await producer.send_and_wait(topic, b"after")
    assert after.partition == first.partition
    reads = await read_back(broker.bootstrap, topic, 1, 2)
    values = [r.value for r in reads]
    assert values[0] == b"before" and values[-1] == b"after"
    assert values.count(b"after") == 1


async def test_records_sent_while_broker_restarts_are_delivered(
    kafka_broker_factory: BrokerFactory,
) -> None:
    """Records queued while the broker is down are retried with backoff and delivered when it
    returns (within delivery_timeout), each once."""
    broker = kafka_broker_factory(shared=False)
    topic = "queued"
    broker.tools.create_topic(topic, 2)
    async with Producer(broker.bootstrap, request_timeout=5.0) as producer:
        await producer.send_and_wait(topic, b"warm", partition=0)
        broker.kill()
        async with anyio.create_task_group() as tg:
            results: list[RecordMetadata] = []

            async def send_all() -> None:
                results.extend(
                    await producer.send_batch(
                        ProducerRecord(topic, f"q{i}".encode(), partition=i % 2) for i in range(100)
                    )
                )

            tg.start_soon(send_all)
            await anyio.sleep(2.0)
            await anyio.to_thread.run_sync(broker.start)
    assert len(results) == 100
    reads = await read_back(broker.bootstrap, topic, 2, 101)
    assert sorted(r.value for r in reads if r.value != b"warm") == sorted(
        f"q{i}".encode() for i in range(100)
    )


@pytest.mark.parametrize("idempotent", [True, False])
async def test_lost_responses_are_retried_without_duplicates_only_when_idempotent(
    kafka_bootstrap: str, topic: str, idempotent: bool
) -> None:
    """A Produce response lost after the broker wrote the batch makes the producer resend the
    same bytes. With idempotence the broker recognises the sequence numbers and answers with
    the first offsets: exactly once. Without it the retry writes a second copy, which shows
    this test can see duplicates."""
    lost = 0

    async with Producer(kafka_bootstrap, idempotent=idempotent, linger=0.01) as producer:
        real = producer._open_cluster.request

        async def lossy(node: int, body: object, *, timeout: float | None = None) -> object:
            nonlocal lost
            response = await real(node, body, timeout=timeout)  # type: ignore[arg-type]
            if isinstance(body, ProduceRequest) and lost < 3:
                lost += 1
                raise errors.BrokerDisconnectedError("injected: the response was lost")
            return response

        producer._open_cluster.request = lossy  # type: ignore[method-assign]
        values = [f"lost-{i}".encode() for i in range(300)]
        metas = await producer.send_batch(ProducerRecord(topic, v) for v in values)
    assert lost == 3
    reads = await read_back(kafka_bootstrap, topic, 3, len(values))
    counts = Counter(r.value for r in reads)
    if idempotent:
        assert len(reads) == len(values) and set(counts.values()) == {1}
        where = {(r.partition, r.offset): r.value for r in reads}
        assert [where[(m.partition, m.offset)] for m in metas] == values
    else:
        assert len(reads) > len(values)  # the retries wrote copies
        assert set(counts) == set(values)


def _answer_with(code: int, *, leader: tuple[int, int] | None = None):  # type: ignore[no-untyped-def]
    """Rewrite every partition answer of a ProduceResponse to error ``code`` (and a leader hint)."""

    def rewrite(response: ProduceResponse) -> ProduceResponse:
        topics = []
        for t in response.responses:
            parts = tuple(
                dataclasses.replace(
                    p,
                    error_code=code,
                    base_offset=-1,
                    current_leader=LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
                    if leader
                    else p.current_leader,
                )
                for p in t.partition_responses
            )
            topics.append(dataclasses.replace(t, partition_responses=parts))
        return dataclasses.replace(response, responses=tuple(topics))

    return rewrite


async def _with_one_rewritten_answer(
    producer: Producer, rewrite: object, *, before_send: bool = True
) -> list[int]:
    """Make the first Produce request come back rewritten. With ``before_send`` the request is
    not sent at all (a definite rejection); returns the nodes requests went to."""
    real = producer._open_cluster.request
    nodes: list[int] = []

    async def fake(node: int, body: object, *, timeout: float | None = None) -> object:
        if isinstance(body, ProduceRequest):
            nodes.append(node)
            if len(nodes) == 1:
                if before_send:
                    # What the broker would answer, without writing anything.
                    empty = ProduceResponse(
                        responses=tuple(
                            TopicProduceResponse(
                                name=t.name,
                                topic_id=t.topic_id,
                                partition_responses=tuple(
                                    PartitionProduceResponse(index=p.index)
                                    for p in t.partition_data
                                ),
                            )
                            for t in body.topic_data
                        )
                    )
                    return rewrite(empty)  # type: ignore[operator]
        return await real(node, body, timeout=timeout)  # type: ignore[arg-type]

    producer._open_cluster.request = fake  # type: ignore[method-assign]
    return nodes


async def test_not_leader_with_a_hint_is_retried_at_once_and_written_once(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """NOT_LEADER_OR_FOLLOWER with a CurrentLeader hint: the hint (a newer leader epoch) is
    applied to the metadata and the batch is resent without backoff, written once."""
    topic = topic_factory(1)
    async with Producer(
        kafka_bootstrap, retry_backoff=Backoff(initial=5.0, maximum=5.0)
    ) as producer:
        await producer.send_and_wait(topic, b"first")
        info = producer._open_cluster.metadata.partitions[topic][0]
        rewrite = _answer_with(
            errors.NotLeaderOrFollowerError.code, leader=(info.leader_id, info.leader_epoch + 1)
        )
        nodes = await _with_one_rewritten_answer(producer, rewrite)
        started = anyio.current_time()
        meta = await producer.send_and_wait(topic, b"second")
        took = anyio.current_time() - started
        assert (
            producer._open_cluster.metadata.partitions[topic][0].leader_epoch
            == info.leader_epoch + 1
        )
    assert len(nodes) == 2 and took < 4.0  # no 5 s backoff: the hint said where to go
    reads = await read_back(kafka_bootstrap, topic, 1, 2)
    assert [(r.offset, r.value) for r in reads][-1] == (meta.offset, b"second")
    assert [r.value for r in reads] == [b"first", b"second"]


async def test_retriable_error_without_hint_backs_off_then_succeeds(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    async with Producer(
        kafka_bootstrap, retry_backoff=Backoff(initial=0.5, maximum=0.5, jitter=0.0)
    ) as producer:
        nodes = await _with_one_rewritten_answer(
            producer, _answer_with(errors.NotEnoughReplicasError.code)
        )
        started = anyio.current_time()
        await producer.send_and_wait(topic, b"once")
        took = anyio.current_time() - started
    assert len(nodes) == 2 and took >= 0.5
    assert [r.value for r in await read_back(kafka_bootstrap, topic, 1, 1)] == [b"once"]


async def test_out_of_order_sequence_gets_a_new_producer_id(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """OUT_OF_ORDER_SEQUENCE_NUMBER means the broker's producer state does not match ours:
    the producer gets a new producer id, restarts sequences at 0 and resends; written once."""
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_and_wait(topic, b"a")
        old = producer.producer_id
        await _with_one_rewritten_answer(
            producer, _answer_with(errors.OutOfOrderSequenceNumberError.code)
        )
        await producer.send_and_wait(topic, b"b")
        assert producer.producer_id != old
        await producer.send_and_wait(topic, b"c")
    assert [r.value for r in await read_back(kafka_bootstrap, topic, 1, 3)] == [b"a", b"b", b"c"]


async def test_non_retriable_error_fails_the_batch_and_later_records_still_go(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap) as producer:
        await _with_one_rewritten_answer(producer, _answer_with(errors.InvalidRecordError.code))
        with pytest.raises(errors.InvalidRecordError, match=f"topic '{topic}' partition 0"):
            await producer.send_and_wait(topic, b"rejected")
        ok = await producer.send_and_wait(topic, b"accepted")
    reads = await read_back(kafka_bootstrap, topic, 1, 1)
    assert [(r.offset, r.value) for r in reads] == [(ok.offset, b"accepted")]


async def test_a_request_lost_unread_while_later_batches_fly_is_resent_first_in_order(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Several batches of one partition in flight (idempotence): the first request is lost
    before the broker reads it (held back, then its connection "drops") while the later
    ones reach the broker, which refuses them as out of order. They are resent after the
    lost one, in sequence order: every record once, in order, under the same producer id."""
    topic = topic_factory(1)
    answers: Counter[int] = Counter()
    held = 0
    async with Producer(kafka_bootstrap, linger=0, max_batch_bytes=1024) as producer:
        await producer.send_and_wait(topic, b"warm")
        pid = producer.producer_id
        real = producer._open_cluster.request

        async def fake(node: int, body: object, *, timeout: float | None = None) -> object:
            nonlocal held
            if isinstance(body, ProduceRequest) and held == 0:
                held = 1
                await anyio.sleep(0.5)  # later requests overtake it
                raise errors.BrokerDisconnectedError("injected: lost before the broker read it")
            response = await real(node, body, timeout=timeout)  # type: ignore[arg-type]
            if isinstance(response, ProduceResponse):
                for t in response.responses:
                    answers.update(p.error_code for p in t.partition_responses)
            return response

        producer._open_cluster.request = fake  # type: ignore[method-assign]
        values = [b"in-order-%05d" % i for i in range(600)]
        futures = [await producer.send(topic, v) for v in values]
        metas = [await f for f in futures]
        assert producer.producer_id == pid  # no reset: the gap was the lost request's
    assert held == 1
    assert answers[errors.OutOfOrderSequenceNumberError.code] >= 1  # several were in flight
    reads = await read_back(kafka_bootstrap, topic, 1, len(values) + 1)
    assert [r.value for r in reads] == [b"warm", *values]
    assert [m.offset for m in metas] == [r.offset for r in reads[1:]]
