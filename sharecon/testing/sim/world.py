"""One seeded fault schedule: the real share machine and buffer against the model broker.

:func:`run` builds a small world from a seed: two model brokers (Kafka ``version``
semantics), each leading one partition of a topic with a few records (two in a quarter
of the schedules, whose partitions' logs may start far from offset 0); a member whose
decisions are made by the real :class:`~sharecon._share.machine.ShareMachine` and whose
records wait in the real :class:`~sharecon._consumer.buffer.DeliveryBuffer`; and an
application. A single-threaded loop runs events in (virtual time, sequence) order: no
clock, no sockets, no event-loop library. Each leader's fetch loop is the consumer's own
:class:`~sharecon._consumer.fetch_loop.FetchLoop` (the state machine ``NodeFetcher``
runs: plan, send, answer in two steps with the pipelined next request in between,
failures, cuts, back-off, stopping, the FINAL request), and the effects are carried out
by the consumer's :func:`~sharecon._consumer.effect_port.carry_out`. Delivered chunks
reach the buffer through the consumer's ``Handout.deliver``; the application takes
records through the consumer's :class:`~sharecon._consumer.cursor.Cursor` steps
(``async for``, in explicit or implicit mode, drawn from the seed) or, when it gathers,
as ``process()`` handlers do (``pop_one``, answers through ``Handout.answer``); the close
runs the consumer's :func:`~sharecon._consumer.closing.close_steps`. The member is only
their port: the model brokers' connections, the virtual clock and timers, and the
invariants' bookkeeping. What the simulator still writes itself is the application
(when it asks, how long it handles a record, what it answers) and the faults: neither
exists in the consumer.

From the seed come: response delays (answers from the two leaders overtake each other),
dropped answers (the connection breaks), stalls longer than the lock, connection cuts,
leader moves, share-session evictions, hostile answers (acquired ranges outside the
batch, duplicated, reversed), an application that is slow (longer than the lock), answers
late, twice, or after closing, and slow handlers that renew their locks (``keep_locks``).
After the faults, a quiet drain lets every record finish. :mod:`.checks` holds the
invariants.

The member also heartbeats to a model group coordinator with the real
:class:`~sharecon._share.membership.Membership`, as the consumer's heartbeat loop does
(``sharecon/_consumer/heartbeat.py``), and its fetch loops fetch only the partitions the
coordinator assigned. From the seed (a random stream of its own) come coordinator losses:
the coordinator unavailable for a while (``COORDINATOR_NOT_AVAILABLE``), the coordinator
moving to the other broker (``NOT_COORDINATOR``, then ``COORDINATOR_LOAD_IN_PROGRESS``),
and heartbeats failing in transport for up to longer than the session timeout, after which
the coordinator has removed the member: it is fenced, loses its assignment, rejoins and is
assigned again, while the records it holds stay answerable.
"""

from __future__ import annotations

import heapq
import random
import uuid
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._consumer import fetch_driver
from sharecon._consumer.buffer import SLICE, Chunk, DeliveryBuffer
from sharecon._consumer.closing import CloseStep, close_steps, spares_buffered
from sharecon._consumer.cursor import Cursor
from sharecon._consumer.delayed import TICK as DELAY_TICK
from sharecon._consumer.delayed import DelayedReleaser
from sharecon._consumer.effect_port import carry_out
from sharecon._consumer.fetch_driver import FetchDriver
from sharecon._consumer.fetch_loop import (
    Apply,
    Closed,
    Done,
    FetchLoop,
    Idle,
    Pause,
    Phase,
    Send,
    Stopped,
)
from sharecon._consumer.handout import Handout, owner_of
from sharecon._consumer.liveness import Liveness
from sharecon._consumer.membership_loop import Beat, MembershipLoop, Sleep
from sharecon._share.effects import FetchLate, LocksRenewed, NoteError, PartitionBlocked
from sharecon._share.fetch_policy import ACK_HOLD_MARGIN
from sharecon._share.ledger import MarkResult
from sharecon._share.machine import MIN_PARKED_WAIT_MS, ShareMachine
from sharecon._share.membership import EARLY_HEARTBEAT, Membership
from sharecon._share.requests import FetchParams
from sharecon._share.session import RequestKind
from sharecon.protocol import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from sharecon.protocol import ShareAcknowledgeResponse as ShareAcknowledgeResponseT
from sharecon.protocol import ShareFetchResponse as ShareFetchResponseT
from sharecon.protocol.error_codes import ErrorCode
from sharecon.testing.model import ModelBroker, ModelCoordinator, RecordState
from sharecon.testing.sim import mutants
from sharecon.testing.sim.checks import ANSWERED, Checker, Violation
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from contextlib import AbstractContextManager

    from sharecon._share.effects import (
        Deliver,
        Effect,
        PartitionLost,
        SessionLost,
    )
    from sharecon._share.ledger import AckResult, Delivery
    from sharecon._share.machine import InFlight
    from sharecon._share.session import SessionTag
    from sharecon.protocol import ShareAcknowledgeResponse, ShareFetchResponse
    from sharecon.record import Record
    from sharecon.testing.model.partition import PartitionLog

__all__ = ["MUTANTS", "Outcome", "run"]

GROUP = "g"
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x5117)
NAMES = {TOPIC_ID: TOPIC}
NODES = (1, 2)
LOCK_MS = 2000
LOCK = LOCK_MS / 1000.0
MAX_WAIT = 2.0
ACK_LINGER = 0.1
FAULT_WINDOW = 8.0  #: faults happen in [0, FAULT_WINDOW)
DRAIN = 40.0  #: then this long without faults for every record to finish
MAX_EVENTS = 5000
HEARTBEAT_MS = 1500  #: the coordinator's heartbeat interval
SESSION_TIMEOUT = 3.0  #: the coordinator removes a member not heard from for this long
#: Liveness (invariant 9): once the last fault healed, a record available at its leader
#: is handed out (this one or another) within this many virtual seconds. The worst
#: path: a fetch waiting at the broker (MAX_WAIT), a back-off (1 s), rejoining the group
#: after a fence (heartbeat interval and the assignment), and one more fetch.
PROGRESS_BOUND = 6.0
PROGRESS_TICK = 0.25  #: how often the liveness check samples the brokers
#: Invariant 11: this long after the last fault healed, the brokers refuse no request of
#: the member's any more (its sessions, epochs and leaders agree with theirs again).
SETTLE = PROGRESS_BOUND
#: The states a record ends in: the schedule is over once every offset is in one.
_FINISHED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
#: Invariant 22: from :data:`SETTLE` after the faults healed, an answer the application
#: gives is on the wire within this many virtual seconds: the acknowledgement linger, a
#: parked record's shortest wait at the broker (``MIN_PARKED_WAIT_MS``), and as much
#: again to spare. An answer that waits for a long poll's end (MAX_WAIT), a back-off or
#: a wake-up that never comes breaks it.
ANSWER_BOUND = 2 * (ACK_LINGER + MIN_PARKED_WAIT_MS / 1000)
#: Invariant 23: from :data:`SETTLE` after the heal, no leader answers more than this
#: many bare fetches empty in a virtual second with no answer of the application's
#: between them. An idle member waits a long poll (:data:`MAX_WAIT`), a dry one for the
#: application or as long, one with a parked record until that record's next renewal or
#: release is due.
SPIN_LIMIT = 5
#: How long an unhurried handler takes near the end of the settling time (``Knobs.pause``),
#: in virtual seconds: longer than the acknowledgement linger, shorter than a lock.
PAUSE = (0.2, 0.6)
UNHURRIED_BATCH = 8  #: records per batch written for an unhurried application
#: The share of schedules with an unhurried application: each runs 6 virtual seconds
#: longer than it would (invariant 22 judges answers only from :data:`SETTLE`), about
#: twice the events, so a small share.
UNHURRIED_SHARE = 0.125
DELAY = 3 * LOCK  #: a ``release(delay=)`` longer than the lock (renewed meanwhile)
PRODUCE_EVERY = 0.5  #: while a record waits out its delay, a record is written this often
#: A gathering application (:meth:`Member._gather`) answers a record once a later one was
#: handed out, else after this long: longer than the liveness bound, so a member that
#: waits for that answer before fetching again breaks invariant 9.
GATHER_WAIT = 2 * PROGRESS_BOUND
GATHER_HANDLERS = 2  #: its handlers: ``process(concurrency=2)``
GATHER_SHARE = 0.1  #: the share of schedules whose application gathers
WIDE_SHARE = 0.25  #: the share of schedules with two partitions on each broker
EXPLICIT_SHARE = 0.5  #: the share of schedules whose application answers explicitly
POLL_SHARE = 0.25  #: the share of schedules whose application calls ``poll()``
POLL_LIMITS = (2, 3, 8)  #: its ``max_records``, drawn per schedule
#: How long a close may take before the consumer gives up waiting for its fetch loops
#: and leaves the group anyway (its ``close_timeout``, scaled to the schedule's lock).
CLOSE_TIMEOUT = 4 * LOCK
#: The fetch loops' back-off after a failure: the consumer's (0.1 s doubling to 1 s),
#: without its jitter, so that a seed's schedule depends on its draws alone.
FETCH_BACKOFF = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
#: Invariant 13: after a top-level error, a leader is asked nothing for this long (the
#: back-off's first step).
BACKOFF_FIRST = 0.1
PARAMS = FetchParams(
    max_wait_ms=int(MAX_WAIT * 1000), min_bytes=1, max_bytes=1 << 20, max_records=8, batch_size=8
)

