"""The simulator's invariants: what must hold whatever the fault schedule.

The simulator (:mod:`.world`) tells a :class:`Checker` what happens on both sides: each
acquisition the model broker makes (a *delivery*, numbered here, since the broker's own
delivery count repeats after a re-initialisation), each record the application is handed,
each answer the broker applies, and each outcome the share machine reports. A broken rule
is kept as a :class:`Violation`; the first one ends the schedule.

1. No record is handed to the application at or after its delivery's lock deadline (the
   broker's, moved by renewals).
2. No answer lands on a newer delivery of the same offset: an acknowledgement the broker
   applies was meant for the delivery the broker holds now.
3. Every delivery the member took in ends exactly once: accepted, released, rejected (an
   outcome reported), dropped unhanded (its lock left to expire), or reported lost.
4. The model broker never hands out a record it has accepted.
5. Nothing produced is lost: after a quiet drain every record is accepted or archived.
6. An answer the application gives after close is refused (the machine raises
   InvalidRecordStateError) and changes nothing.
7. No record is handed out whose answer can no longer reach the broker: the share
   session it was acquired under is still the member's current one with its leader.
8. The member's view of each share session is the broker's: a session at epoch 0 lists
   no partitions; an open one with no request out lists those the broker's session holds.
9. Liveness: after the faults heal, an available record is handed out within a bound.
10. An outcome says what the broker did: an answer it took is reported acknowledged, one
    it refused reported failed.
11. Once the faults heal (and a settling bound passed), the brokers refuse nothing.
12. Every answer the broker took is reported: once the answer to the request that carried
    it is taken in, the delivery it was meant for has ended.
13. A refusal is backed off from: after a top-level error, or a request that failed in
    transport, the member asks that broker nothing for the back-off's first step.
14. The member never fails: every fault of a schedule is transient.
15. Health names a cause only when there is one: once the faults healed, no error noted,
    no fetch late, no partition blocked.
16. The renewal counters hold what went on the wire.
17. A gap is not a record: no offset that holds one is acknowledged as a gap (the broker
    would archive a record the application never saw).
18. A fetch asks for what the member was configured to acquire: under a strict record
    limit, record-limit acquisition of at most the limit; otherwise batch acquisition,
    but for an oversize probe (one record).
22. An answer goes out without waiting: once the faults healed (and a settling bound
    passed), every answer the application gives is on the wire within a bound (the
    acknowledgement linger and a parked record's shortest wait, with room to spare).
23. An idle member does not spin: from the same time, no leader answers more than a few
    bare fetches empty in a second with no answer of the application's between them.
24. A strict record limit holds: under ``acquire_mode="record_limit"``, whenever the
    member takes records in, it holds no more than the limit, counted over every leader:
    records buffered, handed out, or answered and not yet confirmed. A record counts
    while its lock lasts, its share session is still the member's current one with that
    leader, and the machine still holds it; one released with a delay does not count.
25. Answers wait together: from the same time as 22, of three requests of one kind in a
    row to one leader that carry answers and bring nothing else (ShareAcknowledges, or
    no-wait fetches that come back empty), the first and the third are at least half the
    acknowledgement linger apart, unless the application waited for records between
    them, an answer's lock ends within the hold margin and a linger, or a strict record
    limit holds.
26. Every record acquired is taken in: each record the broker acquired for the member in
    an answer its current session took in is buffered, unless a rule leaves it out (a
    stale answer's partition, an offset compaction emptied).
27. A closing member fetches nothing: once its close began, no ShareFetch it sends asks
    for records.

9 to 18 and 22 to 27 are checked by :mod:`.world` (they need the brokers' or the member's
state) through :meth:`Checker.fail`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sharecon.types import TopicIdPartition

__all__ = ["Checker", "Live", "Violation"]

#: (topic partition, offset)
Key = tuple["TopicIdPartition", int]

BUFFERED = 0  #: taken in, waiting in the buffer
HANDED = 1  #: handed to the application, not answered
ANSWERED = 2  #: the application answered; the outcome is not reported yet


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: its number (0 for a crash, 1-27), when, and what happened."""

    invariant: int
    at: float
    what: str

    def __str__(self) -> str:
        return f"invariant {self.invariant} at t={self.at:.3f}: {self.what}"


