"""``sharecon.sync.Producer``: the producer for blocking code (a façade over
:class:`sharecon.Producer` on the client's event-loop thread)."""

from __future__ import annotations

import concurrent.futures
from functools import partial
from typing import TYPE_CHECKING, Any, Generic

from sharecon import errors
from sharecon.producer import KT, VT, HeadersLike, RecordFuture, RecordMetadata
from sharecon.producer import Producer as AsyncProducer
from sharecon.sync._client import BlockingClient

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon.metrics import ProducerMetrics
    from sharecon.serde import AnySerializer
    from sharecon.sync._thread import Backend

__all__ = ["Producer", "SendFuture"]


class SendFuture(concurrent.futures.Future[RecordMetadata]):
    """The outcome of one :meth:`Producer.send`: ``future.result(timeout)`` waits (at most
    ``timeout`` seconds) for the record's :class:`~sharecon.RecordMetadata`, or raises the
    typed error its delivery failed with (a ``concurrent.futures.Future``: ``done()``,
    ``add_done_callback()`` and ``concurrent.futures.wait()`` work too). A
    ``result(timeout)`` that times out raises ``TimeoutError`` and leaves the record queued."""


class Producer(BlockingClient[AsyncProducer[KT, VT]], Generic[KT, VT]):
    """A producer for blocking code: :class:`sharecon.Producer` run on a background
    event-loop thread.

    ::

        with Producer("localhost:9092") as producer:
            producer.send("invoices", b"invoice 1").result(timeout=10)

    Takes every parameter of :class:`sharecon.Producer` (passed on unchanged), plus
    ``backend`` (``"asyncio"`` or ``"trio"``) and ``handle_sigterm`` (SIGTERM raises
    ``SystemExit(143)`` in the main thread while the producer is open, so leaving ``with``
    flushes it). Leaving ``with`` sends what is queued (the async producer's close).
    """

    _name = "Producer"

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        key_serializer: AnySerializer[KT] | None = None,
        value_serializer: AnySerializer[VT] | None = None,
        backend: Backend = "asyncio",
        handle_sigterm: bool = True,
        **options: Any,
    ) -> None:
        engine: AsyncProducer[KT, VT] = AsyncProducer(
            bootstrap, key_serializer=key_serializer, value_serializer=value_serializer, **options
        )
        super().__init__(engine, backend, handle_sigterm)

    def send(
        self,
        topic: str,
        value: VT | None,
        *,
        key: KT | None = None,
        headers: HeadersLike | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> SendFuture:
        """Queue one record and return a :class:`SendFuture` for its outcome, as
        :meth:`sharecon.Producer.send`. Returns once the record is queued; waits (at most
        ``timeout`` seconds, then :class:`~sharecon.errors.KafkaTimeoutError`, nothing
        queued) only while the buffer is full or the topic's partitions are looked up.

        :raises ConfigError: as the async send.
        :raises SerializationError: as the async send.
        :raises MessageTooLargeError: as the async send.
        """
        thread = self._running()
        engine = self._engine
        out = SendFuture()
        try:
            record_future = thread.run_sync(
                partial(
                    engine.send_nowait,
                    topic,
                    value,
                    key=key,
                    headers=headers,
                    partition=partition,
                    timestamp=timestamp,
                )
            )
        except errors.WouldBlockError:
            # A full buffer or an unknown topic: wait for it in the loop, bounded.
            record_future = thread.call(
                partial(
                    engine.send,
                    topic,
                    value,
                    key=key,
                    headers=headers,
                    partition=partition,
                    timestamp=timestamp,
                ),
                timeout=timeout,
                what="send",
            )
        thread.run_sync(record_future.add_done_callback, partial(_complete, out))
        return out

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is done, as
        :meth:`sharecon.Producer.flush`.

        :raises KafkaTimeoutError: ``timeout`` seconds passed first.
        """
        self._running().call(self._engine.flush, timeout, what="flush")

    def partitions_for(self, topic: str, *, timeout: float | None = None) -> int:
        """The number of partitions of ``topic``.

        :raises UnknownTopicOrPartitionError: the topic does not exist.
        :raises KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        return self._running().call(
            self._engine.partitions_for, topic, timeout=timeout, what="partitions_for"
        )

    def metrics(self) -> ProducerMetrics:
        """The producer's counters, as :meth:`sharecon.Producer.metrics`."""
        thread = self._thread
        if thread.running:
            return thread.run_sync(self._engine.metrics)
        return self._engine.metrics()


def _complete(out: SendFuture, record_future: RecordFuture) -> None:
    # In the loop thread, when the delivery is over.
    try:
        meta = record_future.result()
    except BaseException as exc:
        out.set_exception(exc)
    else:
        out.set_result(meta)