#: Deliberate bugs (for proving the simulator catches them): the pipelined answer's
#: supersede rule skipped, the buffer's per-record lock check skipped, the machine
#: not told of the close (so it takes answers given after it), a planner that, after a
#: no-wait fetch came back empty, waits for an answer before fetching again for ever,
#: one whose wait for that answer starts afresh at each wake-up, a machine that takes
#: a renewal the broker refused for a partition as granted, a loop idle with nothing
#: marked that the application's answers do not wake, answers after an empty no-wait
#: fetch not gathered, an answer's records taken in only up to its first ack-only
#: partition, no back-off after a request failed in transport, and answers pipelined
#: while the member closes.
MUTANTS = (
    "no-supersede",
    "no-record-lock-check",
    "answers-after-close",
    "dry-forever",
    "dry-restarts",
    "renew-refused-ok",
    "answer-no-wake",
    "answers-ungathered",
    "partitions-cut-short",
    "no-transport-backoff",
    "pipelines-closing",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one schedule did: its violation (``None``: every invariant held)."""

    seed: int
    version: str
    violation: Violation | None
    events: int
    handed: int
    ended: int
    faults: tuple[str, ...]
    delayed: bool = False  #: the schedule had a delayed release (``--delayed-release``)
    #: ``poll()`` applications were left out (``--no-poll``)
    no_poll: bool = False

    def replay(self, mutant: str | None = None) -> str:
        """The one-line command that replays this schedule."""
        extra = f" --mutant {mutant}" if mutant else ""
        if self.delayed:
            extra += " --delayed-release"
        if self.no_poll:
            extra += " --no-poll"
        return f"python -m sharecon.testing.sim --seed {self.seed} --version {self.version}{extra}"


class _NoAnswers:
    """What the records call back into (the public ShareConsumer in the consumer): never
    called, the simulated application answers through the consumer's Handout."""

    def acknowledge(self, record: Record[Any, Any], ack: AckType) -> None:
        raise AssertionError("the simulator answers records through the Handout")

    def release_later(self, record: Record[Any, Any], delay: float) -> None:
        raise AssertionError("the simulator releases records later itself")


@dataclass(slots=True, eq=False)
class SimRecord:
    """A record the application holds: the buffer's :class:`~sharecon.record.Record` and
    what the simulator knows of it."""

    record: Record[Any, Any]
    offset: int
    tp: TopicIdPartition
    d: int  #: the checker's delivery id (0: the broker never acquired it)
    delivery: Delivery
    tag: SessionTag

    @classmethod
    def of(cls, record: Record[Any, Any], ids: dict[int, int]) -> SimRecord:
        """The simulator's view of a record its buffer handed out (``ids``: its chunk's
        checker delivery ids)."""
        owner = owner_of(record)
        assert owner is not None
        offset = record.offset
        return cls(
            record,
            offset,
            record.topic_partition,
            ids.get(offset, 0),
            owner.delivery,
            owner.tag,
        )


@dataclass(slots=True)
class Wire:
    """A request on the wire."""

    f: InFlight
    body: ShareFetchRequest | ShareAcknowledgeRequest
    conn: str
    #: offset -> the delivery the member meant each answer in it for (invariant 2)
    meant: dict[tuple[TopicIdPartition, int], int | None]
    closing: bool = False
    #: offset -> whether the broker took the answer to it (invariant 10), once it has read
    #: the request
    applied: dict[tuple[TopicIdPartition, int], bool] | None = None
    #: the deliveries whose answers the broker provably took (invariant 12): once this
    #: request's answer is taken in, each must have ended (its outcome reported)
    owed: list[tuple[tuple[TopicIdPartition, int], int]] = field(default_factory=list)
    #: offset -> when the broker's lock on a record this request renews ends, for the
    #: records still this member's once the broker read it (invariant 20)
    locked_until: dict[tuple[TopicIdPartition, int], float] = field(default_factory=dict)
    #: the records this request renews that the broker, once it read it, no longer held
    #: for this member (invariant 20: the member must not believe them renewed)
    not_renewed: set[tuple[TopicIdPartition, int]] = field(default_factory=set)


@dataclass(slots=True)
class Port:
    """What one leader's fetch loop needs from its runtime (``NodeFetcher``'s I/O): the
    connection, the request on the wire, and the loop's timer. The lifecycle itself is
    the consumer's :class:`~sharecon._consumer.fetch_loop.FetchLoop`."""

    node: int
    conn: str | None = None
    conns: int = 0
    wire: Wire | None = None  #: the request on the wire
    token: int = 0  #: the pending timer's; older ones are stale
    #: when the pending wake-up (a plain one, not an idle timer) runs, if there is one
    wake_at: float | None = None
    closed: bool = False


@dataclass(slots=True)
class Knobs:
    """The schedule's fault rates and application habits, drawn from the seed."""

    delay: float
    drop: float
    stall: float
    hostile: float
    slow: float
    late: float
    twice: float
    keep_locks: bool
    close_at: float | None
    release: float
    reject: float
    refuse: float = 0.0  #: a send fails at once (the broker refuses the connection)
    #: a request is answered with a transient top-level error, unread (the broker's
    #: handler failed: UNKNOWN_SERVER_ERROR)
    busy: float = 0.0
    #: after the faults, the application releases a record with a delay longer than the
    #: lock while a producer keeps writing (``--delayed-release``; renewals: Kafka 4.2+)
    delayed: bool = False
    #: the application gathers (:meth:`Member._gather`) and, after the faults, a producer
    #: writes a few records while it holds one
    gather: bool = False
    #: ``ack_mode="explicit"``: the application answers every record before asking for
    #: the next; else implicit: asking for the next accepts the one it left unanswered
    explicit: bool = True
    #: a ShareFetch answer's records arrive damaged: the last batch cut short (the broker
    #: cut the answer at its byte limit) or one batch failing its CRC
    damage: float = 0.0
    #: near the end of the settling time, the share of records a healthy but unhurried
    #: handler takes :data:`PAUSE` virtual seconds over (no fault: every bound still runs)
    pause: float = 0.0
    #: the application calls ``poll(max_records=poll)`` (0: ``async for``)
    poll: int = 0
    #: a ShareFetch answer's fetch of one partition fails with a transient error
    #: (UNKNOWN_SERVER_ERROR): no records for it, its acknowledgements answered
    part_error: float = 0.0
    #: a ShareFetch answer that acquired records stalls, and one of its partitions moves
    #: to the other leader meanwhile: the member may fetch it there before the stalled
    #: answer lands (rule 3 of the machine judges which delivery is newer)
    stale_race: float = 0.0


class World:
    """The brokers, the member, the application and the event queue of one schedule."""

    def __init__(
        self,
        seed: int,
        version: str,
        mutant: str | None,
        trace: Callable[[str], None] | None,
        delayed: bool = False,
        poll: bool = True,
    ) -> None:
        self.trace = trace
        self.no_poll = not poll
        if mutant is not None and mutant not in MUTANTS:
            raise ValueError(f"unknown mutant {mutant!r}; one of {', '.join(MUTANTS)}")
        self.seed = seed
        self.version = version
        self.mutant = mutant
        self.rng = rng = random.Random(seed)
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        self.check = Checker()
        self.faults: list[str] = []
        self.quiet = False
        # In a quarter of the schedules each broker leads two partitions (a share session
        # of several partitions, some forgotten on a leader move): drawn from a stream of
        # its own, like their records, so the other draws of a seed stay as they were.
        prng = random.Random(seed ^ 0x9A27)
        self.n_partitions = n_parts = 4 if prng.random() < WIDE_SHARE else 2
        self.brokers = {n: ModelBroker(version, node_id=n) for n in NODES}
        for b in self.brokers.values():
            b.create_topic(TOPIC, n_parts, TOPIC_ID)
            b.configure_group(GROUP, lock_ms=LOCK_MS, earliest=True, delivery_limit=5)
        self.tps = [TopicIdPartition(TOPIC_ID, p, TOPIC) for p in range(n_parts)]
        #: the truth: which node leads each partition (partition p starts on node
        #: p % 2 + 1)
        self.leader_of = {tp: NODES[tp.partition % 2] for tp in self.tps}
        #: Where each partition's log starts: in half the schedules far from 0 (the log
        #: start after retention deleted older records), so that offsets relative to a
        #: batch's or a segment's first offset differ from absolute ones. Drawn from a
        #: stream of its own, so the other draws of a seed stay as they were.
        self.log_starts = _log_starts(seed, n_parts)
        for tp in self.tps:
            key = (TOPIC_ID, tp.partition)
            other = self.brokers[NODES[1 - tp.partition % 2]]
            del other.logs[key]  # only its leader has its log
            leader = self.brokers[self.leader_of[tp]]
            leader.logs[key].start = self.log_starts[tp.partition]
            draw = rng if tp.partition < 2 else prng
            for _ in range(draw.randint(1, 2)):
                leader.produce(TOPIC, tp.partition, draw.randint(1, 3))
        compacted = _compaction(seed, {tp: self._log(tp) for tp in self.tps})
        # In half of those partitions the cleaner also removed a batch whole (all its
        # keys written again later), a gap in the log that Kafka acquires with no record
        # behind it when a read spans it. Two batches more are written first, so that the
        # one removed may lie between two others.
        wrng = random.Random(seed ^ 0xB47C4)
        for tp in sorted(compacted, key=lambda t: t.partition):
            if wrng.random() >= WHOLE_BATCH_SHARE:
                continue
            leader = self.brokers[self.leader_of[tp]]
            for _ in range(2):
                leader.produce(TOPIC, tp.partition, wrng.randint(1, 3))
            log = self._log(tp)
            first, last = log.batches[wrng.randrange(len(log.batches) - 1)]
            compacted[tp] = (
                *compacted[tp],
                *(o for o in range(first, last + 1) if o not in compacted[tp]),
            )
        #: Offsets compaction removed, from inside their batches or with a whole batch
        #: (gaps the member must acknowledge as such), per partition: in a third of the
        #: schedules, drawn from streams of their own, so the other draws of a seed stay
        #: as they were.
        self.holes: dict[TopicIdPartition, frozenset[int]] = {
            tp: frozenset(removed) for tp, removed in compacted.items()
        }
        for tp, removed in self.holes.items():
            if removed:
                self._log(tp).compact(set(removed))  # before any fetch: as the cleaner left it
        renew = self.brokers[1].behaviour.renew
        self.knobs = Knobs(
            delay=rng.choice((0.001, 0.01, 0.05)),
            drop=rng.choice((0.0, 0.05, 0.15)),
            stall=rng.choice((0.0, 0.05, 0.1)),
            hostile=rng.choice((0.0, 0.0, 0.1)),
            slow=rng.choice((0.0, 0.2, 0.5)),
            late=rng.choice((0.0, 0.2)),
            twice=rng.choice((0.0, 0.2)),
            keep_locks=renew and rng.random() < 0.4,
            close_at=rng.uniform(1.0, FAULT_WINDOW) if rng.random() < 0.3 else None,
            release=rng.choice((0.0, 0.1, 0.3)),
            reject=rng.choice((0.0, 0.05)),
        )
        # Sends the broker refuses: a stream of their own, so the other draws of a seed stay
        # as they were before this fault.
        self.srng = srng = random.Random(seed ^ 0x5E4D)
        self.knobs.refuse = srng.choice((0.0, 0.0, 0.03, 0.1))
        self.knobs.delayed = delayed and self.brokers[1].behaviour.renew
        # Top-level errors: a stream of their own too.
        self.erng = erng = random.Random(seed ^ 0xE440)
        self.knobs.busy = erng.choice((0.0, 0.0, 0.05, 0.15))
        # Damaged record sets: a stream of their own too.
        self.drng = drng = random.Random(seed ^ 0xDA3A6E)
        self.knobs.damage = drng.choice((0.0, 0.0, 0.1, 0.3))
        # Partition-level fetch errors: a stream of their own too.
        self.perng = perng = random.Random(seed ^ 0x9E44)
        self.knobs.part_error = perng.choice((0.0, 0.0, 0.05, 0.15))
        # A stalled answer racing a leader move: a stream of its own too.
        self.srrng = srrng = random.Random(seed ^ 0x57A1E)
        self.knobs.stale_race = srrng.choice((0.0, 0.0, 0.0, 0.15))
        # An unhurried application after the heal: a stream of its own too.
        self.parng = parng = random.Random(seed ^ 0x9A05E)
        self.knobs.pause = 0.3 if parng.random() < UNHURRIED_SHARE else 0.0
        #: from when the unhurried application takes its time (:meth:`_write_while_unhurried`)
        self.unhurried_from = float("inf")
        #: when the last fault heals (the coordinator's may outlast the fault window)
        self.heal_at = FAULT_WINDOW
        #: since when a record has been available at its leader with none handed out
        self.waiting_since: float | None = None
        self.max_wait = 0.0  #: the longest such wait seen after the heal
        #: the schedule is not over before this: a producer writes until then
        self.writing_until = 0.0
        for _ in range(rng.randint(0, 3)):
            kind = rng.choice(("cut", "move", "evict", "cut-all"))
            self.at(rng.uniform(0.0, FAULT_WINDOW), self._fault, kind)
        # The group coordinator and its losses: drawn from a stream of their own, so the
        # other draws of a seed stay as they were before the coordinator was modelled.
        self.crng = crng = random.Random(seed ^ 0xC0C0)
        self.coord = ModelCoordinator(
            GROUP,
            {TOPIC: (TOPIC_ID, n_parts)},
            node_id=crng.choice(NODES),
            heartbeat_interval_ms=HEARTBEAT_MS,
            session_timeout=SESSION_TIMEOUT,
        )
        #: heartbeats fail in transport until then (a coordinator connection cut)
        self.hb_cut_until = float("-inf")
        for _ in range(crng.choice((0, 0, 1, 2))):
            kind = crng.choice(("coord-down", "coord-move", "coord-cut"))
            # Early enough for a cut to outlast the session timeout while records are held.
            self.at(crng.uniform(0.0, FAULT_WINDOW / 2), self._coord_fault, kind)
        # Drawn apart, so the other draws of a seed stay as they were before this knob.
        strict = self.brokers[1].behaviour.record_limit and random.Random(~seed).random() < 0.3
        #: acquire_mode="record_limit": the most records the member may hold (4.2+)
        self.record_limit = random.Random(~seed).choice((1, 2, 4)) if strict else None
        self._draw_gathering(seed)
        # Drawn apart, so the other draws of a seed stay as they were before this knob.
        self.knobs.explicit = random.Random(seed ^ 0xAC4).random() < EXPLICIT_SHARE
        # poll(): a stream of its own (``orng``, its application's draws too), so the
        # other draws of a seed stay as they were. Not for a gathering application
        # (process()) nor with the delayed release (here, release(delay=) of async for).
        # Explicit or implicit answers, as drawn above for async for.
        self.orng = orng = random.Random(seed ^ 0x9011)
        if orng.random() < POLL_SHARE and poll and not self.knobs.gather and not self.knobs.delayed:
            self.knobs.poll = orng.choice(POLL_LIMITS)
        self.member = Member(self, "m1")
        if self.knobs.close_at is not None:
            self.at(self.knobs.close_at, self._close_member, self.member)
        # Late closes: the member's connection breaks, and the broker handles its end only
        # later (a busy network thread), after the member may have opened a new session on
        # another connection; on 4.1 that end also ends the new session
        # (Behaviour.old_connection_ends_session). A stream of its own, so the other draws
        # of a seed stay as they were.
        self.lrng = lrng = random.Random(seed ^ 0x1A7E)
        for _ in range(lrng.choice((0, 0, 0, 1, 2))):
            self.at(lrng.uniform(0.0, FAULT_WINDOW), self._late_close, lrng.uniform(0.05, 1.5))
        self.at(FAULT_WINDOW, self._quiet)

    # -- the loop ----------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` at virtual time ``t``."""
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, fn, args))

    def run(self) -> Outcome:
        """Run events until the drain ends, a violation, or the event bound."""
        queue = self._queue
        check = self.check
        end = FAULT_WINDOW + DRAIN
        while queue and check.violation is None:
            t, _, fn, args = heapq.heappop(queue)
            if t > end:
                break
            self.now = t
            self.events += 1
            if self.trace is not None:
                self.trace(f"{t:8.3f} {getattr(fn, '__name__', fn)} {_brief(args)}")
            if self.events > MAX_EVENTS:
                check.fail(5, t, f"no quiet after {MAX_EVENTS} events (a livelock?)")
                break
            try:
                fn(*args)
            except Exception as exc:  # the machine (or buffer) raised: a crash is a bug
                check.fail(0, t, f"crash: {type(exc).__name__}: {exc}")
                break
            if self.quiet and self._finished():
                break
        if check.violation is None:
            check.finish(self.now, self._unfinished())
        return Outcome(
            self.seed,
            self.version,
            check.violation,
            self.events,
            check.handed,
            check.n_ended,
            tuple(self.faults),
            self.knobs.delayed,
            self.no_poll,
        )

    def _finished(self) -> bool:
        if self.now < self.writing_until:
            return False  # a producer still has records to write
        m = self.member
        if m.app_busy or len(m.buffer) or m.machine.pending_acks() or self.check.live:
            return False
        return next(self._each_unfinished(), None) is None

    def _unfinished(self) -> list[tuple[TopicIdPartition, int]]:
        return list(self._each_unfinished())

    def _each_unfinished(self) -> Iterator[tuple[TopicIdPartition, int]]:
        """The offsets neither acknowledged nor archived, partition by partition (asked
        after most events: it starts at the share-partition start offset, below which
        every offset is archived, and the caller may stop at the first)."""
        for tp in self.tps:
            b = self.brokers[self.leader_of[tp]]
            sp = b._partition(GROUP, (TOPIC_ID, tp.partition), self.now)
            assert sp is not None
            log = b.logs[(TOPIC_ID, tp.partition)]
            for o in range(max(log.start, sp.start), log.end):
                if sp.state_of(o).state not in _FINISHED:
                    yield (tp, o)

    # -- faults ------------------------------------------------------------------------------

    def _quiet(self) -> None:
        self.quiet = True
        if self.member.closing:
            # A fresh member drains what the first one left.
            self.member = Member(self, "m2")
        self.at(self.heal_at, self._progress)
        if self.knobs.delayed:
            self.member.delay_next = True
            self.at(self.now + PRODUCE_EVERY, self._produce, self.now + DELAY)
            self.writing_until = self.now + DELAY
        if self.knobs.gather:
            self._write_while_gathering()
        if self.knobs.pause:
            self._write_while_unhurried()

    def _draw_gathering(self, seed: int) -> None:
        """Whether the application gathers: from a stream of its own (``grng``), so the
        other draws of a seed stay as they were before this habit. Never with a strict
        record limit of 1: an application that answers only once it has seen a second
        record cannot work while it may hold one."""
        self.grng = grng = random.Random(seed ^ 0x6A7E)
        self.knobs.gather = grng.random() < GATHER_SHARE and self.record_limit != 1

    def _write_while_gathering(self) -> None:
        """After the faults, while the gathering application holds its last record, a
        producer writes one to two records, each alone, a while apart: each arrives
        after the member's no-wait fetches came back empty (as a record written later
        does on a real broker, ``tests/consumer/test_holding_never_starves.py``)."""
        grng = self.grng
        t = self.now
        for _ in range(grng.randint(1, 2)):
            t += grng.uniform(0.5, PROGRESS_BOUND)
            self.at(t, self._write_one, grng.choice(self.tps))
        self.writing_until = t

    def _write_while_unhurried(self) -> None:
        """After the faults, for an unhurried application (``Knobs.pause``): from half a
        second before the settling time ends, a producer writes a batch, and another a
        second later, and the handlers take their time, so answers wait for room while
        one does, where invariant 22 judges them. Only then: a slower application all
        along made such schedules about three times as long."""
        t = self.unhurried_from = self.heal_at + SETTLE - 0.5
        end = self.heal_at + SETTLE + 1.0
        while t < end:
            self.at(t, self._write_batch, self.parng.choice(self.tps))
            t += 1.0
        self.writing_until = max(self.writing_until, end)

    def _write_batch(self, tp: TopicIdPartition) -> None:
        """A producer writes one batch of :data:`UNHURRIED_BATCH` records to ``tp``."""
        self.brokers[self.leader_of[tp]].produce(TOPIC, tp.partition, UNHURRIED_BATCH)

    def _write_one(self, tp: TopicIdPartition) -> None:
        """A producer writes one record to ``tp``."""
        self.brokers[self.leader_of[tp]].produce(TOPIC, tp.partition, 1)

    def _produce(self, until: float) -> None:
        """A producer writes one record to each partition, until ``until``."""
        for tp in self.tps:
            self.brokers[self.leader_of[tp]].produce(TOPIC, tp.partition, 1)
        if self.now + PRODUCE_EVERY < until:
            self.at(self.now + PRODUCE_EVERY, self._produce, until)

    def _progress(self) -> None:
        """Invariant 9 (liveness), sampled: after the heal, a record available at its
        leader is handed out (it or another) within :data:`PROGRESS_BOUND`."""
        if self._available():
            if self.waiting_since is None:
                self.waiting_since = self.now
            waited = self.now - self.waiting_since
            self.max_wait = max(self.max_wait, waited)
            if waited > PROGRESS_BOUND:
                self.check.fail(
                    9,
                    self.now,
                    f"records available since t={self.waiting_since:.3f} (the faults healed "
                    f"at {self.heal_at:.3f}), none handed out in {waited:.2f} s",
                )
                return
        else:
            self.waiting_since = None
        self._answers_out()
        self.at(self.now + PROGRESS_TICK, self._progress)

    def _answers_out(self) -> None:
        """Invariant 22, sampled: from :data:`SETTLE` after the heal, no answer the
        application gave waits more than :data:`ANSWER_BOUND` for a request to carry
        it."""
        m = self.member
        since = self.heal_at + SETTLE
        if m.closing or self.now < since:
            return
        late = self.check.unsent(m.member_id, since, self.now - ANSWER_BOUND)
        if late is not None:
            key, e = late
            tp, offset = key
            self.check.fail(
                22,
                self.now,
                f"the answer to {tp.topic}-{tp.partition}@{offset} (delivery {e.delivery}) "
                f"given at t={e.answered_at:.3f} is not on the wire "
                f"{self.now - e.answered_at:.3f} s later",
            )

    def handed(self) -> None:
        """The application got a record: the member made progress (invariant 9)."""
        if self.now >= self.heal_at:
            self.waiting_since = None

    def _available(self) -> bool:
        """Whether any record is available (neither acquired nor finished) at its leader,
        or will be at the broker's next look: its lock ended (a real broker's timer
        ends it then; the model, lazily, at its next request)."""
        now = self.now
        for tp in self.tps:
            b = self.brokers[self.leader_of[tp]]
            sp = b._partition(GROUP, (TOPIC_ID, tp.partition), now)
            if sp is None:
                continue
            log = b.logs[(TOPIC_ID, tp.partition)]
            limit = sp.settings.delivery_limit
            for o in range(log.start, log.end):
                st = sp.state_of(o)
                if (
                    st.state is RecordState.AVAILABLE
                    or (
                        st.state is RecordState.ACQUIRED and st.deadline <= now and st.count < limit
                    )
                ) and self.holds_record(tp, o):
                    # (An offset of a batch the cleaner removed whole, never acquired,
                    # holds no record to hand out.)
                    return True
        return False

    def _fault(self, kind: str) -> None:
        if self.quiet:
            return
        self.faults.append(f"{kind}@{self.now:.2f}")
        m = self.member
        if kind == "cut":
            m.cut(self.rng.choice(NODES))
        elif kind == "cut-all":
            conns = [p.conn for p in m.ports.values() if p.conn is not None]
            for b in self.brokers.values():
                b.disconnect_many([c for c in conns if c is not None], self.now, concurrent=True)
            for node in NODES:
                m.cut(node, broker_side=False)
        elif kind == "evict":
            self.brokers[self.rng.choice(NODES)].evict_session(GROUP, m.member_id, self.now)
        else:
            self._move(self.rng.choice(self.tps))

    def _late_close(self, delay: float) -> None:
        """The member's connection to a node breaks now; that node handles its end
        ``delay`` seconds later."""
        if self.quiet:
            return
        node = self.lrng.choice(NODES)
        conn = self.member.ports[node].conn
        if conn is None:
            return
        self.faults.append(f"late-close@{self.now:.2f}")
        self.member.cut(node, broker_side=False)
        self.heal_at = max(self.heal_at, self.now + delay)
        self.at(self.now + delay, self._broker_close, node, conn)

    def _broker_close(self, node: int, conn: str) -> None:
        self.brokers[node].disconnect(conn, self.now)

    def _coord_fault(self, kind: str) -> None:
        """The group coordinator is lost for a while."""
        if self.quiet:
            return
        self.faults.append(f"{kind}@{self.now:.2f}")
        crng = self.crng
        now = self.now
        coord = self.coord
        if kind == "coord-down":
            coord.unavailable(now, now + crng.uniform(0.5, 4.0))
        elif kind == "coord-move":
            other = NODES[1 - NODES.index(coord.node_id)]
            coord.move(now, other, now + crng.uniform(0.0, 1.0))
        else:
            # Sometimes longer than the session timeout: the coordinator removes the member.
            cut = crng.uniform(0.5, 1.6) * SESSION_TIMEOUT
            self.hb_cut_until = max(self.hb_cut_until, now + cut)
        self.heal_at = max(self.heal_at, coord.down_until, coord.loading_until, self.hb_cut_until)

    def holds_record(self, tp: TopicIdPartition, offset: int) -> bool:
        """Whether ``offset`` of ``tp`` holds a record (not a hole compaction left, nor an
        offset past or outside the log's batches)."""
        log = self._log(tp)
        return offset not in log.holes and log.batch_of(offset) is not None

    def _log(self, tp: TopicIdPartition) -> PartitionLog:
        """``tp``'s log, at its leader (it moves with the leadership)."""
        return self.brokers[self.leader_of[tp]].logs[(TOPIC_ID, tp.partition)]

    def _move(self, tp: TopicIdPartition) -> None:
        """Leadership of ``tp`` moves to the other broker; the new leader reads the
        persisted state (acquisitions are forgotten)."""
        old_node = self.leader_of[tp]
        new_node = NODES[1 - NODES.index(old_node)]
        old, new = self.brokers[old_node], self.brokers[new_node]
        key = (TOPIC_ID, tp.partition)
        old.move_leader(TOPIC, tp.partition, self.now)
        new.logs[key] = old.logs.pop(key)
        new.leader_epochs[key] = old.leader_epochs[key]
        saved = old.persister.get((GROUP, key))
        if saved is not None:
            new.persister[(GROUP, key)] = saved
        self.leader_of[tp] = new_node

    def _close_member(self, m: Member) -> None:
        if not self.quiet:
            self.faults.append(f"close@{self.now:.2f}")
            m.close()


