"""One seeded fault schedule for the Producer on its own: the real engine against a model
of the partition leaders' idempotent produce rules, on a virtual clock.

:func:`run` builds a small world from a seed: three model brokers leading one to three
partitions of a topic (the leaders' append rules are
:class:`sharecon.testing.model.produce.ProducePartition`'s), and one idempotent producer
whose every decision is made by the code users run: the real
:class:`~sharecon._produce.engine.Engine` over the real
:class:`~sharecon._produce.accumulator.Accumulator`, with the real
:class:`~sharecon.producer.RecordFuture` for each record. The loop here only carries the
engine's decisions out, as :mod:`sharecon._producer.sender` does with sockets: rounds when
woken or when something falls due, one connection per broker (requests pipelined and
answered in order on it, independently across brokers), producer id resets, metadata
refreshes, leader hints.

From the seed come: link delays (answers from different leaders overtake each other),
connection cuts with requests in flight (requests not yet arrived are lost, answers of
applied ones are lost), brokers refusing connections for a while (longer than
``delivery_timeout`` too), brokers that hang and then crash, stalled brokers (the client times the request out while the
broker has applied it), leadership moves (the old leader answers NOT_LEADER_OR_FOLLOWER,
with or without the new leader), NOT_ENOUGH_REPLICAS answers (not appended),
REQUEST_TIMED_OUT answers for a batch the leader appended but could not replicate in time
(acks=all), and throttled answers. After the faults heal a few more records are sent.

The invariants (checked as the schedule runs and at its end; "Producer simulation" in ``docs/testing.md``):

P1. every batch is finished exactly once, and every record's future resolves: written
    (with its offset) or failed with a typed :class:`~sharecon.errors.KafkaError`;
P2. a future that says written names the record's offset in its partition's log;
P3. no record is in a partition's log twice;
P4. each partition's log holds the producer's records in the order they were sent;
P5. no gap: a record missing from the log while a record sent after it (to the same
    partition) is in it has a failed future;
P6. at most ``max_in_flight`` batches of a partition are in flight at once;
P7. liveness: every future resolves by the time the faults heal plus
    ``delivery_timeout``; and each record sent after the faults healed is written within
    :data:`HEALED_BOUND` virtual seconds;
P8. no batch the partition holds already is answered OUT_OF_ORDER_SEQUENCE_NUMBER (a
    resend always comes while the broker still remembers the batch).
"""

from __future__ import annotations

import heapq
import random
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._produce.accumulator import Accumulator
from sharecon._produce.engine import Engine, LeaderHint, Outgoing
from sharecon._produce.settings import check_settings
from sharecon._producer.future import RecordFuture
from sharecon.protocol import ProduceResponse
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from sharecon.protocol.records import read_batches
from sharecon.testing.model.produce import ProducePartition

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from sharecon._produce.batch import Batch

__all__ = [
    "HEALED_BOUND",
    "MUTANTS",
    "ProduceOutcome",
    "ProduceViolation",
    "first_failure",
    "main",
    "run",
    "search",
]

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x9E0D)
BROKERS = (1, 2, 3)
#: The engine's options in every schedule (some vary by seed, see :class:`_World`).
DELIVERY_TIMEOUT = 12.0
REQUEST_TIMEOUT = 3.0
#: The client's wait for an answer: the broker's timeout plus transit, as Producer sets it.
CLIENT_TIMEOUT = REQUEST_TIMEOUT + 5.0
BACKOFF_MAX = 1.0
#: When the last fault heals at the latest (virtual seconds).
FAULTS_END = 30.0
#: P7: a record sent after every fault healed is written within this many virtual
#: seconds. A request in flight when the faults healed ends by CLIENT_TIMEOUT; a retry
#: waits at most BACKOFF_MAX; a producer id reset, a metadata refresh and a few round
#: trips take well under a second each here.
HEALED_BOUND = CLIENT_TIMEOUT + 2 * BACKOFF_MAX + 3.0

