"""The whole-client simulation: the real ``ShareConsumer`` and ``Producer``, unchanged, on a
virtual clock, against an in-memory FakeKafka, under seeded faults.

``python -m sharecon.testing.sim.client --seed N`` replays one schedule, ``--count``
searches. Where :mod:`sharecon.testing.sim.world` drives the consumer's sans-I/O core
(a million schedules per CPU-hour), this runs what users run: ``async for`` (implicit and
explicit answers), ``poll()``, ``batches()`` and ``process(concurrency=...)`` with
``RetryLater`` (4.2+) and handlers that wait for the next record, the producer, the heartbeat and fetch loops, connections, reconnects and
closes: every line of the clients between the application and the socket.

How: the clients open connections through :data:`sharecon._net.connect.dialer`, which
this module points at :class:`MemoryKafka` (FakeKafka's request handling, serving
in-memory byte streams in the same event loop). The loop is trio's with a
``MockClock(autojump_threshold=0)``: whenever every task waits, the clock jumps to the
next deadline, so a minute of lock timeouts and back-offs runs in a fraction of a second.
The seed fixes the schedule (topic, members and their styles, records, faults), the
scheduler's choices (trio's run-queue shuffle), the clients' jitter (``random``) and
their member ids.

Faults (1 to 3 per schedule, in the first 20 virtual seconds): every connection cut (the
broker releases what the sessions held), a broker crash (sessions and acquisitions lost,
nothing released) or clean restart, with the broker refusing connections for a while
(0 to 8 s), and a partition's leadership moving.

Invariants (each violation names the seed and prints a one-line replay):

1. *No exception reaches the application*: every fault is transient, handled inside.
2. *Progress*: every record written is accepted (or rejected by the application, then
   archived) within :data:`BOUND` virtual seconds of the last fault healing and the last
   write.
3. *No record archived unseen*: a record the broker archives is one the application
   rejected (the delivery limit, 10, is above what the faults and the application's
   releases can spend).
4. *Integrity*: every record the application is handed is one that was written, with its
   value.
5. *Close*: once the schedule is over, every client closes within :data:`CLOSE_BOUND`
   (the consumer's ``close_timeout``).
6. *No stall*: once the faults healed, a member with a free worker never goes
   :data:`STALL` seconds without a record while records of its partitions are available
   at the broker.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import random
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

import anyio
import anyio.abc

from sharecon._net.connect import dialer
from sharecon._share.machine import ShareMachine
from sharecon.config import ConnectionConfig
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.record import RetryLater
from sharecon.testing.fake.cluster import FakeCluster
from sharecon.testing.fake.server import FakeKafka
from sharecon.testing.model import RecordState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from anyio.abc import ByteStream, TaskGroup

    from sharecon.record import Record

__all__ = ["BOUND", "MUTANTS", "STYLES", "ClientOutcome", "MemoryKafka", "main", "run", "search"]

TOPIC = "t"
GROUP = "g"
HOST, PORT = "fake.sim", 9092
#: Progress bound (invariant 2), virtual seconds after the last fault healed and the last
#: write: a lock (15 s here) for records a fault stranded, plus back-offs and a rejoin.
BOUND = 45.0
#: The lock duration of the schedules' share group (ms).
LOCK_MS = 15_000
#: The delivery limit: above what faults (at most 3) and releases (at most 1) can spend.
DELIVERY_LIMIT = 10
#: What a member does with its records.
STYLES = ("iter", "explicit", "poll", "batches", "process", "gather")
#: Invariant 6: the longest a member with a free worker may go without a record while
#: records of its partitions wait at the broker, virtual seconds.
STALL = 10.0
#: Invariant 5: the longest the clients may take to close once cancelled, virtual
#: seconds (the consumer's default close_timeout).
CLOSE_BOUND = 30.0
#: How long a schedule may run at all, virtual seconds (a stuck one is a violation).
HORIZON = 600.0


# -- the in-memory broker --------------------------------------------------------------------


class MemoryKafka(FakeKafka):
    """FakeKafka serving in-memory connections in the caller's event loop, on its clock.

    :meth:`serve` starts it in a task group; :meth:`dial` is a
    :data:`~sharecon._net.connect.Dialer`. The ``..._now`` faults act at once, in the
    loop (FakeKafka's own go through its thread).
    """

    def __init__(self, version: str = "4.4") -> None:
        super().__init__(version, host=HOST, port=PORT, heartbeat_interval_ms=1000)
        self.refuse_until = -math.inf

    def _wall(self) -> float:
        return anyio.current_time()

    async def serve(self, tg: TaskGroup) -> None:
        """Serve from now on, in ``tg``."""
        self._changed = anyio.Event()
        self._origin = anyio.current_time()
        self._cluster = FakeCluster(
            self.version,
            HOST,
            PORT,
            session_timeout_ms=self._session_timeout_ms,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
        )
        self._tg = tg

    async def dial(self, host: str, port: int) -> ByteStream:
        """A new connection, or :class:`OSError` (refused) while the broker is down."""
        if (host, port) != (HOST, PORT) or anyio.current_time() < self.refuse_until:
            raise OSError(errno.ECONNREFUSED, "connection refused")
        assert self._tg is not None
        from sharecon.testing.sim.pipe import memory_pipe  # trio's: only this needs it

        client, server = memory_pipe()
        self._tg.start_soon(self._serve_conn, server)
        return client

    def close_all(self, *, silent: bool) -> None:
        """Close every connection (``silent``: without the broker-side release)."""
        for conn in list(self._conns.values()):
            conn.silent = silent
            conn.scope.cancel()

    def crash_now(self) -> None:
        """Sessions and in-memory share partitions lost, nothing released."""
        self.cluster.model.restart(self.now())
        self.close_all(silent=True)
        self._notify()

    def restart_now(self) -> None:
        """A clean restart: sessions closed (what they held released), then rebuilt."""
        c = self.cluster
        now = self.now()
        c.model.disconnect_many(list(self._conns), now, concurrent=False)
        c.connection_members.clear()
        c.model.restart(now)
        self.close_all(silent=True)
        self._notify()

    def cut_now(self) -> None:
        """Every connection closes; the broker releases what their sessions held."""
        self.close_all(silent=False)

    def move_now(self, partition: int) -> None:
        """The partition's leadership moves (a new incarnation of this node)."""
        self.cluster.model.move_leader(TOPIC, partition, self.now())
        self._notify()

    def states(self, partitions: int, ends: list[int]) -> dict[tuple[int, int], RecordState]:
        """The share group's state of every record written, by (partition, offset): how
        it ended, once the start offset moved past it."""
        model = self.cluster.model
        tid = model.topics[TOPIC]
        out: dict[tuple[int, int], RecordState] = {}
        for p in range(partitions):
            key = (GROUP, (tid, p))
            finished = model.finished.get(key, {})
            sp = model.partitions.get(key)
            if sp is not None:
                states = {o: st.state for o, st in sp.states.items()}
            else:  # not loaded (after a restart, until fetched): what was persisted
                states = {o: st for o, (st, _) in model.persister.get(key, (0, {}))[1].items()}
            for offset in range(ends[p]):
                done = finished.get(offset)
                out[(p, offset)] = (
                    done if done is not None else states.get(offset, RecordState.AVAILABLE)
                )
        return out


# -- a schedule --------------------------------------------------------------------------------


@dataclass(slots=True)
class ClientOutcome:
    """One schedule's result."""

    seed: int
    version: str
    violation: str | None
    #: what the schedule was: members' styles, records, faults
    plan: list[str] = field(default_factory=list)
    #: records handed to the application (deliveries, not distinct records)
    handed: int = 0
    #: virtual seconds the schedule ran
    elapsed: float = 0.0

    def replay(self, mutant: str | None = None) -> str:
        """The one-line command that replays this schedule."""
        planted = f" --mutant {mutant}" if mutant else ""
        return (
            f"python -m sharecon.testing.sim.client --seed {self.seed} "
            f"--version {self.version}{planted}"
        )


@dataclass(slots=True)
class _Watch:
    """What invariant 6 knows of one member."""

    consumer: ShareConsumer[Any, Any] | None = None
    last_handed: float = 0.0
    #: ``process()``: its workers, and how many run a handler now
    concurrency: int = 0
    running: int = 0

    def assigned(self) -> set[int]:
        c = self.consumer
        if c is None:
            return set()
        with contextlib.suppress(Exception):  # closing
            return {tp.partition for tp in c.assignment}
        return set()

    def free(self) -> bool:
        # Other styles ask for the next record as soon as they have one.
        return self.concurrency == 0 or self.running < self.concurrency


@dataclass(slots=True)
class _Plan:
    partitions: int
    records: int
    gaps: list[float]
    styles: list[str]
    faults: list[tuple[float, str, float]]  # (at, kind, refuse for)

    @classmethod
    def draw(cls, rng: random.Random) -> _Plan:
        partitions = rng.randint(1, 3)
        records = rng.randint(20, 80)
        # Writes go on past the faults (mean gap ~0.6 s): invariant 6 watches them arrive.
        gaps = [rng.choice([0.0, 0.0, 0.01, 0.1, 0.5, 1.0, 2.0]) for _ in range(records)]
        styles = [rng.choice(STYLES) for _ in range(rng.randint(1, 3))]
        faults = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["cut", "crash", "restart", "move"])
            down = rng.choice([0.0, 0.0, 2.0, 8.0]) if kind in ("crash", "restart") else 0.0
            faults.append((round(rng.uniform(0.5, 20.0), 3), kind, down))
        faults.sort()
        return cls(partitions, records, gaps, styles, faults)

    def describe(self) -> list[str]:
        return [
            f"{self.partitions} partitions, {self.records} records",
            "members: " + ", ".join(self.styles),
            "faults: "
            + ", ".join(f"{k}@{t:g}" + (f"+down {d:g}s" if d else "") for t, k, d in self.faults),
        ]


