"""The ShareFetch response decoder written out for mypyc agrees with the generated one.

``sharecon.protocol._share_fetch_codec`` replaces the generated decoder of
ShareFetch responses in the compiled build. Here, in both builds, it is run beside the
generated one on the same bytes: well-formed answers (the usual shape it reads itself,
and any shape the spec allows, unknown tags included, which it hands over), every
truncation, and single-byte corruptions. The two give equal messages and stop at the same
byte, or raise the same error naming the same field and byte.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_strategy

from sharecon._build import compiled_modules
from sharecon.protocol import ShareFetchResponse
from sharecon.protocol._share_fetch_codec import share_fetch_response_decoder
from sharecon.protocol.messages import share_fetch as sf
from sharecon.protocol.messages._base import decoder_for, generic_decoder_for
from sharecon.protocol.primitives import DecodeError, Reader
from sharecon.protocol.records import Record, encode_batch

VERSIONS = (0, 1, 2)
CODEC = "sharecon.protocol._share_fetch_codec"

_i16 = st.integers(-(2**15), 2**15 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
# Lengths of one, two and three varint bytes (and the four-byte ones handed over).
_records = st.one_of(
    st.binary(max_size=40),
    st.integers(120, 140).map(bytes),
    st.sampled_from([bytes(17_000), bytes(2**21 + 3)]),
)


def _plain_answer(version: int) -> st.SearchStrategy[sf.ShareFetchResponse]:
    """Answers as a broker sends them: no tagged fields, any values."""
    acquired = st.builds(
        sf.AcquiredRecords, first_offset=_i64, last_offset=_i64, delivery_count=_i16
    )
    records = _records if version >= 1 else st.none() | _records
    partition = st.builds(
        sf.PartitionData,
        partition_index=_i32,
        error_code=_i16,
        error_message=st.none() | _text,
        acknowledge_error_code=_i16,
        acknowledge_error_message=st.none() | _text,
        current_leader=st.builds(sf.LeaderIdAndEpoch, leader_id=_i32, leader_epoch=_i32),
        records=records,
        acquired_records=st.lists(acquired, max_size=3).map(tuple),
    )
    topic = st.builds(
        sf.ShareFetchableTopicResponse,
        topic_id=st.uuids(),
        partitions=st.lists(partition, max_size=4).map(tuple),
    )
    node = st.builds(sf.NodeEndpoint, node_id=_i32, host=_text, port=_i32, rack=st.none() | _text)
    return st.builds(
        sf.ShareFetchResponse,
        throttle_time_ms=_i32,
        error_code=_i16,
        error_message=st.none() | _text,
        acquisition_lock_timeout_ms=_i32 if version >= 1 else st.just(0),
        responses=st.lists(topic, max_size=3).map(tuple),
        node_endpoints=st.lists(node, max_size=2).map(tuple),
    )


class _Counted:
    """The generated decoder, counting the times the written-out one hands over."""

    def __init__(self, version: int) -> None:
        self.inner = generic_decoder_for(ShareFetchResponse, version)
        self.calls = 0

    def __call__(self, r: Reader) -> Any:
        self.calls += 1
        return self.inner(r)


def _run(fn: Any, data: bytes, pos: int = 0) -> tuple[str, Any, int]:
    r = Reader(data, pos)
    try:
        value = fn(r)
    except DecodeError as exc:
        return ("error", (str(exc), exc.offset, list(exc.path)), r.pos)
    return ("value", value, r.pos)


def _same(version: int, data: bytes, pos: int = 0) -> tuple[str, Any, int]:
    """Both decoders on ``data``: the same outcome, or the test fails."""
    generic = generic_decoder_for(ShareFetchResponse, version)
    written = share_fetch_response_decoder(version, generic)
    assert written is not None
    want = _run(generic, data, pos)
    got = _run(written, data, pos)
    if want[0] == "error":
        assert got[0] == "error"
        assert got[1] == want[1]
    else:
        assert got[0] == "value"
        assert got[1] == want[1]
        assert got[2] == want[2]
        _same_types(got[1], want[1])
    return got


def _same_types(a: Any, b: Any) -> None:
    # Equal values of the same types all the way down (a records field is a memoryview
    # in both, never bytes; a string is a str, a missing one None).
    assert type(a) is type(b)
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same_types(x, y)
    elif hasattr(type(a), "kafka_fields"):
        for name in [*type(a).__dataclass_fields__]:
            _same_types(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plain_answers_are_read_alike_without_handing_over(
    version: int, data: st.DataObject
) -> None:
    msg = data.draw(_plain_answer(version))
    body = msg.encode(version)
    counted = _Counted(version)
    written = share_fetch_response_decoder(version, counted)
    assert written is not None
    r = Reader(body)
    assert written(r) == msg
    assert r.pos == len(body)
    big = any(
        p.records is not None and len(p.records) >= 2**21 - 1
        for t in msg.responses
        for p in t.partitions
    )
    # The written-out decoder read it itself (or, for a length of four varint bytes,
    # handed it over whole).
    assert counted.calls == (1 if big else 0)
    _same(version, body)


@pytest.mark.parametrize("version", VERSIONS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_answer_the_spec_allows_is_read_alike(version: int, data: st.DataObject) -> None:
    # Unknown tagged fields, nulls where a version allows them: handed over, same result.
    msg = data.draw(message_strategy(ShareFetchResponse, version))
    body = msg.encode(version)
    got = _same(version, body)
    assert got[0] == "value" and got[1] == msg


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_fails_alike(version: int, data: st.DataObject) -> None:
    body = data.draw(_plain_answer(version).filter(lambda m: len(m.encode(version)) < 3000))
    frame = body.encode(version)
    for cut in range(len(frame)):
        _same(version, frame[:cut])


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_single_byte_corruptions_are_read_alike(version: int, data: st.DataObject) -> None:
    msg = data.draw(_plain_answer(version).filter(lambda m: len(m.encode(version)) < 3000))
    frame = msg.encode(version)
    flips = data.draw(st.lists(st.integers(1, 255), min_size=len(frame), max_size=len(frame)))
    for pos, flip in enumerate(flips):
        bad = bytearray(frame)
        bad[pos] ^= flip
        _same(version, bytes(bad))


def test_a_null_records_field_where_the_version_forbids_it() -> None:
    # v1 records are not nullable: the generated decoder's error, field and byte.
    body = ShareFetchResponse(
        responses=(
            sf.ShareFetchableTopicResponse(
                topic_id=uuid.uuid4(), partitions=(sf.PartitionData(records=None),)
            ),
        )
    ).encode(0)
    v1 = body[:7] + b"\0\0\0\0" + body[7:]  # v0 + AcquisitionLockTimeoutMs = v1
    kind, error, _ = _same(1, v1)
    assert kind == "error" and "null value for non-nullable field" in error[0]


def test_a_body_that_starts_inside_a_frame() -> None:
    # The answer read from the middle of a larger buffer (as after a response header):
    # positions, and the records' zero-copy views, are the frame's.
    payload = encode_batch([Record(0, 0, None, b"v" * 10, ())], base_offset=0)
    msg = ShareFetchResponse(
        acquisition_lock_timeout_ms=30_000,
        responses=(
            sf.ShareFetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=(
                    sf.PartitionData(
                        partition_index=3,
                        records=payload,
                        acquired_records=(sf.AcquiredRecords(last_offset=0, delivery_count=1),),
                    ),
                    sf.PartitionData(partition_index=4),
                ),
            ),
        ),
    )
    body = msg.encode(1)
    frame = b"head" + body + b"tail"
    kind, value, pos = _same(1, frame, 4)
    assert kind == "value" and value == msg and pos == 4 + len(body)
    records = value.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.obj is not None
    assert bytes(records) == payload


def test_the_compiled_build_decodes_share_fetch_answers_with_it() -> None:
    # Where the module is compiled, decoder_for hands it out; in the pure build the
    # generated decoder stays (as fast there), so both paths run in CI.
    for version in VERSIONS:
        fn = decoder_for(ShareFetchResponse, version)
        if CODEC in compiled_modules():
            assert type(fn).__module__ == CODEC
        else:
            assert fn is generic_decoder_for(ShareFetchResponse, version)
    assert share_fetch_response_decoder(3, generic_decoder_for(ShareFetchResponse, 2)) is None
