"""RecordBatch v2 (magic 2): split a ``records`` field into batches, decode, encode.

Decoding is two-level, so a consumer pays only for what it keeps:

1. :func:`read_batches` splits a ``records`` field into :class:`RecordBatch` objects by
   reading each 61-byte header, and nothing else: no CRC, no decompression, no records.
   The consumer can drop batches outside its acquired offsets at this point. A final
   batch cut short by the broker (it stops at its byte limit) ends the scan cleanly;
   :attr:`BatchSplit.consumed` says how many bytes held complete batches.
2. :meth:`RecordBatch.records` verifies the CRC-32C, decompresses (bounded), and decodes
   every record in one tight loop; or, given offset ``spans`` (a consumer's acquired
   offsets), builds only the records inside them, steps over the others by length and
   stops after the last span.

Records are built by a *factory* ``factory(offset, timestamp, key, value, headers)``
called once per record, so a caller with its own record type (the share consumer adds
topic, partition, delivery count, lock deadline) allocates one object per record, not
two. The default factory is :class:`Record`.

Keys, values and header values are ``bytes`` (or ``None``), sliced from the batch's
(decompressed) buffer. Measured end to end (decode, then hand the value on as bytes),
``bytes`` slices beat ``memoryview`` slices: 1.08 M vs 1.03 M records/s at 100 B and
0.84 M vs 0.77 M at 1 KiB (a memoryview is as costly to create as a 100-byte copy,
and must be copied anyway by most consumers). A ``bytes`` value also does not pin the
whole fetch response in memory. Headers are a tuple of ``(key, value)`` pairs; records
without headers all share the one empty tuple :data:`NO_HEADERS`.

Rules for this module:

* Any bytes given to a decoder either decode or raise
  :class:`~sharecon.errors.CorruptRecordError` naming the batch's base offset, the byte
  offset and the field; nothing else escapes. ``base_offset``/``last_offset`` are set on
  the error whenever the header could be read, so the caller can release exactly those.
* Truncation of the *last* batch is not an error; garbage inside a complete batch is.
* Encoders raise only :class:`~sharecon.errors.LocalProtocolError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Final, Generic, NamedTuple, Protocol, TypeVar, overload

from sharecon.errors import CorruptRecordError, LocalProtocolError
from sharecon.protocol._crc import crc32c as _crc32c_fn
from sharecon.protocol.compression import (
    DEFAULT_MAX_UNCOMPRESSED,
    Codec,
    compress,
    decompress,
    decompress_chunks,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchBuilder",
    "BatchReader",
    "DEFAULT_MAX_UNCOMPRESSED",
    "NO_HEADERS",
    "BatchSplit",
    "Codec",
    "ControlRecord",
    "ControlType",
    "EncodableRecord",
    "Headers",
    "Record",
    "RecordBatch",
    "RecordFactory",
    "TimestampType",
    "decode_records",
    "encode_batch",
    "encode_control_batch",
    "read_batches",
]

#: Record headers: ``(key, value)`` pairs in wire order; a null value is ``None``.
Headers = tuple[tuple[str, bytes | None], ...]

#: The one empty headers tuple shared by every record that has none.
NO_HEADERS: Final[Headers] = ()

#: Size of the fixed RecordBatch v2 header, up to and including RecordsCount.
BATCH_HEADER_SIZE: Final = 61
# BaseOffset and BatchLength precede what BatchLength counts.
_LOG_OVERHEAD: Final = 12
_MAGIC_OFFSET: Final = 16
_CRC_START: Final = 21  # CRC-32C covers Attributes .. end of batch.
_MAGIC: Final = 2

_HEADER = struct.Struct(">qiibIhiqqqhii")
_AFTER_CRC = struct.Struct(">hiqqqhii")  # Attributes .. RecordsCount, 40 bytes
_BEFORE_CRC = struct.Struct(">qiib")  # BaseOffset .. Magic
_CRC = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_DELETE_HORIZON_BIT: Final = 0x40

# A record is at least: attributes, timestamp delta, offset delta, key length,
# value length and header count, one byte each.
_MIN_RECORD_BODY: Final = 6

_crc32c: Callable[[bytes | memoryview], int] = _crc32c_fn

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class TimestampType(IntEnum):
    """Which clock a batch's timestamps come from (attributes bit 3)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(IntEnum):
    """The type in a control record's key. Unknown types are kept as plain ints."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(slots=True, init=False)
class Record:
    """One data record, as built by the default factory.

    :ivar offset: the record's absolute offset in its partition.
    :ivar timestamp: milliseconds since the epoch (the batch's MaxTimestamp for every
        record of a LogAppendTime batch).
    :ivar key: the key, or ``None``.
    :ivar value: the value, or ``None`` (a tombstone).
    :ivar headers: ``(key, value)`` pairs; :data:`NO_HEADERS` when there are none.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    # Written out rather than generated by dataclass: in the compiled build, mypyc compiles
    # this one (the generated one is interpreted Python, a frame per record) and the
    # decoder calls it directly when no other factory is given.
    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = NO_HEADERS,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __reduce__(
        self,
    ) -> tuple[type[Record], tuple[int, int, bytes | None, bytes | None, Headers]]:
        # Pickling and copy: the compiled class cannot be made without its arguments.
        return (Record, (self.offset, self.timestamp, self.key, self.value, self.headers))


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The record of a control batch (a transaction marker, or a KRaft record).

    :ivar offset: the record's absolute offset.
    :ivar timestamp: its timestamp in milliseconds.
    :ivar type: a :class:`ControlType`, or the raw int for types this client does not know.
    :ivar version: the control key's version.
    :ivar coordinator_epoch: for ABORT/COMMIT markers, the transaction coordinator's
        epoch; ``None`` for other types.
    """

    offset: int
    timestamp: int
    type: ControlType | int
    version: int
    coordinator_epoch: int | None


class RecordFactory(Protocol[T_co]):
    """Builds one record: ``factory(offset, timestamp, key, value, headers)``.

    Called positionally, once per data record, in offset order. Any callable with this
    shape works: a class, a ``functools.partial`` carrying per-batch context, a lambda.
    """

    def __call__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        /,
    ) -> T_co:
        """Return the record object to deliver."""
        ...


class EncodableRecord(Protocol):
    """What :func:`encode_batch` reads from each record (:class:`Record` fits)."""

    @property
    def offset(self) -> int:
        """Absolute offset; ``offset - base_offset`` becomes the record's offset delta."""
        ...

    @property
    def timestamp(self) -> int:
        """Timestamp in milliseconds."""
        ...

    @property
    def key(self) -> bytes | None:
        """The key, or ``None``."""
        ...

    @property
    def value(self) -> bytes | None:
        """The value, or ``None``."""
        ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]:
        """``(key, value)`` header pairs."""
        ...


class BatchSplit(NamedTuple):
    """What :func:`read_batches` found.

    :ivar batches: the complete batches, in order.
    :ivar consumed: bytes of the input they cover; less than :attr:`total` when the
        broker cut the last batch short.
    :ivar total: length of the input.
    """

    batches: list[RecordBatch]
    consumed: int
    total: int

    @property
    def truncated(self) -> bool:
        """True when bytes after the complete batches were left over (a cut-off batch)."""
        return self.consumed < self.total


