"""The state one ShareConsumer's loops share, and the operations on it.

Rules of this module:

1. Everything runs on one event loop; state changes between awaits need no locks.
   Loops never raise into the task group: a fatal error is stored in :attr:`fatal` and
   raised to the application by the next call that waits on the consumer.
2. Every decision about acknowledgements, sessions and locks is taken by one sans-I/O
   :class:`~sharecon._share.machine.ShareMachine` (the ledger's one writer). This module
   hands it the application's answers and carries out the effects it returns
   (:meth:`ConsumerCore.apply`); the fetch loops (:class:`Fetchers`, which import the
   core, never the other way round) hand it the brokers' answers.
3. Every acknowledgement outcome (success or failure, from any loop) goes through
   :meth:`ConsumerCore.report`, which feeds the user's callback and any waiting commit.
4. Every answer the application gives a record goes through :meth:`ConsumerCore.answer`.
   An answer for a record whose lock this consumer already lost (session reset, leader
   change) is reported as failed (``AckFailure.LOCK_LOST``), never raised.
5. When a session or a partition's leader is lost, its records still in the buffer are
   dropped at once (the machine says so): nobody could acknowledge them any more.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, NoReturn, Protocol, cast

import anyio

from sharecon import errors
from sharecon._consumer.buffer import Chunk, DeliveryBuffer
from sharecon._consumer.signal import Signal
from sharecon._share.effects import (
    Deliver,
    Fail,
    FetchLate,
    LockLost,
    LocksRenewed,
    NoteError,
    PartitionLost,
    RenewFailed,
    Report,
    SessionLost,
    Wake,
)
from sharecon._share.ledger import MarkResult
from sharecon._share.machine import ShareMachine
from sharecon._share.membership import Membership
from sharecon._share.requests import FetchParams
from sharecon._stats import ConsumerStats
from sharecon.protocol import ShareAcknowledgeRequest
from sharecon.record import BatchInfo, Record
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from anyio.abc import TaskGroup

    from sharecon._consumer.buffer import RecordFactory
    from sharecon._consumer.config import ConsumerConfig
    from sharecon._net.cluster import Cluster
    from sharecon._share.effects import Effect
    from sharecon._share.intake import Decoded
    from sharecon._share.ledger import AckLedger, AckResult, Delivery
    from sharecon._share.membership import AssignmentChange
    from sharecon._share.session import SessionTag
    from sharecon.metrics import ConsumerMetrics
    from sharecon.protocol.records import RecordBatch

logger = logging.getLogger("sharecon.consumer")


class Acknowledger(Protocol):
    """Where :class:`~sharecon.record.Record` answers go."""

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Apply ``ack`` to ``record``."""

    def release_later(self, record: Record, delay: float) -> None:
        """Release ``record`` ``delay`` seconds from now, keeping its lock meanwhile."""


class SessionOwner:
    """What the records of one delivery call back into: the consumer, plus the session and
    the ledger :data:`~sharecon._share.ledger.Delivery` they came from (so an answer to an
    old delivery is told apart from a newer delivery of the same offset)."""

    __slots__ = ("consumer", "delivery", "tag")

    def __init__(self, consumer: Acknowledger, tag: SessionTag, delivery: Delivery) -> None:
        self.consumer = consumer
        self.tag = tag
        self.delivery = delivery

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """Pass the answer on to the consumer."""
        self.consumer.acknowledge(record, ack)

    def release_later(self, record: Record, delay: float) -> None:
        """Pass a delayed release (``record.release(delay=...)``) on to the consumer."""
        self.consumer.release_later(record, delay)


def _owner_of(record: Record) -> SessionOwner | None:
    """The delivery a record came from (``None`` for records built by hand)."""
    owner = record._owner
    return owner if type(owner) is SessionOwner else None


def _raise_for(result: MarkResult, where: str, ack: AckType) -> None:
    """Raise what an application's answer that the ledger refused deserves."""
    if result is MarkResult.ALREADY_ACKNOWLEDGED:
        raise errors.InvalidRecordStateError(
            f"{where} was already acknowledged; cannot {ack.name.lower()} it again"
        )
    if result is MarkResult.UNKNOWN:
        raise errors.InvalidRecordStateError(
            f"{where} is not held by this consumer: it was already answered (and its answer "
            "sent), or its lock was lost and reported, or another consumer delivered it"
        )


