"""Whole-frame encode/decode for requests and responses, both directions.

The client side uses :func:`encode_request` and :func:`decode_response`; the mirror pair
:func:`decode_request` / :func:`encode_response` lets tests play the broker.

Frames passed to the decoders are the bytes *after* the int32 size prefix (what
:class:`~sharecon.protocol.framing.FrameDecoder` returns). Decoded ``records`` fields are
zero-copy views into that frame. Byte offsets in error messages count from its start.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, TypeVar

from sharecon.errors import LocalProtocolError, RemoteProtocolError
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.header import (
    API_VERSIONS_KEY,
    RequestHeader,
    ResponseHeader,
    read_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    write_request_header,
    write_response_header,
)
from sharecon.protocol.messages import REQUESTS, RESPONSES
from sharecon.protocol.messages._base import (
    EncodeError,
    Message,
    Request,
    Response,
    decoder_for,
    describe_decode_error,
    encoder_for,
)
from sharecon.protocol.primitives import DecodeError, Reader, Writer

if TYPE_CHECKING:
    from sharecon.protocol.messages._base import Struct

__all__ = [
    "decode_request",
    "decode_response",
    "decode_response_for",
    "encode_request",
    "encode_response",
    "peek_correlation_id",
    "request_class",
    "response_class",
]

R = TypeVar("R", bound=Response)

_I16 = struct.Struct(">h")


def request_class(api_key: int) -> type[Request[Response]]:
    """The request class for ``api_key``.

    :raises LocalProtocolError: for an API key this client does not implement.
    """
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise LocalProtocolError(f"unknown API key {api_key}")
    return cls


def response_class(api_key: int) -> type[Response]:
    """The response class for ``api_key``.

    :raises LocalProtocolError: for an API key this client does not implement.
    """
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise LocalProtocolError(f"unknown API key {api_key}")
    return cls


def _check_body(cls: type[Message], api_version: int, body: object) -> None:
    if type(body) is not cls:
        raise LocalProtocolError(
            f"{cls.api_name} (key {cls.api_key}) needs a {cls.__name__} body, "
            f"got {type(body).__name__}"
        )
    if not cls.min_version <= api_version <= cls.max_version:
        raise LocalProtocolError(
            f"{cls.__name__} version {api_version} is outside the supported "
            f"{cls.min_version}-{cls.max_version}"
        )


def _encode_body(w: Writer, cls: type[Struct], api_version: int, body: object) -> None:
    try:
        encoder_for(cls, api_version)(w, body)
    except EncodeError as exc:
        raise LocalProtocolError(
            f"{cls.__name__} v{api_version}: {exc.reason} (field {exc.where()})"
        ) from None


def _framed(w: Writer) -> bytes:
    size = len(w.buf) - 4
    if size > 0x7FFFFFFF:
        raise LocalProtocolError(f"frame of {size} bytes exceeds the int32 size")
    w.buf[0:4] = size.to_bytes(4, "big", signed=True)
    return bytes(w.buf)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Request[Response],
) -> bytes:
    """Encode a whole request frame: int32 size, request header, body.

    :param api_key: must match ``body``'s class.
    :param api_version: the negotiated version; picks header v1 or v2.
    :param correlation_id: int32 echoed back by the broker.
    :param client_id: the client id (``None`` sends null).
    :raises LocalProtocolError: for a mismatched body, unsupported version, or a value the
        wire cannot hold (the message names the field).
    """
    cls = request_class(api_key)
    _check_body(cls, api_version, body)
    w = Writer()
    w.buf += b"\0\0\0\0"
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    try:
        write_request_header(w, header, request_header_version(api_key, api_version))
    except LocalProtocolError as exc:
        raise LocalProtocolError(f"{cls.__name__} v{api_version} header: {exc}") from None
    _encode_body(w, cls, api_version, body)
    return _framed(w)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Response) -> bytes:
    """Encode a whole response frame: int32 size, response header, body (broker side).

    :raises LocalProtocolError: as :func:`encode_request`.
    """
    cls = response_class(api_key)
    _check_body(cls, api_version, body)
    w = Writer()
    w.buf += b"\0\0\0\0"
    try:
        write_response_header(
            w,
            ResponseHeader(correlation_id=correlation_id),
            response_header_version(api_key, api_version),
        )
    except LocalProtocolError as exc:
        raise LocalProtocolError(f"{cls.__name__} v{api_version} header: {exc}") from None
    _encode_body(w, cls, api_version, body)
    return _framed(w)


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (its first four bytes), without decoding.

    :raises RemoteProtocolError: if the frame is shorter than four bytes.
    """
    if len(frame) < 4:
        raise RemoteProtocolError(f"response frame of {len(frame)} bytes has no correlation id")
    return int.from_bytes(bytes(frame[:4]), "big", signed=True)


