"""A minimal HTTP/1.1 client for one thing: POSTing a form to an OAuth token endpoint.

Why not an HTTP library: a token request is one POST a few times an hour, and anyio
already gives TCP and TLS; a dependency for that would be most of its weight unused.

Rules of this module:

1. ``https://`` anywhere, with the server's certificate verified (by the default context,
   or the caller's); plain ``http://`` only to a loopback address, where nothing crosses a
   network.
2. One request per connection (``Connection: close``); the body is read to its
   ``Content-Length``, its chunked end, or the end of the stream, at most 1 MiB.
3. Errors are :class:`HttpError` with the URL and why, never the request body.
"""

from __future__ import annotations

import ipaddress
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from sharecon._net.numerals import ascii_int

if TYPE_CHECKING:
    from collections.abc import Mapping

    from anyio.abc import ByteStream

__all__ = ["HttpError", "HttpResponse", "check_url", "post_form"]

_MAX_RESPONSE = 1024 * 1024
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class HttpError(Exception):
    """The request could not be made or its answer not read (a status is not an error)."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A status, lower-cased header names, and the body."""

    status: int
    headers: dict[str, str]
    body: bytes


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> urllib.parse.SplitResult:
    """Parse ``url``; raise ValueError unless it is https, or http to a loopback host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(
            f"{url!r} is plain http to a non-loopback host; use https so the secret and "
            "the token are encrypted"
        )
    if parts.username or parts.password:
        raise ValueError("the token endpoint URL must not carry credentials")
    return parts


async def post_form(
    url: str,
    body: bytes,
    *,
    headers: dict[str, str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = 10.0,
) -> HttpResponse:
    """POST ``body`` (``application/x-www-form-urlencoded``) to ``url``; return the answer.

    :raises HttpError: connect, TLS, timeout, or an answer that is not HTTP.
    """
    parts = check_url(url)
    host = parts.hostname
    assert host is not None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host_header = f"[{host}]" if ":" in host else host
    if parts.port:
        host_header += f":{parts.port}"
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {host_header}",
        "Connection: close",
        "Accept: application/json",
        "Content-Type: application/x-www-form-urlencoded",
        f"Content-Length: {len(body)}",
        "User-Agent: sharecon",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    raw = bytearray()
    stream: ByteStream
    try:
        with anyio.fail_after(timeout):
            if parts.scheme == "https":
                stream = await anyio.connect_tcp(
                    host,
                    port,
                    ssl_context=ssl_context or ssl.create_default_context(),
                    tls_hostname=host,
                    tls_standard_compatible=False,
                )
            else:
                stream = await anyio.connect_tcp(host, port)
            async with stream:
                await stream.send(request)
                while len(raw) <= _MAX_RESPONSE:
                    try:
                        raw += await stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
                    if _complete(bytes(raw)):
                        break
    except TimeoutError:
        raise HttpError(f"{url}: no answer within {timeout:g} s") from None
    except ssl.SSLError as exc:
        raise HttpError(f"{url}: TLS failed: {exc.reason or exc}") from exc
    except OSError as exc:
        raise HttpError(f"{url}: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_RESPONSE:
        raise HttpError(f"{url}: the answer is larger than {_MAX_RESPONSE} bytes")
    return _parse(url, bytes(raw))


def _split(raw: bytes) -> tuple[bytes, bytes] | None:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    return (head, rest) if sep else None


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            out[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return out


def _complete(raw: bytes) -> bool:
    split = _split(raw)
    if split is None:
        return False
    head, rest = split
    headers = _headers(head)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return rest.endswith(b"0\r\n\r\n")
    length = _content_length(headers)
    return length is not None and len(rest) >= length


def _parse(url: str, raw: bytes) -> HttpResponse:
    split = _split(raw)
    status_line = raw.split(b"\r\n", 1)[0]
    fields = status_line.split(b" ", 2)
    if split is None or len(fields) < 2 or not fields[0].startswith(b"HTTP/"):
        raise HttpError(f"{url}: the answer is not HTTP")
    try:
        status = int(fields[1])
    except ValueError:
        raise HttpError(f"{url}: bad HTTP status line") from None
    head, rest = split
    headers = _headers(head)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(url, rest)
    else:
        length = _content_length(headers)
        body = rest if length is None else rest[:length]
    return HttpResponse(status, headers, body)


def _content_length(headers: Mapping[str, str]) -> int | None:
    """The body's length the headers give, None when they give none that reads."""
    text = headers.get("content-length")
    return None if text is None else ascii_int(text)


def _dechunk(url: str, data: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise HttpError(f"{url}: truncated chunked answer")
        try:
            size = int(data[pos:end].split(b";", 1)[0], 16)
        except ValueError:
            raise HttpError(f"{url}: bad chunk size") from None
        if size == 0:
            return bytes(out)
        start = end + 2
        out += data[start : start + size]
        pos = start + size + 2
