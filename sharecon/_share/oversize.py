"""Partitions whose batches cannot cross the link within the lock: fetched at most twice.

The broker locks a share fetch's records when it acquires them, and always returns (and,
in the default ``batch`` acquire mode, acquires) at least one whole batch, however small
the fetch's ``MaxBytes``. A batch that takes longer to arrive than the lock lasts is
released at the broker before the member sees it, and every fetch of it spends one more
delivery attempt of each of its records, until ``share.delivery.count.limit`` archives
them unseen. Shrinking the fetch (:mod:`.fetch_size`) cannot split a batch; so this module
decides when to stop fetching a partition. Rules:

1. An answer that arrived after the lock, in which a partition brought more bytes than
   the fetch asked for (one batch larger than ``MaxBytes``: no smaller ask can split it),
   or the ask was already at the floor, and those bytes alone need longer than the lock
   at the rate measured on that answer, *blocks* the partition: one delivery attempt
   was spent on its records. (Otherwise shrinking the fetch helps: :mod:`.fetch_size`.)
   A late batch no larger than the floor (``MIN_BYTES``) blocks nothing: a link that
   cannot carry 1 KiB within a lock is not the case this rule is for, and such an answer
   means the broker or the link stalled; a block then would outlast the stall for good
   (found by simulation: a 75-byte batch behind a stall, seed 334190681 on 4.2).
2. A fetch that got no answer at all makes the partitions of its session *suspect* (how
   much it brought is unknown). The next fetch to that leader is a *probe*: one record's
   worth (``MaxBytes`` at the floor, ``MaxRecords`` 1, record-limit acquisition, which
   Kafka 4.2+ honours and 4.1 ignores), with a deadline of :data:`PROBE_LOCKS` locks so
   its answer can be measured. A late probe answer blocks by rule 1; a probe that gets no
   answer either blocks every suspect partition; bytes in time clear a suspect, and an
   empty answer leaves it suspect (the unanswered fetch's locks may still hold).
   The probe spends the second attempt: on Kafka 4.1 on the whole first batch, on 4.2+
   on one record.
3. A blocked partition is left out of the leader's fetches (the broker forgets it from
   the share session), so no further attempt is spent by this member meanwhile; its
   records stay available to the group's other members. It is fetched again when an
   answer in time shows the batch now fits (a longer lock reported by the broker, at the
   rate measured when the partition was blocked; or a rate measured on an answer with
   bytes, never the leader's running rate, on the same leader, at which the batch arrives within
   :data:`~.fetch_size.ARRIVAL_SHARE` of the lock: by a fetch that did not wait at the
   broker, or, for one that may have waited, the bytes over the whole time from send to
   answer, a rate the link surely reached). A block for a probe that got no answer (no
   batch size known: the broker or the link stalled, which a ``RequestTimeoutError``
   leaves usable) makes the partition suspect again at the leader's next answer in time
   (the stall healed). Every block, measured or not, is made suspect again at the
   latest :data:`REPROBE_LOCKS` locks after the guard first saw it in a turn, so the
   next fetch re-probes it: a link that got faster is found even when no other answer
   from the leader can show it (its other partitions idle or blocked too; found by the
   whole-client simulation, seeds 79 and 93 on 4.4: the link healed and the member
   never fetched the partition again). A re-probe that is still late, or gets no answer,
   blocks it again; each round spends one attempt of one record (4.2+; the first batch
   on 4.1). Assignment changes do not end a block; a new consumer starts with none.
4. While any partition is blocked the consumer is not healthy, and each block has a
   sentence naming the partition, the batch size, the measured rate and the lock.
5. No I/O, no clock: times are the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .fetch_size import ARRIVAL_SHARE, MIN_BYTES

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping, Sequence

    from sharecon.types import TopicIdPartition

__all__ = ["PROBE_LOCKS", "REPROBE_LOCKS", "Blocked", "OversizeGuard"]

#: A probe's answer is awaited this many lock durations (at least the usual deadline).
PROBE_LOCKS = 4.0
#: A block for an unanswered probe is probed again at the latest this many lock durations
#: after it began (rule 3): long enough that a link still down costs one attempt of one
#: record per round (5 minutes at Kafka's default 30 s lock), short enough to be a bound.
REPROBE_LOCKS = 10.0


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why a partition is no longer fetched (rule 4).

    :param batch_bytes: the bytes its answer brought (``None``: no answer arrived).
    :param bytes_per_second: the link rate measured (``None``: never measured).
    :param lock: the acquisition lock, in seconds.
    :param waited: how long the unanswered probe was awaited (0 when an answer arrived).
    """

    tp: TopicIdPartition
    batch_bytes: int | None
    bytes_per_second: float | None
    lock: float
    waited: float = 0.0
    #: When its records began to wait with none deliverable (the send time of the first
    #: late or unanswered fetch): ``health().stuck_for`` counts from it while blocked.
    since: float = 0.0
    #: For a block with no answer (``batch_bytes`` None): when it is probed again at the
    #: latest (rule 3), set when the guard first sees it in a turn (None until then).
    reprobe_at: float | None = None

    def describe(self) -> str:
        """One sentence for ``health()`` and the log."""
        rate = self.bytes_per_second
        measured = f"{rate:.0f} bytes/s" if rate else "no rate measured"
        if self.batch_bytes is None:
            what = f"no answer within {self.waited:.1f} s ({measured})"
        else:
            need = f"{self.batch_bytes / rate:.1f} s" if rate else "unknown time"
            what = f"a {self.batch_bytes}-byte batch needs {need} at the measured {measured}"
        tp = self.tp
        first = (
            "when the link measures faster"
            if self.batch_bytes is not None
            else "at the leader's next answer in time"
        )
        again = f"; probed again {first}, at the latest in {REPROBE_LOCKS * self.lock:.0f} s"
        return (
            f"{tp.topic or tp.topic_id}-{tp.partition}: {what}, longer than the {self.lock:.1f} s acquisition lock; "
            f"no longer fetched by this member (at most two delivery attempts spent){again}"
        )


