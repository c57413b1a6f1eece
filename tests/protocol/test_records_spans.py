"""Decoding only the records inside offset spans (``RecordBatch.records(spans=...)``).

What a consumer asks for is the acquired offsets: the records outside them are skipped
without being built, and decoding stops after the last span. These tests check that
only the asked-for records are built, that skipping is exact at every varint size and
with every codec, that a span decode equals a full decode filtered by offset, and which
corruption is still found in the skipped part (see ``records.BatchReader``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharecon.errors import CorruptRecordError
from sharecon.protocol.records import (
    Codec,
    ControlType,
    Record,
    RecordBatch,
    TimestampType,
    encode_batch,
    encode_control_batch,
    read_batches,
)
from tests.protocol.test_records import hand_batch, hand_record, zz

if TYPE_CHECKING:
    from sharecon.protocol.records import Headers

Span = tuple[int, int]


class Counting:
    """A record factory that counts the records it builds."""

    def __init__(self) -> None:
        self.built: list[int] = []

    def __call__(
        self, offset: int, ts: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> Record:
        self.built.append(offset)
        return Record(offset, ts, key, value, headers)


def only(batch: RecordBatch, spans: list[Span]) -> tuple[list[Record], list[int]]:
    factory = Counting()
    got = batch.records(factory, spans=spans)
    return got, factory.built


def one_batch(data: bytes) -> RecordBatch:
    (batch,) = read_batches(data).batches
    return batch


def in_spans(offset: int, spans: list[Span]) -> bool:
    return any(lo <= offset <= hi for lo, hi in spans)


# Value sizes around every record-length varint boundary: the length of a record body is
# its value size plus 7 or 8 bytes here, and a zig-zag varint holds 63 in one byte,
# 8191 in two, 1048575 in three.
BOUNDARY_SIZES = [0, 1, 54, 55, 56, 57, 58, 63, 64, 120, 8180, 8183, 8184, 8185, 8191, 8200]
BOUNDARY_SIZES += [1_048_560, 1_048_569]


def boundary_records(base: int, *, gaps: bool) -> list[Record]:
    out = []
    offset = base
    for i, size in enumerate(BOUNDARY_SIZES):
        key = None if i % 2 else b"k%d" % i
        headers: Headers = (("h", b"x"),) if i % 5 == 4 else ()
        out.append(Record(offset, 1_000 + i * 300, key, bytes([i]) * size, headers))
        offset += 1 + (i % 3 if gaps else 0)
    return out


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
@pytest.mark.parametrize("gaps", [False, True], ids=["dense", "gaps"])
def test_each_record_alone_at_every_varint_boundary(codec: Codec, gaps: bool) -> None:
    records = boundary_records(1_000, gaps=gaps)
    batch = one_batch(encode_batch(records, codec=codec, base_offset=1_000))
    full = batch.records()
    assert full == records
    for rec in records:
        got, built = only(batch, [(rec.offset, rec.offset)])
        assert got == [rec]
        assert built == [rec.offset]
    # Every other record, as separate one-offset spans, and a span over a gap's edges.
    spans = [(r.offset, r.offset) for r in records[::2]]
    got, built = only(batch, spans)
    assert got == records[::2] and built == [r.offset for r in records[::2]]


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_one_acquired_offset_of_a_big_batch_builds_one_record(codec: Codec) -> None:
    records = [Record(500 + i, 7, None, b"") for i in range(20_000)]
    batch = one_batch(encode_batch(records, codec=codec, base_offset=500))
    for offset in (500, 519, 10_000, 20_499):
        got, built = only(batch, [(offset, offset)])
        assert [r.offset for r in got] == built == [offset]
    got, built = only(batch, [(510, 512), (700, 700), (20_490, 30_000)])
    expected = [510, 511, 512, 700, *range(20_490, 20_500)]
    assert [r.offset for r in got] == built == expected


def test_spans_outside_the_batch_build_nothing_and_do_not_decompress() -> None:
    records = [Record(100 + i, 0, None, b"v") for i in range(10)]
    batch = one_batch(encode_batch(records, codec=Codec.ZSTD, base_offset=100))
    for spans in ([(0, 99)], [(110, 200)], [(0, 50), (300, 400)], []):
        got, built = only(batch, spans)
        assert got == [] and built == []
        assert batch.decoded_size == 0
    # A span reaching past either end is clipped to the batch.
    got, _ = only(batch, [(0, 100), (109, 10**12)])
    assert [r.offset for r in got] == [100, 109]
    # Spans covering the whole batch decode it whole.
    got, built = only(batch, [(50, 150)])
    assert got == records and len(built) == 10


def test_control_batches_have_no_data_records_whatever_the_spans() -> None:
    batch = one_batch(
        encode_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0, base_offset=9)
    )
    assert only(batch, [(9, 9)]) == ([], [])
    assert only(batch, [(0, 8)]) == ([], [])


def test_log_append_time_applies_to_the_records_built() -> None:
    records = [Record(i, i, None, b"v") for i in range(50)]
    data = encode_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=77)
    got, _ = only(one_batch(data), [(20, 21)])
    assert [(r.offset, r.timestamp) for r in got] == [(20, 77), (21, 77)]


def test_bad_spans_are_a_callers_bug() -> None:
    batch = one_batch(encode_batch([Record(0, 0, None, b"v")]))
    for spans in ([(5, 4)], [(3, 4), (1, 2)], [(1, 3), (3, 4)]):
        with pytest.raises(ValueError, match="sorted, disjoint"):
            batch.records(spans=spans)


# --- the property: a span decode is a full decode filtered by offset -----------------------

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)

record_st = st.tuples(
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2).map(
        tuple
    ),
    st.integers(1, 3),  # offset step: 1 everywhere gives a dense batch
)


@st.composite
def batch_and_spans(draw: st.DrawFn) -> tuple[bytes, list[Span]]:
    fields = draw(st.lists(record_st, min_size=1, max_size=40))
    dense = draw(st.booleans())
    base = draw(st.integers(0, 2**40))
    records = []
    offset = base
    for key, value, headers, step in fields:
        records.append(Record(offset, 1_000 + offset - base, key, value, headers))
        offset += 1 if dense else step
    data = encode_batch(records, codec=draw(st.sampled_from(list(Codec))), base_offset=base)
    # Sorted, disjoint spans around and inside the batch (some past either end).
    cuts = sorted(
        draw(st.sets(st.integers(base - 3, offset + 3), min_size=0, max_size=10)),
    )
    spans = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    spans = [(lo, hi - draw(st.integers(0, hi - lo))) for lo, hi in spans]
    return data, spans


@FUZZ
@given(batch_and_spans())
def test_span_decode_equals_full_decode_filtered_by_offset(case: tuple[bytes, list[Span]]) -> None:
    data, spans = case
    batch = one_batch(data)
    full = batch.records()
    got, built = only(batch, spans)
    expected = [r for r in full if in_spans(r.offset, spans)]
    assert got == expected
    assert built == [r.offset for r in expected]


@FUZZ
@given(batch_and_spans(), st.booleans(), st.integers(1, 7))
def test_a_reader_in_slices_builds_what_one_decode_builds(
    case: tuple[bytes, list[Span]], whole: bool, limit: int
) -> None:
    """``RecordBatch.reader().take(limit)`` until done: the records of ``records()``,
    at most ``limit`` at a time, each built once, and the slices' bytes add up to the
    batch's decoded size."""
    data, spans = case
    expected = one_batch(data).records(spans=None if whole else spans)
    batch = one_batch(data)
    factory = Counting()
    reader = batch.reader(factory, spans=None if whole else spans)
    got: list[Record] = []
    nbytes = 0
    while not reader.done:
        piece = reader.take(limit)
        assert len(piece) <= limit
        assert piece or reader.done  # empty only when nothing was left
        got += piece
        nbytes += reader.taken_bytes
    assert reader.take(limit) == []
    assert got == expected
    assert factory.built == [r.offset for r in expected]
    if expected:
        assert nbytes == batch.decoded_size


