"""OAUTHBEARER re-authentication asks the token provider once the handshake is answered.

Found by the whole-client simulation's slow link (seed 480): a re-authentication took the
provider's token (about to expire; the endpoint was down), then waited for its
SaslHandshake answer behind a fetch's bytes on a slow link; the token had expired when it
was sent, the broker refused it, and SASL_AUTHENTICATION_FAILED ended the consumer. Asked
after the handshake, the provider either gives a token that is valid when sent, or says
it has none (a transient error: the connection is dropped and a later one logs in).
"""

from __future__ import annotations

import struct

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import ConnectionConfig, authenticate, handshake
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._net.oauth import RefreshingTokenProvider
from sharecon._net.sasl import OAuthBearerToken, SaslConfig
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

#: The handshake's answer is this late (held up behind other bytes on a slow link).
HANDSHAKE_LATE = 2.0
#: Each token's life from when the provider gives it: shorter than the late answer.
TOKEN_LIFE = 0.5


async def _broker(
    stream: MemoryByteStream,
    refused: list[str],
    late: list[bool],
    auth_late: float = 0.0,
    refuse_all: bool = False,
) -> None:
    """Answers SaslHandshake late once ``late`` says so; reads each SaslAuthenticate
    ``auth_late`` seconds late; refuses an OAUTHBEARER token that expired by then (its value
    names its expiry, in the event loop's time), or every token (``refuse_all``: wrong
    credentials)."""
    buf = b""
    while True:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                buf += await stream.receive()
            except anyio.EndOfStream:
                return
        size = struct.unpack(">i", buf[:4])[0]
        frame, buf = buf[4 : 4 + size], buf[4 + size :]
        header, body = decode_request(frame)
        if header.api_key == 18:
            answer: object = ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=k, min_version=0, max_version=v)
                    for k, v in ((18, 4), (17, 1), (36, 2), (3, 13))
                ]
            )
        elif header.api_key == 17:
            if late:
                await anyio.sleep(HANDSHAKE_LATE)
            answer = SaslHandshakeResponse(mechanisms=["OAUTHBEARER"])
        else:
            await anyio.sleep(auth_late)  # the token read this late (a stall on the way)
            text = bytes(body.auth_bytes).decode()  # type: ignore[attr-defined]
            value = text.split("auth=Bearer ", 1)[1].split("\x01", 1)[0]
            expires = int(value.removeprefix("t")) / 1000
            if anyio.current_time() < expires and not refuse_all:
                answer = SaslAuthenticateResponse(auth_bytes=b"")
            else:
                refused.append(value)
                answer = SaslAuthenticateResponse(
                    error_code=58, error_message="Authentication failed: expired token"
                )
        await stream.send(
            encode_response(header.api_key, header.api_version, header.correlation_id, answer)  # type: ignore[arg-type]
        )


async def test_a_reauthentication_takes_the_token_after_a_late_handshake_answer() -> None:
    asked: list[float] = []

    async def provider() -> OAuthBearerToken:
        now = anyio.current_time()
        asked.append(now)
        expires = now + TOKEN_LIFE
        return OAuthBearerToken(f"t{int(expires * 1000)}", expires_at=expires, principal="p")

    sasl = SaslConfig("OAUTHBEARER", token_provider=provider)
    client, broker = byte_stream_pair()
    conn = BrokerConnection(client, BrokerAddress("127.0.0.1", 9092, node_id=1))
    refused: list[str] = []
    late: list[bool] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_broker, broker, refused, late)
        await tg.start(conn.run)
        with anyio.fail_after(30):
            await handshake(conn, ConnectionConfig(sasl=sasl))  # the login, answered at once
        asked.clear()
        late.append(True)
        started = anyio.current_time()
        with anyio.fail_after(30):
            await authenticate(conn, sasl)  # a re-authentication: no token given
        await conn.aclose()
        broker.close()
    assert refused == []  # the token was valid when the broker read it
    (at,) = asked
    assert at >= started + HANDSHAKE_LATE  # asked once the handshake was answered


class _LoopClockProvider(RefreshingTokenProvider):
    """A caching provider on the event loop's clock (as the simulation's is), whose tokens
    live ``life`` seconds and name their expiry (for the broker above)."""

    def __init__(self, life: float) -> None:
        super().__init__()
        self._clock = anyio.current_time
        self.life = life

    async def _fetch_with_retries(self) -> OAuthBearerToken:
        expires = anyio.current_time() + self.life
        return OAuthBearerToken(f"t{int(expires * 1000)}", expires_at=expires, principal="p")


@pytest.mark.parametrize(
    ("life", "stale"),
    [(TOKEN_LIFE, True), (1000.0, False)],
    ids=["expired on the way", "refused while valid"],
)
async def test_a_token_that_expired_on_the_way_is_a_connection_error_not_a_refusal(
    life: float, stale: bool
) -> None:
    """The broker reads the login's token after it expired (a stall on the way): that
    refusal is a stale token's, raised as a connection error (retried; the next login
    brings a new token), not as the credentials' refusal, which ended a producer for good
    (the whole-client simulation, seed 27). A token refused while valid stays a refusal."""
    provider = _LoopClockProvider(life)
    sasl = SaslConfig("OAUTHBEARER", token_provider=provider)
    client, broker = byte_stream_pair()
    conn = BrokerConnection(client, BrokerAddress("127.0.0.1", 9092, node_id=1))
    refused: list[str] = []
    # Read 2 s late: the token of 0.5 s has expired by then.
    auth_late = HANDSHAKE_LATE
    async with anyio.create_task_group() as tg:
        tg.start_soon(_broker, broker, refused, [], auth_late if stale else 0.0, not stale)
        await tg.start(conn.run)
        with anyio.fail_after(30):
            if stale:
                with pytest.raises(errors.BrokerConnectError, match="expired before") as got:
                    await handshake(conn, ConnectionConfig(sasl=sasl))
                assert isinstance(got.value.__cause__, errors.SaslAuthenticationFailedError)
                assert got.value.retriable
                assert len(refused) == 1
            else:
                with pytest.raises(errors.SaslAuthenticationFailedError):
                    await handshake(conn, ConnectionConfig(sasl=sasl))
        await conn.aclose()
        broker.close()
        tg.cancel_scope.cancel()
