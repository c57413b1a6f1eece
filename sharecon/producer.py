"""Producer: write records to Kafka topics and learn the offset each one got.

::

    async with Producer("localhost:9092", compression="zstd") as producer:
        for value in values:
            await producer.send("orders", value)  # queued; returns a RecordFuture
        meta = await producer.send_and_wait("orders", b"...", key=b"customer-7")
        print(meta.partition, meta.offset)
        metas = await producer.send_batch(ProducerRecord("orders", v) for v in values)

Design (rules of this module):

1. **Accumulate, then send.** ``send`` appends the record to its partition's open batch and
   returns a :class:`RecordFuture` that waits for that batch's outcome (one
   :class:`anyio.Event` per batch, so it runs under asyncio and trio alike);
   ``send_and_wait`` and ``send_batch`` wait for it themselves. What is queued is bounded
   by ``max_buffer_bytes``: past it, queueing waits for space. A batch closes when it
   reaches ``max_batch_bytes``, when it has waited ``linger`` seconds, or on
   :meth:`Producer.flush`. A batch that fails while some of its records' futures are not
   awaited is logged as a WARNING, once.
2. **One dispatcher, one request per leader per round.** A single dispatcher task scans the
   partitions, collects every ready batch whose partition has nothing in flight, groups
   them by leader broker and starts one Produce request per broker (split at
   ``max_request_size``). Requests to one broker share its connection, pipelined.
3. **At most one batch in flight per partition.** That is the simplest ordering that is
   always correct: with idempotence the batch's sequence number is simply the next one
   the broker expects, a retry resends the very same bytes (same producer id, epoch and
   sequence, so the broker drops a copy it already wrote and answers with the first
   offset), and a rejected batch never leaves a gap behind later ones. Throughput does
   not suffer much because records keep accumulating (into bigger batches) while a batch
   is in flight.
4. **Retries.** Retriable broker errors, lost connections and timeouts put the batch back
   at the head of its partition's queue with jittered exponential backoff, and ask for a
   metadata refresh (leader hints in the Produce response are applied at once). A batch
   that could not be delivered within ``delivery_timeout`` fails with
   :class:`~sharecon.errors.KafkaTimeoutError` naming the partition and the last error.
5. **Too large.** A batch of several records that the broker finds too large is split in
   two and retried; a single record that is too large fails with
   :class:`~sharecon.errors.MessageTooLargeError` (or ``RecordListTooLargeError``) naming
   topic, partition and size. Nothing is dropped silently.
6. **Producer id resets.** If the broker no longer knows our producer id, or a batch whose
   outcome is unknown had to be given up (its sequence number may or may not be used), the
   producer stops sending, waits for in-flight requests, gets a new producer id and
   restarts every partition's sequence at 0.
7. The producer owns its task group; leaving ``async with`` flushes (normal exit) or fails
   the unsent records (exit by exception), then closes connections, shielded and bounded.

Limits worth knowing: without idempotence a retried batch may be written twice (the
broker cannot tell a retry from new records). With idempotence, a batch that is still
waiting for a retry when the producer id has to be replaced (rule 6) is resent under the
new id; if its earlier attempt had in fact been written, that one batch is duplicated.
The Java client has the same window.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, overload

import anyio
import anyio.lowlevel
from typing_extensions import TypeVar

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF, Backoff
from sharecon._lifecycle import ClientRuntime
from sharecon._net.cluster import Cluster, parse_bootstrap
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon._stats import ProducerStats
from sharecon.partitioner import partition_for_key
from sharecon.protocol import InitProducerIdRequest, ProduceRequest
from sharecon.protocol.compression import Codec
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.produce import PartitionProduceData, TopicProduceData
from sharecon.protocol.names import validate_topic_name
from sharecon.protocol.records import BatchBuilder
from sharecon.protocol.versions import PRODUCER_APIS
from sharecon.types import ZERO_UUID, Header

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
    from types import TracebackType

    from anyio.abc import TaskGroup
    from typing_extensions import Self

    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon.metrics import ProducerMetrics
    from sharecon.protocol import ProduceResponse
    from sharecon.protocol.messages.produce import PartitionProduceResponse

__all__ = [
    "KT",
    "VT",
    "HeadersLike",
    "Producer",
    "ProducerRecord",
    "RecordFuture",
    "RecordMetadata",
]

logger = logging.getLogger(__name__)

#: What ``headers=`` accepts: a mapping, or ``(key, value)`` pairs / :class:`Header` objects.
HeadersLike: TypeAlias = (
    "Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None] | Header]"
)
_Bytes: TypeAlias = "bytes | bytearray | memoryview | str | None"

#: The keys ``send`` takes: what the ``key_serializer`` accepts (default: bytes-like or
#: ``str``, sent as they are; ``str`` as UTF-8).
KT = TypeVar("KT", default=bytes | bytearray | memoryview | str)
#: The values ``send`` takes: what the ``value_serializer`` accepts (default as ``KT``).
VT = TypeVar("VT", default=bytes | bytearray | memoryview | str)
# A ProducerRecord is immutable, so a ProducerRecord[str, bytes] is also a
# ProducerRecord[str, bytes | str]: a list of them goes to send_batch as it is.
_KT_co = TypeVar("_KT_co", covariant=True, default=bytes | bytearray | memoryview | str)
_VT_co = TypeVar("_VT_co", covariant=True, default=bytes | bytearray | memoryview | str)

_CODECS: Mapping[str, Codec] = {
    "none": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}

# The batch is too big for the broker: split it, or fail a lone record.
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
# The broker lost (or never had) our idempotent producer state: get a new producer id.
_RESET_PRODUCER = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
# A DUPLICATE_SEQUENCE_NUMBER answer means an earlier try of this batch was written.
_WRITTEN = frozenset({ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER})
# Metadata says this while a topic is being created or its leader elected: keep looking.
_TOPIC_NOT_READY = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})
# Per-record overhead of the v2 record format beyond key, value and headers (varints,
# attributes, deltas), an upper bound; and the fixed batch header.
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61
_TRANSACTION_TIMEOUT_MS = 60_000  # sent with InitProducerId; ignored without a transactional id
_MAX_TIMESTAMP = 2**63 - 1  # the record format's int64
# send() passes through the event loop at least once per this many calls (see send).
_YIELD_EVERY = 64


# -- public value types --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record was written, once the broker acknowledged it.

    :ivar topic: the topic.
    :ivar partition: the partition.
    :ivar offset: the record's offset in the partition (-1 in the rare case the broker
        acknowledged a duplicate without saying where the original went).
    :ivar timestamp: milliseconds since the epoch: the broker's append time when the topic
        uses ``LogAppendTime``, else the record's create time.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


_new = object.__new__
_set_topic = RecordMetadata.__dict__["topic"].__set__
_set_partition = RecordMetadata.__dict__["partition"].__set__
_set_offset = RecordMetadata.__dict__["offset"].__set__
_set_timestamp = RecordMetadata.__dict__["timestamp"].__set__


def _new_metadata(topic: str, partition: int, offset: int, timestamp: int) -> RecordMetadata:
    """``RecordMetadata(topic, partition, offset, timestamp)`` made through its slots: a
    frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field, which
    costs about twice as much, once per record of every ``send_batch``."""
    meta: RecordMetadata = _new(RecordMetadata)
    _set_topic(meta, topic)
    _set_partition(meta, partition)
    _set_offset(meta, offset)
    _set_timestamp(meta, timestamp)
    return meta


class RecordFuture:
    """The outcome of one record queued by :meth:`Producer.send`: await it for the
    record's :class:`RecordMetadata`.

    ``await future`` waits until the broker acknowledged the record and returns where it was
    written, or raises the typed error that made its delivery fail
    (:class:`~sharecon.errors.MessageTooLargeError`,
    :class:`~sharecon.errors.KafkaTimeoutError` after ``delivery_timeout``, ...). It can
    be awaited any number of times, by several tasks, under asyncio and trio alike; each
    gets the same result. Cancelling a wait does not take the record back.

    A record whose delivery fails while no one has awaited its future yet is not lost
    silently: the producer logs a WARNING (logger ``sharecon.producer``) once for its
    batch. Awaiting the future later still raises the error.
    """

    __slots__ = ("_batch", "_claimed", "_index")

    _batch: _Batch
    _index: int
    _claimed: bool

    def __init__(self) -> None:
        raise TypeError("RecordFuture objects are made by Producer.send()")

    @classmethod
    def _for(cls, batch: _Batch, index: int) -> RecordFuture:
        future = object.__new__(cls)
        future._batch = batch
        future._index = index
        future._claimed = False
        batch.unclaimed += 1
        return future

    @property
    def topic(self) -> str:
        """The record's topic."""
        return self._batch.topic

    @property
    def partition(self) -> int:
        """The partition the record was queued for (known before it is written)."""
        return self._batch.partition

    def done(self) -> bool:
        """Whether the record's delivery is over (written, or failed for good)."""
        return self._batch.done.is_set()

    def result(self) -> RecordMetadata:
        """Where the record was written, without waiting.

        :raises RuntimeError: the delivery is not done yet (see :meth:`done`).
        :raises KafkaError: the delivery failed (the same error ``await`` raises).
        """
        batch = self._batch
        if not batch.done.is_set():
            raise RuntimeError(
                f"the record for {batch.topic}-{batch.partition} is not delivered yet: "
                "await the future (or producer.flush()) first"
            )
        self._claim()
        outcome = batch.outcome(self._index)
        if isinstance(outcome, errors.KafkaError):
            raise outcome
        return outcome

    def _claim(self) -> None:
        if not self._claimed:
            self._claimed = True
            self._batch.unclaimed -= 1

    def add_done_callback(self, callback: Callable[[RecordFuture], object]) -> None:
        """Call ``callback(future)`` once the delivery is over (at once if it already is).

        The callback runs in the producer's own task, so it must be quick and must not
        block; read the outcome with :meth:`result`. An exception it raises is logged
        (logger ``sharecon.producer``) and otherwise ignored. A future with a callback
        counts as awaited: its failure is the callback's to report.
        """
        self._claim()
        batch = self._batch
        if batch.done.is_set():
            _run_callback(callback, self)
        elif batch.callbacks is None:
            batch.callbacks = [(self, callback)]
        else:
            batch.callbacks.append((self, callback))

    async def _wait(self) -> RecordMetadata:
        self._claim()
        await self._batch.done.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._wait().__await__()

    def __repr__(self) -> str:
        batch = self._batch
        if not batch.done.is_set():
            state = "pending"
        else:
            outcome = batch.outcome(self._index)
            state = (
                f"failed: {type(outcome).__name__}"
                if isinstance(outcome, errors.KafkaError)
                else f"offset {outcome.offset}"
            )
        return f"<RecordFuture {batch.topic}-{batch.partition} {state}>"


