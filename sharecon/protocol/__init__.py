"""Sans-I/O Kafka wire protocol: primitives, headers, messages, record batches, codecs.

Rules for everything under this package: no sockets, no anyio/asyncio, no clocks, no
logging. Decoders return a value or raise :class:`sharecon.errors.RemoteProtocolError`
(or its subclass :class:`~sharecon.errors.CorruptRecordError`); encoders return bytes
or raise :class:`sharecon.errors.LocalProtocolError`. Any other exception is a bug.

Message classes are importable from here by name (``ShareFetchRequest``); their nested
types live in the per-API module, e.g. ``sharecon.protocol.messages.share_fetch.FetchTopic``.
Each request class has ``api_key`` and ``response_type`` class attributes.
"""

from __future__ import annotations

from sharecon.protocol import messages
from sharecon.protocol.api import (
    decode_request,
    decode_response,
    decode_response_for,
    encode_request,
    encode_response,
    peek_correlation_id,
    request_class,
    response_class,
)
from sharecon.protocol.framing import NEED_DATA, FrameDecoder, NeedData, encode_frame
from sharecon.protocol.header import RequestHeader, ResponseHeader
from sharecon.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from sharecon.protocol.messages._base import Message, Request, Response, Struct
from sharecon.protocol.versions import CLIENT_VERSIONS, VersionTable, negotiate

__all__ = [
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CLIENT_VERSIONS",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "FrameDecoder",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "Message",
    "MetadataRequest",
    "MetadataResponse",
    "NEED_DATA",
    "NeedData",
    "ProduceRequest",
    "ProduceResponse",
    "Request",
    "RequestHeader",
    "Response",
    "ResponseHeader",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "Struct",
    "VersionTable",
    "decode_request",
    "decode_response",
    "decode_response_for",
    "encode_frame",
    "encode_request",
    "encode_response",
    "messages",
    "negotiate",
    "peek_correlation_id",
    "request_class",
    "response_class",
]
