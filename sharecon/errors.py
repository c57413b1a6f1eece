"""One exception hierarchy for sharecon, rooted in :class:`KafkaError`.

Layout::

    KafkaError
    ├── ProtocolError                 bytes that do not follow the Kafka protocol
    │   ├── LocalProtocolError        we were asked to encode something illegal
    │   └── RemoteProtocolError       the peer sent something we cannot decode
    │       └── CorruptRecordError    a record batch failed its CRC, or would not decompress
    ├── IncompatibleBrokerError       the broker lacks an API/version/feature we need
    ├── ConfigError                   a wrong argument or configuration value
    ├── UnacknowledgedRecordsError    explicit mode: delivered records were not answered
    ├── DeadLetterError               a dead-letter copy could not be written (record released)
    │   └── DeadLetterTopicError      ... and never will be (not authorized, invalid topic): the consumer stops
    ├── SerializationError            a producer's serializer failed (nothing was sent)
    ├── WouldBlockError               send_nowait() would have to wait (nothing was queued)
    ├── DeserializationError          a consumer's deserializer failed (the record was released)
    ├── ClientStateError              a client used before start() or after close
    │   ├── ClientNotStartedError     ... before start() (or ``async with``)
    │   └── ClientClosedError         ... after close (or a second start after close)
    ├── KafkaConnectionError          a connection to a broker failed or broke
    │   ├── BrokerConnectError        could not connect (refused, unreachable, TLS handshake)
    │   └── BrokerDisconnectedError   an open connection broke or was closed
    ├── OAuthTokenError               no OAUTHBEARER token could be obtained
    │   ├── OAuthTokenRefusedError    ... the token endpoint refused this client (never heals)
    │   └── OAuthTokenUnavailableError ... not now (endpoint down, 5xx, 429): retried inside
    ├── KafkaTimeoutError             a deadline passed
    │   └── RequestTimeoutError       a request got no response in time
    └── BrokerError                   the broker answered with a non-zero error code
        └── one class per code (``UnknownTopicOrPartitionError``, ``InvalidRecordStateError``, ...)

Each broker error code is mapped exactly once, in the table ``tools/spec/errors/`` from
which ``tools/gen_errors.py`` generates the classes below, :class:`ErrorCode` (an
``IntEnum`` that ``sharecon.protocol.error_codes`` re-exports for the protocol layer) and
:data:`ERROR_CODES`. Use :func:`error_for_code` to turn a code into an exception instance,
and :class:`ErrorCode` to name a code in code. Codes the broker
may send that this table does not know become :class:`UnknownServerError`, keeping
the number.
"""

from __future__ import annotations

import builtins
from enum import IntEnum
from typing import ClassVar, Literal, NamedTuple

__all__ = [
    "ERROR_CODES",
    "BrokerConnectError",
    "BrokerDisconnectedError",
    "BrokerError",
    "ClientClosedError",
    "ClientNotStartedError",
    "ClientStateError",
    "ForkedClientError",
    "ConfigError",
    "DeadLetterError",
    "DeadLetterTopicError",
    "CorruptRecordError",
    "DeserializationError",
    "ErrorCode",
    "ErrorSpec",
    "IncompatibleBrokerError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LocalProtocolError",
    "OAuthTokenError",
    "OAuthTokenRefusedError",
    "OAuthTokenUnavailableError",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestTimeoutError",
    "SerializationError",
    "TlsAuthenticationError",
    "UnacknowledgedRecordsError",
    "WouldBlockError",
    "error_class_for_code",
    "error_for_code",
]
# The per-code classes below are exported too (see the end of this module).


class KafkaError(Exception):
    """Root of every exception sharecon raises on purpose."""

    #: Whether retrying the same operation may succeed.
    retriable: ClassVar[bool] = False


class ProtocolError(KafkaError):
    """Bytes that do not follow the Kafka wire protocol."""


class LocalProtocolError(ProtocolError):
    """We were asked to encode something the protocol cannot express (our side's fault)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes we cannot decode: truncated, malformed, or inconsistent."""