def _batch_factory(chunk: Chunk, batch: RecordBatch) -> RecordFactory:
    """The chunk's record factory with ``batch``'s :class:`BatchInfo` bound.

    Once per batch, so nothing is added per record but one positional argument. The
    batches of one answer nearly always share leader epoch and timestamp type: the info
    and the bound factory are then reused, and the clocks are read once per chunk.
    """
    epoch = batch.partition_leader_epoch
    leader_epoch = epoch if epoch >= 0 else None
    ts_type = batch.timestamp_type
    info = chunk.batch_info
    bound = chunk.batch_factory
    if (
        info is None
        or bound is None
        or info.leader_epoch != leader_epoch
        or info.timestamp_type is not ts_type
    ):
        offset = info.clock_offset if info is not None else time.time() - anyio.current_time()
        info = chunk.batch_info = BatchInfo(leader_epoch, ts_type, offset)
        # partial of a partial is flattened into one: a record costs one call, as before.
        bound = chunk.batch_factory = partial(chunk.factory, info)
    return bound


class Fetchers(Protocol):
    """The per-leader fetch loops, as the core sees them (rule 2)."""

    def ensure(self) -> None:
        """Start a fetcher for every leader of an assigned partition that has none."""

    def wake(self, node_id: int | None = None) -> None:
        """Wake one fetcher, or all of them."""

    async def close(self) -> None:
        """Wait for the loops to stop, then close every share session."""


class _NoFetchers:
    def ensure(self) -> None:
        pass

    def wake(self, node_id: int | None = None) -> None:
        pass

    async def close(self) -> None:
        pass


#: Lock-lost answers kept for the next commit() (older ones were reported already).
_LOST_KEPT = 10_000


