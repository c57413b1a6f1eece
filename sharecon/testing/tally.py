"""Count every record of a fault test: produced, delivered, acknowledged, and why any came twice.

A fault test produces records whose values carry ids, runs share consumers through a fault,
and feeds what happened into a :class:`DeliveryTally`; :meth:`DeliveryTally.report` then says
whether anything was lost and explains every duplicate. It is synchronous and keeps no
clock of its own (times are passed in), so the same accounting serves the pytest fault
suite, ``benchmarks/chaos.py`` and any client (sharecon's or another) that can report
deliveries.

How a record delivered twice is explained:

* ``count rose``: the later delivery has a higher delivery count. The broker gave the record
  out again after the first delivery's lock expired, or after the first holder released it.
* ``released on disconnect``: the same delivery count twice, and the first delivery's
  acknowledgement never reached the broker (its connection or session was lost) or it was
  never acknowledged. Kafka 4.1 releases the records of a share session whose connection
  closed and *decrements* their delivery count while doing so (from 4.2, KAFKA-19972, the
  count is kept), so on 4.1 such a record comes back with the count it had before.
* ``share partition reloaded``: the same delivery count twice, with a
  :meth:`DeliveryTally.sessions_ended` or :meth:`DeliveryTally.partition_reloaded` between
  the two deliveries. When every share session of a group on a broker ends at once (a proxy
  that closes all connections as a stall ends, a client process that dies), the broker can
  drop the group's share partitions from memory before some member's release has run (it
  then logs ``No share partition found ... while releasing acquired topic partitions``).
  The next fetch builds the share partition again from the persisted state
  (``Initialized share partition ... with persister read state``), in which acquisitions
  never appear: the records come back with the count they had before, on every Kafka line.
  ``sharecon.testing.model`` plays this
  (``ModelBroker.disconnect_many(..., concurrent=True)``); see ``docs/testing.md``.
* anything else is ``unexplained``; a record whose acceptance the broker confirmed and that
  was delivered again is a ``double accept``. Both are failures.

A *late confirmation* is not a double accept: a member whose delivery of a record was
superseded (its lock ended and another member got the record) answers it after the other
member's acceptance was confirmed. Kafka skips acknowledgement batches wholly below the
share partition's start offset without looking at who holds them, and answers 0 (the
conformance scenario ``late-ack-after-the-other-accepted``), so such an answer reports
success for an acceptance the broker did not apply. The record was accepted once; the
report counts these apart (:attr:`TallyReport.late_confirmations`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Delivery", "DeliveryTally", "FaultFigures", "TallyReport"]

#: A partition and offset: ``(topic, partition, offset)``.
Position = tuple[str, int, int]

COUNT_ROSE = "count rose"
RELEASED_ON_DISCONNECT = "released on disconnect (same count)"
NEW_LEADER = "new leader (same count)"
RELOADED = "share partition reloaded (same count)"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One record handed to the application."""

    position: Position
    record_id: str
    delivery_count: int
    member: str
    at: float
    leader_epoch: int = -1  #: the partition's leader epoch the member knew (-1: unknown)


@dataclass(frozen=True, slots=True)
class FaultFigures:
    """How one fault affected progress."""

    name: str
    at: float
    #: Seconds from the fault to the next record delivered to any member (None: none came).
    to_next_delivery: float | None


