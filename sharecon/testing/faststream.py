"""``TestShareClient``: a FastStream app's share broker against an in-process
:class:`~sharecon.testing.FakeKafka`, for users' tests (the ``faststream`` extra).

FastStream's own test clients call handlers directly; this one keeps the network path and
runs the real broker against the fake, whose share-group semantics (locks, delivery
counts, releases, rejects) are the model broker's, held true against real Kafka. It
starts in milliseconds and needs no JVM::

    async with TestShareClient(broker) as br:
        await br.publish({"id": 1}, "orders")
        ...
        handle.mock.assert_called_once_with({"id": 1})
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from sharecon.testing.fake import FakeKafka

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

    from sharecon.faststream import ShareBroker

__all__ = ["TestShareClient"]


class TestShareClient:
    """Runs ``broker`` against a fresh :class:`FakeKafka` while the ``async with`` lasts.

    On entry the fake is started, every topic the broker's subscribers and publishers name
    is created (and each subscriber's dead-letter topic is created on first use), each
    share group is set to read from the earliest offset, the broker is pointed at the fake
    and started, and each handler gets a ``mock`` (``handler.mock``) recording the decoded
    bodies it was called with. On exit the broker stops and the fake with it.

    :param version: the Kafka line the fake imitates (``"4.1"`` .. ``"4.4"``).
    :param partitions: partitions of each topic created.
    :param group_configs: more share-group configs for every group
        (e.g. ``{"share.delivery.count.limit": "3"}``).
    """

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(
        self,
        broker: ShareBroker,
        *,
        version: str = "4.4",
        partitions: int = 1,
        group_configs: Mapping[str, str] | None = None,
    ) -> None:
        self.broker = broker
        self.fake = FakeKafka(version)
        self._partitions = partitions
        self._group_configs = dict(group_configs or {})
        self._saved_bootstrap: Any = None
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> ShareBroker:
        from sharecon.faststream import ShareSubscriber

        broker = self.broker
        config = broker.config.broker_config
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(self.fake)
            prefix = config.prefix
            topics: dict[str, None] = {}
            for sub in broker.subscribers:
                if isinstance(sub, ShareSubscriber):
                    topics.update(dict.fromkeys(f"{prefix}{t}" for t in sub.topics))
                    self.fake.configure_group(
                        sub.group_id, {"share.auto.offset.reset": "earliest", **self._group_configs}
                    )
            for pub in broker.publishers:
                topics[getattr(pub, "topic", "")] = None
            for name in topics:
                if name:
                    self.fake.create_topic(name, self._partitions)
            self._saved_bootstrap = config.bootstrap
            config.bootstrap = self.fake.bootstrap
            stack.callback(self._restore)
            await broker.start()
            stack.push_async_callback(broker.stop)
            for sub in broker.subscribers:
                for call in sub.calls:
                    call.handler.set_test()
            stack.callback(self._reset_mocks)
            self._stack = stack.pop_all()
        return broker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    def _restore(self) -> None:
        self.broker.config.broker_config.bootstrap = self._saved_bootstrap

    def _reset_mocks(self) -> None:
        for sub in self.broker.subscribers:
            for call in sub.calls:
                call.handler.reset_test()
