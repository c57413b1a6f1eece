"""Sans-I/O Kafka wire protocol: primitives, headers, messages, record batches, codecs.

Rules for everything under this package: no sockets, no anyio/asyncio, no clocks, no
logging. Decoders return a value or raise :class:`sharecon.errors.RemoteProtocolError`
(or its subclass :class:`~sharecon.errors.CorruptRecordError`); encoders return bytes
or raise :class:`sharecon.errors.LocalProtocolError`. Any other exception is a bug.

Message classes are importable from here by name (``ShareFetchRequest``); their nested
types live in the per-API module, e.g. ``sharecon.protocol.messages.share_fetch.FetchTopic``.
Each request class has ``api_key`` and ``response_type`` class attributes. A message
module is imported the first time one of its classes is asked for (see
:mod:`sharecon.protocol.messages`): a share consumer never creates the admin's classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from sharecon.protocol.messages._base import Message, Request, Response, Struct
from sharecon.protocol.versions import CLIENT_VERSIONS, VersionTable, negotiate

if TYPE_CHECKING:
    from sharecon.protocol.messages import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsResponse,
        ApiVersionsRequest,
        ApiVersionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
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
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        ListGroupsRequest,
        ListGroupsResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        MetadataRequest,
        MetadataResponse,
        ProduceRequest,
        ProduceResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
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

__all__ = [
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CLIENT_VERSIONS",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
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
    "GetTelemetrySubscriptionsRequest",
    "GetTelemetrySubscriptionsResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "Message",
    "MetadataRequest",
    "MetadataResponse",
    "NEED_DATA",
    "NeedData",
    "ProduceRequest",
    "ProduceResponse",
    "PushTelemetryRequest",
    "PushTelemetryResponse",
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


def __getattr__(name: str) -> object:
    """A message class, imported from its module on first use (PEP 562)."""
    if name.endswith(("Request", "Response")) and name in messages.__all__:
        value: object = getattr(messages, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
