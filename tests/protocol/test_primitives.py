"""Wire primitives: known encodings, round trips, and errors on both sides."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharecon.errors import LocalProtocolError, RemoteProtocolError
from sharecon.protocol.primitives import (
    DecodeError,
    Reader,
    Writer,
    uvarint_size,
    zigzag_decode,
    zigzag_encode,
)


def _w(method: str, value: object) -> bytes:
    w = Writer()
    getattr(w, method)(value)
    return w.getvalue()


# -- known encodings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "value", "wire"),
    [
        ("int8", -1, b"\xff"),
        ("int16", -2, b"\xff\xfe"),
        ("int32", 1, b"\x00\x00\x00\x01"),
        ("int64", -(2**63), b"\x80" + b"\x00" * 7),
        ("uint16", 0xFFFF, b"\xff\xff"),
        ("uint32", 0xFFFFFFFF, b"\xff\xff\xff\xff"),
        ("float64", 1.5, b"\x3f\xf8" + b"\x00" * 6),
        ("bool", True, b"\x01"),
        ("bool", False, b"\x00"),
        ("uvarint", 0, b"\x00"),
        ("uvarint", 127, b"\x7f"),
        ("uvarint", 300, b"\xac\x02"),
        ("uvarint", 0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
        ("varint", 0, b"\x00"),
        ("varint", -1, b"\x01"),
        ("varint", 1, b"\x02"),
        ("varint", -64, b"\x7f"),
        ("varint", 64, b"\x80\x01"),
        ("varint", 2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        ("varint", -(2**31), b"\xff\xff\xff\xff\x0f"),
        ("varlong", -(2**63), b"\xff" * 9 + b"\x01"),
        ("string", "ab", b"\x00\x02ab"),
        ("string", None, b"\xff\xff"),
        ("string", "é", b"\x00\x02\xc3\xa9"),
        ("compact_string", "ab", b"\x03ab"),
        ("compact_string", None, b"\x00"),
        ("compact_string", "", b"\x01"),
        ("bytes", b"\x01", b"\x00\x00\x00\x01\x01"),
        ("bytes", None, b"\xff\xff\xff\xff"),
        ("compact_bytes", b"", b"\x01"),
        ("compact_bytes", None, b"\x00"),
        ("array_len", 3, b"\x00\x00\x00\x03"),
        ("array_len", None, b"\xff\xff\xff\xff"),
        ("compact_array_len", 3, b"\x04"),
        ("compact_array_len", None, b"\x00"),
    ],
)
def test_known_encodings(method: str, value: object, wire: bytes) -> None:
    """Each primitive writes the documented bytes and reads them back."""
    assert _w(method, value) == wire
    r = Reader(wire)
    reader_method = {
        "bytes": "bytes_view",
        "compact_bytes": "compact_bytes_view",
    }.get(method, method)
    # Array lengths are checked against the bytes left; unit 0 skips that here.
    got = (
        getattr(r, reader_method)(0)
        if method.endswith("array_len")
        else getattr(r, reader_method)()
    )
    r.finish()
    if isinstance(got, memoryview):
        got = bytes(got)
    expected = -1 if value is None and method.endswith("array_len") else value
    assert got == expected


def test_uuid_round_trip() -> None:
    """UUIDs are 16 raw bytes."""
    u = uuid.UUID("550e8400-e29b-41d4-a716-446655440000")
    assert _w("uuid", u) == u.bytes
    assert Reader(u.bytes).uuid() == u


def test_bool_reads_any_nonzero_as_true() -> None:
    """The broker treats any non-zero byte as true; so do we."""
    assert Reader(b"\x07").bool() is True


def test_zigzag_and_sizes() -> None:
    """Zig-zag maps small magnitudes to small numbers; uvarint_size counts bytes."""
    assert [zigzag_encode(v, 32) for v in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert zigzag_decode(zigzag_encode(-(2**63), 64)) == -(2**63)
    assert uvarint_size(0) == 1
    assert uvarint_size(127) == 1
    assert uvarint_size(128) == 2
    assert uvarint_size(2**32 - 1) == 5


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(v: int) -> None:
    """varint round-trips every int32."""
    r = Reader(_w("varint", v))
    assert r.varint() == v
    r.finish()


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v: int) -> None:
    """varlong round-trips every int64."""
    r = Reader(_w("varlong", v))
    assert r.varlong() == v
    r.finish()


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(v: int) -> None:
    """uvarint round-trips every uint32 in uvarint_size bytes."""
    wire = _w("uvarint", v)
    assert len(wire) == uvarint_size(v)
    assert Reader(wire).uvarint() == v


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=50))
def test_string_round_trips(s: str) -> None:
    """Classic and compact strings round-trip any UTF-8 text."""
    assert Reader(_w("string", s)).string() == s
    assert Reader(_w("compact_string", s)).compact_string() == s


# -- tagged sections ------------------------------------------------------------------


def test_tagged_section_sorted_and_read_back() -> None:
    """Tagged fields are written in tag order and read back as raw pairs."""
    w = Writer()
    w.tagged_section([(5, b"\xaa"), (1, b"")])
    assert w.getvalue() == b"\x02\x01\x00\x05\x01\xaa"
    assert Reader(w.getvalue()).unknown_tags() == ((1, b""), (5, b"\xaa"))
    w = Writer()
    w.tagged_section(())
    assert w.getvalue() == b"\x00"


def test_tagged_section_duplicate_tag_refused() -> None:
    """Writing the same tag twice is a LocalProtocolError."""
    with pytest.raises(LocalProtocolError, match="twice"):
        Writer().tagged_section([(1, b""), (1, b"x")])


# -- writer errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "value"),
    [
        ("int8", 128),
        ("int16", -(2**15) - 1),
        ("int32", 2**31),
        ("int64", 2**63),
        ("uint32", -1),
        ("int32", "1"),
        ("int32", 1.5),
        ("float64", "x"),
        ("bool", 1),
        ("uuid", "550e8400-e29b-41d4-a716-446655440000"),
        ("uvarint", -1),
        ("varint", 2**31),
        ("varlong", -(2**63) - 1),
        ("string", "x" * 40000),
        ("string", b"bytes"),
        ("compact_string", "\udc80"),
        ("bytes", "text"),
        ("compact_bytes", 5),
    ],
)
def test_writer_refuses_values_the_wire_cannot_hold(method: str, value: object) -> None:
    """Out-of-range or wrongly typed values raise LocalProtocolError, nothing else."""
    with pytest.raises(LocalProtocolError):
        _w(method, value)


# -- reader errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "wire", "match"),
    [
        ("int32", b"\x00\x00\x00", "truncated int32"),
        ("int64", b"", "truncated int64"),
        ("uuid", bytes(15), "truncated uuid"),
        ("uvarint", b"\x80\x80", "truncated varint"),
        ("uvarint", b"\xff\xff\xff\xff\xff\x01", "longer than 5"),
        ("uvarint", b"\xff\xff\xff\xff\x7f", "32 bits"),
        ("varlong", b"\xff" * 11, "longer than 10"),
        ("string", b"\x00\x05ab", "truncated string"),
        ("string", b"\xff\xfe", "negative string length"),
        ("string", b"\x00\x02\xc3\x28", "invalid UTF-8"),
        ("compact_string", b"\x05ab", "truncated string"),
        ("bytes_view", b"\x7f\xff\xff\xffab", "truncated bytes"),
        ("bytes_view", b"\xff\xff\xff\xfe", "negative bytes length"),
        ("compact_bytes_view", b"\xff\xff\xff\xff\x0f", "truncated bytes"),
        ("array_len", b"\x7f\xff\xff\xff", "exceeds"),
        ("array_len", b"\xff\xff\xff\xf0", "negative array length"),
        ("compact_array_len", b"\xff\xff\xff\xff\x0f", "exceeds"),
        ("unknown_tags", b"\x01\x00\x05ab", "truncated tagged field"),
    ],
)
def test_reader_errors_are_decode_errors_with_offsets(method: str, wire: bytes, match: str) -> None:
    """Every malformed input raises DecodeError (a RemoteProtocolError) with a byte offset."""
    with pytest.raises(DecodeError, match=match) as info:
        getattr(Reader(wire), method)()
    assert isinstance(info.value, RemoteProtocolError)
    assert 0 <= info.value.offset <= len(wire)
    assert f"at byte {info.value.offset}" in str(info.value)


def test_array_length_bound_uses_element_size() -> None:
    """An array of int64 claiming 2 elements needs 16 bytes, so 12 bytes are refused."""
    wire = b"\x00\x00\x00\x02" + bytes(12)
    with pytest.raises(DecodeError, match="exceeds"):
        Reader(wire).array_len(8)
    assert Reader(wire).array_len(4) == 2


def test_reader_respects_end_and_finish() -> None:
    """A Reader bounded by `end` will not read past it; finish() flags leftovers."""
    r = Reader(b"\x00\x01\x02\x03\x04", pos=1, end=3)
    assert r.remaining() == 2
    assert r.int16() == 0x0102
    with pytest.raises(DecodeError):
        r.int8()
    r2 = Reader(b"\x00\x01")
    r2.int8()
    with pytest.raises(DecodeError, match="trailing"):
        r2.finish()


def test_bytes_view_is_zero_copy() -> None:
    """bytes_view returns a view sharing the caller's buffer."""
    data = b"\x00\x00\x00\x03abc"
    view = Reader(data).bytes_view()
    assert view is not None
    assert view.obj is data
    assert view == b"abc"


def test_reader_accepts_bytearray_and_memoryview() -> None:
    """Any bytes-like buffer can be read."""
    assert Reader(bytearray(b"\x00\x07")).int16() == 7
    assert Reader(memoryview(b"\x00\x00\x00\x07")[2:]).int16() == 7
