"""BatchBuilder (records encoded one at a time, as the producer appends them) gives the
very bytes ``encode_batch`` gives for the same records: fixed cases around every varint
boundary of the fast path, hypothesis, compression, a second build with new producer
fields, and the same typed errors (with nothing added on error)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharecon import COMPILED
from sharecon.errors import LocalProtocolError
from sharecon.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchBuilder,
    Codec,
    Headers,
    Record,
    encode_batch,
    read_batches,
)

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = 1_700_000_000_000

Fields = tuple[int, bytes | None, bytes | None, Headers]


def both(fields: list[Fields], **options: object) -> tuple[bytes, bytes]:
    """(BatchBuilder's bytes, encode_batch's bytes) for the same records and options."""
    builder = BatchBuilder()
    for ts, key, value, headers in fields:
        builder.append(ts, key, value, headers)
    records = [Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(fields)]
    return builder.build(**options), encode_batch(records, **options)  # type: ignore[arg-type]


def test_empty_batch_matches() -> None:
    built, expected = both([])
    assert built == expected
    assert len(built) == BATCH_HEADER_SIZE


@pytest.mark.parametrize("size", [0, 1, 63, 64, 100, 8191, 8192, 70_000])
@pytest.mark.parametrize("field", ["key", "value"])
def test_lengths_at_every_varint_boundary(size: int, field: str) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    fields: list[Fields] = [
        (T0, data if field == "key" else b"k", data if field == "value" else None, ())
        for _ in range(3)
    ]
    built, expected = both(fields)
    assert built == expected


@pytest.mark.parametrize("step", [0, 1, 63, 64, 8191, 8192, 10**9, -1, -(10**6)])
def test_timestamp_deltas_on_both_paths(step: int) -> None:
    """Deltas from the first record's timestamp: small ones take the fast path; large,
    negative and huge ones the general one."""
    fields: list[Fields] = [(T0 + i * step, None, b"v", ()) for i in range(5)]
    built, expected = both(fields)
    assert built == expected


def test_many_records_cross_the_offset_delta_boundaries() -> None:
    """Offset deltas 63/64 (one to two bytes) and 8191/8192 (fast path to general)."""
    fields: list[Fields] = [(T0 + i % 3, None, b"x" * (i % 90), ()) for i in range(9000)]
    built, expected = both(fields, producer_id=7, producer_epoch=1, base_sequence=100)
    assert built == expected


def test_null_and_empty_keys_values_and_headers() -> None:
    fields: list[Fields] = [
        (T0, None, None, ()),
        (T0, b"", b"", ()),
        (T0 + 1, b"key", None, (("h", None),)),
        (T0 + 2, None, b"value", (("a", b""), ("b", b"x" * 300), ("\u00e9", None))),
        (T0, b"k", b"v", ()),
    ]
    built, expected = both(fields, producer_id=3, producer_epoch=0, base_sequence=0)
    assert built == expected
    [batch] = read_batches(built).batches
    assert batch.records() == [Record(i, *f) for i, f in enumerate(fields)]


def test_bytearray_and_memoryview_take_the_general_path() -> None:
    builder = BatchBuilder()
    if COMPILED:  # the compiled build holds append() to its annotations (bytes | None)
        with pytest.raises(TypeError, match="bytes or None object expected; got bytearray"):
            builder.append(T0, bytearray(b"key"), memoryview(b"value"))
        assert len(builder) == 0
        return
    builder.append(T0, bytearray(b"key"), memoryview(b"value"))
    assert builder.build() == encode_batch([Record(0, T0, b"key", b"value")])


@pytest.mark.parametrize("codec", list(Codec))
def test_every_codec_and_a_rebuild_with_new_producer_fields(codec: Codec) -> None:
    fields: list[Fields] = [(T0 + i, None, b"payload %d" % i * 5, ()) for i in range(200)]
    builder = BatchBuilder()
    for ts, key, value, headers in fields:
        builder.append(ts, key, value, headers)
    records = [Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(fields)]
    for pid, epoch, seq in [(5, 0, 0), (9, 2, 0)]:  # a new producer id: same records
        built = builder.build(codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        [batch] = read_batches(built).batches
        assert batch.records() == records
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
        if codec == Codec.NONE:  # compressed bytes may differ run to run (e.g. gzip mtime)
            expected = encode_batch(
                records, producer_id=pid, producer_epoch=epoch, base_sequence=seq
            )
            assert built == expected


def test_records_decodes_what_was_appended() -> None:
    fields: list[Fields] = [(T0 - i, b"k%d" % i, None, (("h", b"%d" % i),)) for i in range(50)]
    builder = BatchBuilder()
    for ts, key, value, headers in fields:
        builder.append(ts, key, value, headers)
    assert len(builder) == 50
    assert builder.records() == [Record(i, *f) for i, f in enumerate(fields)]


# What each bad field raises: a value the format cannot hold is a LocalProtocolError in
# both builds. A value of the wrong Python type is one in pure Python; the compiled build
# checks append()'s annotations first and raises TypeError. (The producer converts and
# checks what users pass before it reaches append(), so users see the same errors.)
WRONG_TYPE = TypeError if COMPILED else LocalProtocolError


@pytest.mark.parametrize(
    ("key", "value", "headers", "timestamp", "error"),
    [
        ("text", b"v", (), T0, WRONG_TYPE),
        (None, 5, (), T0, WRONG_TYPE),
        (None, b"v", ((1, b"x"),), T0, WRONG_TYPE),
        (None, b"v", (("h", "not bytes"),), T0, WRONG_TYPE),
        (None, b"v", (("\ud800", b"x"),), T0, LocalProtocolError),
        (None, b"v", (), 2**63, LocalProtocolError),
        (None, b"v", (), 1.5, WRONG_TYPE),
    ],
)
def test_bad_fields_raise_typed_errors_and_add_nothing(
    key: object, value: object, headers: object, timestamp: object, error: type[Exception]
) -> None:
    for first in (True, False):
        builder = BatchBuilder()
        if not first:
            builder.append(T0, None, b"ok")
        before = builder.build()
        with pytest.raises(error):
            builder.append(timestamp, key, value, headers)  # type: ignore[arg-type]
        assert builder.build() == before
        builder.append(T0 + 1, None, b"after")
        expected = [Record(0, T0, None, b"ok")] if not first else []
        expected.append(Record(len(expected), T0 + 1, None, b"after"))
        assert builder.build() == encode_batch(expected)


def test_unknown_codec_is_rejected() -> None:
    with pytest.raises(LocalProtocolError, match="unknown compression codec"):
        BatchBuilder().build(codec=7)


headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)
fields_st = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40) | st.integers(T0, T0 + 20_000),  # timestamp
        st.none() | st.binary(max_size=80),  # key
        st.none() | st.binary(max_size=300),  # value
        headers_st,
    ),
    max_size=30,
)


@FUZZ
@given(
    fields=fields_st,
    producer=st.sampled_from([(-1, -1, -1), (0, 0, 0), (2**40, 7, 2**31 - 1)]),
    transactional=st.booleans(),
)
def test_hypothesis_builder_matches_encode_batch(
    fields: list[Fields], producer: tuple[int, int, int], transactional: bool
) -> None:
    pid, epoch, seq = producer
    built, expected = both(
        fields,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )
    assert built == expected