class ConsumerCore:
    """Shared state of one consumer: membership, ledger, buffer, fetchers (rule 1)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        task_group: TaskGroup,
        *,
        on_acknowledged: Callable[[list[AckResult]], None] | None = None,
        client_id: str = "sharecon",
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.tg = task_group
        self.membership = Membership(config.group_id, config.topics, rack_id=config.rack_id)
        #: Every decision about acknowledgements, sessions and locks (rule 2).
        self.machine = ShareMachine(
            config.group_id,
            FetchParams(
                max_wait_ms=config.max_wait_ms,
                min_bytes=config.min_bytes,
                max_bytes=config.fetch_max_bytes,
                max_records=config.max_records,
                batch_size=config.max_records,
            ),
            record_limit=config.max_records if config.acquire_mode == "record_limit" else None,
        )
        self.buffer = DeliveryBuffer(
            max_records=config.buffer_records, max_bytes=config.buffer_bytes
        )
        self.buffer.on_room = self.wake_fetchers
        self.buffer.decoder = self.decode
        self.buffer.on_drop = self._dropped
        self.buffer.admit = self._admit
        #: The per-leader fetch loops; the consumer installs the real pool.
        self.fetchers: Fetchers = _NoFetchers()
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
        #: Answers to records whose lock was lost, not yet returned by a commit() (rule 4).
        self.lost: list[AckResult] = []
        #: Errors that did not stop the consumer (corrupt batches, unreachable brokers...).
        self.errors: list[errors.KafkaError] = []
        #: What delivered records call back into (the public ShareConsumer).
        self.owner: Acknowledger | None = None
        #: Records delivered more than this many times go to the dead-letter queue instead.
        self.dlq_limit: int | None = None
        self.dead_letters: list[Record] = []
        self.dead_letter_signal = Signal()
        #: The counters behind ShareConsumer.metrics(), fed by the loops; their clock is
        #: time.monotonic (cheap, and readable from an exporter's thread).
        self.stats = ConsumerStats(time.monotonic(), client_id=client_id, group_id=config.group_id)
        #: The event loop's clock (lock deadlines are on it), read per record: the consumer
        #: sets the cheap one of sharecon._net.clock when it starts, inside its loop.
        self.clock: Callable[[], float] = anyio.current_time
        #: Also told every acknowledgement outcome (instrumentation, e.g. sharecon.otel).
        self.ack_listeners: list[Callable[[list[AckResult]], None]] = []

    def is_closing(self) -> bool:
        """Whether close() has begun (a method, so type checkers re-read it after awaits)."""
        return self.closing

    @property
    def ledger(self) -> AckLedger:
        """The machine's acknowledgement ledger, to read (only the machine writes it)."""
        return self.machine.ledger

    @property
    def renewing(self) -> dict[tuple[TopicIdPartition, int], tuple[SessionTag | None, object]]:
        """Records with a RENEW pending or in flight (read only)."""
        return self.machine.renewing

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
        failed = False
        for r in results:
            if not r.ok:
                failed = True
                logger.info("acknowledgements of %s failed: %s", r.partition, r.error())
        if failed:
            self.stats.on_ack_results(time.monotonic(), results)
        for listener in self.ack_listeners:
            try:
                listener(results)
            except Exception:
                logger.exception("an acknowledgement listener raised")
        if self.on_acknowledged is not None:
            try:
                self.on_acknowledged(results)
            except Exception:
                logger.exception("the on_acknowledged callback raised")

    # -- acknowledgements ---------------------------------------------------------------

    def answer(self, record: Record, ack: AckType) -> MarkResult:
        """Record the application's answer for ``record``: the one path every answer
        takes (rule 4). Returns what the ledger did; raises nothing for a lost lock."""
        if ack is AckType.RENEW:
            self.check_renew()
        owner = _owner_of(record)
        if owner is None:
            result = self.machine.answer(record.topic_partition, record.offset, ack, None)
        else:
            result = self.machine.answer(
                record.topic_partition, record.offset, ack, owner.delivery, owner.tag, record
            )
        if ack is AckType.RENEW and result is MarkResult.OK:
            self.stats.renewals_sent += 1
        if self.machine.effects:
            self.apply_effects()
        return result

    def accept(self, record: Record) -> None:
        """:meth:`answer` with ACCEPT, for implicit mode's once-per-record accept of the
        record the application moved on from: the same ledger step, without the checks
        only other answers need."""
        owner = record._owner
        machine = self.machine
        machine.accept(
            record.topic_partition,
            record.offset,
            owner.delivery if type(owner) is SessionOwner else None,
        )
        if machine.effects:
            self.apply_effects()

    # -- effects (rule 2) ----------------------------------------------------------------

    def apply_effects(self) -> None:
        """Carry out the machine's pending effects, in order."""
        for e in self.machine.drain():
            self.apply(e)

    def apply(self, e: Effect) -> None:
        """Carry out one effect of the machine that needs no I/O (the fetch loops carry
        out back-offs and re-routing themselves)."""
        kind = type(e)
        if kind is Report:
            self.report(cast("Report", e).results)
        elif kind is LockLost:
            self.report_lost(cast("LockLost", e).results)
        elif kind is Deliver:
            self.deliver(cast("Deliver", e))
        elif kind is Wake:
            self.fetchers.wake(cast("Wake", e).node_id)
        elif kind is SessionLost:
            lost = cast("SessionLost", e)
            dropped = self.buffer.drop(lambda c: c.tag == lost.tag)
            logger.info(
                "share consumer %s: share session %s reset (%s); dropped %d buffered chunks",
                self.member_id,
                lost.tag,
                lost.reason,
                dropped,
            )
            self.progress.set()
        elif kind is PartitionLost:
            gone = cast("PartitionLost", e)
            self.buffer.drop(lambda c: c.intake.tp == gone.tp and c.tag.node_id == gone.node_id)
            self.progress.set()
        elif kind is NoteError:
            self.note_error(cast("NoteError", e).error)
        elif kind is Fail:
            self.fail(cast("Fail", e).error)
        elif kind is LocksRenewed:
            renewed = cast("LocksRenewed", e)
            for handle in renewed.handles:
                cast("Record", handle).lock_deadline = renewed.deadline
        elif kind is FetchLate:
            self.fetch_late(cast("FetchLate", e))
        elif kind is RenewFailed:
            failed = cast("RenewFailed", e)
            # The records keep their old lock: a slow handler may lose them to another member.
            logger.warning(
                "node %d: renewing the locks of %d records failed (partitions %s)",
                failed.node_id,
                failed.count,
                ", ".join(str(tp) for tp in failed.partitions),
            )
        else:  # a back-off or re-routing outside a fetch loop: let the loops look again
            self.wake_all()

    def fetch_late(self, e: FetchLate) -> None:
        """Count a fetch that came back after its lock (or never), and say so when even one
        record cannot arrive in time (the machine's FetchLate: WARNING once per leader)."""
        self.stats.fetches_late += 1
        if not e.too_slow:
            return
        logger.log(
            logging.WARNING if e.warn else logging.DEBUG,
            "node %d: %s, longer than the %.1f s acquisition lock: records from this leader "
            "cannot arrive before their locks end (measured %.0f bytes/s)",
            e.node_id,
            e.what,
            e.lock,
            e.bytes_per_second,
        )

    def stuck(self) -> float:
        """Seconds records have waited at a leader that no fetch could deliver, when longer
        than the lock; else 0 (for ``health()``: the loop's clock, readable from any thread)."""
        return self.machine.stuck(self.clock())

    def deliver(self, e: Deliver) -> None:
        """Buffer an answer's records for the application (the machine's Deliver)."""
        tp = e.tp
        owner = SessionOwner(self.owner, e.tag, e.delivery) if self.owner is not None else None
        factory = partial(Record, tp.topic or str(tp.topic_id), tp.partition, tp, owner, e.deadline)
        chunk = Chunk(e.intake, e.tag, e.deadline, factory, e.delivery)
        limit = self.dlq_limit
        if limit is not None and any(r.delivery_count > limit for r in e.intake.ranges):
            # Records past the dead-letter limit go to the router now, not when (or if) the
            # application reaches them: decode this answer at once (a rare one: redelivered
            # past the limit).
            live: list[Record] = []
            while (d := self.decode(chunk)) is not None:
                live.extend(d.records)
                chunk.decoded += d.nbytes
            if not live:
                return
            chunk.records = live
        self.buffer.push(chunk)

    def release_held(self) -> None:
        """Release every record handed out and unanswered, and every buffered one (the
        fetchers send the releases), reporting answers to records whose lock was lost."""
        self.machine.release_held()
        self.apply_effects()
        self.buffer.clear()
        self.wake_all()

    def holds(self, record: Record) -> bool:
        """Whether ``record`` is still this consumer's to answer (its lock not lost)."""
        owner = _owner_of(record)
        delivery = owner.delivery if owner is not None else None
        return self.machine.holds(record.topic_partition, record.offset, delivery)

    def answer_all_delivered(self, ack: AckType) -> int:
        """Answer every delivered, unanswered record with ``ack`` (implicit mode), and
        report the ones whose lock was lost."""
        n = self.machine.answer_all_delivered(ack)
        self.apply_effects()
        return n

    def acknowledge(self, record: Record, ack: AckType) -> None:
        """The application's explicit answer for ``record`` (see :meth:`Record.accept`).

        :raises UnsupportedVersionError: RENEW on a broker without ShareAcknowledge v2.
        :raises InvalidRecordStateError: the record was already answered, or was never
            delivered by this consumer, or the consumer is closed.
        """
        if self.closing:
            self._raise_closed(f"{record.topic}-{record.partition} offset {record.offset}")
        result = self.answer(record, ack)
        if result is MarkResult.ALREADY_ACKNOWLEDGED or result is MarkResult.UNKNOWN:
            # The position is spelled out only here: this runs once per explicit answer.
            _raise_for(result, f"{record.topic}-{record.partition} offset {record.offset}", ack)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, ack: AckType) -> None:
        """The application's answer for the record it holds at a position (the same rules
        as :meth:`acknowledge`; RENEW is the caller's to refuse).

        :raises InvalidRecordStateError: as :meth:`acknowledge`, and for a record fetched
            but not handed out yet, or waiting for dead-letter routing.
        """
        where = f"{topic}-{partition} offset {offset}"
        if self.closing:
            self._raise_closed(where)
        held = [
            tp for tp in self.ledger.partitions() if (tp.topic, tp.partition) == (topic, partition)
        ]
        for tp in held:
            # Not handed out: the application cannot have seen it, and answering it would
            # leave a record in the buffer that is already answered.
            if self.buffer.holds(tp, offset):
                raise errors.InvalidRecordStateError(
                    f"{where} was fetched but not handed out yet; answer only records the "
                    "consumer gave you"
                )
            if any(r.offset == offset and r.topic_partition == tp for r in self.dead_letters):
                raise errors.InvalidRecordStateError(
                    f"{where} is being routed to the dead-letter topic"
                )
        result = self.machine.answer_at(held, offset, ack)
        self.apply_effects()
        _raise_for(result, where, ack)

    def _raise_closed(self, where: str) -> NoReturn:
        raise errors.InvalidRecordStateError(
            f"{where}: the consumer is closed; records it delivered and nobody answered were "
            "released"
        )

    # -- subscription -----------------------------------------------------------------------

    def unsubscribe(self) -> int:
        """Subscribe to nothing: fetch nothing more, release every buffered record, and
        let the coordinator take the assignment away (records handed out stay answerable).

        :returns: how many buffered records were released.
        """
        self.membership.unsubscribe()
        released = 0
        for chunk in self.buffer.chunks():
            released += self._release_chunk(chunk)
        self.buffer.clear()
        self.heartbeat_wake.set()
        # The sessions forget their partitions and carry the releases on the next request.
        self.fetchers.wake()
        return released

    def _admit(self, chunk: Chunk) -> bool:
        """Buffer a fetched chunk only while subscribed: a fetch answered after
        :meth:`unsubscribe` has its records released instead of handed out."""
        if self.membership.topics:
            return True
        self._release_chunk(chunk)
        self.fetchers.wake()
        return False

    def _release_chunk(self, chunk: Chunk) -> int:
        first = chunk.next_offset()
        if first is None:
            return 0
        return self.machine.release_undelivered(
            chunk.intake.tp, chunk.delivery, first, chunk.last_offset()
        )

    def report_lost(self, results: list[AckResult]) -> None:
        """Report lock-lost answers now, and keep them for the next commit() (rule 4)."""
        if not results:
            return
        if not self.collectors:
            # A commit() running now collects them itself; keep them for the next one.
            self.lost.extend(results)
            del self.lost[:-_LOST_KEPT]
        self.report(results)

    # -- records ------------------------------------------------------------------------

    def decode(self, chunk: Chunk) -> Decoded[Record] | None:
        """Decode a buffered chunk's next batch and apply what it found (the buffer calls
        this as the application reaches the batch)."""
        intake = chunk.intake
        batch = intake.next_batch()
        if batch is None:
            return None
        d = intake.decode_next(_batch_factory(chunk, batch), dead_letter_limit=self.dlq_limit)
        if d is None:
            return None
        tp = intake.tp
        if d.gaps or d.release:
            self.machine.decoded(chunk.tag, tp, d.gaps, d.release)
            self.apply_effects()
        if d.error is not None:
            self.note_error(
                errors.CorruptRecordError(
                    f"{tp.topic or tp.topic_id}-{tp.partition}: {d.error}",
                    base_offset=d.error.base_offset,
                    last_offset=d.error.last_offset,
                )
            )
        if d.dead:
            self.dead_letters.extend(d.dead)
            self.dead_letter_signal.set()
        return d

    def _dropped(self, chunk: Chunk, first: int) -> None:
        self.machine.forget(chunk.intake.tp, chunk.delivery, first, chunk.last_offset())

    def note_unreachable(self, node_id: int, exc: errors.KafkaError) -> None:
        """A broker could not be reached: keep the error where a health check can see it."""
        self.errors.append(exc)
        del self.errors[:-100]

    def can_renew(self) -> bool:
        """Whether the brokers take RENEW answers (ShareAcknowledge v2, Kafka 4.2+)."""
        version = self.cluster.versions.get(ShareAcknowledgeRequest)
        return version is not None and version >= 2

    def check_renew(self) -> None:
        """:raises UnsupportedVersionError: the brokers cannot renew locks (Kafka 4.1)."""
        # One version table for the cluster: brokers of a cluster share a release.
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
        """The assigned partitions ``node_id`` leads (none while unsubscribed, even before
        the coordinator has taken them away)."""
        if not self.membership.topics:
            return []
        return [tp for tp in self.assignment if self.leader(tp) == node_id]

    def wake_leader(self, tp: TopicIdPartition) -> None:
        """Wake the fetcher of ``tp``'s leader (acks to send)."""
        leader = self.leader(tp)
        if leader is not None:
            self.fetchers.wake(leader)

    def wake_fetchers(self) -> None:
        """Wake every fetcher (the buffer has room again)."""
        self.fetchers.wake()

    def wake_all(self) -> None:
        """Wake every fetcher and the heartbeat loop."""
        self.fetchers.wake()
        self.heartbeat_wake.set()

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
        self.fetchers.ensure()

    def pending_acks(self) -> bool:
        """Whether any live session has acknowledgements marked or in flight."""
        return self.machine.pending_acks()

    def metrics(self) -> ConsumerMetrics:
        """The counters, and the gauges read from this consumer's state now. Safe to call
        from another thread (an exporter's): it only reads."""
        buffered = self.buffer.records
        outstanding = 0
        for _ in range(3):
            try:
                outstanding = self.ledger.outstanding_all()
                break
            except RuntimeError:  # the loop changed the ledger while another thread read it
                continue
        return self.stats.snapshot(
            time.monotonic(),
            assigned_partitions=len(self.assignment),
            buffered_records=buffered,
            buffered_bytes=self.buffer.nbytes,
            # What the member holds beyond its buffer: handed out, not yet confirmed.
            held_records=max(0, outstanding - buffered),
            lock_expired=self.buffer.expired,
            renewals_failed=self.machine.renewals_failed,
        )