class OversizeGuard:
    """One leader's blocked and suspect partitions (rules 1-4)."""

    __slots__ = ("blocked", "suspect")

    def __init__(self) -> None:
        #: Partitions no longer fetched, and why.
        self.blocked: dict[TopicIdPartition, Blocked] = {}
        #: Partitions of a fetch that got no answer: the next fetch is a probe.
        self.suspect: set[TopicIdPartition] = set()

    @property
    def probing(self) -> bool:
        """Whether the next fetch is a probe (rule 2)."""
        return bool(self.suspect)

    def wanted(
        self, want: Iterable[TopicIdPartition], now: float | None = None
    ) -> Sequence[TopicIdPartition]:
        """``want`` (the leader's assigned partitions) without the blocked ones (rule 3);
        at ``now`` (if given), a block for an unanswered probe that is old enough is made
        suspect again (rule 3: the bound).

        A tuple with none blocked comes back as it is, the same object, so the session
        sees the partitions did not change since the last fetch without comparing them
        (:meth:`.ShareSession.build_fetch`).
        """
        blocked = self.blocked
        if not blocked:
            return want if type(want) is tuple else list(want)
        if now is not None:
            self._expire(now)
        return [tp for tp in want if tp not in blocked]

    def _expire(self, now: float) -> None:
        blocked = self.blocked
        for tp, b in list(blocked.items()):
            if b.reprobe_at is None:  # first seen: the clock starts
                blocked[tp] = replace(b, reprobe_at=now + REPROBE_LOCKS * b.lock)
            elif now >= b.reprobe_at:
                self._reprobe(tp)

    def _reprobe(self, tp: TopicIdPartition) -> None:
        """A block for an unanswered probe ends: the next fetch probes ``tp`` (rule 3)."""
        del self.blocked[tp]
        self.suspect.add(tp)

    def retain(self, assignment: Container[TopicIdPartition]) -> None:
        """The member's assignment changed: suspicions of partitions it no longer holds
        are forgotten. Blocks are kept (rule 3): a member fenced and assigned the same
        partition again (a slow link delays heartbeats too) would otherwise spend two
        more attempts on each record."""
        self.suspect = {tp for tp in self.suspect if tp in assignment}

    def answered(
        self,
        sizes: Mapping[TopicIdPartition, int],
        *,
        elapsed: float,
        bytes_per_second: float | None,
        lock: float,
        asked: int,
        waited: bool = False,
        since: float = 0.0,
    ) -> list[Blocked]:
        """A fetch was answered after ``elapsed`` seconds, ``sizes`` bytes per partition,
        at ``bytes_per_second``; returns the partitions blocked now (rules 1-3).

        :param asked: the fetch's ``MaxBytes``.
        :param since: when the leader's records began to wait undeliverable (:class:`Blocked`).
        :param waited: ``bytes_per_second`` was sampled on a fetch that could wait at
            the broker: how long it waited is unknown, so the rate may be overstated and
            never ends a block.
        """
        new: list[Blocked] = []
        late = elapsed > lock
        floor = asked <= MIN_BYTES
        for tp, size in sizes.items():
            if size <= 0:
                continue
            # Measured: a suspect that brought bytes is decided here (an empty answer,
            # e.g. while the unanswered fetch's locks still hold, decides nothing).
            self.suspect.discard(tp)
            if (
                late
                and size > MIN_BYTES  # a late floor-sized batch: a stall, not a big batch
                and (floor or size > asked)
                and (not bytes_per_second or size / bytes_per_second > lock)
            ):
                self.blocked[tp] = b = Blocked(tp, size, bytes_per_second, lock, since=since)
                new.append(b)
        if late:
            return new
        if not self.blocked:
            return new
        budget = lock * ARRIVAL_SHARE
        # A rate the link surely reached: the bytes over the whole round trip (a wait at
        # the broker only makes it lower).
        total = sum(size for size in sizes.values() if size > 0)
        surely = total / elapsed if total and elapsed > 0 else None
        for tp, b in list(self.blocked.items()):
            if b.batch_bytes is None:
                # An answer in time: the stall that left the probe unanswered healed
                # (rule 3); measure the partition again instead of leaving it for good.
                self._reprobe(tp)
            elif bytes_per_second and not waited and b.batch_bytes / bytes_per_second <= budget:
                del self.blocked[tp]
            elif surely is not None and b.batch_bytes / surely <= budget:
                del self.blocked[tp]
            elif (
                lock > b.lock
                and b.bytes_per_second
                and b.batch_bytes / b.bytes_per_second <= budget
            ):
                # A longer lock reported: the batch fits it at the rate it was blocked at.
                # (Under the lock it was blocked at, it never fits: it needed more.)
                del self.blocked[tp]
        return new

    def timed_out(
        self,
        partitions: Iterable[TopicIdPartition],
        *,
        waited: float,
        bytes_per_second: float | None,
        lock: float,
        since: float = 0.0,
    ) -> list[Blocked]:
        """A fetch of ``partitions`` got no answer within ``waited`` seconds: a probe's
        suspects are blocked, any other fetch's partitions become suspect (rule 2)."""
        if not self.suspect:
            self.suspect.update(partitions)
            return []
        new = [
            Blocked(tp, None, bytes_per_second, lock, waited)
            for tp in sorted(self.suspect, key=str)
        ]
        for b in new:
            self.blocked[b.tp] = b  # a new block: its clock starts afresh
        self.suspect.clear()
        return new

    def stuck(self, now: float) -> float:
        """Seconds the longest-blocked partition's records have waited, if longer than
        its lock; else 0 (the fetch sizer's ``stuck``, kept while a partition is blocked:
        the leader's other answers arrive in time, but these records still wait)."""
        worst = 0.0
        for b in self.blocked.values():
            if now - b.since > b.lock:
                worst = max(worst, now - b.since)
        return worst

    def causes(self) -> list[str]:
        """A sentence per blocked partition (rule 4)."""
        return [b.describe() for b in self.blocked.values()]