class _Schedule:
    """The application side of one schedule: the writer, the members, the watch."""

    def __init__(self, seed: int, version: str, plan: _Plan) -> None:
        self.seed = seed
        self.version = version
        self.plan = plan
        self.rng = random.Random(seed * 7919 + 1)
        self.kafka = MemoryKafka(version)
        self.written: dict[tuple[int, int], bytes] = {}
        self.ends = [0] * plan.partitions
        self.rejected: set[tuple[int, int]] = set()
        self.handed = 0
        self.done_writing = anyio.Event()
        self.healed_at = 0.0
        self.violation: str | None = None
        self.config = ConnectionConfig(request_timeout=10.0)
        self.watches = [_Watch() for _ in plan.styles]
        self.stopped_at = math.inf

    def fail(self, why: str) -> None:
        if self.violation is None:
            self.violation = why

    # -- the parts --------------------------------------------------------------------------

    async def write(self) -> None:
        async with Producer(f"{HOST}:{PORT}", config=self.config, linger=0.0) as producer:
            for i in range(self.plan.records):
                value = f"v{i}".encode()
                partition = i % self.plan.partitions
                meta = await producer.send_and_wait(TOPIC, value, partition=partition)
                self.written[(meta.partition, meta.offset)] = value
                self.ends[meta.partition] = max(self.ends[meta.partition], meta.offset + 1)
                if self.plan.gaps[i]:
                    await anyio.sleep(self.plan.gaps[i])
        self.done_writing.set()

    def seen(self, record: Record[bytes, bytes], index: int) -> None:
        self.handed += 1
        self.watches[index].last_handed = anyio.current_time()
        key = (record.partition, record.offset)
        want = self.written.get(key)
        if want is not None and record.value != want:
            self.fail(f"invariant 4: {key} handed out as {record.value!r}, written {want!r}")

    async def member(self, style: str, index: int) -> None:
        explicit = style in ("explicit",)
        rng = random.Random(self.seed * 31 + index)
        watch = self.watches[index]
        async with ShareConsumer(
            f"{HOST}:{PORT}",
            group_id=GROUP,
            topics=[TOPIC],
            ack_mode="explicit" if explicit else "implicit",
            config=self.config,
        ) as consumer:
            watch.consumer = consumer
            if style == "iter":
                async for record in consumer:
                    self.seen(record, index)
            elif style == "explicit":
                async for record in consumer:
                    self.seen(record, index)
                    roll = rng.random()
                    if roll < 0.1 and record.delivery_count == 1:
                        record.release()
                    elif roll < 0.15:
                        self.rejected.add((record.partition, record.offset))
                        record.reject()
                    else:
                        record.accept()
            elif style == "poll":
                while True:
                    for record in await consumer.poll(1.0):
                        self.seen(record, index)
            elif style == "batches":
                async for batch in consumer.batches():
                    for record in batch:
                        self.seen(record, index)
            else:
                concurrency = rng.randint(1, 4)
                watch.concurrency = concurrency
                handler = self._handler(style, rng, index)
                await consumer.process(handler, concurrency=concurrency)

    def _handler(self, style: str, rng: random.Random, index: int) -> Callable[..., Any]:
        watch = self.watches[index]
        box = [anyio.Event()]
        waiting = [0]
        delays = self.version != "4.1"  # a delayed release renews locks: Kafka 4.2+

        async def handle(record: Record[bytes, bytes]) -> None:
            watch.running += 1
            try:
                self.seen(record, index)
                old = box[0]
                box[0] = anyio.Event()
                old.set()  # a record arrived: handlers waiting for one go on
                if style == "gather" and waiting[0] + 1 < watch.concurrency:
                    # Answered only once another record arrived (or the writing ended),
                    # as a batching handler does; always leaving a worker free to take
                    # that record. No time bound: the consumer must keep fetching while
                    # it holds records nobody answers.
                    waiting[0] += 1
                    try:
                        while not self.done_writing.is_set() and not box[0].is_set():
                            with anyio.move_on_after(1.0):
                                await box[0].wait()
                    finally:
                        waiting[0] -= 1
                elif style != "gather":
                    await anyio.sleep(rng.choice([0.0, 0.0, 0.05, 0.3]))
                if delays and record.delivery_count == 1 and rng.random() < 0.1:
                    raise RetryLater(rng.choice([0.5, 3.0]))
            finally:
                watch.running -= 1

        return handle

    async def faults(self) -> None:
        start = anyio.current_time()
        for at, kind, down in self.plan.faults:
            await anyio.sleep(max(0.0, start + at - anyio.current_time()))
            if kind == "cut":
                self.kafka.cut_now()
            elif kind == "crash":
                self.kafka.refuse_until = anyio.current_time() + down
                self.kafka.crash_now()
            elif kind == "restart":
                self.kafka.refuse_until = anyio.current_time() + down
                self.kafka.restart_now()
            else:
                self.kafka.move_now(self.rng.randrange(self.plan.partitions))
            self.healed_at = max(self.healed_at, anyio.current_time() + down)

    async def stalls(self) -> None:
        """Invariant 6: once the faults healed, a member with a free worker is never left
        for :data:`STALL` seconds without a record while records it may take are
        available at the broker."""
        since: dict[int, float] = {}
        while True:
            await anyio.sleep(0.25)
            now = anyio.current_time()
            if now < self.healed_at or now < self.plan.faults[-1][0]:
                since.clear()
                continue
            states = self.kafka.states(self.plan.partitions, self.ends)
            for i, w in enumerate(self.watches):
                mine = w.assigned()
                waiting = any(
                    s is RecordState.AVAILABLE and p in mine for (p, _), s in states.items()
                )
                if not (waiting and w.free()):
                    since.pop(i, None)
                    continue
                start = since.setdefault(i, max(now, w.last_handed))
                start = since[i] = max(start, w.last_handed)
                if now - start > STALL:
                    self.fail(
                        f"invariant 6: member {i} ({self.plan.styles[i]}) got no record for "
                        f"{now - start:.1f} s with a free worker while records of its "
                        f"partitions {sorted(mine)} waited at the broker"
                    )

    async def watch(self, stop: anyio.CancelScope) -> None:
        """Invariants 2 and 3, once everything is written and the faults healed."""
        await self.done_writing.wait()
        last_fault = self.plan.faults[-1][0] if self.plan.faults else 0.0
        await anyio.sleep(max(0.0, last_fault - anyio.current_time()))
        deadline = max(self.healed_at, anyio.current_time()) + BOUND
        while True:
            states = self.kafka.states(self.plan.partitions, self.ends)
            for key, state in states.items():
                if state is RecordState.ARCHIVED and key not in self.rejected:
                    self.fail(f"invariant 3: {key} archived, the application never rejected it")
            pending = [k for k, s in states.items() if s not in _FINAL]
            if not pending or self.violation is not None:
                break
            if anyio.current_time() >= deadline:
                self.fail(
                    f"invariant 2: {len(pending)} record(s) not accepted {BOUND:g} s after "
                    f"the faults healed and the last write: {sorted(pending)[:5]}"
                )
                break
            await anyio.sleep(0.25)
        self.stopped_at = anyio.current_time()
        stop.cancel()

    async def main(self) -> None:
        token = dialer.set(self.kafka.dial)
        try:
            async with anyio.create_task_group() as server:
                await self.kafka.serve(server)
                self.kafka.cluster.create_topic(TOPIC, self.plan.partitions)
                self.kafka.cluster.group_configs[GROUP] = {
                    "share.auto.offset.reset": "earliest",
                    "share.record.lock.duration.ms": str(LOCK_MS),
                    "share.delivery.count.limit": str(DELIVERY_LIMIT),
                }
                self.kafka.cluster._apply_group_configs(GROUP)
                with anyio.move_on_after(HORIZON) as horizon:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self.watch, tg.cancel_scope)
                        tg.start_soon(self.stalls)
                        tg.start_soon(self.faults)
                        tg.start_soon(self._guard, self.write, "the producer")
                        for i, style in enumerate(self.plan.styles):
                            tg.start_soon(
                                self._guard, self.member, f"member {i} ({style})", style, i
                            )
                if horizon.cancelled_caught:
                    self.fail(f"the schedule did not end within {HORIZON:g} virtual seconds")
                elif anyio.current_time() - self.stopped_at > CLOSE_BOUND:
                    took = anyio.current_time() - self.stopped_at
                    self.fail(f"invariant 5: the clients took {took:.1f} s to close")
                server.cancel_scope.cancel()
        finally:
            dialer.reset(token)

    async def _guard(self, fn: Callable[..., Any], what: str, *args: Any) -> None:
        """Invariants 1 and 5: nothing raised out of a client; a close ends in time."""
        try:
            await fn(*args)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a client's, or an application-side bug of this module
            self.fail(f"invariant 1: {what} raised {_name(exc)}")


