"""``@broker.publisher("topic")``: a FastStream publisher that writes with sharecon's
:class:`~sharecon.Producer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faststream._internal.configs import PublisherSpecificationConfig, PublisherUsecaseConfig
from faststream._internal.endpoint.publisher import PublisherSpecification, PublisherUsecase
from faststream.exceptions import FeatureNotSupportedException
from faststream.response import PublishType
from faststream.specification.asyncapi.utils import resolve_payloads
from faststream.specification.schema import Message, Operation, PublisherSpec
from faststream.specification.schema.bindings import ChannelBinding, kafka

from sharecon.faststream.producer import SharePublishCommand

if TYPE_CHECKING:
    from collections.abc import Iterable

    from faststream._internal.basic_types import SendableMessage
    from faststream._internal.types import PublisherMiddleware
    from faststream.response import PublishCommand

    from sharecon.faststream.config import ShareBrokerConfig
    from sharecon.producer import RecordMetadata


@dataclass(kw_only=True)
class SharePublisherConfig(PublisherUsecaseConfig):
    topic: str
    key: bytes | str | None = None
    headers: dict[str, str] | None = None


@dataclass(kw_only=True)
class SharePublisherSpecificationConfig(PublisherSpecificationConfig):
    topic: str


class SharePublisherSpecification(
    PublisherSpecification["ShareBrokerConfig", SharePublisherSpecificationConfig]
):
    __slots__ = ()

    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self.config.topic}"

    @property
    def name(self) -> str:
        return self.config.title_ or f"{self.topic}:Publisher"

    def get_schema(self) -> dict[str, PublisherSpec]:
        payloads = self.get_payloads()
        return {
            self.name: PublisherSpec(
                address=self.topic,
                description=self.config.description_,
                operation=Operation(
                    message=Message(
                        title=f"{self.name}:Message",
                        payload=resolve_payloads(payloads, "Publisher"),
                    ),
                    bindings=None,
                ),
                bindings=ChannelBinding(
                    kafka=kafka.ChannelBinding(topic=self.topic, partitions=None, replicas=None)
                ),
            )
        }


class SharePublisher(PublisherUsecase):
    """Publishes to one topic; a handler it decorates has its return value published."""

    _outer_config: ShareBrokerConfig

    def __init__(
        self, config: SharePublisherConfig, specification: PublisherSpecification[Any, Any]
    ) -> None:
        super().__init__(config, specification)
        self._topic = config.topic
        self.key = config.key
        self.headers = config.headers or {}

    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self._topic}"

    async def publish(
        self,
        message: SendableMessage,
        topic: str = "",
        *,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: dict[str, str] | None = None,
        correlation_id: str | None = None,
    ) -> RecordMetadata:
        """Publish one message and return where the broker wrote it."""
        cmd = SharePublishCommand(
            message,
            topic=topic or self.topic,
            key=key if key is not None else self.key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=self.headers | (headers or {}),
            correlation_id=correlation_id or self._outer_config.id_generator(),
            _publish_type=PublishType.PUBLISH,
        )
        result: RecordMetadata = await self._basic_publish(
            cmd, producer=self._outer_config.producer, _extra_middlewares=()
        )
        return result

    async def _publish(
        self, cmd: PublishCommand, *, _extra_middlewares: Iterable[PublisherMiddleware]
    ) -> None:
        """A handler's return value (the subscriber's pipeline calls this)."""
        share = SharePublishCommand.from_cmd(cmd)
        share.destination = share.destination or self.topic
        share.add_headers(self.headers, override=False)
        if share.key is None:
            share.key = self.key
        await self._basic_publish(
            share, producer=self._outer_config.producer, _extra_middlewares=_extra_middlewares
        )

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        raise FeatureNotSupportedException("the share broker does not do request/reply")