class Member:
    """A share consumer: the machine, the buffer, the fetch loops and the application
    (the fetch loops' and the effects' port; the loops themselves are the consumer's)."""

    def __init__(self, world: World, member_id: str) -> None:
        self.world = world
        self.member_id = member_id
        self.machine = ShareMachine(GROUP, PARAMS, record_limit=world.record_limit)
        self.buffer = buffer = DeliveryBuffer(max_records=16, max_bytes=1 << 20)
        #: The consumer's own hand-off: chunks, records and their owners, decoding, the
        #: application's answers given to the machine.
        self.handout = Handout(self.machine, buffer, self._settle, _can_renew, _no_wall_clock)
        self.handout.owner = _NoAnswers()
        buffer.on_drop = self._dropped  # the Handout's, and the checker told
        #: effects the Handout had carried out (invariant 6: an answer after close has none)
        self.settled = 0
        #: The consumer's own ``async for`` state and steps (``Cursor.move_on``, ``take``,
        #: ``acknowledge``), in the schedule's ack mode; the simulator awaits nothing, it
        #: calls the steps ``__anext__`` awaits around.
        self.cursor = Cursor(_NoWaits(), Liveness(None, 0.0), explicit=world.knobs.explicit)
        #: What the application takes records from: the buffer, or for the mutant
        #: ``no-record-lock-check`` the buffer without its per-record lock check.
        self.app_buffer: DeliveryBuffer = (
            buffer
            if world.mutant != "no-record-lock-check"
            else cast("DeliveryBuffer", _LockBlind(self))
        )
        #: the record the application holds from ``async for`` (the cursor's current one)
        self.current: SimRecord | None = None
        #: the close in progress (``None``: not closing, or the member left its group)
        self._closing: Iterator[CloseStep] | None = None
        self.ports = {n: Port(n) for n in NODES}
        #: The consumer's own fetch loop per leader: the request lifecycle, every decision
        #: and the order of the machine's calls; this class is only its port (send, the
        #: virtual clock and timers, effects, hand-off).
        driver = _DRIVERS.get(world.mutant or "", FetchDriver)
        self.loops = {
            n: FetchLoop(
                driver(self.machine, buffer, n, partial(self._want, n), clock=lambda: world.now),
                member_id,
                running=self._running,
                closing=self._is_closing,
                backoff=FETCH_BACKOFF,
                timeout=MAX_WAIT + 30.0,
                ack_timeout=30.0,
                ack_linger=ACK_LINGER,
            )
            for n in NODES
        }
        self._driving: set[int] = set()
        #: the leader whose loop's effects are being carried out (``None``: the application's)
        self._node: int | None = None
        rand = world.crng.random
        self.membership = Membership(
            GROUP,
            [TOPIC],
            member_id=member_id,
            backoff=Backoff(initial=0.1, maximum=1.0, rand=rand),
            early=replace(EARLY_HEARTBEAT, rand=rand),
        )
        #: the partitions the coordinator assigned (with topic names)
        self.assigned: frozenset[TopicIdPartition] = frozenset()
        self.coordinator: int | None = None  #: the cached FindCoordinator answer
        self.hb_loop = MembershipLoop(self.membership)
        self.hb_token = 0
        self.closed = False
        self.closing = False
        self.failed = False
        self.app_busy = False
        self.holding: list[SimRecord] = []  #: handed out, not answered yet
        #: the application's next record is released with a delay (``release(delay=)``)
        self.delay_next = False
        #: The consumer's own delayed releases, over this member as their port; the
        #: simulator only ticks them (as ``run_ticks``) and tells the checker.
        self.delayed = DelayedReleaser(self)
        self._sim_of: dict[Record[Any, Any], SimRecord] = {}  #: the records waiting there
        #: a gathering application's records whose handlers run (:meth:`_gather`)
        self.gathered: list[SimRecord] = []
        if world.knobs.gather:
            # As process(concurrency=GATHER_HANDLERS) tells the machine.
            self.machine.handlers = GATHER_HANDLERS
        self._released = False
        self._got: dict[Any, int] = {}  #: the answer being taken in: its delivery ids
        self._damaged_answer = False  #: the answer being taken in arrived damaged
        #: the request whose answer is being taken in (invariant 12)
        self._owed: Wire | None = None
        #: RENEW acknowledgements the member's requests carried (invariant 16)
        self.renews_on_wire = 0
        #: per leader, when it last answered with a top-level error or a request to it
        #: failed in transport (invariant 13)
        self.refused_at: dict[int, float] = {}
        #: per leader, when its empty answers to bare fetches came (invariant 23)
        self.empty_at: dict[int, list[float]] = {}
        #: per leader and kind (a ShareAcknowledge, an empty no-wait fetch), when it last
        #: took a request carrying answers and bringing nothing, and when the application
        #: last waited for records (invariant 25)
        self.empty_acked_at: dict[tuple[int, bool], list[float]] = {}
        self.wanted_at = 0.0
        #: Invariant 19: nodes whose session a ``busy`` fault left a step behind (the
        #: broker failed a request without reading it), until a new session opens there.
        self.epoch_behind: set[int] = set()
        #: the answer being taken in: which of its request's answers the broker took
        self._applied: dict[Any, bool] | None = None
        #: The record the application is answering now, and its delivery: a lock loss
        #: reported at once for that answer ends that delivery, not another one of the
        #: same offset (an older one from the leader before a move, answered and not yet
        #: reported).
        self._answering: dict[Any, int] = {}
        #: per chunk (partition and ledger delivery): offset -> the checker's delivery id
        self._ids: dict[tuple[TopicIdPartition, Delivery], dict[int, int]] = {}
        #: the share session and ledger delivery each delivery was taken in under
        #: (invariant 24)
        self._tag_of: dict[int, tuple[SessionTag, Delivery]] = {}
        #: deliveries the application released with a delay (invariant 24)
        self._delayed: set[int] = set()
        for n in NODES:
            world.at(world.now, self._loop, n, 0)
        world.at(world.now, self._heartbeat, 0)

    # -- the membership loop (heartbeat_loop) ------------------------------------------------

    def _heartbeat(self, token: int) -> None:
        """Run the membership loop's steps due now (``heartbeat_loop``, over the same
        :class:`MembershipLoop`).

        A heartbeat and its answer are one event: the round trip to the coordinator is
        not what the share machine sees, only the assignment it brings (and when)."""
        w = self.world
        if token != self.hb_token:
            return
        self.hb_token += 1
        loop = self.hb_loop
        while True:
            step = loop.next(w.now)
            if type(step) is Sleep:
                if step.until is not None:
                    w.at(step.until, self._heartbeat, self.hb_token)
                return  # no heartbeat due: a close schedules the leave
            if type(step) is not Beat or not self._beat(loop, step):
                return

    def _beat(self, loop: MembershipLoop, step: Beat) -> bool:
        """FindCoordinator if needed, the heartbeat, its outcome (``heartbeat._beat`` and
        ``_apply``); ``False`` if the member failed."""
        w = self.world
        now = w.now
        coord = w.coord
        if self.coordinator is None:
            self.coordinator = coord.find(now)
        if self.coordinator is None or now < w.hb_cut_until:
            settled = loop.failed(now)
        else:
            settled = loop.answered(now, coord.heartbeat(step.request, self.coordinator, now))
        if settled.find_coordinator:
            self.coordinator = None
        change = settled.change
        if change is not None:
            self.assigned = frozenset(
                TopicIdPartition(tp.topic_id, tp.partition, TOPIC) for tp in change.assigned
            )
            self.machine.assigned(self.assigned)
            if change.removed:
                w.faults.append(f"unassigned@{now:.2f}")
            self._wake(None)
        if settled.fatal is not None:
            w.check.fail(0, now, f"membership failed: {settled.fatal}")
            return False
        return True

    # -- the fetch loops (NodeFetcher) -------------------------------------------------------

    def _wake(self, node: int | None) -> None:
        """Wake the loops (``Signal.set``) that wait with nothing out; a pausing one runs
        when its pause ends."""
        w = self.world
        for n in NODES if node is None else (node,):
            loop = self.loops[n]
            if loop.phase is Phase.READY:
                port = self.ports[n]
                t = max(w.now, loop.pause_until)
                if port.wake_at is not None and port.wake_at <= t:
                    continue  # the pending wake-up comes as soon: one is enough
                port.token += 1
                port.wake_at = t
                w.at(t, self._loop, n, port.token)

    def _loop(self, node: int, token: int, linger: bool = False) -> None:
        """A wake-up, the idle wait's end (``linger``) or the pause's end."""
        port = self.ports[node]
        if token != port.token:
            return
        port.wake_at = None  # this is the pending wake-up
        if linger:
            self.loops[node].idle_expired()
        self._drive(node)

    def _drive(self, node: int) -> None:
        """Carry out the loop's actions until it waits (``NodeFetcher.run``)."""
        if node in self._driving or self.ports[node].closed:
            return  # a fatal effect closed the member while this loop ran: it goes on
        self._driving.add(node)
        try:
            self._run(node)
        finally:
            self._driving.discard(node)

    def _run(self, node: int) -> None:
        w = self.world
        loop = self.loops[node]
        port = self.ports[node]
        while True:
            a = loop.next(w.now)
            kind = type(a)
            if kind is Apply:
                try:
                    self._apply(node, cast("Apply", a).effects)
                except errors.KafkaError as exc:
                    if not loop.answering or not loop.answer_error(exc, w.now):
                        raise
            elif kind is Send:
                self._send(node, cast("Send", a))
            elif kind is Done:
                if not self._done(node, cast("Done", a)):
                    return
            elif kind is Idle:
                wait = cast("Idle", a).timeout
                port.token += 1
                port.wake_at = None
                w.at(
                    w.now + (wait if wait is not None else 1.0), self._loop, node, port.token, True
                )
                return
            elif kind is Pause:
                until = cast("Pause", a).until
                port.token += 1
                port.wake_at = until
                w.at(until, self._loop, node, port.token)
                return
            elif kind is Stopped:
                loop.close()
            elif kind is Closed:
                self._closed(node)
                return
            else:  # Await: the answer (or its failure) is an event of its own
                return

    def _want(self, node: int) -> list[TopicIdPartition]:
        """The assigned partitions ``node`` leads (none while closing)."""
        if self.closing:
            return []
        w = self.world
        return [tp for tp in w.tps if w.leader_of[tp] == node and tp in self.assigned]

    def _send(self, node: int, a: Send) -> None:
        """Send the request; the broker may refuse the connection (the session incarnation
        is over, as for the consumer)."""
        w = self.world
        port = self.ports[node]
        loop = self.loops[node]
        port.wake_at = None  # a wake-up still pending finds the request in flight
        refused = self.refused_at.pop(node, None)
        if refused is not None and not a.final and w.now - refused < BACKOFF_FIRST - 1e-9:
            w.check.fail(
                13,
                w.now,
                f"node {node} refused a request or it failed in transport at "
                f"t={refused:.3f}; the member asked it again {w.now - refused:.3f} s later, "
                "before its back-off",
            )
        if isinstance(a.body, ShareFetchRequest) and not a.body.is_renew_ack and not a.final:
            self._asks_as_configured(node, a.body)
            if self.closing:
                self._fetches_nothing_closing(node, a.body)
        if not a.final and not w.quiet and w.srng.random() < w.knobs.refuse:
            w.faults.append(f"refused@{w.now:.2f}")
            if port.conn is not None:
                w.brokers[node].disconnect(port.conn, w.now)
                port.conn = None
            self.refused_at[node] = w.now
            loop.send_failed(w.now)
            return
        if port.conn is None:
            port.conns += 1
            port.conn = f"{self.member_id}/{node}/{port.conns}"
        f = loop.sent(w.now)
        wire = Wire(f, a.body, port.conn, self._meant(a.body, node), closing=a.final)
        self.renews_on_wire += _renewals(a.body)
        port.wire = wire
        w.at(w.now + self._delay(), self._arrive, node, wire)

    def _no_spin(self, node: int, body: ShareFetchRequest) -> None:
        """Invariant 23: from :data:`SETTLE` after the heal, a leader answers no more than
        :data:`SPIN_LIMIT` bare fetches (no acknowledgements, no renewal) empty in any
        virtual second with no answer of the application's between them: an idle
        member's fetches wait at the broker, or wait for the application, and do not
        spin. (An answer wakes every dry planner, rule 2 of ``fetch_policy``; the
        answers then gather, invariant 25, rather than go a fetch each.)"""
        w = self.world
        if not w.quiet or w.now < w.heal_at + SETTLE or self.closing:
            return
        if any(p.acknowledgement_batches for t in body.topics for p in t.partitions):
            return
        times = self.empty_at.setdefault(node, [])
        times.append(w.now)
        since = max(w.now - 1.0, w.check.last_answer)
        while times[0] < since:
            del times[0]
        if len(times) > SPIN_LIMIT:
            w.check.fail(
                23,
                w.now,
                f"node {node} answered {len(times)} bare fetches empty within a second "
                f"(from t={times[0]:.3f}) with no answer of the application's between "
                "them: the member spins",
            )

    def _answers_gather(self, node: int, body: ShareFetchRequest | ShareAcknowledgeRequest) -> None:
        """Invariant 25: from :data:`SETTLE` after the heal, of three requests of one kind
        in a row to one leader that carry answers and nothing else the member needed
        (ShareAcknowledges, or no-wait fetches that came back empty, with no fetch that
        brought records between them), the first and the third are at least half the
        acknowledgement linger apart, unless the application waited for records between
        them or the third carries an answer whose lock ends within the hold margin and a
        linger. Answers wait for the linger, for room (rule 1 of ``fetch_policy``) or for
        company after a second empty fetch (rule 2), not a request each. Not under a
        strict record limit (``acquire_mode="record_limit"``), where each answer is what
        lets the next record be fetched."""
        w = self.world
        if not w.quiet or w.now < w.heal_at + SETTLE or self.closing:
            return
        if self.machine.budget is not None:
            return  # a strict record limit: only sent answers make room for the next
        if isinstance(body, ShareFetchRequest) and body.max_wait_ms:
            return
        ends = [
            end
            for t in body.topics
            for p in t.partitions
            for b in p.acknowledgement_batches
            for o in range(b.first_offset, b.last_offset + 1)
            if (end := self._broker_deadline(t.topic_id, p.partition_index, o)) is not None
        ]
        if not ends:
            return
        # Kind by kind: a ShareAcknowledge that frees room is rightly followed at once by
        # the fetch the room lets go out, which may come back empty.
        # The first answer after one empty fetch rightly goes at once (the broker's lock
        # limit may have emptied it): three of a kind in a row are judged, the first and
        # the third.
        kind = (node, isinstance(body, ShareFetchRequest))
        times = self.empty_acked_at.setdefault(kind, [])
        times.append(w.now)
        if len(times) < 3:
            return
        first = times.pop(0)
        if first < self.wanted_at or w.now - first >= ACK_LINGER / 2:
            return
        if min(ends) <= w.now + ACK_HOLD_MARGIN + ACK_LINGER:
            return  # an answer near its lock's end may not wait
        w.check.fail(
            25,
            w.now,
            f"node {node} took three {type(body).__name__}s carrying answers and bringing"
            f" nothing within {w.now - first:.3f} s (t={first:.3f} to {w.now:.3f}) while the"
            " application had records: its answers went a request each instead of waiting"
            " together",
        )

    def _fetch_brought(self, node: int) -> None:
        # Invariant 25: a fetch that brought records ends a run of empty ones.
        self.empty_acked_at.pop((node, True), None)

    def _broker_deadline(self, topic_id: uuid.UUID, partition: int, offset: int) -> float | None:
        # The lock deadline the broker gave its current delivery of the offset, if any:
        # as acquired, before renewals, as the member's ledger keeps it (a renewal moves
        # the record's deadline, not its acquisition's).
        check = self.world.check
        d = check.current.get((TopicIdPartition(topic_id, partition, TOPIC), offset))
        return None if d is None else check.acquired_deadline.get(d)

    def _asks_as_configured(self, node: int, body: ShareFetchRequest) -> None:
        """Invariant 18: a fetch asks for what the member was configured to acquire.
        Under a strict record limit (``acquire_mode="record_limit"``), record-limit
        acquisition of at most the limit's records; otherwise batch acquisition, but for
        an oversize probe (one record, record-limit acquisition)."""
        w = self.world
        if not self.machine.leader(node).session.partitions:
            return  # it fetches nothing: the session's last partitions are forgotten
        limit = w.record_limit
        mode, n = body.share_acquire_mode, body.max_records
        if limit is not None:
            ok, want = mode == 1 and 0 < n <= limit, f"record-limit acquisition of 1 to {limit}"
        elif self.machine.leader(node).guard.probing:
            ok, want = mode == 1 and n == 1, "a probe: record-limit acquisition of 1"
        else:
            ok, want = mode == 0, "batch acquisition"
        if not ok:
            w.check.fail(
                18,
                w.now,
                f"node {node}: a fetch asked for {n} records with acquire mode {mode}, not {want}",
            )

    def _fetches_nothing_closing(self, node: int, body: ShareFetchRequest) -> None:
        """Invariant 27: once its close began, the member asks for no records: what a
        fetch acquired then would be released unseen, a delivery attempt of each record
        spent where the application never saw it. Its requests carry answers and close
        its sessions only."""
        if body.max_records > 0 or body.max_bytes > 0:
            w = self.world
            w.check.fail(
                27,
                w.now,
                f"node {node}: a fetch asked for {body.max_records} records "
                f"({body.max_bytes} bytes) after the member began to close",
            )

    def _meant(
        self, body: ShareFetchRequest | ShareAcknowledgeRequest, node: int
    ) -> dict[Any, int | None]:
        out: dict[Any, int | None] = {}
        check = self.world.check
        for t in body.topics:
            for p in t.partitions:
                tp = TopicIdPartition(t.topic_id, p.partition_index, TOPIC)
                for b in p.acknowledgement_batches:
                    for i, o in enumerate(range(b.first_offset, b.last_offset + 1)):
                        types = b.acknowledge_types
                        kind = types[0] if len(types) == 1 else types[i]
                        if kind in (1, 2, 3):
                            out[(tp, o)] = check.meant((tp, o), self.member_id, node)
        return out

    def _delay(self) -> float:
        w = self.world
        return w.rng.uniform(0.0, w.knobs.delay) if not w.quiet else 0.001

    def _arrive(self, node: int, wire: Wire) -> None:
        """The request reaches the broker (unless its connection broke first)."""
        w = self.world
        loop = self.loops[node]
        if wire.conn != self.ports[node].conn or loop.conn_dead:
            # The connection is gone: the broker never read it.
            if loop.inflight is wire.f:
                self._failed_in_transport(node, wire)
                loop.failed(w.now)
                self._drive(node)
            return
        broker = w.brokers[node]
        body = wire.body
        k = w.knobs
        if (
            k.busy
            and not w.quiet
            and not wire.closing
            and wire.f.plan.epoch > 0
            and w.erng.random() < k.busy
        ):
            # The broker's handler fails before it reads the request: a top-level error,
            # nothing applied, nothing acquired, its session's epoch not moved (the
            # member's next request is then refused with INVALID_SHARE_SESSION_EPOCH and
            # it opens a new session). Not for a request that opens a session: the
            # broker's older session of the member could then match the epoch the member
            # moves to, with other partitions.
            # Every other such error is KAFKA_STORAGE_ERROR, a positive code Kafka
            # documents at the top level of both answers, the member's reaction the
            # same: -1 alone let a code table that took positive codes for success pass
            # (a mutant of seed 17's sample). Chosen by count, not drawn, so that no
            # schedule's random streams move.
            transient = sum(f.startswith("error@") for f in w.faults) % 2
            w.faults.append(f"error@{w.now:.2f}")
            self.epoch_behind.add(node)
            wire.applied = {}
            code = ErrorCode.KAFKA_STORAGE_ERROR if transient else ErrorCode.UNKNOWN_SERVER_ERROR
            resp: ShareFetchResponse | ShareAcknowledgeResponse = (
                ShareFetchResponseT(error_code=code)
                if isinstance(body, ShareFetchRequest)
                else ShareAcknowledgeResponseT(error_code=code)
            )
            w.at(w.now + w.erng.uniform(0.0, k.delay), self._answer, node, wire, resp, {})
            return
        watched = self._before(broker, wire)
        if isinstance(body, ShareFetchRequest):
            resp = broker.share_fetch(body, wire.conn, w.now)
        else:
            resp = broker.share_acknowledge(body, wire.conn, w.now)
        self._after(broker, wire, watched)
        self._note_locks(broker, wire)
        self._judge_form(node, body, resp)
        if (
            isinstance(body, ShareAcknowledgeRequest)
            and not body.is_renew_ack
            and not wire.closing
            and not resp.error_code
        ):
            self._answers_gather(node, body)
        if (
            k.part_error
            and not w.quiet
            and not wire.closing
            and isinstance(resp, ShareFetchResponseT)
            and resp.responses
            and w.perng.random() < k.part_error
        ):
            resp = self._partition_failed(broker, resp)
        delay = self._delay()
        if isinstance(body, ShareFetchRequest):
            got = self._acquired(broker, resp)  # type: ignore[arg-type]
            if got:
                self._fetch_brought(node)
            if not got and not body.is_renew_ack and not resp.error_code:
                if not wire.closing:
                    self._no_spin(node, body)
                    self._answers_gather(node, body)
                if body.max_wait_ms > 0:
                    # An empty fetch waits at the broker, here until a lock ends at the
                    # latest (then records may be acquirable again). An error (the
                    # session not found after an eviction, a wrong epoch) is answered at
                    # once, as Kafka does.
                    wait = body.max_wait_ms / 1000.0
                    expiry = broker.next_wakeup()
                    if expiry is not None:
                        wait = min(wait, max(expiry - w.now, 0.0) + 0.001)
                    delay += wait
        else:
            got = {}
        if not w.quiet and not wire.closing:
            r = w.rng.random()
            if r < k.drop:
                # The answer is lost: the connection breaks; both sides see it.
                w.faults.append(f"drop@{w.now:.2f}")
                w.at(w.now + delay, self._broken, node, wire)
                return
            if r < k.drop + k.stall:
                w.faults.append(f"stall@{w.now:.2f}")
                delay += LOCK * w.rng.uniform(0.5, 1.5)
                w.heal_at = max(w.heal_at, w.now + delay)  # the stall outlasts the window
            elif isinstance(body, ShareFetchRequest) and got and r < k.drop + k.stall + k.hostile:
                resp = self._hostile(resp)  # type: ignore[arg-type]
            elif got and k.stale_race and w.srrng.random() < k.stale_race:
                delay = self._stale_race(got, delay)
        w.at(w.now + delay, self._answer, node, wire, resp, got)

    def _stale_race(self, got: dict[Any, int], delay: float) -> float:
        """Stall this answer, which acquired ``got``, and move one of its partitions to
        the other leader meanwhile; return the answer's new delay.

        The rare shape behind seed 1479 (one schedule in about 1,500 with faults drawn
        alone), made common: the member may fetch the partition from its new leader, and
        take those records in, before this older answer lands. The stall stays short of
        the member's request timeout, so that the answer does land.
        """
        w = self.world
        tp = w.srrng.choice(sorted({key[0] for key in got}, key=lambda t: t.partition))
        w.faults.append(f"stale-race@{w.now:.2f}")
        delay += LOCK * w.srrng.uniform(0.3, 0.9)
        move_at = w.now + w.srrng.uniform(0.0, 0.05)
        w.at(move_at, w._move, tp)
        w.heal_at = max(w.heal_at, w.now + delay)
        return delay

    def _before(self, broker: ModelBroker, wire: Wire) -> list[tuple[Any, Any, int]]:
        """The acknowledged offsets the broker holds for this member now, with their
        delivery counts (invariants 2 and 10)."""
        out = []
        now = self.world.now
        #: Invariant 10: an answer to a record the broker still has but does not hold for
        #: this member with a live lock is refused (the model ends due locks first); one
        #: to a record gone from its window is neither (Kafka ignores it): not judged.
        refused = wire.applied = {}
        for key in wire.meant:
            tp, o = key
            sp = broker.partitions.get((GROUP, (tp.topic_id, tp.partition)))
            if sp is None:
                continue
            st = sp.states.get(o)
            if st is None:
                continue
            if (
                st.state is RecordState.ACQUIRED
                and st.member == self.member_id
                and st.deadline > now
            ):
                out.append((key, sp, st.count))
            else:
                refused[key] = False
        return out

    def _after(self, broker: ModelBroker, wire: Wire, watched: list[tuple[Any, Any, int]]) -> None:
        w = self.world
        check = w.check
        applied = wire.applied
        assert applied is not None
        for key in [k for k, took in applied.items() if not took]:
            # Gone from the partition's window by now (its lock ended, and at the delivery
            # limit it was archived, before the answer was read): ignored, not refused.
            tp, o = key
            sp = broker.partitions.get((GROUP, (tp.topic_id, tp.partition)))
            if sp is None or o < sp.start or o not in sp.states:
                del applied[key]
        for key, sp, count in watched:
            st = sp.states.get(key[1])
            if st is not None and st.state is RecordState.ACQUIRED and st.member == self.member_id:
                # Not applied (all or nothing), unless the same request's fetch acquired
                # the record again after its release.
                if st.count == count:
                    applied[key] = False
                elif not wire.closing:
                    applied[key] = True
                continue
            # The FINAL request also ends the session, which releases what the member
            # holds: a change is then no proof the answer was taken (not judged).
            if not wire.closing:
                applied[key] = True
            accepted = st is None or st.state is RecordState.ACKNOWLEDGED
            meant = wire.meant[key]
            if meant is not None and (accepted or not wire.closing):
                # Invariant 12: an accept is proof even in a FINAL request (closing the
                # session releases records, it accepts none).
                wire.owed.append((key, meant))
            check.applied(key, wire.meant[key], accepted, w.now)
        # Renewals move the broker's deadline.
        for t in wire.body.topics:
            for p in t.partitions:
                if not p.acknowledgement_batches:
                    continue
                sp = broker.partitions.get((GROUP, (t.topic_id, p.partition_index)))
                if sp is None:
                    continue
                tp = TopicIdPartition(t.topic_id, p.partition_index, TOPIC)
                for b in p.acknowledgement_batches:
                    if 4 not in b.acknowledge_types:
                        continue
                    for o in range(b.first_offset, b.last_offset + 1):
                        st = sp.states.get(o)
                        d = check.current.get((tp, o))
                        if st is not None and st.state is RecordState.ACQUIRED and d is not None:
                            check.deadline_of[d] = st.deadline

    def _acquired(self, broker: ModelBroker, resp: ShareFetchResponse) -> dict[Any, int]:
        """Number the deliveries an answer carries (before any fault touches it)."""
        check = self.world.check
        got: dict[Any, int] = {}
        for t in resp.responses:
            for p in t.partitions:
                if not p.acquired_records:
                    continue
                tp = TopicIdPartition(t.topic_id, p.partition_index, TOPIC)
                sp = broker.partitions[(GROUP, (t.topic_id, p.partition_index))]
                for a in p.acquired_records:
                    for o in range(a.first_offset, a.last_offset + 1):
                        got[(tp, o)] = check.acquired(
                            (tp, o), sp.states[o].deadline, self.world.now
                        )
        return got

    def _hostile(self, resp: ShareFetchResponse) -> ShareFetchResponse:
        """A broker answer no client should trust: acquired ranges outside the batch,
        duplicated, or reversed."""
        w = self.world
        how = w.rng.choice(("outside", "duplicate", "reversed"))
        w.faults.append(f"hostile-{how}@{w.now:.2f}")
        topics = []
        for t in resp.responses:
            parts = []
            for p in t.partitions:
                ranges = list(p.acquired_records)
                if ranges:
                    a = ranges[0]
                    if how == "outside":
                        # Past every batch the answer carries (a range inside a batch that
                        # the broker did not acquire is a lie no client can tell).
                        ranges.append(replace(a, first_offset=1000, last_offset=1049))
                    elif how == "duplicate":
                        ranges.append(a)
                    else:
                        ranges[0] = replace(a, first_offset=a.last_offset + 1)
                parts.append(replace(p, acquired_records=tuple(ranges)))
            topics.append(replace(t, partitions=tuple(parts)))
        return replace(resp, responses=tuple(topics))

    def _damaged(self, resp: ShareFetchResponse) -> ShareFetchResponse:
        """An answer whose records of one partition arrive damaged: the last batch cut
        short (a broker cuts an answer at its byte limit; the acquired records of that
        batch are in no complete batch), or one batch's body changed so that it fails its
        CRC. Either way the member cannot read those records: it must release them, never
        acknowledge them as gaps (invariant 17) nor leave them unanswered (invariant 3)."""
        w = self.world
        drng = w.drng
        # Of a partition with two batches or more: one stays whole, so the answer still
        # delivers (an answer with none would be released before any Deliver, which the
        # checker would not see taken in).
        parts = [
            (i, j, bounds)
            for i, t in enumerate(resp.responses)
            for j, p in enumerate(t.partitions)
            if p.acquired_records and len(bounds := _batch_bounds(bytes(p.records or b""))) > 1
        ]
        if not parts:
            return resp
        ti, pj, bounds = drng.choice(parts)
        p = resp.responses[ti].partitions[pj]
        data = bytes(p.records or b"")
        how = drng.choice(("cut", "crc"))
        w.faults.append(f"damaged-{how}@{w.now:.2f}")
        if how == "cut":
            start, end = bounds[-1]
            damaged = data[: drng.randrange(start + 1, end)]
        else:
            start, end = drng.choice(bounds)
            at = drng.randrange(start + _BATCH_HEADER, end)  # in the records: past the CRC's
            damaged = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        topics = list(resp.responses)
        t = topics[ti]
        partitions = list(t.partitions)
        partitions[pj] = replace(p, records=damaged)
        topics[ti] = replace(t, partitions=tuple(partitions))
        return replace(resp, responses=tuple(topics))

    def _partition_failed(
        self, broker: ModelBroker, resp: ShareFetchResponse
    ) -> ShareFetchResponse:
        """An answer whose fetch of one partition failed at the broker with a transient
        error (``UNKNOWN_SERVER_ERROR``, as when reading the log fails): nothing acquired
        for it (the model's acquisitions for it are taken back, count included), no
        records, its acknowledgements answered as they were. The member notes the error
        and goes on (invariant 14: it never fails)."""
        w = self.world
        ti = w.perng.randrange(len(resp.responses))
        t = resp.responses[ti]
        if not t.partitions:
            return resp
        pj = w.perng.randrange(len(t.partitions))
        w.faults.append(f"partition-error@{w.now:.2f}")
        p = t.partitions[pj]
        if p.acquired_records:
            sp = broker.partitions[(GROUP, (t.topic_id, p.partition_index))]
            taken = [
                o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)
            ]
            for o in taken:
                sp._release_one(o, decrement=True)
            sp._persist(taken)
        partitions = list(t.partitions)
        partitions[pj] = replace(
            partitions[pj],
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
            records=None,
            acquired_records=(),
        )
        topics = list(resp.responses)
        topics[ti] = replace(t, partitions=tuple(partitions))
        return replace(resp, responses=tuple(topics))

    def _broken(self, node: int, wire: Wire) -> None:
        """The connection of ``wire`` broke with the request out."""
        loop = self.loops[node]
        if loop.inflight is not wire.f:
            return
        self.world.brokers[node].disconnect(wire.conn, self.world.now)
        self.ports[node].conn = None
        self._failed_in_transport(node, wire)
        loop.failed(self.world.now)
        self._drive(node)

    def _failed_in_transport(self, node: int, wire: Wire) -> None:
        """Invariant 13: the request of ``wire`` failed in transport, so the next request
        to ``node`` waits out the back-off (the FINAL request's failure ends the session
        closing, and nothing follows it)."""
        if not wire.closing:
            self.refused_at[node] = self.world.now

    def cut(self, node: int, *, broker_side: bool = True) -> None:
        """The network closes ``node``'s connection."""
        port = self.ports[node]
        conn = port.conn
        if conn is None:
            return
        w = self.world
        if broker_side:
            w.brokers[node].disconnect(conn, w.now)
        port.conn = None
        loop = self.loops[node]
        wire = port.wire
        if wire is not None and wire.conn == conn and loop.inflight is wire.f:
            # The request out fails with its connection (the FINAL one too: the loop
            # knows which it was).
            self._failed_in_transport(node, wire)
            loop.failed(w.now)
            self._drive(node)
        else:
            loop.connection_closed()  # the watcher wakes the loop
            self._wake(node)

    def _note_locks(self, broker: ModelBroker, wire: Wire) -> None:
        """When the broker's locks on the records this request renews end, once it read
        the request (invariant 20): those still this member's; the others, not renewed."""
        for t in wire.body.topics:
            sp = None
            for p in t.partitions:
                sp = broker.partitions.get((GROUP, (t.topic_id, p.partition_index)))
                if sp is None:
                    continue
                tp = TopicIdPartition(t.topic_id, p.partition_index, TOPIC)
                for b in p.acknowledgement_batches:
                    types = b.acknowledge_types
                    for i, o in enumerate(range(b.first_offset, b.last_offset + 1)):
                        if (types[0] if len(types) == 1 else types[i]) != 4:
                            continue
                        st = sp.states.get(o)
                        if st is None or o < sp.start:
                            continue  # gone from the window: Kafka ignores it, not judged
                        if st.state is RecordState.ACQUIRED and st.member == self.member_id:
                            wire.locked_until[(tp, o)] = st.deadline
                        else:
                            wire.not_renewed.add((tp, o))

    def _judge_form(self, node: int, body: Any, resp: Any) -> None:
        """Invariant 19: the broker never refuses a request as malformed (top-level
        INVALID_REQUEST), nor for its session epoch unless a ``busy`` fault left that
        session a step behind. Either would be the member breaking the protocol: a wrong
        FINAL epoch, a session not reset when its connection went, flags the request
        may not carry. (Partition-level codes are the acknowledgements' own.)"""
        epoch = body.share_session_epoch
        if epoch == 0:
            self.epoch_behind.discard(node)  # a new session: in step again
        code = resp.error_code
        if code == ErrorCode.INVALID_REQUEST or (
            code == ErrorCode.INVALID_SHARE_SESSION_EPOCH and node not in self.epoch_behind
        ):
            w = self.world
            w.check.fail(
                19,
                w.now,
                f"node {node} refused a {type(body).__name__[:-7]} (epoch {epoch}) with "
                f"{ErrorCode(code).name}, with no fault to explain it",
            )

    def _answer(self, node: int, wire: Wire, resp: Any, got: dict[Any, int]) -> None:
        """The answer reaches the member (``NodeFetcher._await``)."""
        loop = self.loops[node]
        if loop.inflight is not wire.f:
            return  # orphaned: its connection broke, or the loop gave it up
        w = self.world
        if w.quiet and w.now >= w.heal_at + SETTLE and not self.closing:
            refused = _refusal(resp)
            if refused is not None:
                w.check.fail(
                    11,
                    w.now,
                    f"node {node} refused a {type(wire.body).__name__[:-7]} with {refused} "
                    f"{w.now - w.heal_at:.2f} s after the faults healed",
                )
        if (
            w.knobs.damage
            and got
            and not w.quiet
            and not self.closing
            and isinstance(resp, ShareFetchResponseT)
            and w.drng.random() < w.knobs.damage
        ):
            # Its records arrive damaged (on the way, or the broker cut the answer).
            resp = self._damaged(resp)
            self._damaged_answer = True  # released unread, some of it: not for 26
        if resp.error_code and not wire.closing:
            # Invariant 13: the next request to this leader waits out the back-off.
            self.refused_at[node] = w.now
        self._got = got
        self._applied = wire.applied
        self._owed = wire
        try:
            loop.answered(resp, NAMES, w.now)
            self._drive(node)
        finally:
            self._applied = None

    def _done(self, node: int, a: Done) -> bool:
        """A request's outcome is taken in: the invariants' bookkeeping; whether the loop
        goes on now (else a wake-up runs it, as ``_resume`` did)."""
        w = self.world
        got = self._got
        self._got = {}
        damaged, self._damaged_answer = self._damaged_answer, False
        f = a.f
        owed = self._owed
        if owed is not None and owed.f is f:
            self._owed = None
            if a.answered:
                self._reported(owed)
        if (
            a.ok
            and self.closing
            and f is not None
            and f.plan.kind is RequestKind.SHARE_FETCH
            and f.plan.tag == self.machine.leader(node).session.tag
        ):
            # Taken in and released at once (no Deliver): they end when that is reported.
            # Offsets compaction emptied are not deliveries (as in :meth:`_deliver`): the
            # release covers them, but its outcome ends none (:meth:`_outcome`).
            # Nor are a stale answer's (rule 3 of the machine): not taken in at all.
            for key, d in self._to_take_in(node, f.sent_at, got):
                w.check.taken_in(key, d, self.member_id, node)
        elif (
            a.ok
            and not damaged
            and f is not None
            and f.plan.kind is RequestKind.SHARE_FETCH
            and f.plan.tag == self.machine.leader(node).session.tag
        ):
            self._all_taken_in(node, f.sent_at, got)
        if a.answered and not a.final:
            self._session_agrees(node)
        self._counters_agree()
        loop = self.loops[node]
        if a.final or loop.phase is not Phase.READY:
            return True
        if self.closing:
            return True  # the loop stops now
        self._wake(node)
        return False

    def _to_take_in(
        self, node: int, sent_at: float, got: dict[Any, int]
    ) -> Iterator[tuple[Any, int]]:
        """The deliveries of an answer its session took in that the member must take in:
        not offsets compaction emptied (the model counts no delivery there), nor a stale
        answer's partition (rule 3 of the machine: a newer delivery from another leader)."""
        holes = self.world.holes
        stale = self.machine.stale
        for key, d in got.items():
            if key[1] not in holes.get(key[0], ()) and not stale(key[0], node, sent_at):
                yield key, d

    def _all_taken_in(self, node: int, sent_at: float, got: dict[Any, int]) -> None:
        """Invariant 26: every record the broker acquired for the member in an answer its
        current session took in is taken in: buffered (a Deliver), or left out by a rule
        that says so (a stale answer's partition, an offset compaction emptied). One left
        out silently would sit under its lock at the broker, a delivery attempt spent
        where neither the application nor the member's counts see it."""
        w = self.world
        check = w.check
        for key, d in self._to_take_in(node, sent_at, got):
            if d in check.took:
                continue
            check.fail(
                26,
                w.now,
                f"{key[0].topic}-{key[0].partition}@{key[1]}: delivery {d}, acquired for "
                f"{self.member_id} in an answer from node {node} its session took in, was "
                "never taken in",
            )
            return

    def _reported(self, wire: Wire) -> None:
        """Invariant 12: every answer the broker took in ``wire``'s request has its
        outcome reported once that request's answer is taken in: the delivery it was
        meant for has ended (the application's ``on_acknowledged`` heard of it)."""
        check = self.world.check
        for key, d in wire.owed:
            if check.is_open(key, d):
                tp, o = key
                check.fail(
                    12,
                    self.world.now,
                    f"{tp.topic}-{tp.partition}@{o} (delivery {d}): the broker took its "
                    f"answer, the answer to that request came, and no outcome was reported",
                )
                return

    def _counters_agree(self) -> None:
        """Invariant 16: the renewal counters the consumer reports (``renewals_sent_total``,
        ``renewals_failed_total``) hold what went on the wire: at least as many renewals
        counted sent as the member's requests carried, and failed ones between none and
        those sent."""
        m = self.machine
        if not (
            self.renews_on_wire <= m.renewals_sent and 0 <= m.renewals_failed <= m.renewals_sent
        ):
            self.world.check.fail(
                16,
                self.world.now,
                f"the member counts {m.renewals_sent} renewals sent and {m.renewals_failed} "
                f"failed; its requests carried {self.renews_on_wire}",
            )

    def _session_agrees(self, node: int) -> None:
        """The member's view of its share session with ``node`` is the broker's
        (invariant 8): at epoch 0 (no session held for this incarnation) it lists no
        partitions; open, with no request out, it lists those the broker's session holds."""
        session = self.machine.leader(node).session
        mine = {(tp.topic_id, tp.partition) for tp in session.partitions}
        if session.is_new:
            if mine:
                self.world.check.fail(
                    8,
                    self.world.now,
                    f"node {node}: the member's new share session (epoch 0) still lists "
                    f"partitions {sorted(p for _, p in mine)}",
                )
            return
        if session.in_flight is not None:
            return
        held = self.world.brokers[node].sessions.get((GROUP, self.member_id))
        if held is None or held.epoch != session.epoch:
            return  # the broker ended it: the member learns so from its next answer
        if mine != set(held.partitions):
            self.world.check.fail(
                8,
                self.world.now,
                f"node {node}: the member's share session lists partitions "
                f"{sorted(p for _, p in mine)}, the broker's {sorted(p for _, p in held.partitions)}",
            )

    def _is_closing(self) -> bool:
        return self.closing

    def _running(self) -> bool:
        return not self.closing and not self.failed

    # -- effects -----------------------------------------------------------------------------

    def _apply(self, node: int | None, effects: list[Effect] | None = None) -> None:
        """Carry out the machine's effects (or ``effects``), in order, with the consumer's
        :func:`~sharecon._consumer.effect_port.carry_out` and this member as its port
        (``node``: the leader whose loop they came from, for the invariants)."""
        w = self.world
        buffer = self.buffer
        outer = self._node
        self._node = node
        try:
            for e in self.machine.drain() if effects is None else effects:
                if w.trace is not None:
                    w.trace(f"         effect {e!r:.300}")
                if type(e) is LocksRenewed:
                    self._renewed_within(e)
                carry_out(e, buffer, self)
        finally:
            self._node = outer

    def _renewed_within(self, e: LocksRenewed) -> None:
        """Invariant 20: a renewed lock ends, for the member, no later than the lock the
        broker set when it read the renew (the answer being taken in). Counted from a
        stalled answer instead of the renew's send, the member believed for up to a
        lock's length that it held a record the broker had taken back (seed 1810 on 4.2
        and 4.4)."""
        wire = self._owed
        if e.deadline is None or wire is None:
            return
        w = self.world
        for handle in e.handles:
            rec = cast("Record[Any, Any]", handle)
            if (rec.topic_partition, rec.offset) in wire.not_renewed:
                tp = rec.topic_partition
                w.check.fail(
                    20,
                    w.now,
                    f"{tp.topic}-{tp.partition}@{rec.offset}: renewed until "
                    f"{e.deadline:.3f} for the member, but the broker no longer held it "
                    f"for the member when it read the renew",
                )
                return
            end = wire.locked_until.get((rec.topic_partition, rec.offset))
            if end is not None and e.deadline > end + 1e-9:
                tp = rec.topic_partition
                w.check.fail(
                    20,
                    w.now,
                    f"{tp.topic}-{tp.partition}@{rec.offset}: renewed until "
                    f"{e.deadline:.3f} for the member, the broker's lock ends at {end:.3f}",
                )

    # -- the effect port (sharecon._consumer.effect_port) --------------------------------

    def report(self, results: list[AckResult], *, lost: bool) -> None:
        """Outcomes: each delivery they end is checked ended once (invariant 3)."""
        node = self._node
        for r in results:
            self._outcome(r, lost, node)

    def deliver(self, e: Deliver) -> None:
        """Records to buffer: the checker's delivery ids kept with them."""
        self._deliver(e)

    def wake(self, node_id: int | None) -> None:
        """Wake a loop (``Signal.set``)."""
        self._wake(node_id)

    def session_lost(self, e: SessionLost, dropped: int) -> None:
        """The buffer dropped the session's chunks (the checker heard of each record)."""

    def partition_lost(self, e: PartitionLost, dropped: int) -> None:
        """The buffer dropped the partition's chunks (the checker heard of each record)."""

    def fail(self, error: errors.KafkaError) -> None:
        """The consumer fails: it closes. Invariant 14: every fault of a schedule is
        transient, so the member never fails."""
        w = self.world
        w.check.fail(14, w.now, f"the member failed: {type(error).__name__}: {error}")
        self.failed = True
        w.faults.append(f"fail({error})@{w.now:.2f}")
        self.close()

    def look_again(self) -> None:
        """The loops read the new leaders when they plan."""
        self._wake(None)

    def other(self, e: Effect) -> None:
        """Errors kept, counters, log lines, dead letters, batch acquisition's release:
        not simulated, but what ``health()`` would say is checked (invariant 15)."""
        w = self.world
        if (
            type(e) in _ALARMS
            and w.quiet
            and w.now >= w.heal_at + SETTLE
            and not self.closing
            and w.check.violation is None
        ):
            w.check.fail(
                15,
                w.now,
                f"{w.now - w.heal_at:.2f} s after the faults healed, over a link that "
                f"answers at once, the member reported {e!r:.200}",
            )

    def _outcome(self, r: AckResult, lost: bool, node: int | None) -> None:
        w = self.world
        how = "reported lost" if lost else ("acknowledged" if r.ok else "reported failed")
        applied = self._applied if not lost else None
        holes = w.holes.get(r.partition, ())
        for b in r.batches:
            for i, o in enumerate(range(b.first_offset, b.last_offset + 1)):
                if o in holes:
                    # Compaction emptied it: never a delivery (:meth:`_deliver`), whatever
                    # the answer (one released unread, with its batch, is one too).
                    continue
                kind = b.types[0] if len(b.types) == 1 else b.types[i]
                if kind is AckType.GAP:
                    # Not a record: never taken in as a delivery (:meth:`_deliver`). But an
                    # offset that holds one must not be answered as a gap (invariant 17):
                    # the broker would archive a record the application never saw.
                    if w.holds_record(r.partition, o):
                        w.check.fail(
                            17,
                            w.now,
                            f"{r.partition.topic}-{r.partition.partition}@{o} holds a record "
                            f"and was acknowledged as a gap ({how})",
                        )
                    continue
                took = applied.get((r.partition, o)) if applied is not None else None
                if took is not None and took != r.ok:
                    # Invariant 10: the outcome of an answer says what the broker did.
                    w.check.fail(
                        10,
                        w.now,
                        f"{r.partition.topic}-{r.partition.partition}@{o}: {kind.name} "
                        f"{how}, but the broker {'took' if took else 'refused'} it",
                    )
                d = self._answering.get((r.partition, o)) if lost else None
                if d is not None and w.check.is_open((r.partition, o), d):
                    # Lost at once, for the answer being given: that delivery ends.
                    w.check.ended((r.partition, o), w.now, how, self.member_id, d=d)
                    continue
                if lost or kind is not AckType.RENEW:
                    # A lost answer (a renewal's too) ends the delivery the application
                    # holds; an outcome ends the answered one, else the newest (the
                    # machine's own release or gap).
                    w.check.ended(
                        (r.partition, o), w.now, how, self.member_id, newest=not lost, node=node
                    )

    def _deliver(self, e: Deliver) -> None:
        tp = e.tp
        got = self._got
        ids = {}
        gaps = {o for lo, hi in e.intake.gaps for o in range(lo, hi + 1)}
        # Offsets compaction emptied: the batch's decoding finds them, and the machine
        # acknowledges them as gaps (not deliveries of a record either).
        holes = self.world.holes.get(tp, ())
        for r in e.intake.ranges:
            for o in range(r.first_offset, r.last_offset + 1):
                if o in gaps or o in holes:
                    continue  # the machine acknowledges it as a gap itself
                d = got.get((tp, o), 0)
                ids[o] = d
                self.world.check.taken_in((tp, o), d, self.member_id, e.tag.node_id)
        self._ids[(tp, e.delivery)] = ids
        limit = self.world.record_limit
        if limit is not None and ids:
            for d in ids.values():
                self._tag_of[d] = (e.tag, e.delivery)
            held = self._holding()
            if held > limit:
                self.world.check.fail(
                    24,
                    self.world.now,
                    f"{tp.topic}-{tp.partition}: the member holds {held} records (not confirmed "
                    f"answered), over its record limit of {limit}",
                )
        self.handout.deliver(e)  # the consumer's own (its Deliver effect's port)
        self._app_wake()

    def _holding(self) -> int:
        """Invariant 24's count: the records this member took in and holds, handed out or
        not, answered or not, until the broker confirms the answer (the outcome is
        reported); a record counts while its lock lasts and its share session is the
        member's current one with its leader (the broker released the others, or will).
        Not counted: a record reported lost with its partition's leader (the machine no
        longer holds it), and one released with a delay (parked, it needs no handling,
        and counting it would stop fetching for the whole delay; so a fetch sent while it
        waited may be answered after its release, which then counts for nothing until
        confirmed either)."""
        w = self.world
        now, ends, m, delayed = w.now, w.check.deadline_of, self.machine, self._delayed
        held = 0
        for (tp, offset), entries in w.check.live.items():
            for e in entries:
                if e.member != self.member_id:
                    continue
                taken = self._tag_of.get(e.delivery)
                if taken is None or ends.get(e.delivery, 0.0) <= now:
                    continue
                tag, delivery = taken
                if tag != m.leader(tag.node_id).session.tag or e.delivery in delayed:
                    continue
                held += e.state == ANSWERED or m.holds(tp, offset, delivery)
        return held

    def _settle(self) -> None:
        effects = self.machine.drain()
        self.settled += len(effects)
        self._apply(None, effects)

    def _dropped(self, chunk: Chunk, first: int) -> None:
        self.handout.dropped(chunk, first)
        tp = chunk.intake.tp
        last = chunk.last_offset()
        if self._released:
            return
        ids = self._ids.get((tp, chunk.delivery), {})
        # Records of a damaged batch were released when the answer came (intake's
        # release): that release's outcome ends them, not the drop.
        released = {o for lo, hi in chunk.intake.release for o in range(lo, hi + 1)}
        w = self.world
        for o in range(first, last + 1):
            if o in ids and o not in released:
                w.check.ended((tp, o), w.now, "dropped unhanded", self.member_id, d=ids[o])

    def _pop_mutant(self, clock: Callable[[], float]) -> Any:
        """``DeliveryBuffer.pop_one`` without its per-record lock check (the mutant
        ``no-record-lock-check``: a deliberate bug, not a copy)."""
        buffer: Any = self.buffer
        chunks = buffer._chunks
        while chunks:
            chunk = chunks[0]
            pos = chunk.pos
            if pos < len(chunk.records):
                chunk.pos = pos + 1
                buffer.records -= 1
                return chunk.records[pos]
            if chunk.records:
                buffer._finish_batch(chunk)
            if buffer._expired(chunk, clock):
                continue
            if not buffer._decode(chunk, SLICE):
                chunks.popleft()
                buffer._room()
        return None

    # -- the delayed releases' port (sharecon._consumer.delayed.DelayedPort) ----------------

    def clock(self) -> float:
        """The virtual time (lock deadlines are on it)."""
        return self.world.now

    def check_renew(self) -> None:
        """Delayed releases run only where the model takes renewals (``--delayed-release``
        is on 4.2+)."""

    def apply_effects(self) -> None:
        """Carry out the machine's effects."""
        self._apply(None)

    def records_wanted(self) -> None:
        """The application waits for records (``ConsumerCore.records_wanted``)."""
        self.wanted_at = self.world.now
        self.machine.records_wanted()
        self.apply_effects()

    def note_error(self, exc: errors.KafkaError) -> None:
        """An error the consumer keeps for ``recent_errors``: kept in the fault list."""
        w = self.world
        w.faults.append(f"noted({type(exc).__name__})@{w.now:.2f}")

    def wake_leader(self, tp: TopicIdPartition) -> None:
        """Wake the fetch loop of ``tp``'s leader."""
        self._wake(self.world.leader_of.get(tp))

    # -- the application ---------------------------------------------------------------------

    def _clock(self) -> float:
        return self.world.now

    def _app_wake(self) -> None:
        if not self.app_busy and not self.closing:
            self.app_busy = True
            self.world.at(self.world.now, self._app_take)

    def _app_take(self) -> None:
        """The application asks for its next record: ``async for`` (the consumer's
        :class:`~sharecon._consumer.cursor.Cursor` steps), or for a gathering application
        a ``process()`` handler, which pops the buffer itself (``process.run_workers``)."""
        w = self.world
        if self.closing:
            self.app_busy = False
            return
        if w.knobs.poll:
            self._poll()
            return
        if w.knobs.gather:
            got = self.app_buffer.pop_one(self._clock)
        elif self.app_buffer is not self.buffer:
            # The lock-blind mutant: compiled, Cursor.take accepts only a DeliveryBuffer,
            # so the record is popped here and made current as take() makes it.
            self._ask()
            got = self.app_buffer.pop_one(self._clock)
            if got is not None:
                cur = self.cursor
                cur.current, cur.answered = got, False
                cur.served += 1
        else:
            self._ask()
            got = self.cursor.take(self.app_buffer, self._clock)
        if got is None:
            self.app_busy = False
            # It waits for records, as Liveness.wait_for_records tells the consumer.
            self.records_wanted()
            if self.buffer.has_room():
                self._wake(None)
            return
        rec = SimRecord.of(got, self._ids.get((got.topic_partition, owner_of(got).delivery), {}))  # type: ignore[union-attr]
        if not w.knobs.gather:
            self.current = rec
        w.check.handed_out((rec.tp, rec.offset), rec.d, w.now)
        w.handed()
        # Its answer goes back on the session it came from: that session must be current.
        current = self.machine.leader(rec.tag.node_id).session.tag
        if rec.tag != current:
            w.check.handed_stale((rec.tp, rec.offset), rec.d, w.now, rec.tag, current)
        if self.delay_next:
            # release(delay=DELAY): kept (renewed) for the delay, then released; the
            # application goes on with the next record at once.
            self.delay_next = False
            self.holding.append(rec)
            self._sim_of[got] = rec
            self._delayed.add(rec.d)
            try:
                if self.delayed.add(got, DELAY):
                    w.at(w.now + DELAY_TICK, self._delay_tick)
                self.cursor.answered_elsewhere(got)  # as ShareConsumer.release_later
            except errors.InvalidRecordStateError:
                # Not this member's to answer any more (its lock was lost, or a later
                # acquisition superseded it): the consumer raises to the application,
                # which goes on; the record comes back. The next record is delayed.
                self.holding.remove(rec)
                del self._sim_of[got]
                if w.knobs.explicit:
                    self._answered(rec, MarkResult.UNKNOWN)
                # Implicit mode: the record is still the cursor's, unanswered; its next
                # step accepts it, and the loss that answer reports ends the delivery
                # (ended here too, it ended twice: seed 50004145, --delayed-release).
                self.delay_next = True
            self._app_take()
            return
        if w.knobs.gather:
            self._gather(rec)
            return
        k = w.knobs
        rng = w.rng
        quiet = w.quiet
        if not quiet and rng.random() < k.slow:
            took = LOCK * rng.uniform(0.3, 2.0)
        elif not quiet and rng.random() < k.late:
            took = LOCK * rng.uniform(0.9, 1.1)
        elif quiet and k.pause and w.now >= w.unhurried_from and w.parng.random() < k.pause:
            took = w.parng.uniform(*PAUSE)
        else:
            took = rng.uniform(0.0, 0.05)
        if not quiet:
            # A slow handler is a fault too: it heals when the handler returns.
            w.heal_at = max(w.heal_at, w.now + took)
        if k.keep_locks and not quiet and took > LOCK / 2:
            t = LOCK / 2
            while t < took:
                w.at(w.now + t, self._app_renew, rec)
                t += LOCK / 2
        self.holding.append(rec)
        w.at(w.now + took, self._app_answer, rec)

    def _poll(self) -> None:
        """The application calls ``poll(max_records=N)``, in the consumer's steps (explicit
        mode: the previous batch was answered, nothing to settle): up to N records popped
        at once (``DeliveryBuffer.pop_many``) and told to the machine as handed out
        (``Handout.handed_out``: a run of offsets per delivery, the ledger's ``deliver``);
        the application then works on the batch and answers its records one by one."""
        w = self.world
        records = self.buffer.pop_many(w.knobs.poll, self._clock)
        if not records:
            self.app_busy = False
            self.records_wanted()  # as Liveness.wait_for_records
            if self.buffer.has_room():
                self._wake(None)
            return
        self.handout.handed_out(records)
        batch = []
        for got in records:
            owner = owner_of(got)
            assert owner is not None
            rec = SimRecord.of(got, self._ids.get((got.topic_partition, owner.delivery), {}))
            w.check.handed_out((rec.tp, rec.offset), rec.d, w.now)
            current = self.machine.leader(rec.tag.node_id).session.tag
            if rec.tag != current:
                w.check.handed_stale((rec.tp, rec.offset), rec.d, w.now, rec.tag, current)
            batch.append(rec)
        w.handed()
        self.holding.extend(batch)
        k = w.knobs
        orng = w.orng
        quiet = w.quiet
        if not quiet and orng.random() < k.slow:
            took = LOCK * orng.uniform(0.3, 2.0)
        elif not quiet and orng.random() < k.late:
            took = LOCK * orng.uniform(0.9, 1.1)
        else:
            took = orng.uniform(0.0, 0.05)
        if not quiet:
            w.heal_at = max(w.heal_at, w.now + took)  # a slow batch is a fault too
        if k.keep_locks and not quiet and took > LOCK / 2:
            t = LOCK / 2
            while t < took:
                for rec in batch:
                    w.at(w.now + t, self._app_renew, rec)
                t += LOCK / 2
        w.at(w.now + took, self._poll_answer, batch)

    def _poll_answer(self, batch: list[SimRecord]) -> None:
        """The application answers the records of its ``poll()`` batch, each with
        ``record.accept()`` and friends, then polls again. In implicit mode it answers
        only the records it rejects or releases; the next ``poll()`` accepts the rest in
        bulk (:meth:`_bulk_accept`)."""
        w = self.world
        k = w.knobs
        orng = w.orng
        implicit: list[SimRecord] = []
        for rec in batch:
            if rec in self.holding:
                self.holding.remove(rec)
            r = orng.random()
            if w.quiet or r >= k.reject + k.release:
                ack = AckType.ACCEPT
            else:
                ack = AckType.REJECT if r < k.reject else AckType.RELEASE
            if ack is AckType.ACCEPT and not k.explicit:
                implicit.append(rec)
            elif self.closing:
                self._answer_after_close(rec, ack)
            else:
                self._answering = {(rec.tp, rec.offset): rec.d}
                try:
                    self._answered(rec, self._acknowledge(rec, ack))
                    self._apply(None)
                finally:
                    self._answering = {}
        if implicit and not self.closing:  # closing released them already
            self._bulk_accept(implicit)
        self._app_take()

    def _bulk_accept(self, batch: list[SimRecord]) -> None:
        """Implicit ``poll()``: the next call accepts every record handed out and not
        answered (``Iteration.poll``: ``ConsumerCore.answer_all_delivered``); the ones
        whose lock was lost are reported lost (the ledger's ``settle_dead``), each once.
        The checker is told of the accepts the ledger took, and of the ones it refused
        without a report (their loss was reported already)."""
        w = self.world
        check = w.check
        held = [rec for rec in batch if self.handout.holds(rec.record)]
        self._answering = {(rec.tp, rec.offset): rec.d for rec in batch}
        try:
            self.machine.answer_all_delivered(AckType.ACCEPT)
            for rec in held:
                check.answered((rec.tp, rec.offset), rec.d, w.now)
            self._apply(None)
        finally:
            self._answering = {}
        for rec in batch:
            key = (rec.tp, rec.offset)
            if rec not in held and check.is_handed(key, rec.d):
                check.ended(key, w.now, "refused", self.member_id, d=rec.d)

    def _ask(self) -> None:
        """``async for`` asks for the next record: the consumer's ``Cursor.move_on``
        settles the current one (implicit mode: accepted unless answered; explicit: it
        must have been answered, else the consumer raises and the simulator with it).
        The checker is told of an implicit accept (the ledger takes it if the record is
        still held; else it takes nothing, silently, as for the consumer)."""
        cursor = self.cursor
        rec = self.current
        self.current = None
        cur = cursor.current
        if cur is None or cursor.answered or rec is None or cursor.explicit:
            cursor.move_on(self.handout)
            return
        key = (rec.tp, rec.offset)
        held = self.handout.holds(cur)
        self._answering = {key: rec.d}
        try:
            cursor.move_on(self.handout)
        finally:
            self._answering = {}
        check = self.world.check
        if held:
            check.answered(key, rec.d, self.world.now)
        elif check.is_handed(key, rec.d):
            # Not this member's any more (its loss reported): the accept took nothing.
            check.ended(key, self.world.now, "refused", self.member_id, d=rec.d)

    def _acknowledge(self, rec: SimRecord, ack: AckType) -> MarkResult:
        """The application answers ``rec``: a ``process()`` handler through
        ``Handout.answer`` (as ``process.run_workers`` does), else ``record.accept()``
        and friends (``ShareConsumer.acknowledge``: the cursor's ``acknowledge``); an
        answer the consumer refuses (answered already, not held any more) is raised to
        the application, which goes on."""
        if self.world.knobs.gather:
            return self.handout.answer(rec.record, ack)
        try:
            return self.cursor.acknowledge(self.handout, rec.record, ack)
        except errors.InvalidRecordStateError:
            return MarkResult.UNKNOWN

    def _gather(self, rec: SimRecord) -> None:
        """A gathering application: ``process(concurrency=2)`` whose handlers wait for
        each other (a batch being filled, FastStream's ``max_workers``). A handler
        finishes (answers its record) only once a later record was handed out, else
        after :data:`GATHER_WAIT`; a free handler takes the next record at once. Locks
        are kept where the broker renews them (Kafka 4.2+), as ``process()`` does. The
        last record's handler waits for a record only a fetch sent while it holds one
        can bring."""
        w = self.world
        for old in self.gathered:  # it has seen a later record: its handler finishes
            w.at(w.now + w.grng.uniform(0.0, 0.05), self._gather_answer, old)
        self.gathered.append(rec)
        self.holding.append(rec)
        w.at(w.now + GATHER_WAIT, self._gather_answer, rec)
        if w.brokers[1].behaviour.renew:
            w.at(w.now + LOCK / 2, self._gather_renew, rec)
        if len(self.gathered) < GATHER_HANDLERS:
            self._app_take()
        # else every handler is busy (app_busy stays set): the next finishing one takes

    def _gather_answer(self, rec: SimRecord) -> None:
        """A gathering handler finishes: its record is answered (once), and the handler
        takes the next record."""
        if rec not in self.gathered:
            return  # finished already
        self.gathered.remove(rec)
        if rec in self.holding:  # else its lock was lost waiting out a delay
            self._app_answer(rec, again=True)
        if self.app_busy and len(self.gathered) < GATHER_HANDLERS:
            self._app_take()

    def _gather_renew(self, rec: SimRecord) -> None:
        """The lock keeper of a gathering handler: renew while the record is held."""
        if rec in self.holding and not self.closing:
            self.handout.answer(rec.record, AckType.RENEW)
            self.world.at(self.world.now + LOCK / 2, self._gather_renew, rec)

    def _app_renew(self, rec: SimRecord) -> None:
        if rec in self.holding and not self.closing:
            self.handout.answer(rec.record, AckType.RENEW)

    def _delay_tick(self) -> None:
        """``run_ticks`` in virtual time: the consumer's own
        :meth:`~sharecon._consumer.delayed.DelayedReleaser.step` every ``TICK`` until
        nothing waits or the member closes; the checker is told what it did."""
        delayed = self.delayed
        if self.closing or self.failed:
            delayed.ticking = False
            return
        w = self.world
        check = w.check
        sim_of = self._sim_of
        # A lock loss reported at once for an answer of the tick ends that delivery.
        self._answering = {(r.tp, r.offset): r.d for r in sim_of.values()}
        try:
            done = delayed.step(w.now)
        finally:
            self._answering = {}
        for record in done.lost:  # no longer held: it comes back, early, not lost
            rec = sim_of.pop(record)
            if rec in self.holding:
                self.holding.remove(rec)
            key = (rec.tp, rec.offset)
            if check.is_handed(key, rec.d):
                check.ended(key, w.now, "lost waiting", self.member_id, d=rec.d)
        for record, result in done.released:
            rec = sim_of.pop(record)
            if rec in self.holding:
                self.holding.remove(rec)
            self._answered(rec, result)
        if len(delayed.pending):
            w.at(w.now + DELAY_TICK, self._delay_tick)
        else:
            delayed.ticking = False

    def _answered(self, rec: SimRecord, result: MarkResult) -> None:
        """The checker told of the application's answer to ``rec`` (``result``: the
        ledger's word on it)."""
        w = self.world
        key = (rec.tp, rec.offset)
        if result is MarkResult.OK:
            w.check.answered(key, rec.d, w.now)
        elif result is MarkResult.UNKNOWN and w.check.is_handed(key, rec.d):
            # Refused: its lock loss was reported already (the consumer raises).
            w.check.ended(key, w.now, "refused", self.member_id, d=rec.d)

    def _app_answer(self, rec: SimRecord, again: bool = False, ack: AckType | None = None) -> None:
        w = self.world
        k = w.knobs
        rng = w.rng
        if rec in self.holding:
            self.holding.remove(rec)
        r = rng.random() if ack is None else 0.0
        if ack is not None:
            pass
        elif w.quiet:
            ack = AckType.ACCEPT
        elif r < k.reject:
            ack = AckType.REJECT
        elif r < k.reject + k.release:
            ack = AckType.RELEASE
        else:
            ack = AckType.ACCEPT
        if self.closing:
            self._answer_after_close(rec, ack)
        elif ack is AckType.ACCEPT and not again and not k.explicit and rec is self.current:
            pass  # implicit mode: asking for the next record accepts it (Cursor.move_on)
        else:
            self._answering = {(rec.tp, rec.offset): rec.d}
            try:
                self._answered(rec, self._acknowledge(rec, ack))
                self._apply(None)
            finally:
                self._answering = {}
        if not again and not w.quiet and rng.random() < k.twice:
            w.at(w.now + rng.uniform(0.0, LOCK), self._app_answer, rec, True)
        if not again:
            self._app_take()

    def _answer_after_close(self, rec: SimRecord, ack: AckType) -> None:
        """The application answers after close: the machine must refuse it, raising
        InvalidRecordStateError, and mark nothing (invariant 6)."""
        w = self.world
        machine = self.machine
        before = machine.ledger.holds(rec.tp, rec.offset, rec.delivery)
        settled = self.settled
        try:
            self.cursor.acknowledge(self.handout, rec.record, ack)
        except errors.InvalidRecordStateError:
            refused = True
        else:
            refused = False
        changed = machine.ledger.holds(rec.tp, rec.offset, rec.delivery) != before
        if not refused or changed or machine.effects or self.settled != settled:
            w.check.fail(
                6,
                w.now,
                f"an answer to {rec.tp.topic}-{rec.tp.partition}@{rec.offset} after close was "
                + ("taken" if not refused else "refused but changed the member's state"),
            )
        self._apply(None)

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close in the consumer's order (:func:`~sharecon._consumer.closing.close_steps`,
        which ``ShareConsumer.close`` runs too): answers refused from now on, what is
        held and buffered released, the fetch loops closed (each with its FINAL
        request), then the group left (:meth:`_leave`); within :data:`CLOSE_TIMEOUT`."""
        if self.closing:
            return
        w = self.world
        self.closing = True
        # Kafka 4.1: the buffered records are left to the sessions' end (closing, rule 5).
        spare = spares_buffered(w.brokers[1].behaviour.fetch_version)
        steps = self._closing = close_steps(
            self.machine, self.buffer, self.apply_effects, spare_buffered=spare
        )
        step = next(steps)
        assert step is CloseStep.STOP_DEAD_LETTERS  # no dead-letter router simulated
        if w.mutant == "answers-after-close":
            self.machine.closing = False  # the mutant: the machine takes answers after close
        # What the buffer held is released by this step: that release is how it ends.
        self._released = True
        try:
            step = next(steps)
        finally:
            self._released = False
        assert step is CloseStep.CLOSE_FETCHERS
        w.at(w.now + CLOSE_TIMEOUT, self._close_timed_out)
        for n in NODES:
            port = self.ports[n]
            port.token += 1
            port.wake_at = None
            self._drive(n)  # a loop waiting stops now; one with a request out, after it

    def _leave(self) -> None:
        """Every fetch loop closed: the close's last step, leaving the group."""
        steps = self._closing
        if steps is None:
            return
        self._closing = None
        for step in steps:
            assert step is CloseStep.LEAVE_GROUP
            if self.membership.leave() is None:
                self.world.at(self.world.now, self._heartbeat, self.hb_token)

    def _close_timed_out(self) -> None:
        """The close ran out of time with a loop still waiting for an answer: as the
        consumer's shutdown does, its jobs are cancelled (the loops and the heartbeat),
        its connections closed, and no leave is sent: the coordinator removes the
        member once its session times out."""
        if self._closing is None:
            return
        self._closing = None
        self.world.faults.append(f"close-timeout@{self.world.now:.2f}")
        self.hb_token += 1  # the heartbeat loop is cancelled
        for n in NODES:
            self._closed(n)

    def _closed(self, node: int) -> None:
        port = self.ports[node]
        if port.closed:
            return
        port.closed = True
        port.wire = None
        if port.conn is not None:
            self.world.brokers[node].disconnect(port.conn, self.world.now)
            port.conn = None
        if all(p.closed for p in self.ports.values()):
            self.closed = True
            self.world.check.closed(self.member_id)
            self._leave()


