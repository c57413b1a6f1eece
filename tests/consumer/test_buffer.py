"""DeliveryBuffer rules: lazy batch decoding, bounds in decoded bytes, ended locks and lost
sessions dropped, the application's view in offset order."""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING

import pytest

from sharecon._consumer.buffer import SLICE, Chunk, DeliveryBuffer
from sharecon._share.intake import Decoded, take_partition
from sharecon._share.session import SessionTag
from sharecon.protocol.compression import Codec
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import BatchInfo, Record, TimestampType, record_factory
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable

TP = TopicIdPartition(uuid.uuid4(), 0, "t")
TAG = SessionTag(1, 0)
NOW = lambda: 0.0  # noqa: E731
INFO = BatchInfo(None, TimestampType.CREATE_TIME, None)


def batch(first: int, n: int, *, size: int = 10, codec: Codec = Codec.NONE) -> bytes:
    recs = [WireRecord(first + i, 0, None, b"x" * size, ()) for i in range(n)]
    return encode_batch(recs, base_offset=first, codec=codec)


def chunk(
    first: int,
    batches: list[tuple[int, int]],
    *,
    deadline: float | None = None,
    tag: SessionTag = TAG,
    size: int = 10,
    codec: Codec = Codec.NONE,
) -> Chunk:
    """A chunk acquiring every offset of ``batches`` (``(first, count)`` each)."""
    data = b"".join(batch(f, n, size=size, codec=codec) for f, n in batches)
    last = batches[-1][0] + batches[-1][1] - 1
    intake = take_partition(TP, [(first, last, 1)], data)
    factory = partial(record_factory, "t", 0, TP, None, deadline)
    return Chunk(intake, tag, deadline, factory)


class Harness:
    """A buffer wired the way the consumer core wires it, recording the callbacks."""

    def __init__(self, *, max_records: int = 1000, max_bytes: int = 10**6) -> None:
        self.buf = DeliveryBuffer(max_records=max_records, max_bytes=max_bytes)
        self.decoded: list[int] = []
        self.dropped: list[tuple[int, int]] = []
        self.rooms = 0
        self.buf.decoder = self.decode
        self.buf.on_drop = lambda c, first: self.dropped.append((first, c.last_offset()))
        self.buf.on_room = self.room

    def room(self) -> None:
        self.rooms += 1

    def decode(self, c: Chunk, limit: int | None) -> Decoded[Record] | None:
        d = c.intake.decode_next(c.factory(INFO), limit=limit)
        if d is not None:
            self.decoded.append(len(d.records))
        return d


def test_batches_are_decoded_only_when_reached() -> None:
    h = Harness()
    h.buf.push(chunk(0, [(0, 3), (3, 3), (6, 3)]))
    assert h.decoded == [] and h.buf.records == 9
    assert h.buf.pop_one(NOW).offset == 0  # type: ignore[union-attr]
    assert h.decoded == [3]  # one batch decoded, two still raw
    assert [h.buf.pop_one(NOW).offset for _ in range(3)] == [1, 2, 3]  # type: ignore[union-attr]
    assert h.decoded == [3, 3]
    assert h.buf.records == 5


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
def test_one_by_one_a_large_batch_is_built_in_slices(codec: Codec) -> None:
    """pop_one builds a batch SLICE records at a time (rule 2), each slice when the one
    before is used up; the buffer's counts and a drop mid-batch see the slices right."""
    n = 2 * SLICE + 44
    h = Harness()
    h.buf.push(chunk(0, [(0, n)], codec=codec))
    assert h.buf.pop_one(NOW).offset == 0  # type: ignore[union-attr]
    assert h.decoded == [SLICE] and h.buf.records == n - 1
    got = [h.buf.pop_one(NOW).offset for _ in range(SLICE)]  # type: ignore[union-attr]
    assert got == list(range(1, SLICE + 1))
    assert h.decoded == [SLICE, SLICE] and h.buf.records == n - 1 - SLICE
    assert h.buf.chunks()[0].next_offset() == SLICE + 1
    # The lock ends mid-batch: the rest, built or not, is dropped from the next offset.
    assert h.buf.pop_one(lambda: 99.0).offset == SLICE + 1  # type: ignore[union-attr]
    h.buf.chunks()[0].deadline = 50.0
    assert h.buf.pop_one(lambda: 99.0) is None
    assert h.dropped == [(SLICE + 2, n - 1)]
    assert h.buf.records == 0 and h.buf.nbytes == 0


def test_pop_many_takes_the_rest_of_a_sliced_batch_whole() -> None:
    n = 3 * SLICE
    h = Harness()
    h.buf.push(chunk(0, [(0, n), (n, 5)]))
    assert h.buf.pop_one(NOW).offset == 0  # type: ignore[union-attr]
    got = h.buf.pop_many(10 * n, NOW)
    assert [r.offset for r in got] == list(range(1, n + 5))
    assert h.decoded == [SLICE, n - SLICE, 5]
    assert h.buf.records == 0 and h.buf.nbytes == 0


