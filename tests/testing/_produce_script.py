"""One script of raw idempotent Produce batches (producer id, epoch, sequence, record count),
played against a partition's leader and against the model partition
(sharecon.testing.model.produce) side by side: a real broker's answers hold the model true
(test_produce_model_conformance.py), and FakeKafka's must be the model's (test_fake.py)."""

from __future__ import annotations

import time

import anyio

from sharecon._net.connect import ConnectionConfig, open_connection
from sharecon.admin import Admin
from sharecon.protocol import InitProducerIdRequest
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from sharecon.protocol.records import BatchBuilder
from sharecon.testing.model.produce import ProducePartition

__all__ = ["SCRIPT", "play"]

#: (producer: "a" or "b", first sequence, records, what it shows)
SCRIPT = [
    ("a", 0, 2, "a first batch"),
    ("a", 2, 1, "in sequence"),
    ("a", 0, 2, "a resend of one of the last five batches: its first offset"),
    ("a", 5, 1, "a gap: OUT_OF_ORDER_SEQUENCE_NUMBER"),
    ("a", 1, 1, "an overlap that is no resend: OUT_OF_ORDER_SEQUENCE_NUMBER"),
    ("b", 7, 1, "a producer id with no state takes any sequence (simulation seed 63)"),
    ("b", 8, 2, "and goes on from there"),
    ("a", 3, 1, "five more of a"),
    ("a", 4, 1, ""),
    ("a", 5, 1, ""),
    ("a", 6, 1, ""),
    ("a", 7, 1, ""),
    ("a", 0, 2, "a resend older than the last five: OUT_OF_ORDER (simulation seed 176)"),
    ("a", 7, 1, "the last one again: its offset"),
    ("a", 5, 1, "one of the last five, not the last: its offset"),
]


async def play(bootstrap: str, topic: str) -> list[str]:
    """Play :data:`SCRIPT` to partition 0 of ``topic`` (fresh, one partition) and to a
    fresh model partition; each batch whose ``(error code, base offset)`` differ, told."""
    async with Admin(bootstrap) as admin:
        meta = await admin.metadata([topic])
    topic_id = meta.topic_ids[topic]
    leader = meta.leader_for(topic_id, 0)
    assert leader is not None
    model = ProducePartition()
    config = ConnectionConfig(client_id="produce-conformance", request_timeout=20.0)
    wrong = []
    async with anyio.create_task_group() as tg:
        conn = await open_connection(meta.brokers[leader], config, tg)
        try:
            ids = {}
            for name in ("a", "b"):
                # Retriable while the broker loads its producer id manager (a fresh broker).
                with anyio.fail_after(60):
                    while True:
                        got = await conn.request(
                            InitProducerIdRequest(
                                transactional_id=None, transaction_timeout_ms=60_000
                            ),
                            timeout=20,
                        )
                        if got.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                            break
                        await anyio.sleep(0.5)
                assert got.error_code == ErrorCode.NONE, got
                ids[name] = (got.producer_id, got.producer_epoch)
            for name, seq, count, what in SCRIPT:
                pid, epoch = ids[name]
                builder = BatchBuilder()
                now = int(time.time() * 1000)
                for i in range(count):
                    builder.append(now, None, b"%s%d" % (name.encode(), seq + i), ())
                data = builder.build(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
                resp = await conn.request(
                    ProduceRequest(
                        transactional_id=None,
                        acks=-1,
                        timeout_ms=10_000,
                        topic_data=(
                            TopicProduceData(
                                name=topic,
                                topic_id=topic_id,
                                partition_data=(PartitionProduceData(index=0, records=data),),
                            ),
                        ),
                    ),
                    timeout=20,
                )
                part = resp.responses[0].partition_responses[0]
                real = (part.error_code, part.base_offset if part.error_code == 0 else -1)
                expected = model.append(data)
                if real != expected:
                    wrong.append(
                        f"{name} seq {seq} x{count} ({what}): leader {real}, model {expected}"
                    )
        finally:
            await conn.aclose()
    return wrong
