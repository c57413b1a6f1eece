"""A tiny HTTP/1.x responder on anyio: what ``sharecon exporter`` and the worker's health
endpoints serve with (GET and HEAD only, one request per connection, no dependency).

A route is an async function of the request path (query string removed) giving a
:class:`Response`, or ``None`` for 404. A client that goes away, stalls past the read
deadline or speaks no HTTP gets no answer; the listener goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

if TYPE_CHECKING:
    from anyio.abc import SocketStream

__all__ = ["TEXT", "Response", "serve_http"]

#: Plain text, UTF-8.
TEXT = "text/plain; charset=utf-8"

_MAX_REQUEST = 8192
#: Seconds a client has to send its request head.
_READ_TIMEOUT = 10.0
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


@dataclass(frozen=True, slots=True)
class Response:
    """One answer.

    :param status: 200, 404, 405 or 503.
    :param body: the body (UTF-8).
    :param content_type: its ``Content-Type``.
    """

    status: int
    body: str
    content_type: str = TEXT


Route = Callable[[str], Awaitable[Response | None]]


async def serve_http(
    host: str,
    port: int,
    route: Route,
    *,
    not_found: str = "not found\n",
    on_listening: Callable[[str, int], None] | None = None,
) -> None:
    """Answer HTTP requests on ``host``:``port`` with ``route`` until cancelled;
    ``on_listening(host, port)`` is called once the socket listens (with the port the
    system chose for ``port=0``).

    :raises OSError: the address cannot be bound.
    """

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(_READ_TIMEOUT):
                    request = await _read_head(stream)
                method, _, rest = request.partition(" ")
                path = rest.partition(" ")[0].split("?", 1)[0]
                if method not in ("GET", "HEAD"):
                    await _respond(stream, Response(405, "method not allowed\n"), head=False)
                    return
                response = await route(path)
                if response is None:
                    await _respond(stream, Response(404, not_found), head=False)
                else:
                    await _respond(stream, response, head=method == "HEAD")
            except (
                TimeoutError,
                ValueError,
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                OSError,
            ):
                return  # a client that went away or spoke no HTTP: nothing to answer

    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    async with listener:
        bound = listener.listeners[0].extra(anyio.abc.SocketAttribute.local_address)
        if on_listening is not None:
            on_listening(str(bound[0]), int(bound[1]))
        await listener.serve(handle)


async def _read_head(stream: SocketStream) -> str:
    """The request line of an HTTP/1.x request (its headers are read and ignored)."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > _MAX_REQUEST:
            raise ValueError("request head too long")
        data += await stream.receive(4096)
    return data.split(b"\n", 1)[0].decode("latin-1").strip()


async def _respond(stream: SocketStream, response: Response, *, head: bool) -> None:
    payload = response.body.encode("utf-8")
    lines = [
        f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ]
    await stream.send(
        ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else payload)
    )
