"""RecordBatch v2: round trips, batches assembled by hand, control batches, bad input.

Batches "from other implementations" are assembled here with struct, crc32c and the
codec libraries directly (a separate, deliberately naive encoder), so a bug shared by
our encoder and decoder cannot hide.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import pickle
import random
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import crc32c
import lz4.frame
import pytest
import snappy
import zstandard

from sharecon.errors import CorruptRecordError, LocalProtocolError
from sharecon.protocol.compression import XERIAL_MAGIC
from sharecon.protocol.records import (
    NO_HEADERS,
    Codec,
    ControlRecord,
    ControlType,
    Record,
    RecordBatch,
    TimestampType,
    decode_records,
    encode_batch,
    encode_control_batch,
    read_batches,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# --- an independent, naive encoder ------------------------------------------------------


def zz(value: int) -> bytes:
    """Zig-zag varint, written the slow obvious way."""
    n = value * 2 if value >= 0 else -value * 2 - 1
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def hand_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
) -> bytes:
    body = b"\x00" + zz(timestamp_delta) + zz(offset_delta)
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += zz(len(headers))
    for hk, hv in headers:
        body += zz(len(hk)) + hk + (zz(-1) if hv is None else zz(len(hv)) + hv)
    return zz(len(body)) + body


def hand_batch(
    payload: bytes,
    count: int,
    *,
    attributes: int = 0,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    magic: int = 2,
) -> bytes:
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = (
        struct.pack(">h", attributes)  # attributes
        + struct.pack(">i", lod)  # last offset delta
        + struct.pack(">q", base_timestamp)  # base timestamp
        + struct.pack(">q", max_timestamp)  # max timestamp
        + struct.pack(">q", producer_id)  # producer id
        + struct.pack(">h", producer_epoch)  # producer epoch
        + struct.pack(">i", base_sequence)  # base sequence
        + struct.pack(">i", count)  # records count
        + payload
    )
    return (
        struct.pack(">q", base_offset)  # base offset
        + struct.pack(">i", 49 + len(payload))  # batch length
        + struct.pack(">i", leader_epoch)  # partition leader epoch
        + struct.pack(">b", magic)  # magic
        + struct.pack(">I", crc32c.crc32c(after_crc))  # crc
        + after_crc
    )


def patch(batch: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    """Overwrite one header field, then (by default) recompute the CRC."""
    b = bytearray(batch)
    struct.pack_into(fmt, b, offset, value)
    if fix_crc:
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def sample_records(n: int, *, base_offset: int = 0, seed: int = 0) -> list[Record]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = None if i % 9 == 5 else rnd.randbytes(rnd.choice([0, 1, 100, 300, 5000]))
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("trace", rnd.randbytes(8)), ("null-value", None), ("ünïcode", b""))
        ts = 1_700_000_000_000 + rnd.randint(-5000, 5000)
        out.append(Record(base_offset + i, ts, key, value, headers))
    return out


# --- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_round_trip_every_codec(codec: Codec) -> None:
    records = sample_records(500, base_offset=1000)
    data = encode_batch(records, codec=codec, base_offset=1000)
    split = read_batches(data)
    assert split.consumed == split.total == len(data)
    assert not split.truncated
    (batch,) = split.batches
    assert batch.codec == codec
    assert batch.base_offset == 1000
    assert batch.last_offset == 1499
    assert batch.records_count == 500
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.base_timestamp == records[0].timestamp
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.records() == records


def test_many_records_many_batches() -> None:
    data = b"".join(
        encode_batch(sample_records(1000, base_offset=o, seed=o), base_offset=o, codec=o % 5)
        for o in range(0, 10_000, 1000)
    )
    out = decode_records(data)
    assert [r.offset for r in out] == list(range(10_000))
    assert out[4321] == sample_records(1000, base_offset=4000, seed=4000)[321]


def test_null_key_value_and_header_values() -> None:
    records = [
        Record(0, 5, None, None, ()),
        Record(1, 6, b"", b"", (("k", None),)),
        Record(2, 7, b"k", None, (("a", b"1"), ("a", b"2"), ("", None))),
    ]
    assert decode_records(encode_batch(records)) == records


def test_records_without_headers_share_one_empty_tuple() -> None:
    out = decode_records(encode_batch(sample_records(20)))
    assert all(r.headers is NO_HEADERS for r in out if not r.headers)
    assert out[0].headers == (
        ("trace", out[0].headers[0][1]),
        ("null-value", None),
        ("ünïcode", b""),
    )


def test_keys_and_values_are_bytes() -> None:
    (r,) = decode_records(bytearray(encode_batch([Record(0, 0, b"k", b"v", (("h", b"x"),))])))
    assert type(r.key) is bytes and type(r.value) is bytes
    assert type(r.headers[0][1]) is bytes


def test_memoryview_and_bytearray_inputs() -> None:
    data = encode_batch(sample_records(10))
    assert decode_records(memoryview(data)) == decode_records(bytearray(data)) == sample_records(10)


def test_create_time_timestamps_are_base_plus_delta() -> None:
    records = [Record(0, 1000, b"a", b"a"), Record(1, 400, b"b", b"b"), Record(2, 2**40, None, b"")]
    (batch,) = read_batches(encode_batch(records)).batches
    assert batch.base_timestamp == 1000
    assert batch.max_timestamp == 2**40
    assert [r.timestamp for r in batch.records()] == [1000, 400, 2**40]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    records = [Record(i, 1000 + i, None, b"x") for i in range(5)]
    data = encode_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=77_777)
    (batch,) = read_batches(data).batches
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [77_777] * 5


def test_producer_fields_and_transactional_flag() -> None:
    data = encode_batch(
        sample_records(3, base_offset=50),
        base_offset=50,
        producer_id=123456789012,
        producer_epoch=7,
        base_sequence=42,
        transactional=True,
        partition_leader_epoch=9,
    )
    (batch,) = read_batches(data).batches
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123456789012, 7, 42)
    assert batch.is_transactional and not batch.is_control
    assert batch.partition_leader_epoch == 9
    assert batch.magic == 2
    assert batch.records() == sample_records(3, base_offset=50)


def test_offset_gaps_as_after_compaction() -> None:
    records = [Record(10, 1, b"a", b"1"), Record(13, 2, b"b", b"2"), Record(19, 3, b"c", None)]
    data = encode_batch(records, base_offset=10, last_offset_delta=12)
    (batch,) = read_batches(data).batches
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (10, 22, 3)
    assert batch.records() == records


def test_empty_batch_matches_the_golden_layout() -> None:
    """The 61-byte empty batch of the ShareFetch golden seed, field by field."""
    after_crc = b"".join(
        [
            b"\x00\x00",  # attributes
            b"\xff\xff\xff\xff",  # lastOffsetDelta -1
            b"\xff" * 8,  # baseTimestamp -1
            b"\xff" * 8,  # maxTimestamp -1
            b"\xff" * 8,  # producerId -1
            b"\xff\xff",  # producerEpoch -1
            b"\xff\xff\xff\xff",  # baseSequence -1
            b"\x00\x00\x00\x00",  # recordsCount 0
        ]
    )
    golden = b"".join(
        [
            b"\x00" * 8,  # baseOffset 0
            b"\x00\x00\x00\x31",  # batchLength 49
            b"\xff\xff\xff\xff",  # partitionLeaderEpoch -1
            b"\x02",  # magic
            struct.pack(">I", crc32c.crc32c(after_crc)),  # crc
            after_crc,
        ]
    )
    assert encode_batch([]) == golden
    (batch,) = read_batches(golden).batches
    assert (batch.batch_length, batch.last_offset_delta, batch.records_count) == (49, -1, 0)
    assert batch.size == 61
    assert batch.records() == []


def test_empty_compressed_batch_is_not_decompressed() -> None:
    # Compaction can leave a batch with no records and an empty records section, whatever
    # its codec says; the Java client does not try to decompress it, nor do we.
    data = hand_batch(b"", 0, attributes=Codec.GZIP, last_offset_delta=4)
    (batch,) = read_batches(data).batches
    assert batch.records() == []
    assert batch.last_offset == 4


def test_custom_factory_is_called_once_per_record() -> None:
    calls: list[tuple[object, ...]] = []

    def factory(*args: object) -> str:
        calls.append(args)
        return f"rec{len(calls)}"

    records = [Record(5, 100, b"k", b"v", (("h", None),)), Record(6, 101, None, None)]
    (batch,) = read_batches(encode_batch(records, base_offset=5)).batches
    assert batch.records(factory) == ["rec1", "rec2"]
    assert calls == [(5, 100, b"k", b"v", (("h", None),)), (6, 101, None, None, ())]


def test_factory_exceptions_propagate_unchanged() -> None:
    def factory(*args: object) -> object:
        return [][1]  # an IndexError that is the factory's, not a truncation

    (batch,) = read_batches(encode_batch(sample_records(3))).batches
    with pytest.raises(IndexError):
        batch.records(factory)


def test_batch_raw_and_repr() -> None:
    a = encode_batch(sample_records(2))
    b = encode_batch(sample_records(3, base_offset=2), base_offset=2, codec=Codec.LZ4)
    split = read_batches(a + b)
    assert bytes(split.batches[1].raw) == b
    assert split.batches[1].position == len(a)
    assert "base_offset=2" in repr(split.batches[1]) and "LZ4" in repr(split.batches[1])


# --- control batches -------------------------------------------------------------------


@pytest.mark.parametrize("kind", [ControlType.COMMIT, ControlType.ABORT])
def test_transaction_markers_are_control_not_data(kind: ControlType) -> None:
    data_batch = encode_batch(
        sample_records(3, base_offset=0), producer_id=9, producer_epoch=1, transactional=True
    )
    marker = encode_control_batch(
        kind, producer_id=9, producer_epoch=1, base_offset=3, coordinator_epoch=12, timestamp=55
    )
    split = read_batches(data_batch + marker)
    first, control = split.batches
    assert first.is_transactional and not first.is_control
    assert control.is_control and control.is_transactional
    assert control.records() == []
    assert control.control_records() == [ControlRecord(3, 55, kind, 0, 12)]
    assert first.control_records() == []
    # The convenience decoder delivers only the data.
    assert decode_records(data_batch + marker) == sample_records(3)


def test_hand_built_commit_marker_and_unknown_control_type() -> None:
    commit = hand_record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))
    unknown = hand_record(0, 0, struct.pack(">hh", 0, 99), b"whatever")
    data = hand_batch(commit, 1, attributes=0x30, base_offset=8) + hand_batch(
        unknown, 1, attributes=0x20, base_offset=9
    )
    a, b = read_batches(data).batches
    assert a.control_records() == [ControlRecord(8, 0, ControlType.COMMIT, 0, 3)]
    assert b.control_records() == [ControlRecord(9, 0, 99, 0, None)]
    assert decode_records(data) == []


def test_malformed_control_records() -> None:
    short_key = hand_batch(hand_record(0, 0, b"\x00", b""), 1, attributes=0x30, base_offset=4)
    (batch,) = read_batches(short_key).batches
    with pytest.raises(CorruptRecordError, match="short key") as exc:
        batch.control_records()
    assert (exc.value.base_offset, exc.value.last_offset) == (4, 4)
    short_value = hand_batch(
        hand_record(0, 0, struct.pack(">hh", 0, 0), b"\x00"), 1, attributes=0x30
    )
    with pytest.raises(CorruptRecordError, match="short value"):
        read_batches(short_value).batches[0].control_records()


# --- batches assembled by hand with the codec libraries ---------------------------------


def xerial(data: bytes) -> bytes:
    out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), 4096):
        chunk = snappy.compress(data[i : i + 4096])
        out += [struct.pack(">i", len(chunk)), chunk]
    return b"".join(out)


def zstd_streamed(data: bytes) -> bytes:
    c = zstandard.ZstdCompressor().compressobj()
    return c.compress(data) + c.flush()


FOREIGN: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "none": (0, lambda d: d),
    "gzip": (1, gzip.compress),
    "snappy-raw": (2, snappy.compress),
    "snappy-xerial": (2, xerial),
    "lz4-frame": (3, lz4.frame.compress),
    "lz4-kafka-style": (
        3,
        lambda d: lz4.frame.compress(d, block_linked=False, store_size=False),
    ),
    "zstd-with-size": (4, zstandard.ZstdCompressor().compress),
    "zstd-without-size": (4, zstandard.ZstdCompressor(write_content_size=False).compress),
    "zstd-streamed": (4, zstd_streamed),
}


@pytest.mark.parametrize("name", list(FOREIGN))
def test_decodes_hand_assembled_batches(name: str) -> None:
    codec, squash = FOREIGN[name]
    rnd = random.Random(name)
    raw_records = []
    expected = []
    base_ts = 1_600_000_000_000
    for i in range(300):
        key = None if i % 5 == 0 else b"k%d" % i
        value = rnd.randbytes(100) * 3
        hdrs = [(b"h1", b"v1"), (b"h2", None)] if i % 10 == 1 else []
        raw_records.append(hand_record(i * 2, i * 7 - 50, key, value, hdrs))
        expected.append(
            Record(
                500 + i * 2,
                base_ts + i * 7 - 50,
                key,
                value,
                tuple((k.decode(), v) for k, v in hdrs),
            )
        )
    payload = squash(b"".join(raw_records))
    data = hand_batch(
        payload,
        300,
        attributes=codec,
        base_offset=500,
        last_offset_delta=598,
        base_timestamp=base_ts,
        max_timestamp=base_ts + 299 * 7,
    )
    (batch,) = read_batches(data).batches
    assert batch.codec == codec
    assert batch.last_offset == 1098
    assert batch.records() == expected


def test_decodes_multibyte_varints() -> None:
    """Deltas and lengths of every varint width (1..5 bytes, 10 for timestamps)."""
    rec = hand_record(2**31 - 1, -(2**62), b"k" * 70_000, b"v" * 64, [(b"x" * 200, b"y" * 9000)])
    data = hand_batch(rec, 1, base_timestamp=2**62, last_offset_delta=2**31 - 1)
    (r,) = decode_records(data)
    assert r.offset == 2**31 - 1
    assert r.timestamp == 0
    assert r.key == b"k" * 70_000
    assert r.headers == (("x" * 200, b"y" * 9000),)


# --- truncation and corruption ----------------------------------------------------------


def three_batches() -> tuple[bytes, list[int]]:
    parts = [
        encode_batch(sample_records(4, base_offset=0), base_offset=0),
        encode_batch(sample_records(3, base_offset=4), base_offset=4, codec=Codec.ZSTD),
        encode_batch(sample_records(5, base_offset=7), base_offset=7, codec=Codec.GZIP),
    ]
    ends = []
    total = 0
    for p in parts:
        total += len(p)
        ends.append(total)
    return b"".join(parts), ends


def test_truncation_at_every_offset_stops_cleanly() -> None:
    data, ends = three_batches()
    for cut in range(len(data) + 1):
        split = read_batches(data[:cut])
        complete = [e for e in ends if e <= cut]
        assert split.consumed == (complete[-1] if complete else 0)
        assert len(split.batches) == len(complete)
        assert split.truncated == (cut != split.consumed)
        for batch in split.batches:
            batch.records()


def test_crc_mismatch_names_the_batch() -> None:
    records = [Record(40 + i, 0, b"key", b"value-%d" % i) for i in range(3)]
    good = encode_batch(records, base_offset=40)
    bad = bytearray(good)
    bad[-3] ^= 0x01  # inside the last value
    (batch,) = read_batches(bytes(bad)).batches
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch") as exc:
        batch.records()
    assert (exc.value.base_offset, exc.value.last_offset) == (40, 42)
    assert "base offset 40" in str(exc.value)
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        batch.verify_crc()
    # Skipping the check (e.g. data already verified) decodes what is there.
    assert [r.value for r in batch.records(verify_crc=False)] == [
        b"value-0",
        b"value-1",
        b"value,2",
    ]


def test_partition_leader_epoch_is_outside_the_crc() -> None:
    good = encode_batch(sample_records(2))
    relabelled = patch(good, 12, ">i", 77, fix_crc=False)
    (batch,) = read_batches(relabelled).batches
    assert batch.partition_leader_epoch == 77
    assert batch.records() == sample_records(2)


def test_bad_magic() -> None:
    data = patch(encode_batch(sample_records(1)), 16, ">b", 1)
    with pytest.raises(CorruptRecordError, match="magic 1") as exc:
        read_batches(data)
    assert exc.value.base_offset == 0


def test_batch_length_too_small() -> None:
    data = patch(
        encode_batch(sample_records(1, base_offset=3), base_offset=3), 8, ">i", 48, fix_crc=False
    )
    with pytest.raises(CorruptRecordError, match="batch length 48") as exc:
        read_batches(data)
    assert exc.value.base_offset == 3


def test_batch_length_past_the_end_is_truncation() -> None:
    good = encode_batch(sample_records(2))
    split = read_batches(good + patch(good, 8, ">i", 10_000, fix_crc=False))
    assert len(split.batches) == 1 and split.consumed == len(good) and split.truncated


@pytest.mark.parametrize(
    ("count", "message"),
    [(4, "runs past the end"), (2, "bytes left after the 2 records"), (-1, "negative records")],
)
def test_records_count_inconsistent(count: int, message: str) -> None:
    data = patch(encode_batch(sample_records(3)), 57, ">i", count)
    data = patch(data, 23, ">i", 9)  # widen the offset span so only the count is wrong
    (batch,) = read_batches(data).batches
    with pytest.raises(CorruptRecordError, match=message):
        batch.records()


def test_records_count_beyond_offset_span() -> None:
    data = patch(encode_batch(sample_records(3)), 57, ">i", 4)
    with pytest.raises(CorruptRecordError, match="exceeds the offset span"):
        read_batches(data).batches[0].records()


def test_unknown_codec_bits() -> None:
    data = hand_batch(hand_record(0, 0, None, b"x"), 1, attributes=6, base_offset=2)
    (batch,) = read_batches(data).batches
    with pytest.raises(CorruptRecordError, match="unknown compression codec 6") as exc:
        batch.records()
    assert exc.value.base_offset == 2
    with pytest.raises(CorruptRecordError):
        _ = batch.codec


def bad_record_batch(record: bytes) -> RecordBatch:
    (batch,) = read_batches(hand_batch(record, 1, base_offset=100)).batches
    return batch


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b"\xff\xff\xff\xff\xff\xff" + b"\x00" * 10, "longer than 5 bytes"),
        (zz(3) + b"\x00\x00\x00", "record length 3"),
        (zz(50) + b"\x00" * 10, "record length 50"),
        (zz(-4) + b"\x00" * 10, "record length -4"),
        (zz(6) + b"\x00\x00\x00" + zz(-3) + b"\x00\x00", "key length -3"),
        (zz(6) + b"\x00\x00\x00\x01" + zz(-2) + b"\x00", "value length -2"),
        (zz(7) + b"\x00\x00\x00\x01\x01\x00\x00", "fields end at byte"),
        (zz(8) + b"\x00\x00\x00\x01\x01\x02\x02\xff", "not valid UTF-8"),
        (zz(8) + b"\x00\x00\x00\x01\x01\x02\x03\xff", "key length -2"),
        (zz(9) + b"\x00\x00\x00\x01\x01\x02\x00\x04a", "value length 2 runs past"),
        (zz(9) + b"\x00\x00\x00\x01\x01\x02\x00\x05a", "value length -3"),
        (zz(6) + b"\x00\x00\x00\x01\x01\x03", "negative header count"),
        (zz(6) + b"\x00\x00\x00\x01\x01\x04", "header 0 of 2|runs past"),
    ],
)
def test_malformed_records(record: bytes, message: str) -> None:
    batch = bad_record_batch(record)
    with pytest.raises(CorruptRecordError, match=message) as exc:
        batch.records()
    assert (exc.value.base_offset, exc.value.last_offset) == (100, 100)
    assert "record 0" in str(exc.value)


def test_error_inside_compressed_batch_names_decompressed_position() -> None:
    payload = zstandard.ZstdCompressor().compress(
        hand_record(0, 0, None, b"ok") + zz(6) + b"\x00\x00\x00" + zz(-3) + b"\x00\x00"
    )
    (batch,) = read_batches(hand_batch(payload, 2, attributes=4, base_offset=7)).batches
    with pytest.raises(CorruptRecordError, match="record 1, byte 9 of the decompressed records"):
        batch.records()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_undecompressable_batch(codec: int) -> None:
    data = hand_batch(b"\x00\x01\x02 definitely not compressed", 1, attributes=codec, base_offset=9)
    (batch,) = read_batches(data).batches
    with pytest.raises(CorruptRecordError, match="base offset 9") as exc:
        batch.records()
    assert (exc.value.base_offset, exc.value.last_offset) == (9, 9)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_batch_inflating_past_the_limit(codec: Codec) -> None:
    records = [Record(20 + i, 0, None, bytes(10_000)) for i in range(100)]
    data = encode_batch(records, codec=codec, base_offset=20)
    assert len(data) < 50_000
    (batch,) = read_batches(data).batches
    with pytest.raises(CorruptRecordError, match="inflates past the 100000-byte limit") as exc:
        batch.records(max_uncompressed=100_000)
    assert (exc.value.base_offset, exc.value.last_offset) == (20, 119)
    assert len(batch.records(max_uncompressed=2_000_000)) == 100


# --- encoder errors ---------------------------------------------------------------------


class _Loose(NamedTuple):
    """A record with untyped fields, as a caller without type checking might pass."""

    offset: Any
    timestamp: Any
    key: Any
    value: Any
    headers: Any = ()


def test_encoder_rejects_what_the_format_cannot_hold() -> None:
    # Fields of the wrong Python type come in duck-typed records (EncodableRecord): the
    # compiled build's Record checks its field types when it is made (TypeError).
    with pytest.raises(LocalProtocolError, match="must be bytes|wrong type"):
        encode_batch([_Loose(0, 0, "text", None)])  # type: ignore[list-item]
    with pytest.raises(LocalProtocolError, match="offsets must increase"):
        encode_batch([Record(1, 0, None, None), Record(1, 0, None, None)])
    with pytest.raises(LocalProtocolError, match="offsets must increase"):
        encode_batch([Record(0, 0, None, None)], base_offset=5)
    with pytest.raises(LocalProtocolError, match="header key must be str|wrong type"):
        encode_batch([_Loose(0, 0, None, None, ((b"k", None),))])  # type: ignore[list-item]
    with pytest.raises(LocalProtocolError, match="out of range"):
        encode_batch([Record(0, 0, None, None)], producer_epoch=40_000)
    with pytest.raises(LocalProtocolError, match="unknown compression codec"):
        encode_batch([Record(0, 0, None, None)], codec=5)
    with pytest.raises(LocalProtocolError, match="offset delta"):
        encode_batch([Record(2**31, 0, None, None)])
    with pytest.raises(LocalProtocolError, match="wrong type"):
        encode_batch([_Loose(0, 1.5, None, None)])  # type: ignore[list-item]
    with pytest.raises(LocalProtocolError, match="header value must be bytes or None|wrong type"):
        encode_batch([_Loose(0, 0, None, None, (("k", "text"),))])  # type: ignore[list-item]
    with pytest.raises(LocalProtocolError, match="unknown compression codec 'gzip'"):
        encode_batch([], codec="gzip")  # type: ignore[arg-type]


def test_default_records_match_what_a_factory_is_given() -> None:
    # The default factory is built directly (compiled build); any other factory is
    # called: both must give the same fields, LogAppendTime included.
    records = sample_records(30)
    for ts_type in TimestampType:
        data = encode_batch(records, timestamp_type=ts_type, max_timestamp=99_999)
        (batch,) = read_batches(data).batches
        default = batch.records()
        (batch,) = read_batches(data).batches
        called = batch.records(lambda *args: Record(*args))
        assert default == called
        assert all(type(r) is Record for r in default)
        if ts_type is TimestampType.LOG_APPEND_TIME:
            assert {r.timestamp for r in default} == {99_999}
        else:
            assert default == records


def test_record_is_a_dataclass_that_pickles_and_copies() -> None:
    r = Record(3, 1_700_000_000_000, b"k", b"v", (("h", None),))
    assert [f.name for f in dataclasses.fields(r)] == [
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
    ]
    assert Record(offset=3, timestamp=1, key=None, value=None).headers is NO_HEADERS
    assert dataclasses.replace(r, key=None) == Record(3, 1_700_000_000_000, None, b"v", r.headers)
    for other in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert other == r and other is not r
    assert repr(r) == (
        "Record(offset=3, timestamp=1700000000000, key=b'k', value=b'v', headers=(('h', None),))"
    )
    r.value = None
    assert r.value is None
    with pytest.raises(TypeError):
        Record(1, 2, b"k")  # type: ignore[call-arg]