def run(
    seed: int,
    version: str = "4.4",
    mutant: str | None = None,
    trace: Callable[[str], None] | None = None,
    *,
    delayed: bool = False,
    poll: bool = True,
) -> Outcome:
    """Run the schedule of ``seed`` on Kafka ``version`` semantics (with a ``mutant``;
    ``trace`` is told every event and effect; ``delayed``: after the faults the
    application releases a record with a delay while a producer writes, on 4.2+;
    ``poll=False``: no ``poll()`` application, the schedule as it was before them, for
    the seeds of bugs found earlier)."""
    world = World(seed, version, mutant, trace, delayed, poll)
    plant = _PLANTED.get(mutant) if mutant is not None else None
    if plant is None:
        return world.run()
    with plant():
        return world.run()


#: Mutants planted in the machine's module or class, or the planner's class, for one run
#: (:mod:`.mutants`), rather than through the fetch driver.
_PLANTED: dict[str, Callable[[], AbstractContextManager[object]]] = {
    "renew-refused-ok": mutants.renew_refused_ok,
    "answers-ungathered": mutants.answers_ungathered,
    "partitions-cut-short": mutants.partitions_cut_short,
    "no-transport-backoff": mutants.no_transport_backoff,
    "pipelines-closing": mutants.pipelines_closing,
}