#: Deliberate bugs the simulation must catch (``--mutant``): ``no-ambiguous`` reports
#: every lost request as never written (so a batch that expires after one hands its
#: sequence numbers back); ``no-reset`` never replaces the producer id. The others undo
#: one fix each of the bugs the simulation found: ``no-first-confirm`` pipelines before a
#: first batch of the producer id is written on a partition; ``no-window`` numbers new
#: batches however many before them are not done; ``rto-certain`` takes REQUEST_TIMED_OUT
#: as "not written"; ``resend-unknown`` resends batches of unknown outcome under a new
#: producer id.
MUTANTS = (
    "no-ambiguous",
    "no-reset",
    "no-first-confirm",
    "no-window",
    "rto-certain",
    "resend-unknown",
)


@dataclass(frozen=True, slots=True)
class ProduceViolation:
    """One broken producer invariant (P1 to P8), when, and what happened."""

    invariant: str
    at: float
    what: str

    def __str__(self) -> str:
        return f"{self.invariant} at t={self.at:.3f}: {self.what}"


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    """What one producer schedule did (``violation`` ``None``: every invariant held)."""

    seed: int
    violation: ProduceViolation | None
    events: int
    records: int
    written: int
    failed: int
    faults: tuple[str, ...]

    def replay(self, mutant: str | None = None) -> str:
        """The one-line command that replays this schedule."""
        extra = f" --mutant {mutant}" if mutant else ""
        return f"python -m sharecon.testing.sim.produce --seed {self.seed}{extra}"


@dataclass(slots=True)
class _Part:
    leader_id: int
    leader_epoch: int


@dataclass(slots=True)
class _View:
    """The producer's metadata, as the cluster view keeps it (may be stale)."""

    partitions: dict[str, tuple[_Part, ...]]
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: {TOPIC: TOPIC_ID})
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: {TOPIC_ID: TOPIC})


@dataclass(slots=True, eq=False)
class _Conn:
    broker: int
    alive: bool = True
    last_arrival: float = 0.0
    last_answer: float = 0.0
    muted_until: float = 0.0
    pending: list[Outgoing] = field(default_factory=list)


@dataclass(slots=True)
class _Sent:
    partition: int
    value: bytes
    at: float
    future: RecordFuture
    healed: bool


class _Hooks:
    """The accumulator's hooks: what the sender does, on the virtual clock."""

    def __init__(self, world: _World) -> None:
        self.world = world
        self.done: dict[int, int] = {}

    def wake(self) -> None:
        self.world.kick(self.world.now)

    def batch_done(self, batch: Batch) -> None:
        self.done[id(batch)] = self.done.get(id(batch), 0) + 1
        if self.done[id(batch)] > 1:
            self.world.fail("P1", f"{batch!r} finished {self.done[id(batch)]} times")

    def retrying(self, batch: Batch, error: errors.KafkaError) -> None:
        self.world.note(f"retry {batch!r} attempt {batch.attempts}: {error}")

    def log(self, level: int, message: str, *args: object) -> None:
        self.world.note(message % args)


class _Stop(Exception):
    pass


