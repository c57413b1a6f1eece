"""One share partition (a share group's view of one topic partition), as Kafka keeps it.

Kafka's ``SharePartition`` tracks in-flight records in batches and, once a batch is split,
per offset. The model keeps one :class:`OffsetState` per offset, which gives the same
observable answers: which offsets a fetch acquires with which delivery counts, and which
acknowledgements fail. Time is passed in (seconds, any origin); nothing here reads a clock.

Two copies of the state exist, as in Kafka: the in-memory one (``states``) and the one the
share coordinator persisted (``persisted``). Acknowledgements, releases and lock expiries
are persisted; **acquisitions are not**. A share partition that is dropped from the
leader's cache (leader change, group empty, fencing) and built again reads the persisted
copy: a record that was only acquired comes back with the delivery count it had before
that acquisition, so the next fetch hands it out with the *same* count again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "AckType",
    "OffsetState",
    "PartitionLog",
    "RecordState",
    "SharePartitionModel",
]


class RecordState(IntEnum):
    """A record's state in a share partition (the persister's numbers)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """Acknowledgement types on the wire."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class OffsetState:
    """One record's share state."""

    state: RecordState = RecordState.AVAILABLE
    count: int = 0
    member: str = ""
    deadline: float = 0.0  #: lock end while ACQUIRED
    #: when its last state change is persisted: until then a fetch cannot take it
    ready_at: float = 0.0


@dataclass(slots=True)
class PartitionLog:
    """A topic partition's log as the model needs it: its batches' offset ranges, and the
    record values (``None`` for a record produced without one)."""

    batches: list[tuple[int, int]] = field(default_factory=list)
    values: dict[int, bytes] = field(default_factory=dict)
    start: int = 0  #: log start offset
    #: each batch's encoding by its (first, last) offsets (until :meth:`compact` changes it)
    encoded: dict[tuple[int, int], bytes] = field(default_factory=dict, repr=False, compare=False)
    #: offsets inside batches whose records compaction removed: the batch keeps its offset
    #: range, so they are acquired with it and a consumer acknowledges them as gaps
    holes: set[int] = field(default_factory=set)

    @property
    def end(self) -> int:
        """The log end offset (next offset to be written)."""
        return self.batches[-1][1] + 1 if self.batches else self.start

    def append(self, n: int, values: list[bytes] | None = None) -> tuple[int, int]:
        """Append one batch of ``n`` records (with ``values`` if given: ``n`` of them);
        return its first and last offsets."""
        if n < 1:
            raise ValueError(f"a batch has at least one record, not {n}")
        if values is not None and len(values) != n:
            raise ValueError(f"{len(values)} values for a batch of {n} records")
        first = self.end
        self.batches.append((first, first + n - 1))
        if values is not None:
            self.values.update(zip(range(first, first + n), values, strict=True))
        return first, first + n - 1

    def compact(self, offsets: set[int]) -> None:
        """Remove the records at ``offsets`` as the log cleaner does: each stays in its
        batch's offset range as a hole (:attr:`holes`), except that a batch left with no
        record is removed whole (its offsets then lie in no batch, a gap in the log).

        :raises ValueError: an offset outside every batch, or the log's last batch
            emptied (the cleaner keeps a producer's last batch, and the log's end).
        """
        kept: list[tuple[int, int]] = []
        for first, last in self.batches:
            inside = {o for o in offsets if first <= o <= last}
            offsets = offsets - inside
            if not inside:
                kept.append((first, last))
                continue
            here = inside | {o for o in self.holes if first <= o <= last}
            self.encoded.pop((first, last), None)
            if len(here) <= last - first:
                self.holes |= inside
                kept.append((first, last))
                continue
            if (first, last) == self.batches[-1]:
                raise ValueError(f"compaction would remove the log's last batch {first}-{last}")
            self.holes -= here
            for o in range(first, last + 1):
                self.values.pop(o, None)
        if offsets:
            raise ValueError(f"offsets {sorted(offsets)} are in no batch")
        self.batches = kept

    def batch_of(self, offset: int) -> tuple[int, int] | None:
        """The batch holding ``offset``, if any."""
        for first, last in self.batches:
            if first <= offset <= last:
                return first, last
        return None