class _NoSupersede(FetchDriver):
    """The mutant ``no-supersede``: the driver pipelines without the machine's supersede
    rule (it asks for no pipelining, then sends the next request anyway)."""

    __slots__ = ()

    def fetch_answer(
        self,
        f: InFlight,
        resp: ShareFetchResponse,
        names: Any,
        now: float,
        *,
        pipeline: bool,
        closing: Callable[[], bool],
    ) -> Generator[fetch_driver.Step, None, None]:
        machine = self.machine
        answer = machine.fetch_answered(f, resp, names, now, pipeline=False)
        yield fetch_driver.Apply(machine.drain(), answer)
        if not answer.proceed:
            return
        if pipeline and answer.acquired > 0:
            turn = self.turn(answer.acquired, answer.size)
            if turn.plan is not None:
                yield fetch_driver.Send(turn)
        machine.fetch_records(f, resp, names, closing=closing())
        yield fetch_driver.Apply(machine.drain())


class _DryForever(FetchDriver):
    """The mutant ``dry-forever`` (:mod:`.mutants`, shared with the whole-client
    simulation), planted through this schedule's driver only."""

    __slots__ = ()

    def idle_timeout(self, ack_linger: float, now: float | None = None) -> float | None:
        return mutants.dry_forever_idle_timeout(self.machine, self.node_id, ack_linger, now)

    def idle_expired(self) -> None:
        mutants.dry_forever_idle_expired(self.machine, self.node_id)


