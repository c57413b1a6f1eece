"""Publishing for the share broker: FastStream's publish commands, sent with sharecon's
:class:`~sharecon.Producer`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from faststream._internal.parser import DefaultCodec
from faststream._internal.producer import ProducerProto
from faststream.exceptions import FeatureNotSupportedException, IncorrectState
from faststream.response import PublishCommand, PublishType

from sharecon.faststream.message import ShareParser

if TYPE_CHECKING:
    from fast_depends.library.serializer import SerializerProto
    from faststream._internal.basic_types import SendableMessage
    from faststream._internal.parser import CodecProto
    from faststream._internal.types import AsyncCallable

    from sharecon.producer import Producer, RecordMetadata


class SharePublishCommand(PublishCommand):
    """One record to publish: FastStream's command plus Kafka's key, partition and
    timestamp."""

    def __init__(
        self,
        message: SendableMessage,
        *,
        topic: str = "",
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        reply_to: str = "",
        _publish_type: PublishType = PublishType.PUBLISH,
    ) -> None:
        super().__init__(
            body=message,
            destination=topic,
            correlation_id=correlation_id,
            headers=headers,
            reply_to=reply_to,
            _publish_type=_publish_type,
        )
        self.key = key
        self.partition = partition
        self.timestamp_ms = timestamp_ms

    @classmethod
    def from_cmd(cls, cmd: PublishCommand) -> SharePublishCommand:
        """The command as a share one (a handler's return value arrives as a plain one)."""
        if isinstance(cmd, SharePublishCommand):
            return cmd
        return cls(
            cmd.body,
            topic=cmd.destination,
            headers=cmd.headers,
            correlation_id=cmd.correlation_id,
            reply_to=cmd.reply_to,
            _publish_type=cmd.publish_type,
        )


class ShareProducer(ProducerProto[SharePublishCommand]):
    """FastStream's producer interface over a started :class:`sharecon.Producer`."""

    __slots__ = ("_decoder", "_parser", "_producer", "codec", "serializer")

    def __init__(self) -> None:
        parser = ShareParser()
        self._parser: AsyncCallable = parser.parse_message
        self._decoder: AsyncCallable = parser.decode_message
        self.codec: CodecProto = DefaultCodec()
        self.serializer: SerializerProto | None = None
        self._producer: Producer | None = None

    def __bool__(self) -> bool:
        return self._producer is not None

    def connect(
        self, producer: Producer, serializer: SerializerProto | None, codec: CodecProto | None
    ) -> None:
        self._producer = producer
        self.serializer = serializer
        self.codec = codec or DefaultCodec()

    def disconnect(self) -> None:
        self._producer = None

    def _live(self) -> Producer:
        if self._producer is None:
            raise IncorrectState("the share broker is not connected: start it (or connect())")
        return self._producer

    async def _encode(self, cmd: SharePublishCommand, body: Any) -> tuple[bytes, dict[str, str]]:
        payload, content_type = await self.codec.encode(body, self.serializer)
        headers = {k: str(v) for k, v in cmd.headers.items()}
        if content_type:
            headers.setdefault("content-type", content_type)
        if cmd.correlation_id:
            headers.setdefault("correlation_id", cmd.correlation_id)
        if cmd.reply_to:
            headers.setdefault("reply_to", cmd.reply_to)
        return payload, headers

    async def publish(self, cmd: SharePublishCommand) -> RecordMetadata:
        """Send one record and return where the broker wrote it."""
        producer = self._live()
        payload, headers = await self._encode(cmd, cmd.body)
        return await producer.send_and_wait(
            cmd.destination,
            payload,
            key=cmd.key,
            headers=headers,
            partition=cmd.partition,
            timestamp=cmd.timestamp_ms,
        )

    async def publish_batch(self, cmd: SharePublishCommand) -> list[RecordMetadata]:
        """Send the command's bodies as records of one topic, batched, and return where
        each was written."""
        producer = self._live()
        futures = []
        for body in cmd.batch_bodies:
            payload, headers = await self._encode(cmd, body)
            futures.append(
                await producer.send(
                    cmd.destination,
                    payload,
                    key=cmd.key,
                    headers=headers,
                    partition=cmd.partition,
                    timestamp=cmd.timestamp_ms,
                )
            )
        return [await f for f in futures]

    async def request(self, cmd: SharePublishCommand) -> Any:
        raise FeatureNotSupportedException(
            "the share broker does not do request/reply: a share group has no reply queue"
        )