@dataclass(slots=True)
class GroupSettings:
    """The group configs the share partition reads (Kafka's names in the comments)."""

    lock_ms: int = 30000  # share.record.lock.duration.ms
    delivery_limit: int = 5  # share.delivery.count.limit
    max_locks: int = 2000  # share.partition.max.record.locks
    earliest: bool = False  # share.auto.offset.reset=earliest
    renew_enabled: bool = True  # share.renew.acknowledge.enable (4.3+)


@dataclass(slots=True)
class SharePartitionModel:
    """The share state of one (group, topic partition)."""

    log: PartitionLog
    settings: GroupSettings
    throttle_last_delivery: bool = False
    start: int = 0  #: share-partition start offset (SPSO)
    states: dict[int, OffsetState] = field(default_factory=dict)
    #: what the share coordinator holds: start offset and (state, count) per offset
    persisted_start: int = 0
    persisted: dict[int, tuple[RecordState, int]] = field(default_factory=dict)
    #: the start offset the last state write carried: Kafka writes the start offset as it
    #: was before that write's own acknowledgements moved it, so an admin describing the
    #: group's offsets sees the start one write behind (DescribeShareGroupOffsets)
    written_start: int = 0
    #: how each offset the start offset moved past ended (the broker's ``finished``)
    finished: dict[int, RecordState] = field(default_factory=dict)
    #: the bytes the last :meth:`acquire` read, when batch sizes were given
    read_bytes: int = 0

    @classmethod
    def create(
        cls,
        log: PartitionLog,
        settings: GroupSettings,
        *,
        throttle_last_delivery: bool,
        persisted: tuple[int, dict[int, tuple[RecordState, int]]] | None,
    ) -> SharePartitionModel:
        """Initialise from the persisted state, or from ``share.auto.offset.reset`` when
        nothing was persisted yet (the group's first fetch of this partition)."""
        sp = cls(log, settings, throttle_last_delivery)
        if persisted is None:
            sp.start = log.start if settings.earliest else log.end
            sp.persisted_start = sp.start
            sp.written_start = sp.start
        else:
            sp.persisted_start, saved = persisted
            sp.start = sp.persisted_start
            sp.written_start = sp.start
            sp.persisted = dict(saved)
            for offset, (state, count) in saved.items():
                if offset >= sp.start:
                    sp.states[offset] = OffsetState(state, count)
        return sp

    def snapshot(self) -> tuple[int, dict[int, tuple[RecordState, int]]]:
        """The persisted state, as a new leader would read it."""
        return self.persisted_start, dict(self.persisted)

    # -- queries -----------------------------------------------------------------------------

    def state_of(self, offset: int) -> OffsetState:
        """The in-memory state of ``offset`` (a fresh AVAILABLE one if never touched)."""
        if offset < self.start:
            return OffsetState(RecordState.ARCHIVED)
        return self.states.get(offset) or OffsetState()

    def acquired_by(self, member: str) -> list[int]:
        """Offsets ``member`` holds."""
        return sorted(
            o
            for o, s in self.states.items()
            if s.state is RecordState.ACQUIRED and s.member == member
        )

    def next_deadline(self) -> float | None:
        """The earliest lock end, if any record is acquired."""
        ends = [s.deadline for s in self.states.values() if s.state is RecordState.ACQUIRED]
        return min(ends) if ends else None

    def next_change(self, now: float) -> float | None:
        """The first time after ``now`` at which this share partition changes by itself:
        a lock ends, or a released record is persisted (becomes acquirable)."""
        first: float | None = None
        for s in self.states.values():
            if s.state is RecordState.ACQUIRED:
                t = s.deadline
            elif s.state is RecordState.AVAILABLE and s.ready_at > now:
                t = s.ready_at
            else:
                continue
            if first is None or t < first:
                first = t
        return first

    # -- time --------------------------------------------------------------------------------

    def expire(self, now: float) -> list[int]:
        """End every lock due at ``now``: such records go back (or are archived at the
        delivery limit). Returns the offsets released."""
        due = [
            o
            for o, s in self.states.items()
            if s.state is RecordState.ACQUIRED and s.deadline <= now
        ]
        for o in due:
            self._release_one(o, decrement=False)
        self._persist(due)
        return due

    # -- acquisition -------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        max_records: int,
        *,
        record_limit: bool,
        now: float,
        max_bytes: int | None = None,
        batch_bytes: Callable[[int], int] | None = None,
        min_one: bool = True,
    ) -> list[tuple[int, int]]:
        """Acquire records for ``member``; return ``(offset, delivery count)`` pairs.

        Batch mode (``record_limit`` false) treats ``max_records`` as a soft limit: the log
        batch that reaches it is acquired whole. Record-limit mode stops exactly there.
        With ``batch_bytes`` (a batch's size by its first offset), the batches read stop
        before the one that would pass ``max_bytes``, the first one excepted if
        ``min_one`` (Kafka's read returns at least one whole batch); what was read is
        left in :attr:`read_bytes`.
        """
        read = self.read_bytes = 0
        self.expire(now)
        out: list[tuple[int, int]] = []
        if max_records <= 0:
            return out
        # In-flight cap: offsets from the start offset on may not exceed max_locks.
        limit_end = self.start + self.settings.max_locks - 1
        was_empty = not self.states
        #: Kafka's end offset: past it a read acquires new ranges
        cached_end = max(self.states) if self.states else self.start - 1
        after = self.start  # the first offset past the batches looked at so far
        for first, last in self.log.batches:
            if last < self.start:
                continue
            lo = max(first, self.start)
            hi = min(last, limit_end)
            if lo > hi:
                break
            candidates = [o for o in range(lo, hi + 1) if self._acquirable(o, now)]
            if first > after:
                # Offsets of a batch the log cleaner removed whole, before this batch.
                gap = self._gap(after, min(first - 1, limit_end), cached_end, bool(out), now)
                if gap and not record_limit and len(out) + len(gap) >= max_records:
                    # The soft limit falls in the gap: Kafka ends the range right there
                    # (the limit's offset lies in no batch to round it up to).
                    candidates = gap[: max_records - len(out)]
                elif gap:
                    candidates = gap + candidates
            after = last + 1
            if not candidates:
                continue
            if batch_bytes is not None and max_bytes is not None:
                size = batch_bytes(first)
                if (out or not min_one) and read + size > max_bytes:
                    break
                read += size
                self.read_bytes = read
            if self.throttle_last_delivery and (
                max(self.state_of(o).count for o in candidates) >= self._throttle_from
            ):
                if out:
                    break  # what was acquired so far goes out; these records go on their own
                self._acquire_throttled(
                    member, candidates, last - first + 1, max_records, record_limit, now, out
                )
                break
            if record_limit:
                candidates = candidates[: max_records - len(out)]
            for o in candidates:
                out.append((o, self._take(o, member, now)))
            if len(out) >= max_records:
                break
        if was_empty and out and out[0][0] > self.start:
            # A new range acquired into an empty cache starts the window (Kafka sets its
            # start offset there): what lay before it was a removed batch's gap.
            self.start = out[0][0]
        return out

    def _gap(self, lo: int, hi: int, cached_end: int, reading: bool, now: float) -> list[int]:
        """What a read does with ``lo``-``hi``, offsets in no batch (the cleaner removed
        theirs whole): the ones it acquires, before the next batch's records.

        A read that began before them (``reading``) acquires them as Kafka does: new
        ones (past ``cached_end``) in the new range it takes up to its last batch, and
        cached ones that are available, like any other. A read that begins in them
        reads from the batch after: new ones are skipped (never acquired), and
        available cached ones are archived (Kafka 4.1+ archives what a fetch offset
        found stale: ``maybeArchiveStaleBatches``)."""
        out: list[int] = []
        stale: list[int] = []
        for o in range(lo, hi + 1):
            st = self.states.get(o)
            if st is None:
                if reading and o > cached_end:
                    out.append(o)
            elif st.state is RecordState.AVAILABLE and st.ready_at <= now:
                (out if reading else stale).append(o)
        if stale:
            for o in stale:
                self.states[o].state = RecordState.ARCHIVED
            self._persist(stale)
        return out

    def _acquirable(self, offset: int, now: float) -> bool:
        st = self.state_of(offset)
        return st.state is RecordState.AVAILABLE and st.ready_at <= now

    def next_ready(self, now: float, until: float) -> float | None:
        """The first time in ``(now, until]`` at which a record being persisted becomes
        acquirable, if any (a waiting fetch on 4.2+ is completed then)."""
        times = [
            s.ready_at
            for s in self.states.values()
            if s.state is RecordState.AVAILABLE and now < s.ready_at <= until
        ]
        return min(times) if times else None

    @property
    def _throttle_from(self) -> int:
        # Kafka 4.2+: records delivered at least half the limit times (and at least twice)
        # are handed out in ever smaller groups, the last attempt alone.
        return max(2, -(-self.settings.delivery_limit // 2))

    def _take(self, offset: int, member: str, now: float) -> int:
        st = self.states.setdefault(offset, OffsetState())
        st.state = RecordState.ACQUIRED
        st.count += 1
        st.member = member
        st.deadline = now + self.settings.lock_ms / 1000.0
        return st.count

    def _acquire_throttled(
        self,
        member: str,
        candidates: list[int],
        batch_len: int,
        max_records: int,
        record_limit: bool,
        now: float,
        out: list[tuple[int, int]],
    ) -> None:
        limit = self.settings.delivery_limit
        cap: int | None = None
        taken = 0
        for o in candidates:
            count = self.state_of(o).count
            if limit > 2 and count == limit - 1 and taken > 0:
                break  # the last attempt goes alone, in the next fetch
            if count >= self._throttle_from and cap is None:
                # halved for each attempt past the threshold
                cap = max(1, batch_len >> (count - self._throttle_from + 1))
            out.append((o, self._take(o, member, now)))
            taken += 1
            if limit > 2 and count + 1 == limit:
                break
            if record_limit and len(out) >= max_records:
                break
            if cap is not None and taken >= cap:
                break

    # -- acknowledgement ---------------------------------------------------------------------

    def acknowledge(
        self,
        member: str,
        batches: list[tuple[int, int, tuple[int, ...]]],
        now: float,
        *,
        settle: float = 0.0,
    ) -> ErrorCode:
        """Apply ``(first, last, types)`` batches for ``member`` all or nothing.

        ``settle``: seconds until the changes are persisted; a record released here can
        be acquired again only after that (a ShareAcknowledge answers once they are: 0)."""
        self.expire(now)
        plan: list[tuple[int, AckType]] = []
        for first, last, types in batches:
            if last < first or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST
            if last < self.start:
                continue  # already finished and gone from the window: nothing to do
            if not self.states:
                return ErrorCode.INVALID_RECORD_STATE  # nothing in flight at all
            cached_end = max(self.states)
            if last > cached_end:
                return ErrorCode.INVALID_REQUEST  # past what was ever acquired
            for i, o in enumerate(range(first, last + 1)):
                if o < self.start:
                    continue
                raw = types[0] if len(types) == 1 else types[i]
                try:
                    kind = AckType(raw)
                except ValueError:
                    return ErrorCode.INVALID_REQUEST
                if kind is AckType.GAP:
                    plan.append((o, kind))
                    continue
                st = self.states.get(o)
                if (
                    o < self.start
                    or st is None
                    or st.state is not RecordState.ACQUIRED
                    or st.member != member
                ):
                    return ErrorCode.INVALID_RECORD_STATE
                if kind is AckType.RENEW and not self.settings.renew_enabled:
                    return ErrorCode.INVALID_RECORD_STATE
                plan.append((o, kind))
        changed: list[int] = []
        for o, kind in plan:
            st = self.states.setdefault(o, OffsetState())
            if kind is AckType.RENEW:
                st.deadline = now + self.settings.lock_ms / 1000.0
                continue
            if kind is AckType.ACCEPT:
                st.state = RecordState.ACKNOWLEDGED
            elif kind in (AckType.REJECT, AckType.GAP):
                st.state = RecordState.ARCHIVED
            else:
                self._release_one(o, decrement=False)
            st.member = ""
            st.ready_at = now + settle
            changed.append(o)
        self._persist(changed)
        return ErrorCode.NONE

    def releasable(
        self, member: str, batches: list[tuple[int, int, tuple[int, ...]]]
    ) -> list[tuple[int, int]]:
        """The ``(offset, delivery count)`` of the records ``member`` holds that
        ``batches`` release (if :meth:`acknowledge` takes them: it is all or nothing)."""
        out = []
        for first, last, types in batches:
            for i, o in enumerate(range(first, last + 1)):
                raw = types[0] if len(types) == 1 else types[i]
                st = self.states.get(o)
                if (
                    raw == AckType.RELEASE
                    and st is not None
                    and st.state is RecordState.ACQUIRED
                    and st.member == member
                ):
                    out.append((o, st.count))
        return out

    def release_member(
        self, member: str, *, decrement: bool, now: float = 0.0, settle: float = 0.0
    ) -> list[int]:
        """Release what ``member`` holds (its share session closed)."""
        held = self.acquired_by(member)
        for o in held:
            self._release_one(o, decrement=decrement)
            self.states[o].ready_at = now + settle
        self._persist(held)
        return held

    # -- internals ---------------------------------------------------------------------------

    def _release_one(self, offset: int, *, decrement: bool) -> None:
        st = self.states[offset]
        st.member = ""
        if decrement:
            # Kafka 4.1: the acquisition is taken back, and the count with it (no archiving).
            st.count = max(st.count - 1, 0)
            st.state = RecordState.AVAILABLE
        elif st.count >= self.settings.delivery_limit:
            st.state = RecordState.ARCHIVED
        else:
            st.state = RecordState.AVAILABLE

    def _persist(self, offsets: list[int]) -> None:
        if offsets:
            self.written_start = self.start
        for o in offsets:
            st = self.states[o]
            self.persisted[o] = (st.state, st.count)
        self._advance_start()

    def _advance_start(self) -> None:
        # The start offset moves over every finished record at the front of the window.
        while True:
            st = self.states.get(self.start)
            if st is None and self.states:
                st = self._past_gap()
            if st is None or st.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self.finished[self.start] = st.state
            del self.states[self.start]
            self.persisted.pop(self.start, None)
            self.start += 1
        self.persisted_start = self.start

    def _past_gap(self) -> OffsetState | None:
        """At a start offset in no batch and never acquired (a removed batch a read
        skipped): the state of the next offset the window holds, the start moved to it,
        if that one is finished (Kafka moves its start offset over holes in its cache,
        never onto an in-flight record); else None."""
        nxt = min(self.states)
        st = self.states[nxt]
        if nxt <= self.start or st.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            return None
        if any(f < nxt and e >= self.start for f, e in self.log.batches):
            return None  # records lie between: they are not done
        self.start = nxt
        return st