def _decode_body(r: Reader, cls: type[Message], version: int, *, finish: bool = True) -> Message:
    try:
        body = decoder_for(cls, version)(r)
        if finish:
            r.finish()
    except DecodeError as exc:
        raise describe_decode_error(exc, f"{cls.__name__} v{version}") from None
    return body  # type: ignore[no-any-return]


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Response]:
    """Decode a response frame (the bytes after the size prefix).

    For ApiVersions, a broker that does not support ``api_version`` answers with a v0
    body carrying UNSUPPORTED_VERSION and its own ranges; that body is decoded as v0, so
    the caller sees ``error_code == ErrorCode.UNSUPPORTED_VERSION`` and the list to retry with.

    :returns: ``(correlation_id, body)``.
    :raises RemoteProtocolError: naming the API, version, field and byte offset.
    :raises LocalProtocolError: for an API key or version this client does not implement.
    """
    cls = response_class(api_key)
    if not cls.min_version <= api_version <= cls.max_version:
        raise LocalProtocolError(
            f"{cls.__name__} version {api_version} is outside the supported "
            f"{cls.min_version}-{cls.max_version}"
        )
    r = Reader(frame)
    label = f"{cls.__name__} v{api_version}"
    try:
        header = read_response_header(r, response_header_version(api_key, api_version))
    except DecodeError as exc:
        raise describe_decode_error(exc, f"{label} response header") from None
    start = r.pos
    if api_key == API_VERSIONS_KEY and api_version > 0:
        body_start = bytes(r.buf[start : start + 2])
        if len(body_start) == 2 and _I16.unpack(body_start)[0] == ErrorCode.UNSUPPORTED_VERSION:
            return header.correlation_id, _decode_body(r, cls, 0)  # type: ignore[return-value]
    body = _decode_body(r, cls, api_version)
    return header.correlation_id, body  # type: ignore[return-value]


def decode_response_for(
    request: Request[R] | type[Request[R]],
    api_version: int,
    frame: bytes | bytearray | memoryview,
) -> tuple[int, R]:
    """Typed :func:`decode_response`: the body type follows from the request (class).

    :raises RemoteProtocolError: as :func:`decode_response`.
    """
    correlation_id, body = decode_response(request.api_key, api_version, frame)
    return correlation_id, body  # type: ignore[return-value]


def decode_request(
    frame: bytes | bytearray | memoryview,
    *,
    trailing_ok: bool = False,
) -> tuple[RequestHeader, Request[Response]]:
    """Decode a request frame (broker side): header first, then the body it announces.

    :param trailing_ok: bytes after the body are ignored, as a Kafka broker ignores them
        (librdkafka 2.x sends three extra bytes on some Metadata v13 requests).

    :raises RemoteProtocolError: for an unknown API key, an unsupported version, or bytes
        that do not decode (naming API, version, field and byte offset).
    """
    r = Reader(frame)
    try:
        header, _ = read_request_header(r)
    except DecodeError as exc:
        raise describe_decode_error(exc, "request header") from None
    cls = REQUESTS[header.api_key]
    if not cls.min_version <= header.api_version <= cls.max_version:
        raise RemoteProtocolError(
            f"{cls.__name__} version {header.api_version} is outside the supported "
            f"{cls.min_version}-{cls.max_version}"
        )
    body = _decode_body(r, cls, header.api_version, finish=not trailing_ok)
    return header, body  # type: ignore[return-value]