def _name(exc: BaseException) -> str:
    # The innermost error of a task group's group, with its type.
    # (Duck-typed: BaseExceptionGroup is not a builtin before Python 3.11.)
    inner: tuple[BaseException, ...] = getattr(exc, "exceptions", ())
    while len(inner) == 1:
        exc = inner[0]
        inner = getattr(exc, "exceptions", ())
    return f"{type(exc).__name__}: {exc}"


_FINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _dry_forever(
    self: ShareMachine, node_id: int, ack_linger: float, now: float | None = None
) -> float | None:
    # Mutant: a dry planner waits for the application's answer for ever (the bug fixed
    # in rule 2 of sharecon._share.fetch_policy: its idle wait had no timeout).
    tag = self.leader(node_id).session.tag
    return ack_linger if self.ledger.has_marked(tag) else None


def _no_dry_retry() -> Any:
    return mock.patch.object(ShareMachine, "idle_timeout", _dry_forever)


#: Deliberate bugs (``--mutant``), planted in the real clients for one run: each must
#: make some schedule fail (tests/testing/test_client_simulation.py).
MUTANTS: dict[str, Callable[[], Any]] = {"dry-forever": _no_dry_retry}


def run(seed: int, version: str = "4.4", mutant: str | None = None) -> ClientOutcome:
    """Run the schedule of ``seed`` against a FakeKafka imitating ``version`` (with the
    deliberate bug ``mutant``, one of :data:`MUTANTS`, planted)."""
    import trio
    import trio._core._run as trio_run
    import trio.testing

    planted = MUTANTS[mutant]() if mutant is not None else contextlib.nullcontext()
    plan = _Plan.draw(random.Random(seed))
    schedule = _Schedule(seed, version, plan)
    ids = random.Random(seed ^ 0x5EED)
    state = random.getstate()
    random.seed(seed)
    trio_run._r.seed(seed)
    # Trio's own switch for seeded runs (Hypothesis sets it): the run queue is sorted by
    # task creation, then shuffled by the seeded ``_r``, instead of reversed at random.
    deterministic = trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    clock = trio.testing.MockClock(autojump_threshold=0)
    try:
        with (
            planted,
            mock.patch("uuid.uuid4", lambda: uuid.UUID(int=ids.getrandbits(128), version=4)),
        ):
            trio.run(schedule.main, clock=clock)
    except BaseException as exc:  # a crash of the run itself
        schedule.fail(f"the run crashed: {type(exc).__name__}: {exc}")
    finally:
        random.setstate(state)
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = deterministic  # type: ignore[misc]
    return ClientOutcome(
        seed,
        version,
        schedule.violation,
        plan.describe(),
        schedule.handed,
        clock.current_time(),
    )