def test_damage_after_the_first_slice_is_raised_by_the_slice_that_reaches_it() -> None:
    tail = hand_record(2, 0, None, b"v") + b"\x00"  # a byte after the last record
    batch = hand([hand_record(0, 0, None, b"a"), hand_record(1, 0, None, b"b"), tail])
    reader = batch.reader(Counting())
    assert [r.offset for r in reader.take(2)] == [10, 11]
    with pytest.raises(CorruptRecordError, match="1 bytes left after the 3 records"):
        reader.take(2)
    assert reader.done


# --- corruption in and around the skipped records ------------------------------------------


def records_payload(*records: bytes) -> bytes:
    return b"".join(records)


GOOD = hand_record(0, 0, None, b"ok")


def hand(payload_records: list[bytes], *, codec: Codec = Codec.NONE, **kw: int) -> RecordBatch:
    payload = records_payload(*payload_records)
    if codec == Codec.ZSTD:
        payload = zstandard.ZstdCompressor().compress(payload)
    return one_batch(
        hand_batch(payload, len(payload_records), attributes=int(codec), base_offset=10, **kw)
    )


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD], ids=lambda c: c.name)
def test_bad_framing_before_the_span_is_still_found(codec: Codec) -> None:
    # Record 1's length is odd (negative): skipping needs the length, so it is checked.
    bad = zz(-4) + b"\x00" * 8
    batch = hand([hand_record(0, 0, None, b"a"), bad, hand_record(2, 0, None, b"c")], codec=codec)
    with pytest.raises(CorruptRecordError, match="record 1.*record length -4"):
        batch.records(spans=[(12, 12)])
    # A length running past the batch's end.
    batch = hand([hand_record(0, 0, None, b"a"), zz(400) + b"\x00" * 6, GOOD], codec=codec)
    with pytest.raises(CorruptRecordError, match="record 1.*record length 400"):
        batch.records(spans=[(12, 12)])


