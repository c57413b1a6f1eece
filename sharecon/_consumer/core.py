"""The state one ShareConsumer's loops share, and the operations on it.

Rules of this module:

1. Everything runs on one event loop; state changes between awaits need no locks.
   Loops never raise into the task group: a fatal error is stored in :attr:`fatal` and
   raised to the application by the next call that waits on the consumer.
2. Acknowledgement state lives in one :class:`~sharecon._share.ledger.AckLedger`; each
   leader broker's share session lives in its :class:`~sharecon._consumer.fetcher.NodeFetcher`.
3. Every acknowledgement outcome (success or failure, from any loop) goes through
   :meth:`ConsumerCore.report`, which feeds the user's callback and any waiting commit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon import errors
from sharecon._consumer.buffer import DeliveryBuffer
from sharecon._consumer.signal import Signal
from sharecon._share.ledger import AckLedger, MarkResult
from sharecon._share.membership import Membership
from sharecon.protocol import ShareAcknowledgeRequest
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from anyio.abc import TaskGroup

    from sharecon._consumer.config import ConsumerConfig
    from sharecon._consumer.fetcher import NodeFetcher
    from sharecon._net.cluster import Cluster
    from sharecon._share.ledger import AckResult
    from sharecon._share.membership import AssignmentChange
    from sharecon.record import Record

logger = logging.getLogger("sharecon.consumer")


class Acknowledger(Protocol):
    """Where :class:`~sharecon.record.Record` answers go."""

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Apply ``ack`` to ``record``."""