def _run_callback(callback: Callable[[RecordFuture], object], future: RecordFuture) -> None:
    try:
        callback(future)
    except Exception:
        # A user's callback must not take the producer's dispatch loop down with it.
        logger.exception("a RecordFuture done callback raised (%r)", future)


@dataclass(frozen=True, slots=True)
class ProducerRecord(Generic[_KT_co, _VT_co]):
    """One record for :meth:`Producer.send_batch`.

    :ivar topic: the topic to write to.
    :ivar value: the value (``str`` is encoded as UTF-8; ``None`` is a tombstone), or what
        the producer's ``value_serializer`` takes.
    :ivar key: the key (or what the ``key_serializer`` takes); it picks the partition
        (murmur2 of the key bytes, as the Java client) unless ``partition`` is given.
    :ivar headers: a mapping or ``(key, value)`` pairs.
    :ivar partition: an explicit partition.
    :ivar timestamp: create time in milliseconds since the epoch (default: now).
    """

    topic: str
    value: _VT_co | None
    key: _KT_co | None = None
    headers: HeadersLike | None = None
    partition: int | None = None
    timestamp: int | None = None


# -- internal state ------------------------------------------------------------------------


class _Batch:
    """Records bound for one partition, sent (and retried) as one RecordBatch."""

    __slots__ = (
        "ambiguous",
        "attempts",
        "base_offset",
        "children",
        "parent",
        "base_seq",
        "builder",
        "callbacks",
        "created",
        "deadline",
        "done",
        "encoded",
        "error",
        "last_error",
        "log_append_time",
        "partition",
        "sealed",
        "size",
        "timestamps",
        "topic",
        "unclaimed",
    )

    def __init__(self, topic: str, partition: int, created: float, deadline: float) -> None:
        self.topic = topic
        self.partition = partition
        self.created = created
        self.deadline = deadline
        # The records, encoded as they are appended (None once the batch is done); and
        # each record's timestamp, for its RecordMetadata (its count is the record count).
        self.builder: BatchBuilder | None = BatchBuilder()
        self.timestamps: list[int] = []
        self.size = _BATCH_OVERHEAD
        self.sealed = False
        self.encoded: bytes | None = None
        self.base_seq = -1
        self.attempts = 0
        # True after a send whose outcome is unknown (lost connection, timeout): the broker
        # may have written it, so its sequence number must not be handed to other records.
        self.ambiguous = False
        self.last_error: errors.KafkaError | None = None
        self.done = anyio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: errors.KafkaError | None = None
        # After a split, the two halves (the callers still wait on this batch).
        self.children: tuple[_Batch, _Batch] | None = None
        self.parent: _Batch | None = None
        # Records queued by send() whose RecordFuture nobody has awaited yet: if the batch
        # fails while this is not 0, no caller is sure to hear of it, so it is logged.
        self.unclaimed = 0
        # RecordFuture.add_done_callback(): run once, when this batch is done.
        self.callbacks: list[tuple[RecordFuture, Callable[[RecordFuture], object]]] | None = None

    def __repr__(self) -> str:
        return f"<batch {self.topic}-{self.partition} {len(self.timestamps)} records>"

    def outcome(self, index: int) -> RecordMetadata | errors.KafkaError:
        """The result for the record at ``index`` (call after :attr:`done` is set)."""
        if self.children is not None:
            first, second = self.children
            if index < len(first.timestamps):
                return first.outcome(index)
            return second.outcome(index - len(first.timestamps))
        if self.error is not None:
            return self.error
        ts = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def outcomes(self, start: int, stop: int) -> list[RecordMetadata | errors.KafkaError]:
        """:meth:`outcome` of the records ``start`` to ``stop - 1``, in one pass (for
        ``send_batch``, which asks for every record of a batch)."""
        if self.children is not None:
            first, second = self.children
            cut = len(first.timestamps)
            out = first.outcomes(start, min(stop, cut)) if start < cut else []
            if stop > cut:
                out += second.outcomes(max(start, cut) - cut, stop - cut)
            return out
        if self.error is not None:
            return [self.error] * (stop - start)
        make, topic, partition = _new_metadata, self.topic, self.partition
        base = self.base_offset
        if base < 0:
            offsets: Iterable[int] = itertools.repeat(-1, stop - start)
        else:
            offsets = range(base + start, base + stop)
        if self.log_append_time >= 0:
            stamps: Iterable[int] = itertools.repeat(self.log_append_time, stop - start)
        else:
            stamps = self.timestamps[start:stop]
        return [make(topic, partition, o, t) for o, t in zip(offsets, stamps, strict=True)]