class _World:
    def __init__(self, seed: int, mutant: str | None, trace: Callable[[str], None] | None):
        if mutant is not None and mutant not in MUTANTS:
            raise ValueError(f"unknown mutant {mutant!r}; one of {', '.join(MUTANTS)}")
        self.seed = seed
        self.mutant = mutant
        self.trace = trace
        self.rng = rng = random.Random(seed)
        self.now = 0.0
        self.events = 0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._poll_at = float("inf")
        self.violation: ProduceViolation | None = None
        self.count = rng.randint(1, 3)
        # Record sizes: a batch of 1024 bytes holds 1, 3 or dozens of them.
        self.pad = b"." * rng.choice([0, 300, 600])
        self.truth = [_Part(rng.choice(BROKERS), 0) for _ in range(self.count)]
        self.view = _View({TOPIC: tuple(_Part(p.leader_id, p.leader_epoch) for p in self.truth)})
        self.logs = [ProducePartition() for _ in range(self.count)]
        self.conns: dict[int, _Conn] = {}
        self.down_until = dict.fromkeys(BROKERS, 0.0)
        self.stall_until = dict.fromkeys(BROKERS, 0.0)
        self.throttle_until = dict.fromkeys(BROKERS, 0.0)
        self.rto_until = 0.0
        self.nenough_until = 0.0
        self.refreshing = False
        self.next_pid = 1000
        self.faults: list[str] = []
        backoff_rng = random.Random(seed ^ 0x5EED)
        settings = check_settings(
            acks="all",
            idempotent=True,
            compression=None,
            compression_level=None,
            linger=rng.choice([0.0, 0.002, 0.02]),
            max_batch_bytes=rng.choice([1024, 2048, 16384]),
            max_request_size=1 << 20,
            max_buffer_bytes=1 << 24,
            delivery_timeout=DELIVERY_TIMEOUT,
            request_timeout=REQUEST_TIMEOUT,
            metadata_timeout=10.0,
            close_timeout=5.0,
            retry_backoff=Backoff(
                initial=0.1,
                maximum=BACKOFF_MAX,
                multiplier=2.0,
                jitter=0.2,
                rand=backoff_rng.random,
            ),
        )
        self.settings = settings
        self.hooks = _Hooks(self)
        self.acc = Accumulator(
            settings,
            self.hooks,
            clock=lambda: self.now,
            wall_ns=lambda: 1_700_000_000_000_000_000 + int(self.now * 1e9),
            randrange=rng.randrange,
        )
        self.engine = Engine(self.acc, settings)
        self.acc.restart_sequences(self._new_pid(), 0)  # what Producer.start() does
        self.sent: list[_Sent] = []
        self.most_in_flight = 0

    # -- the event loop ------------------------------------------------------------------------

    def at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (max(when, self.now), self._seq, fn, args))

    def kick(self, when: float) -> None:
        """Run an engine round at ``when`` (the dispatcher woken, or its wait ending)."""
        if when < self._poll_at:
            self._poll_at = when
            self.at(when, self._round)

    def note(self, what: str) -> None:
        if self.trace is not None:
            self.trace(f"{self.now:9.3f} {what}")

    def fail(self, invariant: str, what: str) -> None:
        if self.violation is None:
            self.violation = ProduceViolation(invariant, self.now, what)
        raise _Stop

    def _new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def run(self) -> None:
        self._plan()
        end = FAULTS_END + DELIVERY_TIMEOUT + CLIENT_TIMEOUT + 30.0
        try:
            while self._queue:
                when, _, fn, args = heapq.heappop(self._queue)
                if when > end:
                    break
                self.now = when
                self.events += 1
                fn(*args)
        except _Stop:
            return

    # -- the schedule ----------------------------------------------------------------------------

    def _plan(self) -> None:
        rng = self.rng
        n = rng.randint(10, 120)
        for i in range(n):
            self.at(rng.uniform(0.0, FAULTS_END - 5.0), self._send, rng.randrange(self.count), i)
        for _ in range(rng.randint(0, 8)):
            t = rng.uniform(0.0, FAULTS_END - 5.0)
            kind = rng.choice(
                ["cut", "down", "crash", "stall", "move", "move", "rto", "nenough", "throttle"]
            )
            b = rng.choice(BROKERS)
            if kind in ("down", "crash"):
                length = rng.choice([rng.uniform(0.2, 3.0), rng.uniform(5.0, 16.0)])
            else:
                length = rng.uniform(0.5, 6.0)
            length = min(length, FAULTS_END - t)
            self.at(t, self._fault, kind, b, length)
        # After the faults heal: a few more records, each to be written within HEALED_BOUND.
        for i in range(rng.randint(1, 5)):
            at = FAULTS_END + rng.uniform(0.5, 2.0)
            self.at(at, self._send, rng.randrange(self.count), n + i, True)
        self.at(FAULTS_END + DELIVERY_TIMEOUT + CLIENT_TIMEOUT + 29.0, self._final)

    def _fault(self, kind: str, broker: int, length: float) -> None:
        self.faults.append(f"{kind}@{self.now:.2f}/b{broker}/{length:.1f}s")
        self.note(f"fault {self.faults[-1]}")
        until = self.now + length
        if kind == "cut":
            self._cut(broker)
        elif kind == "down":
            self.down_until[broker] = max(self.down_until[broker], until)
            self._cut(broker)
        elif kind == "crash":
            # The broker hangs (appending, not answering), then its connections drop and
            # it refuses new ones: the answers of the batches it appended are lost.
            hang = self.rng.uniform(0.2, 2.0)
            self.stall_until[broker] = max(self.stall_until[broker], self.now + hang)
            self.at(self.now + hang, self._fault, "down", broker, length)
        elif kind == "stall":
            self.stall_until[broker] = max(self.stall_until[broker], until)
        elif kind == "move":
            p = self.rng.randrange(self.count)
            part = self.truth[p]
            part.leader_id = self.rng.choice([b for b in BROKERS if b != part.leader_id])
            part.leader_epoch += 1
        elif kind == "rto":
            self.rto_until = max(self.rto_until, until)
        elif kind == "nenough":
            self.nenough_until = max(self.nenough_until, until)
        elif kind == "throttle":
            self.throttle_until[broker] = max(self.throttle_until[broker], until)

    # -- the application -------------------------------------------------------------------------

    def _send(self, partition: int, i: int, healed: bool = False) -> None:
        value = b"%d:" % i + self.pad
        batch = self.acc.place(TOPIC, value, None, None, partition, None, -1, self.view.partitions)
        if batch is None:
            self.fail("P1", f"record {i} could not be placed (buffer full?)")
            return
        future = RecordFuture._for(batch, len(batch.timestamps) - 1)
        future._claim()  # awaited, as an application would
        self.sent.append(_Sent(partition, value, self.now, future, healed))
        if healed:
            self.at(self.now + HEALED_BOUND, self._healed_check, self.sent[-1])

    def _healed_check(self, sent: _Sent) -> None:
        future = sent.future
        if not future.done():
            self.fail(
                "P7",
                f"record {_short(sent.value)} sent after the faults healed is not "
                f"written after {HEALED_BOUND:g} s",
            )
        try:
            future.result()
        except errors.KafkaError as exc:
            # It may have joined a batch opened before the faults healed, which keeps that
            # batch's delivery deadline (as the Java client's records do).
            if future._batch.root().created >= FAULTS_END:
                self.fail(
                    "P7",
                    f"record {_short(sent.value)} sent after the faults healed failed: {exc!r}",
                )

    # -- the sender ------------------------------------------------------------------------------

    def _round(self) -> None:
        self._poll_at = float("inf")
        if self.mutant == "no-first-confirm":
            for state in self.acc.partitions.values():
                state.confirmed = True
        elif self.mutant == "no-window":
            for state in self.acc.partitions.values():
                state.window.clear()
        decided = self.engine.poll(self.now, self.view)
        for state in self.acc.partitions.values():
            if len(state.flight) > self.settings.max_in_flight:
                self.fail(
                    "P6", f"{len(state.flight)} batches of partition {state.partition} in flight"
                )
        if decided.reset:
            if self.mutant == "no-reset":
                self.engine.reset_done(self.acc.producer_id, self.acc.producer_epoch)
            else:
                self.at(self.now + self.rng.uniform(0.01, 0.2), self._reset_done)
        if decided.refresh:
            self._refresh()
        for out in decided.sends:
            self._transmit(out)
        if decided.wait < float("inf"):
            self.kick(self.now + decided.wait)

    def _reset_done(self) -> None:
        pid = self._new_pid()
        self.note(f"new producer id {pid}")
        if self.mutant == "resend-unknown":
            for state in self.acc.partitions.values():
                for batch in state.queue:
                    batch.ambiguous = False
        self.engine.reset_done(pid, 0)
        self.kick(self.now)

    def _refresh(self) -> None:
        if self.refreshing:
            return
        self.refreshing = True
        self.at(self.now + self.rng.uniform(0.01, 0.3), self._refreshed)

    def _refreshed(self) -> None:
        self.refreshing = False
        self.view.partitions = {
            TOPIC: tuple(_Part(p.leader_id, p.leader_epoch) for p in self.truth)
        }
        self.kick(self.now)

    def _apply_hint(self, hint: LeaderHint) -> bool:
        parts = list(self.view.partitions[TOPIC])
        known = parts[hint.partition]
        if hint.leader_epoch <= known.leader_epoch:
            return False
        parts[hint.partition] = _Part(hint.leader_id, hint.leader_epoch)
        self.view.partitions = {TOPIC: tuple(parts)}
        return True

    def _transmit(self, out: Outgoing) -> None:
        rng = self.rng
        self.note(
            f"send to b{out.node}: {[(b.partition, b.base_seq, len(b.timestamps)) for b in out.batches]}"
        )
        if self.now < self.down_until[out.node]:
            self.at(self.now + 0.01, self._failed, out, errors.BrokerConnectError("refused"))
            return
        conn = self.conns.get(out.node)
        if conn is None or not conn.alive:
            conn = self.conns[out.node] = _Conn(out.node)
        arrival = max(self.now + rng.uniform(0.001, 0.05), conn.last_arrival, conn.muted_until)
        conn.last_arrival = arrival
        conn.pending.append(out)
        self.at(arrival, self._arrive, conn, out)
        self.at(self.now + CLIENT_TIMEOUT, self._timeout, conn, out)

    def _failed(self, out: Outgoing, exc: errors.KafkaError) -> None:
        if self.mutant == "no-ambiguous" and not isinstance(exc, errors.BrokerConnectError):
            exc = errors.BrokerConnectError(f"(mutant) {exc}")
        self.note(f"failed {[(b.partition, b.base_seq) for b in out.batches]}: {exc!r}")
        if self.engine.failed(out, exc, self.now):
            self._refresh()
        self.kick(self.now)

    def _timeout(self, conn: _Conn, out: Outgoing) -> None:
        if out.ended:
            return
        if out in conn.pending:
            conn.pending.remove(out)  # the connection stays; a late answer is dropped
        self._failed(out, errors.RequestTimeoutError("no response"))

    def _cut(self, broker: int) -> None:
        conn = self.conns.pop(broker, None)
        if conn is None:
            return
        conn.alive = False
        for out in conn.pending:
            if not out.ended:
                self.at(self.now, self._failed, out, errors.BrokerDisconnectedError("cut"))
        conn.pending.clear()

    def _arrive(self, conn: _Conn, out: Outgoing) -> None:
        if not conn.alive:
            return  # lost with the connection: never applied
        rng = self.rng
        answers = []
        endpoints = []
        for topic in out.request.topic_data:
            parts = []
            for pd in topic.partition_data:
                p = pd.index
                truth = self.truth[p]
                if truth.leader_id != conn.broker:
                    hint = rng.random() < 0.6
                    leader = LeaderIdAndEpoch(
                        leader_id=truth.leader_id if hint else -1,
                        leader_epoch=truth.leader_epoch if hint else -1,
                    )
                    if hint:
                        endpoints.append(
                            NodeEndpoint(
                                node_id=truth.leader_id, host="b", port=9000 + truth.leader_id
                            )
                        )
                    parts.append(
                        PartitionProduceResponse(
                            index=p,
                            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            base_offset=-1,
                            current_leader=leader,
                        )
                    )
                    continue
                code: int
                if self.now < self.nenough_until and rng.random() < 0.4:
                    code, offset = ErrorCode.NOT_ENOUGH_REPLICAS, -1
                else:
                    log = self.logs[p]
                    end = len(log.log)
                    code, offset = log.append(pd.records or b"")
                    if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                        self._check_not_written(p, pd.records or b"")
                    # A resend recognised as one (nothing appended) times out again more
                    # often: the schedules then hold one batch back while later ones pass.
                    again = code == ErrorCode.NONE and len(log.log) == end
                    odds = 0.8 if again else 0.3
                    if code == ErrorCode.NONE and self.now < self.rto_until and rng.random() < odds:
                        # Appended by the leader, not replicated within the timeout (acks=all).
                        code, offset = ErrorCode.REQUEST_TIMED_OUT, -1
                self.note(f"b{conn.broker} p{p}: {ErrorCode(code).name} @{offset}")
                parts.append(PartitionProduceResponse(index=p, error_code=code, base_offset=offset))
            answers.append(TopicProduceResponse(name=topic.name, partition_responses=tuple(parts)))
        throttle = 0
        if self.now < self.throttle_until[conn.broker]:
            throttle = rng.randint(10, 500)
        response = ProduceResponse(
            responses=tuple(answers),
            throttle_time_ms=throttle,
            node_endpoints=tuple({e.node_id: e for e in endpoints}.values()),
        )
        delay = rng.uniform(0.001, 0.05)
        if self.now < self.stall_until[conn.broker]:
            delay += self.stall_until[conn.broker] - self.now
        answer = max(self.now + delay, conn.last_answer)
        conn.last_answer = answer
        # The broker mutes the connection for the throttle time after answering (KIP-219).
        conn.muted_until = max(conn.muted_until, answer + throttle / 1000)
        self.at(answer, self._answer, conn, out, response)

    def _check_not_written(self, partition: int, records: bytes | bytearray | memoryview) -> None:
        # P8: a batch answered OUT_OF_ORDER is not one the partition holds already (a
        # resend that fell out of the broker's memory of the last five batches: the
        # producer would take it for lost and get a new producer id).
        (batch,) = read_batches(records).batches
        key = (batch.producer_id, batch.producer_epoch, batch.base_sequence)
        for a in self.logs[partition].log:
            if (a.producer_id, a.epoch, a.sequence) == key:
                self.fail(
                    "P8",
                    f"partition {partition}: a resend of a batch already written (producer "
                    f"id {key[0]}, sequence {key[2]}) fell out of the broker's memory of the "
                    "last five batches and was answered OUT_OF_ORDER_SEQUENCE_NUMBER",
                )

    def _answer(self, conn: _Conn, out: Outgoing, response: ProduceResponse) -> None:
        if not conn.alive or out.ended:
            return  # the answer is lost (the connection was cut, or the client gave up)
        conn.pending.remove(out)
        if self.mutant == "rto-certain":
            response = _rto_as_not_written(response)
        if self.engine.answered(out, response, self.now, self.view, self._apply_hint):
            self._refresh()
        self.kick(self.now)

    # -- the end ----------------------------------------------------------------------------------

    def _final(self) -> None:
        _check(self)
        raise _Stop


