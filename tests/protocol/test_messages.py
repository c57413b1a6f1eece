"""Message round trips at every version, frame encode/decode both ways, encoder errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import all_message_versions, message_strategy

import sharecon.protocol as proto
from sharecon.errors import LocalProtocolError, RemoteProtocolError
from sharecon.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
    MetadataResponse,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatResponse,
    decode_request,
    decode_response,
    decode_response_for,
    encode_request,
    encode_response,
    peek_correlation_id,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages import REQUESTS, RESPONSES, api_versions, metadata, share_fetch
from sharecon.protocol.messages import share_group_heartbeat as sgh
from sharecon.protocol.messages._base import Request, Response

PAIRS = all_message_versions()


@pytest.mark.parametrize(("cls", "version"), PAIRS, ids=[f"{c.__name__}-v{v}" for c, v in PAIRS])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_round_trip(cls: Any, version: int, data: st.DataObject, correlation_id: int) -> None:
    """Body: encode -> decode is equal and re-encodes to the same bytes. Whole frames
    (size + header + body) decode to what was encoded, on the client and broker side."""
    msg = data.draw(message_strategy(cls, version))
    wire = msg.encode(version)
    back = cls.decode(wire, version)
    assert back == msg
    assert back.encode(version) == wire

    if issubclass(cls, Request):
        frame = encode_request(cls.api_key, version, correlation_id, "client-1", msg)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert frame.endswith(wire)
        header, body = decode_request(frame[4:])
        assert (header.api_key, header.api_version) == (cls.api_key, version)
        assert (header.correlation_id, header.client_id) == (correlation_id, "client-1")
        assert body == msg
    else:
        frame = encode_response(cls.api_key, version, correlation_id, msg)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert frame.endswith(wire)
        assert peek_correlation_id(frame[4:]) == correlation_id
        cid, body = decode_response(cls.api_key, version, frame[4:])
        assert cid == correlation_id
        assert body == msg


def test_every_request_knows_its_key_and_response() -> None:
    """Request classes carry api_key and response_type; the registries agree."""
    assert set(REQUESTS) == set(RESPONSES)
    for key, req in REQUESTS.items():
        assert req.api_key == key
        assert req.response_type is RESPONSES[key]
        assert RESPONSES[key].api_key == key
        assert getattr(proto, req.__name__) is req
        assert getattr(proto, RESPONSES[key].__name__) is RESPONSES[key]
    assert ShareFetchRequest.api_key == 78
    assert ShareFetchRequest.response_type is ShareFetchResponse
    assert MetadataRequest.response_type is MetadataResponse


def test_decode_response_for_is_typed_by_request() -> None:
    """decode_response_for picks the response class from the request."""
    resp = MetadataResponse(cluster_id="c1", controller_id=2)
    frame = encode_response(3, 13, 99, resp)
    cid, body = decode_response_for(MetadataRequest(), 13, frame[4:])
    assert cid == 99
    assert body.cluster_id == "c1"
    assert body.controller_id == 2


def test_records_field_is_zero_copy_view_of_frame() -> None:
    """Decoded records are a memoryview into the frame, not a copy."""
    batch = bytes(range(61))
    resp = ShareFetchResponse(
        responses=(
            share_fetch.ShareFetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=(share_fetch.PartitionData(partition_index=1, records=batch),),
            ),
        )
    )
    frame = encode_response(78, 1, 5, resp)[4:]
    _, body = decode_response(78, 1, frame)
    assert isinstance(body, ShareFetchResponse)
    records = body.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame
    assert records == batch


def test_unknown_tagged_fields_are_kept_and_re_encoded() -> None:
    """Tags we do not know survive decode and come back out in tag order."""
    unknown = ((7, b"\x01\x02"), (30, b""))
    msg = ShareAcknowledgeResponse(
        error_code=0, acquisition_lock_timeout_ms=30_000, unknown_tags=unknown
    )
    wire = msg.encode(2)
    back = ShareAcknowledgeResponse.decode(wire, 2)
    assert back.unknown_tags == unknown
    assert back.encode(2) == wire


def test_known_tagged_fields_go_in_tag_section_only_when_not_default() -> None:
    """ApiVersions v3 finalized features are tagged: absent by default, present when set."""
    empty = ApiVersionsResponse().encode(3)
    # error_code, api_keys (empty compact array), throttle, tag count 0
    assert empty == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    feats = ApiVersionsResponse(
        finalized_features_epoch=5,
        finalized_features=(
            api_versions.FinalizedFeatureKey(
                name="share.version", max_version_level=1, min_version_level=1
            ),
        ),
    )
    wire = feats.encode(3)
    assert wire[7] == 2  # two tagged fields: 1 (epoch) and 2 (features)
    assert wire[8:10] == b"\x01\x08"  # tag 1, eight bytes
    assert ApiVersionsResponse.decode(wire, 3) == feats


def test_nullable_struct_uses_marker_byte() -> None:
    """A null struct is written as int8 -1; a present one as 1 then the struct."""
    absent = ShareGroupHeartbeatResponse(member_epoch=3, heartbeat_interval_ms=5000)
    assert absent.encode(1)[-2:] == b"\xff\x00"
    present = ShareGroupHeartbeatResponse(
        assignment=sgh.Assignment(
            topic_partitions=(sgh.TopicPartitions(topic_id=uuid.uuid4(), partitions=(0, 1)),)
        )
    )
    back = ShareGroupHeartbeatResponse.decode(present.encode(1), 1)
    assert back == present


def test_api_versions_response_header_is_always_v0() -> None:
    """ApiVersions v3+ is flexible, yet its response header has no tagged-field byte."""
    body = ApiVersionsResponse(api_keys=(api_versions.ApiVersion(api_key=18, max_version=4),))
    frame = encode_response(18, 3, 0x01020304, body)
    assert frame[4:8] == b"\x01\x02\x03\x04"
    assert frame[8:] == body.encode(3)  # body follows the correlation id directly


def test_api_versions_unsupported_version_answer_decodes_as_v0() -> None:
    """A broker answering our v4 request with a v0 UNSUPPORTED_VERSION body is understood."""
    v0 = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=(api_versions.ApiVersion(api_key=18, min_version=0, max_version=2),),
    )
    frame = encode_response(18, 0, 11, v0)[4:]
    cid, body = decode_response(18, 4, frame)
    assert cid == 11
    assert isinstance(body, ApiVersionsResponse)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert body.api_keys[0].max_version == 2


def test_request_header_v2_keeps_classic_client_id() -> None:
    """Flexible requests use header v2, whose client id is still int16-length."""
    frame = encode_request(18, 3, 1, "ab", ApiVersionsRequest(client_software_name="x"))
    assert frame[4:12] == b"\x00\x12\x00\x03\x00\x00\x00\x01"
    assert frame[12:16] == b"\x00\x02ab"
    assert frame[16] == 0  # header tag count
    v1 = encode_request(18, 2, 1, None, ApiVersionsRequest())
    assert v1[4:] == b"\x00\x12\x00\x02\x00\x00\x00\x01\xff\xff"


# -- encoder errors -------------------------------------------------------------------


def test_int_out_of_range_names_field() -> None:
    """An int32 field given 2**31 is refused, naming the message, version and field."""
    with pytest.raises(LocalProtocolError, match=r"ShareFetchRequest v1.*share_session_epoch"):
        ShareFetchRequest(share_session_epoch=2**31).encode(1)
    with pytest.raises(LocalProtocolError, match="partition_index"):
        encode_request(
            78,
            1,
            0,
            None,
            ShareFetchRequest(
                topics=(
                    share_fetch.FetchTopic(
                        partitions=(share_fetch.FetchPartition(partition_index=-(2**31) - 1),)
                    ),
                )
            ),
        )


def test_none_for_non_nullable_field_is_refused() -> None:
    """None where the version does not allow null raises LocalProtocolError."""
    with pytest.raises(LocalProtocolError, match="records"):
        ShareFetchResponse(
            responses=(
                share_fetch.ShareFetchableTopicResponse(
                    partitions=(share_fetch.PartitionData(records=None),)
                ),
            )
        ).encode(1)
    # ... but v0 allowed null records.
    ok = ShareFetchResponse(
        responses=(
            share_fetch.ShareFetchableTopicResponse(
                partitions=(share_fetch.PartitionData(records=None),)
            ),
        )
    )
    assert ShareFetchResponse.decode(ok.encode(0), 0) == ok
    with pytest.raises(LocalProtocolError, match="host"):
        metadata.MetadataResponseBroker(host=None).encode(12)  # type: ignore[arg-type]


def test_non_default_value_for_absent_field() -> None:
    """A non-ignorable field set on a version that lacks it is an error; ignorable ones drop."""
    with pytest.raises(LocalProtocolError, match="max_records"):
        ShareFetchRequest(max_records=500).encode(0)
    with pytest.raises(LocalProtocolError, match="is_renew_ack"):
        ShareFetchRequest(is_renew_ack=True).encode(1)
    # share_acquire_mode is ignorable: silently not sent at v1.
    assert ShareFetchRequest(share_acquire_mode=1).encode(1) == ShareFetchRequest().encode(1)
    with pytest.raises(LocalProtocolError, match="partition_max_bytes"):
        share_fetch.FetchPartition(partition_max_bytes=10).encode(1)


def test_wrong_body_type_or_version_is_refused() -> None:
    """encode_request checks the body class against the key and the version range."""
    with pytest.raises(LocalProtocolError, match="needs a MetadataRequest"):
        encode_request(3, 12, 0, None, ShareFetchRequest())  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="outside the supported"):
        encode_request(3, 14, 0, None, MetadataRequest())
    with pytest.raises(LocalProtocolError, match="unknown API key"):
        encode_request(999, 0, 0, None, MetadataRequest())
    with pytest.raises(LocalProtocolError, match="int32"):
        encode_request(3, 12, 2**31, None, MetadataRequest())


def test_bad_string_values() -> None:
    """Non-str strings and lone surrogates are LocalProtocolError, not TypeError/UnicodeError."""
    with pytest.raises(LocalProtocolError, match="group_id"):
        ShareFetchRequest(group_id=5).encode(1)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="member_id"):
        ShareFetchRequest(member_id="\ud800").encode(1)
    with pytest.raises(LocalProtocolError, match="topics"):
        ShareFetchRequest(topics=5).encode(1)  # type: ignore[arg-type]


def test_unknown_tags_refused_on_non_flexible_version() -> None:
    """Tagged fields cannot be sent in a non-flexible version."""
    with pytest.raises(LocalProtocolError, match="unknown_tags"):
        FetchRequest(unknown_tags=((1, b""),)).encode(11)


# -- decoder errors name the place ----------------------------------------------------


def test_truncated_response_names_api_version_and_field() -> None:
    """A truncated body raises RemoteProtocolError naming API, version, field and offset."""
    resp = ShareFetchResponse(error_message="x" * 10)
    frame = encode_response(78, 1, 1, resp)[4:]
    with pytest.raises(RemoteProtocolError) as info:
        decode_response(78, 1, frame[:12])
    text = str(info.value)
    assert "ShareFetchResponse v1" in text
    assert "error_message" in text
    assert "at byte" in text


def test_trailing_bytes_are_an_error() -> None:
    """A body followed by junk is not silently accepted."""
    frame = encode_response(3, 12, 1, MetadataResponse())[4:] + b"\x00"
    with pytest.raises(RemoteProtocolError, match="trailing"):
        decode_response(3, 12, frame)


def test_decode_request_rejects_unknown_api_and_version() -> None:
    """The broker-side decoder names unknown keys and unsupported versions."""
    with pytest.raises(RemoteProtocolError, match="unknown API key 999"):
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff")
    frame = encode_request(3, 12, 1, None, MetadataRequest())[4:]
    bad = frame[:2] + b"\x00\x0e" + frame[4:]
    with pytest.raises(RemoteProtocolError, match="version 14"):
        decode_request(bad)
    # Bytes after the body: refused, unless ignored as a Kafka broker ignores them (the
    # fake: librdkafka 2.x sends three on some Metadata v13 requests).
    with pytest.raises(RemoteProtocolError, match="3 unexpected trailing bytes"):
        decode_request(frame + b"\x01\x00\x00")
    header, body = decode_request(frame + b"\x01\x00\x00", trailing_ok=True)
    assert (header.api_version, body) == (12, MetadataRequest())


def test_message_classes_are_frozen_slotted_keyword_only() -> None:
    """Generated classes follow the house dataclass style."""
    m = MetadataRequest()
    with pytest.raises(AttributeError):
        m.allow_auto_topic_creation = False  # type: ignore[misc]
    assert not hasattr(m, "__dict__")
    with pytest.raises(TypeError):
        MetadataRequest(None)  # type: ignore[misc]
    assert MetadataRequest().allow_auto_topic_creation is True  # schema default
    assert ShareFetchRequest().max_bytes == 0x7FFFFFFF
    assert isinstance(Request, type) and isinstance(Response, type)


def test_delete_groups_bodies_at_classic_and_flexible_versions() -> None:
    """DeleteGroups, transcribed from DeleteGroups{Request,Response}.json by hand.

    v1 is classic (int32 array length, int16 string length); v2 is flexible (compact
    lengths, tag sections); v3 adds the nullable per-group ErrorMessage.
    """
    from sharecon.protocol.messages.delete_groups import (
        DeletableGroupResult,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
    )

    request = DeleteGroupsRequest(groups_names=("ab",))
    assert request.encode(1) == b"\x00\x00\x00\x01" + b"\x00\x02ab"
    assert request.encode(2) == b"\x02" + b"\x03ab" + b"\x00"
    assert request.encode(3) == request.encode(2)  # the request did not change in v3

    result = DeletableGroupResult(group_id="g", error_code=ErrorCode.NON_EMPTY_GROUP)
    v2 = b"\x00\x00\x00\x00" + b"\x02" + b"\x02g" + b"\x00\x44" + b"\x00" + b"\x00"
    assert DeleteGroupsResponse(results=(result,)).encode(2) == v2
    explained = DeletableGroupResult(group_id="g", error_code=68, error_message="busy")
    v3 = b"\x00\x00\x00\x00" + b"\x02" + b"\x02g" + b"\x00\x44" + b"\x05busy" + b"\x00" + b"\x00"
    assert DeleteGroupsResponse.decode(v3, 3).results == (explained,)
    # A null message (no error) is the compact-nullable marker 0.
    ok = DeleteGroupsResponse(results=(DeletableGroupResult(group_id="g"),)).encode(3)
    no_message, no_tags = b"\x00", b"\x00"
    assert ok == b"\x00\x00\x00\x00" + b"\x02" + b"\x02g" + b"\x00\x00" + no_message + no_tags * 2
    # The message does not exist before v3; a v2 answer decodes with it None.
    assert DeleteGroupsResponse.decode(v2, 2).results[0].error_message is None
