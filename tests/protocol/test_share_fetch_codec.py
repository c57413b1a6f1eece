"""The ShareFetch codec written out for mypyc agrees with the generated one.

``sharecon.protocol._share_fetch_codec`` replaces the generated decoder of
ShareFetch responses in the compiled build. Here, in both builds, it is run beside the
generated one on the same bytes: well-formed answers (the usual shape it reads itself,
and any shape the spec allows, unknown tags included, which it hands over), every
truncation, and single-byte corruptions. The two give equal messages and stop at the same
byte, or raise the same error naming the same field and byte. Its ShareFetch request
encoder writes the same bytes as the generated one, or raises the same error; the request
parts it builds by slot equal those built through ``__init__``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_strategy

from sharecon._build import compiled_modules
from sharecon.errors import LocalProtocolError
from sharecon.protocol import ShareFetchRequest, ShareFetchResponse
from sharecon.protocol._share_fetch_codec import (
    acknowledgement_batch,
    fetch_partition,
    share_fetch_request_encoder,
    share_fetch_response_decoder,
)
from sharecon.protocol.messages import share_fetch as sf
from sharecon.protocol.messages._base import (
    decoder_for,
    encoder_for,
    generic_decoder_for,
    generic_encoder_for,
)
from sharecon.protocol.primitives import DecodeError, Reader, Writer
from sharecon.protocol.records import Record, encode_batch
from sharecon.types import AckType

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


@pytest.mark.parametrize("version", VERSIONS)
def test_a_large_answer_read_a_window_at_a_time(version: int) -> None:
    # The written-out decoder copies the frame a few KiB at a time and never a records
    # field: fields straddling every window boundary, records of every size around it.
    parts = tuple(
        sf.PartitionData(
            partition_index=i,
            error_message=None if i % 3 else "é" * (i % 50),
            current_leader=sf.LeaderIdAndEpoch(leader_id=i % 3, leader_epoch=7),
            records=bytes([i % 251]) * ((i * 389) % 5000),
            acquired_records=tuple(
                sf.AcquiredRecords(first_offset=j, last_offset=j + i, delivery_count=1)
                for j in range(i % 4)
            ),
        )
        for i in range(300)
    )
    msg = ShareFetchResponse(
        responses=(sf.ShareFetchableTopicResponse(topic_id=uuid.uuid4(), partitions=parts),),
        node_endpoints=(sf.NodeEndpoint(node_id=1, host="h" * 5000, port=9092),),
    )
    body = msg.encode(version)
    counted = _Counted(version)
    written = share_fetch_response_decoder(version, counted)
    assert written is not None
    r = Reader(body)
    assert written(r) == msg and r.pos == len(body) and counted.calls == 0
    for cut in range(0, len(body), 997):
        _same(version, body[:cut])


def test_the_compiled_build_uses_it() -> None:
    # Where the module is compiled, decoder_for and encoder_for hand it out; in the pure
    # build the generated codecs stay (as fast there), so both paths run in CI.
    for version in VERSIONS:
        dec = decoder_for(ShareFetchResponse, version)
        enc = encoder_for(ShareFetchRequest, version)
        if CODEC in compiled_modules():
            assert type(dec).__module__ == CODEC
            assert type(enc).__module__ == CODEC
        else:
            assert dec is generic_decoder_for(ShareFetchResponse, version)
            assert enc is generic_encoder_for(ShareFetchRequest, version)
    # Only these two: the broker's side (the request decoded, the answer encoded) and
    # every other message keep the generated codecs.
    assert decoder_for(ShareFetchRequest, 1) is generic_decoder_for(ShareFetchRequest, 1)
    assert encoder_for(ShareFetchResponse, 1) is generic_encoder_for(ShareFetchResponse, 1)
    assert share_fetch_response_decoder(3, generic_decoder_for(ShareFetchResponse, 2)) is None
    assert share_fetch_request_encoder(3, generic_encoder_for(ShareFetchRequest, 2)) is None


# -- the request ------------------------------------------------------------------------


def _encode(fn: Any, msg: Any) -> tuple[str, Any]:
    w = Writer()
    w.buf += b"prefix"
    try:
        fn(w, msg)
    except LocalProtocolError as exc:
        return ("error", (type(exc), str(exc), getattr(exc, "path", None)))
    return ("bytes", bytes(w.buf))


def _same_bytes(version: int, msg: Any) -> tuple[str, Any]:
    generic = generic_encoder_for(ShareFetchRequest, version)
    written = share_fetch_request_encoder(version, generic)
    assert written is not None
    want = _encode(generic, msg)
    assert _encode(written, msg) == want
    return want


def _plain_request(version: int) -> st.SearchStrategy[sf.ShareFetchRequest]:
    """Requests as the consumer builds them: no tagged fields, any values."""
    types = st.lists(st.sampled_from(list(AckType)) | st.integers(0, 127), min_size=1, max_size=3)
    batch = st.builds(
        sf.AcknowledgementBatch,
        first_offset=_i64,
        last_offset=_i64,
        acknowledge_types=types.map(tuple),
    )
    partition = st.builds(
        sf.FetchPartition,
        partition_index=_i32,
        partition_max_bytes=_i32 if version == 0 else st.just(0),
        acknowledgement_batches=st.lists(batch, max_size=3).map(tuple),
    )
    topic = st.builds(
        sf.FetchTopic, topic_id=st.uuids(), partitions=st.lists(partition, max_size=4).map(tuple)
    )
    forgotten = st.builds(
        sf.ForgottenTopic,
        topic_id=st.uuids(),
        partitions=st.lists(_i32, max_size=3).map(tuple),
    )
    return st.builds(
        sf.ShareFetchRequest,
        group_id=st.none() | _text,
        member_id=st.none() | _text,
        share_session_epoch=_i32,
        max_wait_ms=_i32,
        min_bytes=_i32,
        max_bytes=_i32,
        max_records=_i32 if version >= 1 else st.just(0),
        batch_size=_i32 if version >= 1 else st.just(0),
        share_acquire_mode=st.integers(-128, 127) if version >= 2 else st.just(0),
        is_renew_ack=st.booleans() if version >= 2 else st.just(False),
        topics=st.lists(topic, max_size=3).map(tuple),
        forgotten_topics_data=st.lists(forgotten, max_size=2).map(tuple),
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plain_requests_are_written_alike_without_handing_over(
    version: int, data: st.DataObject
) -> None:
    msg = data.draw(_plain_request(version))
    calls: list[object] = []

    def generic(w: Writer, o: object) -> None:
        calls.append(o)
        generic_encoder_for(ShareFetchRequest, version)(w, o)

    written = share_fetch_request_encoder(version, generic)
    assert written is not None
    got = _encode(written, msg)
    assert got[0] == "bytes"
    # Written by the written-out encoder itself, except int8 acknowledge types of 128
    # and more (none here) and the rare lengths of more than one varint byte.
    assert calls == []
    assert _same_bytes(version, msg) == got
    assert ShareFetchRequest.decode(got[1][len(b"prefix") :], version) == msg


@pytest.mark.parametrize("version", VERSIONS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_request_the_spec_allows_is_written_alike(version: int, data: st.DataObject) -> None:
    _same_bytes(version, data.draw(message_strategy(ShareFetchRequest, version)))


_BAD_VALUES = [
    ("share_session_epoch", 2**31),
    ("max_wait_ms", -(2**31) - 1),
    ("max_bytes", "1"),
    ("max_bytes", 1.0),
    ("max_records", 7),
    ("batch_size", None),
    ("is_renew_ack", True),
    ("is_renew_ack", 1),
    ("share_acquire_mode", 300),
    ("group_id", 5),
    ("member_id", "\udc80"),
    ("topics", None),
    ("topics", [sf.FetchTopic()]),
    ("topics", (sf.FetchTopic(topic_id="not a uuid"),)),  # type: ignore[arg-type]
    ("topics", (sf.FetchTopic(partitions=(sf.FetchPartition(partition_index=2**40),)),)),
    ("topics", (sf.FetchTopic(partitions=(sf.FetchPartition(partition_max_bytes=9),)),)),
    ("topics", (sf.FetchTopic(partitions=(sf.FetchPartition(unknown_tags=((3, b"x"),)),)),)),
    ("topics", (sf.FetchTopic(partitions=(object(),)),)),  # type: ignore[arg-type]
    (
        "topics",
        (
            sf.FetchTopic(
                partitions=(
                    sf.FetchPartition(
                        acknowledgement_batches=(
                            sf.AcknowledgementBatch(acknowledge_types=(1, 200, -1)),
                        )
                    ),
                )
            ),
        ),
    ),
    (
        "topics",
        (
            sf.FetchTopic(
                partitions=(
                    sf.FetchPartition(
                        acknowledgement_batches=(sf.AcknowledgementBatch(last_offset=2**63),)
                    ),
                )
            ),
        ),
    ),
    ("forgotten_topics_data", (sf.ForgottenTopic(partitions=(2**33,)),)),
    ("forgotten_topics_data", (sf.ForgottenTopic(partitions=tuple(range(200))),)),
    ("unknown_tags", ((9, b"tag"),)),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("field", "value"), _BAD_VALUES, ids=[f for f, _ in _BAD_VALUES])
def test_unusual_and_bad_values_are_written_or_refused_alike(
    version: int, field: str, value: object
) -> None:
    # Whatever the generated encoder does with it (writes it, or raises naming the field),
    # the written-out one does the same.
    fields: dict[str, Any] = {"group_id": "g", "member_id": "m", field: value}
    msg = ShareFetchRequest(**fields)  # type: ignore[arg-type]
    _same_bytes(version, msg)


def test_many_partitions_and_long_lengths_are_written_alike() -> None:
    batches = tuple(
        sf.AcknowledgementBatch(first_offset=i, last_offset=i + 199, acknowledge_types=(1,) * 200)
        for i in range(0, 40_000, 200)
    )
    parts = tuple(
        sf.FetchPartition(partition_index=p, acknowledgement_batches=batches if p < 2 else ())
        for p in range(300)
    )
    msg = ShareFetchRequest(
        group_id="g" * 300,
        member_id="member",
        max_records=500,
        batch_size=500,
        topics=(sf.FetchTopic(topic_id=uuid.uuid4(), partitions=parts),),
    )
    for version in (1, 2):
        kind, data = _same_bytes(version, msg)
        assert kind == "bytes"
        assert ShareFetchRequest.decode(data[len(b"prefix") :], version) == msg


def test_request_parts_built_by_slot_equal_those_built_by_init() -> None:
    types = (AckType.ACCEPT, AckType.RELEASE)
    by_slot = acknowledgement_batch(5, 6, types)
    by_init = sf.AcknowledgementBatch(first_offset=5, last_offset=6, acknowledge_types=types)
    assert by_slot == by_init and repr(by_slot) == repr(by_init)
    assert by_slot.unknown_tags == ()
    part = fetch_partition(7, (by_slot,))
    want = sf.FetchPartition(partition_index=7, acknowledgement_batches=(by_init,))
    assert part == want and repr(part) == repr(want) and hash(part) == hash(want)
    assert part.partition_max_bytes == 0 and part.unknown_tags == ()