class CorruptRecordError(RemoteProtocolError):
    """A record batch failed its CRC-32C check, would not decompress, or is malformed.

    ``base_offset`` and ``last_offset`` (inclusive) name the offsets the bad batch
    covers when they could be read, so callers can release or reject exactly those.
    """

    def __init__(
        self,
        message: str,
        *,
        base_offset: int | None = None,
        last_offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.base_offset = base_offset
        self.last_offset = last_offset


class IncompatibleBrokerError(KafkaError):
    """The broker does not offer an API, version or feature that is required."""


class DeadLetterError(KafkaError):
    """A dead-letter copy could not be written; the original record was released, not rejected."""


class DeadLetterTopicError(DeadLetterError):
    """The dead-letter topic cannot be written and retrying will not help: the principal
    may not write (or create, or describe) it, or its name is invalid. The record was
    released, and the consumer stops with this error, so that no further record is sent
    back towards its delivery limit; ``__cause__`` is the broker's error."""


class UnacknowledgedRecordsError(KafkaError):
    """Explicit acknowledgement mode: records were delivered and not answered; names them."""


class ConfigError(KafkaError, ValueError):
    """A configuration value or argument is wrong; the message names which and why."""


class SerializationError(KafkaError):
    """A producer's ``key_serializer`` or ``value_serializer`` raised, or returned something
    other than bytes or ``None``; the record was not sent.

    The serializer's own exception (if it raised) is the ``__cause__``.

    :ivar topic: the topic the record was for.
    :ivar field: ``"key"`` or ``"value"``: which serializer failed.
    """

    def __init__(self, message: str, *, topic: str, field: Literal["key", "value"]) -> None:
        super().__init__(message)
        self.topic = topic
        self.field = field


class WouldBlockError(KafkaError):
    """:meth:`Producer.send_nowait <sharecon.producer.Producer.send_nowait>` cannot queue the
    record without waiting: the buffer is full (``max_buffer_bytes``), the topic's
    partitions are not known yet, or a serializer is async (it must be awaited). Nothing
    was queued; ``await producer.send(...)`` waits for what is missing instead.

    :ivar reason: ``"buffer"`` (it is full), ``"metadata"`` (the topic is not known yet)
        or ``"serializer"`` (an :func:`~sharecon.serde.async_serializer`).
    """

    def __init__(
        self, message: str, *, reason: Literal["buffer", "metadata", "serializer"]
    ) -> None:
        super().__init__(message)
        self.reason = reason


class DeserializationError(KafkaError):
    """A consumer's ``key_deserializer`` or ``value_deserializer`` raised for one record.

    Raised where that record would have been handed out. The record is not lost: the
    consumer released it (the broker delivers it again, with its delivery count one
    higher), or, on its last allowed delivery under a
    :class:`~sharecon.dlq.DeadLetterPolicy`, routed it to the dead-letter topic
    (``dead_lettered`` is then true). Consuming continues with the next call. The
    deserializer's exception is the ``__cause__``.

    :ivar topic: the record's topic.
    :ivar partition: its partition.
    :ivar offset: its offset.
    :ivar field: ``"key"`` or ``"value"``: which deserializer failed.
    :ivar data: the bytes the deserializer was given.
    :ivar delivery_count: the delivery that failed (1 the first time).
    :ivar dead_lettered: true when the record was routed to the dead-letter topic instead
        of being released.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        field: Literal["key", "value"],
        data: bytes,
        delivery_count: int,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.field = field
        self.data = data
        self.delivery_count = delivery_count
        self.dead_lettered = False


class ClientStateError(KafkaError, RuntimeError):
    """A client (:class:`~sharecon.ShareConsumer`, :class:`~sharecon.Producer`,
    :class:`~sharecon.Admin`) was used when it is not running: before ``start()`` (or
    ``async with``), or after it was closed. The message names the client and what to do."""


class ClientNotStartedError(ClientStateError):
    """The client is not started: use ``async with client`` or ``await client.start()``."""


class ClientClosedError(ClientStateError):
    """The client was closed; it cannot be used or started again (make a new one)."""


class ForkedClientError(ClientStateError):
    """A blocking client (:mod:`sharecon.sync`) was used in a child process after
    ``fork()``: its event-loop thread and connections stay in the parent. Make a new
    client in the child."""


class KafkaConnectionError(KafkaError, builtins.ConnectionError):
    """A connection to a broker could not be made, or broke; the message names the broker."""

    retriable = True


class BrokerConnectError(KafkaConnectionError):
    """A connection to a broker could not be opened (refused, unreachable, TLS or SASL failed).

    ``definite`` is True when the address answered at once that it cannot serve us: it
    refused the connection, or what listens there does not speak Kafka. Unlike a timeout,
    retrying soon rarely helps, so the bootstrap gives up on such answers within seconds.
    """

    def __init__(self, message: str, *, definite: bool = False) -> None:
        super().__init__(message)
        self.definite = definite


class TlsAuthenticationError(BrokerConnectError):
    """The broker refused this client's TLS certificate (none given, untrusted, expired).

    Retrying with the same certificate files cannot help, so the bootstrap gives up at
    once; replace the files (they are re-read for each new connection) or fix the
    ``tls=`` settings. ``definite`` is always True.
    """

    retriable = False

    def __init__(self, message: str) -> None:
        super().__init__(message, definite=True)


class BrokerDisconnectedError(KafkaConnectionError):
    """An open connection broke or was closed; requests pending on it failed with this."""


class OAuthTokenError(KafkaError):
    """An OAUTHBEARER token could not be obtained, so no login was tried.

    The token endpoint refused the client (``invalid_client``: a wrong id or secret), or
    could not be reached after retries, or the token provider failed. The message names
    the endpoint and its HTTP status and OAuth error code, never a secret or a token.
    A token the *broker* refuses is a :class:`SaslAuthenticationFailedError` instead.

    Two subclasses say whether waiting can help: :class:`OAuthTokenRefusedError` (no) and
    :class:`OAuthTokenUnavailableError` (yes; the clients retry it by themselves).
    """


class OAuthTokenRefusedError(OAuthTokenError):
    """The token endpoint refused this client (HTTP 4xx such as 401 ``invalid_client``,
    ``invalid_scope``, ``unsupported_grant_type``), or answered something that is not a
    usable token. Asking again with the same settings gets the same answer, so it is
    raised at once: fix the client id, secret or scope."""

    retriable = False


class OAuthTokenUnavailableError(OAuthTokenError, BrokerConnectError):
    """No token now: the token endpoint could not be reached, timed out, or answered 5xx
    or 429, and no still-valid token was cached.

    It is a :class:`BrokerConnectError` too, because without a token no connection can be
    opened; the clients treat it as one: they retry by themselves (with backoff, see
    ``docs/security.md``), report it in ``health()``, and carry on when the endpoint answers
    again. It reaches the caller only where a broker outage would (``start()`` past its
    bootstrap timeout, an ``Admin`` call, a ``send()`` past its delivery timeout).
    """

    retriable = True


class KafkaTimeoutError(KafkaError, builtins.TimeoutError):
    """An operation did not finish before its deadline."""

    retriable = True


class RequestTimeoutError(KafkaTimeoutError):
    """A request got no response before its deadline; the connection itself is still usable."""


class BrokerError(KafkaError):
    """The broker answered with a non-zero error code.

    Subclasses exist for every code in :data:`ERROR_CODES`; ``code``, ``name`` and
    ``retriable`` are class attributes. ``str(err)`` reads
    ``[122 SHARE_SESSION_NOT_FOUND] The share session was not found.`` followed by
    any context the raiser added.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    description: ClassVar[str] = "The broker reported an unexpected error."

    def __init__(self, message: str | None = None, *, code: int | None = None) -> None:
        # `code` is only for UnknownServerError standing in for a code we do not know.
        self.error_code = self.code if code is None else code
        detail = f" {message}" if message else ""
        super().__init__(f"[{self.error_code} {self.name}] {self.description}{detail}")


class ErrorSpec(NamedTuple):
    """One row of the broker error-code table (the name ``ErrorCode`` is the IntEnum)."""

    code: int
    name: str
    retriable: bool
    description: str


# --- BEGIN GENERATED by tools/gen_errors.py: do not edit by hand ---


class ErrorCode(IntEnum):
    """A broker error code; ``NONE`` (0) means success. Members are ints, so
    ``response.error_code == ErrorCode.NOT_COORDINATOR`` works on a decoded int16."""

    #: No error.
    NONE = 0
    #: The broker hit an unexpected error handling the request.
    UNKNOWN_SERVER_ERROR = -1
    #: The offset is outside the partition's log.
    OFFSET_OUT_OF_RANGE = 1
    #: A message failed its CRC, its size check, or is otherwise corrupt.
    CORRUPT_MESSAGE = 2
    #: The broker does not host this topic-partition.
    UNKNOWN_TOPIC_OR_PARTITION = 3
    #: The fetch size is invalid.
    INVALID_FETCH_SIZE = 4
    #: The partition has no leader right now (an election is under way).
    LEADER_NOT_AVAILABLE = 5
    #: This broker is not the partition's leader (or not a replica).
    NOT_LEADER_OR_FOLLOWER = 6
    #: The request timed out on the broker.
    REQUEST_TIMED_OUT = 7
    #: The broker is not available.
    BROKER_NOT_AVAILABLE = 8
    #: The replica is not available for the partition.
    REPLICA_NOT_AVAILABLE = 9
    #: A message is larger than the broker accepts.
    MESSAGE_TOO_LARGE = 10
    #: The controller moved to another broker.
    STALE_CONTROLLER_EPOCH = 11
    #: The offset metadata is too large.
    OFFSET_METADATA_TOO_LARGE = 12
    #: The connection closed before a response arrived.
    NETWORK_EXCEPTION = 13
    #: The coordinator is still loading its state.
    COORDINATOR_LOAD_IN_PROGRESS = 14
    #: The coordinator is not available.
    COORDINATOR_NOT_AVAILABLE = 15
    #: This broker is not the coordinator for the group.
    NOT_COORDINATOR = 16
    #: The topic name or operation is invalid.
    INVALID_TOPIC_EXCEPTION = 17
    #: A record batch is larger than the broker's segment size.
    RECORD_LIST_TOO_LARGE = 18
    #: Fewer in-sync replicas than required; nothing was written.
    NOT_ENOUGH_REPLICAS = 19
    #: Written, but to fewer in-sync replicas than required.
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    #: The produce request's acks value is invalid.
    INVALID_REQUIRED_ACKS = 21
    #: The group generation is not valid.
    ILLEGAL_GENERATION = 22
    #: The member's protocols do not match the group's.
    INCONSISTENT_GROUP_PROTOCOL = 23
    #: The group id is invalid.
    INVALID_GROUP_ID = 24
    #: The coordinator does not know this member.
    UNKNOWN_MEMBER_ID = 25
    #: The session timeout is outside the broker's allowed range.
    INVALID_SESSION_TIMEOUT = 26
    #: The group is rebalancing.
    REBALANCE_IN_PROGRESS = 27
    #: The committed offset data size is invalid.
    INVALID_COMMIT_OFFSET_SIZE = 28
    #: Not authorized to access the topic.
    TOPIC_AUTHORIZATION_FAILED = 29
    #: Not authorized to access the group.
    GROUP_AUTHORIZATION_FAILED = 30
    #: Not authorized for the cluster operation.
    CLUSTER_AUTHORIZATION_FAILED = 31
    #: A timestamp is out of the accepted range.
    INVALID_TIMESTAMP = 32
    #: The broker does not support this SASL mechanism.
    UNSUPPORTED_SASL_MECHANISM = 33
    #: The request is not valid in the current SASL state.
    ILLEGAL_SASL_STATE = 34
    #: The broker does not support this API version or feature.
    UNSUPPORTED_VERSION = 35
    #: A topic with this name already exists.
    TOPIC_ALREADY_EXISTS = 36
    #: The partition count is invalid.
    INVALID_PARTITIONS = 37
    #: The replication factor is invalid for this cluster.
    INVALID_REPLICATION_FACTOR = 38
    #: The replica assignment is invalid.
    INVALID_REPLICA_ASSIGNMENT = 39
    #: A configuration value is invalid.
    INVALID_CONFIG = 40
    #: This broker is not the controller.
    NOT_CONTROLLER = 41
    #: The broker found the request malformed or not allowed; see its log.
    INVALID_REQUEST = 42
    #: The message format does not support the request.
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    #: The request violates a configured policy.
    POLICY_VIOLATION = 44
    #: The broker received an out-of-order sequence number.
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    #: The broker received a duplicate sequence number.
    DUPLICATE_SEQUENCE_NUMBER = 46
    #: The producer epoch is old.
    INVALID_PRODUCER_EPOCH = 47
    #: The transactional operation is invalid in this state.
    INVALID_TXN_STATE = 48
    #: The producer id is not assigned to this transactional id.
    INVALID_PRODUCER_ID_MAPPING = 49
    #: The transaction timeout exceeds the broker's maximum.
    INVALID_TRANSACTION_TIMEOUT = 50
    #: Another operation on this transaction is under way.
    CONCURRENT_TRANSACTIONS = 51
    #: The transaction coordinator has been fenced.
    TRANSACTION_COORDINATOR_FENCED = 52
    #: Not authorized for the transactional id.
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    #: Security features are disabled on the broker.
    SECURITY_DISABLED = 54
    #: The broker did not attempt this operation.
    OPERATION_NOT_ATTEMPTED = 55
    #: The broker hit a disk error.
    KAFKA_STORAGE_ERROR = 56
    #: The log directory is not configured on the broker.
    LOG_DIR_NOT_FOUND = 57
    #: SASL authentication failed.
    SASL_AUTHENTICATION_FAILED = 58
    #: The broker has no state for this producer id.
    UNKNOWN_PRODUCER_ID = 59
    #: A partition reassignment is in progress.
    REASSIGNMENT_IN_PROGRESS = 60
    #: Delegation tokens are disabled.
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    #: The delegation token was not found.
    DELEGATION_TOKEN_NOT_FOUND = 62
    #: The principal is not the token's owner or renewer.
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    #: Delegation token requests are not allowed on this channel.
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    #: Delegation token authorization failed.
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    #: The delegation token has expired.
    DELEGATION_TOKEN_EXPIRED = 66
    #: The principal type is not supported.
    INVALID_PRINCIPAL_TYPE = 67
    #: The group still has members.
    NON_EMPTY_GROUP = 68
    #: The group does not exist.
    GROUP_ID_NOT_FOUND = 69
    #: The fetch session was not found.
    FETCH_SESSION_ID_NOT_FOUND = 70
    #: The fetch session epoch is invalid.
    INVALID_FETCH_SESSION_EPOCH = 71
    #: The leader has no listener matching the one used for metadata.
    LISTENER_NOT_FOUND = 72
    #: Topic deletion is disabled on the broker.
    TOPIC_DELETION_DISABLED = 73
    #: The request's leader epoch is older than the broker's.
    FENCED_LEADER_EPOCH = 74
    #: The request's leader epoch is newer than the broker's.
    UNKNOWN_LEADER_EPOCH = 75
    #: The client does not support the partition's compression.
    UNSUPPORTED_COMPRESSION_TYPE = 76
    #: The broker epoch has changed.
    STALE_BROKER_EPOCH = 77
    #: The leader's high watermark has not caught up yet.
    OFFSET_NOT_AVAILABLE = 78
    #: The member needs a member id first.
    MEMBER_ID_REQUIRED = 79
    #: The preferred leader is not available.
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    #: The group has reached its maximum number of members.
    GROUP_MAX_SIZE_REACHED = 81
    #: Another member registered with the same group.instance.id.
    FENCED_INSTANCE_ID = 82
    #: No eligible leaders are available.
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    #: A leader election is not needed.
    ELECTION_NOT_NEEDED = 84
    #: No partition reassignment is in progress.
    NO_REASSIGNMENT_IN_PROGRESS = 85
    #: The group is still subscribed to the topic.
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    #: The broker rejected a record as invalid.
    INVALID_RECORD = 87
    #: There are unstable offsets to clear first.
    UNSTABLE_OFFSET_COMMIT = 88
    #: A throttling quota was exceeded.
    THROTTLING_QUOTA_EXCEEDED = 89
    #: A newer producer with the same transactional id fenced this one.
    PRODUCER_FENCED = 90
    #: The resource does not exist.
    RESOURCE_NOT_FOUND = 91
    #: The request named the same resource twice.
    DUPLICATE_RESOURCE = 92
    #: The credential does not meet the broker's criteria.
    UNACCEPTABLE_CREDENTIAL = 93
    #: The voter set is inconsistent.
    INCONSISTENT_VOTER_SET = 94
    #: The update version is invalid.
    INVALID_UPDATE_VERSION = 95
    #: Finalized features could not be updated.
    FEATURE_UPDATE_FAILED = 96
    #: The request principal could not be deserialized.
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    #: The snapshot was not found.
    SNAPSHOT_NOT_FOUND = 98
    #: The snapshot position is out of range.
    POSITION_OUT_OF_RANGE = 99
    #: The broker does not host this topic id.
    UNKNOWN_TOPIC_ID = 100
    #: This broker id is already registered.
    DUPLICATE_BROKER_REGISTRATION = 101
    #: This broker id is not registered.
    BROKER_ID_NOT_REGISTERED = 102
    #: The log's topic id does not match the request's.
    INCONSISTENT_TOPIC_ID = 103
    #: The cluster id does not match the broker's.
    INCONSISTENT_CLUSTER_ID = 104
    #: The transactional id was not found.
    TRANSACTIONAL_ID_NOT_FOUND = 105
    #: The fetch session used topic ids inconsistently.
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    #: The new ISR contains an ineligible replica.
    INELIGIBLE_REPLICA = 107
    #: The partition state changed but a new leader was elected.
    NEW_LEADER_ELECTED = 108
    #: The offset has moved to tiered storage.
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    #: The member epoch was fenced; the member must rejoin.
    FENCED_MEMBER_EPOCH = 110
    #: The instance id is still used by another member.
    UNRELEASED_INSTANCE_ID = 111
    #: The group does not support the assignor.
    UNSUPPORTED_ASSIGNOR = 112
    #: The member epoch is stale.
    STALE_MEMBER_EPOCH = 113
    #: The request went to an endpoint of the wrong type.
    MISMATCHED_ENDPOINT_TYPE = 114
    #: This endpoint type is not supported.
    UNSUPPORTED_ENDPOINT_TYPE = 115
    #: The controller id is not known.
    UNKNOWN_CONTROLLER_ID = 116
    #: The telemetry subscription id is unknown or outdated.
    UNKNOWN_SUBSCRIPTION_ID = 117
    #: The telemetry push is larger than the broker accepts.
    TELEMETRY_TOO_LARGE = 118
    #: The broker registration is invalid.
    INVALID_REGISTRATION = 119
    #: The transaction hit an error and can be aborted.
    TRANSACTION_ABORTABLE = 120
    #: The record is not acquired by this member (lock expired, or not ours).
    INVALID_RECORD_STATE = 121
    #: The share session was not found.
    SHARE_SESSION_NOT_FOUND = 122
    #: The share session epoch is not the one the broker expects.
    INVALID_SHARE_SESSION_EPOCH = 123
    #: The share-group state epoch did not match.
    FENCED_STATE_EPOCH = 124
    #: The voter key does not match the replica's.
    INVALID_VOTER_KEY = 125
    #: The voter is already in the voter set.
    DUPLICATE_VOTER = 126
    #: The voter is not in the voter set.
    VOTER_NOT_FOUND = 127
    #: The regular expression is invalid.
    INVALID_REGULAR_EXPRESSION = 128
    #: Client metadata is stale; the client must rebootstrap.
    REBOOTSTRAP_REQUIRED = 129
    #: The streams topology is invalid.
    STREAMS_INVALID_TOPOLOGY = 130
    #: The streams topology epoch is invalid.
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    #: The streams topology epoch is outdated.
    STREAMS_TOPOLOGY_FENCED = 132
    #: The broker's share-session cache is full.
    SHARE_SESSION_LIMIT_REACHED = 133


class UnknownServerError(BrokerError):
    """Broker error -1 UNKNOWN_SERVER_ERROR: The broker hit an unexpected error handling the request."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False
    description = "The broker hit an unexpected error handling the request."


class OffsetOutOfRangeError(BrokerError):
    """Broker error 1 OFFSET_OUT_OF_RANGE: The offset is outside the partition's log."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False
    description = "The offset is outside the partition's log."


class CorruptMessageError(BrokerError):
    """Broker error 2 CORRUPT_MESSAGE: A message failed its CRC, its size check, or is otherwise corrupt."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    description = "A message failed its CRC, its size check, or is otherwise corrupt."


class UnknownTopicOrPartitionError(BrokerError):
    """Broker error 3 UNKNOWN_TOPIC_OR_PARTITION: The broker does not host this topic-partition."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    description = "The broker does not host this topic-partition."


class InvalidFetchSizeError(BrokerError):
    """Broker error 4 INVALID_FETCH_SIZE: The fetch size is invalid."""

    code = 4
    name = "INVALID_FETCH_SIZE"
    retriable = False
    description = "The fetch size is invalid."


class LeaderNotAvailableError(BrokerError):
    """Broker error 5 LEADER_NOT_AVAILABLE: The partition has no leader right now (an election is under way)."""

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    description = "The partition has no leader right now (an election is under way)."


class NotLeaderOrFollowerError(BrokerError):
    """Broker error 6 NOT_LEADER_OR_FOLLOWER: This broker is not the partition's leader (or not a replica)."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    description = "This broker is not the partition's leader (or not a replica)."


class RequestTimedOutError(BrokerError):
    """Broker error 7 REQUEST_TIMED_OUT: The request timed out on the broker."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    description = "The request timed out on the broker."


class BrokerNotAvailableError(BrokerError):
    """Broker error 8 BROKER_NOT_AVAILABLE: The broker is not available."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"
    retriable = False
    description = "The broker is not available."


class ReplicaNotAvailableError(BrokerError):
    """Broker error 9 REPLICA_NOT_AVAILABLE: The replica is not available for the partition."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    description = "The replica is not available for the partition."


class MessageTooLargeError(BrokerError):
    """Broker error 10 MESSAGE_TOO_LARGE: A message is larger than the broker accepts."""

    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False
    description = "A message is larger than the broker accepts."


class StaleControllerEpochError(BrokerError):
    """Broker error 11 STALE_CONTROLLER_EPOCH: The controller moved to another broker."""

    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    retriable = False
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(BrokerError):
    """Broker error 12 OFFSET_METADATA_TOO_LARGE: The offset metadata is too large."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    retriable = False
    description = "The offset metadata is too large."


class NetworkError(BrokerError):
    """Broker error 13 NETWORK_EXCEPTION: The connection closed before a response arrived."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    description = "The connection closed before a response arrived."


class CoordinatorLoadInProgressError(BrokerError):
    """Broker error 14 COORDINATOR_LOAD_IN_PROGRESS: The coordinator is still loading its state."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    description = "The coordinator is still loading its state."


class CoordinatorNotAvailableError(BrokerError):
    """Broker error 15 COORDINATOR_NOT_AVAILABLE: The coordinator is not available."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    description = "The coordinator is not available."


class NotCoordinatorError(BrokerError):
    """Broker error 16 NOT_COORDINATOR: This broker is not the coordinator for the group."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    description = "This broker is not the coordinator for the group."


class InvalidTopicError(BrokerError):
    """Broker error 17 INVALID_TOPIC_EXCEPTION: The topic name or operation is invalid."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False
    description = "The topic name or operation is invalid."


class RecordListTooLargeError(BrokerError):
    """Broker error 18 RECORD_LIST_TOO_LARGE: A record batch is larger than the broker's segment size."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False
    description = "A record batch is larger than the broker's segment size."


class NotEnoughReplicasError(BrokerError):
    """Broker error 19 NOT_ENOUGH_REPLICAS: Fewer in-sync replicas than required; nothing was written."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    description = "Fewer in-sync replicas than required; nothing was written."


class NotEnoughReplicasAfterAppendError(BrokerError):
    """Broker error 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND: Written, but to fewer in-sync replicas than required."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    description = "Written, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(BrokerError):
    """Broker error 21 INVALID_REQUIRED_ACKS: The produce request's acks value is invalid."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"
    retriable = False
    description = "The produce request's acks value is invalid."


class IllegalGenerationError(BrokerError):
    """Broker error 22 ILLEGAL_GENERATION: The group generation is not valid."""

    code = 22
    name = "ILLEGAL_GENERATION"
    retriable = False
    description = "The group generation is not valid."


class InconsistentGroupProtocolError(BrokerError):
    """Broker error 23 INCONSISTENT_GROUP_PROTOCOL: The member's protocols do not match the group's."""

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    retriable = False
    description = "The member's protocols do not match the group's."


class InvalidGroupIdError(BrokerError):
    """Broker error 24 INVALID_GROUP_ID: The group id is invalid."""

    code = 24
    name = "INVALID_GROUP_ID"
    retriable = False
    description = "The group id is invalid."


class UnknownMemberIdError(BrokerError):
    """Broker error 25 UNKNOWN_MEMBER_ID: The coordinator does not know this member."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"
    retriable = False
    description = "The coordinator does not know this member."


class InvalidSessionTimeoutError(BrokerError):
    """Broker error 26 INVALID_SESSION_TIMEOUT: The session timeout is outside the broker's allowed range."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    retriable = False
    description = "The session timeout is outside the broker's allowed range."


class RebalanceInProgressError(BrokerError):
    """Broker error 27 REBALANCE_IN_PROGRESS: The group is rebalancing."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"
    retriable = False
    description = "The group is rebalancing."


class InvalidCommitOffsetSizeError(BrokerError):
    """Broker error 28 INVALID_COMMIT_OFFSET_SIZE: The committed offset data size is invalid."""

    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    retriable = False
    description = "The committed offset data size is invalid."


class TopicAuthorizationFailedError(BrokerError):
    """Broker error 29 TOPIC_AUTHORIZATION_FAILED: Not authorized to access the topic."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    retriable = False
    description = "Not authorized to access the topic."


class GroupAuthorizationFailedError(BrokerError):
    """Broker error 30 GROUP_AUTHORIZATION_FAILED: Not authorized to access the group."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    retriable = False
    description = "Not authorized to access the group."


class ClusterAuthorizationFailedError(BrokerError):
    """Broker error 31 CLUSTER_AUTHORIZATION_FAILED: Not authorized for the cluster operation."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    retriable = False
    description = "Not authorized for the cluster operation."


class InvalidTimestampError(BrokerError):
    """Broker error 32 INVALID_TIMESTAMP: A timestamp is out of the accepted range."""

    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False
    description = "A timestamp is out of the accepted range."


class UnsupportedSaslMechanismError(BrokerError):
    """Broker error 33 UNSUPPORTED_SASL_MECHANISM: The broker does not support this SASL mechanism."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    retriable = False
    description = "The broker does not support this SASL mechanism."


class IllegalSaslStateError(BrokerError):
    """Broker error 34 ILLEGAL_SASL_STATE: The request is not valid in the current SASL state."""

    code = 34
    name = "ILLEGAL_SASL_STATE"
    retriable = False
    description = "The request is not valid in the current SASL state."


class UnsupportedVersionError(BrokerError):
    """Broker error 35 UNSUPPORTED_VERSION: The broker does not support this API version or feature."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    retriable = False
    description = "The broker does not support this API version or feature."


class TopicAlreadyExistsError(BrokerError):
    """Broker error 36 TOPIC_ALREADY_EXISTS: A topic with this name already exists."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    retriable = False
    description = "A topic with this name already exists."


class InvalidPartitionsError(BrokerError):
    """Broker error 37 INVALID_PARTITIONS: The partition count is invalid."""

    code = 37
    name = "INVALID_PARTITIONS"
    retriable = False
    description = "The partition count is invalid."


class InvalidReplicationFactorError(BrokerError):
    """Broker error 38 INVALID_REPLICATION_FACTOR: The replication factor is invalid for this cluster."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    retriable = False
    description = "The replication factor is invalid for this cluster."


class InvalidReplicaAssignmentError(BrokerError):
    """Broker error 39 INVALID_REPLICA_ASSIGNMENT: The replica assignment is invalid."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    retriable = False
    description = "The replica assignment is invalid."


class InvalidConfigError(BrokerError):
    """Broker error 40 INVALID_CONFIG: A configuration value is invalid."""

    code = 40
    name = "INVALID_CONFIG"
    retriable = False
    description = "A configuration value is invalid."


class NotControllerError(BrokerError):
    """Broker error 41 NOT_CONTROLLER: This broker is not the controller."""

    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    description = "This broker is not the controller."


class InvalidRequestError(BrokerError):
    """Broker error 42 INVALID_REQUEST: The broker found the request malformed or not allowed; see its log."""

    code = 42
    name = "INVALID_REQUEST"
    retriable = False
    description = "The broker found the request malformed or not allowed; see its log."


class UnsupportedForMessageFormatError(BrokerError):
    """Broker error 43 UNSUPPORTED_FOR_MESSAGE_FORMAT: The message format does not support the request."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    retriable = False
    description = "The message format does not support the request."


class PolicyViolationError(BrokerError):
    """Broker error 44 POLICY_VIOLATION: The request violates a configured policy."""

    code = 44
    name = "POLICY_VIOLATION"
    retriable = False
    description = "The request violates a configured policy."


class OutOfOrderSequenceNumberError(BrokerError):
    """Broker error 45 OUT_OF_ORDER_SEQUENCE_NUMBER: The broker received an out-of-order sequence number."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    retriable = False
    description = "The broker received an out-of-order sequence number."


class DuplicateSequenceNumberError(BrokerError):
    """Broker error 46 DUPLICATE_SEQUENCE_NUMBER: The broker received a duplicate sequence number."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    retriable = False
    description = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(BrokerError):
    """Broker error 47 INVALID_PRODUCER_EPOCH: The producer epoch is old."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    retriable = False
    description = "The producer epoch is old."


class InvalidTxnStateError(BrokerError):
    """Broker error 48 INVALID_TXN_STATE: The transactional operation is invalid in this state."""

    code = 48
    name = "INVALID_TXN_STATE"
    retriable = False
    description = "The transactional operation is invalid in this state."


class InvalidProducerIdMappingError(BrokerError):
    """Broker error 49 INVALID_PRODUCER_ID_MAPPING: The producer id is not assigned to this transactional id."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    retriable = False
    description = "The producer id is not assigned to this transactional id."


class InvalidTransactionTimeoutError(BrokerError):
    """Broker error 50 INVALID_TRANSACTION_TIMEOUT: The transaction timeout exceeds the broker's maximum."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    retriable = False
    description = "The transaction timeout exceeds the broker's maximum."


class ConcurrentTransactionsError(BrokerError):
    """Broker error 51 CONCURRENT_TRANSACTIONS: Another operation on this transaction is under way."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = False
    description = "Another operation on this transaction is under way."


class TransactionCoordinatorFencedError(BrokerError):
    """Broker error 52 TRANSACTION_COORDINATOR_FENCED: The transaction coordinator has been fenced."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    retriable = False
    description = "The transaction coordinator has been fenced."


class TransactionalIdAuthorizationFailedError(BrokerError):
    """Broker error 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Not authorized for the transactional id."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    retriable = False
    description = "Not authorized for the transactional id."


class SecurityDisabledError(BrokerError):
    """Broker error 54 SECURITY_DISABLED: Security features are disabled on the broker."""

    code = 54
    name = "SECURITY_DISABLED"
    retriable = False
    description = "Security features are disabled on the broker."


class OperationNotAttemptedError(BrokerError):
    """Broker error 55 OPERATION_NOT_ATTEMPTED: The broker did not attempt this operation."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    retriable = False
    description = "The broker did not attempt this operation."


class KafkaStorageError(BrokerError):
    """Broker error 56 KAFKA_STORAGE_ERROR: The broker hit a disk error."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    description = "The broker hit a disk error."


class LogDirNotFoundError(BrokerError):
    """Broker error 57 LOG_DIR_NOT_FOUND: The log directory is not configured on the broker."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"
    retriable = False
    description = "The log directory is not configured on the broker."


class SaslAuthenticationFailedError(BrokerError):
    """Broker error 58 SASL_AUTHENTICATION_FAILED: SASL authentication failed."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False
    description = "SASL authentication failed."


class UnknownProducerIdError(BrokerError):
    """Broker error 59 UNKNOWN_PRODUCER_ID: The broker has no state for this producer id."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    retriable = False
    description = "The broker has no state for this producer id."


class ReassignmentInProgressError(BrokerError):
    """Broker error 60 REASSIGNMENT_IN_PROGRESS: A partition reassignment is in progress."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    retriable = False
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(BrokerError):
    """Broker error 61 DELEGATION_TOKEN_AUTH_DISABLED: Delegation tokens are disabled."""

    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    retriable = False
    description = "Delegation tokens are disabled."


class DelegationTokenNotFoundError(BrokerError):
    """Broker error 62 DELEGATION_TOKEN_NOT_FOUND: The delegation token was not found."""

    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    retriable = False
    description = "The delegation token was not found."


class DelegationTokenOwnerMismatchError(BrokerError):
    """Broker error 63 DELEGATION_TOKEN_OWNER_MISMATCH: The principal is not the token's owner or renewer."""

    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    retriable = False
    description = "The principal is not the token's owner or renewer."


class DelegationTokenRequestNotAllowedError(BrokerError):
    """Broker error 64 DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Delegation token requests are not allowed on this channel."""

    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    retriable = False
    description = "Delegation token requests are not allowed on this channel."


class DelegationTokenAuthorizationFailedError(BrokerError):
    """Broker error 65 DELEGATION_TOKEN_AUTHORIZATION_FAILED: Delegation token authorization failed."""

    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    retriable = False
    description = "Delegation token authorization failed."


class DelegationTokenExpiredError(BrokerError):
    """Broker error 66 DELEGATION_TOKEN_EXPIRED: The delegation token has expired."""

    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    retriable = False
    description = "The delegation token has expired."


class InvalidPrincipalTypeError(BrokerError):
    """Broker error 67 INVALID_PRINCIPAL_TYPE: The principal type is not supported."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    retriable = False
    description = "The principal type is not supported."


class NonEmptyGroupError(BrokerError):
    """Broker error 68 NON_EMPTY_GROUP: The group still has members."""

    code = 68
    name = "NON_EMPTY_GROUP"
    retriable = False
    description = "The group still has members."


class GroupIdNotFoundError(BrokerError):
    """Broker error 69 GROUP_ID_NOT_FOUND: The group does not exist."""

    code = 69
    name = "GROUP_ID_NOT_FOUND"
    retriable = False
    description = "The group does not exist."


class FetchSessionIdNotFoundError(BrokerError):
    """Broker error 70 FETCH_SESSION_ID_NOT_FOUND: The fetch session was not found."""

    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    description = "The fetch session was not found."


class InvalidFetchSessionEpochError(BrokerError):
    """Broker error 71 INVALID_FETCH_SESSION_EPOCH: The fetch session epoch is invalid."""

    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    description = "The fetch session epoch is invalid."


class ListenerNotFoundError(BrokerError):
    """Broker error 72 LISTENER_NOT_FOUND: The leader has no listener matching the one used for metadata."""

    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    description = "The leader has no listener matching the one used for metadata."


class TopicDeletionDisabledError(BrokerError):
    """Broker error 73 TOPIC_DELETION_DISABLED: Topic deletion is disabled on the broker."""

    code = 73
    name = "TOPIC_DELETION_DISABLED"
    retriable = False
    description = "Topic deletion is disabled on the broker."


class FencedLeaderEpochError(BrokerError):
    """Broker error 74 FENCED_LEADER_EPOCH: The request's leader epoch is older than the broker's."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    description = "The request's leader epoch is older than the broker's."


class UnknownLeaderEpochError(BrokerError):
    """Broker error 75 UNKNOWN_LEADER_EPOCH: The request's leader epoch is newer than the broker's."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    description = "The request's leader epoch is newer than the broker's."


class UnsupportedCompressionTypeError(BrokerError):
    """Broker error 76 UNSUPPORTED_COMPRESSION_TYPE: The client does not support the partition's compression."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False
    description = "The client does not support the partition's compression."


class StaleBrokerEpochError(BrokerError):
    """Broker error 77 STALE_BROKER_EPOCH: The broker epoch has changed."""

    code = 77
    name = "STALE_BROKER_EPOCH"
    retriable = False
    description = "The broker epoch has changed."


class OffsetNotAvailableError(BrokerError):
    """Broker error 78 OFFSET_NOT_AVAILABLE: The leader's high watermark has not caught up yet."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    description = "The leader's high watermark has not caught up yet."


class MemberIdRequiredError(BrokerError):
    """Broker error 79 MEMBER_ID_REQUIRED: The member needs a member id first."""

    code = 79
    name = "MEMBER_ID_REQUIRED"
    retriable = False
    description = "The member needs a member id first."


class PreferredLeaderNotAvailableError(BrokerError):
    """Broker error 80 PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader is not available."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    description = "The preferred leader is not available."


class GroupMaxSizeReachedError(BrokerError):
    """Broker error 81 GROUP_MAX_SIZE_REACHED: The group has reached its maximum number of members."""

    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    retriable = False
    description = "The group has reached its maximum number of members."


class FencedInstanceIdError(BrokerError):
    """Broker error 82 FENCED_INSTANCE_ID: Another member registered with the same group.instance.id."""

    code = 82
    name = "FENCED_INSTANCE_ID"
    retriable = False
    description = "Another member registered with the same group.instance.id."


class EligibleLeadersNotAvailableError(BrokerError):
    """Broker error 83 ELIGIBLE_LEADERS_NOT_AVAILABLE: No eligible leaders are available."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    description = "No eligible leaders are available."


class ElectionNotNeededError(BrokerError):
    """Broker error 84 ELECTION_NOT_NEEDED: A leader election is not needed."""

    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    description = "A leader election is not needed."


class NoReassignmentInProgressError(BrokerError):
    """Broker error 85 NO_REASSIGNMENT_IN_PROGRESS: No partition reassignment is in progress."""

    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    retriable = False
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(BrokerError):
    """Broker error 86 GROUP_SUBSCRIBED_TO_TOPIC: The group is still subscribed to the topic."""

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    retriable = False
    description = "The group is still subscribed to the topic."


class InvalidRecordError(BrokerError):
    """Broker error 87 INVALID_RECORD: The broker rejected a record as invalid."""

    code = 87
    name = "INVALID_RECORD"
    retriable = False
    description = "The broker rejected a record as invalid."


class UnstableOffsetCommitError(BrokerError):
    """Broker error 88 UNSTABLE_OFFSET_COMMIT: There are unstable offsets to clear first."""

    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    description = "There are unstable offsets to clear first."


class ThrottlingQuotaExceededError(BrokerError):
    """Broker error 89 THROTTLING_QUOTA_EXCEEDED: A throttling quota was exceeded."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    description = "A throttling quota was exceeded."


class ProducerFencedError(BrokerError):
    """Broker error 90 PRODUCER_FENCED: A newer producer with the same transactional id fenced this one."""

    code = 90
    name = "PRODUCER_FENCED"
    retriable = False
    description = "A newer producer with the same transactional id fenced this one."


class ResourceNotFoundError(BrokerError):
    """Broker error 91 RESOURCE_NOT_FOUND: The resource does not exist."""

    code = 91
    name = "RESOURCE_NOT_FOUND"
    retriable = False
    description = "The resource does not exist."


class DuplicateResourceError(BrokerError):
    """Broker error 92 DUPLICATE_RESOURCE: The request named the same resource twice."""

    code = 92
    name = "DUPLICATE_RESOURCE"
    retriable = False
    description = "The request named the same resource twice."


class UnacceptableCredentialError(BrokerError):
    """Broker error 93 UNACCEPTABLE_CREDENTIAL: The credential does not meet the broker's criteria."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    retriable = False
    description = "The credential does not meet the broker's criteria."


class InconsistentVoterSetError(BrokerError):
    """Broker error 94 INCONSISTENT_VOTER_SET: The voter set is inconsistent."""

    code = 94
    name = "INCONSISTENT_VOTER_SET"
    retriable = False
    description = "The voter set is inconsistent."


class InvalidUpdateVersionError(BrokerError):
    """Broker error 95 INVALID_UPDATE_VERSION: The update version is invalid."""

    code = 95
    name = "INVALID_UPDATE_VERSION"
    retriable = False
    description = "The update version is invalid."


class FeatureUpdateFailedError(BrokerError):
    """Broker error 96 FEATURE_UPDATE_FAILED: Finalized features could not be updated."""

    code = 96
    name = "FEATURE_UPDATE_FAILED"
    retriable = False
    description = "Finalized features could not be updated."


class PrincipalDeserializationFailureError(BrokerError):
    """Broker error 97 PRINCIPAL_DESERIALIZATION_FAILURE: The request principal could not be deserialized."""

    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    retriable = False
    description = "The request principal could not be deserialized."


class SnapshotNotFoundError(BrokerError):
    """Broker error 98 SNAPSHOT_NOT_FOUND: The snapshot was not found."""

    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    retriable = False
    description = "The snapshot was not found."


class PositionOutOfRangeError(BrokerError):
    """Broker error 99 POSITION_OUT_OF_RANGE: The snapshot position is out of range."""

    code = 99
    name = "POSITION_OUT_OF_RANGE"
    retriable = False
    description = "The snapshot position is out of range."


class UnknownTopicIdError(BrokerError):
    """Broker error 100 UNKNOWN_TOPIC_ID: The broker does not host this topic id."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    description = "The broker does not host this topic id."


class DuplicateBrokerRegistrationError(BrokerError):
    """Broker error 101 DUPLICATE_BROKER_REGISTRATION: This broker id is already registered."""

    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    retriable = False
    description = "This broker id is already registered."


class BrokerIdNotRegisteredError(BrokerError):
    """Broker error 102 BROKER_ID_NOT_REGISTERED: This broker id is not registered."""

    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    retriable = False
    description = "This broker id is not registered."


class InconsistentTopicIdError(BrokerError):
    """Broker error 103 INCONSISTENT_TOPIC_ID: The log's topic id does not match the request's."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = False
    description = "The log's topic id does not match the request's."


class InconsistentClusterIdError(BrokerError):
    """Broker error 104 INCONSISTENT_CLUSTER_ID: The cluster id does not match the broker's."""

    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    retriable = False
    description = "The cluster id does not match the broker's."


class TransactionalIdNotFoundError(BrokerError):
    """Broker error 105 TRANSACTIONAL_ID_NOT_FOUND: The transactional id was not found."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    retriable = False
    description = "The transactional id was not found."


class FetchSessionTopicIdError(BrokerError):
    """Broker error 106 FETCH_SESSION_TOPIC_ID_ERROR: The fetch session used topic ids inconsistently."""

    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True
    description = "The fetch session used topic ids inconsistently."


class IneligibleReplicaError(BrokerError):
    """Broker error 107 INELIGIBLE_REPLICA: The new ISR contains an ineligible replica."""

    code = 107
    name = "INELIGIBLE_REPLICA"
    retriable = False
    description = "The new ISR contains an ineligible replica."


class NewLeaderElectedError(BrokerError):
    """Broker error 108 NEW_LEADER_ELECTED: The partition state changed but a new leader was elected."""

    code = 108
    name = "NEW_LEADER_ELECTED"
    retriable = False
    description = "The partition state changed but a new leader was elected."


class OffsetMovedToTieredStorageError(BrokerError):
    """Broker error 109 OFFSET_MOVED_TO_TIERED_STORAGE: The offset has moved to tiered storage."""

    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    retriable = False
    description = "The offset has moved to tiered storage."


class FencedMemberEpochError(BrokerError):
    """Broker error 110 FENCED_MEMBER_EPOCH: The member epoch was fenced; the member must rejoin."""

    code = 110
    name = "FENCED_MEMBER_EPOCH"
    retriable = False
    description = "The member epoch was fenced; the member must rejoin."


class UnreleasedInstanceIdError(BrokerError):
    """Broker error 111 UNRELEASED_INSTANCE_ID: The instance id is still used by another member."""

    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    retriable = False
    description = "The instance id is still used by another member."


class UnsupportedAssignorError(BrokerError):
    """Broker error 112 UNSUPPORTED_ASSIGNOR: The group does not support the assignor."""

    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    retriable = False
    description = "The group does not support the assignor."


class StaleMemberEpochError(BrokerError):
    """Broker error 113 STALE_MEMBER_EPOCH: The member epoch is stale."""

    code = 113
    name = "STALE_MEMBER_EPOCH"
    retriable = False
    description = "The member epoch is stale."


class MismatchedEndpointTypeError(BrokerError):
    """Broker error 114 MISMATCHED_ENDPOINT_TYPE: The request went to an endpoint of the wrong type."""

    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    retriable = False
    description = "The request went to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(BrokerError):
    """Broker error 115 UNSUPPORTED_ENDPOINT_TYPE: This endpoint type is not supported."""

    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    retriable = False
    description = "This endpoint type is not supported."


class UnknownControllerIdError(BrokerError):
    """Broker error 116 UNKNOWN_CONTROLLER_ID: The controller id is not known."""

    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    retriable = False
    description = "The controller id is not known."


class UnknownSubscriptionIdError(BrokerError):
    """Broker error 117 UNKNOWN_SUBSCRIPTION_ID: The telemetry subscription id is unknown or outdated."""

    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    retriable = False
    description = "The telemetry subscription id is unknown or outdated."


class TelemetryTooLargeError(BrokerError):
    """Broker error 118 TELEMETRY_TOO_LARGE: The telemetry push is larger than the broker accepts."""

    code = 118
    name = "TELEMETRY_TOO_LARGE"
    retriable = False
    description = "The telemetry push is larger than the broker accepts."


class InvalidRegistrationError(BrokerError):
    """Broker error 119 INVALID_REGISTRATION: The broker registration is invalid."""

    code = 119
    name = "INVALID_REGISTRATION"
    retriable = False
    description = "The broker registration is invalid."


class TransactionAbortableError(BrokerError):
    """Broker error 120 TRANSACTION_ABORTABLE: The transaction hit an error and can be aborted."""

    code = 120
    name = "TRANSACTION_ABORTABLE"
    retriable = False
    description = "The transaction hit an error and can be aborted."


class InvalidRecordStateError(BrokerError):
    """Broker error 121 INVALID_RECORD_STATE: The record is not acquired by this member (lock expired, or not ours)."""

    code = 121
    name = "INVALID_RECORD_STATE"
    retriable = False
    description = "The record is not acquired by this member (lock expired, or not ours)."


class ShareSessionNotFoundError(BrokerError):
    """Broker error 122 SHARE_SESSION_NOT_FOUND: The share session was not found."""

    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True
    description = "The share session was not found."


class InvalidShareSessionEpochError(BrokerError):
    """Broker error 123 INVALID_SHARE_SESSION_EPOCH: The share session epoch is not the one the broker expects."""

    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True
    description = "The share session epoch is not the one the broker expects."


class FencedStateEpochError(BrokerError):
    """Broker error 124 FENCED_STATE_EPOCH: The share-group state epoch did not match."""

    code = 124
    name = "FENCED_STATE_EPOCH"
    retriable = False
    description = "The share-group state epoch did not match."


class InvalidVoterKeyError(BrokerError):
    """Broker error 125 INVALID_VOTER_KEY: The voter key does not match the replica's."""

    code = 125
    name = "INVALID_VOTER_KEY"
    retriable = False
    description = "The voter key does not match the replica's."


class DuplicateVoterError(BrokerError):
    """Broker error 126 DUPLICATE_VOTER: The voter is already in the voter set."""

    code = 126
    name = "DUPLICATE_VOTER"
    retriable = False
    description = "The voter is already in the voter set."


class VoterNotFoundError(BrokerError):
    """Broker error 127 VOTER_NOT_FOUND: The voter is not in the voter set."""

    code = 127
    name = "VOTER_NOT_FOUND"
    retriable = False
    description = "The voter is not in the voter set."


class InvalidRegularExpressionError(BrokerError):
    """Broker error 128 INVALID_REGULAR_EXPRESSION: The regular expression is invalid."""

    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    retriable = False
    description = "The regular expression is invalid."


class RebootstrapRequiredError(BrokerError):
    """Broker error 129 REBOOTSTRAP_REQUIRED: Client metadata is stale; the client must rebootstrap."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    retriable = False
    description = "Client metadata is stale; the client must rebootstrap."


class StreamsInvalidTopologyError(BrokerError):
    """Broker error 130 STREAMS_INVALID_TOPOLOGY: The streams topology is invalid."""

    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"
    retriable = False
    description = "The streams topology is invalid."


class StreamsInvalidTopologyEpochError(BrokerError):
    """Broker error 131 STREAMS_INVALID_TOPOLOGY_EPOCH: The streams topology epoch is invalid."""

    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"
    retriable = False
    description = "The streams topology epoch is invalid."


class StreamsTopologyFencedError(BrokerError):
    """Broker error 132 STREAMS_TOPOLOGY_FENCED: The streams topology epoch is outdated."""

    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"
    retriable = False
    description = "The streams topology epoch is outdated."


class ShareSessionLimitReachedError(BrokerError):
    """Broker error 133 SHARE_SESSION_LIMIT_REACHED: The broker's share-session cache is full."""

    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True
    description = "The broker's share-session cache is full."


_BY_CODE: dict[int, type[BrokerError]] = {
    -1: UnknownServerError,
    1: OffsetOutOfRangeError,
    2: CorruptMessageError,
    3: UnknownTopicOrPartitionError,
    4: InvalidFetchSizeError,
    5: LeaderNotAvailableError,
    6: NotLeaderOrFollowerError,
    7: RequestTimedOutError,
    8: BrokerNotAvailableError,
    9: ReplicaNotAvailableError,
    10: MessageTooLargeError,
    11: StaleControllerEpochError,
    12: OffsetMetadataTooLargeError,
    13: NetworkError,
    14: CoordinatorLoadInProgressError,
    15: CoordinatorNotAvailableError,
    16: NotCoordinatorError,
    17: InvalidTopicError,
    18: RecordListTooLargeError,
    19: NotEnoughReplicasError,
    20: NotEnoughReplicasAfterAppendError,
    21: InvalidRequiredAcksError,
    22: IllegalGenerationError,
    23: InconsistentGroupProtocolError,
    24: InvalidGroupIdError,
    25: UnknownMemberIdError,
    26: InvalidSessionTimeoutError,
    27: RebalanceInProgressError,
    28: InvalidCommitOffsetSizeError,
    29: TopicAuthorizationFailedError,
    30: GroupAuthorizationFailedError,
    31: ClusterAuthorizationFailedError,
    32: InvalidTimestampError,
    33: UnsupportedSaslMechanismError,
    34: IllegalSaslStateError,
    35: UnsupportedVersionError,
    36: TopicAlreadyExistsError,
    37: InvalidPartitionsError,
    38: InvalidReplicationFactorError,
    39: InvalidReplicaAssignmentError,
    40: InvalidConfigError,
    41: NotControllerError,
    42: InvalidRequestError,
    43: UnsupportedForMessageFormatError,
    44: PolicyViolationError,
    45: OutOfOrderSequenceNumberError,
    46: DuplicateSequenceNumberError,
    47: InvalidProducerEpochError,
    48: InvalidTxnStateError,
    49: InvalidProducerIdMappingError,
    50: InvalidTransactionTimeoutError,
    51: ConcurrentTransactionsError,
    52: TransactionCoordinatorFencedError,
    53: TransactionalIdAuthorizationFailedError,
    54: SecurityDisabledError,
    55: OperationNotAttemptedError,
    56: KafkaStorageError,
    57: LogDirNotFoundError,
    58: SaslAuthenticationFailedError,
    59: UnknownProducerIdError,
    60: ReassignmentInProgressError,
    61: DelegationTokenAuthDisabledError,
    62: DelegationTokenNotFoundError,
    63: DelegationTokenOwnerMismatchError,
    64: DelegationTokenRequestNotAllowedError,
    65: DelegationTokenAuthorizationFailedError,
    66: DelegationTokenExpiredError,
    67: InvalidPrincipalTypeError,
    68: NonEmptyGroupError,
    69: GroupIdNotFoundError,
    70: FetchSessionIdNotFoundError,
    71: InvalidFetchSessionEpochError,
    72: ListenerNotFoundError,
    73: TopicDeletionDisabledError,
    74: FencedLeaderEpochError,
    75: UnknownLeaderEpochError,
    76: UnsupportedCompressionTypeError,
    77: StaleBrokerEpochError,
    78: OffsetNotAvailableError,
    79: MemberIdRequiredError,
    80: PreferredLeaderNotAvailableError,
    81: GroupMaxSizeReachedError,
    82: FencedInstanceIdError,
    83: EligibleLeadersNotAvailableError,
    84: ElectionNotNeededError,
    85: NoReassignmentInProgressError,
    86: GroupSubscribedToTopicError,
    87: InvalidRecordError,
    88: UnstableOffsetCommitError,
    89: ThrottlingQuotaExceededError,
    90: ProducerFencedError,
    91: ResourceNotFoundError,
    92: DuplicateResourceError,
    93: UnacceptableCredentialError,
    94: InconsistentVoterSetError,
    95: InvalidUpdateVersionError,
    96: FeatureUpdateFailedError,
    97: PrincipalDeserializationFailureError,
    98: SnapshotNotFoundError,
    99: PositionOutOfRangeError,
    100: UnknownTopicIdError,
    101: DuplicateBrokerRegistrationError,
    102: BrokerIdNotRegisteredError,
    103: InconsistentTopicIdError,
    104: InconsistentClusterIdError,
    105: TransactionalIdNotFoundError,
    106: FetchSessionTopicIdError,
    107: IneligibleReplicaError,
    108: NewLeaderElectedError,
    109: OffsetMovedToTieredStorageError,
    110: FencedMemberEpochError,
    111: UnreleasedInstanceIdError,
    112: UnsupportedAssignorError,
    113: StaleMemberEpochError,
    114: MismatchedEndpointTypeError,
    115: UnsupportedEndpointTypeError,
    116: UnknownControllerIdError,
    117: UnknownSubscriptionIdError,
    118: TelemetryTooLargeError,
    119: InvalidRegistrationError,
    120: TransactionAbortableError,
    121: InvalidRecordStateError,
    122: ShareSessionNotFoundError,
    123: InvalidShareSessionEpochError,
    124: FencedStateEpochError,
    125: InvalidVoterKeyError,
    126: DuplicateVoterError,
    127: VoterNotFoundError,
    128: InvalidRegularExpressionError,
    129: RebootstrapRequiredError,
    130: StreamsInvalidTopologyError,
    131: StreamsInvalidTopologyEpochError,
    132: StreamsTopologyFencedError,
    133: ShareSessionLimitReachedError,
}
# --- END GENERATED ---


def error_class_for_code(code: int) -> type[BrokerError]:
    """Return the :class:`BrokerError` subclass for ``code`` (UnknownServerError if unknown).

    :raises ValueError: for code 0, which means no error.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return _BY_CODE.get(code, UnknownServerError)


def error_for_code(code: int, message: str | None = None) -> BrokerError | None:
    """Return an exception instance for a broker error code, or ``None`` for 0 (NONE).

    Unknown codes become ``UnknownServerError`` whose ``error_code`` keeps the number.

    :param code: the int16 error code from a response.
    :param message: extra context (the broker's ErrorMessage, the partition, ...).
    """
    if code == 0:
        return None
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(
            f"(unknown error code {code}) {message or ''}".rstrip(), code=code
        )
    return cls(message)


#: Every broker error code we know, by number.
ERROR_CODES: dict[int, ErrorSpec] = {
    code: ErrorSpec(code, cls.name, cls.retriable, cls.description)
    for code, cls in _BY_CODE.items()
}

__all__ += [cls.__name__ for cls in _BY_CODE.values()]
