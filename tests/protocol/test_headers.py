"""Request/response headers and the sans-I/O frame decoder."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharecon.errors import LocalProtocolError, RemoteProtocolError
from sharecon.protocol import NEED_DATA, FrameDecoder, encode_frame
from sharecon.protocol.header import (
    RequestHeader,
    ResponseHeader,
    read_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    write_request_header,
    write_response_header,
)
from sharecon.protocol.primitives import DecodeError, Reader, Writer

# -- header versions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "version", "req", "resp"),
    [
        (18, 0, 1, 0),  # ApiVersions v0: not flexible
        (18, 2, 1, 0),
        (18, 3, 2, 0),  # flexible request header, but the response header stays v0
        (18, 4, 2, 0),
        (1, 11, 1, 0),  # Fetch v11: not flexible
        (1, 12, 2, 1),  # Fetch v12: flexible
        (3, 12, 2, 1),  # Metadata
        (78, 1, 2, 1),  # ShareFetch: flexible from v0
        (78, 0, 2, 1),
        (17, 1, 1, 0),  # SaslHandshake: never flexible
        (36, 2, 2, 1),  # SaslAuthenticate v2
    ],
)
def test_header_versions(key: int, version: int, req: int, resp: int) -> None:
    """Header v2/v1 follow flexibility, except the ApiVersions response (always v0)."""
    assert request_header_version(key, version) == req
    assert response_header_version(key, version) == resp


def test_unknown_api_key_header_version() -> None:
    """Asking about an API we do not implement is a LocalProtocolError."""
    with pytest.raises(LocalProtocolError, match="unknown API key 999"):
        request_header_version(999, 0)


# -- request header bytes -------------------------------------------------------------


def test_request_header_v1_bytes() -> None:
    """v1: key, version, correlation id, int16-length client id; no tags."""
    w = Writer()
    write_request_header(
        w, RequestHeader(api_key=17, api_version=1, correlation_id=258, client_id="c"), 1
    )
    assert w.getvalue() == b"\x00\x11\x00\x01\x00\x00\x01\x02\x00\x01c"
    header, version = read_request_header(Reader(w.getvalue()))
    assert version == 1
    assert header == RequestHeader(api_key=17, api_version=1, correlation_id=258, client_id="c")


def test_request_header_v2_null_client_id_and_tags() -> None:
    """v2 keeps a classic (int16) client id, null allowed, then a tagged section."""
    hdr = RequestHeader(
        api_key=78, api_version=1, correlation_id=-1, client_id=None, unknown_tags=((3, b"z"),)
    )
    w = Writer()
    write_request_header(w, hdr, 2)
    assert w.getvalue() == b"\x00\x4e\x00\x01\xff\xff\xff\xff\xff\xff\x01\x03\x01z"
    back, version = read_request_header(Reader(w.getvalue()))
    assert version == 2
    assert back == hdr


def test_request_header_v1_refuses_tags() -> None:
    """Tags cannot go in a v1 header."""
    hdr = RequestHeader(api_key=17, api_version=1, correlation_id=0, unknown_tags=((0, b""),))
    with pytest.raises(LocalProtocolError):
        write_request_header(Writer(), hdr, 1)


def test_response_headers() -> None:
    """v0 is the correlation id alone; v1 adds a tagged section."""
    w = Writer()
    write_response_header(w, ResponseHeader(correlation_id=7), 0)
    assert w.getvalue() == b"\x00\x00\x00\x07"
    w = Writer()
    write_response_header(w, ResponseHeader(correlation_id=7, unknown_tags=((1, b"ab"),)), 1)
    assert w.getvalue() == b"\x00\x00\x00\x07\x01\x01\x02ab"
    assert read_response_header(Reader(w.getvalue()), 1) == ResponseHeader(
        correlation_id=7, unknown_tags=((1, b"ab"),)
    )
    with pytest.raises(LocalProtocolError):
        write_response_header(
            Writer(), ResponseHeader(correlation_id=7, unknown_tags=((1, b""),)), 0
        )
    with pytest.raises(DecodeError):
        read_response_header(Reader(b"\x00\x00\x00"), 0)


def test_read_request_header_unknown_key() -> None:
    """An unknown API key in a request header is a DecodeError naming it."""
    with pytest.raises(DecodeError, match="unknown API key 500"):
        read_request_header(Reader(b"\x01\xf4\x00\x00\x00\x00\x00\x00\xff\xff"))


# -- framing --------------------------------------------------------------------------


def test_frame_decoder_splits_and_joins() -> None:
    """Frames arriving split or glued together come out whole and in order."""
    frames = [b"", b"a", b"hello world" * 10]
    stream = b"".join(encode_frame(f) for f in frames)
    dec = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(stream)):
        dec.receive_data(stream[i : i + 1])
        while (f := dec.next_frame()) is not NEED_DATA:
            assert isinstance(f, bytes)
            out.append(f)
    assert out == frames
    assert dec.buffered == 0


@settings(max_examples=50, deadline=None)
@given(
    frames=st.lists(st.binary(max_size=50), max_size=6),
    cuts=st.lists(st.integers(0, 400), max_size=10),
)
def test_frame_decoder_any_chunking(frames: list[bytes], cuts: list[int]) -> None:
    """However the stream is chunked, the same frames come out."""
    stream = b"".join(encode_frame(f) for f in frames)
    points = sorted({0, len(stream), *[c for c in cuts if c < len(stream)]})
    dec = FrameDecoder(max_frame_size=64)
    out: list[bytes] = []
    for a, b in zip(points, points[1:], strict=False):
        dec.receive_data(stream[a:b])
        while (f := dec.next_frame()) is not NEED_DATA:
            assert isinstance(f, bytes)
            out.append(f)
    assert out == frames
    assert dec.next_frame() is NEED_DATA


def test_frame_decoder_refuses_oversized_frame_on_size_alone() -> None:
    """The size prefix alone is enough to refuse; no payload needs to arrive."""
    dec = FrameDecoder(max_frame_size=1024)
    with pytest.raises(RemoteProtocolError, match="exceeds the maximum of 1024"):
        dec.receive_data(struct.pack(">i", 1025))
    dec = FrameDecoder(max_frame_size=1024)
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        dec.receive_data(struct.pack(">i", 2**31 - 1) + b"xx")


def test_frame_decoder_refuses_negative_size() -> None:
    """A negative size prefix is a RemoteProtocolError."""
    dec = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="negative frame size -1"):
        dec.receive_data(b"\xff\xff\xff\xff")


def test_frame_decoder_keeps_good_frame_before_bad_size() -> None:
    """A valid frame followed by a bad size is still returned; the error comes next."""
    dec = FrameDecoder(max_frame_size=10)
    good = encode_frame(b"ok")
    dec.receive_data(good[:3])
    dec.receive_data(good[3:] + struct.pack(">i", 11))
    assert dec.next_frame() == b"ok"
    with pytest.raises(RemoteProtocolError):
        dec.next_frame()


def test_frame_decoder_partial_state() -> None:
    """Until a frame is complete: NEED_DATA, and `buffered` reports what is held."""
    dec = FrameDecoder()
    assert dec.next_frame() is NEED_DATA
    dec.receive_data(b"\x00\x00")
    assert dec.next_frame() is NEED_DATA
    dec.receive_data(b"\x00\x03ab")
    assert dec.next_frame() is NEED_DATA
    assert dec.buffered == 6
    dec.receive_data(b"c")
    assert dec.next_frame() == b"abc"
    assert dec.max_frame_size > 0
