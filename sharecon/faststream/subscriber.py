"""The share-group subscriber: one :class:`~sharecon.ShareConsumer` per subscriber, its
records run through FastStream's handler pipeline by :meth:`ShareConsumer.process`.

FastStream's ack policies are applied here rather than by its acknowledgement middleware,
so that an error the policy means to retry goes back to ``process()``, whose rule releases
the record, routes it to the dead-letter topic on its last allowed delivery
(:class:`~sharecon.DeadLetterPolicy`), or releases it after the policy's backoff: one rule
for every sharecon entry point.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from faststream._internal.configs import SubscriberSpecificationConfig, SubscriberUsecaseConfig
from faststream._internal.constants import EMPTY
from faststream._internal.endpoint.publisher.fake import FakePublisher
from faststream._internal.endpoint.subscriber import SubscriberSpecification, SubscriberUsecase
from faststream.exceptions import (
    AckMessage,
    FeatureNotSupportedException,
    NackMessage,
    RejectMessage,
    SkipMessage,
    StopConsume,
)
from faststream.middlewares import AckPolicy
from faststream.specification.asyncapi.utils import resolve_payloads
from faststream.specification.schema import Message, Operation, SubscriberSpec
from faststream.specification.schema.bindings import ChannelBinding, OperationBinding, kafka

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.faststream._host import Hosted
from sharecon.faststream.message import ShareMessage, ShareParser, ShareRecord
from sharecon.faststream.producer import SharePublishCommand
from sharecon.record import RetryLater

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Sequence

    from faststream._internal.endpoint.publisher import PublisherProto
    from faststream._internal.endpoint.subscriber.call_item import CallsCollection
    from faststream.message import StreamMessage
    from faststream.response import PublishCommand

    from sharecon.dlq import DeadLetterPolicy
    from sharecon.faststream.config import ShareBrokerConfig

#: The policy a share subscriber uses unless told: an error releases the record (or, under
#: a DeadLetterPolicy, routes it on its last allowed delivery), as ShareConsumer.process().
DEFAULT_ACK_POLICY = AckPolicy.NACK_ON_ERROR


@dataclass(kw_only=True)
class ShareSubscriberConfig(SubscriberUsecaseConfig):
    """What one ``@broker.subscriber(...)`` asked for."""

    topics: tuple[str, ...]
    group_id: str
    max_workers: int = 1
    dead_letter: DeadLetterPolicy | None = None
    keep_locks: bool | None = None
    consumer_options: dict[str, Any] = field(default_factory=dict)
    #: The consumer's value_deserializer (FastStream then does not decode the body).
    value_deserializer: Any = None

    @property
    def ack_policy(self) -> AckPolicy:
        # FastStream's acknowledgement middleware stays out (MANUAL): the subscriber
        # applies the chosen policy itself (share_ack_policy).
        return AckPolicy.MANUAL

    @property
    def share_ack_policy(self) -> AckPolicy:
        """The policy chosen for this subscriber, else the broker's, else the default."""
        if self._ack_policy is not EMPTY:
            return self._ack_policy
        outer: AckPolicy = self._outer_config.ack_policy
        return DEFAULT_ACK_POLICY if outer is EMPTY else outer


@dataclass(kw_only=True)
class ShareSubscriberSpecificationConfig(SubscriberSpecificationConfig):
    topics: tuple[str, ...]
    group_id: str


