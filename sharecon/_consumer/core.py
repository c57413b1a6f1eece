"""The wiring of one ShareConsumer: its machine, buffer, loops and signals, and the
machine's effects carried out.

Rules of this module:

1. It decides nothing. Every rule about records, answers, sessions, locks and dead letters
   is the sans-I/O :class:`~sharecon._share.machine.ShareMachine`'s (the ledger's one
   writer) or :mod:`sharecon._share.answers`'s; this module hands them the application's
   answers, carries out the effects they return (:meth:`ConsumerCore.apply`), and logs.
   The fetch loops (which import this module, never the other way round) hand the machine
   the brokers' answers.
2. Everything runs on one event loop; state changes between awaits need no locks. Loops
   never raise into the task group: a fatal error is stored in :attr:`~ConsumerCore.fatal`
   and raised to the application by the next call that waits on the consumer.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

import anyio

from sharecon._consumer import observe
from sharecon._consumer.buffer import DeliveryBuffer
from sharecon._consumer.closing import release_held
from sharecon._consumer.effect_port import carry_out
from sharecon._consumer.handout import Handout
from sharecon._consumer.signal import Signal
from sharecon._share import effects as fx
from sharecon._share.answers import Outcomes, renew_refusal
from sharecon._share.expiry import ExpiryNotice, ExpiryWarning
from sharecon._share.machine import ShareMachine
from sharecon._share.membership import Membership
from sharecon._share.reach import unreachable
from sharecon._share.renew_refusals import RenewRefusals
from sharecon._share.requests import FetchParams
from sharecon._stats import ConsumerStats
from sharecon.protocol import ShareAcknowledgeRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from sharecon import errors
    from sharecon._consumer.config import ConsumerConfig
    from sharecon._net.cluster import Cluster
    from sharecon._share.ledger import AckLedger, AckResult
    from sharecon.metrics import ConsumerMetrics
    from sharecon.types import AckType, TopicIdPartition

logger = logging.getLogger("sharecon.consumer")


class Fetchers(Protocol):
    """The per-leader fetch loops, as the core sees them."""

    def ensure(self) -> None:
        """Start a fetcher for every leader of an assigned partition that has none."""

    def wake(self, node_id: int | None = None) -> None:
        """Wake one fetcher, or all of them."""

    async def close(self, timeout: float | None = None) -> None:
        """Wait for the loops to stop, then close every share session, the final
        requests' answers awaited ``timeout`` seconds in all at most."""


class _NoFetchers:
    def ensure(self) -> None:
        pass

    def wake(self, node_id: int | None = None) -> None:
        pass

    async def close(self, timeout: float | None = None) -> None:
        pass


