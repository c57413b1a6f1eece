"""KIP-368 re-authentication: when the client plans to re-authenticate.

The broker's session starts when it reads the last SaslAuthenticate, so the client counts
the lifetime from when it sent that request, not from when it read the answer: on a busy
event loop the answer is read late, and a plan counted from the reading can fall after
the broker's end of the session (it then closes the connection, and the acknowledgements
in flight with it).
"""

from __future__ import annotations

import struct

import anyio
import pytest

from sharecon._net.connect import ConnectionConfig, handshake
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._net.sasl import SaslConfig
from sharecon.protocol import (
    ApiVersionsResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    decode_request,
    encode_response,
)
from sharecon.protocol.messages.api_versions import ApiVersion
from tests.net.streams import MemoryByteStream, byte_stream_pair

pytestmark = pytest.mark.anyio

LIFETIME_MS = 2000
ANSWER_LATE = 1.0  # seconds between reading SaslAuthenticate and answering it


async def _broker(stream: MemoryByteStream, read_at: list[float]) -> None:
    buf = b""
    while True:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                buf += await stream.receive()
            except anyio.EndOfStream:
                return
        size = struct.unpack(">i", buf[:4])[0]
        frame, buf = buf[4 : 4 + size], buf[4 + size :]
        header, _ = decode_request(frame)
        if header.api_key == 18:
            answer: object = ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=k, min_version=0, max_version=v)
                    for k, v in ((18, 4), (17, 1), (36, 2), (3, 13))
                ]
            )
        elif header.api_key == 17:
            answer = SaslHandshakeResponse(mechanisms=["PLAIN"])
        else:
            read_at.append(anyio.current_time())  # the broker's session starts about here
            await anyio.sleep(ANSWER_LATE)
            answer = SaslAuthenticateResponse(auth_bytes=b"", session_lifetime_ms=LIFETIME_MS)
        await stream.send(
            encode_response(header.api_key, header.api_version, header.correlation_id, answer)  # type: ignore[arg-type]
        )


async def test_the_lifetime_counts_from_the_request_not_the_late_answer() -> None:
    config = ConnectionConfig(sasl=SaslConfig("PLAIN", "alice", "pw"))
    client, broker = byte_stream_pair()
    conn = BrokerConnection(client, BrokerAddress("127.0.0.1", 9092, node_id=1))
    read_at: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_broker, broker, read_at)
        await tg.start(conn.run)
        with anyio.fail_after(10):
            await handshake(conn, config)
        answered_at = anyio.current_time()
        planned = conn._reauth_at
        await conn.aclose()
        broker.close()
    (session_start,) = read_at
    assert planned is not None
    # Within 85-95 % of the lifetime from the session's start (the request was sent
    # before the broker read it)...
    assert planned <= session_start + 0.95 * LIFETIME_MS / 1000
    # ...which is before the answer even arrived plus 85 %: not counted from the answer.
    assert planned < answered_at + 0.85 * LIFETIME_MS / 1000
