"""consumer.metrics() and producer.metrics() after real traffic against a broker."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest

from sharecon import Producer, ProducerRecord, ShareConsumer

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

N = 50


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_metrics_count_what_was_produced_and_consumed(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    with anyio.fail_after(60):
        async with Producer(kafka_bootstrap, client_id="metrics-p", linger=0.05) as producer:
            await producer.send_batch(
                [ProducerRecord(topic, b"v%03d" % i, key=b"k%d" % i) for i in range(N)]
            )
            pm = producer.metrics()
        assert pm.client_id == "metrics-p"
        assert pm.record_send_total == N and pm.record_error_total == 0
        assert pm.request_total >= 1 and pm.request_latency_avg > 0
        assert pm.batch_size_max >= pm.batch_size_avg > 0
        assert pm.buffer_available_bytes == pm.buffer_total_bytes  # nothing left in the buffer
        assert producer.metrics().record_send_rate > 0  # still readable once closed

        consumer = ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], client_id="metrics-c"
        )
        async with consumer:
            seen = 0
            async for _record in consumer:
                seen += 1
                if seen == N:
                    break
            during = consumer.metrics()
            # Exporters and scrapes read from their own threads.
            from_thread = await anyio.to_thread.run_sync(consumer.metrics)
            assert from_thread.records_consumed_total == during.records_consumed_total
            await consumer.commit()
            after = consumer.metrics()

    assert (during.client_id, during.group_id) == ("metrics-c", share_group)
    assert during.records_consumed_total >= N
    assert during.bytes_consumed_total > 0 and during.bytes_consumed_rate > 0
    assert during.fetch_total >= 1 and during.fetch_latency_max >= during.fetch_latency_avg > 0
    assert during.records_per_request_max >= 1
    assert during.heartbeat_total >= 1 and during.last_heartbeat_seconds_ago >= 0
    assert during.rebalance_total >= 1
    assert during.assigned_partitions == 3
    assert during.last_poll_seconds_ago >= 0 and not math.isnan(during.time_between_poll_avg)
    # The last record was handed out and not answered yet when the snapshot was taken.
    assert during.held_records >= 1
    # commit() sent the accept of the last record and waited for the verdict.
    assert after.acknowledgements_send_total >= N
    assert after.acknowledgements_error_total == 0
    assert after.held_records == 0
    assert after.as_dict()["acknowledgements-send-total"] == after.acknowledgements_send_total


async def test_sharecon_counters_for_expiry_renewal_and_dead_letters(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str],
) -> None:
    """Records left in the buffer past their lock are counted as expired; renew() and
    reject_to_dlq() are counted; an answer to an expired record is a failed acknowledgement."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": "1000"})
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_batch([ProducerRecord(topic, b"r%d" % i) for i in range(10)])
    with anyio.fail_after(60):
        async with ShareConsumer(
            kafka_bootstrap,
            group_id=group,
            topics=[topic],
            ack_mode="explicit",
            dlq_topic=f"{topic}.dlq",
        ) as consumer:
            first = await consumer.__anext__()
            first.renew()
            await consumer.commit()
            assert consumer.metrics().renewals_sent_total == 1
            await consumer.reject_to_dlq(first, reason="test")
            # The other nine wait in the buffer (or the next fetch) past their 1 s lock.
            await anyio.sleep(2.5)
            second = await consumer.__anext__()
            second.accept()
            await consumer.commit()
            m = consumer.metrics()
            assert m.acknowledgements_error_total == 0
            # A record held past its lock: its accept comes back refused.
            third = await consumer.__anext__()
            await anyio.sleep(2.5)
            third.accept()
            results = await consumer.commit()
            late = consumer.metrics()
    assert m.dlq_records_total == 1 and m.dlq_errors_total == 0
    # Whatever was buffered when the locks ended was dropped, not handed out, and counted.
    assert m.lock_expired_records_total >= 1, m
    assert second.delivery_count == 2  # the expired records came back
    assert any(err is not None for err in results.values()), results
    assert late.acknowledgements_error_total >= 1