class RecordBatch:
    """One complete RecordBatch v2: its header fields, and its records on demand.

    Made by :func:`read_batches`, which reads only the header; the header fields are
    plain attributes so that skipping a batch costs nothing more. Decode the records
    with :meth:`records` (data batches) or :meth:`control_records` (control batches).

    :ivar base_offset: offset of the first record.
    :ivar batch_length: BatchLength (bytes after that field; the batch is ``size`` bytes).
    :ivar partition_leader_epoch: not covered by the CRC.
    :ivar magic: always 2 here.
    :ivar crc: the stored CRC-32C (unsigned).
    :ivar attributes: raw attribute bits (see the properties).
    :ivar last_offset_delta: ``last_offset - base_offset``; -1 for an empty batch.
    :ivar base_timestamp: timestamp the record deltas are relative to (or the delete
        horizon, see :attr:`has_delete_horizon`).
    :ivar max_timestamp: largest record timestamp (the append time for LogAppendTime).
    :ivar producer_id: -1 when not idempotent.
    :ivar producer_epoch: -1 when not idempotent.
    :ivar base_sequence: -1 when not idempotent.
    :ivar records_count: number of records in the batch (may be less than the offset
        span after compaction).
    :ivar position: byte offset of the batch within the buffer given to
        :func:`read_batches`.
    """

    __slots__ = (
        "_buf",
        "_view",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "decoded_size",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int
    #: Bytes of the records section after decompression; set by :meth:`records` (the
    #: consumer counts it against its buffer bound: memory follows this, not the wire size).
    decoded_size: int
    _buf: bytes
    _view: memoryview  # of _buf, shared by all batches of one read_batches() call

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records_count={self.records_count}, codec={self.codec.name}, "
            f"control={self.is_control}, transactional={self.is_transactional}, "
            f"producer_id={self.producer_id}, size={self.size})"
        )

    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch covers (inclusive)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, headers included."""
        return self.batch_length + _LOG_OVERHEAD

    @property
    def codec(self) -> Codec:
        """Compression codec of the records section.

        :raises CorruptRecordError: for codec bits 5-7, which no codec uses.
        """
        bits = self.attributes & _CODEC_MASK
        if bits > Codec.ZSTD:
            raise self._error(f"unknown compression codec {bits} in attributes")
        return Codec(bits)

    @property
    def timestamp_type(self) -> TimestampType:
        """CreateTime (producer clock) or LogAppendTime (broker clock)."""
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & _TIMESTAMP_TYPE_BIT
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        """Whether the batch was written inside a transaction."""
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Whether this is a control batch (transaction marker etc.): never user data."""
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        """Whether ``base_timestamp`` holds the compaction delete horizon (attributes bit 6)."""
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon if :attr:`has_delete_horizon`, else ``None``."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def raw(self) -> memoryview:
        """The batch's bytes exactly as received (e.g. to forward or re-append)."""
        start = self.position
        return self._view[start : start + self.batch_length + _LOG_OVERHEAD]

    def compute_crc(self) -> int:
        """CRC-32C of Attributes through the end of the batch."""
        start = self.position
        return _crc32c(self._view[start + _CRC_START : start + _LOG_OVERHEAD + self.batch_length])

    def verify_crc(self) -> None:
        """Check the stored CRC-32C.

        :raises CorruptRecordError: on a mismatch.
        """
        computed = self.compute_crc()
        if computed != self.crc:
            raise self._error(
                f"CRC-32C mismatch (stored 0x{self.crc:08x}, computed 0x{computed:08x})",
                at=self.position + 17,
            )

    @overload
    def records(
        self,
        factory: None = None,
        *,
        max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
        verify_crc: bool = True,
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> list[Record]: ...

    @overload
    def records(
        self,
        factory: RecordFactory[T],
        *,
        max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
        verify_crc: bool = True,
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> list[T]: ...

    def records(
        self,
        factory: RecordFactory[T] | None = None,
        *,
        max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
        verify_crc: bool = True,
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> list[T] | list[Record]:
        """Verify, decompress and decode the batch's data records.

        A control batch has no data records and gives ``[]`` (see :meth:`control_records`).

        :param factory: builds each record from ``(offset, timestamp, key, value,
            headers)``; :class:`Record` by default.
        :param max_uncompressed: the most bytes the records section may inflate to.
        :param verify_crc: check the CRC-32C first (leave on for data from the wire).
        :param spans: only the records whose offsets fall in these inclusive
            ``(first, last)`` spans (sorted, disjoint), or ``None`` for every record. The
            others are skipped by their length, never built, and decoding stops after the
            last span (see :class:`BatchReader` for what is still checked).
        :raises CorruptRecordError: CRC mismatch, decompression failure or bomb, or
            malformed records; ``base_offset``/``last_offset`` name this batch.
        """
        if self.attributes & _CONTROL_BIT:
            if verify_crc:
                self.verify_crc()
            return []
        if factory is None:
            return self._decode(Record, max_uncompressed, verify_crc, spans)
        return self._decode(factory, max_uncompressed, verify_crc, spans)

    def control_records(
        self, *, max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED, verify_crc: bool = True
    ) -> list[ControlRecord]:
        """Decode a control batch's records (normally one transaction marker).

        :raises CorruptRecordError: as :meth:`records`, or for a malformed control key
            or marker value. Gives ``[]`` for a data batch.
        """
        if not self.attributes & _CONTROL_BIT:
            return []
        raw = self._decode(_raw_record, max_uncompressed, verify_crc)
        out: list[ControlRecord] = []
        for offset, timestamp, key, value, _headers in raw:
            if key is None or len(key) < _CONTROL_KEY.size:
                raise self._error(f"control record at offset {offset} has a short key")
            version, ctype = _CONTROL_KEY.unpack_from(key)
            kind: ControlType | int
            try:
                kind = ControlType(ctype)
            except ValueError:
                kind = ctype
            epoch: int | None = None
            if kind in (ControlType.ABORT, ControlType.COMMIT):
                if value is None or len(value) < _END_TXN_VALUE.size:
                    raise self._error(f"transaction marker at offset {offset} has a short value")
                _vversion, epoch = _END_TXN_VALUE.unpack_from(value)
            out.append(ControlRecord(offset, timestamp, kind, version, epoch))
        return out

    def _decode(
        self,
        factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
        max_uncompressed: int,
        verify_crc: bool,
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> list[T]:
        reader = self.reader(factory, max_uncompressed, verify_crc, spans)
        return reader.take(reader.count)

    def reader(
        self,
        factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
        max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
        verify_crc: bool = True,
        spans: Sequence[tuple[int, int]] | None = None,
    ) -> BatchReader[T]:
        """A reader of the batch's data records that builds them a slice at a time
        (:meth:`BatchReader.take`), decompressing the batch once, here: what
        :meth:`records` gives, in pieces (a control batch's records are its markers:
        :meth:`control_records` reads them this way).

        :raises CorruptRecordError: CRC mismatch, decompression failure or bomb, or a
            header that contradicts itself; a malformed record is raised by ``take``.
        """
        start = self.position
        end = start + _LOG_OVERHEAD + self.batch_length
        if verify_crc and _crc32c(self._view[start + _CRC_START : end]) != self.crc:
            self.verify_crc()  # raises, with both CRCs in the message
        count = self.records_count
        clipped: list[tuple[int, int]] | None = None
        if spans is not None:
            clipped = _clip_spans(
                spans, self.base_offset, self.base_offset + self.last_offset_delta
            )
            if clipped is not None and not clipped:
                # Nothing asked for here: not even decompressed.
                self.decoded_size = 0
                return BatchReader(self, factory, b"", 0, 0, 0, None, False, None)
        if count == 0:
            # Compaction can leave empty batches; like the Java client, do not even
            # look at (or decompress) the records section.
            self.decoded_size = 0
            return BatchReader(self, factory, b"", 0, 0, 0, None, False, None)
        if count < 0:
            raise self._error(f"negative records count {count}", at=start + 57)
        if count > self.last_offset_delta + 1:
            raise self._error(
                f"records count {count} exceeds the offset span "
                f"(last offset delta {self.last_offset_delta})",
                at=start + 57,
            )
        start += BATCH_HEADER_SIZE
        codec = self.attributes & _CODEC_MASK
        buf = self._buf
        compressed = codec != 0
        if compressed:
            if codec > Codec.ZSTD:
                raise self._error(f"unknown compression codec {codec} in attributes", at=start)
            if clipped is not None and codec == Codec.ZSTD and count == self.last_offset_delta + 1:
                # Part of a compressed batch: decompress as a stream and keep only a
                # window of it, so what one record costs does not grow with the batch.
                # (Built whole here: the reader hands them out in one piece.)
                built = self._decode_stream(
                    self._view[start:end], max_uncompressed, factory, clipped
                )
                reader: BatchReader[T] = BatchReader(self, factory, b"", 0, 0, 0, None, False, None)
                reader.built = built
                reader.count = len(built)
                reader.done = not built
                return reader
            try:
                buf = decompress(codec, self._view[start:end], max_size=max_uncompressed)
            except CorruptRecordError as exc:
                raise self._error(str(exc), at=start) from exc
            start = 0
            end = len(buf)
        self.decoded_size = end - start
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            # LogAppendTime: every record takes the broker's append time. Rare enough
            # that a wrapper beats a per-record branch in the loop.
            factory = _AppendTime(factory, self.max_timestamp)
        return BatchReader(
            self,
            factory,
            buf,
            start,
            end,
            count,
            clipped,
            count == self.last_offset_delta + 1,
            compressed,
        )

    def _decode_stream(
        self,
        data: memoryview,
        max_uncompressed: int,
        factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
        spans: list[tuple[int, int]],
    ) -> list[T]:
        """Decode ``spans`` of a dense zstd batch from a stream of its decompressed
        records section (see :func:`_decode_spans_stream`)."""
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            factory = _AppendTime(factory, self.max_timestamp)
        chunks = decompress_chunks(Codec.ZSTD, data, max_size=max_uncompressed)
        try:
            out, nbytes = _decode_spans_stream(
                chunks,
                self.records_count,
                self.base_offset,
                self.base_timestamp,
                factory,
                spans,
                _skip_marks(self),
            )
        except CorruptRecordError as exc:
            raise self._error(str(exc), at=self.position + BATCH_HEADER_SIZE) from exc
        except _Malformed as exc:
            raise self._error(
                f"record {exc.index}, byte {exc.pos} of the decompressed records: {exc.reason}"
            ) from None
        self.decoded_size = nbytes
        return out

    def _error(self, message: str, *, at: int | None = None) -> CorruptRecordError:
        pos = self.position if at is None else at
        return CorruptRecordError(
            f"record batch at base offset {self.base_offset} (byte {pos}): {message}",
            base_offset=self.base_offset,
            last_offset=self.base_offset + self.last_offset_delta,
        )


class BatchReader(Generic[T]):
    """One batch's data records, built a slice at a time (:meth:`RecordBatch.reader`).

    The batch is checked and decompressed once, when the reader is made; each
    :meth:`take` builds the next records, exactly as :meth:`RecordBatch.records` would
    have (the same checks, the same errors), so a consumer can hand out a large batch in
    slices and keep only a slice's records alive at a time.

    With spans (:func:`_clip_spans`), only the records whose offsets fall in them are
    built. Records outside them are stepped over without building anything, and
    decoding stops after the last span: what one acquired record costs no longer grows
    with the batch (beyond decompressing it). In a *dense* batch (as many records as
    offsets, the normal case) record ``i`` has offset ``base_offset + i``, so a skipped
    record costs reading its length varint; each decoded run is then checked to sit at
    exactly those offsets. A batch with gaps (compaction) reads each skipped record's
    offset delta.

    What a skipped record no longer gets checked for, unlike a full decode: its key,
    value and headers (only its framing is: a valid length that ends inside the batch;
    without gaps, not even its offset), and nothing after the last span is looked at
    (the trailing-bytes check runs only when the spans reach the last record). The batch
    CRC-32C, checked before this over every byte, still catches damage on the way; what
    it cannot catch is a well-framed record that was written wrong, and such a record is
    never handed out. Records that are built get every check a full decode gives.

    :ivar count: the records in the batch (for the streaming decoder's result, its
        length).
    :ivar done: every record asked for has been built (or the reader failed).
    """

    __slots__ = (
        "_batch",
        "_buf",
        "_compressed",
        "_counted",
        "_dense",
        "_end",
        "_factory",
        "_left",
        "_prev",
        "_si",
        "_spans",
        "built",
        "count",
        "done",
        "i",
        "pos",
        "taken_bytes",
    )

    def __init__(
        self,
        batch: RecordBatch,
        factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
        buf: bytes,
        pos: int,
        end: int,
        count: int,
        spans: list[tuple[int, int]] | None,
        dense: bool,
        compressed: bool | None,
    ) -> None:
        self._batch = batch
        self._factory = factory
        self._buf = buf
        self.pos = pos
        self._end = end
        self.count = count
        self._spans = spans
        self._dense = dense
        self._compressed = compressed
        #: Records already built by the streaming decoder (handed out ``limit`` at a time).
        self.built: list[T] | None = None
        #: Index in the batch of the record at :attr:`pos`; the offset before it.
        self.i = 0
        self._prev = batch.base_offset - 1
        #: The span being decoded and how many of its records are left (0: not entered).
        self._si = 0
        self._left = 0
        self.done = count == 0
        #: Decompressed bytes of the records the last :meth:`take` built (the last take
        #: counts the rest of the batch): together, the batch's ``decoded_size``.
        self.taken_bytes = 0
        self._counted = 0

    def take(self, limit: int) -> list[T]:
        """The next records, at most ``limit``; empty only when none is left (the reader
        is then :attr:`done`: a batch with gaps may find that only by looking).

        :raises CorruptRecordError: a malformed record in this slice (the reader is then
            :attr:`done`); the batch is named as :meth:`RecordBatch.records` names it.
        """
        built = self.built
        batch = self._batch
        if built is not None:
            # Built by the stream already: handed out in pieces of ``limit`` all the same.
            start = self.i
            self.i = start + limit
            if self.i >= len(built):
                self.built = None
                self.done = True
                self.taken_bytes = batch.decoded_size
                return built[start:] if start else built
            self.taken_bytes = 0
            return built[start : self.i]
        out: list[T] = []
        if self.done:
            self.taken_bytes = 0
            return out
        buf = self._buf
        end = self._end
        count = self.count
        base = batch.base_offset
        pos = self.pos
        i = self.i
        prev = self._prev
        try:
            spans = self._spans
            if spans is None:
                n = count - i
                if n > limit:
                    n = limit
                pos, prev = _decode_run(
                    buf, pos, end, i, n, base, batch.base_timestamp, self._factory, out, prev
                )
                i += n
                done = i == count
            else:
                dense = self._dense
                si = self._si
                left = self._left
                nspans = len(spans)
                while len(out) < limit and si < nspans and i < count:
                    if left == 0:
                        lo, hi = spans[si]
                        if dense:
                            j = lo - base
                            if j >= count:
                                si = nspans
                                break
                            if j > i:
                                pos = _skip_n(buf, pos, end, i, j)
                                i = j
                                prev = lo - 1
                            left = min(hi - base + 1, count) - i
                        else:
                            pos, i, prev = _skip_until(buf, pos, end, i, count, base, prev, lo)
                            # A light pass to count the records of this span, then the real one.
                            left = _skip_until(buf, pos, end, i, count, base, prev, hi + 1)[1] - i
                        if left <= 0:
                            left = 0
                            si += 1
                            continue
                    n = limit - len(out)
                    if n > left:
                        n = left
                    pos, prev = _decode_run(
                        buf, pos, end, i, n, base, batch.base_timestamp, self._factory, out, prev
                    )
                    i += n
                    left -= n
                    if dense and prev != base + i - 1:
                        raise _Malformed(
                            i - 1,
                            pos,
                            f"offset {prev} where a batch without gaps has {base + i - 1}",
                        )
                    if left == 0:
                        si += 1
                self._si = si
                self._left = left
                done = (si >= nspans or i >= count) and left == 0
            if done and i == count and pos != end:
                raise _Malformed(
                    count,
                    pos,
                    f"{end - pos} bytes left after the {count} records the header counts",
                )
        except _Malformed as exc:
            self.done = True
            where = (
                f"byte {exc.pos} of the decompressed records"
                if self._compressed
                else f"byte {exc.pos}"
            )
            raise batch._error(f"record {exc.index}, {where}: {exc.reason}") from None
        if done:
            self.taken_bytes = batch.decoded_size - self._counted
        else:
            self.taken_bytes = pos - self.pos
            self._counted += pos - self.pos
        self.pos = pos
        self.i = i
        self._prev = prev
        self.done = done
        return out


class _AppendTime(Generic[T]):
    """Wraps a record factory so every record takes the batch's LogAppendTime."""

    __slots__ = ("_inner", "_time")

    def __init__(
        self, inner: Callable[[int, int, bytes | None, bytes | None, Headers], T], time: int
    ) -> None:
        self._inner = inner
        self._time = time

    def __call__(
        self, offset: int, _ts: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> T:
        return self._inner(offset, self._time, key, value, headers)


def _raw_record(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers
) -> tuple[int, int, bytes | None, bytes | None, Headers]:
    return (offset, timestamp, key, value, headers)


def read_batches(data: bytes | bytearray | memoryview) -> BatchSplit:
    """Split a ``records`` field into its complete batches, reading only their headers.

    A final batch cut short (fewer bytes than its BatchLength promises, or not even a
    whole length field) ends the scan without error: the broker cuts responses at its
    byte limit. Non-``bytes`` input is copied once so that keys and values can be
    sliced as ``bytes``.

    :raises CorruptRecordError: a BatchLength too small for a v2 header, or a magic
        other than 2 in a complete batch.
    """
    buf = data if type(data) is bytes else bytes(data)
    view = memoryview(buf)
    total = len(buf)
    batches: list[RecordBatch] = []
    append = batches.append
    unpack = _HEADER.unpack_from
    new = RecordBatch.__new__
    pos = 0
    while total - pos >= _LOG_OVERHEAD:
        (length,) = _I32.unpack_from(buf, pos + 8)
        if length < BATCH_HEADER_SIZE - _LOG_OVERHEAD:
            (base,) = _I64.unpack_from(buf, pos)
            raise CorruptRecordError(
                f"record batch at base offset {base} (byte {pos + 8}): batch length {length} "
                f"is shorter than a v2 batch header",
                base_offset=base,
            )
        if pos + _LOG_OVERHEAD + length > total:
            break
        if buf[pos + _MAGIC_OFFSET] != _MAGIC:
            (base,) = _I64.unpack_from(buf, pos)
            raise CorruptRecordError(
                f"record batch at base offset {base} (byte {pos + _MAGIC_OFFSET}): magic "
                f"{buf[pos + _MAGIC_OFFSET]}, only 2 (RecordBatch v2) is supported",
                base_offset=base,
            )
        b = new(RecordBatch)
        (
            b.base_offset,
            b.batch_length,
            b.partition_leader_epoch,
            b.magic,
            b.crc,
            b.attributes,
            b.last_offset_delta,
            b.base_timestamp,
            b.max_timestamp,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.records_count,
        ) = unpack(buf, pos)
        b.position = pos
        b.decoded_size = 0
        b._buf = buf
        b._view = view
        append(b)
        pos += _LOG_OVERHEAD + length
    return BatchSplit(batches, pos, total)


@overload
def decode_records(
    data: bytes | bytearray | memoryview,
    factory: None = None,
    *,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
) -> list[Record]: ...


@overload
def decode_records(
    data: bytes | bytearray | memoryview,
    factory: RecordFactory[T],
    *,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
) -> list[T]: ...


def decode_records(
    data: bytes | bytearray | memoryview,
    factory: RecordFactory[T] | None = None,
    *,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
) -> list[T] | list[Record]:
    """All data records of every complete batch in ``data`` (control batches skipped).

    A convenience for tools and tests; a consumer filtering by offset should use
    :func:`read_batches` and :meth:`RecordBatch.records`.

    :raises CorruptRecordError: as :func:`read_batches` and :meth:`RecordBatch.records`.
    """
    fac: Callable[[int, int, bytes | None, bytes | None, Headers], object] = (
        Record if factory is None else factory
    )
    out: list[object] = []
    for batch in read_batches(data).batches:
        if not batch.attributes & _CONTROL_BIT:
            out.extend(batch._decode(fac, max_uncompressed, True))
        else:
            batch.verify_crc()
    return out  # type: ignore[return-value]


class _Bad(Exception):
    """Internal: a field that cannot be decoded, with the reason."""


class _Malformed(Exception):
    """Internal: where and why a record failed to decode (becomes CorruptRecordError)."""

    def __init__(self, index: int, pos: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.pos = pos
        self.reason = reason


def _varint_slow(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Unsigned varint at ``pos`` (the multi-byte case); returns (raw value, new pos).

    :raises _Bad: if it runs past ``max_bytes`` bytes or past the buffer.
    """
    value = 0
    shift = 0
    if pos + max_bytes > len(buf):
        max_bytes = len(buf) - pos
    for i in range(max_bytes):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    if pos + max_bytes >= len(buf):
        raise _Bad("varint runs past the end of the data")
    raise _Bad(f"varint longer than {max_bytes} bytes")


def _read_headers(buf: bytes, pos: int, count: int, rec_end: int) -> tuple[Headers, int]:
    """Decode ``count`` record headers starting at ``pos``; returns (headers, new pos)."""
    if count < 0:
        raise _Bad(f"negative header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for h in range(count):
        if pos >= rec_end:
            raise _Bad(f"header {h} of {count} starts past the end of the record")
        n, pos = _varint_slow(buf, pos, 5)
        klen = (n >> 1) ^ -(n & 1)
        if klen < 0:
            raise _Bad(f"header {h} key length {klen}")
        if pos + klen > rec_end:
            raise _Bad(f"header {h} key length {klen} runs past the end of the record")
        try:
            key = buf[pos : pos + klen].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Bad(f"header {h} key is not valid UTF-8 ({exc.reason})") from None
        pos += klen
        n, pos = _varint_slow(buf, pos, 5)
        vlen = (n >> 1) ^ -(n & 1)
        if vlen >= 0:
            if pos + vlen > rec_end:
                raise _Bad(f"header {h} value length {vlen} runs past the end of the record")
            headers.append((key, buf[pos : pos + vlen]))
            pos += vlen
        elif vlen == -1:
            headers.append((key, None))
        else:
            raise _Bad(f"header {h} value length {vlen}")
    return tuple(headers), pos


def _decode_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
) -> list[T]:
    """Decode ``count`` records from ``buf[pos:end]``, which they must fill exactly."""
    out: list[T] = []
    # Offsets must strictly increase: a forged batch (right CRC, wrong deltas) must not
    # deliver an offset twice or out of order.
    pos, _prev = _decode_run(
        buf, pos, end, 0, count, base_offset, base_timestamp, factory, out, base_offset - 1
    )
    if pos != end:
        raise _Malformed(
            count, pos, f"{end - pos} bytes left after the {count} records the header counts"
        )
    return out


def _decode_run(
    buf: bytes,
    pos: int,
    end: int,
    first: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
    out: list[T],
    prev: int,
) -> tuple[int, int]:
    """Decode records ``first .. first + count - 1`` (indexes in the batch) starting at
    ``buf[pos]``, appending them to ``out``; each offset must exceed the one before
    (``prev`` for the first). Returns the position after them and the last offset.

    The hot loop, run once per record. Varints are decoded inline with one- and
    two-byte fast paths (the sizes of almost every length and delta in practice); only
    longer ones call :func:`_varint_slow`. Record varints are zig-zag signed, so a
    non-negative length is an even raw value ``2 * length`` and null (-1) is raw 1:
    lengths are checked on the raw value and halved, skipping the full zig-zag decode.
    Bounds are checked once per record, against its declared length; a ``buf[pos]``
    read past the buffer raises IndexError, reported as a record running off the end.
    """
    # Called by name, not through local aliases: the compiled build turns these into
    # direct C calls (an alias would be a generic Python call per record).
    native = factory is Record  # the default: the compiled build constructs it directly
    i = first
    rec_start = pos
    try:
        for i in range(first, first + count):
            rec_start = pos
            # Length (varint)
            b = buf[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = _varint_slow(buf, pos, 5)
            rec_end = pos + (n >> 1)
            if n & 1 or n < 2 * _MIN_RECORD_BODY or rec_end > end:
                raise _Malformed(
                    i,
                    rec_start,
                    f"record length {(n >> 1) ^ -(n & 1)} "
                    f"(must be {_MIN_RECORD_BODY} to {end - pos} bytes)",
                )
            # Attributes (int8, unused, skipped), then TimestampDelta (varlong)
            b = buf[pos + 1]
            if b < 0x80:
                n = b
                pos += 2
            else:
                c = buf[pos + 2]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 3
                else:
                    n, pos = _varint_slow(buf, pos + 1, 10)
            timestamp = base_timestamp + ((n >> 1) ^ -(n & 1))
            # OffsetDelta (varint)
            b = buf[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = _varint_slow(buf, pos, 5)
            offset = base_offset + ((n >> 1) ^ -(n & 1))
            if offset <= prev:
                raise _Malformed(
                    i, rec_start, f"offset {offset} does not follow the previous one ({prev})"
                )
            prev = offset
            # KeyLength (varint, -1 = null) and Key
            b = buf[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = _varint_slow(buf, pos, 5)
            if n & 1:
                if n != 1:
                    raise _Malformed(i, rec_start, f"key length {(n >> 1) ^ -1}")
                key = None
            else:
                n >>= 1
                key = buf[pos : pos + n]
                pos += n
            # ValueLength (varint, -1 = null) and Value
            b = buf[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = _varint_slow(buf, pos, 5)
            if n & 1:
                if n != 1:
                    raise _Malformed(i, rec_start, f"value length {(n >> 1) ^ -1}")
                value = None
            else:
                n >>= 1
                value = buf[pos : pos + n]
                pos += n
            # HeadersCount (varint) and headers; zero is by far the common case.
            if buf[pos] == 0:
                pos += 1
                headers = NO_HEADERS
            else:
                n, pos = _varint_slow(buf, pos, 5)
                headers, pos = _read_headers(buf, pos, (n >> 1) ^ -(n & 1), rec_end)
            if pos != rec_end:
                raise _Malformed(
                    i,
                    rec_start,
                    f"record fields end at byte {pos}, but its length says {rec_end}",
                )
            if native:
                # (no typing.cast: in pure Python that is a call per record)
                out.append(Record(offset, timestamp, key, value, headers))  # type: ignore[arg-type]
            else:
                out.append(factory(offset, timestamp, key, value, headers))
    except IndexError as exc:
        # Only our own ``buf[pos]`` reads, in this frame, are caught: an IndexError from
        # inside the factory (a deeper traceback) is the caller's and propagates.
        tb = exc.__traceback__
        if tb is not None and tb.tb_next is not None:
            raise
        raise _Malformed(i, rec_start, "record runs past the end of the batch") from None
    except _Bad as exc:
        raise _Malformed(i, rec_start, str(exc)) from None
    return pos, prev


def _clip_spans(
    spans: Sequence[tuple[int, int]], first: int, last: int
) -> list[tuple[int, int]] | None:
    """``spans`` cut to ``first .. last``; ``None`` when they cover all of it (decode
    everything, the common case) and ``[]`` when they miss it.

    :raises ValueError: spans that are inverted, unsorted or overlapping (a caller's bug).
    """
    out: list[tuple[int, int]] = []
    prev_hi = -(2**63) - 1
    for lo, hi in spans:
        if hi < lo or lo <= prev_hi:
            raise ValueError(f"spans must be sorted, disjoint and not inverted: {lo}..{hi}")
        prev_hi = hi
        if hi < first or lo > last:
            continue
        out.append((lo if lo > first else first, hi if hi < last else last))
    if len(out) == 1 and out[0][0] == first and out[0][1] == last:
        return None
    return out


#: Where records start in the decompressed stream of recently read batches, so the next
#: fetch of the same batch (strict mode hands out one record per fetch, and the broker
#: sends the whole batch every time) steps over what came before without parsing it:
#: (base offset, CRC, length) -> {record index: position}, a mark every _MARK_EVERY
#: records. A few batches at most (each mark list is small: 5 M records make 76).
_SKIP_MARKS: dict[tuple[int, int, int], dict[int, int]] = {}
_MARK_EVERY = 1 << 16
_MARKED_BATCHES = 16


def _skip_marks(batch: RecordBatch) -> dict[int, int]:
    key = (batch.base_offset, batch.crc, batch.batch_length)
    marks = _SKIP_MARKS.pop(key, None)
    if marks is None:
        marks = {}
        while len(_SKIP_MARKS) >= _MARKED_BATCHES:
            del _SKIP_MARKS[next(iter(_SKIP_MARKS))]  # the least recently used
    _SKIP_MARKS[key] = marks
    return marks


def _decode_spans_stream(
    chunks: Iterator[bytes],
    count: int,
    base_offset: int,
    base_timestamp: int,
    factory: Callable[[int, int, bytes | None, bytes | None, Headers], T],
    spans: list[tuple[int, int]],
    marks: dict[int, int],
) -> tuple[list[T], int]:
    """:class:`BatchReader`'s spans for a dense batch whose records section comes in pieces
    (``chunks``): only a window of it is held, records before a span are stepped over as
    they stream by (by their length varints; from the furthest of ``marks``, record
    starts found by an earlier read of this batch, by counting bytes alone), and nothing
    after the last span is decompressed. Returns the records and the bytes they took.

    Stepping over records adds a mark every ``_MARK_EVERY`` records to ``marks``.
    """
    out: list[T] = []
    buf = b""
    pos = 0  # in buf
    done = 0  # where buf[0] is in the decompressed stream
    i = 0
    prev = base_offset - 1
    nbytes = 0
    every = _MARK_EVERY
    try:
        for lo, hi in spans:
            j = lo - base_offset
            if j >= count:
                break
            if j > i:
                best = i
                for mi in marks:
                    if best < mi <= j:
                        best = mi
                if best > i:
                    target = marks[best]
                    while done + len(buf) < target:
                        done += len(buf)
                        buf = _next_chunk(chunks, i, 0)
                    pos = target - done
                    i = best
                while i < j:
                    edge = (i // every + 1) * every
                    stop = j if j < edge else edge
                    pos, i = _skip_fit(buf, pos, len(buf), i, stop)
                    if i == stop:
                        if i == edge:
                            marks[i] = done + pos
                        continue
                    more = next(chunks, None)
                    if more is None:
                        raise _past_end(buf, pos, i)
                    done += pos
                    buf = buf[pos:] + more
                    pos = 0
                prev = lo - 1
            n = min(hi - base_offset + 1, count) - i
            # Hold records i .. i + n - 1 whole: read on, doubling the window each time.
            scan, k = _skip_fit(buf, pos, len(buf), i, i + n)
            while k < i + n:
                want = max(len(buf) - pos, 1 << 16)
                parts = [buf[pos:]]
                got = 0
                while got < want:
                    more = next(chunks, None)
                    if more is None:
                        if got:
                            break
                        raise _past_end(buf, scan, k)
                    parts.append(more)
                    got += len(more)
                done += pos
                scan -= pos
                buf = b"".join(parts)
                pos = 0
                scan, k = _skip_fit(buf, scan, len(buf), k, i + n)
            run_start = pos
            pos, prev = _decode_run(
                buf, pos, scan, i, n, base_offset, base_timestamp, factory, out, prev
            )
            nbytes += pos - run_start
            i += n
            if prev != base_offset + i - 1:
                raise _Malformed(
                    i - 1,
                    pos,
                    f"offset {prev} where a batch without gaps has {base_offset + i - 1}",
                )
        if i == count:
            left = len(buf) - pos + sum(len(c) for c in chunks)
            if left:
                raise _Malformed(
                    count, pos, f"{left} bytes left after the {count} records the header counts"
                )
    except _Malformed as exc:
        # Positions are in the window: say where in the decompressed records they are.
        raise _Malformed(exc.index, exc.pos + done, exc.reason) from None
    return out, nbytes


def _next_chunk(chunks: Iterator[bytes], i: int, at: int) -> bytes:
    more = next(chunks, None)
    if more is None:
        raise _Malformed(i, at, "record runs past the end of the batch")
    return more


def _past_end(buf: bytes, pos: int, i: int) -> _Malformed:
    """Record ``i``, at ``buf[pos]``, is cut off by the end of the records: say its
    length if it can be read (as :func:`_skip_n` does)."""
    try:
        n, body = _varint_slow(buf, pos, 5)
    except (_Bad, IndexError):
        return _Malformed(i, pos, "record runs past the end of the batch")
    return _Malformed(
        i,
        pos,
        f"record length {(n >> 1) ^ -(n & 1)} (must be {_MIN_RECORD_BODY} to {len(buf) - body} bytes)",
    )


def _skip_fit(buf: bytes, pos: int, end: int, i: int, stop: int) -> tuple[int, int]:
    """Step over records ``i .. stop - 1`` that lie whole in ``buf[pos:end]``; returns
    the position and index of the first one that does not (or of ``stop``).

    Checks each stepped-over record's length as :func:`_skip_n` does (a valid varint,
    not negative, at least a minimal record body); whether it ends inside the batch is
    known only once the stream ends.
    """
    slow = _varint_slow
    try:
        while i < stop and pos < end:
            b = buf[pos]
            if b < 0x80:
                n = b
                body = pos + 1
            else:
                if pos + 1 >= end:
                    break
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    body = pos + 2
                else:
                    k = pos + 2
                    while k < end and k < pos + 5 and buf[k] >= 0x80:
                        k += 1
                    if k >= end:
                        break  # the varint goes on in the next piece
                    n, body = slow(buf, pos, 5)
            if n & 1 or n < 2 * _MIN_RECORD_BODY:
                raise _Malformed(
                    i,
                    pos,
                    f"record length {(n >> 1) ^ -(n & 1)} (must be at least {_MIN_RECORD_BODY})",
                )
            nxt = body + (n >> 1)
            if nxt > end:
                break
            pos = nxt
            i += 1
    except _Bad as exc:
        raise _Malformed(i, pos, str(exc)) from None
    return pos, i


def _skip_n(buf: bytes, pos: int, end: int, i: int, stop: int) -> int:
    """Step over records ``i .. stop - 1`` by their length varints; the position after.

    Checks their framing only: each length is a valid varint, not negative, at least a
    minimal record body, and the record ends inside the batch.
    """
    slow = _varint_slow
    rec_start = pos
    try:
        while i < stop:
            rec_start = pos
            b = buf[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = slow(buf, pos, 5)
            if n & 1 or n < 2 * _MIN_RECORD_BODY or pos + (n >> 1) > end:
                raise _Malformed(
                    i,
                    rec_start,
                    f"record length {(n >> 1) ^ -(n & 1)} "
                    f"(must be {_MIN_RECORD_BODY} to {end - pos} bytes)",
                )
            pos += n >> 1
            i += 1
    except IndexError:
        raise _Malformed(i, rec_start, "record runs past the end of the batch") from None
    except _Bad as exc:
        raise _Malformed(i, rec_start, str(exc)) from None
    return pos


def _skip_until(
    buf: bytes, pos: int, end: int, i: int, count: int, base_offset: int, prev: int, target: int
) -> tuple[int, int, int]:
    """Step over records (from index ``i``) whose offset is below ``target``, reading
    each one's length and offset delta; returns the position and index of the first
    record at or past ``target`` (or of the end), and the offset before it.

    Checks each stepped-over record's framing and that its offset follows ``prev``.
    """
    slow = _varint_slow
    rec_start = pos
    try:
        while i < count:
            rec_start = pos
            n, pos = slow(buf, pos, 5)
            rec_end = pos + (n >> 1)
            if n & 1 or n < 2 * _MIN_RECORD_BODY or rec_end > end:
                raise _Malformed(
                    i,
                    rec_start,
                    f"record length {(n >> 1) ^ -(n & 1)} "
                    f"(must be {_MIN_RECORD_BODY} to {end - pos} bytes)",
                )
            _ts, pos = slow(buf, pos + 1, 10)  # after Attributes: TimestampDelta
            n, pos = slow(buf, pos, 5)  # OffsetDelta
            if pos > rec_end:
                raise _Malformed(i, rec_start, "record fields run past its length")
            offset = base_offset + ((n >> 1) ^ -(n & 1))
            if offset <= prev:
                raise _Malformed(
                    i, rec_start, f"offset {offset} does not follow the previous one ({prev})"
                )
            if offset >= target:
                return rec_start, i, prev
            prev = offset
            pos = rec_end
            i += 1
    except IndexError:
        raise _Malformed(i, rec_start, "record runs past the end of the batch") from None
    except _Bad as exc:
        raise _Malformed(i, rec_start, str(exc)) from None
    return pos, i, prev


# ---------------------------------------------------------------------------------------
# Encoding


_SMALL: Final = tuple(bytes((i,)) for i in range(0x80))
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_NULL_LEN: Final = b"\x01"  # zig-zag varint -1


def _zz(value: int) -> bytes:
    """Zig-zag varint of ``value`` (callers check its range)."""
    n = value << 1 if value >= 0 else ((-value) << 1) - 1
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length_prefixed(data: object, what: str) -> bytes:
    """Zig-zag length + bytes for a nullable bytes-like field (the uncommon types)."""
    if data is None:
        return _NULL_LEN
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        return _zz(len(raw)) + raw
    raise LocalProtocolError(f"{what} must be bytes or None, not {type(data).__name__}")


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = [_zz(len(headers))]
    for header in headers:
        try:
            hkey, hvalue = header
        except (TypeError, ValueError):
            raise LocalProtocolError(
                f"a header must be a (key, value) pair, not {header!r}"
            ) from None
        if not isinstance(hkey, str):
            raise LocalProtocolError(f"header key must be str, not {type(hkey).__name__}")
        try:
            kb = hkey.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"header key {hkey!r} is not encodable as UTF-8") from exc
        parts.append(_zz(len(kb)))
        parts.append(kb)
        parts.append(_length_prefixed(hvalue, "header value"))
    return b"".join(parts)


def _encode_records(
    records: Sequence[EncodableRecord], base_offset: int, base_timestamp: int
) -> tuple[bytes, int]:
    """The uncompressed records section, and the last offset delta (-1 if empty)."""
    out: list[bytes] = []
    append = out.append
    zz = _zz
    previous = -1
    for r in records:
        delta = r.offset - base_offset
        if delta <= previous or delta > _I32_MAX:
            raise LocalProtocolError(
                f"record offsets must increase from base offset {base_offset} by at most "
                f"{_I32_MAX} (offset delta): offset {r.offset} after delta {previous}"
            )
        previous = delta
        ts_delta = r.timestamp - base_timestamp
        if not _I64_MIN <= ts_delta <= _I64_MAX:
            raise LocalProtocolError(f"timestamp delta {ts_delta} does not fit a varlong")
        key = r.key
        value = r.value
        headers = r.headers
        # attributes (always 0), timestamp delta, offset delta
        body = b"\x00" + zz(ts_delta) + zz(delta)
        if key is None:
            body += _NULL_LEN
        elif type(key) is bytes:
            body += zz(len(key)) + key
        else:
            body += _length_prefixed(key, "record key")
        if value is None:
            body += _NULL_LEN
        elif type(value) is bytes:
            body += zz(len(value)) + value
        else:
            body += _length_prefixed(value, "record value")
        body += _encode_headers(headers) if headers else b"\x00"
        if len(body) > _I32_MAX:
            raise LocalProtocolError(f"record at offset {r.offset} is larger than 2 GiB")
        append(zz(len(body)))
        append(body)
    return b"".join(out), previous


def _check_codec(codec: Codec | int) -> None:
    """Refuse a compression codec RecordBatch v2 does not have."""
    if type(codec) is not int and not isinstance(codec, Codec) or not 0 <= codec <= Codec.ZSTD:
        raise LocalProtocolError(f"unknown compression codec {codec!r}")


def encode_batch(
    records: Sequence[EncodableRecord],
    *,
    codec: Codec | int = Codec.NONE,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode one RecordBatch v2 with a correct CRC-32C.

    Each record's offset delta is ``record.offset - base_offset`` (a producer uses
    ``base_offset=0`` and offsets 0, 1, 2, ...; gaps, as after compaction, are allowed).
    BaseTimestamp defaults to the first record's timestamp and MaxTimestamp to the
    largest; both are -1 for an empty batch. For a LogAppendTime batch pass
    ``max_timestamp`` (the broker's append time), which readers give every record.

    :param records: the records, in increasing offset order.
    :param codec: compression for the records section.
    :param last_offset_delta: defaults to the last record's offset delta (-1 if empty).
    :param compression_level: codec-specific level; ``None`` for the default.
    :raises LocalProtocolError: a value the format cannot hold (offsets out of order,
        ints out of range, keys that are not bytes, an unknown codec).
    """
    _check_codec(codec)
    count = len(records)
    try:
        if count:
            first_ts = records[0].timestamp
            base_ts = first_ts if base_timestamp is None else base_timestamp
            max_ts = max(r.timestamp for r in records) if max_timestamp is None else max_timestamp
        else:
            base_ts = -1 if base_timestamp is None else base_timestamp
            max_ts = -1 if max_timestamp is None else max_timestamp
        payload, previous = _encode_records(records, base_offset, base_ts)
    except TypeError as exc:
        # Offsets or timestamps that are not ints (e.g. a float timestamp).
        raise LocalProtocolError(f"record field of the wrong type: {exc}") from None
    lod = previous if last_offset_delta is None else last_offset_delta
    if codec != Codec.NONE and count:
        payload = compress(codec, payload, level=compression_level)
    attributes = (
        int(codec)
        | (_TIMESTAMP_TYPE_BIT if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
        | (_TRANSACTIONAL_BIT if transactional else 0)
        | (_CONTROL_BIT if control else 0)
    )
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    return _finish_batch(
        out,
        base_offset,
        partition_leader_epoch,
        attributes,
        lod,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )


def _finish_batch(
    out: bytearray,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
) -> bytes:
    """Fill in the header reserved at the start of ``out`` (records section after it),
    then its CRC-32C; the whole batch."""
    try:
        _AFTER_CRC.pack_into(
            out,
            _CRC_START,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        _BEFORE_CRC.pack_into(
            out, 0, base_offset, len(out) - _LOG_OVERHEAD, partition_leader_epoch, _MAGIC
        )
    except struct.error as exc:
        raise LocalProtocolError(f"record batch header field out of range: {exc}") from None
    with memoryview(out) as view:
        _CRC.pack_into(out, _CRC_START - 4, _crc32c(view[_CRC_START:]))
    return bytes(out)


class BatchBuilder:
    """Encodes a producer's RecordBatch v2 one record at a time, as records arrive.

    Each :meth:`append` writes the record's bytes at once into one growing buffer (record
    ``i`` gets offset delta ``i``; the first record's timestamp is the batch's
    BaseTimestamp), so sending the batch later costs one header and one CRC-32C, not a
    pass over the records. :meth:`build` gives exactly the bytes :func:`encode_batch`
    gives for the same records (offsets 0, 1, 2, ...) and arguments.

    The common record (no headers, ``bytes`` or ``None`` key and value under 8 KiB, a
    timestamp at most 8 s after the first) is written by an inline fast path; anything
    else goes through the same field encoders as :func:`encode_batch`, with the same
    :class:`~sharecon.errors.LocalProtocolError` for values the format cannot hold. A
    record that raises is not added.
    """

    __slots__ = ("_base_ts", "_buf", "_count", "_max_ts")

    def __init__(self) -> None:
        # The header's 61 bytes are reserved up front and filled in by build().
        self._buf = bytearray(BATCH_HEADER_SIZE)
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1

    def __len__(self) -> int:
        """The number of records appended."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes of the uncompressed batch so far, header included."""
        return len(self._buf)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = NO_HEADERS,
    ) -> None:
        """Encode one record (the next offset delta) at the end of the batch.

        :raises LocalProtocolError: a key, value or header the format cannot hold, or a
            timestamp that does not fit an int64 (nothing is added then).
        :raises TypeError: in the compiled build, an argument of another type than its
            annotation (pure Python raises :class:`LocalProtocolError` for those).
        """
        count = self._count
        if count:
            delta = timestamp - self._base_ts
        else:
            if type(timestamp) is not int or not _I64_MIN <= timestamp <= _I64_MAX:
                raise LocalProtocolError(f"record timestamp {timestamp!r} does not fit an int64")
            self._base_ts = self._max_ts = timestamp
            delta = 0
        try:
            t = delta << 1  # zig-zag of a delta >= 0
        except TypeError:
            raise LocalProtocolError(f"record timestamp {timestamp!r} is not an int") from None
        o = count << 1
        if (
            headers
            or not 0 <= t < 0x4000
            or o >= 0x4000
            or (key is not None and (type(key) is not bytes or len(key) >= 0x2000))
            or (value is not None and (type(value) is not bytes or len(value) >= 0x2000))
        ):
            self._append_general(timestamp, delta, key, value, headers)
            return
        # Body size: attributes, timestamp delta, offset delta, key, value, header count.
        n = (4 if t < 0x80 else 5) if o < 0x80 else (5 if t < 0x80 else 6)
        if key is None:
            n += 1
        else:
            kl = len(key)
            n += kl + (1 if kl < 0x40 else 2)
        if value is None:
            n += 1
        else:
            vl = len(value)
            n += vl + (1 if vl < 0x40 else 2)
        buf = self._buf
        put = buf.append
        z = n << 1
        if z < 0x80:
            put(z)
        elif z < 0x4000:
            put((z & 0x7F) | 0x80)
            put(z >> 7)
        else:
            buf += _zz(n)
        put(0)  # attributes
        if t < 0x80:
            put(t)
        else:
            put((t & 0x7F) | 0x80)
            put(t >> 7)
        if o < 0x80:
            put(o)
        else:
            put((o & 0x7F) | 0x80)
            put(o >> 7)
        if key is None:
            put(1)
        else:
            z = kl << 1
            if z < 0x80:
                put(z)
            else:
                put((z & 0x7F) | 0x80)
                put(z >> 7)
            buf += key
        if value is None:
            put(1)
        else:
            z = vl << 1
            if z < 0x80:
                put(z)
            else:
                put((z & 0x7F) | 0x80)
                put(z >> 7)
            buf += value
        put(0)  # no headers
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count = count + 1

    def _append_general(
        self,
        timestamp: int,
        delta: int,
        key: object,
        value: object,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> None:
        count = self._count
        if count >= _I32_MAX:
            raise LocalProtocolError(f"a batch holds at most {_I32_MAX} records")
        if type(timestamp) is not int or not _I64_MIN <= timestamp <= _I64_MAX:
            raise LocalProtocolError(f"record timestamp {timestamp!r} does not fit an int64")
        if not _I64_MIN <= delta <= _I64_MAX:
            raise LocalProtocolError(f"timestamp delta {delta} does not fit a varlong")
        body = (
            b"\x00"
            + _zz(delta)
            + _zz(count)
            + _length_prefixed(key, "record key")
            + _length_prefixed(value, "record value")
            + (_encode_headers(headers) if headers else b"\x00")
        )
        if len(body) > _I32_MAX:
            raise LocalProtocolError(f"record at offset {count} is larger than 2 GiB")
        buf = self._buf
        buf += _zz(len(body))
        buf += body
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count = count + 1

    def records(self) -> list[Record]:
        """Decode the records appended so far (offsets 0, 1, ...): for re-batching, rare."""
        data = bytes(self._buf)
        return _decode_records(
            data, BATCH_HEADER_SIZE, len(data), self._count, 0, self._base_ts, Record
        )

    def build(
        self,
        *,
        codec: Codec | int = Codec.NONE,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        compression_level: int | None = None,
    ) -> bytes:
        """The whole batch: header, CRC-32C and the (compressed) records.

        May be called again (e.g. with a new producer id) and gives fresh bytes each time.

        :raises LocalProtocolError: an unknown codec or a header field out of range.
        """
        _check_codec(codec)
        count = self._count
        base_ts, max_ts = (self._base_ts, self._max_ts) if count else (-1, -1)
        out = self._buf
        if codec != Codec.NONE and count:
            with memoryview(self._buf) as view:
                payload = compress(codec, view[BATCH_HEADER_SIZE:], level=compression_level)
            out = bytearray(BATCH_HEADER_SIZE)
            out += payload
        attributes = int(codec) | (_TRANSACTIONAL_BIT if transactional else 0)
        return _finish_batch(
            out,
            0,
            -1,
            attributes,
            count - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )


def encode_control_batch(
    control_type: ControlType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    coordinator_epoch: int = 0,
    timestamp: int = 0,
    partition_leader_epoch: int = -1,
    version: int = 0,
) -> bytes:
    """Encode a control batch holding one marker record, as a transaction coordinator would.

    ABORT and COMMIT markers carry an EndTxnMarker value (version, coordinator epoch);
    other types get an empty value. The batch is transactional and control.

    :raises LocalProtocolError: for out-of-range values.
    """
    try:
        key = _CONTROL_KEY.pack(version, int(control_type))
        value = (
            _END_TXN_VALUE.pack(0, coordinator_epoch)
            if control_type in (ControlType.ABORT, ControlType.COMMIT)
            else b""
        )
    except struct.error as exc:
        raise LocalProtocolError(f"control record field out of range: {exc}") from None
    return encode_batch(
        [Record(base_offset, timestamp, key, value)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