class _DryRestarts(FetchDriver):
    """The mutant ``dry-restarts``: a dry planner's wait starts afresh at each idle spell
    (no deadline), so wake-ups for other things (each renewal) keep it from ever ending."""

    __slots__ = ()

    def idle_timeout(self, ack_linger: float, now: float | None = None) -> float | None:
        return self.machine.idle_timeout(self.node_id, ack_linger)


class _AnswerNoWake(FetchDriver):
    """The mutant ``answer-no-wake``: the fix of stop 50 undone. A loop idle with nothing
    marked (no room) is not woken by the application's answers: they wait for whatever
    wakes it next (its 1 s safety net)."""

    __slots__ = ()

    def idle_timeout(self, ack_linger: float, now: float | None = None) -> float | None:
        timeout = self.machine.idle_timeout(self.node_id, ack_linger, now)
        self.machine.leader(self.node_id).planner.awaits_answer = False
        return timeout


#: The fetch driver of each mutant that changes it.
_DRIVERS: dict[str, type[FetchDriver]] = {
    "no-supersede": _NoSupersede,
    "dry-forever": _DryForever,
    "dry-restarts": _DryRestarts,
    "answer-no-wake": _AnswerNoWake,
}


class _NoWaits:
    """The cursor's owner (the consumer's slow paths): never called, the simulator calls
    the cursor's sans-I/O steps, never ``__anext__``, which awaits."""

    def _not_running(self) -> BaseException:
        raise AssertionError("the simulator never awaits the cursor")

    def _rejoin_after_idle(self, core: Any) -> None:
        raise AssertionError("the simulator never awaits the cursor")

    async def _next_prepared(self, core: Any) -> Record[Any, Any]:
        raise AssertionError("the simulator never awaits the cursor")

    async def _no_record(self, core: Any) -> None:
        raise AssertionError("the simulator never awaits the cursor")