@dataclass(slots=True)
class Live:
    """A delivery the member took in and has not ended yet."""

    delivery: int
    member: str
    node: int  #: the leader it came from
    state: int = BUFFERED
    #: when the application answered it (rule 22)
    answered_at: float = 0.0
    #: whether a request carried the answer (rule 22)
    sent: bool = False


@dataclass(slots=True)
class Checker:
    """Keeps what the invariants need and the first violation."""

    violation: Violation | None = None
    #: broker delivery id -> its lock deadline (rule 1)
    deadline_of: dict[int, float] = field(default_factory=dict)
    #: broker delivery id -> its lock deadline when acquired, before any renewal (the
    #: member's ledger keeps that one: rule 25)
    acquired_deadline: dict[int, float] = field(default_factory=dict)
    #: the broker's current delivery of an offset
    current: dict[Key, int] = field(default_factory=dict)
    #: offsets the broker accepted (rule 4)
    accepted: set[Key] = field(default_factory=set)
    #: the member's deliveries not ended yet, oldest first (rule 3)
    live: dict[Key, list[Live]] = field(default_factory=dict)
    #: every delivery ever taken in (rule 26)
    took: set[int] = field(default_factory=set)
    #: per offset and member, the newest delivery it took in and its leader (rule 21)
    newest: dict[tuple[Key, str], tuple[int, int]] = field(default_factory=dict)
    next_id: int = 0
    handed: int = 0
    n_ended: int = 0
    #: when the application last answered a record (rule 23)
    last_answer: float = 0.0

    def fail(self, invariant: int, at: float, what: str) -> None:
        """Keep the first violation."""
        if self.violation is None:
            self.violation = Violation(invariant, at, what)

    # -- the broker side ---------------------------------------------------------------------

    def acquired(self, key: Key, deadline: float, at: float) -> int:
        """The broker acquired ``key``: a new delivery; returns its id (rule 4)."""
        if key in self.accepted:
            self.fail(4, at, f"the broker handed out {_name(key)} again after accepting it")
        self.next_id += 1
        d = self.next_id
        self.current[key] = d
        self.deadline_of[d] = self.acquired_deadline[d] = deadline
        return d

    def applied(self, key: Key, meant: int | None, accepted: bool, at: float) -> None:
        """The broker applied an answer (not a renewal) to its current delivery of ``key``;
        ``meant``: the delivery the member meant it for (rule 2)."""
        d = self.current.get(key)
        if meant is not None and d is not None and meant != d:
            self.fail(
                2,
                at,
                f"an answer meant for delivery {meant} of {_name(key)} landed on delivery {d}",
            )
        if accepted:
            self.accepted.add(key)

    # -- the member side ---------------------------------------------------------------------

    def taken_in(self, key: Key, d: int, member: str, node: int) -> None:
        """``member`` buffered delivery ``d`` of ``key`` from leader ``node``."""
        self.took.add(d)
        self.live.setdefault(key, []).append(Live(d, member, node))
        seen = self.newest.get((key, member))
        if seen is None or d > seen[0]:
            self.newest[(key, member)] = (d, node)

    def closed(self, member: str) -> None:
        """``member`` closed its sessions: the broker released whatever it still held
        (a record buffered twice, its lock lost, may be reported once or not at all)."""
        for key in list(self.live):
            entries = [e for e in self.live[key] if e.member != member]
            self.n_ended += len(self.live[key]) - len(entries)
            if entries:
                self.live[key] = entries
            else:
                del self.live[key]

    def handed_out(self, key: Key, d: int, at: float) -> None:
        """The application got delivery ``d`` of ``key`` at ``at`` (rule 1)."""
        self.handed += 1
        deadline = self.deadline_of.get(d)
        if deadline is not None and at >= deadline:
            self.fail(
                1,
                at,
                f"{_name(key)} (delivery {d}) handed out at {at:.3f}, its lock ended at "
                f"{deadline:.3f}",
            )
        entry = self._find(key, d)
        if entry is None:
            self.fail(3, at, f"{_name(key)} (delivery {d}) handed out but never taken in")
            return
        entry.state = HANDED
        # A delivery acquired by the broker after d, taken in before this hand-out
        # (before d was taken in, or after): the broker acquired it again for this
        # member, so d's lock is gone. From another leader the partition moved; from
        # the same one d's lock either expired (invariant 1 judges that) or the leader
        # rebuilt the partition (it moved away and back).
        newest, node = self.newest[(key, entry.member)]
        if newest > d:
            # Rule 21: the application would handle the record twice.
            self.fail(
                21,
                at,
                f"{_name(key)} (delivery {d}) handed out after a newer delivery of it "
                f"({newest}) was taken in: its lock was gone",
            )

    def handed_stale(self, key: Key, d: int, at: float, tag: object, current: object) -> None:
        """Delivery ``d`` of ``key`` was handed out though its session ``tag`` ended
        (the leader's is ``current`` now): its answer cannot reach the broker (rule 7)."""
        self.fail(
            7,
            at,
            f"{_name(key)} (delivery {d}) handed out from share session {tag}, "
            f"which has ended (now {current}): its answer cannot reach the broker",
        )

    def answered(self, key: Key, d: int, at: float) -> None:
        """The application's answer to delivery ``d`` was marked (MarkResult.OK) at
        ``at``."""
        self.last_answer = at
        entry = self._find(key, d)
        if entry is not None:
            entry.state = ANSWERED
            entry.answered_at = at
            entry.sent = False

    def meant(self, key: Key, member: str, node: int) -> int | None:
        """The delivery an answer ``member`` sends ``node`` now for ``key`` is meant for:
        the answered one from that leader (now on the wire, rule 22), else (the
        machine's own release) the newest."""
        entries = [e for e in self.live.get(key, ()) if e.member == member and e.node == node]
        if not entries:
            return None
        for e in entries:
            if e.state == ANSWERED:
                e.sent = True
                return e.delivery
        return entries[-1].delivery

    def unsent(self, member: str, since: float, before: float) -> tuple[Key, Live] | None:
        """An answer of ``member``'s given from ``since`` on and before ``before`` that no
        request has carried yet, if any (rule 22)."""
        for key, entries in self.live.items():
            for e in entries:
                if (
                    e.state == ANSWERED
                    and not e.sent
                    and e.member == member
                    and since <= e.answered_at < before
                ):
                    return key, e
        return None

    def ended(
        self,
        key: Key,
        at: float,
        how: str,
        member: str,
        *,
        d: int | None = None,
        newest: bool = False,
        node: int | None = None,
    ) -> None:
        """Delivery ``d`` of ``key`` ended (``None``: the one of ``member``'s an outcome
        is for: the answered one, else the newest or the oldest) (rule 3)."""
        entries = self.live.get(key)
        idx = -1
        if entries:
            if d is not None:
                idx = next((i for i, e in enumerate(entries) if e.delivery == d), -1)
            else:
                mine = [i for i, e in enumerate(entries) if e.member == member]
                if node is not None:
                    # An outcome from a leader ends a delivery that leader made, if any.
                    mine = [i for i in mine if entries[i].node == node] or mine
                if mine:
                    other = mine[-1] if newest else mine[0]
                    idx = next((i for i in mine if entries[i].state == ANSWERED), other)
        if idx < 0 or entries is None:
            if d is not None:
                return  # a buffered delivery the machine already ended (released at close)
            open_ = [(e.delivery, e.state) for e in entries or ()]
            self.fail(
                3, at, f"{_name(key)}: {how} (delivery {d}), but no such delivery was open {open_}"
            )
            return
        del entries[idx]
        if not entries:
            del self.live[key]
        self.n_ended += 1

    def is_handed(self, key: Key, d: int) -> bool:
        """Whether delivery ``d`` of ``key`` is handed out and unanswered."""
        entry = self._find(key, d)
        return entry is not None and entry.state == HANDED

    def is_open(self, key: Key, d: int) -> bool:
        """Whether delivery ``d`` of ``key`` is taken in and not ended."""
        return self._find(key, d) is not None

    def _find(self, key: Key, d: int) -> Live | None:
        for e in self.live.get(key, ()):
            if e.delivery == d:
                return e
        return None

    # -- the end -----------------------------------------------------------------------------

    def finish(self, at: float, unfinished: list[Key]) -> None:
        """After the drain: every delivery ended (3), every record finished (5)."""
        for key, entries in self.live.items():
            states = ", ".join(f"{e.delivery}:{e.state}" for e in entries)
            self.fail(3, at, f"{_name(key)}: deliveries never ended ({states})")
            break
        if unfinished:
            self.fail(
                5,
                at,
                "not accepted or archived after the drain: "
                + ", ".join(_name(k) for k in unfinished[:5]),
            )


def _name(key: Key) -> str:
    tp, offset = key
    return f"{tp.topic}-{tp.partition}@{offset}"