def test_fifo_across_chunks_and_room_signal() -> None:
    h = Harness(max_records=5)
    h.buf.push(chunk(0, [(0, 3)]))
    h.buf.push(chunk(3, [(3, 3)]))
    assert not h.buf.has_room() and h.buf.records == 6
    got = h.buf.pop_many(4, NOW)
    assert [r.offset for r in got] == [0, 1, 2, 3]
    assert h.rooms >= 1  # drained below the bound: fetchers are woken
    assert h.buf.pop_one(NOW).offset == 4  # type: ignore[union-attr]
    assert h.buf.records == 1
    assert h.buf.has_room(extra_records=3) and not h.buf.has_room(extra_records=4)
    assert h.buf.pop_one(NOW).offset == 5  # type: ignore[union-attr]
    assert h.buf.pop_one(NOW) is None and len(h.buf) == 0


def test_bytes_bound_counts_decompressed_size() -> None:
    # 10 records of 100 KiB zeros compress to almost nothing on the wire.
    h = Harness(max_bytes=512 * 1024)
    c = chunk(0, [(i, 1) for i in range(10)], size=100 * 1024, codec=Codec.ZSTD)
    wire = c.intake.wire
    h.buf.push(c)
    assert h.buf.nbytes == wire < 10_000
    h.buf.pop_one(NOW)
    # Now one batch is decoded: the buffer counts its 100 KiB, not its wire bytes.
    assert h.buf.nbytes > 100 * 1024


def test_pop_many_stops_at_the_decoded_byte_bound_but_never_returns_nothing() -> None:
    h = Harness(max_bytes=250 * 1024)
    h.buf.push(chunk(0, [(i, 1) for i in range(10)], size=100 * 1024, codec=Codec.ZSTD))
    first = h.buf.pop_many(100, NOW)
    assert [r.offset for r in first] == [0, 1, 2]  # three batches pass the 250 KiB bound
    assert h.decoded == [1, 1, 1]
    # A single record larger than the whole bound is still delivered, alone.
    h2 = Harness(max_bytes=1024)
    h2.buf.push(chunk(0, [(0, 1), (1, 1)], size=64 * 1024, codec=Codec.GZIP))
    assert [r.offset for r in h2.buf.pop_many(100, NOW)] == [0]
    assert [r.offset for r in h2.buf.pop_many(100, NOW)] == [1]