class _LockBlind:
    """The buffer the application takes from under the mutant ``no-record-lock-check``:
    ``pop_one`` without its per-record lock check."""

    __slots__ = ("member",)

    def __init__(self, member: Member) -> None:
        self.member = member

    def pop_one(
        self, clock: Callable[[], float], now: float | None = None
    ) -> Record[Any, Any] | None:
        return cast("Record[Any, Any] | None", self.member._pop_mutant(clock))


#: Invariant 15: what the consumer keeps for ``health()`` and its log as a problem: an
#: error noted, a fetch late or too slow for the lock, a partition blocked as too big
#: for the link. Once the faults have healed there is none to report.
_ALARMS = (NoteError, FetchLate, PartitionBlocked)


def _renewals(body: ShareFetchRequest | ShareAcknowledgeRequest) -> int:
    """How many RENEW acknowledgements a request carries (one per record)."""
    n = 0
    for t in body.topics:
        for p in t.partitions:
            for b in p.acknowledgement_batches:
                types = b.acknowledge_types
                if len(types) == 1:
                    n += (b.last_offset - b.first_offset + 1) if types[0] == 4 else 0
                else:
                    n += sum(1 for k in types if k == 4)
    return n


def _log_starts(seed: int, partitions: int = 2) -> tuple[int, ...]:
    """Each partition's log start offset: 0 in half the schedules, else far from 0 (up
    to 2**40; ``offset - first`` and ``offset | first`` then mostly disagree), the
    partitions apart (an offset of one is mostly no offset of another)."""
    orng = random.Random(seed ^ 0x0FF5E7)
    if orng.random() < 0.5:
        return (0,) * partitions
    first = (orng.randrange(1, 1 << 40), orng.randrange(1, 1 << 20))
    return first + tuple(orng.randrange(1, 1 << 30) for _ in range(partitions - 2))


