"""DeliveryBuffer rules: chunk order, back-pressure bounds, records with ended locks dropped."""

from __future__ import annotations

import uuid

from sharecon._consumer.buffer import DeliveryBuffer
from sharecon.record import Record
from sharecon.types import TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 0, "t")


def records(first: int, n: int, deadline: float | None) -> list[Record]:
    return [Record("t", 0, TP, None, deadline, first + i, 0, None, b"v", ()) for i in range(n)]


def test_fifo_and_room_signal() -> None:
    rooms: list[int] = []
    buf = DeliveryBuffer(max_records=5, max_bytes=10**6)
    buf.on_room = lambda: rooms.append(buf.records)
    buf.push(records(0, 3, None), 30)
    buf.push(records(3, 3, None), 30)
    assert not buf.has_room() and buf.records == 6
    assert [r.offset for r in buf.pop_many(4, lambda: 0.0)] == [0, 1, 2, 3]
    assert rooms == [3]  # the first chunk drained below the bound: fetchers are woken
    assert buf.pop_one(lambda: 0.0).offset == 4  # type: ignore[union-attr]
    assert buf.records == 1
    assert buf.has_room(extra_records=4) is False and buf.has_room(extra_records=3)


def test_records_with_ended_locks_are_dropped() -> None:
    buf = DeliveryBuffer(max_records=100, max_bytes=10**6)
    buf.push(records(0, 3, deadline=10.0), 30)
    buf.push(records(3, 2, deadline=50.0), 20)
    assert buf.pop_one(lambda: 5.0).offset == 0  # type: ignore[union-attr]
    # Later the first chunk's lock has ended: its rest is dropped at the next 64-record
    # boundary or chunk start; the second chunk is still good.
    got = buf.pop_many(10, lambda: 20.0)
    assert [r.offset for r in got] == [3, 4]
    assert buf.expired == 2 and buf.records == 0


def test_clear_returns_what_was_held() -> None:
    buf = DeliveryBuffer(max_records=100, max_bytes=10**6)
    buf.push(records(0, 4, None), 40)
    buf.pop_one(lambda: 0.0)
    assert [r.offset for r in buf.clear()] == [1, 2, 3]
    assert buf.records == 0 and buf.nbytes == 0
