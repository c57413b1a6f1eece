"""Producer checks that need no broker: configuration, argument errors, the
InitProducerId wire layout, and a clear error for an unreachable bootstrap address."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import anyio
import pytest

from sharecon import errors
from sharecon.producer import Producer, ProducerRecord
from sharecon.protocol import InitProducerIdRequest, InitProducerIdResponse
from sharecon.protocol.versions import CLIENT_VERSIONS

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"acks": 0}, "acks=0"),
        ({"acks": "some"}, "acks="),
        ({"acks": 1}, "idempotent=True needs acks='all'"),
        ({"compression": "brotli"}, "compression='brotli'"),
        ({"linger": -1}, "linger=-1"),
        ({"max_batch_bytes": 10}, "max_batch_bytes=10"),
        ({"max_batch_bytes": 4 << 20}, "max_batch_bytes=4194304 is larger than max_request_size"),
        ({"delivery_timeout": 0}, "delivery_timeout=0"),
        ({"request_timeout": -5}, "request_timeout=-5"),
        ({"metadata_timeout": 0}, "metadata_timeout=0"),
        ({"max_buffer_bytes": 100}, "max_buffer_bytes=100"),
    ],
)
def test_wrong_config_names_the_option(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(errors.ConfigError) as info:
        Producer("localhost:9092", **kwargs)  # type: ignore[arg-type]
    assert option in str(info.value)


def test_acks_one_without_idempotence_is_accepted() -> None:
    Producer("localhost:9092", acks=1, idempotent=False)
    Producer("localhost:9092", acks=-1, compression="ZSTD")


def test_bad_bootstrap_syntax_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="bad port"):
        Producer("localhost:notaport")


async def test_unreachable_bootstrap_raises_broker_connect_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    producer = Producer(f"127.0.0.1:{port}", connect_timeout=0.5)
    with anyio.fail_after(20), pytest.raises(errors.BrokerConnectError) as info:
        async with producer:
            pass
    assert f"127.0.0.1:{port}" in str(info.value)


async def test_send_outside_async_with_is_a_clear_error() -> None:
    producer = Producer("localhost:9092")
    with pytest.raises(errors.ClientNotStartedError, match="not started"):
        await producer.send("t", b"v")
    with pytest.raises(errors.ClientNotStartedError, match="not started"):
        await producer.send_batch([ProducerRecord("t", b"v")])


def test_init_producer_id_v4_layout() -> None:
    """v3+ request: nullable compact string, int32 timeout, int64 id, int16 epoch, tags."""
    body = InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    ).encode(4)
    assert body == b"".join(
        [
            b"\x00",  # transactional_id: null (compact length 0)
            (60_000).to_bytes(4, "big"),  # transaction_timeout_ms
            b"\xff" * 8,  # producer_id -1
            b"\xff\xff",  # producer_epoch -1
            b"\x00",  # no tagged fields
        ]
    )
    # v1 (not flexible, no id/epoch): int16 -1 for the null string, then the timeout.
    assert InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=5).encode(1) == (
        b"\xff\xff\x00\x00\x00\x05"
    )


def test_init_producer_id_response_decodes() -> None:
    data = b"".join(
        [
            (0).to_bytes(4, "big"),  # throttle_time_ms
            (0).to_bytes(2, "big"),  # error_code
            (4242).to_bytes(8, "big"),  # producer_id
            (3).to_bytes(2, "big"),  # producer_epoch
            b"\x00",  # tags
        ]
    )
    resp = InitProducerIdResponse.decode(data, 4)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (0, 4242, 3)


def test_client_speaks_init_producer_id_v3_to_v5() -> None:
    assert CLIENT_VERSIONS[InitProducerIdRequest.api_key] == (3, 5)


@pytest.mark.parametrize("topic", ["bad topic!", ".", "..", "a/b", "a\0b", "t" * 250])
async def test_send_to_an_illegal_topic_name_fails_at_once(topic: str) -> None:
    """An illegal name is refused before any metadata lookup (it used to wait it out)."""
    producer = Producer("localhost:9092")
    # Stand-in for an open cluster that knows no topics: the check must come before I/O.
    producer._runtime.current = SimpleNamespace(metadata=SimpleNamespace(partitions={}))  # type: ignore[assignment]
    with anyio.fail_after(1), pytest.raises(errors.ConfigError, match="invalid topic name"):
        await producer.send(topic, b"v")
