"""A network cut while records are buffered: nothing given up is handed out, no answer
raises from the loop, and every answer that could not reach the broker is reported."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon._share.ledger import AckFailure
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

N = 1000


def cut(consumer: ShareConsumer, record: Record) -> None:
    """Break the connection to ``record``'s leader, as a network failure would."""
    core = consumer._core
    assert core is not None
    leader = core.leader(record.topic_partition)
    assert leader is not None
    conn = core.cluster._connections[leader]
    conn._fail("cut by the test")


@pytest.mark.parametrize("ack_mode", ["explicit", "implicit"])
async def test_records_of_a_cut_session_are_not_handed_out(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, ack_mode: str
) -> None:
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"r%d" % i for i in range(N)])
    reported: list[AckResult] = []
    seen: list[tuple[int, int]] = []  # (offset, delivery count)
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        ack_mode=ack_mode,  # type: ignore[arg-type]
        max_records=N,
        on_acknowledged=reported.extend,
    ) as consumer:
        with anyio.fail_after(60):
            first = await consumer.__anext__()
            seen.append((first.offset, first.delivery_count))
            core = consumer._core
            assert core is not None
            assert core.buffer.records > 100  # most of the answer is still buffered
            before = {c.tag for c in core.buffer._chunks}
            cut(consumer, first)
            await anyio.sleep(0.2)  # the fetcher notices the cut
            # The lost session's records are dropped (a new session may have refilled it:
            # at most one answer's worth, never the old records next to the new ones).
            assert not before & {c.tag for c in core.buffer._chunks}
            assert core.buffer.records <= N
            if ack_mode == "explicit":
                first.accept()  # no raise: its lock is gone, and that is reported
            done = {first.offset}
            async for record in consumer:
                seen.append((record.offset, record.delivery_count))
                if ack_mode == "explicit":
                    record.accept()  # never raises on these records
                done.add(record.offset)
                if len(done) == N:
                    break
            results = await consumer.commit()
    # The record in hand at the cut was reported as lock-lost, never raised.
    lost = [r for r in reported if r.reason is AckFailure.LOCK_LOST]
    assert sum(r.count for r in lost) == 1
    assert lost[0].batches[0].first_offset == first.offset
    # Every other offset came back from the new session and was accepted there.
    assert results, "commit() reports the partition"
    assert sorted(done) == list(range(N))
    after_cut = [o for o, _ in seen[1:]]
    assert len(after_cut) == len(set(after_cut)), "no record handed out twice after the cut"
    ok = sum(r.count for r in reported if r.ok)
    assert ok == N, f"{ok} acknowledgements succeeded at the broker, want {N}"


async def test_reject_to_dlq_after_a_cut_writes_no_copy(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"poison"])
    reported: list[AckResult] = []
    async with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        ack_mode="explicit",
        on_acknowledged=reported.extend,
    ) as consumer:
        with anyio.fail_after(30):
            record = await consumer.__anext__()
            cut(consumer, record)
            await anyio.sleep(0.2)
            # The lock is gone: a copy now would be a duplicate of the one made on the
            # redelivery. Nothing is written, nothing raised, the loss is reported.
            assert await consumer.reject_to_dlq(record, reason="bad", topic=dlq) is None
            again = await consumer.__anext__()
            assert again.offset == record.offset
            written = await consumer.reject_to_dlq(again, reason="bad", topic=dlq)
            assert written is not None and written.offset == 0
    assert [r.reason for r in reported if not r.ok] == [AckFailure.LOCK_LOST]