@dataclass(frozen=True, slots=True)
class TallyReport:
    """The verdict of a :class:`DeliveryTally`."""

    produced: int
    delivered: int  #: deliveries in all, duplicates included
    distinct: int  #: produced records delivered at least once
    lost: tuple[str, ...]  #: ids produced but never delivered
    #: ids whose acceptance the broker confirmed exactly once
    accepted: int
    #: ids last delivered and accepted, but the answer's outcome was not confirmed (the
    #: request failed after it left) and the record never came back: the broker applied it
    unconfirmed: int
    #: ids neither confirmed nor redelivered after their last delivery's answer failed
    duplicates: int  #: deliveries beyond the first
    explained: dict[str, int]  #: duplicates by explanation
    unexplained: tuple[str, ...]  #: one line per duplicate nobody can explain
    double_accepted: tuple[str, ...]  #: ids accepted (confirmed) and then delivered again
    foreign: int  #: deliveries of records this test did not produce
    faults: tuple[FaultFigures, ...]
    #: the longest time with records waiting and none delivered for the first time, and the
    #: sum of such gaps over ``stall_threshold`` seconds (redeliveries are not progress)
    longest_gap: float
    time_without_progress: float
    #: confirmations answered to a superseded holder after the last holder's own was
    #: confirmed: Kafka answers 0 to acknowledgements below the start offset (see above)
    late_confirmations: int = 0

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing accepted twice, every duplicate explained."""
        return not (self.lost or self.unexplained or self.double_accepted or self.foreign)

    def summary(self) -> str:
        """A few lines for a test failure or a benchmark log."""
        lines = [
            f"produced {self.produced}, delivered {self.delivered} ({self.distinct} distinct), "
            f"lost {len(self.lost)}, accepted {self.accepted} (+{self.unconfirmed} unconfirmed)",
            f"duplicates {self.duplicates}: {dict(self.explained)}; "
            f"unexplained {len(self.unexplained)}, double accepts {len(self.double_accepted)}, "
            f"late confirmations {self.late_confirmations}, foreign {self.foreign}",
        ]
        for f in self.faults:
            nxt = "none" if f.to_next_delivery is None else f"{f.to_next_delivery:.2f} s"
            lines.append(f"fault {f.name} at {f.at:.2f}: next delivery after {nxt}")
        lines.append(
            f"longest gap {self.longest_gap:.2f} s, without progress {self.time_without_progress:.2f} s"
        )
        lines += [f"lost: {i}" for i in self.lost[:10]]
        lines += [f"unexplained: {u}" for u in self.unexplained[:10]]
        lines += [f"double accept: {d}" for d in self.double_accepted[:10]]
        return "\n".join(lines)


@dataclass(slots=True)
class _Answer:
    ok: bool
    at: float
    member: str = ""


@dataclass(slots=True)
class DeliveryTally:
    """Collects produced ids, deliveries, acknowledgement outcomes and fault times.

    :param same_count_redelivery: whether the broker hands a record out again with the
        same delivery count after the holder's connection closed (true for Kafka 4.1 only;
        see the module docstring). When false such a duplicate is unexplained, unless a
        reload explains it (:meth:`sessions_ended`, :meth:`partition_reloaded`).
    """

    same_count_redelivery: bool = True
    stall_threshold: float = 1.0
    _produced: dict[str, Position] = field(default_factory=dict)
    _positions: dict[Position, str] = field(default_factory=dict)
    _produced_at: dict[Position, float] = field(default_factory=dict)
    _deliveries: list[Delivery] = field(default_factory=list)
    _answers: dict[Position, list[_Answer]] = field(
        default_factory=lambda: defaultdict(list), init=False
    )
    _faults: list[tuple[str, float]] = field(default_factory=list)
    _leader_changes: dict[tuple[str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    _reloads: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    _sessions_ended: list[float] = field(default_factory=list)
    _start: float | None = None

    def started(self, at: float) -> None:
        """When consumers started (gaps are measured from here)."""
        self._start = at

    def produced(
        self, record_id: str, topic: str, partition: int, offset: int, at: float = 0.0
    ) -> None:
        """The broker confirmed writing ``record_id`` at this position at time ``at``."""
        self._produced[record_id] = (topic, partition, offset)
        self._positions[(topic, partition, offset)] = record_id
        self._produced_at[(topic, partition, offset)] = at

    def delivered(
        self,
        record_id: str,
        topic: str,
        partition: int,
        offset: int,
        delivery_count: int,
        member: str,
        at: float,
        leader_epoch: int = -1,
    ) -> None:
        """``member`` was handed the record (its value carried ``record_id``), from the
        leader of ``leader_epoch`` as far as the member knew."""
        self._deliveries.append(
            Delivery(
                (topic, partition, offset), record_id, delivery_count, member, at, leader_epoch
            )
        )

    def answered(
        self,
        topic: str,
        partition: int,
        first: int,
        last: int,
        *,
        ok: bool,
        at: float,
        member: str = "",
    ) -> None:
        """An acceptance of offsets ``first..last`` was confirmed (``ok``) or failed
        (``member``: who answered, for the report)."""
        answer = _Answer(ok, at, member)
        for offset in range(first, last + 1):
            self._answers[(topic, partition, offset)].append(answer)

    def leader_changed(self, topic: str, partition: int, at: float) -> None:
        """The partition's leader epoch changed at ``at`` (for clients that cannot say which
        leader epoch each delivery came from: a metadata poller reports the changes)."""
        self._leader_changes[(topic, partition)].append(at)

    def sessions_ended(self, at: float) -> None:
        """Every share session of the group on some broker ended together at ``at`` (all its
        connections closed at once: the end of a proxy stall, a cut of every connection, a
        member process killed). The broker may then have dropped and reloaded its share
        partitions, handing out acquired records again with the same count."""
        self._sessions_ended.append(at)

    def session_ended_by_broker(self, at: float) -> None:
        """A member learnt at ``at`` that the broker had ended its share session by itself
        (``SHARE_SESSION_NOT_FOUND``). After a cut the broker can handle the old
        connection's close only once the member has opened a new session on a new one: the
        close then ends the new session too (sessions are keyed by group and member), and
        the group, left with no session there, has its share partitions dropped and built
        again, records acquired meanwhile coming back with the same count. Counted as
        :meth:`sessions_ended` at ``at``."""
        self._sessions_ended.append(at)

    def partition_reloaded(self, topic: str, partition: int, at: float) -> None:
        """The broker built the partition's share state again from the persisted state at
        ``at`` (its log says ``Initialized share partition ... with persister read state``
        after the first load)."""
        self._reloads[(topic, partition)].append(at)

    def fault(self, name: str, at: float) -> None:
        """A fault was injected at ``at``."""
        self._faults.append((name, at))

    def positions(self) -> list[Position]:
        """Where every produced record was written."""
        return list(self._produced.values())

    def delivered_ids(self) -> set[str]:
        """Ids delivered so far."""
        return {d.record_id for d in self._deliveries}

    def done(self, now: float, *, settle: float = 20.0) -> bool:
        """Every produced record was delivered and accepted: its acceptance was confirmed,
        or its last answer failed over ``settle`` seconds ago and it was not delivered
        again (the broker applied the answer but the confirmation was lost; ``settle``
        should exceed the lock duration, after which an unapplied one would be back)."""
        last_delivery: dict[Position, float] = {}
        for d in self._deliveries:
            last_delivery[d.position] = max(d.at, last_delivery.get(d.position, d.at))
        for pos in self._produced.values():
            delivered_at = last_delivery.get(pos)
            if delivered_at is None:
                return False
            answers = [a for a in self._answers.get(pos, ()) if a.at >= delivered_at]
            if any(a.ok for a in answers):
                continue
            if not answers or now - answers[-1].at < settle:
                return False
        return True

    def report(self) -> TallyReport:
        """Compare what was produced with what was delivered and answered."""
        by_pos: dict[Position, list[Delivery]] = defaultdict(list)
        foreign = 0
        for d in sorted(self._deliveries, key=lambda d: d.at):
            if d.position not in self._positions:
                foreign += 1
                continue
            by_pos[d.position].append(d)
        lost = tuple(sorted(rid for rid, pos in self._produced.items() if pos not in by_pos))
        explained: Counter[str] = Counter()
        unexplained: list[str] = []
        double: list[str] = []
        accepted = unconfirmed = late_confirmations = 0
        for pos, deliveries in by_pos.items():
            answers = self._answers.get(pos, [])
            for prev, nxt in zip(deliveries, deliveries[1:], strict=False):
                confirmed_before = any(a.ok and prev.at <= a.at <= nxt.at for a in answers)
                if confirmed_before:
                    first_ok = min(
                        (a for a in answers if a.ok and prev.at <= a.at <= nxt.at),
                        key=lambda a: a.at,
                    )
                    when = f"{first_ok.at:.2f} by {first_ok.member or '?'}"
                    double.append(
                        f"{prev.record_id} at {pos}: accepted, then delivered again "
                        f"(count {prev.delivery_count} to {prev.member} at {prev.at:.2f}, "
                        f"epoch {prev.leader_epoch}; confirmed at {when}; "
                        f"count {nxt.delivery_count} to {nxt.member} at {nxt.at:.2f}, "
                        f"epoch {nxt.leader_epoch})"
                    )
                elif nxt.delivery_count > prev.delivery_count:
                    explained[COUNT_ROSE] += 1
                elif nxt.delivery_count == prev.delivery_count and (
                    nxt.leader_epoch > prev.leader_epoch >= 0
                    or self._leader_changed_between(pos, prev.at, nxt.at)
                ):
                    explained[NEW_LEADER] += 1
                elif nxt.delivery_count == prev.delivery_count and self._reloaded_between(
                    pos, prev.at, nxt.at
                ):
                    explained[RELOADED] += 1
                elif nxt.delivery_count == prev.delivery_count and self.same_count_redelivery:
                    explained[RELEASED_ON_DISCONNECT] += 1
                else:
                    unexplained.append(
                        f"{prev.record_id} at {pos}: count {prev.delivery_count} "
                        f"({prev.member}) then {nxt.delivery_count} ({nxt.member}); "
                        f"at {prev.at:.2f} and {nxt.at:.2f}, epochs {prev.leader_epoch} and "
                        f"{nxt.leader_epoch}; sessions ended at "
                        + (", ".join(f"{t:.2f}" for t in self._sessions_ended) or "none")
                    )
            last = deliveries[-1]
            oks = [a for a in answers if a.ok and a.at >= last.at]
            own = [a for a in oks if a.member == last.member]
            if own and len(oks) > 1:
                # After the last holder's own confirmation, a member that held the record
                # before (and is not the last holder) is answered 0 for an acknowledgement
                # the broker skipped as below the start offset: not a second acceptance.
                earlier = {d.member for d in deliveries[:-1]} - {last.member}
                late = [a for a in oks if a.member in earlier and a.at > own[0].at]
                if late:
                    late_confirmations += len(late)
                    oks = [a for a in oks if a not in late]
            if len(oks) == 1:
                accepted += 1
            elif len(oks) > 1:
                double.append(
                    f"{last.record_id} at {pos}: confirmed {len(oks)} times (delivered with "
                    f"count {last.delivery_count} to {last.member} at {last.at:.2f}; confirmed "
                    + ", ".join(f"by {a.member or '?'} at {a.at:.2f}" for a in oks)
                    # Every delivery and answer: what the member that confirmed late had.
                    + "; history: "
                    + ", ".join(
                        f"count {d.delivery_count} to {d.member} at {d.at:.2f} "
                        f"(epoch {d.leader_epoch})"
                        for d in deliveries
                    )
                    + "; answers: "
                    + ", ".join(
                        f"{'ok' if a.ok else 'failed'} by {a.member or '?'} at {a.at:.2f}"
                        for a in answers
                    )
                    + ")"
                )
            else:
                unconfirmed += 1
        gaps = self._gaps()
        return TallyReport(
            produced=len(self._produced),
            delivered=len(self._deliveries),
            distinct=len(by_pos),
            lost=lost,
            accepted=accepted,
            unconfirmed=unconfirmed,
            duplicates=sum(len(ds) - 1 for ds in by_pos.values()),
            explained=dict(explained),
            unexplained=tuple(unexplained),
            double_accepted=tuple(double),
            foreign=foreign,
            faults=tuple(self._fault_figures()),
            longest_gap=gaps[0],
            time_without_progress=gaps[1],
            late_confirmations=late_confirmations,
        )

    def _leader_changed_between(self, pos: Position, after: float, before: float) -> bool:
        # A poller sees a change up to its interval late: allow half a second.
        changes = self._leader_changes.get((pos[0], pos[1]), ())
        return any(after < at <= before + 0.5 for at in changes)

    def _reloaded_between(self, pos: Position, after: float, before: float) -> bool:
        reloads = self._reloads.get((pos[0], pos[1]), ())
        return any(after < at <= before for at in (*reloads, *self._sessions_ended))

    def _fault_figures(self) -> Iterable[FaultFigures]:
        times = sorted(d.at for d in self._deliveries)
        for name, at in self._faults:
            nxt = next((t for t in times if t > at), None)
            yield FaultFigures(name, at, None if nxt is None else nxt - at)

    def _gaps(self) -> tuple[float, float]:
        """Gaps between deliveries while some record was waiting: produced before the gap
        began and first delivered after it ended (an idle consumer is not a stall)."""
        firsts: dict[Position, float] = {}
        for d in self._deliveries:
            if d.position in self._produced_at:
                firsts[d.position] = min(d.at, firsts.get(d.position, d.at))
        if not firsts:
            return 0.0, 0.0
        order = sorted((at, self._produced_at[pos]) for pos, at in firsts.items())
        # waiting_since[i]: the earliest production among records first delivered at or
        # after order[i]
        waiting_since = [0.0] * len(order)
        low = float("inf")
        for i in range(len(order) - 1, -1, -1):
            low = min(low, order[i][1])
            waiting_since[i] = low
        prev = self._start if self._start is not None else order[0][0]
        longest = total = 0.0
        for i, (t, _) in enumerate(order):
            gap = t - max(prev, waiting_since[i])
            if gap > 0:
                longest = max(longest, gap)
                if gap > self.stall_threshold:
                    total += gap
            prev = max(prev, t)
        return longest, total