def search(
    seeds: Iterable[int], versions: tuple[str, ...] = ("4.1", "4.4"), mutant: str | None = None
) -> list[ClientOutcome]:
    """Run every seed on every version; the failing outcomes, in order."""
    bad = []
    for seed in seeds:
        for version in versions:
            out = run(seed, version, mutant)
            if out.violation is not None:
                bad.append(out)
    return bad


def main(argv: list[str] | None = None) -> int:
    """Replay one seed (``--seed``) or search ``--count`` seeds from ``--start``."""
    ap = argparse.ArgumentParser(
        prog="python -m sharecon.testing.sim.client",
        description="The real clients on a virtual clock against an in-memory FakeKafka.",
    )
    ap.add_argument("--seed", type=int, help="replay this seed")
    ap.add_argument("--start", type=int, default=0, help="first seed of a search")
    ap.add_argument("--count", type=int, default=100, help="seeds to search")
    ap.add_argument("--version", default="4.4", help="Kafka line the fake imitates (4.1 .. 4.4)")
    ap.add_argument("--mutant", choices=sorted(MUTANTS), help="run against a deliberate bug")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    failed = 0
    for seed in seeds:
        out = run(seed, args.version, args.mutant)
        if out.violation is not None or args.seed is not None:
            status = out.violation or "ok"
            print(f"seed {seed} ({out.handed} handed out, {out.elapsed:.1f} virtual s): {status}")
            for line in out.plan:
                print("  " + line)
            if out.violation is not None:
                print("  replay:", out.replay(args.mutant))
                failed += 1
    if args.seed is None:
        print(f"{len(seeds)} schedules, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
