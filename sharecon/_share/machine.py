"""One member's share sessions as a sans-I/O machine: events in, effects out.

The machine owns everything that decides what happens to a record between the broker and
the application: the acknowledgement ledger (its one writer), each leader's share
session and fetch planner, the strict record budget, renewals, lock deadlines, lost
answers and the order an answer's parts are applied in. Its driver (the consumer's fetch
loops) only sends, waits and carries out the effects (:mod:`.effects`).

Events are method calls: :meth:`ShareMachine.next_turn` (what to send), :meth:`~ShareMachine.sent`
(a request went out at time ``now``), :meth:`~ShareMachine.fetch_answered` and
:meth:`~ShareMachine.fetch_records` (a ShareFetch answer), :meth:`~ShareMachine.acknowledge_answered`,
:meth:`~ShareMachine.transport_failed`, :meth:`~ShareMachine.connection_lost`,
:meth:`~ShareMachine.answer_failed`, and the application's answers (:meth:`~ShareMachine.answer`
and friends). Effects collect in :attr:`ShareMachine.effects`; :meth:`~ShareMachine.drain`
hands them over, in order.

Rules of this module:

1. One request in flight per session. A ShareFetch answer is applied in this order:
   its session part and acknowledgement codes (:meth:`~ShareMachine.fetch_answered`);
   then, when the driver will pipeline, the offsets it acquired end what the member
   still held of them from earlier deliveries (the *supersede* rule), so the next
   request, planned after this, carries no answer to an earlier delivery that the broker
   would apply to the new acquisition; then the next request is planned and sent; and
   only then are the answer's records taken in (:meth:`~ShareMachine.fetch_records`).
   An answer with an inverted acquired range is never pipelined: what it acquired is
   hidden, so nothing could be superseded; its records then fail to be taken in, and
   its session with them, so no answer of that session is sent again.
2. Lock deadlines count from when the fetch was *sent* (:meth:`~ShareMachine.sent`),
   never later than the broker's own, however long the answer took to be read; so do
   renewed ones, from when the renew was sent.
3. A session reset or a transport failure fails the acknowledgements of that session
   incarnation (reported, never re-sent) and drops its buffered records
   (:class:`~.effects.SessionLost`); a leader change does the same for one partition.
   Records of a partition that a leader delivers while the member still holds records
   of it from another leader mean the partition moved: the other leader's buffered
   records of it are dropped then (:class:`~.effects.PartitionLost`), before that
   leader's own answer says so, so none is handed out with a lock already gone. Which
   delivery is the newer goes by when its fetch was *sent*: a fetch names a partition
   only once the member believes the node leads it, so the new leader's fetch went out
   after the move, and the old leader acquired before it. An answer from another leader
   to a fetch sent before the one whose records of the partition were last taken in
   (stalled on its way while the partition moved) is stale for that partition: its
   records of it are not taken in (not superseding, not dropping the newer ones), and
   are counted (:attr:`~ShareMachine.stale_records`). The *same* leader acquiring again
   offsets the session still holds, unanswered, under locks that cannot have expired
   yet (their deadline is still ahead when the answer is read) means that leader lost
   its locks on the partition (it moved away and back): everything the session held of
   it is lost then (:class:`~.effects.PartitionLost`, before the new delivery).
4. An answer to a record whose lock was lost is reported as lost
   (:class:`~.effects.LockLost`), never raised.
5. Deterministic: no I/O, no clock (time is the caller's ``now``), no randomness.
6. The application's explicit answers are refused (raised, :mod:`.answers`) once the
   member is :attr:`~ShareMachine.closing`, when already answered or never held, and,
   by position, while the record is still buffered or waiting for dead-letter routing.
7. Records delivered more than :attr:`~ShareMachine.dead_letter_limit` times are not
   handed out: they wait in :attr:`~ShareMachine.dead_letters` for the router
   (:class:`~.effects.DeadLetters`); an answer holding any is decoded at once
   (``Deliver.eager``). Only those the application was handed and gave back as failed on
   an earlier delivery (:meth:`~ShareMachine.note_failed`; a delayed retry is no failure),
   unless :attr:`~ShareMachine.route_unseen`: a record whose earlier attempts
   were spent where the application never saw it (a lock that ended in a buffer,
   prefetched records released at a close, another member's crash) is handed out once
   more, and counted (:attr:`~ShareMachine.past_limit_unseen`).
8. While unsubscribed (:attr:`~ShareMachine.subscribed` false), records are not buffered
   for the application (:meth:`~ShareMachine.admit`): they are released instead (those
   past the dead-letter limit still go to the router).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from sharecon import errors
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition

from .acks import batches_from_runs
from .acquired import lock_deadline
from .answers import closed, dead_letter_pending, not_handed_out, position, refusal
from .effects import (
    BackOff,
    DeadLetters,
    Deliver,
    Fail,
    FetchLate,
    LockLost,
    LocksRenewed,
    NoteError,
    PartitionBlocked,
    PartitionLost,
    Reach,
    Rediscover,
    RenewFailed,
    Report,
    SessionLost,
    Wake,
)
from .fetch_policy import (
    ACK_HOLD_MARGIN,
    Action,
    FetchPlanner,
    Turn,
    answer_verdict,
    connection_lost,
    partition_action,
    renewed,
    transport_failed,
)
from .fetch_size import DEFAULT_LOCK, MIN_BYTES, FetchSizer
from .intake import Deliverable, InvalidAnswer, R, take_partition

# Taken and SharePlan are real imports, not under TYPE_CHECKING: the compiled build
# (mypyc) looks up the dataclass fields' annotations when the module is imported.
from .ledger import (
    MARK_ALREADY_ACKNOWLEDGED,
    MARK_DEAD,
    MARK_OK,
    MARK_UNKNOWN,
    AckFailure,
    AckLedger,
    AckResult,
    MarkResult,
    Taken,
)
from .oversize import PROBE_LOCKS, Blocked, OversizeGuard
from .partition_ids import topic_partition
from .record_limit import HandlingRate, RecordBudget, hold_limit
from .requests import (
    FetchParams,
    acknowledge_codes,
    fetch_ack_codes,
    share_acknowledge_request,
    share_fetch_request,
)
from .session import RequestKind, SharePlan, ShareSession

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Container, Iterable, Mapping, Sequence

    from sharecon.protocol import (
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchRequest,
        ShareFetchResponse,
    )
    from sharecon.protocol.messages import share_fetch as sf

    from .effects import Effect
    from .intake import Decoded
    from .ledger import Delivery
    from .session import SessionTag

__all__ = ["FetchAnswer", "InFlight", "Leader", "ShareMachine"]


def _offset(record: Deliverable) -> int:
    return record.offset


# Read per record (accept, answer, acknowledge): Final, the compiled build takes them from a C static
# rather than the module's dict and EnumType.__getattr__.
_ACCEPT: Final = AckType.ACCEPT
_ACCEPT_CODE: Final = int(AckType.ACCEPT)
_RELEASE: Final = AckType.RELEASE
_RENEW: Final = AckType.RENEW

#: No ceiling on the batch-mode hold (rule 3 of .reach): only the rate and the lock.
_NO_CEILING = 1 << 62

#: Released records remembered for rule 7 (a record released more than this many
#: releases ago is treated as unseen: handed out once more rather than routed).
_SEEN_MAX = 100_000


@dataclass(slots=True)
class InFlight:
    """A request on the wire: what it carries and when it was sent (rule 2)."""

    node_id: int
    plan: SharePlan
    taken: Taken | None
    sent_at: float
    may_wait: bool
    #: Records a strict record limit reserved for this fetch; 0 once settled.
    granted: int = 0
    #: The MaxWaitMs it was sent with, when below the configured one (records parked).
    wait_ms: int | None = None
    #: A probe of partitions whose fetch got no answer (:mod:`.oversize`).
    probe: bool = False
    #: How long the driver awaits the answer (:meth:`ShareMachine.fetch_timeout`).
    timeout: float = 0.0
    #: When its answer was read (:meth:`ShareMachine.fetch_answered`): the broker
    #: acquired the answer's records no later (rule 3).
    answered_at: float = float("inf")


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """What the session part of a ShareFetch answer said (:meth:`ShareMachine.fetch_answered`).

    ``proceed``: take the records in (:meth:`ShareMachine.fetch_records`) — after sending
    the next request first when ``pipeline``. ``acquired`` and ``size``: the records and
    bytes the answer brought (the next request's room must allow for them).
    """

    proceed: bool
    pipeline: bool
    acquired: int
    size: int


class Leader:
    """One leader broker's share session, the planner of its requests and the sizer of
    its fetches.

    :param max_bytes: the configured ``fetch_max_bytes``: no fetch asks for more.
    :param max_records: the configured ``max_records``: no fetch asks for more.
    """

    __slots__ = ("dry_until", "guard", "node_id", "planner", "session", "sizer")

    def __init__(
        self, node_id: int, max_bytes: int = 50 * 1024 * 1024, max_records: int = 500
    ) -> None:
        self.node_id = node_id
        self.session = ShareSession(node_id)
        self.planner = FetchPlanner(self.session)
        #: What can arrive and be handled within the lock (:mod:`.fetch_size`).
        self.sizer = FetchSizer(max_bytes, max_records)
        #: Partitions whose batches cannot arrive within the lock (:mod:`.oversize`).
        self.guard = OversizeGuard()
        #: While the planner is dry: when it fetches again even with no answer (rule 2 of
        #: .fetch_policy). A deadline, not a fresh wait per idle spell: the loop is woken
        #: for other things meanwhile (each renewal), and a wait restarted at each wake-up
        #: would never end.
        self.dry_until = float("inf")


#: The shortest wait at the broker while records are parked (:meth:`ShareMachine.park`),
#: in ms: about the driver's tick for delayed releases.
MIN_PARKED_WAIT_MS = 100
#: The shortest a dry planner waits for answers before fetching again (rule 2 of
#: .fetch_policy), in seconds: with ``max_wait_ms=0`` empty fetches must not spin.
MIN_DRY_WAIT = 0.1


class ShareMachine:
    """The decisions of one share-group member's sessions (rules 1-5).

    :param group_id: the share group.
    :param params: the fetch sizing of a ShareFetch that may wait at the broker.
    :param record_limit: under ``acquire_mode="record_limit"``, the most records the
        member may hold at once (strict, KIP-1206); ``None`` otherwise.
    """

    def __init__(
        self, group_id: str, params: FetchParams, *, record_limit: int | None = None
    ) -> None:
        self.group_id = group_id
        self.params = params
        self._prefetch_params = replace(params, max_wait_ms=0)
        #: The acknowledgement state; read it freely, write it only through the machine.
        self.ledger = AckLedger()
        self.budget: RecordBudget | None = (
            RecordBudget(record_limit) if record_limit is not None else None
        )
        #: What the strict budget follows (rule 2 of .record_limit).
        self.handling_rate = HandlingRate()
        #: Records the application handles at once by design (the ``concurrency`` of the
        #: running ``process()`` calls): the hold limit never drops below it. Handlers may
        #: finish only once they have seen each other's records (a batch being gathered,
        #: FastStream's ``max_workers``); a member held to fewer records than its handlers
        #: would wait for an answer that needs one more record, for ever.
        self.handlers = 0
        self.leaders: dict[int, Leader] = {}
        #: Effects not handed to the driver yet, oldest first.
        self.effects: list[Effect] = []
        #: Some planner may be dry, or its loop idle with nothing marked: an answer has
        #: work to do (a per-record check; rules 1 and 2 of .fetch_policy).
        self.any_dry = False
        #: Records with a RENEW pending or in flight: their session and driver handle.
        self.renewing: dict[tuple[TopicIdPartition, int], tuple[SessionTag | None, object]] = {}
        #: RENEW answers the broker did not apply.
        self.renewals_failed = 0
        #: Leaders the strict record budget refused records, or that yielded their turn
        #: wanting records (the others yield to them; rule 4 of .record_limit).
        self.starved: set[int] = set()
        #: Leaders whose last fetch under the strict budget acquired nothing: when they
        #: yield they do not claim the next turn (rule 4 of .record_limit).
        self.came_empty: set[int] = set()
        #: RENEW answers marked (sent or about to be).
        self.renewals_sent = 0
        #: The member began to close: explicit answers are refused (rule 6), an answer's
        #: records are released at once.
        self.closing = False
        #: Closing on Kafka 4.1: records that arrive now are forgotten, not released, and
        #: the end of their share session gives them back (rule 5 of _consumer.closing).
        self.closing_spares = False
        #: Whether the member subscribes to any topic (rule 8).
        self.subscribed = True
        #: Records delivered more than this many times go to the dead-letter router (rule 7).
        self.dead_letter_limit: int | None = None
        #: Decoded records past the limit, waiting for the router (the driver's handles).
        self.dead_letters: list[object] = []
        #: Of the records the router last took, those it has not settled yet (routed or
        #: released): acquired here, neither buffered nor the application's.
        self.dead_letters_routing = 0
        self._dead_keys: set[tuple[TopicIdPartition, int]] = set()
        #: Records waiting out a delay, per partition: offset -> when the driver next acts
        #: on it (renews or releases it); not held for rule 2 of :mod:`.fetch_policy`.
        self.parked: dict[TopicIdPartition, dict[int, float]] = {}
        #: Route records past the limit even when the application never saw them (rule 7).
        self.route_unseen = False
        #: Records the application gave back as failed, with the delivery it did (rule
        #: 7): the oldest are forgotten past :data:`_SEEN_MAX`.
        self.released_at: dict[tuple[TopicIdPartition, int], int] = {}
        #: Records past the limit handed out because the application never saw them.
        self.past_limit_unseen = 0
        #: Records released without ever being handed out: buffered at a close or a
        #: leave for idleness (:meth:`release_buffered`), at an unsubscribe, arriving
        #: while unsubscribed, or arriving while the member closes. Each spent a delivery
        #: attempt nobody saw.
        self.released_unseen = 0
        #: Per partition, the leader and send time of the newest fetch whose records of it
        #: were taken in (rule 3): an answer to an older fetch, from another leader, is
        #: stale for that partition.
        self.newest_take: dict[TopicIdPartition, tuple[int, float]] = {}
        #: Records such stale answers brought, not taken in (rule 3).
        self.stale_records = 0
        #: Times a leader delivered offsets again under locks that had not expired: it
        #: lost its locks on the partition, and the member's were dropped (rule 3).
        self.rebuilt_partitions = 0

    # -- the driver's side ------------------------------------------------------------------

    def drain(self) -> list[Effect]:
        """The effects emitted since the last call, in order (rule 2 of :mod:`.effects`)."""
        out = self.effects
        if out:
            self.effects = []
        return out

    def leader(self, node_id: int) -> Leader:
        """``node_id``'s session and planner, made on first use."""
        one = self.leaders.get(node_id)
        if one is None:
            params = self.params
            one = self.leaders[node_id] = Leader(node_id, params.max_bytes, params.max_records)
        return one

    def idle_timeout(
        self, node_id: int, ack_linger: float, now: float | None = None
    ) -> float | None:
        """How long ``node_id``'s loop may wait with nothing to send before
        :meth:`idle_expired` (``None``: wait for a wake-up): ``ack_linger`` while
        acknowledgements wait; while the planner is dry, until a long poll's time
        (MaxWaitMs) has passed since the empty fetch that made it dry (rule 2 of
        :mod:`.fetch_policy`; ``now``: the time, else a whole long poll from now)."""
        leader = self.leader(node_id)
        tag = leader.session.tag
        if self.ledger.has_marked(tag):
            since = leader.planner.held_since
            if since is None or now is None:
                return ack_linger
            # Waiting for room (rule 1 of .fetch_policy): the linger counts from when the
            # acks began to wait, and ends early enough to answer before their locks end.
            end = min(since + ack_linger, self.ledger.marked_deadline(tag) - ACK_HOLD_MARGIN)
            return max(0.0, end - now)
        if leader.planner.dry:
            wait = self._dry_wait()
            if now is not None:
                wait = min(wait, max(0.0, leader.dry_until - now))
            return wait
        # Nothing marked, no timeout: the application's next answer wakes this loop
        # (rule 1 of .fetch_policy), through the per-record check below.
        leader.planner.awaits_answer = True
        self.any_dry = True
        return None

    def records_wanted(self) -> None:
        """The application waits for records (its buffer is empty): answers waiting for
        room or gathering after empty fetches go now, with the fetch it needs (rules 1
        and 2 of :mod:`.fetch_policy`)."""
        for leader in self.leaders.values():
            if leader.planner.records_wanted():
                self.effects.append(Wake(leader.node_id))

    def _dry_wait(self) -> float:
        return max(MIN_DRY_WAIT, self.params.max_wait_ms / 1000)

    def idle_expired(self, node_id: int) -> None:
        """The wait :meth:`idle_timeout` gave ended with no wake-up: acknowledgements that
        waited ``ack_linger`` go out even without a fetch, and a dry planner fetches
        again (rule 2 of :mod:`.fetch_policy`)."""
        planner = self.leader(node_id).planner
        if self.ledger.has_marked(planner.session.tag):
            planner.linger_expired = True
        planner.dry = False

    def park(self, tp: TopicIdPartition, offset: int, wake_at: float) -> None:
        """The application answered the record at ``offset`` with a delayed release: until
        :meth:`unpark`, it does not hold up fetching (rule 2 of :mod:`.fetch_policy`);
        ``wake_at`` is when its next renew or its release falls due (a fetch waiting at
        the broker returns by then). Wakes a planner that waited for an answer."""
        one = self.parked.setdefault(tp, {})
        new = offset not in one
        one[offset] = wake_at
        if new and self.any_dry:
            self._answered(tp)  # a moved wake_at (each tick of the driver) wakes no one

    def unpark(self, tp: TopicIdPartition, offset: int) -> None:
        """The record at ``offset`` no longer waits out a delay (released, answered
        otherwise, or its lock was lost)."""
        one = self.parked.get(tp)
        if one is not None:
            one.pop(offset, None)
            if not one:
                del self.parked[tp]

    def _unpark_acquired(self, tp: TopicIdPartition, ranges: list[tuple[int, int]]) -> None:
        # Acquired again, a parked record's earlier delivery is over (its lock ended, or
        # was lost): the new one is not waiting out a delay. Left parked, the record
        # would be left out of what the member holds (a strict record limit would grant
        # one too many; found by the simulation's invariant 24, --delayed-release).
        one = self.parked.get(tp)
        if one is None:
            return
        for offset in [o for o in one if any(lo <= o <= hi for lo, hi in ranges)]:
            self.unpark(tp, offset)

    def _parked_wait_ms(self, now: float | None) -> int | None:
        # How long a fetch may wait at the broker before a parked record needs a request.
        if now is None:
            return None
        soonest = min(min(one.values()) for one in self.parked.values())
        # At least a short wait: a renew or release just due is marked by the driver's
        # next tick, and a zero wait would only spin empty fetches until then.
        ms = max(MIN_PARKED_WAIT_MS, int((soonest - now) * 1000))
        return min(self.params.max_wait_ms, ms)

    def next_turn(
        self,
        node_id: int,
        want: Iterable[TopicIdPartition],
        *,
        room: bool,
        urgent: bool = False,
        extra_records: int = 0,
        now: float | None = None,
    ) -> Turn:
        """Plan ``node_id``'s next request (``plan=None``: nothing to send now).

        :param want: the assigned partitions the node leads.
        :param room: whether the buffer can take another answer (with ``extra_records``).
        :param urgent: a ``commit()`` waits for the acknowledgements.
        :param extra_records: records received but not taken in yet (pipelining).
        :param now: the time (bounds a fetch's wait while records are parked: :meth:`park`;
            ``None``: the configured MaxWaitMs).
        """
        leader = self.leader(node_id)
        planner = leader.planner
        if not isinstance(want, (tuple, list)):
            want = list(want)
        if not want:
            # It leads nothing of ours: its handling rate no longer adds to the member's
            # (rule 2 of .record_limit).
            self.handling_rate.forget(node_id)
        # Partitions whose batches cannot arrive within the lock are not fetched.
        want = leader.guard.wanted(want, now)
        budget = self.budget
        # Acks may wait for room only when the buffer is full or the member holds more
        # than it handles within half the lock: a strict budget of held records (below)
        # is sized to what the member may hold, so holding them would hold it.
        buffer_full = not room and budget is None
        granted = 0
        if budget is None and room:
            # Batch acquisition: no fetch while the member holds more than it handles
            # within half the lock (rule 3 of .reach). A record waiting out a delay needs
            # no handling: counted, it stopped fetching for the whole delay when the
            # measured rate allowed one record (found by simulation: --delayed-release,
            # seed 501325 on 4.2-4.4).
            rate, lock = self.handling()
            if rate is not None and self._held() + extra_records >= max(
                self.handlers, hold_limit(_NO_CEILING, rate, lock)
            ):
                # The answers wait too (rule 1 of .fetch_policy): with more than half a
                # lock's work in hand, an answer each sent on its own to free one place
                # (a request per record) gains nothing; should the application run out,
                # records_wanted() sends them.
                room = False
                buffer_full = True
        if budget is not None and room:
            want = list(want)
            starved = self.starved
            if not want:
                starved.discard(node_id)
            elif starved and node_id not in starved:
                # Another leader was refused records: this one yields its turn, so a
                # leader whose waiting fetches come back empty cannot keep the whole
                # budget while records wait at the other (found by simulation). If its
                # last fetch brought records it wants the turn after (rule 4 of
                # .record_limit).
                room = False
                if node_id not in self.came_empty:
                    starved.add(node_id)
            else:
                # Strict limit: ask only for what the member may still hold, counting
                # what every leader's fetches in flight may bring, and no more than it
                # handles before the locks end (rule 1 of .record_limit).
                budget.fit(*self.handling(), floor=self.handlers)
                # A record waiting out a delay needs no handling: it does not take a
                # place in the budget, or with a small budget it would stop fetching for
                # the whole delay (found by simulation: --delayed-release, record_limit 1).
                granted = budget.grant(self._held() + extra_records)
                room = granted > 0
                if room:
                    starved.discard(node_id)
                else:
                    starved.add(node_id)
        # Fetch sizing (how many records and bytes a fetch asks for) is decided here and
        # in request(): the leader's FetchSizer, cut to the granted budget.
        parked = self.parked
        turn = planner.next(
            self.ledger,
            want,
            room=room,
            urgent=urgent,
            extra_records=extra_records,
            parked=parked,
            wait_ms=self._parked_wait_ms(now) if parked else None,
            buffer_full=buffer_full,
            now=now,
        )
        if granted:
            if turn.plan is not None and turn.plan.fetches:
                if self.starved and turn.may_wait:
                    # Another leader waits for the budget: this fetch must not hold it
                    # for a long poll while records may wait there (rule 4 of
                    # .record_limit; found by simulation, seed 501488 on 4.2-4.4).
                    return replace(turn, granted=granted, wait_ms=0)
                return replace(turn, granted=granted)
            budget.settle(granted)  # type: ignore[union-attr]
        return turn

    def _held(self) -> int:
        """Records the member holds that need handling: outstanding, less those parked
        (waiting out a delay, already answered)."""
        held = self.ledger.outstanding_all()
        if self.parked:
            # Only those still held: one whose session ended or whose lock was lost is no
            # longer among the outstanding, and must not be taken off twice (invariant 24
            # of the simulation, --delayed-release).
            holds = self.ledger.holds
            held -= sum(holds(tp, o) for tp, one in self.parked.items() for o in one)
        return max(0, held)

    def handling(self) -> tuple[float | None, float]:
        """The application's measured handling rate (records/s; ``None``: not measured
        yet; :class:`.record_limit.HandlingRate`) and the lock duration (seconds), the
        shortest the leaders' sizers know."""
        lock = DEFAULT_LOCK
        for i, one in enumerate(self.leaders.values()):
            # The shortest: a leader not answered yet assumes Kafka's default.
            lock = one.sizer.lock if i == 0 else min(lock, one.sizer.lock)
        return self.handling_rate.rate(), lock

    def request(self, turn: Turn, member_id: str) -> ShareFetchRequest | ShareAcknowledgeRequest:
        """The wire request for ``turn``'s plan."""
        plan = turn.plan
        assert plan is not None
        if plan.kind is RequestKind.SHARE_FETCH:
            params = self.params if turn.may_wait else self._prefetch_params
            max_wait_ms = params.max_wait_ms
            if turn.may_wait and turn.wait_ms is not None:
                max_wait_ms = min(max_wait_ms, turn.wait_ms)
            leader = self.leader(plan.tag.node_id)
            # Only what can arrive and be handled within the lock (:mod:`.fetch_size`).
            fit = leader.sizer.size()
            max_bytes = fit.max_bytes
            max_records = fit.max_records
            batch_size = min(params.batch_size, max_records)
            acquire_mode = params.acquire_mode
            if leader.guard.probing:
                # A fetch got no answer: one record's worth, record-limit acquisition
                # (4.2+; 4.1 ignores it), to measure what arrives (rule 2 of .oversize).
                max_bytes = min(MIN_BYTES, max_bytes)
                max_records = batch_size = acquire_mode = 1
            elif turn.granted:
                max_records = min(turn.granted, max_records)
                batch_size = min(batch_size, turn.granted)
                acquire_mode = 1
            # One copy per request (``replace`` is not cheap; a fetch is sent per answer).
            params = replace(
                params,
                max_wait_ms=max_wait_ms,
                max_bytes=max_bytes,
                max_records=max_records,
                batch_size=batch_size,
                acquire_mode=acquire_mode,
            )
            return share_fetch_request(plan, self.group_id, member_id, params)
        return share_acknowledge_request(plan, self.group_id, member_id)

    def sent(self, node_id: int, turn: Turn, now: float, *, backlog: bool = False) -> InFlight:
        """``turn``'s request went on the wire at ``now`` (rule 2).

        :param backlog: records were waiting for the application when it went (the driver's
            buffer was not empty): the application, not the fetches, set the pace of the
            answers it carries, so their rate sizes the next fetches' record count. Without
            a backlog that rate is only a lower bound (:meth:`.FetchSizer.handled`).
        """
        assert turn.plan is not None
        taken = turn.taken
        if taken is not None and not taken.is_renew:
            self.leader(node_id).sizer.handled(now, taken.count, backlog=backlog)
        if taken is None or not taken.is_renew:
            answered = taken.count if taken is not None else 0
            self.handling_rate.sent(node_id, now, answered, backlog=backlog)
            if self.budget is None and answered and backlog:
                # Batch acquisition: what the buffer holds may now be out of reach (.reach).
                self.effects.append(Reach())
        probe = turn.plan.fetches and self.leader(node_id).guard.probing
        return InFlight(
            node_id, turn.plan, turn.taken, now, turn.may_wait, turn.granted, turn.wait_ms, probe
        )

    def send_failed(self, node_id: int, turn: Turn) -> None:
        """``turn``'s request could not be sent: the session incarnation is gone (rule 3)."""
        self._settle(turn.granted)
        assert turn.plan is not None
        self.transport_failed(node_id, turn.plan)

    def transport_failed(self, node_id: int, plan: SharePlan, *, back_off: bool = True) -> None:
        """The request for ``plan`` failed in transport (rule 3)."""
        leader = self.leader(node_id)
        verdict = transport_failed(leader.session, self.ledger, plan)
        self._report(verdict.results)
        if verdict.lost is not None:
            self._session_lost(verdict.lost, "transport failed")
        self._renewed(leader, plan, ok=False, now=0.0)
        if back_off:
            self.effects.append(BackOff(node_id, refresh=True))

    def fetch_timeout(self, f: InFlight, default: float) -> float:
        """How long the driver awaits the answer to fetch ``f`` (``default``: its usual
        deadline): a probe is awaited :data:`~.oversize.PROBE_LOCKS` locks, so a slow
        link's answer can be measured (rule 2 of :mod:`.oversize`)."""
        if f.probe:
            f.timeout = max(default, PROBE_LOCKS * self.leader(f.node_id).sizer.lock)
        else:
            f.timeout = default
        return f.timeout

    def request_failed(self, f: InFlight, *, timed_out: bool = False) -> None:
        """The request ``f`` failed in transport, or (``timed_out``) got no answer in time
        (rule 3). A fetch that timed out shrinks the leader's next fetches, counts as
        late (:class:`~.effects.FetchLate`), and makes the next fetch a probe, or, if it
        was one, blocks the partitions it probed (:mod:`.oversize`)."""
        if timed_out and f.plan.fetches:
            leader = self.leader(f.node_id)
            sizer = leader.sizer
            self._late(f.node_id, sizer.timed_out(f.sent_at), timed_out=True)
            self._blocked(
                f.node_id,
                leader.guard.timed_out(
                    leader.session.partitions,
                    waited=f.timeout,
                    bytes_per_second=sizer.bytes_per_second,
                    lock=sizer.lock,
                    since=sizer.stalled_since or f.sent_at,
                ),
            )
        self._settle_inflight(f)
        self.transport_failed(f.node_id, f.plan)

    def abandoned(self, f: InFlight) -> None:
        """``f`` was sent, pipelined behind an answer that then could not be taken in: its
        answer will not be read (the session it belongs to is reset), so the records it
        reserved in a strict budget are free again. Without this the reservation outlived
        the request and, with a small budget, stopped fetching for good (found by
        simulation, seed 100044878 on 4.2-4.4)."""
        self._settle_inflight(f)

    def connection_lost(self, node_id: int) -> None:
        """The connection ``node_id``'s session lived on closed, with no request out: the
        broker released the member's records there (rule 3)."""
        verdict = connection_lost(self.leader(node_id).session, self.ledger)
        self._report(verdict.results)
        if verdict.lost is not None:
            self._session_lost(verdict.lost, "connection lost")

    def answer_failed(
        self, node_id: int, error: errors.KafkaError, f: InFlight | None = None
    ) -> None:
        """An answer from ``node_id`` could not be taken in: note ``error`` and reset the
        session. Its records stay locked at the broker until their locks end (a new
        session does not release them), then come again."""
        if f is not None:
            self._settle_inflight(f)
        self.effects.append(NoteError(error))
        old = self.leader(node_id).session.reset()
        self._report(
            self.ledger.invalidate(AckFailure.SESSION_RESET, ErrorCode.INVALID_REQUEST, tag=old)
        )
        self._session_lost(old, "answer failed")
        self.effects.append(BackOff(node_id, refresh=True))

    # -- ShareFetch answers (rule 1) -----------------------------------------------------------

    def fetch_answered(
        self,
        f: InFlight,
        resp: ShareFetchResponse,
        names: Mapping[uuid.UUID, str],
        now: float,
        *,
        pipeline: bool,
    ) -> FetchAnswer:
        """The session and acknowledgement part of a ShareFetch answer, at ``now``.

        With ``pipeline`` (the driver will send the next request before taking the
        records in), the offsets the answer acquired first end the member's earlier hold
        of them (rule 1).
        """
        granted = f.granted
        f.answered_at = now
        self._settle_inflight(f)
        leader = self.leader(f.node_id)
        plan = f.plan
        acquired = size = 0
        # A range that names no offset (inverted) hides what the broker acquired.
        hidden = False
        sizes: dict[TopicIdPartition, int] = {}
        for t in resp.responses:
            name = names.get(t.topic_id)  # once a topic: a UUID hashes in Python
            for p in t.partitions:
                n = len(p.records or b"")
                if n:
                    size += n
                    tp = topic_partition(t.topic_id, p.partition_index, name)
                    sizes[tp] = sizes.get(tp, 0) + n
                for a in p.acquired_records:
                    n = a.last_offset - a.first_offset + 1
                    if n < 1:
                        hidden = True
                    # Clamped: a hostile range must not make this sum a bignum.
                    acquired += max(0, min(n, 1 << 31))
        leader.planner.fetched(plan, may_wait=f.may_wait, acquired=acquired)
        if granted:
            # Whether it claims the next turn when it yields (rule 4 of .record_limit).
            if acquired:
                self.came_empty.discard(f.node_id)
            else:
                self.came_empty.add(f.node_id)
        if leader.planner.dry:
            leader.dry_until = now + self._dry_wait()
        # What this fetch asked for (request() sized it so; fetched() may resize).
        asked = MIN_BYTES if f.probe else leader.sizer.size().max_bytes
        # What the link and the lock allow for the next fetches (:mod:`.fetch_size`).
        waited = 0.0
        if f.may_wait:
            waited = (self.params.max_wait_ms if f.wait_ms is None else f.wait_ms) / 1000
        sized = leader.sizer.fetched(
            f.sent_at,
            now,
            size,
            acquired,
            lock_ms=resp.acquisition_lock_timeout_ms,
            waited=waited,
        )
        if sized.late:
            self._late(
                f.node_id,
                sized.too_slow,
                what=f"{size} bytes took {now - f.sent_at:.1f} s to arrive",
            )
        if plan.fetches:
            # Batches that cannot arrive within the lock: stop fetching them (.oversize).
            elapsed = now - f.sent_at
            # Measured on this answer only: an empty one measures nothing, and the sizer's
            # running rate may still carry samples from before the link slowed (seed 1080
            # on 4.1: empty answers in time ended a block at a stale rate, and the batch
            # was fetched late again, a third attempt spent).
            rate = size / max(elapsed - waited, 1e-6) if size else None
            self._blocked(
                f.node_id,
                leader.guard.answered(
                    sizes,
                    elapsed=elapsed,
                    bytes_per_second=rate,
                    lock=leader.sizer.lock,
                    asked=asked,
                    # Only a fresh sample is skewed by a wait at the broker.
                    waited=waited > 0 and size > 0,
                    since=leader.sizer.stalled_since or f.sent_at,
                ),
            )
        if leader.planner.dry:
            self.any_dry = True
        if not self._top_level(leader, plan, resp.error_code, resp.error_message, now):
            return FetchAnswer(False, False, acquired, size)
        self._report(self.ledger.complete(plan.tag, fetch_ack_codes(resp, names)))
        # A renewed lock runs from when the broker applied the renew, which is no later
        # than the answer and no earlier than the send: counted from the send (rule 2).
        self._renewed(
            leader, plan, ok=True, lock_ms=resp.acquisition_lock_timeout_ms, now=f.sent_at
        )
        # Not when a range hides what was acquired (rule 1): the supersede rule could not
        # end the member's hold of those offsets, and the next request would carry its
        # answers to them onto the new acquisition (seed 300000256, a reversed range).
        # Taking the records in then fails the answer, and its session with it.
        pipeline = pipeline and acquired > 0 and not hidden
        if pipeline:
            self._supersede(f, resp, names)
        return FetchAnswer(True, pipeline, acquired, size)

    def _supersede(
        self, f: InFlight, resp: ShareFetchResponse, names: Mapping[uuid.UUID, str]
    ) -> None:
        ledger = self.ledger
        for t in resp.responses:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if p.acquired_records:
                    tp = topic_partition(t.topic_id, p.partition_index, name)
                    if self.stale(tp, f.node_id, f.sent_at):
                        continue  # rule 3: it must not end the newer delivery
                    ranges = [(a.first_offset, a.last_offset) for a in p.acquired_records]
                    self._rebuilt(f.plan, tp, ranges, f.answered_at)
                    self._report(ledger.supersede(tp, ranges))
                    if self.parked:
                        self._unpark_acquired(tp, ranges)

    def fetch_records(
        self,
        f: InFlight,
        resp: ShareFetchResponse,
        names: Mapping[uuid.UUID, str],
        *,
        closing: bool = False,
    ) -> None:
        """The records part of a ShareFetch answer: partition errors, and each partition's
        acquired records into the ledger and out as :class:`~.effects.Deliver` (released at
        once while ``closing``).

        :raises InvalidAnswer: the acquired ranges cannot be trusted (then call
            :meth:`answer_failed`).
        """
        leader = self.leader(f.node_id)
        plan = f.plan
        if plan.tag != leader.session.tag:
            # The session ended since (the pipelined next request failed): these records
            # were acquired under it and can no longer be acknowledged.
            return
        # The broker's locks start when it acquires the records, after it read the request:
        # counted from the send, ours end no later than its own (rule 2).
        deadline = lock_deadline(f.sent_at, resp.acquisition_lock_timeout_ms)
        for t in resp.responses:
            name = names.get(t.topic_id) or str(t.topic_id)
            for p in t.partitions:
                code = p.error_code
                if not code and not p.acquired_records:
                    # Its acknowledgement codes only (fetch_answered took them): nothing to
                    # do here. About half an answer's partitions, so no call for them.
                    continue
                tp = topic_partition(t.topic_id, p.partition_index, name)
                if code:
                    action = partition_action(code)
                    if action is not Action.OK:
                        self._partition_error(leader, tp, action, p, resp.node_endpoints)
                if p.acquired_records:
                    self._take(plan, tp, p, f, deadline, closing)

    def stale(self, tp: TopicIdPartition, node_id: int, sent_at: float) -> bool:
        """Whether records of ``tp`` from a fetch to ``node_id`` sent at ``sent_at`` are
        older than the newest taken in from another leader (rule 3)."""
        seen = self.newest_take.get(tp)
        return seen is not None and seen[0] != node_id and seen[1] > sent_at

    def _take(
        self,
        plan: SharePlan,
        tp: TopicIdPartition,
        p: sf.PartitionData,
        f: InFlight,
        deadline: float | None,
        closing: bool,
    ) -> None:
        node_id = plan.node_id
        sent_at = f.sent_at
        if self.stale(tp, node_id, sent_at):
            # Rule 3: another leader delivered the partition to a fetch sent after this
            # one; this answer stalled while the partition moved. Its locks went with the
            # leadership, and taking it in would end the newer delivery the application
            # may be handling (seed 1479).
            for a in p.acquired_records:
                self.stale_records += max(0, min(a.last_offset - a.first_offset + 1, 1 << 31))
            return
        seen = self.newest_take.get(tp)
        if seen is None or sent_at >= seen[1]:
            self.newest_take[tp] = (node_id, sent_at)
        name = tp.topic or str(tp.topic_id)
        try:
            intake = take_partition(
                tp,
                [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                p.records,
            )
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"node {plan.node_id}: {name}-{tp.partition}: {exc}") from None
        ledger = self.ledger
        ranges = [(r.first_offset, r.last_offset) for r in intake.ranges]
        self._rebuilt(plan, tp, ranges, f.answered_at)
        before = ledger.sequence
        self._report(ledger.add(tp, plan.tag, ranges, intake.gaps, deadline))
        if self.parked:
            self._unpark_acquired(tp, ranges)
        delivery = (before + 1, ledger.sequence)
        for other in ledger.buffered_elsewhere(tp, node_id):
            # Rule 3: the partition moved here. The old leader's buffered records of it
            # lost their locks; handed out, each would be handled, its answer refused,
            # and the record handled again from this delivery (seed 50004145).
            self.effects.append(PartitionLost(tp, other))
        # Scoped to this delivery: the application may still hold an older delivery of
        # the same offsets (from the partition's previous leader, say), which only its
        # own answer ends (seed 20007135: a corrupt batch's release reached such a record).
        for lo, hi in intake.release:
            ledger.mark_undelivered(tp, delivery, lo, hi, AckType.RELEASE)
        for bad in intake.errors:
            self.effects.append(
                NoteError(
                    errors.CorruptRecordError(
                        f"{name}-{tp.partition}: {bad}",
                        base_offset=bad.base_offset,
                        last_offset=bad.last_offset,
                    )
                )
            )
        if intake.exhausted:
            return
        if closing:
            for r in intake.ranges:
                if self.closing_spares:
                    # Kafka 4.1: left to the session's end, which gives them back
                    # without spending their attempt (rule 5 of _consumer.closing).
                    ledger.forget(tp, delivery, r.first_offset, r.last_offset)
                else:
                    # A delivery attempt spent unseen, as a close's buffered records
                    # are: counted.
                    self.released_unseen += ledger.mark_undelivered(
                        tp, delivery, r.first_offset, r.last_offset, AckType.RELEASE
                    )
            return
        limit = self.dead_letter_limit
        # Records past the dead-letter limit go to the router now, not when (or if) the
        # application reaches them: the driver decodes such an answer at once (rule 7).
        eager = limit is not None and any(r.delivery_count > limit for r in intake.ranges)
        self.effects.append(Deliver(tp, plan.tag, deadline, intake, delivery, eager))

    def _rebuilt(
        self, plan: SharePlan, tp: TopicIdPartition, ranges: list[tuple[int, int]], now: float
    ) -> None:
        """Rule 3: the leader acquired for the session, by ``now``, offsets it still held
        under locks that cannot have expired: the leader lost its locks on ``tp`` (it
        moved away and back between two fetches). What the session held of ``tp`` is
        lost, before the new delivery is taken in (seed 60019839)."""
        if not self.ledger.rebuilt(tp, plan.tag, ranges, now):
            return
        node_id = plan.node_id
        self._report(
            self.ledger.invalidate(
                AckFailure.PARTITION_REBUILT,
                ErrorCode.INVALID_RECORD_STATE,
                partition=tp,
                node_id=node_id,
            )
        )
        self.effects.append(PartitionLost(tp, node_id))
        self._forget_renewing(tp=tp, node_id=node_id)
        self.rebuilt_partitions += 1

    def _partition_error(
        self,
        leader: Leader,
        tp: TopicIdPartition,
        action: Action,
        p: sf.PartitionData,
        endpoints: Sequence[sf.NodeEndpoint],
    ) -> None:
        code = p.error_code
        if action in (Action.LEADER_MOVED, Action.REFRESH_METADATA):
            hint = p.current_leader
            self._partition_moved(
                leader.node_id, tp, action, code, hint.leader_id, hint.leader_epoch, endpoints
            )
            return
        err = errors.error_for_code(
            code, f"{tp.topic}-{tp.partition}: {p.error_message or ''}".rstrip(": ")
        )
        assert err is not None
        self.effects.append(Fail(err) if action is Action.FATAL else NoteError(err))

    def _partition_moved(
        self,
        node_id: int,
        tp: TopicIdPartition,
        action: Action,
        code: int,
        leader_id: int,
        leader_epoch: int,
        endpoints: Iterable[sf.NodeEndpoint],
    ) -> None:
        """Leadership moved (or the topic is unknown): drop ``node_id``'s locks of ``tp``
        (rule 3) and find the leader again."""
        self._report(
            self.ledger.invalidate(AckFailure.LEADER_CHANGED, code, partition=tp, node_id=node_id)
        )
        self.effects.append(PartitionLost(tp, node_id))
        self._forget_renewing(tp=tp, node_id=node_id)
        if action is Action.LEADER_MOVED and leader_id >= 0 and leader_epoch >= 0:
            endpoint = None
            for e in endpoints:
                if e.node_id == leader_id:
                    endpoint = (e.host, e.port)
            self.effects.append(Rediscover(tp, code, leader_id, leader_epoch, endpoint))
        else:
            self.effects.append(Rediscover(tp, code))

    # -- ShareAcknowledge answers -------------------------------------------------------------

    def acknowledge_answered(
        self,
        f: InFlight,
        resp: ShareAcknowledgeResponse,
        names: Mapping[uuid.UUID, str],
        now: float,
    ) -> None:
        """A ShareAcknowledge answer, at ``now``."""
        leader = self.leader(f.node_id)
        plan = f.plan
        if not self._top_level(leader, plan, resp.error_code, resp.error_message, now):
            return
        codes = acknowledge_codes(resp, names)
        self._report(self.ledger.complete(plan.tag, codes))
        self._renewed(  # from the send, as for a ShareFetch's renewals (rule 2)
            leader,
            plan,
            ok=True,
            lock_ms=resp.acquisition_lock_timeout_ms,
            codes=codes,
            now=f.sent_at,
        )
        for t in resp.responses:
            for p in t.partitions:
                action = partition_action(p.error_code)
                if action in (Action.LEADER_MOVED, Action.REFRESH_METADATA):
                    tp = TopicIdPartition(t.topic_id, p.partition_index, names.get(t.topic_id))
                    hint = p.current_leader
                    self._partition_moved(
                        f.node_id,
                        tp,
                        action,
                        p.error_code,
                        hint.leader_id,
                        hint.leader_epoch,
                        resp.node_endpoints,  # type: ignore[arg-type]
                    )

    def _top_level(
        self, leader: Leader, plan: SharePlan, code: int, message: str | None, now: float
    ) -> bool:
        """Apply an answer's top-level code; True if its body should be taken in."""
        verdict = answer_verdict(leader.session, self.ledger, plan, code)
        self._report(verdict.results)
        if verdict.proceed:
            return True
        if verdict.action is Action.OK:
            return False  # a stale answer
        self._renewed(leader, plan, ok=False, now=now)
        err = errors.error_for_code(code, f"node {leader.node_id}: {message or ''}".rstrip(": "))
        assert err is not None
        if verdict.lost is not None:
            self._session_lost(verdict.lost, str(err), code)
            # A broker that keeps refusing sessions (SHARE_SESSION_LIMIT_REACHED) must not
            # be asked again in a tight loop.
            self.effects.append(BackOff(leader.node_id))
            return False
        if verdict.action is Action.FATAL:
            self.effects.append(Fail(err))
            return False
        self.effects.append(NoteError(err))
        self.effects.append(
            BackOff(leader.node_id, refresh=verdict.action is Action.REFRESH_METADATA)
        )
        return False

    # -- closing ------------------------------------------------------------------------------

    def close_session(self, node_id: int, now: float) -> InFlight | None:
        """The FINAL (-1) ShareAcknowledge of ``node_id``'s session with its last acks
        (``None``: nothing to close); the broker then releases what the member holds there."""
        session = self.leader(node_id).session
        if session.in_flight is not None or session.is_new:
            return None
        taken = self.ledger.take(session.tag, include_renew=False)
        plan = session.build_close(taken.acks if taken else None)
        if plan is None:
            return None
        return InFlight(node_id, plan, taken, now, False)

    def close_answered(
        self, f: InFlight, resp: ShareAcknowledgeResponse, names: Mapping[uuid.UUID, str]
    ) -> None:
        """The answer to :meth:`close_session`'s request."""
        leader = self.leader(f.node_id)
        verdict = answer_verdict(leader.session, self.ledger, f.plan, resp.error_code)
        self._report(verdict.results)
        if verdict.proceed and f.taken is not None:
            self._report(self.ledger.complete(f.plan.tag, acknowledge_codes(resp, names)))

    # -- the application's answers (rule 4) ---------------------------------------------------

    def answer(
        self,
        tp: TopicIdPartition,
        offset: int,
        ack: AckType,
        delivery: Delivery | None,
        tag: SessionTag | None = None,
        handle: object = None,
    ) -> MarkResult:
        """The application's answer ``ack`` for ``tp`` at ``offset`` of ``delivery``. A RENEW
        remembers ``handle`` (the driver's record) to move its lock deadline when the
        broker answers (:class:`~.effects.LocksRenewed`)."""
        result = self.ledger.mark(tp, offset, ack, delivery)
        if result is MARK_OK:
            if ack is _RENEW:
                self.renewals_sent += 1
                self.renewing[(tp, offset)] = (tag, handle)
                if tag is not None:
                    self.effects.append(Wake(tag.node_id))
            elif self.any_dry:
                self._answered(tp)
        elif result is MARK_DEAD:
            self._lock_lost(tp, offset, ack)
        return result

    def accept(self, tp: TopicIdPartition, offset: int, delivery: Delivery | None) -> None:
        """:meth:`answer` with ACCEPT (implicit mode's once-per-record accept)."""
        result = self.ledger.mark(tp, offset, _ACCEPT, delivery)
        if result is MARK_OK:
            if self.any_dry:
                self._answered(tp)
        elif result is MARK_DEAD:
            self._lock_lost(tp, offset, _ACCEPT)

    def accept_of(self, tp: TopicIdPartition, offset: int, lo: int, hi: int) -> None:
        """:meth:`accept` of a record of delivery ``(lo, hi)``, the pair given apart (the
        compiled build then builds no tuple per record)."""
        result = self.ledger.mark_of(tp, offset, _ACCEPT_CODE, lo, hi)
        if result is MARK_OK:
            if self.any_dry:
                self._answered(tp)
        elif result is MARK_DEAD:
            self._lock_lost(tp, offset, _ACCEPT)

    def answer_at(self, held: Iterable[TopicIdPartition], offset: int, ack: AckType) -> MarkResult:
        """The application's answer for the record at ``offset`` of the first partition of
        ``held`` that has one (an answer by position)."""
        result = MarkResult.UNKNOWN
        for tp in held:
            result = self.ledger.mark(tp, offset, ack)
            if result is MarkResult.OK:
                if self.any_dry:
                    self._answered(tp)
            elif result is MarkResult.DEAD:
                self._lock_lost(tp, offset, ack)
            if result is not MarkResult.UNKNOWN:
                break
        return result

    def answer_all_delivered(self, ack: AckType) -> int:
        """Answer every record handed out and unanswered with ``ack`` (implicit mode);
        report the answers to records whose lock was lost."""
        self._lost(self.ledger.settle_dead())
        n = self.ledger.mark_delivered(ack)
        if n and self.any_dry:
            self._answered()
        return n

    def release_held(self) -> None:
        """Release every record handed out and unanswered, and every buffered one (the
        driver clears its buffer)."""
        self._lost(self.ledger.settle_dead(ack=AckType.RELEASE))
        self.ledger.mark_delivered(AckType.RELEASE, include_buffered=True)
        self.effects.append(Wake())

    def holds(self, tp: TopicIdPartition, offset: int, delivery: Delivery | None) -> bool:
        """Whether the record is still this member's to answer (its lock not lost)."""
        return self.ledger.holds(tp, offset, delivery)

    def deliver(
        self, tp: TopicIdPartition, first: int, last: int, delivery: Delivery | None = None
    ) -> None:
        """Offsets ``first..last`` of ``tp`` (of ``delivery``) were handed to the application."""
        self.ledger.deliver(tp, first, last, delivery)

    def forget(self, tp: TopicIdPartition, delivery: Delivery, first: int, last: int) -> None:
        """The buffer dropped ``first..last`` of ``delivery`` without handing them out."""
        self.ledger.forget(tp, delivery, first, last)

    def release_undelivered(
        self, tp: TopicIdPartition, delivery: Delivery, first: int, last: int
    ) -> int:
        """Release buffered records never handed out; how many were released."""
        return self.ledger.mark_undelivered(tp, delivery, first, last, AckType.RELEASE)

    def release_buffered(
        self, buffered: Iterable[tuple[TopicIdPartition, Delivery, int, int]]
    ) -> int:
        """Release the records the driver buffered and never handed out (``(tp, delivery,
        first, last)`` each), counted in :attr:`released_unseen`; how many were released.
        A close and a leave for idleness do this before :meth:`release_held`."""
        released = 0
        for tp, delivery, first, last in buffered:
            released += self.ledger.mark_undelivered(tp, delivery, first, last, AckType.RELEASE)
        self.released_unseen += released
        return released

    def decoded(
        self,
        tag: SessionTag,
        tp: TopicIdPartition,
        delivery: Delivery,
        gaps: Iterable[tuple[int, int]],
        release: Iterable[tuple[int, int]],
    ) -> None:
        """A buffered batch of ``delivery`` was decoded: acknowledge its gaps, release its
        corrupt part. Only that delivery's records are answered: an older delivery of the
        same offsets the application holds is left to the application."""
        ledger = self.ledger
        wake = False
        for lo, hi in gaps:
            wake = ledger.mark_undelivered(tp, delivery, lo, hi, AckType.GAP) > 0 or wake
        for lo, hi in release:
            wake = ledger.mark_undelivered(tp, delivery, lo, hi, AckType.RELEASE) > 0 or wake
        if wake:
            self.effects.append(Wake(tag.node_id))

    def batch_decoded(
        self, tag: SessionTag, tp: TopicIdPartition, delivery: Delivery, d: Decoded[R]
    ) -> None:
        """The driver decoded a delivered batch (as the application reached it, or at once
        for ``Deliver.eager``): acknowledge its gaps, release its corrupt part and say
        why, and queue its records past the dead-letter limit for the router (rule 7)."""
        if d.gaps or d.release:
            self.decoded(tag, tp, delivery, d.gaps, d.release)
        bad = d.error
        if bad is not None:
            self.effects.append(
                NoteError(
                    errors.CorruptRecordError(
                        f"{tp.topic or tp.topic_id}-{tp.partition}: {bad}",
                        base_offset=bad.base_offset,
                        last_offset=bad.last_offset,
                    )
                )
            )
        if d.dead and not self.route_unseen:
            self._hand_back_unseen(tp, d)
        if d.dead:
            self.dead_letters.extend(d.dead)
            self._dead_keys.update((tp, r.offset) for r in d.dead)
            self.effects.append(DeadLetters(len(d.dead)))

    def note_failed(self, tp: TopicIdPartition, offset: int, delivery_count: int) -> None:
        """The application saw the record at ``offset`` on delivery ``delivery_count`` and
        gave it back as failed (a handler error, an explicit release without delay; not a
        delayed retry): past the limit, its next delivery is routed (rule 7)."""
        if self.dead_letter_limit is None:
            return
        seen = self.released_at
        seen[(tp, offset)] = delivery_count
        if len(seen) > _SEEN_MAX:
            del seen[next(iter(seen))]  # the oldest: insertion order

    def _hand_back_unseen(self, tp: TopicIdPartition, d: Decoded[R]) -> None:
        """Rule 7: of the records past the limit, those the application never released
        here go back among the records handed out, in offset order."""
        seen = self.released_at
        routed: list[R] = []
        unseen: list[R] = []
        for r in d.dead:
            if (tp, r.offset) in seen:
                routed.append(r)
            else:
                unseen.append(r)
        if unseen:
            self.past_limit_unseen += len(unseen)
            d.records = sorted([*d.records, *unseen], key=_offset)
            d.dead = routed

    def released_before(self, tp: TopicIdPartition, offset: int) -> int:
        """The delivery at which the application released the record at ``offset`` here
        (0: it did not, or it was forgotten); forgets it (the router asks once)."""
        return self.released_at.pop((tp, offset), 0)

    def take_dead_letters(self) -> list[object]:
        """The records waiting for dead-letter routing, now the router's (rule 7): it
        settles all of them (:meth:`dead_letter_settled`, one by one) before it takes
        again, so what it held before is settled by now."""
        out = self.dead_letters
        self.dead_letters = []
        self._dead_keys = set()
        self.dead_letters_routing = len(out)
        return out

    def dead_letter_settled(self) -> None:
        """The router routed or released one of the records it took."""
        if self.dead_letters_routing > 0:
            self.dead_letters_routing -= 1

    def unsubscribe(self, buffered: Iterable[tuple[TopicIdPartition, Delivery, int, int]]) -> int:
        """The member subscribes to nothing now (rule 8): release the records the driver
        buffered and never handed out (``(tp, delivery, first, last)`` each); records
        handed out stay the application's to answer. Returns how many were released."""
        self.subscribed = False
        released = self.release_buffered(buffered)
        self.effects.append(Wake())
        return released

    def admit(
        self, tag: SessionTag, tp: TopicIdPartition, delivery: Delivery, first: int, last: int
    ) -> bool:
        """Whether the driver may buffer ``first..last`` of ``delivery`` for the application;
        while unsubscribed they are released instead (rule 8), and ``False`` returned."""
        if self.subscribed:
            return True
        released = self.ledger.mark_undelivered(tp, delivery, first, last, AckType.RELEASE)
        if released:
            self.released_unseen += released
            self.effects.append(Wake(tag.node_id))
        return False

    def subscribe(self) -> None:
        """The member subscribes to topics again (rule 8)."""
        self.subscribed = True

    # -- the application's explicit answers (rule 6) ----------------------------------------

    def acknowledge(
        self,
        tp: TopicIdPartition,
        offset: int,
        ack: AckType,
        delivery: Delivery | None,
        tag: SessionTag | None = None,
        handle: object = None,
    ) -> MarkResult:
        """The application's explicit answer for a record it was handed (:meth:`answer`,
        refused as rule 6 says): OK, or DEAD when its lock was lost (reported).

        :raises InvalidRecordStateError: closing, already answered, or not held.
        """
        if self.closing:
            raise closed(position(tp, offset))
        result = self.answer(tp, offset, ack, delivery, tag, handle)
        if result is MARK_OK:
            if ack is _RELEASE:
                # The application gave the record back at once: it saw it (rule 7).
                self.note_failed(tp, offset, getattr(handle, "delivery_count", 0))
            return result
        if result is MARK_ALREADY_ACKNOWLEDGED or result is MARK_UNKNOWN:
            # The position is spelled out only here: this runs once per explicit answer.
            err = refusal(result, position(tp, offset), ack)
            assert err is not None
            raise err
        return result

    def acknowledge_at(
        self,
        topic: str,
        partition: int,
        offset: int,
        ack: AckType,
        buffered: Callable[[TopicIdPartition, int], bool],
    ) -> None:
        """The application's answer for the record it holds at a position (rule 6).

        :param buffered: whether the driver's buffer still holds the record, not handed out.
        :raises InvalidRecordStateError: as :meth:`acknowledge`, and for a record fetched
            but not handed out yet, or waiting for dead-letter routing.
        """
        where = f"{topic}-{partition} offset {offset}"
        if self.closing:
            raise closed(where)
        held = [
            tp for tp in self.ledger.partitions() if (tp.topic, tp.partition) == (topic, partition)
        ]
        for tp in held:
            if buffered(tp, offset):
                raise not_handed_out(where)
            if (tp, offset) in self._dead_keys:
                raise dead_letter_pending(where)
        err = refusal(self.answer_at(held, offset, ack), where, ack)
        if err is not None:
            raise err

    def stuck(self, now: float) -> float:
        """The longest any leader has had records waiting that none of its fetches could
        deliver, if longer than the lock (:meth:`.FetchSizer.stuck`, and while a partition
        is blocked :meth:`.OversizeGuard.stuck`); 0 if none."""
        return max(
            (max(one.sizer.stuck(now), one.guard.stuck(now)) for one in self.leaders.values()),
            default=0.0,
        )

    def pending_acks(self) -> bool:
        """Whether any live session has acknowledgements marked or in flight."""
        ledger = self.ledger
        for leader in self.leaders.values():
            tag = leader.session.tag
            if ledger.has_marked(tag) or ledger.in_flight(tag):
                return True
        return False

    # -- internals ----------------------------------------------------------------------------

    def _answered(self, tp: TopicIdPartition | None = None) -> None:
        # The application answered records (of ``tp``, if one partition): wake the loops
        # whose planner waits for that: a dry one (any answer), one idle with nothing
        # marked (an answer its session carries: ``tp`` is one of its partitions; for
        # answers to many, its session has marks). Per record only a dict lookup each:
        # ``has_marked`` scans every partition.
        self.any_dry = False
        for leader in self.leaders.values():
            planner = leader.planner
            if planner.answered():
                planner.awaits_answer = False
                self.effects.append(Wake(leader.node_id))
            elif planner.awaits_answer:
                session = leader.session
                if session.holds(tp) if tp is not None else self.ledger.has_marked(session.tag):
                    planner.awaits_answer = False
                    self.effects.append(Wake(leader.node_id))
                else:
                    self.any_dry = True  # still waiting: keep the per-record check

    def _lock_lost(self, tp: TopicIdPartition, offset: int, ack: AckType) -> None:
        # The lock is gone (session reset or leader change): the broker redelivers it.
        self._lost(
            [
                AckResult(
                    tp,
                    tuple(batches_from_runs([(offset, offset, int(ack))])),
                    ErrorCode.INVALID_RECORD_STATE,
                    AckFailure.LOCK_LOST,
                )
            ]
        )

    def _late(
        self, node_id: int, too_slow: bool, *, timed_out: bool = False, what: str = ""
    ) -> None:
        sizer = self.leader(node_id).sizer
        # Warned once per leader: the link cannot be fixed from here.
        warn = too_slow and not sizer.warned
        if too_slow:
            sizer.warned = True
        if timed_out and not what:
            what = "a fetch of one record's worth got no answer in time"
        self.effects.append(
            FetchLate(
                node_id,
                timed_out,
                too_slow,
                warn,
                sizer.lock,
                sizer.bytes_per_second or 0.0,
                what,
            )
        )

    def _blocked(self, node_id: int, blocked: list[Blocked]) -> None:
        for b in blocked:
            self.effects.append(PartitionBlocked(node_id, b.tp, b.describe()))

    def assigned(self, assignment: Container[TopicIdPartition]) -> None:
        """The member's assignment is now ``assignment``: suspicions of revoked
        partitions are forgotten (blocks are kept: :mod:`.oversize` rule 3)."""
        for one in self.leaders.values():
            one.guard.retain(assignment)

    def blocked(self) -> list[str]:
        """A sentence per partition no longer fetched because its batches cannot arrive
        within the lock (:mod:`.oversize`): partition, batch size, measured rate, lock."""
        return [cause for one in self.leaders.values() for cause in one.guard.causes()]

    def _lost(self, results: list[AckResult]) -> None:
        if results:
            self.effects.append(LockLost(results))

    def _report(self, results: list[AckResult]) -> None:
        if results:
            self.effects.append(Report(results))
            if self.starved:
                self._wake_starved()

    def _wake_starved(self) -> None:
        # Records finished (outcomes reported): if that freed part of a strict budget, the
        # leaders waiting for it try again now, not at their next idle wake-up (rule 4 of
        # .record_limit).
        budget = self.budget
        if budget is None:
            return
        if budget.limit - self._held() - budget.reserved > 0:
            for node_id in sorted(self.starved):
                self.effects.append(Wake(node_id))

    def _settle(self, granted: int) -> None:
        if granted and self.budget is not None:
            self.budget.settle(granted)
            for node_id in sorted(self.starved):
                self.effects.append(Wake(node_id))  # budget came free: try again

    def _settle_inflight(self, f: InFlight) -> None:
        # Answered (its records then count as held) or failed: the reservation ends once.
        self._settle(f.granted)
        f.granted = 0

    def _session_lost(self, tag: SessionTag, reason: str, code: int = 0) -> None:
        self.effects.append(SessionLost(tag, reason, code))
        self._forget_renewing(tag=tag)

    def _forget_renewing(
        self,
        *,
        tag: SessionTag | None = None,
        tp: TopicIdPartition | None = None,
        node_id: int | None = None,
    ) -> None:
        # A renew waiting on a lost session will never be answered: its record's deadline
        # stays as it was (the lock is gone anyway).
        for key, (rec_tag, _handle) in list(self.renewing.items()):
            if tag is not None:
                lost = rec_tag == tag
            else:
                lost = key[0] == tp and rec_tag is not None and rec_tag.node_id == node_id
            if lost:
                del self.renewing[key]

    def _renewed(
        self,
        leader: Leader,
        plan: SharePlan,
        *,
        ok: bool,
        now: float,
        lock_ms: int = 0,
        codes: dict[TopicIdPartition, int] | None = None,
    ) -> None:
        """Move the lock deadline of records whose renew the broker accepted; ``now`` is
        when the renew was sent (the broker's new lock may start any time after it)."""
        if not plan.is_renew:
            return
        good, bad = renewed(plan, ok=ok, codes=codes)
        deadline = lock_deadline(now, lock_ms) if good else None
        moved: list[object] = []
        failed: list[tuple[TopicIdPartition, int]] = []
        for key in [k for k in self.renewing if k[0] in good or k[0] in bad]:
            _tag, handle = self.renewing.pop(key)
            if key[0] in good and deadline is not None:
                moved.append(handle)
            elif key[0] in bad:
                failed.append(key)
        if moved:
            self.effects.append(LocksRenewed(tuple(moved), deadline))
        if failed:
            self.renewals_failed += len(failed)
            self.effects.append(
                RenewFailed(leader.node_id, len(failed), tuple(sorted(bad, key=str)), tuple(failed))
            )