class ShareSubscriberSpecification(
    SubscriberSpecification["ShareBrokerConfig", ShareSubscriberSpecificationConfig]
):
    """The AsyncAPI channels of a share subscriber: one per topic, with the share group
    as the Kafka operation binding's ``groupId``."""

    __slots__ = ()

    @property
    def topics(self) -> list[str]:
        prefix = self._outer_config.prefix
        return list(dict.fromkeys(f"{prefix}{t}" for t in self.config.topics))

    @property
    def channel_labels(self) -> list[str]:
        return self.topics

    def get_schema(self) -> dict[str, SubscriberSpec]:
        payloads = self.get_payloads()
        topics = self.topics
        split = len(topics) > 1
        channels = {}
        for t in topics:
            name = self._channel_key(t, split=split)
            channels[name] = SubscriberSpec(
                address=t,
                description=self.description,
                operation=Operation(
                    message=Message(title=f"{name}:Message", payload=resolve_payloads(payloads)),
                    bindings=OperationBinding(
                        kafka=kafka.OperationBinding(
                            group_id={"type": "string", "enum": [self.config.group_id]},
                            client_id=None,
                            reply_to=None,
                        )
                    ),
                ),
                bindings=ChannelBinding(
                    kafka=kafka.ChannelBinding(topic=t, partitions=None, replicas=None)
                ),
            )
        return channels


class _ReplyPublisher(FakePublisher):
    """Sends a handler's return value to the ``reply_to`` topic of the message."""

    __slots__ = ("topic",)

    def __init__(self, producer: Any, topic: str) -> None:
        super().__init__(producer=producer)
        self.topic = topic

    def patch_command(self, cmd: PublishCommand) -> SharePublishCommand:
        real = SharePublishCommand.from_cmd(super().patch_command(cmd))
        real.destination = self.topic
        return real


