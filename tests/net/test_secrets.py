"""Credentials never show in a repr, a str, an exception or a log line along the login path.

A scripted broker answers ApiVersions, SaslHandshake and SaslAuthenticate (PLAIN, and a
small SCRAM server) over an in-memory stream; every object the login touches on either
side is then rendered and searched for the password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import struct
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import ConnectionConfig, handshake
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._net.sasl import SaslConfig
from sharecon.protocol import (
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    decode_request,
    encode_request,
    encode_response,
)
from sharecon.protocol.messages.api_versions import ApiVersion
from tests.net.streams import MemoryByteStream, byte_stream_pair

if TYPE_CHECKING:
    from sharecon.protocol import Request, Response

pytestmark = pytest.mark.anyio

PASSWORD = "pa55-W0rd-s3cret"
SALT = b"0123456789abcdef"
ITERATIONS = 4096


def test_sasl_authenticate_messages_hide_their_bytes() -> None:
    token = b"\0alice\0" + PASSWORD.encode()
    for message in (
        SaslAuthenticateRequest(auth_bytes=token),
        SaslAuthenticateResponse(auth_bytes=token),
    ):
        assert PASSWORD not in repr(message) and PASSWORD not in str(message)
        assert message.auth_bytes == token  # hidden from repr only


class _ScramServer:
    """Just enough of RFC 5802's server side to complete one exchange."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self.first_bare = ""
        self.server_first = ""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.algorithm).digest()

    def first(self, client_first: bytes) -> bytes:
        self.first_bare = client_first.decode().split(",", 2)[2]
        nonce = dict(p.split("=", 1) for p in self.first_bare.split(","))["r"]
        salt = base64.b64encode(SALT).decode()
        self.server_first = f"r={nonce}server,s={salt},i={ITERATIONS}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        without_proof = client_final.decode().rsplit(",p=", 1)[0]
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        salted = hashlib.pbkdf2_hmac(self.algorithm, PASSWORD.encode(), SALT, ITERATIONS)
        signature = self._hmac(self._hmac(salted, b"Server Key"), auth)
        return b"v=" + base64.b64encode(signature)


async def _play_broker(stream: MemoryByteStream, mechanism: str, seen: list[object]) -> None:
    buf = b""
    scram = _ScramServer("sha256" if mechanism.endswith("256") else "sha512")
    step = 0
    while True:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                buf += await stream.receive()
            except anyio.EndOfStream:
                return
        size = struct.unpack(">i", buf[:4])[0]
        frame, buf = buf[4 : 4 + size], buf[4 + size :]
        header, body = decode_request(frame)
        seen += [header, body]
        answer: Response
        if header.api_key == 18:
            answer = ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=k, min_version=0, max_version=v)
                    for k, v in ((18, 4), (17, 1), (36, 2), (3, 13))
                ]
            )
        elif header.api_key == 17:
            answer = SaslHandshakeResponse(mechanisms=[mechanism])
        else:
            assert isinstance(body, SaslAuthenticateRequest)
            if mechanism == "PLAIN":
                token = b""
            else:
                token = scram.first(body.auth_bytes) if step == 0 else scram.final(body.auth_bytes)
            step += 1
            answer = SaslAuthenticateResponse(auth_bytes=token, session_lifetime_ms=60_000)
        seen.append(answer)
        await stream.send(
            encode_response(header.api_key, header.api_version, header.correlation_id, answer)
        )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_no_secret_along_the_login_path(
    mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sharecon")
    sasl = SaslConfig(mechanism, "alice", PASSWORD)
    config = ConnectionConfig(sasl=sasl, client_id="secrets-test")
    client, broker = byte_stream_pair()
    conn = BrokerConnection(client, BrokerAddress("127.0.0.1", 9092, node_id=1))
    seen: list[object] = [sasl, config, sasl._new_mechanism(), conn]
    async with anyio.create_task_group() as tg:
        tg.start_soon(_play_broker, broker, mechanism, seen)
        await tg.start(conn.run)
        with anyio.fail_after(10):
            await handshake(conn, config)
        assert conn.versions is not None
        seen += [conn.versions, conn]
        await conn.aclose()
        broker.close()
    auth_requests: list[Request[Response]] = [
        s for s in seen if isinstance(s, SaslAuthenticateRequest)
    ]
    assert auth_requests, "the login did not reach SaslAuthenticate"
    if mechanism == "PLAIN":
        assert PASSWORD.encode() in auth_requests[0].auth_bytes  # the test has teeth
    rendered = [f"{obj!r} {obj!s}" for obj in seen] + [caplog.text]
    leaks = [text for text in rendered if PASSWORD in text or PASSWORD.encode().hex() in text]
    assert not leaks


def test_a_token_of_the_wrong_type_is_not_echoed_in_the_error() -> None:
    with pytest.raises(errors.LocalProtocolError, match="str") as info:
        request = SaslAuthenticateRequest(auth_bytes=PASSWORD)  # type: ignore[arg-type]
        encode_request(36, 2, 1, "c", request)
    assert PASSWORD not in str(info.value)
