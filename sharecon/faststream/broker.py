"""``ShareBroker``: FastStream's broker interface over Kafka share groups."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fast_depends import dependency_provider
from faststream._internal.broker import BrokerUsecase
from faststream._internal.constants import EMPTY
from faststream._internal.context.repository import ContextRepo
from faststream._internal.di import FastDependsConfig
from faststream._internal.endpoint.subscriber.call_item import CallsCollection
from faststream.exceptions import FeatureNotSupportedException
from faststream.response import PublishType
from faststream.specification.schema import BrokerSpec

from sharecon import errors
from sharecon.config import ConnectionConfig
from sharecon.faststream._host import Hosted
from sharecon.faststream.config import ShareBrokerConfig, make_share_logger_state
from sharecon.faststream.message import ShareRecord
from sharecon.faststream.producer import SharePublishCommand
from sharecon.faststream.publisher import (
    SharePublisher,
    SharePublisherConfig,
    SharePublisherSpecification,
    SharePublisherSpecificationConfig,
)
from sharecon.faststream.subscriber import (
    ShareSubscriber,
    ShareSubscriberConfig,
    ShareSubscriberSpecification,
    ShareSubscriberSpecificationConfig,
    topics_of,
)
from sharecon.producer import Producer

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from types import TracebackType

    from fast_depends import Provider
    from fast_depends.dependencies import Dependant
    from fast_depends.library.serializer import SerializerProto
    from faststream._internal.basic_types import LoggerProto, SendableMessage
    from faststream._internal.types import BrokerMiddleware, CustomCallable
    from faststream.middlewares import AckPolicy
    from faststream.specification.schema.extra import Tag, TagDict

    from sharecon.dlq import DeadLetterPolicy
    from sharecon.producer import RecordMetadata
    from sharecon.serde import AnyDeserializer


class ShareBroker(BrokerUsecase[ShareRecord, Producer, ShareBrokerConfig]):
    """A FastStream broker whose subscribers are members of Kafka share groups.

    ::

        broker = ShareBroker("localhost:9092")

        @broker.subscriber("orders", group_id="billing")
        async def bill(order: Order) -> None: ...

    Each subscriber is one :class:`sharecon.ShareConsumer` running its handler through
    :meth:`~sharecon.ShareConsumer.process`; publishing goes through one
    :class:`sharecon.Producer` the broker starts when it connects.

    :param bootstrap: ``"host:port"``, a comma-separated list, or a sequence of them.
    :param config: a :class:`~sharecon.config.ConnectionConfig` (TLS, SASL, client id,
        timeouts) for every consumer and the producer.
    :param producer_options: more :class:`sharecon.Producer` arguments (``acks``,
        ``compression``, ``linger``...).
    :param ack_policy: the default for subscribers (``AckPolicy.NACK_ON_ERROR`` unless
        given: a handler error releases the record).
    :param graceful_timeout: seconds a stopping subscriber lets its handlers finish the
        records already fetched before the rest are released.

    The other arguments are FastStream's own (middlewares, parser, decoder, dependencies,
    logging, AsyncAPI fields).
    """

    _producer_host: Hosted[Producer] | None = None

    def __init__(
        self,
        bootstrap: str | Sequence[str] = "localhost:9092",
        *,
        client_id: str = "sharecon",
        config: ConnectionConfig | None = None,
        producer_options: Mapping[str, Any] | None = None,
        graceful_timeout: float | None = 15.0,
        ack_policy: AckPolicy = EMPTY,
        decoder: CustomCallable | None = None,
        parser: CustomCallable | None = None,
        dependencies: Iterable[Dependant] = (),
        middlewares: Sequence[BrokerMiddleware[Any, Any]] = (),
        routers: Iterable[Any] = (),
        # AsyncAPI
        specification_url: str | Iterable[str] | None = None,
        protocol: str | None = None,
        protocol_version: str | None = "auto",
        description: str | None = None,
        tags: Iterable[Tag | TagDict] = (),
        # logging
        logger: LoggerProto | None = EMPTY,
        log_level: int = logging.INFO,
        # FastDepends
        apply_types: bool = True,
        serializer: SerializerProto | None = EMPTY,
        provider: Provider | None = None,
        context: ContextRepo | None = None,
    ) -> None:
        servers = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        if specification_url is None:
            specification_url = [s.strip() for b in servers for s in b.split(",")]
        elif isinstance(specification_url, str):
            specification_url = [specification_url]
        super().__init__(
            routers=routers,
            config=ShareBrokerConfig(
                bootstrap=bootstrap,
                connection=config or ConnectionConfig(client_id=client_id),
                producer_options=dict(producer_options or {}),
                broker_middlewares=middlewares,
                broker_parser=parser,
                broker_decoder=decoder,
                logger=make_share_logger_state(logger, log_level),
                fd_config=FastDependsConfig(
                    use_fastdepends=apply_types,
                    serializer=serializer,
                    provider=provider or dependency_provider,
                    context=context or ContextRepo(),
                ),
                broker_dependencies=tuple(dependencies),
                graceful_timeout=graceful_timeout,
                ack_policy=ack_policy,
                extra_context={"broker": self},
            ),
            specification=BrokerSpec(
                description=description,
                url=list(specification_url),
                protocol=protocol or "kafka",
                protocol_version=protocol_version,
                tags=tags,
                security=None,
            ),
        )

    # -- registration --------------------------------------------------------------------

    def subscriber(  # type: ignore[override]
        self,
        *topics: str,
        group_id: str,
        ack_policy: AckPolicy = EMPTY,
        max_workers: int = 1,
        dead_letter: DeadLetterPolicy | None = None,
        keep_locks: bool | None = None,
        consumer_options: Mapping[str, Any] | None = None,
        value_deserializer: AnyDeserializer[Any] | None = None,
        no_reply: bool = False,
        dependencies: Iterable[Dependant] = (),
        parser: CustomCallable | None = None,
        decoder: CustomCallable | None = None,
        persistent: bool = True,
        title: str | None = None,
        description: str | None = None,
        include_in_schema: bool = True,
    ) -> ShareSubscriber:
        """A subscriber to ``topics`` in the share group ``group_id`` (decorate a handler
        with it).

        :param ack_policy: how an answer follows the handler: ``NACK_ON_ERROR`` (default)
            releases the record on an error (or dead-letters it, see ``dead_letter``),
            ``REJECT_ON_ERROR`` rejects it, ``ACK`` accepts it anyway, ``ACK_FIRST``
            accepts before the handler runs, ``MANUAL`` leaves it to the handler
            (``msg.ack()``...; unanswered: accepted on return, released on an error).
        :param max_workers: handlers running at once (``process(concurrency=...)``).
        :param dead_letter: a :class:`~sharecon.DeadLetterPolicy`: a record whose handler
            fails on its last allowed delivery goes to the dead-letter topic, and its
            ``retry_backoff`` delays the releases before that.
        :param keep_locks: renew each record's lock while its handler runs (``None``:
            where the broker can, as :meth:`~sharecon.ShareConsumer.process`).
        :param consumer_options: more :class:`~sharecon.ShareConsumer` arguments
            (``max_records``, ``acquire_mode``, ``max_hold``...).
        :param value_deserializer: decodes each record's value before FastStream does, as
            the consumer's ``value_deserializer`` (a plain callable, or one made by
            :func:`~sharecon.serde.with_context` or
            :func:`~sharecon.serde.async_deserializer`, such as a schema-registry
            decoder): the handler's body is what it returns, not decoded again. A record
            it fails for never reaches the handler: it is released, or dead-lettered on
            its last allowed delivery under ``dead_letter``.
        """
        if max_workers < 1:
            raise errors.ConfigError(f"max_workers must be at least 1, not {max_workers}")
        names = topics_of(topics)
        config = ShareSubscriberConfig(
            topics=names,
            group_id=group_id,
            max_workers=max_workers,
            dead_letter=dead_letter,
            keep_locks=keep_locks,
            consumer_options=dict(consumer_options or {}),
            value_deserializer=value_deserializer,
            no_reply=no_reply,
            _outer_config=self.config,  # type: ignore[arg-type]
            _ack_policy=ack_policy,
        )
        calls = CallsCollection[ShareRecord]()
        specification = ShareSubscriberSpecification(
            self.config,  # type: ignore[arg-type]
            ShareSubscriberSpecificationConfig(
                topics=names,
                group_id=group_id,
                title_=title,
                description_=description,
                include_in_schema=include_in_schema,
            ),
            calls,
        )
        sub = ShareSubscriber(config, specification, calls)
        super().subscriber(sub, persistent=persistent)
        return sub.add_call(
            parser_=parser or self._parser,
            decoder_=decoder or self._decoder,
            dependencies_=tuple(dependencies),
        )

    def publisher(  # type: ignore[override]
        self,
        topic: str,
        *,
        key: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        persistent: bool = True,
        title: str | None = None,
        description: str | None = None,
        schema: Any | None = None,
        include_in_schema: bool = True,
    ) -> SharePublisher:
        """A publisher to ``topic``: call ``.publish()``, or decorate a handler to publish
        what it returns."""
        (name,) = topics_of([topic])
        pub = SharePublisher(
            SharePublisherConfig(
                topic=name,
                key=key,
                headers=headers,
                _outer_config=self.config,  # type: ignore[arg-type]
            ),
            SharePublisherSpecification(
                self.config,  # type: ignore[arg-type]
                SharePublisherSpecificationConfig(
                    topic=name,
                    schema_=schema,
                    title_=title,
                    description_=description,
                    include_in_schema=include_in_schema,
                ),
            ),
        )
        super().publisher(pub, persistent=persistent)
        return pub

    # -- connection ----------------------------------------------------------------------

    async def _connect(self) -> Producer:
        config = self.config.broker_config
        producer: Producer = Producer(
            config.bootstrap, config=config.connection, **config.producer_options
        )
        host = Hosted(producer)
        await host.start()
        self._producer_host = host
        config.producer.connect(producer, config.fd_config._serializer, config.broker_codec)
        return producer

    async def start(self) -> None:
        await self.connect()
        await super().start()

    async def stop(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        """Stop the subscribers (each drains, then closes its consumer), then flush and
        close the producer."""
        await super().stop(exc_type, exc_val, exc_tb)
        host, self._producer_host = self._producer_host, None
        self.config.broker_config.producer.disconnect()
        self._connection = None
        if host is not None:
            close_timeout = float(
                self.config.broker_config.producer_options.get("close_timeout", 5.0)
            )
            await host.stop(timeout=close_timeout + 10.0)

    async def ping(self, timeout: float | None = None) -> bool:
        """Whether the producer is connected and every subscriber's consumer is running."""
        if self._connection is None:
            return False
        return all(
            s.running for s in self.subscribers if isinstance(s, ShareSubscriber) and s.calls
        )

    # -- publishing ----------------------------------------------------------------------

    async def publish(
        self,
        message: SendableMessage = None,
        topic: str = "",
        *,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: dict[str, str] | None = None,
        correlation_id: str | None = None,
    ) -> RecordMetadata:
        """Publish one message to ``topic`` and return where the broker wrote it."""
        cmd = SharePublishCommand(
            message,
            topic=topic,
            key=key,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=headers,
            correlation_id=correlation_id or self.config.id_generator(),
            _publish_type=PublishType.PUBLISH,
        )
        result: RecordMetadata = await self._basic_publish(cmd, producer=self.config.producer)
        return result

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        raise FeatureNotSupportedException("the share broker does not do request/reply")