class ConsumerCore:
    """Shared state of one consumer: membership, ledger, buffer, fetchers (rule 1)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        task_group: TaskGroup,
        *,
        on_acknowledged: Callable[[list[AckResult]], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.tg = task_group
        self.membership = Membership(config.group_id, config.topics, rack_id=config.rack_id)
        self.ledger = AckLedger()
        self.buffer = DeliveryBuffer(
            max_records=config.buffer_records, max_bytes=config.buffer_bytes
        )
        self.buffer.on_room = self.wake_fetchers
        self.fetchers: dict[int, NodeFetcher] = {}
        #: The assigned partitions, with topic names resolved.
        self.assignment: frozenset[TopicIdPartition] = frozenset()
        self.heartbeat_wake = Signal()
        #: Set after every answered share request; commit() waits on it.
        self.progress = Signal()
        #: Set once the member has joined (or failed to).
        self.joined = anyio.Event()
        self.fatal: BaseException | None = None
        self.closing = False
        self.flush_requested = 0
        self.on_acknowledged = on_acknowledged
        self.collectors: list[list[AckResult]] = []
        #: Records with a RENEW in flight or pending, to move their lock deadline.
        self.renewing: dict[tuple[TopicIdPartition, int], Record] = {}
        #: Errors that did not stop the consumer (corrupt batches, authorization on a topic).
        self.errors: list[errors.KafkaError] = []
        #: What delivered records call back into (the public ShareConsumer).
        self.owner: Acknowledger | None = None
        #: Records delivered more than this many times go to the dead-letter queue instead.
        self.dlq_limit: int | None = None
        self.dead_letters: list[Record] = []
        self.dead_letter_signal = Signal()

    def is_closing(self) -> bool:
        """Whether close() has begun (a method, so type checkers re-read it after awaits)."""
        return self.closing

    @property
    def member_id(self) -> str:
        """This consumer's member id (fixed for its lifetime)."""
        return self.membership.member_id

    # -- failures and results ----------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """Stop the consumer with ``exc``: the application's next wait raises it (rule 1)."""
        if self.fatal is None:
            logger.error("share consumer %s failed: %s", self.member_id, exc)
            self.fatal = exc
        self.buffer.data.set()
        self.joined.set()
        self.progress.set()
        self.wake_all()

    def note_error(self, exc: errors.KafkaError) -> None:
        """Record an error that does not stop the consumer (it is logged and kept)."""
        logger.warning("share consumer %s: %s", self.member_id, exc)
        self.errors.append(exc)
        del self.errors[:-100]

    def report(self, results: Iterable[AckResult]) -> None:
        """Hand acknowledgement outcomes to the callback and to waiting commits (rule 3)."""
        results = list(results)
        if not results:
            return
        for collector in self.collectors:
            collector.extend(results)
        for r in results:
            if not r.ok:
                logger.info("acknowledgements of %s failed: %s", r.partition, r.error())
        if self.on_acknowledged is not None:
            try:
                self.on_acknowledged(results)
            except Exception:
                logger.exception("the on_acknowledged callback raised")

    # -- acknowledgements ---------------------------------------------------------------

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Record the application's answer for ``record`` (see :meth:`Record.accept`).

        :raises UnsupportedVersionError: RENEW on a broker without ShareAcknowledge v2.
        :raises InvalidRecordStateError: the record is not held by this consumer (already
            answered, or never delivered by it).
        """
        tp = record.topic_partition
        if ack is AckType.RENEW:
            self._check_renew(tp)
        result = self.ledger.mark(tp, record.offset, ack)
        if result is MarkResult.OK:
            if ack is AckType.RENEW:
                self.renewing[(tp, record.offset)] = record
                self.wake_leader(tp)
            else:
                self.answered()
            return
        if result is MarkResult.DEAD:
            # The lock is gone (session reset or leader change): the broker will redeliver.
            logger.debug("%s offset %d: acknowledgement dropped, lock lost", tp, record.offset)
            return
        if result is MarkResult.ALREADY_ACKNOWLEDGED:
            raise errors.InvalidRecordStateError(
                f"{record.topic}-{record.partition} offset {record.offset} was already "
                f"acknowledged; cannot {ack.name.lower()} it again"
            )
        raise errors.InvalidRecordStateError(
            f"{record.topic}-{record.partition} offset {record.offset} is not held by this "
            "consumer (already finished, or delivered by another consumer)"
        )

    def _check_renew(self, tp: TopicIdPartition) -> None:
        del tp  # one version table for the cluster: brokers of a cluster share a release
        version = self.cluster.versions.get(ShareAcknowledgeRequest)
        if version is None or version < 2:
            offered = "none" if version is None else f"v{version}"
            raise errors.UnsupportedVersionError(
                f"renew() needs ShareAcknowledge v2 (Kafka 4.2 or newer); the broker offers {offered}"
            )

    # -- routing ------------------------------------------------------------------------

    def leader(self, tp: TopicIdPartition) -> int | None:
        """The node currently leading ``tp`` (``None`` if unknown)."""
        return self.cluster.metadata.leader_for(tp.topic_id, tp.partition)

    def partitions_for(self, node_id: int) -> list[TopicIdPartition]:
        """The assigned partitions ``node_id`` leads."""
        return [tp for tp in self.assignment if self.leader(tp) == node_id]

    def wake_leader(self, tp: TopicIdPartition) -> None:
        """Wake the fetcher of ``tp``'s leader (acks to send)."""
        leader = self.leader(tp)
        fetcher = self.fetchers.get(leader) if leader is not None else None
        if fetcher is not None:
            fetcher.wake.set()

    def answered(self) -> None:
        """The application answered records: wake fetchers waiting for that (they are dry)."""
        for f in self.fetchers.values():
            if f.dry:
                f.dry = False
                f.wake.set()

    def wake_fetchers(self) -> None:
        """Wake every fetcher (the buffer has room again)."""
        for f in self.fetchers.values():
            f.wake.set()

    def wake_all(self) -> None:
        """Wake every fetcher and the heartbeat loop."""
        for f in self.fetchers.values():
            f.wake.set()
        self.heartbeat_wake.set()

    def ensure_fetchers(self) -> None:
        """Start a fetcher for every leader of an assigned partition that has none."""
        from sharecon._consumer.fetcher import NodeFetcher

        for tp in self.assignment:
            leader = self.leader(tp)
            if leader is not None and leader >= 0 and leader not in self.fetchers:
                fetcher = NodeFetcher(self, leader)
                self.fetchers[leader] = fetcher
                self.tg.start_soon(fetcher.run, name=f"sharecon fetcher node {leader}")
        self.wake_all()

    async def apply_assignment(self, change: AssignmentChange) -> None:
        """Take a new assignment: resolve topic ids to names, route to leaders."""
        ids = {tp.topic_id for tp in change.assigned}
        names = self.cluster.metadata.topic_names
        if not ids <= names.keys() or any(
            self.leader(tp) is None for tp in change.assigned if tp.topic_id in names
        ):
            await self.cluster.refresh_metadata(self.membership.topics, topic_ids=ids)
            names = self.cluster.metadata.topic_names
        self.assignment = frozenset(
            TopicIdPartition(tp.topic_id, tp.partition, names.get(tp.topic_id))
            for tp in change.assigned
        )
        logger.info(
            "share consumer %s assigned %d partitions (+%d -%d)",
            self.member_id,
            len(self.assignment),
            len(change.added),
            len(change.removed),
        )
        self.ensure_fetchers()

    def pending_acks(self) -> bool:
        """Whether any live session has acknowledgements marked or in flight."""
        for f in self.fetchers.values():
            tag = f.session.tag
            if self.ledger.has_marked(tag) or self.ledger.in_flight(tag):
                return True
        return False
