"""What a fault class of the whole-client simulation may do with a request before
FakeKafka answers it (``MemoryKafka.intercepts``): let it through, answer it, or close
the connection."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response

__all__ = ["CLOSE", "Close", "Intercept"]


class Close:
    """An intercept's verdict: close the connection, answer nothing."""


#: The verdict that closes the connection (a broker refusing a request it will not serve
#: on it: before a login, or past the login session's end).
CLOSE = Close()

#: A fault class's hook over one request: ``(connection, header, body)`` to ``None`` (let
#: FakeKafka answer), a response, or :data:`CLOSE`.
Intercept: TypeAlias = "Callable[[str, RequestHeader, Request[Response]], Response | Close | None]"