#: The share of schedules whose logs were compacted (:func:`_compaction`).
COMPACTED_SHARE = 1 / 3
#: In those, the share of partitions that also lost a batch whole.
WHOLE_BATCH_SHARE = 1 / 2


def _compaction(
    seed: int, logs: dict[TopicIdPartition, PartitionLog]
) -> dict[TopicIdPartition, tuple[int, ...]]:
    """Which records compaction removed, per partition: none in two thirds of the
    schedules; else, in each batch of two records or more, each record but one at random
    with even odds (a batch keeps at least one record, as after Kafka's log cleaner; the
    first and the last offsets of a batch may go)."""
    crng = random.Random(seed ^ 0xC0A7AC7)
    out: dict[TopicIdPartition, tuple[int, ...]] = {}
    if crng.random() >= COMPACTED_SHARE:
        return out
    for tp, log in logs.items():
        removed: list[int] = []
        for first, last in log.batches:
            if last == first:
                continue
            kept = crng.randint(first, last)
            removed += [o for o in range(first, last + 1) if o != kept and crng.random() < 0.5]
        out[tp] = tuple(removed)
    return out


#: A v2 record batch's header: its records follow (the CRC covers from byte 21 on).
_BATCH_HEADER = 61


def _batch_bounds(data: bytes) -> list[tuple[int, int]]:
    """Where each record batch of a Records field starts and ends (``BatchLength`` at
    byte 8 counts the bytes after the first 12)."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        end = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        out.append((pos, end))
        pos = end
    return out


def _refusal(resp: Any) -> str | None:
    """The first error an answer carries, top level or of a fetched partition (an
    acknowledgement's own error is the application's doing: a handler slower than the
    lock); ``None`` if none."""
    if resp.error_code:
        return f"error {resp.error_code}"
    if isinstance(resp, ShareFetchResponseT):
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    return f"error {p.error_code} for partition {p.partition_index}"
    return None


def _no_wall_clock() -> float | None:
    """The Handout's wall-clock offset: the simulator has no wall clock (records carry
    none; their ``lock_deadline`` is on the virtual clock)."""
    return None


def _can_renew() -> None:
    """The Handout's renew check: the simulated application renews only where the model
    takes renewals."""


def _brief(args: tuple[Any, ...]) -> str:
    out = []
    for a in args:
        if isinstance(a, Wire):
            plan = a.f.plan
            acks = sum(len(p.acknowledgement_batches) for t in a.body.topics for p in t.partitions)
            out.append(f"<{plan.kind.name} tag={plan.tag} epoch={plan.epoch} acks={acks}>")
        elif isinstance(a, SimRecord):
            out.append(f"<rec {a.tp.partition}@{a.offset} d={a.d}>")
        elif isinstance(a, (int, str, float)):
            out.append(repr(a))
        else:
            out.append(type(a).__name__)
    return " ".join(out)
