"""Transport faults in the whole-client simulation (:mod:`sharecon.testing.sim.client`).

A fraction of seeds (drawn from a random source of their own, so every other seed keeps
its schedule) fault the in-memory transport itself, never the clients:

* *stalls*: a connection, or every connection, stops delivering bytes (the broker's to
  the client, or both ways) for 2 to 20 s, then resumes with nothing lost (a TCP
  connection over a link that went dark: the bytes wait, then arrive);
* *lost answers*: the broker handles a request (its effects stand) and its answer never
  comes back; the connection stays up, so the client must time out by itself
  (``request_timeout``) and recover;
* *cuts mid-request*: the broker handles a request, then its connection closes instead
  of answering; sometimes the broker handles that close only 1 to 3 s later, and then, as
  a real broker may, ends the member's share session even though the member opened a
  new one on a new connection meanwhile (its next fetch meets
  ``SHARE_SESSION_NOT_FOUND``, and what it held there is released);
* *a slow link*: the broker's bytes reach the clients at 2, 4 or 8 KiB/s per connection
  for 30 to 90 s, while the writer's first records arrive as one large batch of padded
  records (1 KB each): a batch that may not cross the link within the 15 s lock.

How: :class:`Link` is the :class:`~sharecon.testing.sim.pipe.Shaper` of one direction of
one in-memory connection (it decides when the bytes sent arrive), and :class:`NetFaults`
answers the broker's requests in place of ``FakeKafka._answer`` (losing an answer,
cutting the connection, or noting which records a ShareFetch answer carries).

What this module checks (docs/testing.md, "Transport faults"):

* *N1, safety*: invariants 2 to 4 as everywhere: nothing lost, nothing archived unseen,
  nothing handed out that was not written; the broker keeps one state per record, so an
  accept cannot land twice.
* *N2, liveness*: invariants 2 and 6 run from the transport's healing (a stall's end, a
  lost answer or cut plus the client's request timeout, the slow link's end).
* *N3, health*: every running consumer's ``health()`` is ok again within
  :data:`HEALTH_BOUND` virtual seconds of every fault healing.
* *N4, bounded cost of a slow link*: no member spends more than :data:`SLOW_SPENT`
  delivery attempts of a record (plus one per stall) on ShareFetch answers sent while the
  link is slow that arrive after the record's lock ended, or that the client gave up on
  (it closed the connection first).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import trio
from trio.lowlevel import cancel_shielded_checkpoint

from sharecon._share.oversize import REPROBE_LOCKS, OversizeGuard
from sharecon.protocol.api import encode_response
from sharecon.protocol.messages.produce import ProduceRequest
from sharecon.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from sharecon.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from sharecon.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from sharecon.testing.fake.cluster import QUIET_APIS

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response

__all__ = [
    "HEALTH_BOUND",
    "SLOW_SPENT",
    "Drop",
    "Link",
    "NetFaults",
    "NetPlan",
    "SlowLink",
    "Stall",
    "fetch_waits_forever",
    "guard_forgets",
]

#: Share of seeds with transport faults.
SHARE = 0.35
#: N3: seconds after every fault healed by which every running consumer's health() is ok
#: again (a dropped answer heals once the client's request timeout ended): a lock (15 s)
#: for records a lost answer left locked, a probe, a back-off, a rejoin and a fetch.
HEALTH_BOUND = 30.0
#: N4: the most delivery attempts a record may spend on answers that cannot arrive in
#: time over the slow link (``sharecon._share.oversize``: a late answer, then a probe).
SLOW_SPENT = 2
#: The schedules' lock (``sim.client.LOCK_MS``), seconds.
_LOCK = 15.0
#: The link delivers at most this many bytes per step (a socket's segment train).
_SEGMENT = 4096
#: How long a client may await an answer that never comes: the consumer's default
#: ``request_timeout`` (30 s, as Kafka's ``request.timeout.ms``) plus a fetch's wait at
#: the broker (0.5 s); the producer's and admin's (``ConnectionConfig``, 10 s here) are
#: shorter.
_REQUEST_TIMEOUT = 30.5
#: A member's partition blocked over the slow link is probed again at the latest
#: ``REPROBE_LOCKS`` locks after its block began (``sharecon._share.oversize`` rule 3),
#: a block that may begin up to two locks after the link healed (a late answer, then a
#: probe): seconds after the link healed by which the members fetch normally again.
_SLOW_RECOVERY = (REPROBE_LOCKS + 2) * _LOCK
#: APIs whose answer a lost-answer or cut fault may hit ("any": the next answer at all).
_APIS = {
    "fetch": ShareFetchRequest.api_key,
    "ack": ShareAcknowledgeRequest.api_key,
    "heartbeat": ShareGroupHeartbeatRequest.api_key,
    "produce": ProduceRequest.api_key,
    "any": -1,
}


@dataclass(frozen=True, slots=True)
class Stall:
    """Bytes held from ``at`` for ``length`` seconds."""

    at: float
    length: float
    #: one connection (the newest open one) or every connection
    every: bool
    #: both directions, else only the broker's bytes to the client
    both: bool


@dataclass(frozen=True, slots=True)
class Drop:
    """The answer to the first request of ``api`` the broker handles at or after ``at``
    is lost (``cut`` false) or its connection closes instead (``cut`` true), the broker
    handling that close ``late`` seconds later."""

    at: float
    api: str
    cut: bool
    late: float = 0.0


@dataclass(frozen=True, slots=True)
class SlowLink:
    """The broker's bytes carried at ``bytes_per_second`` a connection from ``at`` for
    ``length`` seconds."""

    at: float
    length: float
    bytes_per_second: int
    #: records the writer sends first, in one batch per partition
    burst: int
    #: each partition's first batch takes this many locks to cross the slow link
    locks: float

    def key_bytes(self, partitions: int, lock: float) -> int:
        """The key size (bytes) of every record, so that the first batch of each
        partition needs :attr:`locks` locks at the link's rate."""
        per_batch = -(-self.burst // partitions)
        return max(1, int(self.locks * self.bytes_per_second * lock / per_batch))


@dataclass(frozen=True, slots=True)
class NetPlan:
    """One seed's transport faults."""

    stalls: tuple[Stall, ...] = ()
    drops: tuple[Drop, ...] = ()
    slow: SlowLink | None = None

    @classmethod
    def draw(cls, seed: int, records: int) -> NetPlan | None:
        """The plan of ``seed`` (``None``: no transport faults in this schedule)."""
        rng = random.Random(seed * 49979687 + 0x4E7)
        if rng.random() >= SHARE:
            return None
        kinds = rng.sample(["stall", "lost", "cut", "slow"], k=rng.choice([1, 1, 2]))
        stalls: list[Stall] = []
        drops: list[Drop] = []
        slow = None
        if "stall" in kinds:
            for _ in range(rng.randint(1, 2)):
                stalls.append(
                    Stall(
                        round(rng.uniform(1.0, 20.0), 3),
                        rng.choice([2.0, 5.0, 12.0, 20.0]),
                        rng.random() < 0.5,
                        rng.random() < 0.5,
                    )
                )
        if "lost" in kinds:
            for _ in range(rng.randint(1, 3)):
                drops.append(Drop(round(rng.uniform(0.5, 20.0), 3), rng.choice(list(_APIS)), False))
        if "cut" in kinds:
            for _ in range(rng.randint(1, 2)):
                drops.append(
                    Drop(
                        round(rng.uniform(0.5, 20.0), 3),
                        rng.choice(list(_APIS)),
                        True,
                        rng.choice([0.0, 0.0, 1.0, 3.0]),
                    )
                )
        if "slow" in kinds:
            slow = SlowLink(
                # from the start: the first batch is fetched over it
                rng.choice([0.0, 0.0, round(rng.uniform(0.0, 0.5), 3)]),
                rng.choice([30.0, 60.0, 90.0]),
                rng.choice([2048, 4096, 8192]),
                min(records, rng.choice([6, 12, 20])),
                rng.choice([0.5, 1.5, 3.0]),
            )
        return cls(
            tuple(sorted(stalls, key=lambda s: s.at)),
            tuple(sorted(drops, key=lambda d: d.at)),
            slow,
        )

    def describe(self) -> str:
        parts = [
            f"stall {'all' if s.every else 'one'}{' both ways' if s.both else ''} "
            f"{s.length:g}s@{s.at:g}"
            for s in self.stalls
        ]
        for d in self.drops:
            what = "cut" if d.cut else "lost"
            late = f" (close seen {d.late:g}s late)" if d.late else ""
            parts.append(f"{what} {d.api} answer@{d.at:g}{late}")
        if self.slow is not None:
            s = self.slow
            parts.append(
                f"slow link {s.bytes_per_second} B/s {s.length:g}s@{s.at:g}, first "
                f"{s.burst} records in one batch per partition, needing {s.locks:g} locks"
            )
        return "net: " + ", ".join(parts)

    @property
    def count(self) -> int:
        """How many faults (for the bounds that allow one attempt per fault)."""
        return len(self.stalls) + len(self.drops) + (self.slow is not None)

    @property
    def heals_at(self) -> float:
        """When the last transport fault has healed (schedule seconds): a stall's end, a
        dropped answer's request timed out, a late close handled, the link fast again."""
        last = 0.0
        for s in self.stalls:
            last = max(last, s.at + s.length)
        for d in self.drops:
            # The drop happens at the first matching answer after ``at``: unknown here;
            # the watch moves healed_at when it happens (NetFaults.healed).
            last = max(last, d.at + _REQUEST_TIMEOUT + d.late)
        if self.slow is not None:
            last = max(last, self.slow.at + self.slow.length + _SLOW_RECOVERY)
        return last


@dataclass(slots=True)
class _Marker:
    """A ShareFetch answer on its way: where its frame ends in the direction's bytes,
    when the locks of the records it carries end, and those records."""

    end: int
    deadline: float
    keys: list[tuple[int, int]]
    #: the member the answer is for
    member: str


class Link:
    """One direction of one connection (a :class:`~sharecon.testing.sim.pipe.Shaper`):
    holds its bytes while a stall lasts, and carries them at the slow link's rate."""

    __slots__ = (
        "arrived",
        "down",
        "markers",
        "net",
        "sends",
        "sent_total",
        "stalled_until",
        "taken",
        "wire_free",
    )

    def __init__(self, net: NetFaults, *, down: bool) -> None:
        self.net = net
        self.down = down
        self.sent_total = 0
        self.taken = 0
        self.arrived = 0
        #: (cumulative end offset, virtual time) of each send not yet wholly arrived
        self.sends: deque[tuple[int, float]] = deque()
        self.wire_free = -math.inf
        self.stalled_until = -math.inf
        self.markers: deque[_Marker] = deque()

    def sent(self, n: int) -> None:
        self.sent_total += n
        self.sends.append((self.sent_total, trio.current_time()))

    async def admit(self, queued: int, max_bytes: int) -> int:
        del queued
        slept = False
        while True:
            now = trio.current_time()
            stall = max(self.stalled_until, self.net.stalled_until(self, now))
            if stall > now:
                self.net.stalled += 1
                await trio.sleep_until(stall)
                slept = True
                continue
            if self.arrived > self.taken:
                break
            rate = self.net.rate(self.down, now)
            while self.sends and self.sends[0][0] <= self.arrived:
                self.sends.popleft()
            if rate is None:
                self.arrived = self.sent_total
                self.sends.clear()
                break
            # The next segment crosses the wire once the one before it has, and not
            # before it was sent.
            start = max(self.wire_free, self.sends[0][1] if self.sends else now)
            seg = min(_SEGMENT, self.sent_total - self.arrived)
            ready = start + seg / rate
            if ready > now:
                await trio.sleep_until(ready)
                slept = True
            self.wire_free = ready
            self.arrived += seg
        if not slept:
            await cancel_shielded_checkpoint()
        n = min(max_bytes, self.arrived - self.taken)
        self.taken += n
        markers = self.markers
        while markers and markers[0].end <= self.taken:
            m = markers.popleft()
            if trio.current_time() > m.deadline:
                self.net.spend(m.member, m.keys)
        return n

    def closed(self, sender_gone: bool) -> None:
        # What was still on the way never arrives. The client gave up on it (closed
        # first): a fetch that could not arrive in time. The broker's end closed first (a
        # cut, crash or restart): the fault spent the attempt, not the link.
        if not sender_gone:
            for m in self.markers:
                self.net.spend(m.member, m.keys)
        self.markers.clear()
        if self.down:
            self.net.pairs[:] = [pair for pair in self.net.pairs if pair[0] is not self]

    def mark(
        self, frame_bytes: int, deadline: float, keys: list[tuple[int, int]], member: str
    ) -> None:
        """The next ``frame_bytes`` sent are a ShareFetch answer to ``member`` carrying
        ``keys``."""
        self.markers.append(_Marker(self.sent_total + frame_bytes, deadline, keys, member))


@dataclass(slots=True)
class NetFaults:
    """The transport's faults for one schedule: the links' shapers and the broker's
    answers (lost, cut, or watched for N4)."""

    plan: NetPlan
    #: the share topic's partition of a topic id and partition (None: another topic)
    partition_of: Callable[[Any, int], int | None]
    #: the group's lock, seconds
    lock: float
    #: told when a dropped answer will have healed (the schedule's ``healed_at``)
    heal: Callable[[float], None] = lambda at: None
    #: the (down, up) links of the connections open now, oldest first
    pairs: list[tuple[Link, Link]] = field(default_factory=list)
    #: (member, (partition, offset)) -> delivery attempts spent on answers to that member
    #: that could not arrive
    spent: dict[tuple[str, tuple[int, int]], int] = field(default_factory=lambda: defaultdict(int))
    #: receives held by a stall; answers lost, connections cut instead of an answer,
    #: closes handled late
    stalled: int = 0
    lost: int = 0
    cut: int = 0
    late_closes: int = 0
    #: sessions a late close ended (a member's newer one)
    sessions_ended: int = 0
    #: the latest a dropped answer heals (its time plus the request timeout and lateness)
    healed: float = 0.0
    #: (from, to) of each dropped answer so far: from its drop to its healing
    fired: list[tuple[float, float]] = field(default_factory=list)
    _pending: list[Drop] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending = list(self.plan.drops)

    def windows(self) -> list[tuple[float, float]]:
        """When a transport fault may have ended locks so far (S1's ``disturbed``): each
        stall, and each dropped answer from when it happened until the client's request
        timeout and the late close are over. Not the slow link: it slows the broker's
        bytes only, and renewals reach the broker in time."""
        return [(s.at, s.at + s.length) for s in self.plan.stalls] + self.fired

    # -- shaping -------------------------------------------------------------------------

    def pipe_shapers(self) -> tuple[Link, Link]:
        """The (down, up) shapers of a new connection."""
        down, up = Link(self, down=True), Link(self, down=False)
        self.pairs.append((down, up))
        return down, up

    def rate(self, down: bool, now: float) -> float | None:
        """The slow link's rate now (bytes/s, the broker's bytes only), else ``None``."""
        s = self.plan.slow
        if s is None or not down or not s.at <= now < s.at + s.length:
            return None
        return float(s.bytes_per_second)

    def stalled_until(self, link: Link, now: float) -> float:
        """The end of a stall of every connection in force now, else ``-inf``."""
        for s in self.plan.stalls:
            if s.every and (link.down or s.both) and s.at <= now < s.at + s.length:
                return s.at + s.length
        return -math.inf

    async def stalls(self) -> None:
        """Stalls of one connection begin on the newest one open then (run in the
        schedule's task group)."""
        for s in self.plan.stalls:
            await anyio.sleep(max(0.0, s.at - anyio.current_time()))
            if s.every or not self.pairs:
                continue
            down, up = self.pairs[-1]
            down.stalled_until = s.at + s.length
            if s.both:
                up.stalled_until = s.at + s.length

    # -- N4 ------------------------------------------------------------------------------

    def spend(self, member: str, keys: list[tuple[int, int]]) -> None:
        for key in keys:
            self.spent[(member, key)] += 1

    def check(self) -> str | None:
        """N4: the violation, if a member spent more than the bound on a record."""
        bound = SLOW_SPENT + len(self.plan.stalls)
        for (member, key), n in sorted(self.spent.items()):
            if n > bound:
                return (
                    f"invariant N4: {key} spent {n} delivery attempts on ShareFetch answers "
                    f"to member {member} that could not arrive within its lock over the slow "
                    f"link (bound {bound})"
                )
        return None

    # -- the broker's answers ------------------------------------------------------------

    def _drop(self, api_key: int, now: float) -> Drop | None:
        for d in self._pending:
            if d.at <= now and (d.api == "any" or _APIS[d.api] == api_key):
                self._pending.remove(d)
                return d
        return None

    async def answer(
        self, kafka: Any, conn: Any, header: RequestHeader, body: Request[Response]
    ) -> None:
        """``FakeKafka._answer`` with the transport's faults (``kafka``: the MemoryKafka)."""
        cluster = kafka._cluster_of(conn.name)
        response = cluster.handle(
            header.api_key, header.api_version, body, conn.name, kafka.now(), header.client_id
        )
        kafka.requests_served += 1
        if header.api_key not in QUIET_APIS:
            kafka._notify()
        if response is None:
            return
        now = anyio.current_time()
        drop = self._drop(header.api_key, now)
        if drop is not None:
            self.healed = max(self.healed, now + _REQUEST_TIMEOUT + drop.late)
            self.fired.append((now, now + _REQUEST_TIMEOUT + drop.late))
            self.heal(self.healed)
            if not drop.cut:
                self.lost += 1  # handled, its answer never comes back
                return
            self.cut += 1
            conn.silent = drop.late > 0  # the broker handles the close only later
            conn.scope.cancel()
            if drop.late > 0:
                kafka._tg.start_soon(self._late_close, kafka, conn.name, drop.late)
            return
        frame = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        if isinstance(response, ShareFetchResponse) and self.plan.slow is not None:
            self._watch(conn, getattr(body, "member_id", ""), response, len(frame), now)
        try:
            await conn.stream.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            conn.scope.cancel()

    def _watch(
        self, conn: Any, member: str, response: ShareFetchResponse, size: int, now: float
    ) -> None:
        if self.rate(True, now) is None:
            return  # only answers sent while the link is slow are judged (N4)
        keys: list[tuple[int, int]] = []
        for t in response.responses:
            for p in t.partitions:
                part = self.partition_of(t.topic_id, p.partition_index)
                if part is None:
                    continue
                for a in p.acquired_records:
                    keys.extend((part, o) for o in range(a.first_offset, a.last_offset + 1))
        link = conn.stream._out.shaper
        if keys and isinstance(link, Link):
            link.mark(size, now + self.lock, keys, member)

    async def _late_close(self, kafka: Any, name: str, late: float) -> None:
        """The broker handles a closed connection's close ``late`` seconds after it: as a
        real broker may, it ends the member's share session, even a newer one the member
        opened on another connection meanwhile (what that session held is released)."""
        await anyio.sleep(late)
        self.late_closes += 1
        cluster = kafka._cluster_of(name)
        model = cluster.model
        now = kafka.now()
        cluster.connection_members.pop(name, None)
        entry = model.connections.pop(name, None)
        if entry is not None:
            key = entry[0]
            session = model.sessions.get(key)
            if session is not None:
                if session.connection != name:
                    self.sessions_ended += 1
                model._release_session(session, now)
            model._check_group_empty(key[0], now)
        kafka._notify()


def guard_forgets() -> Any:
    """Mutant ``oversize-off``: the oversize guard never blocks a partition (the behaviour
    issue 30 reported: a batch that cannot cross the link within the lock is fetched again
    every lock, until the broker archives its records unseen)."""
    from unittest import mock

    def answered(self: OversizeGuard, sizes: Any, **kw: Any) -> list[Any]:
        del kw
        for tp in sizes:
            self.suspect.discard(tp)
        return []

    def timed_out(self: OversizeGuard, partitions: Any, **kw: Any) -> list[Any]:
        del self, partitions, kw
        return []

    return mock.patch.multiple(OversizeGuard, answered=answered, timed_out=timed_out)


def fetch_waits_forever() -> Any:
    """Mutant ``fetch-waits-forever``: a ShareFetch's answer is awaited without a deadline
    (a connection that stays up but never answers stops that member's fetching for good;
    only a lost answer shows it: a cut or a crash fails the request at once)."""
    from unittest import mock

    from sharecon._share.machine import ShareMachine

    def fetch_timeout(self: ShareMachine, f: Any, default: float) -> float:
        del self, default
        f.timeout = 1e9
        return 1e9

    return mock.patch.object(ShareMachine, "fetch_timeout", fetch_timeout)
