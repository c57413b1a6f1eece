"""The FastStream message of a share-group record, and the parser that makes it.

FastStream's three answers are share groups' three answers: ``ack()`` accepts the record,
``nack()`` releases it (delivered again, its delivery count one higher) and ``reject()``
archives it. ``nack(delay=...)`` is a delayed release and :meth:`ShareMessage.dead_letter`
routes the record to the dead-letter topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faststream.message import StreamMessage, decode_message

from sharecon import errors
from sharecon.record import Record

if TYPE_CHECKING:
    from collections.abc import Callable

    from faststream._internal.basic_types import DecodedMessage

    from sharecon.consumer import ShareConsumer
    from sharecon.producer import RecordMetadata

#: The raw message of the share broker: a record as sharecon fetched it (bytes, unless
#: the subscriber has a ``value_deserializer``: then FastStream does not decode the body).
ShareRecord = Record[bytes | None, bytes | None]


class ShareMessage(StreamMessage[ShareRecord]):
    """A record of a share group as FastStream hands it to handlers.

    ``raw_message`` is the :class:`sharecon.Record` (``delivery_count``, ``partition``,
    ``offset``, ``lock_deadline``...). Answer it through this message (or raise
    ``AckMessage`` / ``NackMessage`` / ``RejectMessage``), so the subscriber knows it was
    answered; the first answer counts, later ones are ignored as FastStream does.
    """

    def __init__(
        self,
        raw_message: ShareRecord,
        *,
        consumer: ShareConsumer[Any, Any] | None,
        claim: Callable[[ShareRecord], bool],
        **kwargs: Any,
    ) -> None:
        super().__init__(raw_message, **kwargs)
        self._consumer = consumer
        #: True for the first answer to the record, whoever gives it (the subscriber's
        #: ack policy included): later ones are ignored.
        self._claim = claim

    @property
    def delivery_count(self) -> int:
        """How many times the broker has delivered this record (1 the first time)."""
        return self.raw_message.delivery_count

    async def ack(self) -> None:
        """Accept the record: the broker marks it done."""
        if self.committed is None and self._claim(self.raw_message):
            self.raw_message.accept()
        await super().ack()

    async def nack(self, delay: float | None = None) -> None:
        """Release the record: the broker delivers it again (delivery count + 1).

        :param delay: seconds to keep it locked before releasing it (a visibility
            timeout; Kafka 4.2+, as ``record.release(delay=...)``).
        """
        if self.committed is None and self._claim(self.raw_message):
            self.raw_message.release(delay)
        await super().nack()

    async def reject(self) -> None:
        """Reject the record: the broker archives it; it is never delivered again."""
        if self.committed is None and self._claim(self.raw_message):
            self.raw_message.reject()
        await super().reject()

    async def dead_letter(self, reason: str = "") -> RecordMetadata | None:
        """Copy the record to the subscriber's dead-letter topic, then reject it
        (:meth:`sharecon.ShareConsumer.reject_to_dlq`: if the copy cannot be written the
        record is released instead and :class:`~sharecon.errors.DeadLetterError` raised).

        :returns: where the copy was written (``None`` when the broker keeps its own
            dead-letter queue, or the lock was already lost).
        """
        if self._consumer is None:
            raise errors.InvalidRecordStateError(
                "dead_letter(): this message came from no share consumer"
            )
        if self.committed is not None or not self._claim(self.raw_message):
            raise errors.InvalidRecordStateError("dead_letter(): the message was already answered")
        written = await self._consumer.reject_to_dlq(self.raw_message, reason=reason)
        await super().reject()
        return written


def _first(record: ShareRecord) -> bool:
    return True


class ShareParser:
    """Turns a record into a :class:`ShareMessage` (headers as FastStream's Kafka brokers
    write them: ``content-type``, ``correlation_id``, ``reply_to``)."""

    __slots__ = ("claim", "consumer", "decoded")

    def __init__(self) -> None:
        self.consumer: ShareConsumer[Any, Any] | None = None
        self.claim: Callable[[ShareRecord], bool] = _first
        #: The consumer's value_deserializer made ``record.value``: the body's bytes are
        #: the record's as fetched, and the decoded body is ``record.value`` itself.
        self.decoded = False

    async def parse_message(self, record: ShareRecord) -> ShareMessage:
        headers = {k: v.decode(errors="replace") for k, v in record.headers if v is not None}
        return ShareMessage(
            record,
            consumer=self.consumer,
            claim=self.claim,
            body=(record.serialized_value if self.decoded else record.value) or b"",
            headers=headers,
            reply_to=headers.get("reply_to", ""),
            content_type=headers.get("content-type"),
            correlation_id=headers.get("correlation_id"),
            message_id=f"{record.topic}-{record.partition}-{record.offset}",
        )

    async def decode_message(self, msg: StreamMessage[Any]) -> DecodedMessage:
        if self.decoded:
            value: DecodedMessage = msg.raw_message.value
            return value
        return decode_message(msg)