class _Partition:
    """Queue and sequence state of one partition."""

    __slots__ = ("in_flight", "next_seq", "partition", "queue", "retry_at", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.queue: deque[_Batch] = deque()
        self.in_flight: _Batch | None = None
        self.next_seq = 0
        self.retry_at = 0.0


# -- input normalisation -------------------------------------------------------------------


def _as_bytes(data: object, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise errors.ConfigError(f"{what} must be bytes, str or None, not {type(data).__name__}")


def _headers(headers: object) -> tuple[tuple[str, bytes | None], ...]:
    if not headers:
        return ()
    items: Iterable[object] = (
        headers.items() if isinstance(headers, Mapping) else headers  # type: ignore[assignment]
    )
    out: list[tuple[str, bytes | None]] = []
    try:
        for item in items:
            if isinstance(item, Header):
                hkey, hvalue = item.key, item.value
            else:
                hkey, hvalue = item  # type: ignore[misc]
            if not isinstance(hkey, str):
                raise errors.ConfigError(f"header key must be str, not {type(hkey).__name__}")
            out.append((hkey, _as_bytes(hvalue, f"header {hkey!r} value")))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, errors.ConfigError):
            raise
        raise errors.ConfigError(
            f"headers must be a mapping or (key, value) pairs, not {headers!r}"
        ) from None
    return tuple(out)


def _varint_size(n: int) -> int:
    # Bytes of the zigzag varint of a length n >= 0 (as the v2 record format writes it).
    return 1 if n < 64 else 2 if n < 8192 else 3 if n < 1048576 else 4 if n < 134217728 else 5


def _record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """The record's encoded size: exact for the headers (each is key length, key, value
    length, value, the lengths as varints: 3 bytes for a 1-byte key and an empty value),
    an upper bound for the rest.

    :raises ConfigError: a header key that is not encodable as UTF-8 (a lone surrogate).
    """
    size = _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers:
        if hkey.isascii():
            n = len(hkey)
        else:
            try:
                n = len(hkey.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise errors.ConfigError(
                    f"header key {hkey!r} is not valid text: {exc.reason} at index {exc.start}"
                ) from None
        size += n + _varint_size(n)
        if hvalue is None:
            size += 1  # length -1
        else:
            m = len(hvalue)
            size += m + _varint_size(m)
    # The header count is a varint too (1 byte up to 63 headers, counted in the overhead).
    return size + _varint_size(len(headers)) - 1


def _codec(compression: str | Codec | None) -> Codec:
    if compression is None:
        return Codec.NONE
    if isinstance(compression, Codec):
        return compression
    if isinstance(compression, str) and compression.lower() in _CODECS:
        return _CODECS[compression.lower()]
    raise errors.ConfigError(
        f"compression={compression!r}: expected one of {', '.join(_CODECS)} (or None)"
    )


# -- the producer --------------------------------------------------------------------------


class Producer(Generic[KT, VT]):
    """An async Kafka producer: batching, compression, idempotence, Java-compatible keys.

    Use it as ``async with Producer(bootstrap) as producer`` (or ``await producer.start()``
    ... ``await producer.aclose()``). Every option is checked when the producer is built; a
    wrong one raises :class:`~sharecon.errors.ConfigError` naming it. Used before it is
    started, or after it is closed, it raises :class:`~sharecon.errors.ClientNotStartedError`
    or :class:`~sharecon.errors.ClientClosedError`.

    :param bootstrap: ``"host:port,..."`` or a sequence of ``"host:port"``.
    :param acks: ``"all"`` (or -1; the default) waits for every in-sync replica; ``1``
        for the leader only. ``0`` is not offered: the offset could not be reported.
    :param idempotent: use a producer id and sequence numbers so that retries cannot
        write a record twice (needs ``acks="all"``).
    :param compression: ``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``.
    :param compression_level: codec-specific level; ``None`` for the codec's default.
    :param linger: seconds a batch waits for more records before it is sent.
    :param max_batch_bytes: a batch is closed once it holds about this many bytes.
    :param max_request_size: largest Produce request (and record) this client sends.
    :param max_buffer_bytes: bytes of records waiting to be sent before ``send`` waits.
    :param delivery_timeout: seconds from ``send`` until a record that could not be
        delivered (retries included) fails with :class:`~sharecon.errors.KafkaTimeoutError`.
    :param request_timeout: seconds one Produce request may take (also the broker-side
        replication timeout).
    :param metadata_timeout: seconds ``send`` keeps looking for an unknown topic before
        it raises :class:`~sharecon.errors.UnknownTopicOrPartitionError`.
    :param retry_backoff: delays between retries.
    :param client_id: sent in request headers.
    :param connect_timeout: seconds to open and set up one connection.
    :param ssl_context: enables TLS.
    :param sasl: SASL credentials (:class:`~sharecon.config.SaslConfig`), or a Kerberos
        login (:class:`~sharecon.config.GssapiConfig`).
    :param config: a complete connection config instead of the separate options.
    :param close_timeout: bound on closing connections when leaving ``async with``.
    :param key_serializer: turns each key given to :meth:`send` / :meth:`send_batch` into
        bytes (see :mod:`sharecon.serde`); never called for ``None`` (no key). Typed
        sends follow: ``Producer[KT, VT]`` takes ``KT`` keys and ``VT`` values.
    :param value_serializer: the same for values (never called for ``None``, a
        tombstone). A serializer that raises, or returns something other than bytes or
        ``None``, fails that send with :class:`~sharecon.errors.SerializationError`.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: Literal["all", -1, 1] | str | int = "all",
        idempotent: bool = True,
        compression: str | Codec | None = None,
        compression_level: int | None = None,
        linger: float = 0.005,
        max_batch_bytes: int = 512 * 1024,
        max_request_size: int = 1024 * 1024,
        max_buffer_bytes: int = 32 * 1024 * 1024,
        delivery_timeout: float = 120.0,
        request_timeout: float = 30.0,
        metadata_timeout: float = 30.0,
        retry_backoff: Backoff = RETRY_BACKOFF,
        client_id: str = "sharecon-producer",
        connect_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | GssapiConfig | None = None,
        config: ConnectionConfig | None = None,
        close_timeout: float = 5.0,
        key_serializer: Callable[[KT], bytes | None] | None = None,
        value_serializer: Callable[[VT], bytes | None] | None = None,
    ) -> None:
        for name, fn in (
            ("key_serializer", key_serializer),
            ("value_serializer", value_serializer),
        ):
            if fn is not None and not callable(fn):
                raise errors.ConfigError(f"{name} must be a callable, not {type(fn).__name__}")
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._serializing = key_serializer is not None or value_serializer is not None
        if acks in ("all", -1, "-1"):
            self._acks = -1
        elif acks in (1, "1"):
            self._acks = 1
        elif acks in (0, "0"):
            raise errors.ConfigError(
                "acks=0 is not supported: the broker sends no response, so no offset could "
                "be reported; use acks=1 or acks='all'"
            )
        else:
            raise errors.ConfigError(f"acks={acks!r}: expected 'all' (or -1) or 1")
        if idempotent and self._acks != -1:
            raise errors.ConfigError("idempotent=True needs acks='all' (or pass idempotent=False)")
        self._idempotent = bool(idempotent)
        self._codec = _codec(compression)
        self._compression_level = compression_level
        for name, seconds in (
            ("delivery_timeout", delivery_timeout),
            ("request_timeout", request_timeout),
            ("metadata_timeout", metadata_timeout),
            ("close_timeout", close_timeout),
        ):
            if not seconds > 0:
                raise errors.ConfigError(f"{name}={seconds!r}: must be positive seconds")
        if not 0 <= linger < math.inf:
            raise errors.ConfigError(f"linger={linger!r}: must be 0 or more seconds")
        for name, size in (
            ("max_batch_bytes", max_batch_bytes),
            ("max_request_size", max_request_size),
            ("max_buffer_bytes", max_buffer_bytes),
        ):
            if not isinstance(size, int) or size < 1024:
                raise errors.ConfigError(f"{name}={size!r}: must be an int of at least 1024")
        if max_batch_bytes > max_request_size:
            raise errors.ConfigError(
                f"max_batch_bytes={max_batch_bytes} is larger than max_request_size="
                f"{max_request_size}"
            )
        self._linger = float(linger)
        self._max_batch = max_batch_bytes
        self._max_request = max_request_size
        self._max_buffer = max_buffer_bytes
        self._delivery_timeout = float(delivery_timeout)
        self._request_timeout = float(request_timeout)
        self._metadata_timeout = float(metadata_timeout)
        self._backoff = retry_backoff
        self._close_timeout = close_timeout
        parse_bootstrap(bootstrap)  # a malformed address is a ConfigError now, not at connect
        self._bootstrap = bootstrap
        self._config = config or ConnectionConfig(
            client_id=client_id,
            connect_timeout=connect_timeout,
            # The client-side wait covers the broker's own replication timeout plus transit.
            request_timeout=request_timeout + 5.0,
            ssl_context=ssl_context,
            sasl=sasl,
        )

        self._runtime = ClientRuntime("Producer", on_close=self._on_close)
        #: The counters behind metrics() (on time.monotonic: see sharecon._stats).
        self._stats = ProducerStats(time.monotonic(), client_id=self._config.client_id)
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._sticky: dict[str, tuple[int, _Batch]] = {}
        self._topic_locks: dict[str, anyio.Lock] = {}
        self._wake = anyio.Event()
        self._space = anyio.Event()
        self._idle = anyio.Event()
        self._metadata_wanted = anyio.Event()
        self._buffered = 0
        self._in_flight = 0
        self._flushing = 0
        self._space_wanted = 0  # senders waiting in _wait_for_space
        self._unyielded = 0  # send() calls since the last one that checkpointed
        self._producer_id = -1
        self._producer_epoch = -1
        self._reset_wanted = False
        self._resetting = False
        self._closing = False
        self._fatal: BaseException | None = None

    def __repr__(self) -> str:
        state = self._runtime.state
        return f"<Producer {state} pid={self._producer_id} buffered={self._buffered}B>"

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def start(self) -> None:
        """Connect to the cluster (and get a producer id when idempotent): what entering
        ``async with`` does. Pair it with :meth:`aclose`.

        :raises BrokerConnectError: no bootstrap broker could be reached (the producer is
            then closed: make a new one to try again).
        :raises ClientStateError: it was started already; :class:`ClientClosedError`
            (a subclass) once it was closed.
        """
        required = set(PRODUCER_APIS)
        if self._idempotent:
            required.add(InitProducerIdRequest.api_key)
        await self._runtime.start(
            lambda tg: Cluster(
                self._bootstrap,
                self._config,
                tg,
                required_apis=required,
                close_timeout=self._close_timeout,
            ),
            self._on_connected,
        )

    async def _on_connected(self, cluster: Cluster, tg: TaskGroup) -> None:
        if self._idempotent:
            self._producer_id, self._producer_epoch = await self._init_producer_id()
        tg.start_soon(self._dispatch_loop)
        tg.start_soon(self._metadata_loop)

    def _on_close(self) -> None:
        self._closing = True
        self._fail_all(errors.KafkaError("the producer was closed before the record was sent"))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        runtime = self._runtime
        if not runtime.begin_close() or not runtime.held:
            return
        try:
            if exc_type is None and self._fatal is None:
                await self._flush(None)
        finally:
            self._closing = True
            await runtime.shutdown(timeout=self._close_timeout)

    async def aclose(self) -> None:
        """Flush, then close (what leaving ``async with`` normally does). Closing again,
        or closing a producer never started, does nothing."""
        await self.__aexit__(None, None, None)

    @property
    def _open_cluster(self) -> Cluster:
        """The underlying cluster view.

        :raises ClientNotStartedError: before :meth:`start`.
        :raises ClientClosedError: after it was closed.
        """
        return self._runtime.cluster

    def metrics(self) -> ProducerMetrics:
        """A snapshot of this producer's metrics, named and meant as the Java producer's
        (see :mod:`sharecon.metrics`); readable at any time (zeros before the first send),
        from any thread (an exporter's)."""
        return self._stats.snapshot(
            time.monotonic(),
            buffer_total_bytes=self._max_buffer,
            buffer_available_bytes=max(0, self._max_buffer - self._buffered),
            in_flight=self._in_flight,
        )

    @property
    def producer_id(self) -> int:
        """The idempotent producer id (-1 without idempotence)."""
        return self._producer_id

    # -- sending -----------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: VT | None,
        *,
        key: KT | None = None,
        headers: HeadersLike | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture:
        """Queue one record and return at once a :class:`RecordFuture` for its outcome.

        ``await producer.send(...)`` returns as soon as the record is in its partition's
        batch, not when the broker has it: a loop of them fills batches as
        :meth:`send_batch` does. Await the future (``meta = await future``) for the
        record's :class:`RecordMetadata`, or use :meth:`send_and_wait`. Leaving ``async
        with`` (or :meth:`flush`) sends what is queued.

        Bounded: records queued and not yet acknowledged take at most ``max_buffer_bytes``;
        past that, ``send`` waits (back-pressure) until delivered batches free space.

        A delivery that fails is raised by awaiting the future; if no one has awaited it
        by then, the failure is also logged as a WARNING (once per batch), so it never
        vanishes silently. A ``send`` cancelled while it waits (for space, for metadata, or
        at the pass through the event loop it makes every few dozen calls) has queued
        nothing; as most calls do not suspend, one inside an already cancelled scope may
        still queue its record and return, the cancellation arriving at the next wait.
        Once it returned, the record may be written whatever happens to the future.

        :param value: bytes (``str`` is encoded as UTF-8), or ``None`` for a tombstone.
        :param key: picks the partition with Java's murmur2 unless ``partition`` is given;
            without a key, records stick to one partition per batch.
        :param headers: a mapping or ``(key, value)`` pairs.
        :param partition: write to this partition.
        :param timestamp: create time in milliseconds since the epoch (default: now).
        :raises MessageTooLargeError: the record is larger than ``max_request_size``
            (checked before queueing; the broker's own limit fails the future).
        :raises UnknownTopicOrPartitionError: the topic does not exist.
        :raises ConfigError: a wrong argument (type, partition out of range).
        :raises SerializationError: a serializer failed (nothing was queued).
        """
        # A checkpoint (a pass through the event loop, several us) when the dispatcher has
        # work (a batch was started or filled) and at least every _YIELD_EVERY sends: a
        # tight loop of sends still lets the dispatcher and every other task run, without
        # paying for a checkpoint per record. A send cancelled there has queued nothing.
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY or self._wake.is_set():
            self._unyielded = 0
            await anyio.lowlevel.checkpoint()
        placed = self._place(topic, value, key, headers, partition, timestamp, None)
        batch, index = placed if isinstance(placed, tuple) else await placed
        return RecordFuture._for(batch, index)

    async def send_and_wait(
        self,
        topic: str,
        value: VT | None,
        *,
        key: KT | None = None,
        headers: HeadersLike | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send one record and return where it was written once the broker acknowledged it:
        :meth:`send` and awaiting its future, in one call. Same parameters as :meth:`send`.

        One record per broker round trip: to write many, use :meth:`send` (and
        :meth:`flush`) or :meth:`send_batch`. Queueing waits for buffer space as
        :meth:`send` does. Cancelling the call does not take the record back: it may
        still be written.

        :raises MessageTooLargeError: the record is larger than the broker (or
            ``max_request_size``) accepts; names topic, partition and size.
        :raises UnknownTopicOrPartitionError: the topic does not exist.
        :raises KafkaTimeoutError: not delivered within ``delivery_timeout``.
        :raises ConfigError: a wrong argument (type, partition out of range).
        :raises SerializationError: a serializer failed (nothing was sent).
        """
        batch, index = await self._enqueue(topic, value, key, headers, partition, timestamp)
        await batch.done.wait()
        result = batch.outcome(index)
        if isinstance(result, errors.KafkaError):
            raise result
        return result

    @overload
    async def send_batch(
        self,
        records: Iterable[ProducerRecord[KT, VT]],
        *,
        return_exceptions: Literal[False] = False,
    ) -> list[RecordMetadata]: ...

    @overload
    async def send_batch(
        self, records: Iterable[ProducerRecord[KT, VT]], *, return_exceptions: Literal[True]
    ) -> list[RecordMetadata | errors.KafkaError]: ...

    async def send_batch(
        self, records: Iterable[ProducerRecord[KT, VT]], *, return_exceptions: bool = False
    ) -> list[RecordMetadata] | list[RecordMetadata | errors.KafkaError]:
        """Send many records; return their metadata in the same order once all are done.

        Records are queued as fast as buffer space allows (``max_buffer_bytes``; past it,
        queueing waits), so they share batches and requests. Per partition, the order of
        ``records`` is the order in the log.

        :param return_exceptions: put each failed record's exception in the result list
            instead of raising the first one.
        :raises KafkaError: (without ``return_exceptions``) the first failure, after every
            record has been either written or given up on.
        """
        # Where the records went, as runs of consecutive records in one batch:
        # (batch, first index, index after the last).
        runs: list[tuple[_Batch, int, int]] = []
        place = self._place
        # Records of one call are created together: they share the default timestamp.
        now_ms = time.time_ns() // 1_000_000
        run_batch: _Batch | None = None
        run_start = run_stop = 0
        for rec in records:
            if type(rec) is not ProducerRecord:
                raise errors.ConfigError(
                    f"send_batch takes ProducerRecord items, not {type(rec).__name__}"
                )
            placed = place(
                rec.topic, rec.value, rec.key, rec.headers, rec.partition, rec.timestamp, now_ms
            )
            batch, index = placed if isinstance(placed, tuple) else await placed
            if batch is not run_batch or index != run_stop:
                if run_batch is not None:
                    runs.append((run_batch, run_start, run_stop))
                run_batch, run_start = batch, index
            run_stop = index + 1
        if run_batch is not None:
            runs.append((run_batch, run_start, run_stop))
        waited = False
        for batch, _, _ in runs:
            if not batch.done.is_set():
                await batch.done.wait()
                waited = True
        if not waited:
            await anyio.lowlevel.checkpoint()  # a send_batch call always is a checkpoint
        out: list[RecordMetadata | errors.KafkaError] = []
        for batch, first, stop in runs:
            out += batch.outcomes(first, stop)
        if not return_exceptions:
            for result in out:
                if isinstance(result, errors.KafkaError):
                    raise result
        return out

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger``) and wait until it is done.

        ``flush`` does not raise delivery failures: each record's :class:`RecordFuture`
        (or the :meth:`send_and_wait` / :meth:`send_batch` call) raises its own, and a
        failed batch with futures no one had awaited is logged as a WARNING. After
        ``flush`` returns, every future of a record queued before the call is done.

        :param timeout: seconds; by default until each batch succeeds or times out.
        :raises KafkaTimeoutError: ``timeout`` passed first.
        :raises ClientStateError: the producer is not started, or closed.
        """
        if self._runtime.state != "running" or self._closing:
            raise self._runtime.error()
        await self._flush(timeout)

    async def _flush(self, timeout: float | None) -> None:
        pending = [b for s in self._partitions.values() for b in s.queue]
        pending += [s.in_flight for s in self._partitions.values() if s.in_flight is not None]
        if not pending:
            return
        self._flushing += 1
        self._wake.set()
        try:
            with anyio.fail_after(math.inf if timeout is None else timeout):
                for batch in pending:
                    await batch.done.wait()
        except TimeoutError:
            raise errors.KafkaTimeoutError(
                f"flush: {sum(not b.done.is_set() for b in pending)} batches still unsent "
                f"after {timeout:g} s"
            ) from None
        finally:
            self._flushing -= 1

    async def partitions_for(self, topic: str) -> int:
        """The number of partitions of ``topic`` (looked up if not known yet).

        :raises UnknownTopicOrPartitionError: the topic does not exist.
        """
        return await self._partition_count(topic)

    # -- enqueueing --------------------------------------------------------------------------

    def _check_open(self) -> Cluster:
        cluster = self._runtime.current  # per record: an attribute, not a property
        if cluster is None or self._closing:
            raise self._runtime.error()
        if self._fatal is not None:
            raise errors.KafkaError(f"the producer failed: {self._fatal}") from self._fatal
        return cluster

    async def _enqueue(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int | None = None,
    ) -> tuple[_Batch, int]:
        """Validate one record and append it to its partition's open batch (waiting for
        metadata or buffer space when needed)."""
        placed = self._place(topic, value, key, headers, partition, timestamp, now_ms)
        return placed if isinstance(placed, tuple) else await placed

    def _place(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int | None,
    ) -> tuple[_Batch, int] | Coroutine[Any, Any, tuple[_Batch, int]]:
        """Validate one record and append it to its partition's open batch, without
        suspending: the per-record path of ``send`` and ``send_batch``.

        Returns ``(batch, index)``; or, when the record must wait (a topic or partition
        the metadata does not know yet, a full buffer), a coroutine that finishes the
        job, for the caller to await. Every argument error is raised here, at once.
        """
        cluster = self._check_open()
        if type(topic) is not str or not topic:
            raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
        if self._serializing:
            key, value = self._serialize(topic, key, value)
        v = value if value is None or type(value) is bytes else _as_bytes(value, "value")
        k = key if key is None or type(key) is bytes else _as_bytes(key, "key")
        hs = _headers(headers) if headers else ()
        if timestamp is None:
            ts = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        elif type(timestamp) is int and 0 <= timestamp <= _MAX_TIMESTAMP:
            ts = timestamp
        else:
            raise errors.ConfigError(
                f"timestamp must be milliseconds since the epoch (int >= 0), not {timestamp!r}"
            )
        size = _RECORD_OVERHEAD + (len(k) if k else 0) + (len(v) if v else 0)
        if hs:
            size = _record_size(k, v, hs)

        parts = cluster.metadata.partitions.get(topic)
        if not parts:
            return self._place_later(topic, k, v, hs, partition, ts, size)
        count = len(parts)
        if partition is None:
            if k is not None:
                partition = partition_for_key(k, count)
            else:
                partition = self._sticky_partition(topic, count, size)
        elif type(partition) is not int or partition < 0:
            raise errors.ConfigError(f"partition must be an int >= 0, not {partition!r}")
        elif partition >= count:
            return self._place_later(topic, k, v, hs, partition, ts, size)
        if size + _BATCH_OVERHEAD > self._max_request:
            raise self._too_large(topic, partition, size)
        if self._buffered > 0 and self._buffered + size > self._max_buffer:
            return self._append_when_space(topic, partition, k, v, hs, ts, size)
        return self._append(topic, partition, k, v, hs, ts, size)

    async def _place_later(
        self,
        topic: str,
        k: bytes | None,
        v: bytes | None,
        hs: tuple[tuple[str, bytes | None], ...],
        partition: object,
        ts: int,
        size: int,
    ) -> tuple[_Batch, int]:
        """:meth:`_place` for a topic, or a partition, the metadata does not know yet."""
        parts = self._open_cluster.metadata.partitions.get(topic)
        if not parts:
            # Only names the cluster does not know yet are checked, keeping the per-record
            # path cheap; an illegal name would otherwise wait out metadata_timeout.
            validate_topic_name(topic)
        count = len(parts) if parts else await self._partition_count(topic)
        if partition is None:
            if k is not None:
                partition = partition_for_key(k, count)
            else:
                partition = self._sticky_partition(topic, count, size)
        elif type(partition) is not int or partition < 0:
            raise errors.ConfigError(f"partition must be an int >= 0, not {partition!r}")
        elif partition >= count:
            count = await self._partition_count(topic, refresh=True)
            if partition >= count:
                raise errors.ConfigError(
                    f"partition {partition} of topic {topic!r} does not exist "
                    f"(the topic has partitions 0..{count - 1})"
                )
        if size + _BATCH_OVERHEAD > self._max_request:
            raise self._too_large(topic, partition, size)
        return await self._append_when_space(topic, partition, k, v, hs, ts, size)

    def _too_large(self, topic: str, partition: int, size: int) -> errors.MessageTooLargeError:
        return errors.MessageTooLargeError(
            f"topic {topic!r} partition {partition}: the record is about {size} bytes, "
            f"more than max_request_size={self._max_request} (checked before sending)"
        )

    async def _append_when_space(
        self,
        topic: str,
        partition: int,
        k: bytes | None,
        v: bytes | None,
        hs: tuple[tuple[str, bytes | None], ...],
        ts: int,
        size: int,
    ) -> tuple[_Batch, int]:
        while self._buffered > 0 and self._buffered + size > self._max_buffer:
            await self._wait_for_space()
        return self._append(topic, partition, k, v, hs, ts, size)

    def _serialize(self, topic: str, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """The key and value through their serializers (``None`` stays ``None``).

        :raises SerializationError: a serializer raised or returned something else than
            bytes or ``None``.
        """
        out: list[bytes | None] = []
        fields: tuple[tuple[Literal["key", "value"], Any, Callable[[Any], object] | None], ...]
        fields = (("key", key, self._key_serializer), ("value", value, self._value_serializer))
        for field, data, serializer in fields:
            if data is None or serializer is None:
                out.append(data)
                continue
            try:
                result = serializer(data)
            except Exception as exc:
                raise errors.SerializationError(
                    f"topic {topic!r}: the {field}_serializer failed on a "
                    f"{type(data).__name__}: {type(exc).__name__}: {exc}",
                    topic=topic,
                    field=field,
                ) from exc
            if result is not None and not isinstance(result, bytes | bytearray | memoryview):
                raise errors.SerializationError(
                    f"topic {topic!r}: the {field}_serializer returned a "
                    f"{type(result).__name__}; it must return bytes or None",
                    topic=topic,
                    field=field,
                )
            out.append(result if result is None or type(result) is bytes else bytes(result))
        return out[0], out[1]

    async def _wait_for_space(self) -> None:
        if self._space.is_set():
            self._space = anyio.Event()
        self._space_wanted += 1
        self._wake.set()
        try:
            await self._space.wait()
        finally:
            self._space_wanted -= 1
        self._check_open()

    def _sticky_partition(self, topic: str, count: int, size: int) -> int:
        # Keyless records fill one partition's batch before moving on (Java's sticky
        # partitioner, KIP-480): fewer, bigger batches than round-robin.
        current = self._sticky.get(topic)
        if current is None or current[0] >= count:
            return random.randrange(count)
        part, batch = current
        if not batch.sealed and batch.size + size <= self._max_batch and batch.encoded is None:
            state = self._partitions[(topic, part)]
            if state.queue and state.queue[-1] is batch:
                return part
        if count == 1:
            return 0
        choice = random.randrange(count - 1)
        return choice + 1 if choice >= part else choice

    def _append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
        timestamp: int,
        size: int,
    ) -> tuple[_Batch, int]:
        state = self._partitions.get((topic, partition))
        if state is None:
            state = self._partitions[(topic, partition)] = _Partition(topic, partition)
        batch = state.queue[-1] if state.queue else None
        if batch is None or batch.sealed or batch.size + size > self._max_batch:
            now = anyio.current_time()
            fresh = _Batch(topic, partition, now, now + self._delivery_timeout)
            builder = fresh.builder
            assert builder is not None
            # Encoded first: a record the format cannot hold leaves no empty batch behind.
            builder.append(timestamp, key, value, headers)
            if batch is not None and not batch.sealed:
                batch.sealed = True
            batch = fresh
            state.queue.append(batch)
            self._wake.set()
        else:
            builder = batch.builder
            assert builder is not None  # an open batch is not done
            builder.append(timestamp, key, value, headers)
        stamps = batch.timestamps
        index = len(stamps)
        stamps.append(timestamp)
        batch.size += size
        self._buffered += size
        if batch.size >= self._max_batch:
            batch.sealed = True
            self._wake.set()
        if key is None:
            self._sticky[topic] = (partition, batch)
        return batch, index

    # -- topics and metadata -----------------------------------------------------------------

    async def _partition_count(self, topic: str, *, refresh: bool = False) -> int:
        cluster = self._open_cluster
        parts = cluster.metadata.partitions.get(topic)
        if parts and not refresh:
            return len(parts)
        lock = self._topic_locks.setdefault(topic, anyio.Lock())
        async with lock:
            parts = cluster.metadata.partitions.get(topic)
            if parts and not refresh:
                return len(parts)
            deadline = anyio.current_time() + self._metadata_timeout
            attempt = 0
            last: errors.KafkaError | None = None
            while True:
                try:
                    meta = await cluster.refresh_metadata([topic])
                except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                    last = exc
                else:
                    parts = meta.partitions.get(topic)
                    if parts:
                        return len(parts)
                    code = meta.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    err = errors.error_for_code(code, f"topic {topic!r}")
                    assert err is not None
                    if code not in _TOPIC_NOT_READY:
                        raise err
                    last = err
                attempt += 1
                delay = self._backoff.delay(attempt)
                if anyio.current_time() + delay >= deadline:
                    if isinstance(last, errors.UnknownTopicOrPartitionError):
                        raise errors.UnknownTopicOrPartitionError(
                            f"topic {topic!r} is not in the cluster metadata after {attempt} "
                            f"lookups over {self._metadata_timeout:g} s (this producer does "
                            "not create topics)"
                        )
                    assert last is not None
                    raise last
                await anyio.sleep(delay)

    async def _metadata_loop(self) -> None:
        attempt = 0
        while True:
            await self._metadata_wanted.wait()
            self._metadata_wanted = anyio.Event()
            topics = sorted({t for t, _ in self._partitions})
            try:
                await self._open_cluster.refresh_metadata(topics)
                attempt = 0
            except errors.KafkaError as exc:
                logger.info("metadata refresh failed: %s", exc)
                self._metadata_wanted.set()
                attempt += 1
            self._wake.set()
            # Rate limit: a burst of NOT_LEADER answers needs one refresh, not one each.
            await anyio.sleep(self._backoff.delay(attempt))

    # -- idempotence -------------------------------------------------------------------------

    async def _init_producer_id(self) -> tuple[int, int]:
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS
        )
        deadline = anyio.current_time() + self._request_timeout
        attempt = 0
        while True:
            failure: errors.KafkaError
            try:
                response = await self._open_cluster.request_any(request)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                failure = exc
            else:
                if response.error_code == ErrorCode.NONE:
                    logger.debug(
                        "producer id %d epoch %d", response.producer_id, response.producer_epoch
                    )
                    return response.producer_id, response.producer_epoch
                err = errors.error_for_code(
                    response.error_code, "InitProducerId for an idempotent producer"
                )
                assert err is not None
                if not err.retriable:
                    raise err
                failure = err
            delay = self._backoff.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay >= deadline:
                raise failure
            await anyio.sleep(delay)

    async def _reset_producer_id(self) -> None:
        try:
            while self._in_flight:
                if self._idle.is_set():
                    self._idle = anyio.Event()
                await self._idle.wait()
            while True:
                try:
                    pid, epoch = await self._init_producer_id()
                    break
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    logger.info("getting a new producer id failed (%s); retrying", exc)
            logger.info(
                "new producer id %d (was %d): sequence numbers restart at 0",
                pid,
                self._producer_id,
            )
            self._producer_id, self._producer_epoch = pid, epoch
            for state in self._partitions.values():
                state.next_seq = 0
                for batch in state.queue:
                    batch.encoded = None
                    batch.ambiguous = False
        except errors.KafkaError as exc:
            self._fatal = exc
            self._fail_all(exc)
        finally:
            self._reset_wanted = False
            self._resetting = False
            self._wake.set()

    # -- dispatching -------------------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        try:
            while True:
                self._wake = anyio.Event()
                wait = self._dispatch_round()
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await self._wake.wait()
        except BaseException as exc:
            # Callers wait on batch events; never leave them hanging.
            reason = exc if isinstance(exc, errors.KafkaError) else None
            self._fail_all(
                reason or errors.KafkaError(f"the producer stopped: {type(exc).__name__}")
            )
            raise

    def _dispatch_round(self) -> float:
        """Start requests for every ready batch; return seconds until the next due time."""
        now = anyio.current_time()
        next_due = math.inf
        if self._reset_wanted and not self._resetting:
            self._resetting = True
            self._runtime.task_group.start_soon(self._reset_producer_id)
        if self._resetting:
            return math.inf  # woken when the reset is done
        meta = self._open_cluster.metadata
        ready: dict[int, list[_Batch]] = {}
        for state in self._partitions.values():
            while state.queue and state.queue[0].deadline <= now:
                self._expire(state, state.queue.popleft())
            if not state.queue or state.in_flight is not None:
                continue
            if state.retry_at > now:
                next_due = min(next_due, state.retry_at)
                continue
            head = state.queue[0]
            if not head.sealed and not self._flushing and not self._closing:
                due = head.created + self._linger
                # A full buffer, or a sender waiting for space, does not wait for linger.
                if due > now and self._buffered < self._max_buffer and not self._space_wanted:
                    next_due = min(next_due, due)
                    continue
            parts = meta.partitions.get(state.topic, ())
            leader = parts[state.partition].leader_id if state.partition < len(parts) else -1
            if leader < 0:
                self._metadata_wanted.set()
                state.retry_at = now + self._backoff.delay(head.attempts)
                next_due = min(next_due, state.retry_at)
                continue
            head.sealed = True
            state.queue.popleft()
            state.in_flight = head
            self._in_flight += 1
            ready.setdefault(leader, []).append(head)
        for node, batches in ready.items():
            for group in self._requests(batches):
                self._runtime.task_group.start_soon(self._send, node, group)
        return max(0.0, next_due - now) if next_due < math.inf else math.inf

    def _requests(self, batches: list[_Batch]) -> list[list[_Batch]]:
        groups: list[list[_Batch]] = [[]]
        size = 0
        for batch in batches:
            self._encode(batch)
            assert batch.encoded is not None
            if groups[-1] and size + len(batch.encoded) > self._max_request:
                groups.append([])
                size = 0
            groups[-1].append(batch)
            size += len(batch.encoded)
        return groups

    def _encode(self, batch: _Batch) -> None:
        if batch.encoded is not None:
            return  # a retry sends the very same bytes
        state = self._partitions[(batch.topic, batch.partition)]
        if self._idempotent:
            batch.base_seq = state.next_seq
        assert batch.builder is not None  # dropped only once the batch is done
        batch.encoded = batch.builder.build(
            codec=self._codec,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=batch.base_seq,
            compression_level=self._compression_level,
        )

    async def _send(self, node: int, batches: list[_Batch]) -> None:
        try:
            await self._send_request(node, batches)
        finally:
            self._in_flight -= len(batches)
            if not self._in_flight:
                self._idle.set()
            self._wake.set()

    async def _send_request(self, node: int, batches: list[_Batch]) -> None:
        cluster = self._open_cluster
        meta = cluster.metadata
        by_topic: dict[str, list[_Batch]] = {}
        for batch in batches:
            batch.attempts += 1
            by_topic.setdefault(batch.topic, []).append(batch)
        request = ProduceRequest(
            transactional_id=None,
            acks=self._acks,
            timeout_ms=int(self._request_timeout * 1000),
            topic_data=tuple(
                TopicProduceData(
                    name=topic,
                    topic_id=meta.topic_ids.get(topic, ZERO_UUID),
                    partition_data=tuple(
                        PartitionProduceData(index=b.partition, records=b.encoded) for b in group
                    ),
                )
                for topic, group in by_topic.items()
            ),
        )
        stats = self._stats
        started = time.monotonic()
        stats.on_request(started, [len(b.encoded or b"") for b in batches])
        try:
            response = await cluster.request(node, request)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            # The request may or may not have been written: retry the same bytes.
            self._metadata_wanted.set()
            written_maybe = not isinstance(exc, errors.BrokerConnectError)
            for batch in batches:
                batch.ambiguous = batch.ambiguous or written_maybe
                self._retry(batch, exc)
            return
        except errors.KafkaError as exc:
            for batch in batches:
                self._finish(batch, error=exc)
            return
        now = time.monotonic()
        stats.on_response(
            now, now - started, sum(len(b.timestamps) for b in batches), response.throttle_time_ms
        )
        self._handle_response(node, batches, response)

    def _handle_response(self, node: int, batches: list[_Batch], response: ProduceResponse) -> None:
        cluster = self._open_cluster
        names = dict(cluster.metadata.topic_names)
        answers: dict[tuple[str, int], PartitionProduceResponse] = {}
        for topic in response.responses:
            name = topic.name or names.get(topic.topic_id, "")
            for part in topic.partition_responses:
                answers[(name, part.index)] = part
        endpoints = {
            e.node_id: BrokerAddress(e.host, e.port, e.node_id) for e in response.node_endpoints
        }
        for batch in batches:
            answer = answers.get((batch.topic, batch.partition))
            if answer is None:
                self._finish(
                    batch,
                    error=errors.RemoteProtocolError(
                        f"broker {node}: the Produce response does not mention "
                        f"{batch.topic}-{batch.partition}"
                    ),
                )
                continue
            self._handle_partition(node, batch, answer, endpoints)

    def _handle_partition(
        self,
        node: int,
        batch: _Batch,
        pr: PartitionProduceResponse,
        endpoints: Mapping[int, BrokerAddress],
    ) -> None:
        code = pr.error_code
        state = self._partitions[(batch.topic, batch.partition)]
        where = f"topic {batch.topic!r} partition {batch.partition}"
        if code in _WRITTEN:
            batch.ambiguous = False
            if self._idempotent:
                state.next_seq = (batch.base_seq + len(batch.timestamps)) & 0x7FFFFFFF
            batch.base_offset = pr.base_offset
            batch.log_append_time = pr.log_append_time_ms
            self._finish(batch)
            return
        detail = f"{where} (broker {node})"
        if pr.error_message:
            detail += f": {pr.error_message}"
        err = errors.error_for_code(code, detail)
        assert err is not None
        if code in _TOO_LARGE:
            batch.ambiguous = False
            if len(batch.timestamps) > 1:
                self._split(state, batch)
                return
            encoded = len(batch.encoded or b"")
            self._finish(
                batch,
                error=errors.error_class_for_code(code)(
                    f"{where}: a record of about {batch.size - _BATCH_OVERHEAD} bytes "
                    f"(a {encoded}-byte batch) is larger than the broker accepts "
                    "(topic max.message.bytes / broker message.max.bytes)"
                ),
            )
            return
        if self._idempotent and code in _RESET_PRODUCER:
            # The broker lost our producer state (or it expired): start over with a new id.
            logger.info("%s; getting a new producer id", err)
            self._reset_wanted = True
            self._retry(batch, err, immediate=True)
            return
        if err.retriable:
            hinted = False
            leader = pr.current_leader
            tid = self._open_cluster.metadata.topic_ids.get(batch.topic)
            if leader.leader_id >= 0 and tid is not None:
                hinted = self._open_cluster.apply_leader_hint(
                    tid,
                    batch.partition,
                    leader.leader_id,
                    leader.leader_epoch,
                    endpoints.get(leader.leader_id),
                )
            self._metadata_wanted.set()
            self._retry(batch, err, immediate=hinted)
            return
        self._finish(batch, error=err)

    # -- batch outcomes ----------------------------------------------------------------------

    def _retry(self, batch: _Batch, error: errors.KafkaError, *, immediate: bool = False) -> None:
        state = self._partitions[(batch.topic, batch.partition)]
        if state.in_flight is batch:
            state.in_flight = None
        batch.last_error = error
        now = anyio.current_time()
        if now >= batch.deadline or self._closing:
            self._expire(state, batch)
            return
        logger.debug("retrying %r (attempt %d): %s", batch, batch.attempts, error)
        self._stats.on_retry(time.monotonic(), len(batch.timestamps))
        state.queue.appendleft(batch)
        state.retry_at = now if immediate else now + self._backoff.delay(batch.attempts - 1)

    def _split(self, state: _Partition, batch: _Batch) -> None:
        if state.in_flight is batch:
            state.in_flight = None
        assert batch.builder is not None  # dropped only once the batch is done
        records = batch.builder.records()  # decoded back: splitting is rare
        half = len(records) // 2
        pieces = []
        for part in (records[:half], records[half:]):
            piece = _Batch(batch.topic, batch.partition, batch.created, batch.deadline)
            piece.sealed = True
            piece.parent = batch
            piece.attempts = batch.attempts
            builder = piece.builder
            assert builder is not None
            for r in part:
                builder.append(r.timestamp, r.key, r.value, r.headers)
            piece.timestamps = [r.timestamp for r in part]
            piece.size = _BATCH_OVERHEAD + sum(
                _record_size(r.key, r.value, r.headers) for r in part
            )
            pieces.append(piece)
        logger.info(
            "%r was too large for the broker; splitting it into %d + %d records",
            batch,
            half,
            len(records) - half,
        )
        # The halves go first, in order; the buffer space moves to them.
        batch.children = (pieces[0], pieces[1])
        batch.encoded = None
        batch.builder = None  # the records live on in the halves
        state.queue.appendleft(pieces[1])
        state.queue.appendleft(pieces[0])

    def _expire(self, state: _Partition, batch: _Batch) -> None:
        if state.in_flight is batch:
            state.in_flight = None
        last = f"; last error: {batch.last_error}" if batch.last_error else ""
        self._finish(
            batch,
            error=errors.KafkaTimeoutError(
                f"topic {batch.topic!r} partition {batch.partition}: {len(batch.timestamps)} "
                f"records not delivered within delivery_timeout="
                f"{self._delivery_timeout:g} s after {batch.attempts} attempts{last}"
            ),
        )

    def _finish(self, batch: _Batch, *, error: errors.KafkaError | None = None) -> None:
        if batch.done.is_set():
            return
        state = self._partitions.get((batch.topic, batch.partition))
        if state is not None and state.in_flight is batch:
            state.in_flight = None
        batch.error = error
        if error is not None:
            root = batch
            while root.parent is not None:
                root = root.parent
            if root.unclaimed:
                # Nobody is waiting for some of these records: say so once, here.
                logger.warning(
                    "%r failed (%d records queued with send() whose futures were not awaited): %s",
                    batch,
                    root.unclaimed,
                    error,
                )
            else:
                logger.debug("%r failed: %s", batch, error)
            if batch.ambiguous and self._idempotent:
                # It may have been written under its sequence number: never reuse that.
                self._reset_wanted = True
                self._wake.set()
        if batch.children is None:
            self._stats.on_batch_done(
                time.monotonic(), len(batch.timestamps), failed=error is not None
            )
            self._buffered -= batch.size - _BATCH_OVERHEAD
            if not self._space.is_set():
                self._space.set()
        batch.encoded = None
        batch.builder = None  # its records are written or failed: free their bytes
        batch.done.set()
        callbacks = batch.callbacks
        if callbacks is not None:
            batch.callbacks = None
            for future, callback in callbacks:
                _run_callback(callback, future)
        parent = batch.parent
        if parent is not None and parent.children is not None:
            if all(c.done.is_set() for c in parent.children):
                self._finish(parent)

    def _fail_all(self, error: errors.KafkaError) -> None:
        for state in self._partitions.values():
            if state.in_flight is not None:
                self._finish(state.in_flight, error=error)
            while state.queue:
                self._finish(state.queue.popleft(), error=error)
        self._space.set()