class ShareSubscriber(SubscriberUsecase[ShareRecord]):
    """Consumes ``topics`` as a member of the share group ``group_id``."""

    _outer_config: ShareBrokerConfig

    def __init__(
        self,
        config: ShareSubscriberConfig,
        specification: SubscriberSpecification[Any, Any],
        calls: CallsCollection[ShareRecord],
    ) -> None:
        parser = ShareParser()
        config.parser = parser.parse_message
        config.decoder = parser.decode_message
        super().__init__(config, specification, calls)
        self._share_parser = parser
        self._config = config
        self.topics = config.topics
        self.group_id = config.group_id
        self.max_workers = config.max_workers
        self.consumer: ShareConsumer[bytes | None, bytes | None] | None = None
        self._host: Hosted[ShareConsumer[bytes | None, bytes | None]] | None = None
        #: Records (by id) answered while their handler runs: the first answer stands.
        self._answered: set[int] = set()
        parser.claim = self._claim

    def _claim(self, record: ShareRecord) -> bool:
        """Whether this is the first answer to ``record`` (which it then is)."""
        key = id(record)
        if key in self._answered:
            return False
        self._answered.add(key)
        return True

    @property
    def share_ack_policy(self) -> AckPolicy:
        """The ack policy this subscriber applies (FastStream's ``ack_policy`` argument)."""
        return self._config.share_ack_policy

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await super().start()
        if not self.calls:
            self._post_start()
            return
        prefix = self._outer_config.prefix
        options = dict(self._config.consumer_options)
        if self._config.value_deserializer is not None:
            options["value_deserializer"] = self._config.value_deserializer
        # A record's value decoded by the consumer is the body as it is (see ShareParser).
        self._share_parser.decoded = options.get("value_deserializer") is not None
        consumer: ShareConsumer[bytes | None, bytes | None] = ShareConsumer(
            self._outer_config.bootstrap,
            group_id=self.group_id,
            topics=[f"{prefix}{t}" for t in self.topics],
            ack_mode="explicit",
            dead_letter=self._config.dead_letter,
            config=self._outer_config.connection,
            **options,
        )
        self._share_parser.consumer = consumer
        host = Hosted(consumer)
        self._post_start()
        try:
            await host.start(self._process)
        except BaseException:
            self.running = False
            raise
        self.consumer = consumer
        self._host = host

    async def _process(self, consumer: ShareConsumer[bytes | None, bytes | None]) -> None:
        try:
            await consumer.process(
                self._handle, concurrency=self.max_workers, keep_locks=self._config.keep_locks
            )
        except Exception as exc:
            # The consumer failed for good (e.g. a dead-letter topic it may not write):
            # say so; ping() is false from then on.
            self._log(
                logging.ERROR,
                f"share subscriber {self.group_id!r} stopped: {exc!r}",
                extra=self.get_log_context(None),
                exc_info=exc,
            )
        finally:
            self.running = False

    async def stop(self) -> None:
        """Stop fetching, let handlers finish what was fetched (up to the broker's
        ``graceful_timeout``), then close the consumer: what is left is released."""
        consumer, host = self.consumer, self._host
        if consumer is not None:
            with contextlib.suppress(errors.KafkaError):  # closed already: it failed
                consumer.stop_fetching()
        await super().stop()
        if host is not None:
            # Closing is bounded by the consumer's close_timeout; the margin only guards
            # against a stuck task.
            await host.stop(
                timeout=float(self._config.consumer_options.get("close_timeout", 30.0)) + 10.0
            )
        self.consumer = None
        self._host = None

    # -- one record --------------------------------------------------------------------

    async def _handle(self, record: ShareRecord) -> object:
        """Run the handlers on ``record`` and answer it by the ack policy; an error the
        policy retries is raised into ``process()`` (release, backoff or dead letter)."""
        key = id(record)
        policy = self._config.share_ack_policy
        try:
            if policy is AckPolicy.ACK_FIRST and self._claim(record):
                record.accept()
            try:
                await self.process_message(record)
            except AckMessage:
                await self._answer(record, "accept")
            except NackMessage as nack:
                await self._answer(record, "release", nack.extra_options.get("delay"))
            except RejectMessage:
                await self._answer(record, "reject")
            except SkipMessage:
                await self._answer(record, "release")
            except StopConsume:
                await self._answer(record, "release")
                asyncio.get_running_loop().call_soon(self._stop_soon)
            except RetryLater:
                if key not in self._answered:
                    raise  # process() releases it after the delay
            except Exception:
                if key in self._answered:
                    return None
                if policy is AckPolicy.ACK:
                    await self._answer(record, "accept")
                elif policy is AckPolicy.REJECT_ON_ERROR:
                    await self._answer(record, "reject")
                else:  # NACK_ON_ERROR, MANUAL: process() decides (release / DLQ / backoff)
                    raise
            return None
        finally:
            self._answered.discard(key)

    async def _answer(
        self, record: ShareRecord, how: Literal["accept", "release", "reject"], delay: Any = None
    ) -> None:
        if not self._claim(record):
            return
        if how == "accept":
            record.accept()
        elif how == "reject":
            record.reject()
        else:
            record.release(delay)

    def _stop_soon(self) -> None:
        self._stopping = asyncio.ensure_future(self.stop())

    # -- FastStream's endpoint API -----------------------------------------------------

    def _make_response_publisher(
        self, message: StreamMessage[ShareRecord]
    ) -> Sequence[PublisherProto]:
        return (_ReplyPublisher(self._outer_config.producer, message.reply_to),)

    async def get_one(self, *, timeout: float = 5.0) -> ShareMessage | None:
        raise FeatureNotSupportedException(
            "share subscribers deliver to handlers; to pull records, use sharecon.ShareConsumer"
        )

    def __aiter__(self) -> AsyncIterator[ShareMessage]:
        raise FeatureNotSupportedException(
            "share subscribers deliver to handlers; to iterate, use sharecon.ShareConsumer"
        )

    @staticmethod
    def build_log_context(
        message: StreamMessage[Any] | None, topic: str = "", group_id: str = ""
    ) -> dict[str, str]:
        return {
            "topic": topic,
            "group_id": group_id,
            "message_id": getattr(message, "message_id", ""),
        }

    def get_log_context(self, message: StreamMessage[Any] | None) -> dict[str, str]:
        return self.build_log_context(message, ",".join(self.topics), self.group_id)


def topics_of(topics: Iterable[str]) -> tuple[str, ...]:
    """The subscriber's topics, checked: at least one, each a non-empty str."""
    out = tuple(topics)
    if not out or not all(isinstance(t, str) and t for t in out):
        raise errors.ConfigError(
            f"a share subscriber needs topic names (non-empty str), not {out!r}"
        )
    return out
