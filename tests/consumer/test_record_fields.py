"""Record fields taken from the batch header or derived on demand: timestamp type, leader
epoch, serialized sizes, the wall-clock lock deadline (unit tests; the broker test is in
``test_api.py``)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from typing import Any, cast

import anyio
import pytest

from sharecon._consumer.buffer import Chunk
from sharecon._consumer.config import ConsumerConfig
from sharecon._consumer.core import ConsumerCore
from sharecon._share.intake import take_partition
from sharecon._share.session import SessionTag
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import BatchInfo, Record, TimestampType, record_factory
from sharecon.types import TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 0, "t")
TAG = SessionTag(1, 0)


def hand_built(
    key: bytes | None = None, value: bytes | None = b"v", *, batch: BatchInfo | None = None
) -> Record:
    return Record("t", 0, TP, None, 10.0, batch, 7, 1_700_000_000_000, key, value, ())


def test_sizes_are_byte_lengths_and_minus_one_for_null() -> None:
    assert (
        hand_built(None, None).serialized_key_size,
        hand_built(None, None).serialized_value_size,
    ) == (-1, -1)
    assert (
        hand_built(b"", b"").serialized_key_size,
        hand_built(b"", b"").serialized_value_size,
    ) == (0, 0)
    rec = hand_built(b"key", "é".encode() * 3)
    assert (rec.serialized_key_size, rec.serialized_value_size) == (3, 6)


def test_a_record_without_batch_information_says_unknown() -> None:
    rec = hand_built()
    assert rec.timestamp_type is TimestampType.CREATE_TIME
    assert rec.leader_epoch is None
    assert rec.lock_expires_at is None


def test_lock_expires_at_follows_the_monotonic_deadline() -> None:
    rec = hand_built(batch=BatchInfo(2, TimestampType.CREATE_TIME, 1_700_000_000.0))
    assert rec.lock_expires_at == datetime.fromtimestamp(1_700_000_010.0, tz=timezone.utc)
    rec.lock_deadline = 25.5  # what a successful renew does
    assert rec.lock_expires_at == datetime.fromtimestamp(1_700_000_025.5, tz=timezone.utc)
    rec.lock_deadline = None
    assert rec.lock_expires_at is None
    unknown_clock = hand_built(batch=BatchInfo(2, TimestampType.CREATE_TIME, None))
    assert unknown_clock.lock_expires_at is None


def _core() -> ConsumerCore:
    return ConsumerCore(
        cast("Any", None), ConsumerConfig(group_id="g", topics=("t",)), cast("Any", None)
    )


def _chunk(data: bytes, first: int, last: int, deadline: float | None) -> Chunk:
    from functools import partial

    intake = take_partition(TP, [(first, last, 1)], data)
    return Chunk(intake, TAG, deadline, partial(record_factory, "t", 0, TP, None, deadline))


def _batch(first: int, n: int, **kwargs: Any) -> bytes:
    recs = [WireRecord(first + i, 1_000 + i, b"k", b"v%d" % i, ()) for i in range(n)]
    return encode_batch(recs, base_offset=first, **kwargs)


@pytest.mark.anyio
async def test_each_record_gets_its_own_batchs_epoch_and_timestamp_type() -> None:
    data = (
        _batch(0, 3, partition_leader_epoch=4)
        + _batch(3, 2, partition_leader_epoch=4)
        + _batch(
            5,
            2,
            partition_leader_epoch=5,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            max_timestamp=9_999,
        )
        + _batch(7, 1)  # a batch that does not know its leader epoch (-1)
    )
    core = _core()
    chunk = _chunk(data, 0, 7, deadline=100.0)
    before = time.time() - anyio.current_time()
    records: list[Record] = []
    while (d := core.handout.decode(chunk)) is not None:
        records.extend(d.records)
    after = time.time() - anyio.current_time()

    assert [r.offset for r in records] == list(range(8))
    assert [r.leader_epoch for r in records] == [4, 4, 4, 4, 4, 5, 5, None]
    assert [r.timestamp_type for r in records] == [TimestampType.CREATE_TIME] * 5 + [
        TimestampType.LOG_APPEND_TIME
    ] * 2 + [TimestampType.CREATE_TIME]
    assert [r.timestamp for r in records[5:7]] == [9_999, 9_999]
    # One BatchInfo per run of batches that agree, never one per record.
    assert len({id(r._batch) for r in records}) == 3
    # The wall-clock deadline is the monotonic one moved by the clocks' offset.
    expires = records[0].lock_expires_at
    assert expires is not None
    assert before - 1e-3 <= expires.timestamp() - 100.0 <= after + 1e-3
    assert all(r.lock_expires_at == expires for r in records)


@pytest.mark.anyio
async def test_records_of_a_chunk_without_deadline_have_no_wall_clock_deadline() -> None:
    core = _core()
    chunk = _chunk(_batch(0, 2, partition_leader_epoch=0), 0, 1, deadline=None)
    d = core.handout.decode(chunk)
    assert d is not None
    assert [(r.leader_epoch, r.lock_expires_at) for r in d.records] == [(0, None), (0, None)]