def _rto_as_not_written(response: ProduceResponse) -> ProduceResponse:
    # The mutant: REQUEST_TIMED_OUT read as an error that says "not written".
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(
                name=t.name,
                partition_responses=tuple(
                    PartitionProduceResponse(
                        index=p.index,
                        error_code=ErrorCode.NOT_ENOUGH_REPLICAS
                        if p.error_code == ErrorCode.REQUEST_TIMED_OUT
                        else p.error_code,
                        base_offset=p.base_offset,
                        current_leader=p.current_leader,
                    )
                    for p in t.partition_responses
                ),
            )
            for t in response.responses
        ),
        throttle_time_ms=response.throttle_time_ms,
        node_endpoints=response.node_endpoints,
    )


def _check(world: _World) -> None:
    """The invariants P1 to P5 and P7 at the end of a schedule (P6 and P7's bound on
    records sent after the faults are checked as the schedule runs)."""
    acc = world.acc
    for s in world.sent:
        if not s.future.done():
            world.fail(
                "P7",
                f"record {_short(s.value)} of partition {s.partition} is still pending "
                f"{world.now - s.at:.1f} s after it was sent",
            )
    for batch_id, times in world.hooks.done.items():
        if times != 1:
            world.fail("P1", f"a batch finished {times} times ({batch_id})")
    if acc.in_flight or acc.pending():
        world.fail("P1", f"{acc.in_flight} batches still in flight at the end")
    for p in range(world.count):
        mine = [s for s in world.sent if s.partition == p]
        order = {s.value: i for i, s in enumerate(mine)}
        log = [a.value for a in world.logs[p].log]
        seen: set[bytes | None] = set()
        last = -1
        for offset, value in enumerate(log):
            if value in seen:
                world.fail(
                    "P3",
                    f"partition {p}: record {_short(value)} is in the log twice "
                    f"(again at offset {offset})",
                )
            seen.add(value)
            index = order[value]  # type: ignore[index]
            if index < last:
                world.fail(
                    "P4",
                    f"partition {p}: record {_short(value)} (sent #{index}) is at offset "
                    f"{offset}, after a record sent later (#{last})",
                )
            last = index
        for s in mine:
            try:
                meta = s.future.result()
            except errors.KafkaError:
                continue
            except Exception as exc:
                world.fail("P1", f"record {_short(s.value)}: untyped failure {exc!r}")
                continue
            if not (0 <= meta.offset < len(log)) or log[meta.offset] != s.value:
                at = log[meta.offset] if 0 <= meta.offset < len(log) else None
                world.fail(
                    "P2",
                    f"partition {p}: record {_short(s.value)} reported at offset "
                    f"{meta.offset}, where the log holds {at!r}",
                )
        written = [i for i, s in enumerate(mine) if s.value in seen]
        if written:
            for s in mine[: written[-1]]:
                if s.value not in seen and _succeeded(s.future):
                    world.fail(
                        "P5",
                        f"partition {p}: record {_short(s.value)} is missing before "
                        "records sent after it, yet its future says written",
                    )


