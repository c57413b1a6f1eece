"""The ShareFetch response decoder, written out for mypyc (the compiled build).

The generic decoders of ``_base`` are Python built through ``exec``: mypyc cannot compile
them, and a ShareFetch answer is where the consumer spends them, three structs per
partition. This module reads the same bytes into the same message objects, as plain
code mypyc compiles. ``_base.decoder_for`` uses it only when it is compiled (in the pure
build the generated decoder is as fast), and ``tests/protocol/test_share_fetch_codec.py``
checks in both builds that it agrees with the generic decoder value for value.

Only the usual shape is read here: no tagged field anywhere, lengths of at most three
varint bytes, valid UTF-8, no null where the version forbids one, everything within the
frame. Anything else (and every error) is left to the generic decoder, started again
from the same position, so errors name the same field and byte as they always did.
"""

from __future__ import annotations

import struct
import uuid
from typing import TYPE_CHECKING, Any, Final

from sharecon.protocol.messages.share_fetch import (
    AcknowledgementBatch,
    AcquiredRecords,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.protocol.primitives import Reader, Writer

__all__ = [
    "acknowledgement_batch",
    "fetch_partition",
    "share_fetch_request_encoder",
    "share_fetch_response_decoder",
]


class _Slow(Exception):
    """Something this decoder leaves to the generic one (and every error)."""


#: Caches of immutable values that repeat from answer to answer: a topic's id (one per
#: topic of every answer; ``uuid.UUID`` is slow to build) and a partition's leader (the
#: same leader and epoch for every partition of a broker). Both are frozen and compared
#: by value; a cache that grows past its bound starts again.
_UUIDS: dict[bytes, uuid.UUID] = {}
_LEADERS: dict[int, LeaderIdAndEpoch] = {}
_CACHE_BOUND: Final = 4096

_new: Final[Callable[[type], Any]] = object.__new__


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    # The slot's own setter: a frozen dataclass's __init__ goes through
    # object.__setattr__ once per field, which costs more than reading the field.
    setter: Callable[[object, object], None] = getattr(cls, name).__set__
    return setter


_PD_INDEX: Final = _setter(PartitionData, "partition_index")
_PD_ERR: Final = _setter(PartitionData, "error_code")
_PD_ERR_MSG: Final = _setter(PartitionData, "error_message")
_PD_ACK_ERR: Final = _setter(PartitionData, "acknowledge_error_code")
_PD_ACK_ERR_MSG: Final = _setter(PartitionData, "acknowledge_error_message")
_PD_LEADER: Final = _setter(PartitionData, "current_leader")
_PD_RECORDS: Final = _setter(PartitionData, "records")
_PD_ACQUIRED: Final = _setter(PartitionData, "acquired_records")
_PD_TAGS: Final = _setter(PartitionData, "unknown_tags")

_AR_FIRST: Final = _setter(AcquiredRecords, "first_offset")
_AR_LAST: Final = _setter(AcquiredRecords, "last_offset")
_AR_COUNT: Final = _setter(AcquiredRecords, "delivery_count")
_AR_TAGS: Final = _setter(AcquiredRecords, "unknown_tags")

_LE_ID: Final = _setter(LeaderIdAndEpoch, "leader_id")
_LE_EPOCH: Final = _setter(LeaderIdAndEpoch, "leader_epoch")
_LE_TAGS: Final = _setter(LeaderIdAndEpoch, "unknown_tags")

_TR_ID: Final = _setter(ShareFetchableTopicResponse, "topic_id")
_TR_PARTS: Final = _setter(ShareFetchableTopicResponse, "partitions")
_TR_TAGS: Final = _setter(ShareFetchableTopicResponse, "unknown_tags")

_NE_ID: Final = _setter(NodeEndpoint, "node_id")
_NE_HOST: Final = _setter(NodeEndpoint, "host")
_NE_PORT: Final = _setter(NodeEndpoint, "port")
_NE_RACK: Final = _setter(NodeEndpoint, "rack")
_NE_TAGS: Final = _setter(NodeEndpoint, "unknown_tags")

_R_THROTTLE: Final = _setter(ShareFetchResponse, "throttle_time_ms")
_R_ERR: Final = _setter(ShareFetchResponse, "error_code")
_R_ERR_MSG: Final = _setter(ShareFetchResponse, "error_message")
_R_LOCK: Final = _setter(ShareFetchResponse, "acquisition_lock_timeout_ms")
_R_RESPONSES: Final = _setter(ShareFetchResponse, "responses")
_R_NODES: Final = _setter(ShareFetchResponse, "node_endpoints")
_R_TAGS: Final = _setter(ShareFetchResponse, "unknown_tags")


#: How many bytes of the frame are copied at a time to be read natively: the fields
#: between records fields. A records field is never copied (a zero-copy view, as the
#: generated decoder hands it out), so an answer of many megabytes costs no copy of it.
_WINDOW: Final = 4096


class _In:
    """A position in the frame, and a copy of the bytes around it (indexed natively)."""

    def __init__(self, view: memoryview, start: int, end: int) -> None:
        self.view = view
        self.p = start
        self.end = end
        #: ``win`` holds the frame's bytes ``w0`` to ``wend``.
        self.win = b""
        self.w0 = start
        self.wend = start

    def fill(self, k: int) -> None:
        # The next `k` bytes (the caller checked they are in the frame) into the window.
        p = self.p
        stop = min(self.end, p + max(k, _WINDOW))
        self.win = bytes(self.view[p:stop])
        self.w0 = p
        self.wend = stop

    def need(self, k: int) -> int:
        # Take `k` bytes: where they start in `win` (read it after this call).
        p = self.p
        if k > self.end - p:
            raise _Slow
        if p + k > self.wend:
            self.fill(k)
        self.p = p + k
        return p - self.w0

    def i16(self) -> int:
        i = self.need(2)
        d = self.win
        v = (d[i] << 8) | d[i + 1]
        return v - 0x10000 if v >= 0x8000 else v

    def i32(self) -> int:
        i = self.need(4)
        d = self.win
        v = (d[i] << 24) | (d[i + 1] << 16) | (d[i + 2] << 8) | d[i + 3]
        return v - 0x100000000 if v >= 0x80000000 else v

    def i64(self) -> int:
        i = self.need(8)
        d = self.win
        hi = (d[i] << 24) | (d[i + 1] << 16) | (d[i + 2] << 8) | d[i + 3]
        lo = (d[i + 4] << 24) | (d[i + 5] << 16) | (d[i + 6] << 8) | d[i + 7]
        if hi >= 0x80000000:
            hi -= 0x100000000
        return hi * 0x100000000 + lo

    def uvar(self) -> int:
        # At most three bytes (values under 2**21); longer ones go to the generic decoder.
        p = self.p
        k = min(3, self.end - p)
        if k <= 0:
            raise _Slow
        if p + k > self.wend:
            self.fill(k)
        d = self.win
        i = p - self.w0
        b = d[i]
        if b < 0x80:
            self.p = p + 1
            return b
        if k >= 2:
            b1 = d[i + 1]
            if b1 < 0x80:
                self.p = p + 2
                return (b & 0x7F) | (b1 << 7)
            if k >= 3:
                b2 = d[i + 2]
                if b2 < 0x80:
                    self.p = p + 3
                    return (b & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
        raise _Slow

    def no_tags(self) -> None:
        # An empty tagged section: one zero byte. Any tagged field: the generic decoder.
        i = self.need(1)
        if self.win[i] != 0:
            raise _Slow

    def count(self, unit: int) -> int:
        # A compact array's length; null and lengths that cannot fit: the generic decoder.
        n = self.uvar() - 1
        if n < 0 or n * unit > self.end - self.p:
            raise _Slow
        return n

    def nullable_string(self) -> str | None:
        n = self.uvar() - 1
        if n < 0:
            return None
        return self.text(n)

    def string(self) -> str:
        n = self.uvar() - 1
        if n < 0:
            raise _Slow
        return self.text(n)

    def text(self, n: int) -> str:
        i = self.need(n)
        try:
            return self.win[i : i + n].decode("utf-8")
        except UnicodeDecodeError:
            raise _Slow from None

    def records(self, nullable: bool) -> memoryview | None:
        n = self.uvar() - 1
        if n < 0:
            if nullable:
                return None
            raise _Slow
        p = self.p
        if n > self.end - p:
            raise _Slow
        # Skipped, not copied: the window is filled again past it when next read.
        self.p = p + n
        return self.view[p : p + n]

    def topic_id(self) -> uuid.UUID:
        i = self.need(16)
        key = self.win[i : i + 16]
        value = _UUIDS.get(key)
        if value is None:
            if len(_UUIDS) >= _CACHE_BOUND:
                _UUIDS.clear()
            value = _UUIDS[key] = uuid.UUID(bytes=key)
        return value


def _leader(src: _In) -> LeaderIdAndEpoch:
    leader_id = src.i32()
    epoch = src.i32()
    src.no_tags()
    key = leader_id * 0x100000000 + epoch
    value = _LEADERS.get(key)
    if value is None:
        if len(_LEADERS) >= _CACHE_BOUND:
            _LEADERS.clear()
        made: LeaderIdAndEpoch = _new(LeaderIdAndEpoch)
        _LE_ID(made, leader_id)
        _LE_EPOCH(made, epoch)
        _LE_TAGS(made, ())
        _LEADERS[key] = made
        return made
    return value


def _acquired(src: _In) -> AcquiredRecords:
    o: AcquiredRecords = _new(AcquiredRecords)
    _AR_FIRST(o, src.i64())
    _AR_LAST(o, src.i64())
    _AR_COUNT(o, src.i16())
    src.no_tags()
    _AR_TAGS(o, ())
    return o


# The fewest bytes one element takes (the generic decoder bounds an array's length by it
# before reading any element; so does this one).
_ACQUIRED_MIN: Final = 8 + 8 + 2 + 1
_PARTITION_MIN: Final = 4 + 2 + 1 + 2 + 1 + (4 + 4 + 1) + 1 + 1 + 1
_TOPIC_MIN: Final = 16 + 1 + 1
_NODE_MIN: Final = 4 + 1 + 4 + 1 + 1


def _partition(src: _In, nullable_records: bool) -> PartitionData:
    o: PartitionData = _new(PartitionData)
    _PD_INDEX(o, src.i32())
    _PD_ERR(o, src.i16())
    _PD_ERR_MSG(o, src.nullable_string())
    _PD_ACK_ERR(o, src.i16())
    _PD_ACK_ERR_MSG(o, src.nullable_string())
    _PD_LEADER(o, _leader(src))
    _PD_RECORDS(o, src.records(nullable_records))
    n = src.count(_ACQUIRED_MIN)
    if n == 0:
        _PD_ACQUIRED(o, ())
    elif n == 1:
        _PD_ACQUIRED(o, (_acquired(src),))
    else:
        _PD_ACQUIRED(o, tuple([_acquired(src) for _ in range(n)]))
    src.no_tags()
    _PD_TAGS(o, ())
    return o


def _topic(src: _In, nullable_records: bool) -> ShareFetchableTopicResponse:
    o: ShareFetchableTopicResponse = _new(ShareFetchableTopicResponse)
    _TR_ID(o, src.topic_id())
    n = src.count(_PARTITION_MIN)
    _TR_PARTS(o, tuple([_partition(src, nullable_records) for _ in range(n)]))
    src.no_tags()
    _TR_TAGS(o, ())
    return o


def _node(src: _In) -> NodeEndpoint:
    o: NodeEndpoint = _new(NodeEndpoint)
    _NE_ID(o, src.i32())
    _NE_HOST(o, src.string())
    _NE_PORT(o, src.i32())
    _NE_RACK(o, src.nullable_string())
    src.no_tags()
    _NE_TAGS(o, ())
    return o


def _response(src: _In, version: int) -> ShareFetchResponse:
    o: ShareFetchResponse = _new(ShareFetchResponse)
    _R_THROTTLE(o, src.i32())
    _R_ERR(o, src.i16())
    _R_ERR_MSG(o, src.nullable_string())
    _R_LOCK(o, src.i32() if version >= 1 else 0)
    nullable_records = version == 0
    n = src.count(_TOPIC_MIN)
    _R_RESPONSES(o, tuple([_topic(src, nullable_records) for _ in range(n)]))
    n = src.count(_NODE_MIN)
    _R_NODES(o, tuple([_node(src) for _ in range(n)]))
    src.no_tags()
    _R_TAGS(o, ())
    return o


class _Decoder:
    """One version's decoder: the fast path, else ``generic`` from the same position."""

    def __init__(self, version: int, generic: Callable[[Reader], Any]) -> None:
        self.version = version
        self.generic = generic

    def __call__(self, r: Reader) -> Any:
        view: memoryview = r.buf
        start: int = r.pos
        end: int = r.end
        src = _In(view, start, end)
        try:
            out = _response(src, self.version)
        except _Slow:
            return self.generic(r)
        r.pos = src.p
        return out


def share_fetch_response_decoder(
    version: int, generic: Callable[[Reader], Any]
) -> Callable[[Reader], Any] | None:
    """The decoder of a ShareFetch response at ``version`` (0 to 2; else ``None``), which
    hands whatever it does not read itself to ``generic``, the generated decoder."""
    if not 0 <= version <= 2:
        return None
    return _Decoder(version, generic)


# --------------------------------------------------------------------------------------
# The request: built and encoded
# --------------------------------------------------------------------------------------

_FP_INDEX: Final = _setter(FetchPartition, "partition_index")
_FP_MAX_BYTES: Final = _setter(FetchPartition, "partition_max_bytes")
_FP_BATCHES: Final = _setter(FetchPartition, "acknowledgement_batches")
_FP_TAGS: Final = _setter(FetchPartition, "unknown_tags")

_AB_FIRST: Final = _setter(AcknowledgementBatch, "first_offset")
_AB_LAST: Final = _setter(AcknowledgementBatch, "last_offset")
_AB_TYPES: Final = _setter(AcknowledgementBatch, "acknowledge_types")
_AB_TAGS: Final = _setter(AcknowledgementBatch, "unknown_tags")


def fetch_partition(
    partition_index: int, acknowledgement_batches: tuple[AcknowledgementBatch, ...]
) -> FetchPartition:
    """``FetchPartition(partition_index=..., acknowledgement_batches=...)``, the other
    fields at their defaults, without the frozen dataclass's ``__init__``."""
    o: FetchPartition = _new(FetchPartition)
    _FP_INDEX(o, partition_index)
    _FP_MAX_BYTES(o, 0)
    _FP_BATCHES(o, acknowledgement_batches)
    _FP_TAGS(o, ())
    return o


def acknowledgement_batch(
    first_offset: int, last_offset: int, acknowledge_types: tuple[int, ...]
) -> AcknowledgementBatch:
    """``AcknowledgementBatch(first_offset=..., last_offset=..., acknowledge_types=...)``
    without the frozen dataclass's ``__init__``."""
    o: AcknowledgementBatch = _new(AcknowledgementBatch)
    _AB_FIRST(o, first_offset)
    _AB_LAST(o, last_offset)
    _AB_TYPES(o, acknowledge_types)
    _AB_TAGS(o, ())
    return o


_I32: Final = struct.Struct(">i").pack
_I32_B: Final = struct.Struct(">iB").pack
_I8: Final = struct.Struct(">b").pack
_QQ_B: Final = struct.Struct(">qqB").pack
_QQ: Final = struct.Struct(">qq").pack
_HEAD: Final = struct.Struct(">iiii").pack
_II: Final = struct.Struct(">ii").pack
_TAGLESS: Final = b"\x00"
_FALSE: Final = b"\x00"
_TRUE: Final = b"\x01"


def _uvar(out: list[bytes], n: int) -> None:
    if n < 0x80:
        out.append(bytes((n,)))
        return
    parts = []
    while n >= 0x80:
        parts.append((n & 0x7F) | 0x80)
        n >>= 7
    parts.append(n)
    out.append(bytes(parts))


def _str(out: list[bytes], value: object, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise _Slow
        out.append(b"\x00")
        return
    if type(value) is not str:
        raise _Slow
    data = value.encode("utf-8")
    _uvar(out, len(data) + 1)
    out.append(data)


def _no_tags(o: Any) -> None:
    if o.unknown_tags:
        raise _Slow


def _write_partition(out: list[bytes], p: object, version: int) -> None:
    if type(p) is not FetchPartition:
        raise _Slow
    _no_tags(p)
    batches = p.acknowledgement_batches
    if type(batches) is not tuple:
        raise _Slow
    n = len(batches)
    if version == 0:
        out.append(_II(p.partition_index, p.partition_max_bytes))
        _uvar(out, n + 1)
    elif p.partition_max_bytes != 0:
        raise _Slow  # not in v1+: the generic encoder says so
    elif n < 0x7F:
        out.append(_I32_B(p.partition_index, n + 1))
    else:
        out.append(_I32(p.partition_index))
        _uvar(out, n + 1)
    for b in batches:
        if type(b) is not AcknowledgementBatch:
            raise _Slow
        _no_tags(b)
        types = b.acknowledge_types
        if type(types) is not tuple:
            raise _Slow
        data = bytes(types)
        if not data.isascii():
            raise _Slow  # an int8 outside 0..127: left to the generic encoder
        k = len(data)
        if k < 0x7F:
            out.append(_QQ_B(b.first_offset, b.last_offset, k + 1))
        else:
            out.append(_QQ(b.first_offset, b.last_offset))
            _uvar(out, k + 1)
        out.append(data)
        out.append(_TAGLESS)
    out.append(_TAGLESS)


def _write_request(out: list[bytes], o: object, version: int) -> None:
    if type(o) is not ShareFetchRequest:
        raise _Slow
    _no_tags(o)
    _str(out, o.group_id, True)
    _str(out, o.member_id, True)
    out.append(_HEAD(o.share_session_epoch, o.max_wait_ms, o.min_bytes, o.max_bytes))
    if version >= 1:
        out.append(_II(o.max_records, o.batch_size))
    elif o.max_records != 0 or o.batch_size != 0:
        raise _Slow
    if version >= 2:
        out.append(_I8(o.share_acquire_mode))
        renew = o.is_renew_ack
        if renew is True:
            out.append(_TRUE)
        elif renew is False:
            out.append(_FALSE)
        else:
            raise _Slow
    elif o.is_renew_ack is not False:
        raise _Slow
    topics = o.topics
    if type(topics) is not tuple:
        raise _Slow
    _uvar(out, len(topics) + 1)
    for t in topics:
        if type(t) is not FetchTopic:
            raise _Slow
        _no_tags(t)
        tid = t.topic_id
        if type(tid) is not uuid.UUID:
            raise _Slow
        out.append(tid.bytes)
        parts = t.partitions
        if type(parts) is not tuple:
            raise _Slow
        _uvar(out, len(parts) + 1)
        for p in parts:
            _write_partition(out, p, version)
        out.append(_TAGLESS)
    forgotten = o.forgotten_topics_data
    if type(forgotten) is not tuple:
        raise _Slow
    _uvar(out, len(forgotten) + 1)
    for f in forgotten:
        if type(f) is not ForgottenTopic:
            raise _Slow
        _no_tags(f)
        tid = f.topic_id
        if type(tid) is not uuid.UUID:
            raise _Slow
        out.append(tid.bytes)
        indexes = f.partitions
        if type(indexes) is not tuple:
            raise _Slow
        _uvar(out, len(indexes) + 1)
        for i in indexes:
            out.append(_I32(i))
        out.append(_TAGLESS)
    out.append(_TAGLESS)


class _Encoder:
    """One version's encoder: the usual request written here, anything else (every
    error included) by ``generic`` from scratch, so errors say what they always said."""

    def __init__(self, version: int, generic: Callable[[Writer, Any], None]) -> None:
        self.version = version
        self.generic = generic

    def __call__(self, w: Writer, o: Any) -> None:
        out: list[bytes] = []
        try:
            _write_request(out, o, self.version)
        except (_Slow, struct.error, TypeError, ValueError, AttributeError, OverflowError):
            self.generic(w, o)
            return
        w.buf += b"".join(out)


def share_fetch_request_encoder(
    version: int, generic: Callable[[Writer, Any], None]
) -> Callable[[Writer, Any], None] | None:
    """The encoder of a ShareFetch request at ``version`` (0 to 2; else ``None``), which
    leaves whatever it does not write itself to ``generic``, the generated encoder."""
    if not 0 <= version <= 2:
        return None
    return _Encoder(version, generic)
