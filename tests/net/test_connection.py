"""BrokerConnection over in-memory streams: faults a real broker cannot be made to produce.

Each test plays the broker's side with the protocol's own request decoder and response
encoder, then checks the connection's state after the fault. Run under asyncio and trio.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    decode_request,
    encode_frame,
    encode_response,
)
from sharecon.protocol.messages.api_versions import ApiVersion
from tests.net.streams import MemoryByteStream, byte_stream_pair

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

ADDRESS = BrokerAddress("127.0.0.1", 9092, node_id=1)


class ScriptedBroker:
    """Reads request frames from the broker end of a pipe; tests decide what to answer."""

    def __init__(self, stream: MemoryByteStream) -> None:
        self.stream = stream
        self._buf = b""

    async def read_request(self) -> tuple[int, int, int]:
        """Return (api_key, api_version, correlation_id) of the next request."""
        while len(self._buf) < 4 or len(self._buf) < 4 + struct.unpack(">i", self._buf[:4])[0]:
            self._buf += await self.stream.receive()
        size = struct.unpack(">i", self._buf[:4])[0]
        frame, self._buf = self._buf[4 : 4 + size], self._buf[4 + size :]
        header, _ = decode_request(frame)
        return header.api_key, header.api_version, header.correlation_id

    async def answer_metadata(self, corr: int, version: int, cluster_id: str = "c") -> None:
        await self.stream.send(
            encode_response(3, version, corr, MetadataResponse(cluster_id=cluster_id))
        )


@pytest.fixture
async def pair() -> AsyncIterator[tuple[BrokerConnection, ScriptedBroker]]:
    client, broker = byte_stream_pair()
    conn = BrokerConnection(client, ADDRESS)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)
        yield conn, ScriptedBroker(broker)
        await conn.aclose()
    broker.close()


async def test_pipelined_responses_out_of_order(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    """Many requests in flight; answers in reverse order still reach the right callers."""
    conn, broker = pair
    results: dict[int, str] = {}

    async def call(i: int) -> None:
        resp = await conn.request(MetadataRequest(), api_version=12, timeout=5)
        results[i] = resp.cluster_id or ""

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(call, i)
        reqs = [await broker.read_request() for _ in range(50)]
        assert conn.in_flight == 50
        for _, version, corr in reversed(reqs):
            await broker.answer_metadata(corr, version, cluster_id=f"c{corr}")
    assert sorted(results.values()) == sorted(f"c{corr}" for _, _, corr in reqs)
    assert conn.in_flight == 0 and not conn.closed


async def test_cancelled_waiter_does_not_desync(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    """A late response for a cancelled request is dropped; the next request still works."""
    conn, broker = pair
    with anyio.move_on_after(0.05):
        await conn.request(MetadataRequest(), api_version=12)
    _, version, late_corr = await broker.read_request()
    await broker.answer_metadata(late_corr, version, cluster_id="late")

    async with anyio.create_task_group() as tg:
        got: list[str | None] = []

        async def call() -> None:
            got.append(
                (await conn.request(MetadataRequest(), api_version=12, timeout=5)).cluster_id
            )

        tg.start_soon(call)
        _, version, corr = await broker.read_request()
        assert corr != late_corr
        await broker.answer_metadata(corr, version, cluster_id="fresh")
    assert got == ["fresh"]
    assert not conn.closed


async def test_timeout_names_request_and_keeps_connection(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    conn, broker = pair
    with pytest.raises(errors.RequestTimeoutError, match=r"broker 1 .*MetadataRequest v12 corr=0"):
        await conn.request(MetadataRequest(), api_version=12, timeout=0.05)
    assert not conn.closed


async def test_a_sent_requests_wait_times_out_by_itself_and_keeps_connection(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    # SentRequest.wait(timeout): its own deadline (a plain cancel scope), the request
    # named in the error, the connection kept; the next request is answered.
    conn, broker = pair
    sent = await conn.send(MetadataRequest(), api_version=12)
    with pytest.raises(errors.RequestTimeoutError, match=r"broker 1 .*MetadataRequest v12 corr=0"):
        await sent.wait(0.05)
    assert not conn.closed
    await broker.read_request()
    async with anyio.create_task_group() as tg:
        got: list[str | None] = []

        async def call() -> None:
            sent = await conn.send(MetadataRequest(), api_version=12)
            got.append((await sent.wait(5)).cluster_id)

        tg.start_soon(call)
        _, version, corr = await broker.read_request()
        await broker.answer_metadata(corr, version, cluster_id="answered")
    assert got == ["answered"]


async def test_unknown_correlation_id_closes_and_fails_pending(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    conn, broker = pair
    failures: list[BaseException] = []

    async def call() -> None:
        try:
            await conn.request(MetadataRequest(), api_version=12, timeout=5)
        except errors.KafkaError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        tg.start_soon(call)
        await broker.read_request()
        await broker.read_request()
        await broker.answer_metadata(999, 12)
    assert len(failures) == 2
    assert all(isinstance(f, errors.BrokerDisconnectedError) for f in failures)
    assert "unknown correlation id 999" in str(failures[0])
    assert conn.closed
    with pytest.raises(errors.BrokerDisconnectedError):
        await conn.request(MetadataRequest(), api_version=12, timeout=1)


async def test_oversized_frame_refused_before_allocation() -> None:
    client, broker_end = byte_stream_pair()
    conn = BrokerConnection(client, ADDRESS, max_frame_size=1 << 20)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)
        broker = ScriptedBroker(broker_end)

        async def answer() -> None:
            await broker.read_request()
            # Only the size prefix arrives: the claim alone must be refused.
            await broker_end.send(struct.pack(">i", 2**31 - 1))

        tg.start_soon(answer)
        with pytest.raises(errors.BrokerDisconnectedError, match="2147483647"):
            await conn.request(MetadataRequest(), api_version=12, timeout=5)
        assert conn.closed
    broker_end.close()


async def test_connection_closing_mid_frame_fails_pending(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    conn, broker = pair

    async def answer_half() -> None:
        _, version, corr = await broker.read_request()
        frame = encode_response(3, version, corr, MetadataResponse(cluster_id="x"))
        await broker.stream.send(frame[: len(frame) // 2])
        await broker.stream.send_eof()

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_half)
        with pytest.raises(errors.BrokerDisconnectedError, match="closed the connection"):
            await conn.request(MetadataRequest(), api_version=12, timeout=5)
    assert conn.closed and conn.in_flight == 0


async def test_cancel_mid_write_closes_connection() -> None:
    """A frame cut in half by cancellation must never be followed by another frame."""
    client, broker_end = byte_stream_pair(client_send_delay=0.2)
    conn = BrokerConnection(client, ADDRESS)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)
        with anyio.move_on_after(0.05):
            await conn.request(MetadataRequest(), api_version=12)
        assert conn.closed
        with pytest.raises(errors.BrokerDisconnectedError, match="interrupted while writing"):
            await conn.request(MetadataRequest(), api_version=12, timeout=1)
        await conn.aclose()
    broker_end.close()


async def test_undecodable_body_fails_only_that_request(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    conn, broker = pair

    async def answer_garbage_then_good() -> None:
        _, version, corr = await broker.read_request()
        await broker.stream.send(encode_frame(struct.pack(">i", corr) + b"\x00\xff\xff"))
        _, version, corr = await broker.read_request()
        await broker.answer_metadata(corr, version, cluster_id="ok")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_garbage_then_good)
        with pytest.raises(errors.RemoteProtocolError, match="MetadataResponse v12"):
            await conn.request(MetadataRequest(), api_version=12, timeout=5)
        resp = await conn.request(MetadataRequest(), api_version=12, timeout=5)
    assert resp.cluster_id == "ok" and not conn.closed


async def test_api_versions_uses_header_v0(pair: tuple[BrokerConnection, ScriptedBroker]) -> None:
    conn, broker = pair

    async def answer() -> None:
        key, version, corr = await broker.read_request()
        assert (key, version) == (18, 4)
        body = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
        await broker.stream.send(encode_response(18, version, corr, body))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        resp = await conn.request(ApiVersionsRequest(), api_version=4, timeout=5)
    assert [k.api_key for k in resp.api_keys] == [18]


async def test_close_fails_pending_and_is_bounded(
    pair: tuple[BrokerConnection, ScriptedBroker],
) -> None:
    conn, broker = pair
    failures: list[BaseException] = []

    async def call() -> None:
        try:
            await conn.request(MetadataRequest(), api_version=12)
        except errors.BrokerDisconnectedError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await broker.read_request()
        with anyio.fail_after(2):
            await conn.aclose()
    assert len(failures) == 1 and "closed by the client" in str(failures[0])


async def test_correlation_ids_wrap_and_skip_pending() -> None:
    client, broker_end = byte_stream_pair()
    conn = BrokerConnection(client, ADDRESS)
    conn._next_id = 2**31 - 1
    assert conn._allocate_id() == 2**31 - 1
    assert conn._allocate_id() == 0
    conn._pending[1] = object()  # type: ignore[assignment]
    assert conn._allocate_id() == 2
    client.close()
    broker_end.close()


async def test_request_cancelled_while_queued_is_never_sent() -> None:
    """Frames queued behind a slow write are combined; a queued frame whose caller gave up
    is taken out, so the broker never sees that request."""
    client, broker_end = byte_stream_pair(client_send_delay=0.3)
    conn = BrokerConnection(client, ADDRESS)
    broker = ScriptedBroker(broker_end)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)
        answers: list[str | None] = []
        all_answered = anyio.Event()

        async def first() -> None:
            resp = await conn.request(MetadataRequest(), api_version=12, timeout=5)
            answers.append(resp.cluster_id)
            if len(answers) == 4:
                all_answered.set()

        tg.start_soon(first)
        await anyio.sleep(0.05)  # the first frame is being written (slowly)
        with anyio.move_on_after(0.05):
            await conn.request(MetadataRequest(), api_version=12)  # queued, then abandoned
        for _ in range(3):
            tg.start_soon(first)
        seen = [await broker.read_request() for _ in range(4)]
        for _, version, corr in seen:
            await broker.answer_metadata(corr, version, cluster_id=f"c{corr}")
        with anyio.fail_after(5):
            await all_answered.wait()
        assert not conn.closed
        await conn.aclose()
    assert sorted(corr for _, _, corr in seen) == [0, 2, 3, 4]  # corr 1 was never sent
    broker_end.close()


async def test_requests_queued_behind_a_write_go_out_in_one_write() -> None:
    """Requests made while another is being written are written together, in one send,
    and each still gets its own answer."""
    client, broker_end = byte_stream_pair(client_send_delay=0.05)
    writes: list[int] = []
    send = client.send

    async def counting_send(item: bytes) -> None:
        writes.append(len(item))
        await send(item)

    client.send = counting_send  # type: ignore[method-assign]
    conn = BrokerConnection(client, ADDRESS)
    broker = ScriptedBroker(broker_end)
    answers: dict[int, str | None] = {}
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)

        all_answered = anyio.Event()

        async def call(i: int) -> None:
            resp = await conn.request(MetadataRequest(), api_version=12, timeout=5)
            answers[i] = resp.cluster_id
            if len(answers) == 20:
                all_answered.set()

        for i in range(20):
            tg.start_soon(call, i)
        seen = [await broker.read_request() for _ in range(20)]
        for _, version, corr in reversed(seen):  # answered out of order on purpose
            await broker.answer_metadata(corr, version, cluster_id=f"c{corr}")
        with anyio.fail_after(5):
            await all_answered.wait()
        assert not conn.closed
        await conn.aclose()
    assert sorted(corr for _, _, corr in seen) == list(range(20))
    assert sorted(answers.values()) == sorted(f"c{i}" for i in range(20))
    # The first request's write, then one write for the 19 queued behind it.
    assert writes[0] < writes[1] and len(writes) == 2
    broker_end.close()


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        # No token while the identity provider is down: a broken connection, retried.
        (errors.OAuthTokenUnavailableError("idp down"), errors.BrokerDisconnectedError),
        # The endpoint refuses the client: that error, promptly, as it is.
        (errors.OAuthTokenRefusedError("HTTP 401 invalid_client"), errors.OAuthTokenRefusedError),
    ],
)
async def test_a_failed_re_authentication_drops_the_connection(
    pair: tuple[BrokerConnection, ScriptedBroker],
    failure: errors.OAuthTokenError,
    raised: type[errors.KafkaError],
) -> None:
    """KIP-368: a re-authentication that cannot get a token leaves no half-authenticated
    connection in use; the caller sees a retriable disconnect (so the cluster reconnects
    through its backoff) unless the failure can never heal."""
    conn, _broker = pair

    async def reauthenticate() -> None:
        raise failure

    conn.set_reauthentication(anyio.current_time() - 1, reauthenticate)
    with pytest.raises(raised) as info:
        await conn.request(MetadataRequest(), api_version=12, timeout=5)
    assert conn.closed
    assert info.value.retriable is failure.retriable
    if raised is errors.BrokerDisconnectedError:
        assert "re-authentication failed: idp down" in str(info.value)
    # Later requests on it fail as disconnected: nobody keeps using it.
    with pytest.raises(errors.BrokerDisconnectedError):
        await conn.request(MetadataRequest(), api_version=12, timeout=5)