def test_records_with_ended_locks_are_dropped_and_forgotten() -> None:
    h = Harness()
    h.buf.push(chunk(0, [(0, 3)], deadline=10.0))
    h.buf.push(chunk(3, [(3, 2)], deadline=50.0))
    assert h.buf.pop_one(lambda: 5.0).offset == 0  # type: ignore[union-attr]
    # The first chunk's lock ends: the rest of it is dropped, even mid-batch (a record
    # whose lock ended is never handed out); the second chunk is still good.
    got = h.buf.pop_many(10, lambda: 20.0)
    assert [r.offset for r in got] == [3, 4]
    assert h.dropped == [(1, 2)]
    h2 = Harness()
    h2.buf.push(chunk(0, [(0, 3)], deadline=10.0))
    assert h2.buf.pop_one(lambda: 5.0).offset == 0  # type: ignore[union-attr]
    assert h2.buf.pop_one(lambda: 20.0) is None  # one at a time, too
    assert h2.dropped == [(1, 2)]
    h3 = Harness()
    h3.buf.push(chunk(0, [(0, 3), (3, 3)], deadline=10.0))
    h3.buf.push(chunk(6, [(6, 2)], deadline=50.0))
    assert [h3.buf.pop_one(lambda: 5.0).offset for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    # The second batch of the first chunk is never decoded: its lock ended.
    assert h3.buf.pop_one(lambda: 20.0).offset == 6  # type: ignore[union-attr]
    assert h3.dropped == [(3, 5)] and h3.buf.expired == 3
    assert h3.decoded == [3, 2]


def test_drop_by_session_forgets_what_was_not_handed_out() -> None:
    h = Harness()
    lost = SessionTag(1, 0)
    kept = SessionTag(2, 0)
    h.buf.push(chunk(0, [(0, 4), (4, 4)], tag=lost))
    h.buf.push(chunk(100, [(100, 2)], tag=kept))
    assert h.buf.pop_one(NOW).offset == 0  # type: ignore[union-attr]
    assert h.buf.drop(lambda c: c.tag == lost) == 7  # records never handed out
    assert h.dropped == [(1, 7)]
    assert h.buf.records == 2
    assert [r.offset for r in h.buf.pop_many(10, NOW)] == [100, 101]
    assert h.buf.records == 0 and h.buf.nbytes >= 0


def test_clear_drops_everything() -> None:
    h = Harness()
    h.buf.push(chunk(0, [(0, 4)]))
    h.buf.pop_one(NOW)
    assert h.buf.clear() == 3
    assert h.dropped == [(1, 3)]
    assert h.buf.records == 0 and h.buf.nbytes == 0 and h.buf.pop_one(NOW) is None


def test_holds_names_only_records_not_handed_out_yet() -> None:
    h = Harness()
    h.buf.push(chunk(0, [(0, 3), (3, 3)]))
    h.buf.push(chunk(10, [(10, 2)]))
    assert [h.buf.holds(TP, o) for o in (0, 5, 6, 10, 11, 12)] == [True] * 2 + [False] + [
        True
    ] * 2 + [False]
    assert [h.buf.pop_one(NOW).offset for _ in range(4)] == [0, 1, 2, 3]  # type: ignore[union-attr]
    assert [h.buf.holds(TP, o) for o in (0, 3, 4, 5, 10)] == [False, False, True, True, True]
    other = TopicIdPartition(uuid.uuid4(), 0, "t")
    assert not h.buf.holds(other, 4)


def test_a_chunk_admit_refuses_is_not_buffered() -> None:
    h = Harness()
    refused: list[int] = []

    def refuse(c: Chunk) -> bool:
        refused.append(c.intake.ranges[0].first_offset)
        return False

    h.buf.admit = refuse
    h.buf.push(chunk(0, [(0, 3)]))
    assert refused == [0] and len(h.buf) == 0 and h.buf.records == 0 and h.buf.nbytes == 0
    assert h.buf.pop_one(NOW) is None
    h.buf.admit = lambda c: True
    h.buf.push(chunk(5, [(5, 1)]))
    assert h.buf.pop_one(NOW).offset == 5  # type: ignore[union-attr]


def test_one_answer_may_wait_past_the_default_record_bound() -> None:
    h = Harness(max_records=5)
    h.buf.push(chunk(0, [(0, 6)]))  # one answer over the record bound on its own
    assert not h.buf.has_room()
    assert not h.buf.single_chunk()  # an explicit bound stays strict
    h.buf.overlap = True
    assert h.buf.single_chunk() and not h.buf.single_chunk(extra_records=6)
    h.buf.push(chunk(6, [(6, 6)]))
    assert not h.buf.single_chunk()
    rooms = h.rooms
    assert len(h.buf.pop_many(6, NOW)) == 6  # the first chunk handed out
    assert h.rooms == rooms  # used up, but not yet popped: nothing to fetch for
    assert [r.offset for r in h.buf.pop_many(1, NOW)] == [6]
    # The first chunk is gone and one is left: the fetchers are woken to fetch one ahead.
    assert h.rooms == rooms + 1 and h.buf.single_chunk()
    h.buf.stopped = True
    assert not h.buf.single_chunk()


def test_a_hold_is_asked_not_told_so_it_ends_with_the_breakers_cool_down() -> None:
    from sharecon._share.breaker import DeadLetterBreaker

    now = [0.0]
    breaker = DeadLetterBreaker(0.5, 4, cooldown=1.0)
    h = Harness()
    h.buf.overlap = True
    h.buf.held = lambda: breaker.is_open(now[0])
    assert h.buf.has_room()
    while not breaker.outcome(True, now[0]):
        pass
    assert not h.buf.has_room() and not h.buf.single_chunk()
    h.buf.resume()
    assert h.rooms == 0  # held: the fetchers are not woken
    now[0] = 1.0  # the cool-down ends; nobody told the buffer anything
    assert h.buf.has_room() and h.buf.single_chunk()
    h.buf.resume()
    assert h.rooms == 1


def test_the_callers_clock_reading_serves_the_first_lock_check_only() -> None:
    """``pop_one(clock, now)``: ``now`` (the cursor's one reading per record) decides the
    check of a decoded record without reading the clock; once a batch must be decoded,
    the clock is read again."""
    reads: list[float] = []

    def clock(t: float) -> Callable[[], float]:
        def read() -> float:
            reads.append(t)
            return t

        return read

    h = Harness()
    h.buf.push(chunk(0, [(0, 3)], deadline=10.0))
    assert h.buf.pop_one(clock(5.0)).offset == 0  # type: ignore[union-attr]
    reads.clear()
    assert h.buf.pop_one(clock(5.0), 5.0).offset == 1  # type: ignore[union-attr]
    assert reads == []  # one reading per record: the caller's
    assert h.buf.pop_one(clock(20.0), 20.0) is None  # the lock ended: dropped
    assert h.dropped == [(2, 2)]
    h2 = Harness()
    h2.buf.push(chunk(0, [(0, 3)], deadline=10.0))
    # Nothing decoded yet: an old reading does not let the batch out after its lock.
    assert h2.buf.pop_one(clock(20.0), 5.0) is None
    assert h2.dropped == [(0, 2)] and h2.decoded == []
