"""FastStream for Kafka share groups (the ``faststream`` extra: FastStream 0.7).

::

    from faststream import FastStream
    from sharecon.faststream import ShareBroker

    broker = ShareBroker("localhost:9092")
    app = FastStream(broker)

    @broker.subscriber("orders", group_id="billing")
    async def bill(order: dict) -> None: ...

``msg.ack()`` accepts, ``msg.nack()`` releases (``nack(delay=...)`` after a delay),
``msg.reject()`` archives; see ``docs/faststream.md``. ``import sharecon`` never imports
this module, so FastStream stays optional.
"""

from __future__ import annotations

try:
    import faststream as _faststream  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sharecon.faststream needs FastStream 0.7 (the faststream extra): "
        "pip install 'faststream>=0.7,<0.8'"
    ) from exc

from sharecon.faststream.broker import ShareBroker
from sharecon.faststream.config import ShareBrokerConfig
from sharecon.faststream.message import ShareMessage, ShareRecord
from sharecon.faststream.producer import ShareProducer, SharePublishCommand
from sharecon.faststream.publisher import SharePublisher, SharePublisherConfig
from sharecon.faststream.subscriber import (
    DEFAULT_ACK_POLICY,
    ShareSubscriber,
    ShareSubscriberConfig,
)

__all__ = [
    "DEFAULT_ACK_POLICY",
    "ShareBroker",
    "ShareBrokerConfig",
    "ShareMessage",
    "ShareProducer",
    "SharePublishCommand",
    "SharePublisher",
    "SharePublisherConfig",
    "ShareRecord",
    "ShareSubscriber",
    "ShareSubscriberConfig",
]
