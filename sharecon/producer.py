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
3. **Up to ``max_in_flight`` batches in flight per partition** (5, with idempotence; one
   without). A batch gets its sequence numbers when it is first sent; a retry resends the
   very same bytes (same producer id, epoch and sequence, so the broker drops a copy it
   already wrote and answers with the first offset). A batch to resend waits until
   nothing else of its partition is in flight and goes before every batch never sent, so
   the broker sees the sequences in order; a batch refused only because an earlier one
   is missing is resent after it. Records keep accumulating (into bigger batches) while
   batches are in flight.
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
8. :meth:`Producer.send_nowait` queues without ever waiting: when the record would have to
   wait (a full buffer, a topic whose partitions are not known yet, an async serializer) it raises
   :class:`~sharecon.errors.WouldBlockError` and queues nothing.

This module is the public façade. The decisions (rules 1, 3 to 6 and 8) are made by the
sans-I/O engine in ``sharecon._produce``; the dispatcher, requests and waits (rule 2) are
``sharecon._producer.sender``.

Limits worth knowing: without idempotence a retried batch may be written twice (the
broker cannot tell a retry from new records). With idempotence, a batch that is still
waiting for a retry when the producer id has to be replaced (rule 6) is resent under the
new id; if its earlier attempt had in fact been written, that one batch is duplicated.
The Java client has the same window.
"""

from __future__ import annotations

import logging
import random
import time
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
from sharecon._produce.accumulator import Accumulator
from sharecon._produce.batch import Batch, add_to_runs, outcomes_of
from sharecon._produce.metadata import RecordMetadata
from sharecon._produce.settings import check_settings
from sharecon._producer.future import RecordFuture
from sharecon._producer.sender import Sender
from sharecon._producer.serialize import ContextSerializers, serialize
from sharecon._stats import ProducerStats
from sharecon._telemetry import check_enabled, metric_points
from sharecon.metrics import PRODUCER_METRICS
from sharecon.protocol import InitProducerIdRequest
from sharecon.protocol.versions import PRODUCER_APIS
from sharecon.serde import AnySerializer, AsyncWithContext, WithContext

if TYPE_CHECKING:
    import ssl
    from collections.abc import Coroutine, Iterable, Sequence
    from types import TracebackType

    from anyio.abc import TaskGroup
    from typing_extensions import Self

    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon.metrics import ProducerMetrics
    from sharecon.protocol.compression import Codec
    from sharecon.types import Header

__all__ = [
    "KT",
    "VT",
    "HeadersLike",
    "Producer",
    "ProducerRecord",
    "RecordFuture",
    "RecordMetadata",
]

#: What ``headers=`` accepts: a mapping, or ``(key, value)`` pairs / :class:`Header` objects.
#: The (de)serializer wrappers of sharecon.serde: not callables themselves.
_WRAPPED = (WithContext, AsyncWithContext)

HeadersLike: TypeAlias = (
    "Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None] | Header]"
)

#: The keys ``send`` takes: what the ``key_serializer`` accepts (default: bytes-like or
#: ``str``, sent as they are; ``str`` as UTF-8).
KT = TypeVar("KT", default=bytes | bytearray | memoryview | str)
#: The values ``send`` takes: what the ``value_serializer`` accepts (default as ``KT``).
VT = TypeVar("VT", default=bytes | bytearray | memoryview | str)
# A ProducerRecord is immutable, so a ProducerRecord[str, bytes] is also a
# ProducerRecord[str, bytes | str]: a list of them goes to send_batch as it is.
_KT_co = TypeVar("_KT_co", covariant=True, default=bytes | bytearray | memoryview | str)
_VT_co = TypeVar("_VT_co", covariant=True, default=bytes | bytearray | memoryview | str)

logger = logging.getLogger("sharecon.producer")
#: Every producer metric as a KIP-714 point.
_PRODUCER_POINTS = metric_points(PRODUCER_METRICS, "producer")

# send() passes through the event loop at least once per this many calls (see send).
_YIELD_EVERY = 64


# -- public value types --------------------------------------------------------------------


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
    :param max_in_flight: batches of one partition sent and not yet answered, 1 to 5
        (Kafka's ``max.in.flight.requests.per.connection``). With idempotence their
        sequence numbers keep them in order through retries; without it, one batch per
        partition is in flight whatever this says, so that a retry cannot reorder records.
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
        bytes (see :mod:`sharecon.serde`; :func:`~sharecon.serde.with_context` or
        :func:`~sharecon.serde.async_serializer` for one that is given the record's
        topic, partition and headers, or is awaited); never called for ``None`` (no
        key). Typed sends follow: ``Producer[KT, VT]`` takes ``KT`` keys and ``VT`` values.
    :param value_serializer: the same for values (never called for ``None``, a
        tombstone). A serializer that raises, or returns something other than bytes or
        ``None``, fails that send with :class:`~sharecon.errors.SerializationError`.
    :param enable_metrics_push: push this producer's metrics to brokers that ask for them
        (KIP-714 client telemetry, as Java's ``enable.metrics.push``, on by default there
        too): nothing is sent unless a client-metrics subscription on the cluster matches
        this client.
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
        max_in_flight: int = 5,
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
        key_serializer: AnySerializer[KT] | None = None,
        value_serializer: AnySerializer[VT] | None = None,
        enable_metrics_push: bool = True,
    ) -> None:
        for name, fn in (
            ("key_serializer", key_serializer),
            ("value_serializer", value_serializer),
        ):
            if fn is not None and not callable(fn) and not isinstance(fn, _WRAPPED):
                raise errors.ConfigError(f"{name} must be a callable, not {type(fn).__name__}")
        #: A context or async serializer among the two (sharecon.serde rule 4): read once,
        #: here; plain callables keep their own path (_serializing).
        self._context_serializers = (
            ContextSerializers(key_serializer, value_serializer)
            if ContextSerializers.wanted(key_serializer, value_serializer)
            else None
        )
        self._key_serializer: Any = key_serializer
        self._value_serializer: Any = value_serializer
        self._serializing = self._context_serializers is None and (
            key_serializer is not None or value_serializer is not None
        )
        self._settings = settings = check_settings(
            acks=acks,
            idempotent=idempotent,
            compression=compression,
            compression_level=compression_level,
            linger=linger,
            max_batch_bytes=max_batch_bytes,
            max_request_size=max_request_size,
            max_buffer_bytes=max_buffer_bytes,
            max_in_flight=max_in_flight,
            delivery_timeout=delivery_timeout,
            request_timeout=request_timeout,
            metadata_timeout=metadata_timeout,
            close_timeout=close_timeout,
            retry_backoff=retry_backoff,
        )
        self._close_timeout = close_timeout
        self._enable_metrics_push = check_enabled(enable_metrics_push)
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
        self._sender = sender = Sender(settings, self._stats)
        self._acc = Accumulator(
            settings,
            sender,
            clock=anyio.current_time,
            wall_ns=time.time_ns,
            randrange=random.randrange,
        )
        sender.attach(self._acc)
        self._unyielded = 0  # send() calls since the last one that checkpointed
        # The short path (Accumulator.enqueue) is open while acc.view is set: started, not
        # closing, not failed, no serializers. Else a record goes through _place, which
        # checks and says why not.
        self._acc.future_type = RecordFuture
        sender.on_fatal = self._no_short_path

    def __repr__(self) -> str:
        state = self._runtime.state
        return f"<Producer {state} pid={self._acc.producer_id} buffered={self._acc.buffered}B>"

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
        if self._acc.idempotent:
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
        if not self._serializing and self._context_serializers is None:
            self._acc.view = self._runtime.current

    async def _on_connected(self, cluster: Cluster, tg: TaskGroup) -> None:
        if self._acc.idempotent:
            pid, epoch = await self._sender.init_producer_id(cluster)
            self._acc.restart_sequences(pid, epoch)
        tg.start_soon(self._sender.dispatch_loop, cluster, tg)
        tg.start_soon(self._sender.metadata_loop, cluster)
        if self._enable_metrics_push:
            self._runtime.push_metrics(
                lambda: _PRODUCER_POINTS(self.metrics()),
                resource={"client_id": self._config.client_id},
                request_timeout=self._config.request_timeout,
                logger=logger,
            )

    def _no_short_path(self, closing: bool = True) -> None:
        self._acc.view = None
        self._acc.closing = self._acc.closing or closing

    def _on_close(self) -> None:
        self._no_short_path()
        self._sender.fail_all(
            errors.KafkaError("the producer was closed before the record was sent")
        )

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
            if exc_type is None and self._sender.fatal is None:
                await self._sender.flush(None)
        finally:
            self._no_short_path()
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
        total = self._settings.max_buffer
        return self._stats.snapshot(
            time.monotonic(),
            buffer_total_bytes=total,
            buffer_available_bytes=max(0, total - self._acc.buffered),
            in_flight=self._acc.in_flight,
        )

    @property
    def producer_id(self) -> int:
        """The idempotent producer id (-1 without idempotence)."""
        return self._acc.producer_id

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
        unyielded = self._unyielded + 1
        if unyielded >= _YIELD_EVERY or self._sender.work:
            self._unyielded = 0
            await anyio.lowlevel.checkpoint()
        else:
            self._unyielded = unyielded
        # The short path: the whole per-record job in one call of the (compiled) engine.
        future: RecordFuture | None = self._acc.enqueue(
            topic, value, key, headers, partition, timestamp, -1
        )
        if future is not None:
            return future
        placed = self._place(topic, value, key, headers, partition, timestamp, -1)
        batch = placed if type(placed) is Batch else await placed  # type: ignore[misc]
        return RecordFuture._for(batch, len(batch.timestamps) - 1)

    def send_nowait(
        self,
        topic: str,
        value: VT | None,
        *,
        key: KT | None = None,
        headers: HeadersLike | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture:
        """Queue one record without waiting, and return a :class:`RecordFuture` for its
        outcome: :meth:`send` as a plain call (no ``await``, no pass through the event
        loop), for tight loops. Same parameters and errors as :meth:`send`.

        It never waits and never drops a record: when queueing would have to wait, because
        the buffer is full (``max_buffer_bytes`` of records not yet delivered) or the
        topic's partitions are not known yet (its first record, or a partition beyond
        those known), it raises :class:`~sharecon.errors.WouldBlockError` (``.reason`` is
        ``"buffer"`` or ``"metadata"``; ``"serializer"`` with an async serializer, which
        only :meth:`send` awaits) and queues nothing. Then ``await
        producer.send(...)`` the same record, which waits for what is missing. As it never
        yields, a loop of ``send_nowait`` calls should itself pass through the event loop
        now and then (``await`` something) so that batches get sent.

        :raises WouldBlockError: the record cannot be queued without waiting.
        """
        future: RecordFuture | None = self._acc.enqueue(
            topic, value, key, headers, partition, timestamp, -1
        )
        if future is not None:
            return future
        placed = self._place(topic, value, key, headers, partition, timestamp, -1)
        if type(placed) is not Batch:
            placed.close()  # type: ignore[union-attr]  # the waiting half is not run
            serializers = self._context_serializers
            if serializers is not None and serializers.awaits:
                raise errors.WouldBlockError(
                    "send_nowait cannot await an async serializer; await send() instead",
                    reason="serializer",
                )
            raise self._would_block(topic)
        return RecordFuture._for(placed, len(placed.timestamps) - 1)

    def _would_block(self, topic: str) -> errors.WouldBlockError:
        cluster = self._runtime.current
        if cluster is not None and cluster.metadata.partitions.get(topic):
            size = self._settings.max_buffer
            return errors.WouldBlockError(
                f"send_nowait: the buffer is full ({self._acc.buffered} of "
                f"max_buffer_bytes={size} bytes queued); await send() to wait for space",
                reason="buffer",
            )
        return errors.WouldBlockError(
            f"send_nowait: the partitions of topic {topic!r} are not known yet; await "
            "send() (or partitions_for()) to look them up",
            reason="metadata",
        )

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
        placed = self._place(topic, value, key, headers, partition, timestamp, -1)
        batch = placed if type(placed) is Batch else await placed  # type: ignore[misc]
        index = len(batch.timestamps) - 1
        await Sender.wait_done(batch)
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
        # [batch, first index, index after the last].
        runs: list[list[Any]] = []
        acc = self._acc
        items = iter(records)
        # Records of one call are created together: they share the default timestamp.
        now_ms = time.time_ns() // 1_000_000
        while True:
            # The short path takes records in a (compiled) loop until one must go the long
            # way: it is checked (and waited for) here, then the loop goes on.
            rec = acc.place_records(items, now_ms, runs, ProducerRecord)
            if rec is None:
                break
            placed = self._place(
                rec.topic, rec.value, rec.key, rec.headers, rec.partition, rec.timestamp, now_ms
            )
            add_to_runs(runs, placed if type(placed) is Batch else await placed)  # type: ignore[misc]
        waited = False
        for run in runs:
            batch = run[0]
            if not batch.done:
                await Sender.wait_done(batch)
                waited = True
        if not waited:
            await anyio.lowlevel.checkpoint()  # a send_batch call always is a checkpoint
        return outcomes_of(runs, raise_first=not return_exceptions)

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
        if self._runtime.state != "running" or self._acc.closing:
            raise self._runtime.error()
        await self._sender.flush(timeout)

    async def partitions_for(self, topic: str) -> int:
        """The number of partitions of ``topic`` (looked up if not known yet).

        :raises UnknownTopicOrPartitionError: the topic does not exist.
        """
        return await self._sender.partition_count(self._open_cluster, topic)

    # -- enqueueing --------------------------------------------------------------------------

    def _check_open(self) -> Cluster:
        cluster = self._runtime.current  # per record: an attribute, not a property
        if cluster is None or self._acc.closing:
            raise self._runtime.error()
        fatal = self._sender.fatal
        if fatal is not None:
            raise errors.KafkaError(f"the producer failed: {fatal}") from fatal
        return cluster

    def _place(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int,
    ) -> Batch | Coroutine[Any, Any, Batch]:
        """Check one record and append it to its partition's open batch, without
        suspending: the per-record path of every send. Returns the batch (the record is
        its last); or, when the record must wait (a topic or partition the metadata does
        not know yet, a full buffer), a coroutine that finishes the job, for the caller to
        await. Every argument error is raised here, at once. ``now_ms`` is the create time
        of a record without ``timestamp`` (-1: now)."""
        cluster = self._check_open()
        if self._serializing:
            key, value = serialize(topic, key, value, self._key_serializer, self._value_serializer)
        elif self._context_serializers is not None:
            headers = _headers_tuple(headers)
            if self._context_serializers.awaits:
                return self._place_async(topic, value, key, headers, partition, timestamp, now_ms)
            key, value = self._context_serializers.apply(topic, key, value, headers, partition)
        batch = self._acc.place(
            topic, value, key, headers, partition, timestamp, now_ms, cluster.metadata.partitions
        )
        if batch is not None:
            return batch
        record = self._acc.prepare(topic, value, key, headers, timestamp, now_ms)
        return self._sender.place_later(cluster, topic, record, partition, self._check_open)  # type: ignore[arg-type]

    async def _place_async(
        self,
        topic: object,
        value: object,
        key: object,
        headers: object,
        partition: object,
        timestamp: object,
        now_ms: int,
    ) -> Batch:
        """:meth:`_place` for a producer with an async serializer: await it, then place."""
        serializers = self._context_serializers
        assert serializers is not None
        key, value = await serializers.apply_async(topic, key, value, headers, partition)
        cluster = self._check_open()
        batch = self._acc.place(
            topic, value, key, headers, partition, timestamp, now_ms, cluster.metadata.partitions
        )
        if batch is not None:
            return batch
        record = self._acc.prepare(topic, value, key, headers, timestamp, now_ms)
        return await self._sender.place_later(cluster, topic, record, partition, self._check_open)  # type: ignore[arg-type]


def _headers_tuple(headers: object) -> tuple[Any, ...]:
    """A record's headers as the pairs a context shows (read once: an iterator is
    consumed here and the tuple passed on)."""
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return tuple(headers.items())
    return tuple(headers)  # type: ignore[arg-type]