def test_a_bad_field_inside_a_skipped_record_is_not_looked_at() -> None:
    # Record 1 is well framed but its key length is -3: a full decode refuses the batch;
    # decoding only offset 12 steps over record 1 by its length and never reads the key
    # (documented in records.BatchReader: the CRC covers it, and it is never handed out).
    bad = zz(6) + b"\x00\x00\x02" + zz(-3) + b"\x00\x00"
    batch = hand([hand_record(0, 0, None, b"a"), bad, hand_record(2, 0, None, b"c")])
    with pytest.raises(CorruptRecordError, match="key length -3"):
        batch.records()
    assert [(r.offset, r.value) for r in batch.records(spans=[(12, 12)])] == [(12, b"c")]
    # Asking for it builds it, and then it is checked.
    with pytest.raises(CorruptRecordError, match="record 1.*key length -3"):
        batch.records(spans=[(11, 12)])


def test_records_after_the_last_span_are_not_looked_at_but_a_built_tail_is() -> None:
    tail_garbage = [hand_record(0, 0, None, b"a"), hand_record(1, 0, None, b"b")]
    payload = records_payload(*tail_garbage) + b"\x07\x07"
    batch = one_batch(hand_batch(payload, 2, base_offset=10))
    with pytest.raises(CorruptRecordError, match="2 bytes left"):
        batch.records()
    assert [r.offset for r in batch.records(spans=[(10, 10)])] == [10]
    # The span reaches the last record: the bytes after it are checked as in a full decode.
    with pytest.raises(CorruptRecordError, match="2 bytes left"):
        batch.records(spans=[(11, 11)])


def test_a_dense_run_at_the_wrong_offsets_is_refused() -> None:
    # Three records, three offsets (dense), but the last claims delta 5: a full decode
    # gives offset 15, past the batch's last offset 12 (intake refuses the batch for it);
    # a span decode checks each run sits at exactly base + index.
    records = [hand_record(0, 0, None, b"a"), hand_record(1, 0, None, b"b")]
    records.append(hand_record(5, 0, None, b"c"))
    batch = one_batch(hand_batch(records_payload(*records), 3, base_offset=10))
    assert [r.offset for r in batch.records()] == [10, 11, 15]
    with pytest.raises(CorruptRecordError, match="batch without gaps has 12"):
        batch.records(spans=[(12, 12)])
    # Skipped records' offsets are not read in a dense batch: asking for 10 only works.
    assert [r.offset for r in batch.records(spans=[(10, 10)])] == [10]


def test_offsets_out_of_order_in_a_batch_with_gaps_are_found_while_skipping() -> None:
    # Four offsets, three records (gaps): skipping reads each offset, and they must rise.
    records = [
        hand_record(0, 0, None, b"a"),
        hand_record(2, 0, None, b"b"),
        hand_record(1, 0, None, b"c"),
    ]
    batch = one_batch(hand_batch(records_payload(*records), 3, base_offset=10, last_offset_delta=3))
    with pytest.raises(CorruptRecordError, match="record 2.*offset 11 does not follow"):
        batch.records(spans=[(13, 13)])
    assert [r.offset for r in batch.records(spans=[(10, 10)])] == [10]