def _short(value: bytes | None) -> str:
    """A record's name in a message (its number; the padding left out)."""
    return "#" + (value or b"").split(b":")[0].decode() if value else "(null)"


def _succeeded(future: RecordFuture) -> bool:
    try:
        future.result()
    except errors.KafkaError:
        return False
    return True


def run(
    seed: int, mutant: str | None = None, trace: Callable[[str], None] | None = None
) -> ProduceOutcome:
    """Play the schedule of ``seed`` (against deliberate bug ``mutant``, if given)."""
    world = _World(seed, mutant, trace)
    world.run()
    written = sum(1 for s in world.sent if s.future.done() and _succeeded(s.future))
    done = sum(1 for s in world.sent if s.future.done())
    return ProduceOutcome(
        seed,
        world.violation,
        world.events,
        len(world.sent),
        written,
        done - written,
        tuple(world.faults),
    )


def search(seeds: Sequence[int], mutant: str | None = None) -> list[ProduceOutcome]:
    """The failing outcomes among ``seeds``."""
    return [o for o in (run(s, mutant) for s in seeds) if o.violation is not None]


def first_failure(seeds: Sequence[int], mutant: str | None = None) -> ProduceOutcome | None:
    """The first failing outcome among ``seeds``, if any."""
    for seed in seeds:
        out = run(seed, mutant)
        if out.violation is not None:
            return out
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m sharecon.testing.sim.produce``: replay one seed or search many."""
    import argparse
    import os

    ap = argparse.ArgumentParser(prog="python -m sharecon.testing.sim.produce")
    ap.add_argument("--seed", type=int, help="replay this seed")
    ap.add_argument("--start", type=int, default=0, help="first seed of a search")
    ap.add_argument("--count", type=int, default=1000, help="seeds to search")
    ap.add_argument("--mutant", choices=MUTANTS, help="run against a deliberate bug")
    ap.add_argument("--trace", action="store_true", help="print every event")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    failed = 0
    # CPU time of this process (os.times: the simulation itself reads no clock).
    started = sum(os.times()[:2])
    for seed in seeds:
        out = run(seed, args.mutant, print if args.trace else None)
        if out.violation is not None or args.seed is not None:
            status = str(out.violation) if out.violation else "ok"
            print(
                f"seed {seed} ({out.events} events, {out.records} records, {out.written} "
                f"written, {out.failed} failed): {status}"
            )
            print("  faults:", ", ".join(out.faults) or "none")
            if out.violation is not None:
                print("  replay:", out.replay(args.mutant))
                failed += 1
    if args.seed is None:
        cpu = sum(os.times()[:2]) - started
        rate = len(seeds) / cpu if cpu > 0 else float("inf")
        print(f"{len(seeds)} schedules, {failed} failed ({rate:.0f} schedules per CPU-second)")
    return 1 if failed else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