class ConsumerCore:
    """One consumer's machine, buffer, loops and signals (rules 1-2)."""

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
        limit = config.max_records if config.acquire_mode == "record_limit" else None
        params = FetchParams(
            max_wait_ms=config.max_wait_ms,
            min_bytes=config.min_bytes,
            max_bytes=config.fetch_max_bytes,
            max_records=config.max_records,
            batch_size=config.max_records,
        )
        self.machine = ShareMachine(config.group_id, params, record_limit=limit)
        self.buffer = DeliveryBuffer(
            max_records=config.buffer_records, max_bytes=config.buffer_bytes
        )
        self.buffer.on_room = self.wake_fetchers
        #: Records whose locks ended in the buffer: counted, and said (WARNING, once a minute).
        self.expiry = ExpiryNotice()
        #: Records released at once because they could not be reached in time (batch
        #: acquisition, :mod:`sharecon._share.reach`).
        self.released_unreachable = 0
        self.buffer.on_expired = self._expired_in_buffer
        # Only at the default record bound: an explicit one stays strict.
        self.buffer.overlap = config.max_buffered_records == 0
        #: The buffer's side: deliveries buffered, decoded, dropped (``handout.owner``: what
        #: the records call back into, the public ShareConsumer).
        self.handout = Handout(self.machine, self.buffer, self.apply_effects, self.check_renew)
        # Refused renewals repeat every keeper tick for the same records: tell each once.
        self._renew_refusals = RenewRefusals()
        #: The counters behind ShareConsumer.metrics(); their clock is time.monotonic.
        self.stats = ConsumerStats(time.monotonic(), client_id=client_id, group_id=config.group_id)
        #: Where acknowledgement outcomes go: commits, listeners, ``on_acknowledged``.
        self.outcomes = Outcomes(on_acknowledged)
        self.outcomes.on_failed = partial(observe.acks_failed, self.stats)
        self.outcomes.on_raised = observe.raised
        #: Told of every share session incarnation that ended (instrumentation: the fault
        #: tests' tally learns when the broker ended a session by itself).
        self.session_listeners: list[Callable[[fx.SessionLost], None]] = []
        #: Buffered records dropped, never handed out, because their share session ended
        #: or their partition's leadership moved (``ConsumerHealth.lost_unseen``).
        self.lost_unseen = 0
        #: The per-leader fetch loops; the consumer installs the real pool.
        self.fetchers: Fetchers = _NoFetchers()
        #: The assigned partitions, with topic names resolved.
        self.assignment: frozenset[TopicIdPartition] = frozenset()
        # partitions_for()'s answers, and the metadata snapshot and assignment they hold for.
        self._routes: dict[int, tuple[TopicIdPartition, ...]] = {}
        self._routed_metadata: object = None
        self._routed_assignment: object = None
        self.heartbeat_wake = Signal()
        #: Set after every answered share request; commit() waits on it.
        self.progress = Signal()
        #: Set once the member has joined (or failed to).
        self.joined = anyio.Event()
        self.fatal: BaseException | None = None
        self.flush_requested = 0
        #: Errors that did not stop the consumer (corrupt batches, unreachable brokers...).
        self.errors: list[errors.KafkaError] = []
        self.dead_letter_signal = Signal()
        #: The event loop's clock (lock deadlines are on it), read per record: the consumer
        #: sets the cheap one of sharecon._net.clock when it starts, inside its loop.
        self.clock: Callable[[], float] = anyio.current_time

    @property
    def closing(self) -> bool:
        """Whether close() has begun (the machine refuses answers from then on)."""
        return self.machine.closing

    @closing.setter
    def closing(self, value: bool) -> None:
        self.machine.closing = value

    def is_closing(self) -> bool:
        """:attr:`closing` (a method, so type checkers re-read it after awaits)."""
        return self.machine.closing

    @property
    def ledger(self) -> AckLedger:
        """The machine's acknowledgement ledger, to read (only the machine writes it)."""
        return self.machine.ledger

    @property
    def member_id(self) -> str:
        """This consumer's member id (fixed for its lifetime)."""
        return self.membership.member_id

    def fail(self, exc: BaseException) -> None:
        """Stop the consumer with ``exc``: the application's next wait raises it (rule 2)."""
        if self.fatal is None:
            logger.error("share consumer %s failed: %s", self.member_id, exc)
            self.fatal = exc
        self.buffer.data.set()
        self.joined.set()
        self.progress.set()
        self.wake_all()

    def note_error(self, exc: errors.KafkaError) -> None:
        """Record an error that does not stop the consumer (logged, the last 100 kept)."""
        logger.warning("share consumer %s: %s", self.member_id, exc)
        self.note_unreachable(-1, exc)

    def note_unreachable(self, node_id: int, exc: errors.KafkaError) -> None:
        """A broker could not be reached: keep the error where a health check can see it
        (the fetch loop logged it)."""
        self.errors.append(exc)
        del self.errors[:-100]

    # -- the application's answers (the records' own go through ``handout``) ---------------

    def answer_all_delivered(self, ack: AckType) -> int:
        """Answer every delivered, unanswered record with ``ack`` (implicit mode)."""
        n = self.machine.answer_all_delivered(ack)
        self.apply_effects()
        return n

    def release_held(self, why: str = "leaving the group for idleness") -> None:
        """Release every record handed out and unanswered, and every buffered one (those
        never handed out are counted and said: ``why`` names the occasion)."""
        unseen = release_held(self.machine, self.buffer, self.apply_effects)
        if unseen:
            observe.released_unseen(self.member_id, unseen, why, self.buffer.max_records)
        self.wake_all()

    def can_renew(self) -> bool:
        """Whether the brokers take RENEW answers (ShareAcknowledge v2, Kafka 4.2+)."""
        return renew_refusal(self.cluster.versions.get(ShareAcknowledgeRequest)) is None

    def check_renew(self) -> None:
        """:raises UnsupportedVersionError: the brokers cannot renew locks (Kafka 4.1)."""
        # One version table for the cluster: brokers of a cluster share a release.
        err = renew_refusal(self.cluster.versions.get(ShareAcknowledgeRequest))
        if err is not None:
            raise err

    # -- subscription -----------------------------------------------------------------------

    def subscribe(self, topics: tuple[str, ...]) -> None:
        """Subscribe to ``topics``; the next heartbeat tells the coordinator."""
        self.membership.subscribe(topics)
        self.machine.subscribe()
        self.heartbeat_wake.set()

    def unsubscribe(self) -> int:
        """Subscribe to nothing: fetch nothing more, release every buffered record (records
        handed out stay answerable); returns how many were released."""
        self.membership.unsubscribe()
        released = self.machine.unsubscribe(self.buffer.waiting())
        self.buffer.clear()
        self.heartbeat_wake.set()
        self.apply_effects()  # the sessions carry the releases on their next request
        return released

    # -- effects (rule 1) -------------------------------------------------------------------

    def apply_effects(self) -> None:
        """Carry out the machine's pending effects, in order."""
        for e in self.machine.drain():
            self.apply(e)

    def apply(self, e: fx.Effect) -> None:
        """Carry out one effect that needs no I/O (the fetch loops carry out back-offs and
        re-routing themselves): :func:`~sharecon._consumer.effect_port.carry_out`, which
        the simulator runs too, with this core as its port."""
        carry_out(e, self.buffer, self)

    # -- the effect port (sharecon._consumer.effect_port) --------------------------------

    def report(self, results: list[AckResult], *, lost: bool) -> None:
        """Acknowledgement outcomes, to commits, listeners and ``on_acknowledged``."""
        if lost:
            self.outcomes.report_lost(results)
        else:
            self.outcomes.report(results)

    def deliver(self, e: fx.Deliver) -> None:
        """An answer's records, buffered for the application."""
        self.handout.deliver(e)

    def wake(self, node_id: int | None) -> None:
        """Wake one fetcher (or all of them)."""
        self.fetchers.wake(node_id)

    def session_lost(self, e: fx.SessionLost, dropped: int) -> None:
        """A session incarnation is over (its buffered chunks dropped)."""
        observe.session_lost(self.member_id, e, dropped)
        self.lost_unseen += dropped
        for listener in self.session_listeners:
            listener(e)
        self.progress.set()

    def partition_lost(self, e: fx.PartitionLost, dropped: int) -> None:
        """A partition's locks on one leader are lost (its chunks from there dropped)."""
        self.lost_unseen += dropped
        self.progress.set()

    def look_again(self) -> None:
        """A back-off or re-routing outside a fetch loop: let the loops look again."""
        self.wake_all()

    def other(self, e: fx.Effect) -> None:
        """The effects only the consumer acts on: errors kept, the dead-letter router
        woken, records out of reach released, counters and log lines."""
        kind = type(e)
        if kind is fx.NoteError:
            self.note_error(cast("fx.NoteError", e).error)
        elif kind is fx.DeadLetters:
            self.dead_letter_signal.set()
        elif kind is fx.FetchLate:
            observe.fetch_late(self.stats, cast("fx.FetchLate", e))
        elif kind is fx.PartitionBlocked:
            observe.partition_blocked(cast("fx.PartitionBlocked", e))
        elif kind is fx.Reach:
            self._release_unreachable()
        elif kind is fx.RenewFailed:
            # The records keep their old lock: a slow handler may lose them to another member.
            failed = cast("fx.RenewFailed", e)
            observe.renew_failed(failed, self._renew_refusals.news(failed.records))

    # -- routing ----------------------------------------------------------------------------

    def leader(self, tp: TopicIdPartition) -> int | None:
        """The node currently leading ``tp`` (``None`` if unknown)."""
        return self.cluster.metadata.leader_for(tp.topic_id, tp.partition)

    def partitions_for(self, node_id: int) -> tuple[TopicIdPartition, ...]:
        """The assigned partitions ``node_id`` leads (none while unsubscribed).

        Every fetch loop asks this once per request: the answer is computed for every
        leader at once and kept until the metadata snapshot (leaders move only in a new
        one) or the assignment changes, both replaced whole, never mutated in place.
        """
        if not self.machine.subscribed:
            return ()
        metadata = self.cluster.metadata
        assignment = self.assignment
        if metadata is not self._routed_metadata or assignment is not self._routed_assignment:
            routes: dict[int, list[TopicIdPartition]] = {}
            leader_for = metadata.leader_for
            for tp in assignment:  # the assignment's order, as before
                leader = leader_for(tp.topic_id, tp.partition)
                if leader is not None:
                    routes.setdefault(leader, []).append(tp)
            self._routes = {node: tuple(tps) for node, tps in routes.items()}
            self._routed_metadata = metadata
            self._routed_assignment = assignment
        return self._routes.get(node_id, ())

    def wake_leader(self, tp: TopicIdPartition) -> None:
        """Wake the fetcher of ``tp``'s leader (acks to send)."""
        leader = self.leader(tp)
        if leader is not None:
            self.fetchers.wake(leader)

    def records_wanted(self) -> None:
        """The application waits for records: answers waiting for room or gathering after
        empty fetches go now (rules 1 and 2 of :mod:`sharecon._share.fetch_policy`)."""
        self.machine.records_wanted()
        self.apply_effects()

    def wake_fetchers(self) -> None:
        """Wake every fetcher (the buffer has room again)."""
        self.fetchers.wake()

    def wake_all(self) -> None:
        """Wake every fetcher and the heartbeat loop."""
        self.fetchers.wake()
        self.heartbeat_wake.set()

    def _release_unreachable(self) -> None:
        """Batch acquisition: release at once the buffered answers the application cannot
        reach before their locks end (:mod:`sharecon._share.reach`)."""
        machine = self.machine
        if machine.closing or self.buffer.stopped:
            return
        chunks = self.buffer.chunks()
        spans = [(c.deadline, c.intake.acquired + len(c.records) - c.pos) for c in chunks]
        doomed = unreachable(self.clock(), machine.handling()[0], spans)
        if not doomed:
            return
        released = 0
        for i in doomed:
            chunk = chunks[i]
            first = chunk.next_offset()
            if first is None:
                continue
            tp = chunk.intake.tp
            released += machine.release_undelivered(tp, chunk.delivery, first, chunk.last_offset())
            self.buffer.drop(partial(_same, chunk))
        self.released_unreachable += released
        observe.released_unreachable(self.member_id, released, machine.handling()[0])
        self.wake_all()

    def _expired_in_buffer(self, count: int) -> None:
        """``count`` buffered records' locks ended before the application reached them."""
        self._say_expired(self.expiry.expired(self.clock(), count))

    def tick_expiry(self, *, closing: bool = False) -> None:
        """Say expiries held back by the once-a-minute rule once the minute passed, or
        (``closing``) now: counted ones are never left unsaid (rule 3 of .expiry)."""
        expiry = self.expiry
        self._say_expired(expiry.flush() if closing else expiry.tick(self.clock()))

    def _say_expired(self, said: ExpiryWarning | None) -> None:
        if said is not None:
            rate, lock = self.machine.handling()
            observe.expired_in_buffer(
                self.member_id, said, rate, lock, self.buffer.records, self.config.acquire_mode
            )

    def stuck(self) -> float:
        """Seconds records waited at a leader no fetch could deliver, when longer than the
        lock; else 0 (for ``health()``: readable from any thread)."""
        return self.machine.stuck(self.clock())

    def blocked(self) -> tuple[str, ...]:
        """Why partitions are no longer fetched (batches that cannot arrive within the
        lock: :mod:`sharecon._share.oversize`), a sentence each; for ``health()``."""
        return tuple(self.machine.blocked())

    def pending_acks(self) -> bool:
        """Whether any live session has acknowledgements marked or in flight."""
        return self.machine.pending_acks()

    def metrics(self) -> ConsumerMetrics:
        """The counters, and the gauges read now. Safe from another thread: it only reads."""
        return observe.metrics(
            self.stats, self.machine, self.buffer, len(self.assignment), self.lost_unseen
        )


def _same(one: object, other: object) -> bool:
    return one is other
