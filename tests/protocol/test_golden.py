"""Golden bytes from the three seed documents in shared/seeds, both directions.

Each layout is transcribed field by field from the seed's object tree (offsets in the
comments are the seed's, counted from the start of the frame including the size prefix).

* 000: ShareFetch v0 request (105 bytes) and response (150 bytes).
* 002: Fetch v17 request (113 bytes) and response (154 bytes).
* 003: ShareAcknowledge v2 response with the example's non-zero values.

The seeds show the records field as one empty 61-byte RecordBatch v2 and describe its
CRC as "crc32c of the bytes that follow"; the value below is that CRC-32C, and the test
checks it against the crc32c package so the transcription cannot drift.
"""

from __future__ import annotations

import struct
import uuid

import crc32c
import pytest

from sharecon.protocol import (
    FetchRequest,
    FetchResponse,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from sharecon.protocol.messages import fetch, share_acknowledge, share_fetch
from sharecon.types import ZERO_UUID

Z16 = bytes(16)  # an all-zero uuid

# One empty RecordBatch v2 (61 bytes), as in seeds 000 and 002.
EMPTY_BATCH = b"".join(
    [
        b"\x00\x00\x00\x00\x00\x00\x00\x00",  # baseOffset int64 = 0
        b"\x00\x00\x00\x31",  # batchLength int32 = 49
        b"\xff\xff\xff\xff",  # partitionLeaderEpoch int32 = -1
        b"\x02",  # magic int8 = 2
        b"\x2c\xe6\x4e\x55",  # crc uint32 = CRC-32C of the 40 bytes below
        b"\x00\x00",  # attributes int16 = 0
        b"\xff\xff\xff\xff",  # lastOffsetDelta int32 = -1
        b"\xff\xff\xff\xff\xff\xff\xff\xff",  # baseTimestamp int64 = -1
        b"\xff\xff\xff\xff\xff\xff\xff\xff",  # maxTimestamp int64 = -1
        b"\xff\xff\xff\xff\xff\xff\xff\xff",  # producerId int64 = -1
        b"\xff\xff",  # producerEpoch int16 = -1
        b"\xff\xff\xff\xff",  # baseSequence int32 = -1
        b"\x00\x00\x00\x00",  # recordsCount int32 = 0
    ]
)


def test_empty_batch_transcription() -> None:
    """The transcribed batch is 61 bytes and its CRC covers attributes..end."""
    assert len(EMPTY_BATCH) == 61
    assert struct.unpack(">I", EMPTY_BATCH[17:21])[0] == crc32c.crc32c(EMPTY_BATCH[21:])


# --------------------------------------------------------------------------------------
# Seed 000: ShareFetch v0
# --------------------------------------------------------------------------------------

SHARE_FETCH_V0_REQUEST = b"".join(
    [
        b"\x00\x00\x00\x65",  # 0x0000 size int32 = 101
        # RequestHeader v2
        b"\x00\x4e",  # 0x0004 request_api_key int16 = 78
        b"\x00\x00",  # 0x0006 request_api_version int16 = 0
        b"\x00\x00\x00\x00",  # 0x0008 correlation_id int32 = 0
        b"\x00\x00",  # 0x000c client_id nullable_string = "" (int16 len 0)
        b"\x00",  # 0x000e header tagged_fields = 0
        # ShareFetchRequest v0
        b"\x01",  # 0x000f GroupId compact string "" (len+1 = 1)
        b"\x01",  # 0x0010 MemberId compact string ""
        b"\x00\x00\x00\x00",  # 0x0011 ShareSessionEpoch int32 = 0
        b"\x00\x00\x00\x00",  # 0x0015 MaxWaitMs int32 = 0
        b"\x00\x00\x00\x00",  # 0x0019 MinBytes int32 = 0
        b"\x00\x00\x00\x00",  # 0x001d MaxBytes int32 = 0
        b"\x02",  # 0x0021 Topics length uvarint = 2 (one element)
        Z16,  # 0x0022 FetchTopic.TopicId uuid = 0
        b"\x02",  # 0x0032 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x0033 PartitionIndex int32 = 0
        b"\x00\x00\x00\x00",  # 0x0037 PartitionMaxBytes int32 = 0 (v0 only)
        b"\x02",  # 0x003b AcknowledgementBatches length = 2 (one element)
        b"\x00" * 8,  # 0x003c FirstOffset int64 = 0
        b"\x00" * 8,  # 0x0044 LastOffset int64 = 0
        b"\x02",  # 0x004c AcknowledgeTypes length = 2 (one element)
        b"\x00",  # 0x004d AcknowledgeTypes[0] int8 = 0
        b"\x00",  # 0x004e AcknowledgementBatch tagged_fields
        b"\x00",  # 0x004f FetchPartition tagged_fields
        b"\x00",  # 0x0050 FetchTopic tagged_fields
        b"\x02",  # 0x0051 ForgottenTopicsData length = 2 (one element)
        Z16,  # 0x0052 ForgottenTopic.TopicId uuid = 0
        b"\x02",  # 0x0062 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x0063 Partitions[0] int32 = 0
        b"\x00",  # 0x0067 ForgottenTopic tagged_fields
        b"\x00",  # 0x0068 ShareFetchRequest tagged_fields
    ]
)

SHARE_FETCH_V0_REQUEST_BODY = ShareFetchRequest(
    group_id="",
    member_id="",
    share_session_epoch=0,
    max_wait_ms=0,
    min_bytes=0,
    max_bytes=0,
    topics=(
        share_fetch.FetchTopic(
            topic_id=ZERO_UUID,
            partitions=(
                share_fetch.FetchPartition(
                    partition_index=0,
                    partition_max_bytes=0,
                    acknowledgement_batches=(
                        share_fetch.AcknowledgementBatch(
                            first_offset=0, last_offset=0, acknowledge_types=(0,)
                        ),
                    ),
                ),
            ),
        ),
    ),
    forgotten_topics_data=(share_fetch.ForgottenTopic(topic_id=ZERO_UUID, partitions=(0,)),),
)

SHARE_FETCH_V0_RESPONSE = b"".join(
    [
        b"\x00\x00\x00\x92",  # 0x0000 size int32 = 146
        # ResponseHeader v1
        b"\x00\x00\x00\x00",  # 0x0004 correlation_id int32 = 0
        b"\x00",  # 0x0008 header tagged_fields
        # ShareFetchResponse v0
        b"\x00\x00\x00\x00",  # 0x0009 ThrottleTimeMs int32 = 0
        b"\x00\x00",  # 0x000d ErrorCode int16 = 0
        b"\x01",  # 0x000f ErrorMessage compact string ""
        b"\x02",  # 0x0010 Responses length = 2 (one element)
        Z16,  # 0x0011 TopicId uuid = 0
        b"\x02",  # 0x0021 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x0022 PartitionIndex int32 = 0
        b"\x00\x00",  # 0x0026 ErrorCode int16 = 0
        b"\x01",  # 0x0028 ErrorMessage ""
        b"\x00\x00",  # 0x0029 AcknowledgeErrorCode int16 = 0
        b"\x01",  # 0x002b AcknowledgeErrorMessage ""
        b"\x00\x00\x00\x00",  # 0x002c CurrentLeader.LeaderId int32 = 0
        b"\x00\x00\x00\x00",  # 0x0030 CurrentLeader.LeaderEpoch int32 = 0
        b"\x00",  # 0x0034 CurrentLeader tagged_fields
        b"\x3e",  # 0x0035 Records length uvarint = 62 (61 bytes)
        EMPTY_BATCH,  # 0x0036 one empty RecordBatch v2
        b"\x02",  # 0x0073 AcquiredRecords length = 2 (one element)
        b"\x00" * 8,  # 0x0074 FirstOffset int64 = 0
        b"\x00" * 8,  # 0x007c LastOffset int64 = 0
        b"\x00\x00",  # 0x0084 DeliveryCount int16 = 0
        b"\x00",  # 0x0086 AcquiredRecords tagged_fields
        b"\x00",  # 0x0087 PartitionData tagged_fields
        b"\x00",  # 0x0088 ShareFetchableTopicResponse tagged_fields
        b"\x02",  # 0x0089 NodeEndpoints length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x008a NodeId int32 = 0
        b"\x01",  # 0x008e Host ""
        b"\x00\x00\x00\x00",  # 0x008f Port int32 = 0
        b"\x01",  # 0x0093 Rack "" (empty, not null)
        b"\x00",  # 0x0094 NodeEndpoint tagged_fields
        b"\x00",  # 0x0095 ShareFetchResponse tagged_fields
    ]
)

SHARE_FETCH_V0_RESPONSE_BODY = ShareFetchResponse(
    throttle_time_ms=0,
    error_code=0,
    error_message="",
    responses=(
        share_fetch.ShareFetchableTopicResponse(
            topic_id=ZERO_UUID,
            partitions=(
                share_fetch.PartitionData(
                    partition_index=0,
                    error_code=0,
                    error_message="",
                    acknowledge_error_code=0,
                    acknowledge_error_message="",
                    current_leader=share_fetch.LeaderIdAndEpoch(leader_id=0, leader_epoch=0),
                    records=EMPTY_BATCH,
                    acquired_records=(
                        share_fetch.AcquiredRecords(
                            first_offset=0, last_offset=0, delivery_count=0
                        ),
                    ),
                ),
            ),
        ),
    ),
    node_endpoints=(share_fetch.NodeEndpoint(node_id=0, host="", port=0, rack=""),),
)


# --------------------------------------------------------------------------------------
# Seed 002: Fetch v17
# --------------------------------------------------------------------------------------

FETCH_V17_REQUEST = b"".join(
    [
        b"\x00\x00\x00\x6d",  # 0x0000 size int32 = 109
        # RequestHeader v2
        b"\x00\x01",  # 0x0004 request_api_key int16 = 1 (Fetch)
        b"\x00\x11",  # 0x0006 request_api_version int16 = 17
        b"\x00\x00\x00\x00",  # 0x0008 correlation_id int32 = 0
        b"\x00\x00",  # 0x000c client_id "" (int16 len 0)
        b"\x00",  # 0x000e header tagged_fields
        # FetchRequest v17 (ClusterId, ReplicaState: tagged, default, so absent)
        b"\x00\x00\x00\x00",  # 0x000f MaxWaitMs int32 = 0
        b"\x00\x00\x00\x00",  # 0x0013 MinBytes int32 = 0
        b"\x00\x00\x00\x00",  # 0x0017 MaxBytes int32 = 0
        b"\x00",  # 0x001b IsolationLevel int8 = 0
        b"\x00\x00\x00\x00",  # 0x001c SessionId int32 = 0
        b"\x00\x00\x00\x00",  # 0x0020 SessionEpoch int32 = 0
        b"\x02",  # 0x0024 Topics length = 2 (one element)
        Z16,  # 0x0025 TopicId uuid = 0
        b"\x02",  # 0x0035 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x0036 Partition int32 = 0
        b"\x00\x00\x00\x00",  # 0x003a CurrentLeaderEpoch int32 = 0
        b"\x00" * 8,  # 0x003e FetchOffset int64 = 0
        b"\x00\x00\x00\x00",  # 0x0046 LastFetchedEpoch int32 = 0
        b"\x00" * 8,  # 0x004a LogStartOffset int64 = 0
        b"\x00\x00\x00\x00",  # 0x0052 PartitionMaxBytes int32 = 0
        b"\x00",  # 0x0056 FetchPartition tagged_fields
        b"\x00",  # 0x0057 FetchTopic tagged_fields
        b"\x02",  # 0x0058 ForgottenTopicsData length = 2 (one element)
        Z16,  # 0x0059 TopicId uuid = 0
        b"\x02",  # 0x0069 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x006a Partitions[0] int32 = 0
        b"\x00",  # 0x006e ForgottenTopic tagged_fields
        b"\x01",  # 0x006f RackId compact string ""
        b"\x00",  # 0x0070 FetchRequest tagged_fields
    ]
)

FETCH_V17_REQUEST_BODY = FetchRequest(
    max_wait_ms=0,
    min_bytes=0,
    max_bytes=0,
    isolation_level=0,
    session_id=0,
    session_epoch=0,
    topics=(
        fetch.FetchTopic(
            topic_id=ZERO_UUID,
            partitions=(
                fetch.FetchPartition(
                    partition=0,
                    current_leader_epoch=0,
                    fetch_offset=0,
                    last_fetched_epoch=0,
                    log_start_offset=0,
                    partition_max_bytes=0,
                ),
            ),
        ),
    ),
    forgotten_topics_data=(fetch.ForgottenTopic(topic_id=ZERO_UUID, partitions=(0,)),),
    rack_id="",
)

FETCH_V17_RESPONSE = b"".join(
    [
        b"\x00\x00\x00\x96",  # 0x0000 size int32 = 150
        # ResponseHeader v1
        b"\x00\x00\x00\x00",  # 0x0004 correlation_id int32 = 0
        b"\x00",  # 0x0008 header tagged_fields
        # FetchResponse v17
        b"\x00\x00\x00\x00",  # 0x0009 ThrottleTimeMs int32 = 0
        b"\x00\x00",  # 0x000d ErrorCode int16 = 0
        b"\x00\x00\x00\x00",  # 0x000f SessionId int32 = 0
        b"\x02",  # 0x0013 Responses length = 2 (one element)
        Z16,  # 0x0014 TopicId uuid = 0
        b"\x02",  # 0x0024 Partitions length = 2 (one element)
        b"\x00\x00\x00\x00",  # 0x0025 PartitionIndex int32 = 0
        b"\x00\x00",  # 0x0029 ErrorCode int16 = 0
        b"\x00" * 8,  # 0x002b HighWatermark int64 = 0
        b"\x00" * 8,  # 0x0033 LastStableOffset int64 = 0
        b"\x00" * 8,  # 0x003b LogStartOffset int64 = 0
        b"\x02",  # 0x0043 AbortedTransactions length = 2 (one element)
        b"\x00" * 8,  # 0x0044 ProducerId int64 = 0
        b"\x00" * 8,  # 0x004c FirstOffset int64 = 0
        b"\x00",  # 0x0054 AbortedTransaction tagged_fields
        b"\x00\x00\x00\x00",  # 0x0055 PreferredReadReplica int32 = 0
        b"\x3e",  # 0x0059 Records length uvarint = 62 (61 bytes)
        EMPTY_BATCH,  # 0x005a one empty RecordBatch v2
        b"\x00",  # 0x0097 PartitionData tagged_fields (DivergingEpoch etc. absent)
        b"\x00",  # 0x0098 FetchableTopicResponse tagged_fields
        b"\x00",  # 0x0099 FetchResponse tagged_fields (NodeEndpoints empty, absent)
    ]
)

FETCH_V17_RESPONSE_BODY = FetchResponse(
    throttle_time_ms=0,
    error_code=0,
    session_id=0,
    responses=(
        fetch.FetchableTopicResponse(
            topic_id=ZERO_UUID,
            partitions=(
                fetch.PartitionData(
                    partition_index=0,
                    error_code=0,
                    high_watermark=0,
                    last_stable_offset=0,
                    log_start_offset=0,
                    aborted_transactions=(fetch.AbortedTransaction(producer_id=0, first_offset=0),),
                    preferred_read_replica=0,
                    records=EMPTY_BATCH,
                ),
            ),
        ),
    ),
)


# --------------------------------------------------------------------------------------
# Seed 003: ShareAcknowledge v2 response with non-zero values
# --------------------------------------------------------------------------------------

SHARE_ACK_V2_TOPIC = uuid.UUID("550e8400-e29b-41d4-a716-446655440000")

SHARE_ACK_V2_RESPONSE_BODY_BYTES = b"".join(
    [
        b"\x00\x00\x00\x00",  # ThrottleTimeMs int32 = 0
        b"\x00\x00",  # ErrorCode int16 = 0
        b"\x00",  # ErrorMessage compact string = null
        b"\x00\x00\x13\x88",  # AcquisitionLockTimeoutMs int32 = 5000 (v2+)
        b"\x02",  # Responses length = 2 (one element)
        SHARE_ACK_V2_TOPIC.bytes,  # TopicId uuid = 550e8400-e29b-41d4-a716-446655440000
        b"\x02",  # Partitions length = 2 (one element)
        b"\x00\x00\x00\x03",  # PartitionIndex int32 = 3
        b"\x00\x00",  # ErrorCode int16 = 0
        b"\x12NETWORK_EXCEPTION",  # ErrorMessage compact string (17 bytes, len+1 = 18)
        b"\x00\x00\x00\x01",  # CurrentLeader.LeaderId int32 = 1
        b"\x00\x00\x00\x11",  # CurrentLeader.LeaderEpoch int32 = 17
        b"\x00",  # CurrentLeader tagged_fields
        b"\x00",  # PartitionData tagged_fields
        b"\x00",  # ShareAcknowledgeTopicResponse tagged_fields
        b"\x02",  # NodeEndpoints length = 2 (one element)
        b"\x00\x00\x00\x01",  # NodeId int32 = 1
        b"\x15broker-1.kafka.local",  # Host compact string (20 bytes, len+1 = 21)
        b"\x00\x00\x23\x84",  # Port int32 = 9092
        b"\x0bus-east-1a",  # Rack compact string (10 bytes, len+1 = 11)
        b"\x00",  # NodeEndpoint tagged_fields
        b"\x00",  # ShareAcknowledgeResponse tagged_fields
    ]
)

# The seed gives no correlation id; 42 is ours, to exercise a non-zero header.
SHARE_ACK_V2_RESPONSE = b"".join(
    [
        struct.pack(">i", 4 + 1 + len(SHARE_ACK_V2_RESPONSE_BODY_BYTES)),  # size
        b"\x00\x00\x00\x2a",  # correlation_id int32 = 42
        b"\x00",  # ResponseHeader v1 tagged_fields
        SHARE_ACK_V2_RESPONSE_BODY_BYTES,
    ]
)

SHARE_ACK_V2_RESPONSE_BODY = ShareAcknowledgeResponse(
    throttle_time_ms=0,
    error_code=0,
    error_message=None,
    acquisition_lock_timeout_ms=5000,
    responses=(
        share_acknowledge.ShareAcknowledgeTopicResponse(
            topic_id=SHARE_ACK_V2_TOPIC,
            partitions=(
                share_acknowledge.PartitionData(
                    partition_index=3,
                    error_code=0,
                    error_message="NETWORK_EXCEPTION",
                    current_leader=share_acknowledge.LeaderIdAndEpoch(leader_id=1, leader_epoch=17),
                ),
            ),
        ),
    ),
    node_endpoints=(
        share_acknowledge.NodeEndpoint(
            node_id=1, host="broker-1.kafka.local", port=9092, rack="us-east-1a"
        ),
    ),
)


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------

REQUESTS = [
    pytest.param(
        78, 0, SHARE_FETCH_V0_REQUEST, SHARE_FETCH_V0_REQUEST_BODY, 105, id="ShareFetch-v0"
    ),
    pytest.param(1, 17, FETCH_V17_REQUEST, FETCH_V17_REQUEST_BODY, 113, id="Fetch-v17"),
]
RESPONSES = [
    pytest.param(
        78, 0, SHARE_FETCH_V0_RESPONSE, SHARE_FETCH_V0_RESPONSE_BODY, 0, 150, id="ShareFetch-v0"
    ),
    pytest.param(1, 17, FETCH_V17_RESPONSE, FETCH_V17_RESPONSE_BODY, 0, 154, id="Fetch-v17"),
    pytest.param(
        79,
        2,
        SHARE_ACK_V2_RESPONSE,
        SHARE_ACK_V2_RESPONSE_BODY,
        42,
        len(SHARE_ACK_V2_RESPONSE),
        id="ShareAcknowledge-v2",
    ),
]


@pytest.mark.parametrize(("key", "version", "wire", "body", "size"), REQUESTS)
def test_golden_request(key: int, version: int, wire: bytes, body: object, size: int) -> None:
    """encode_request gives the seed's bytes; decode_request gives the seed's values."""
    assert len(wire) == size  # the seed's total, size prefix included
    assert encode_request(key, version, 0, "", body) == wire  # type: ignore[arg-type]
    header, decoded = decode_request(wire[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 0)
    assert header.client_id == ""
    assert decoded == body


@pytest.mark.parametrize(("key", "version", "wire", "body", "corr", "size"), RESPONSES)
def test_golden_response(
    key: int, version: int, wire: bytes, body: object, corr: int, size: int
) -> None:
    """encode_response gives the seed's bytes; decode_response gives the seed's values."""
    assert len(wire) == size
    assert encode_response(key, version, corr, body) == wire  # type: ignore[arg-type]
    cid, decoded = decode_response(key, version, wire[4:])
    assert cid == corr
    assert decoded == body


def test_share_fetch_v0_decoded_field_values() -> None:
    """Spot-check decoded values and types, including the zero-copy records view."""
    _, resp = decode_response(78, 0, SHARE_FETCH_V0_RESPONSE[4:])
    assert isinstance(resp, ShareFetchResponse)
    part = resp.responses[0].partitions[0]
    assert part.error_message == ""  # empty, not null
    assert isinstance(part.records, memoryview)
    assert bytes(part.records) == EMPTY_BATCH
    assert part.acquired_records[0].delivery_count == 0
    assert resp.node_endpoints[0].rack == ""


def test_fetch_v17_absent_tagged_fields_decode_to_defaults() -> None:
    """Fetch v17 tagged fields the seed leaves out come back as their schema defaults."""
    _, req = decode_request(FETCH_V17_REQUEST[4:])
    assert isinstance(req, FetchRequest)
    assert req.cluster_id is None
    assert req.replica_state == fetch.ReplicaState(replica_id=-1, replica_epoch=-1)
    assert req.topics[0].partitions[0].replica_directory_id == ZERO_UUID
    _, resp = decode_response(1, 17, FETCH_V17_RESPONSE[4:])
    assert isinstance(resp, FetchResponse)
    part = resp.responses[0].partitions[0]
    assert part.current_leader == fetch.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert part.diverging_epoch == fetch.EpochEndOffset(epoch=-1, end_offset=-1)
    assert resp.node_endpoints == ()


def test_share_ack_v2_body_alone() -> None:
    """The v2 body bytes match the struct encode on its own, and v1 lacks the lock timeout."""
    assert SHARE_ACK_V2_RESPONSE_BODY.encode(2) == SHARE_ACK_V2_RESPONSE_BODY_BYTES
    assert (
        ShareAcknowledgeResponse.decode(SHARE_ACK_V2_RESPONSE_BODY_BYTES, 2)
        == SHARE_ACK_V2_RESPONSE_BODY
    )
    # AcquisitionLockTimeoutMs is v2+ and ignorable: v1 drops those four bytes.
    v1 = SHARE_ACK_V2_RESPONSE_BODY.encode(1)
    assert v1 == SHARE_ACK_V2_RESPONSE_BODY_BYTES[:7] + SHARE_ACK_V2_RESPONSE_BODY_BYTES[11:]


def test_share_fetch_v1_differs_from_v0_as_documented() -> None:
    """v1 drops PartitionMaxBytes and adds MaxRecords/BatchSize (request) and
    AcquisitionLockTimeoutMs (response); v0 bytes do not decode as v1."""
    body = SHARE_FETCH_V0_REQUEST_BODY
    v1 = encode_request(78, 1, 0, "", body)
    # +8 (MaxRecords, BatchSize) -4 (PartitionMaxBytes)
    assert len(v1) == len(SHARE_FETCH_V0_REQUEST) + 4
