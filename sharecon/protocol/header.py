"""Request and response headers.

* Request header v1: api_key int16, api_version int16, correlation_id int32, client_id
  (classic nullable string, int16 length). v2 adds a tagged-field section. v2 is used
  exactly when the API version is flexible; the client_id stays a *classic* string even
  then.
* Response header v0: correlation_id int32. v1 adds a tagged-field section and is used for
  flexible API versions, **except ApiVersions, whose response header is always v0**: a
  broker must be able to answer a client whose ApiVersions version it does not know, so
  that response never depends on flexibility.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharecon.errors import LocalProtocolError
from sharecon.protocol.messages import REQUESTS
from sharecon.protocol.primitives import DecodeError, Reader, UnknownTags, Writer

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "ResponseHeader",
    "read_request_header",
    "read_response_header",
    "request_header_version",
    "response_header_version",
    "write_request_header",
    "write_response_header",
]

#: ApiVersions' API key; its response header is always v0.
API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    """The header in front of every request body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    #: Tagged header fields we do not know (header v2 only), kept for round trips.
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseHeader:
    """The header in front of every response body."""

    correlation_id: int
    #: Tagged header fields we do not know (header v1 only).
    unknown_tags: UnknownTags = ()


def _flexible(api_key: int, api_version: int) -> bool:
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise LocalProtocolError(f"unknown API key {api_key}")
    return api_version >= cls.flexible_from


def request_header_version(api_key: int, api_version: int) -> int:
    """1 for non-flexible API versions, 2 for flexible ones.

    :raises LocalProtocolError: for an API key this client does not know.
    """
    return 2 if _flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0 for non-flexible API versions and for ApiVersions; 1 otherwise.

    :raises LocalProtocolError: for an API key this client does not know.
    """
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def write_request_header(w: Writer, header: RequestHeader, header_version: int) -> None:
    """Append ``header`` at ``header_version`` (1 or 2).

    :raises LocalProtocolError: for values out of range or tags in header v1.
    """
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    w.string(header.client_id)
    if header_version >= 2:
        w.tagged_section(header.unknown_tags)
    elif header.unknown_tags:
        raise LocalProtocolError("request header v1 cannot carry tagged fields")


def read_request_header(r: Reader) -> tuple[RequestHeader, int]:
    """Read a request header; returns it and the header version implied by its API.

    :raises DecodeError: if truncated, or the API key is one this side does not know.
    """
    start = r.pos
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise DecodeError(f"unknown API key {api_key} in request header", start)
    client_id = r.string()
    version = 1
    tags: UnknownTags = ()
    if api_version >= cls.flexible_from:
        version = 2
        tags = r.unknown_tags()
    header = RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        unknown_tags=tags,
    )
    return header, version


def write_response_header(w: Writer, header: ResponseHeader, header_version: int) -> None:
    """Append ``header`` at ``header_version`` (0 or 1).

    :raises LocalProtocolError: for values out of range or tags in header v0.
    """
    w.int32(header.correlation_id)
    if header_version >= 1:
        w.tagged_section(header.unknown_tags)
    elif header.unknown_tags:
        raise LocalProtocolError("response header v0 cannot carry tagged fields")


def read_response_header(r: Reader, header_version: int) -> ResponseHeader:
    """Read a response header at ``header_version`` (0 or 1).

    :raises DecodeError: if truncated or malformed.
    """
    correlation_id = r.int32()
    tags = r.unknown_tags() if header_version >= 1 else ()
    return ResponseHeader(correlation_id=correlation_id, unknown_tags=tags)
