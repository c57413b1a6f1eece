"""Bad input never escapes as anything but RemoteProtocolError.

Random bytes, every truncation of valid frames, and single-byte corruptions go through
the frame decoders; each either decodes or raises RemoteProtocolError naming the API
and version. Declared lengths far beyond the buffer fail before allocating.
"""

from __future__ import annotations

import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import all_message_versions, message_strategy

from sharecon.errors import RemoteProtocolError
from sharecon.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from sharecon.protocol.messages import REQUESTS, RESPONSES
from sharecon.protocol.messages._base import Message, Request

RESPONSE_VERSIONS = [(c, v) for c, v in all_message_versions() if c in RESPONSES.values()]
ALL = all_message_versions()


def _ids(pairs: list[tuple[type[Message], int]]) -> list[str]:
    return [f"{c.__name__}-v{v}" for c, v in pairs]


def _frame(cls: type[Message], version: int, msg: Any) -> bytes:
    if issubclass(cls, Request):
        return encode_request(cls.api_key, version, 7, "fuzz", msg)[4:]
    return encode_response(cls.api_key, version, 7, msg)[4:]


def _decode(cls: type[Message], version: int, frame: bytes) -> None:
    if issubclass(cls, Request):
        decode_request(frame)
    else:
        decode_response(cls.api_key, version, frame)


@pytest.mark.parametrize(("cls", "version"), RESPONSE_VERSIONS, ids=_ids(RESPONSE_VERSIONS))
@settings(max_examples=25, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_as_response(cls: type[Message], version: int, data: bytes) -> None:
    """Arbitrary bytes decode or raise RemoteProtocolError naming the API and version."""
    try:
        decode_response(cls.api_key, version, data)
    except RemoteProtocolError as exc:
        assert f"{cls.__name__} v{version}" in str(exc)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_as_request(data: bytes) -> None:
    """Arbitrary bytes handed to decode_request decode or raise RemoteProtocolError."""
    try:
        decode_request(data)
    except RemoteProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(REQUESTS)),
    version=st.integers(0, 17),
    tail=st.binary(max_size=120),
)
def test_random_request_bodies_behind_valid_header(key: int, version: int, tail: bytes) -> None:
    """A well-formed header followed by garbage: decode or RemoteProtocolError."""
    cls = REQUESTS[key]
    header = struct.pack(">hhi", key, version, 1) + b"\x00\x01c"
    if version >= cls.flexible_from:
        header += b"\x00"
    try:
        decode_request(header + tail)
    except RemoteProtocolError:
        pass


@pytest.mark.parametrize(("cls", "version"), ALL, ids=_ids(ALL))
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_truncation_fails_cleanly(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    """Every strict prefix of a valid frame raises RemoteProtocolError (never decodes)."""
    frame = _frame(cls, version, data.draw(message_strategy(cls, version)))
    for cut in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            _decode(cls, version, frame[:cut])


@pytest.mark.parametrize(("cls", "version"), ALL, ids=_ids(ALL))
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_single_byte_corruptions(cls: type[Message], version: int, data: st.DataObject) -> None:
    """Replacing any one byte of a valid frame: decode or RemoteProtocolError, nothing else."""
    frame = bytearray(_frame(cls, version, data.draw(message_strategy(cls, version))))
    values = data.draw(st.lists(st.integers(1, 255), min_size=len(frame), max_size=len(frame)))
    for pos, flip in enumerate(values):
        bad = bytearray(frame)
        bad[pos] ^= flip
        try:
            _decode(cls, version, bytes(bad))
        except RemoteProtocolError:
            pass


# -- huge declared lengths ------------------------------------------------------------

# ShareFetchResponse v1 body prefix up to the Responses array (flexible: compact forms).
_SF_PREFIX = (
    b"\x00\x00\x00\x01\x00"  # response header v1: correlation id 1, no tags
    + b"\x00\x00\x00\x00"  # ThrottleTimeMs
    + b"\x00\x00"  # ErrorCode
    + b"\x00"  # ErrorMessage null
    + b"\x00\x00\x75\x30"  # AcquisitionLockTimeoutMs
)
# FetchResponse v11 (non-flexible, response header v0): classic int32 lengths.
_FETCH_V11_PREFIX = (
    b"\x00\x00\x00\x01"  # correlation id 1
    + b"\x00\x00\x00\x00"  # ThrottleTimeMs
    + b"\x00\x00"  # ErrorCode
    + b"\x00\x00\x00\x00"  # SessionId
)


@pytest.mark.parametrize(
    ("key", "version", "frame", "field"),
    [
        # compact array length uvarint 0xFFFFFFFF (n = 2**32 - 2)
        (78, 1, _SF_PREFIX + b"\xff\xff\xff\xff\x0f", "responses"),
        # classic array length 2**31 - 1
        (1, 11, _FETCH_V11_PREFIX + b"\x7f\xff\xff\xff", "responses"),
        # classic string length 32767 with 3 bytes present
        (1, 11, _FETCH_V11_PREFIX + b"\x00\x00\x00\x01\x7f\xffabc" + bytes(8), "topic"),
        # compact string length ~2**31 in a nested struct
        (
            78,
            1,
            _SF_PREFIX
            + b"\x02"
            + bytes(16)
            + b"\x02"
            + bytes(6)
            + b"\xff\xff\xff\xff\x07"
            + bytes(60),
            "error_message",
        ),
    ],
    ids=["compact-array-2^32", "classic-array-2^31", "string-32767", "compact-string-2^31"],
)
def test_huge_lengths_fail_before_allocating(
    key: int, version: int, frame: bytes, field: str
) -> None:
    """A length far beyond the buffer is refused up front, naming the field; no big allocation."""
    tracemalloc.start()
    try:
        with pytest.raises(RemoteProtocolError) as info:
            decode_response(key, version, frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert field in str(info.value)
    assert "at byte" in str(info.value)
    assert peak < 1_000_000


def test_huge_records_length_fails_cleanly() -> None:
    """A records field claiming 2 GiB in a small frame is refused with the field named."""
    part = (
        b"\x00\x00\x00\x00"  # PartitionIndex
        + b"\x00\x00"  # ErrorCode
        + b"\x00"  # ErrorMessage null
        + b"\x00\x00"  # AcknowledgeErrorCode
        + b"\x00"  # AcknowledgeErrorMessage null
        + b"\x00\x00\x00\x01\x00\x00\x00\x02\x00"  # CurrentLeader
        + b"\xff\xff\xff\xff\x07"  # Records: compact length ~2**31
    )
    frame = _SF_PREFIX + b"\x02" + bytes(16) + b"\x02" + part + bytes(60)
    with pytest.raises(RemoteProtocolError, match="records"):
        decode_response(78, 1, frame)


def test_overlong_varint_is_refused() -> None:
    """A uvarint longer than five bytes in a length position is an error, not a huge value."""
    frame = _SF_PREFIX + b"\xff\xff\xff\xff\xff\x01"
    with pytest.raises(RemoteProtocolError, match="varint"):
        decode_response(78, 1, frame)
