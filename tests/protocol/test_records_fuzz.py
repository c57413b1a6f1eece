"""Hypothesis: the record-batch decoder on random, truncated and corrupted input.

Invariants:

* Any bytes decode or raise CorruptRecordError; nothing else escapes.
* Cutting a valid buffer anywhere yields exactly the complete batches before the cut.
* One flipped byte is caught (CorruptRecordError) unless it lies outside the CRC:
  BaseOffset and PartitionLeaderEpoch decode with the new value; BatchLength can only
  make the scan stop early (as for a cut) or fail.
* ``max_uncompressed`` is exact: a batch decodes iff its records section fits.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sharecon.errors import CorruptRecordError
from sharecon.protocol.records import (
    Codec,
    ControlRecord,
    ControlType,
    Record,
    RecordBatch,
    TimestampType,
    encode_batch,
    encode_control_batch,
    read_batches,
)

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)
record_fields_st = st.tuples(
    st.none() | st.binary(max_size=40),  # key
    st.none() | st.binary(max_size=200),  # value
    headers_st,
    st.integers(-(2**40), 2**40),  # timestamp
    st.integers(1, 3),  # offset step (gaps as after compaction)
)


@st.composite
def batch_specs(draw: st.DrawFn) -> tuple[list[Record], dict[str, object]]:
    fields = draw(st.lists(record_fields_st, min_size=1, max_size=12))
    base = draw(st.integers(0, 2**40))
    records = []
    offset = base
    for key, value, headers, ts, step in fields:
        records.append(Record(offset, ts, key, value, headers))
        offset += step
    options: dict[str, object] = {
        "codec": draw(st.sampled_from(list(Codec))),
        "base_offset": base,
        "transactional": draw(st.booleans()),
        "producer_id": draw(st.sampled_from([-1, 7, 2**40])),
    }
    if draw(st.booleans()):
        options["timestamp_type"] = TimestampType.LOG_APPEND_TIME
    return records, options


@st.composite
def buffers(draw: st.DrawFn, max_batches: int = 3) -> tuple[bytes, list[bytes]]:
    """A valid records field of 1..max_batches batches (data and control), and its parts."""
    parts = []
    next_base = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, max_batches))):
        if draw(st.integers(0, 4)) == 0:
            parts.append(
                encode_control_batch(
                    draw(st.sampled_from([ControlType.COMMIT, ControlType.ABORT])),
                    producer_id=3,
                    producer_epoch=0,
                    base_offset=next_base,
                    coordinator_epoch=draw(st.integers(0, 50)),
                )
            )
            next_base += 1
            continue
        records, options = draw(batch_specs())
        shift = next_base - records[0].offset
        records = [
            Record(r.offset + shift, r.timestamp, r.key, r.value, r.headers) for r in records
        ]
        options["base_offset"] = next_base
        parts.append(encode_batch(records, **options))  # type: ignore[arg-type]
        next_base = records[-1].offset + 1
    return b"".join(parts), parts


def decode_everything(data: bytes) -> tuple[list[tuple[object, ...]], int]:
    """Header fields and records of every complete batch, and the bytes consumed."""
    split = read_batches(data)
    out: list[tuple[object, ...]] = []
    for b in split.batches:
        header = header_fields(b)
        content: list[Record] | list[ControlRecord]
        content = b.control_records() if b.is_control else b.records()
        out.append((header, content))
    return out, split.consumed


def header_fields(b: RecordBatch) -> tuple[int, ...]:
    return (
        b.base_offset,
        b.batch_length,
        b.partition_leader_epoch,
        b.crc,
        b.attributes,
        b.last_offset_delta,
        b.base_timestamp,
        b.max_timestamp,
        b.producer_id,
        b.producer_epoch,
        b.base_sequence,
        b.records_count,
    )


def decode_or_corrupt(data: bytes) -> None:
    try:
        decode_everything(data)
    except CorruptRecordError:
        pass


# --- round trip -------------------------------------------------------------------------


@FUZZ
@given(batch_specs())
def test_round_trip(spec: tuple[list[Record], dict[str, object]]) -> None:
    records, options = spec
    (batch,) = read_batches(encode_batch(records, **options)).batches  # type: ignore[arg-type]
    assert batch.codec == options["codec"]
    assert batch.is_transactional == options["transactional"]
    assert batch.producer_id == options["producer_id"]
    assert batch.last_offset == records[-1].offset
    if options.get("timestamp_type") == TimestampType.LOG_APPEND_TIME:
        append_time = max(r.timestamp for r in records)
        expected = [Record(r.offset, append_time, r.key, r.value, r.headers) for r in records]
    else:
        expected = records
    assert batch.records() == expected


# --- any bytes --------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_decode_or_raise_corrupt(data: bytes) -> None:
    decode_or_corrupt(data)


@FUZZ
@given(
    payload=st.binary(max_size=300),
    count=st.integers(-3, 20),
    attributes=st.integers(0, 0xFF),
    last_offset_delta=st.integers(-2, 30),
)
def test_random_records_section_with_valid_crc(
    payload: bytes, count: int, attributes: int, last_offset_delta: int
) -> None:
    """A correct header and CRC around garbage: the record parser itself is fuzzed."""
    after = (
        struct.pack(">hiqqqhii", attributes, last_offset_delta, 0, 0, -1, -1, -1, count) + payload
    )
    data = struct.pack(">qiibI", 0, 49 + len(payload), -1, 2, crc32c.crc32c(after)) + after
    decode_or_corrupt(data)


@FUZZ
@given(buffers(max_batches=1), st.data())
def test_mutated_records_with_recomputed_crc(
    buf: tuple[bytes, list[bytes]], data: st.DataObject
) -> None:
    """Plausible-but-wrong record bytes (valid batch, a few bytes changed, CRC fixed)."""
    raw = bytearray(buf[0])
    assume(len(raw) > 61)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(61, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    decode_or_corrupt(bytes(raw))


# --- truncation -------------------------------------------------------------------------


@FUZZ
@given(buffers())
def test_truncation_anywhere_gives_the_complete_batches_before_the_cut(
    buf: tuple[bytes, list[bytes]],
) -> None:
    data, parts = buf
    full, consumed = decode_everything(data)
    assert consumed == len(data)
    ends = []
    total = 0
    for p in parts:
        total += len(p)
        ends.append(total)
    for cut in range(len(data)):
        got, consumed = decode_everything(data[:cut])
        complete = sum(1 for e in ends if e <= cut)
        assert got == full[:complete]
        assert consumed == (ends[complete - 1] if complete else 0)


# --- single-byte corruption -------------------------------------------------------------


@FUZZ
@given(buffers(), st.data())
def test_single_byte_corruption(buf: tuple[bytes, list[bytes]], data: st.DataObject) -> None:
    raw, parts = buf
    index = data.draw(st.integers(0, len(raw) - 1), label="index")
    mask = data.draw(st.integers(1, 255), label="mask")
    check_corruption(raw, parts, decode_everything(raw)[0], index, mask)


@settings(FUZZ, max_examples=25)
@given(buffers(), st.integers(1, 255))
def test_single_byte_corruption_every_header_byte(
    buf: tuple[bytes, list[bytes]], mask: int
) -> None:
    """Every byte of every batch header, where the rules differ field by field."""
    raw, parts = buf
    full, _ = decode_everything(raw)
    start = 0
    for p in parts:
        for at in range(61):
            check_corruption(raw, parts, full, start + at, mask)
        start += len(p)


def check_corruption(
    raw: bytes, parts: list[bytes], full: list[tuple[object, ...]], index: int, mask: int
) -> None:
    bad = bytearray(raw)
    bad[index] ^= mask
    # Which batch, and where in it?
    start = 0
    which = 0
    for which, p in enumerate(parts):  # noqa: B007
        if index < start + len(p):
            break
        start += len(p)
    at = index - start

    if 0 <= at < 8 or 12 <= at < 16:
        # BaseOffset / PartitionLeaderEpoch: outside the CRC, so the batch decodes with
        # the changed value and everything else intact.
        got, consumed = decode_everything(bytes(bad))
        assert consumed == len(raw)
        assert len(got) == len(full)
        for j, ((h_got, c_got), (h_full, c_full)) in enumerate(zip(got, full, strict=True)):
            if j != which:
                assert (h_got, c_got) == (h_full, c_full)
                continue
            if at < 8:
                new_base = struct.unpack_from(">q", bad, start)[0]
                shift = new_base - h_full[0]  # type: ignore[index]
                assert h_got[1:] == h_full[1:]  # type: ignore[index]
                assert [r.offset for r in c_got] == [r.offset + shift for r in c_full]  # type: ignore[attr-defined]
            else:
                new_epoch = struct.unpack_from(">i", bad, start + 12)[0]
                assert h_got[2] == new_epoch  # type: ignore[index]
                assert h_got[:2] + h_got[3:] == h_full[:2] + h_full[3:]  # type: ignore[index]
                assert c_got == c_full
    elif 8 <= at < 12:
        # BatchLength: the scan may stop early (a longer length reads as a cut) or fail;
        # it can never produce different batches.
        try:
            got, consumed = decode_everything(bytes(bad))
        except CorruptRecordError:
            return
        assert got == full[: len(got)]
        assert len(got) <= which
        assert consumed < len(raw)
    else:
        # Magic, CRC, or anything the CRC covers.
        with pytest.raises(CorruptRecordError) as exc:
            decode_everything(bytes(bad))
        assert exc.value.base_offset == full[which][0][0]  # type: ignore[index]


# --- bounded decompression --------------------------------------------------------------


@FUZZ
@given(
    codec=st.sampled_from([Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]),
    value_size=st.integers(0, 3000),
    count=st.integers(1, 40),
    limit=st.integers(0, 130_000),
)
def test_decompression_limit_is_exact(
    codec: Codec, value_size: int, count: int, limit: int
) -> None:
    records = [Record(i, 0, None, bytes(value_size)) for i in range(count)]
    raw_size = len(encode_batch(records)) - 61
    (batch,) = read_batches(encode_batch(records, codec=codec, base_offset=0)).batches
    if raw_size <= limit:
        assert batch.records(max_uncompressed=limit) == records
    else:
        with pytest.raises(CorruptRecordError, match="inflates past") as exc:
            batch.records(max_uncompressed=limit)
        assert (exc.value.base_offset, exc.value.last_offset) == (0, count - 1)
