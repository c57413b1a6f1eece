"""The acknowledgement ledger: what we acquired, what the application said, what is in flight.

Rules of this module:

1. State is kept per acquired range ("segment"), one byte per offset in a ``bytearray``;
   bulk changes (implicit accept of a whole fetch, release on close, completing a request)
   are ``bytes.translate`` calls, so no per-record objects are made on the hot path.
2. Every segment is tagged with the :class:`SessionTag` (leader node, session generation)
   it was acquired under. Its acknowledgements may only be sent on that same session: a
   session reset or a leader change kills them (they are reported, never re-sent under a
   new epoch), because the broker's acquisition state does not carry over.
3. At most one request per session is in flight; :meth:`AckLedger.take` refuses a second.
4. Offset states, and the only transitions allowed::

       ACQUIRED --deliver--> DELIVERED --mark--> MARKED(t) --take--> SENT(t) --answer--> DONE
       ACQUIRED ------------mark-------------->  MARKED(t)           SENT(RENEW) --ok--> DELIVERED
       gap offsets start as MARKED(GAP)          (session reset: DELIVERED -> DEAD, rest -> DONE)

   A RENEW does not finish a record: once answered it is DELIVERED again and still needs
   ACCEPT, RELEASE or REJECT. A terminal mark may replace a pending or in-flight RENEW.
5. Renew acknowledgements need ``IsRenewAck=true``, which forbids fetching in the same
   request (Kafka 4.2+); :meth:`AckLedger.take` says whether what it took contains any.
6. No I/O, no clock, no logging. Broker error codes are data (``int``).
7. Implicit mode's accepts of consecutive records of one segment are written as one run
   (:meth:`AckLedger.accept_next`): the ledger keeps the run's bounds and writes its bytes
   at the start of every other method, so what any caller reads is as if each accept
   had been written at once, at a few attribute reads per record instead of a search.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Final

from sharecon.errors import BrokerError, error_for_code
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import AckType, TopicIdPartition

from .acks import AckBatch, Run, batches_from_runs

# A real import, not under TYPE_CHECKING: the compiled build (mypyc) looks up the
# dataclass fields' annotations when the module is imported.
from .session import SessionTag  # noqa: TC001

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping

__all__ = [
    "AckFailure",
    "AckLedger",
    "AckResult",
    "Delivery",
    "MarkResult",
    "Taken",
]

# Offset states (one byte each). 0..4 are MARKED with that AckType, not yet sent.
_ACQUIRED: Final = 0x10  # acquired, still in the consumer's buffer
_DELIVERED: Final = 0x11  # handed to the application, awaiting its acknowledgement
_DEAD: Final = 0x12  # handed out, but the lock is gone (session reset / leader change)
# Acquired and not noted as handed out when the lock went: still in the buffer (the
# buffer forgets it), or the ``async for`` cursor's record in hand (the cursor hands out
# without telling the ledger: its answer, given one by one, is told "lock lost"). A bulk
# answer never reports it: the application may never have seen it.
_DEAD_UNSEEN: Final = 0x13
_SENT: Final = 0x20  # _SENT + t: sent with type t, awaiting the broker's answer
_DONE: Final = 0x40  # finished (answered, failed or superseded)
_RENEW: Final = int(AckType.RENEW)
_SENT_RENEW: Final = _SENT + _RENEW
# States a mark may overwrite: held records, and a renew (pending or in flight).
_MARKABLE: Final = frozenset({_ACQUIRED, _DELIVERED, _RENEW, _SENT_RENEW})

# Where runs of marked states may start (every mark, or every mark but RENEW).
_MARKED_START = re.compile(rb"[\x00-\x04]")
_MARKED_START_NO_RENEW = re.compile(rb"[\x00-\x03]")
_DELIVERED_RUN = re.compile(rb"\x11+")
_NOT_DONE = re.compile(rb"[^\x40]")
_OUTSTANDING = re.compile(rb"[\x00-\x04\x10\x11\x20-\x24]")
# Every state byte _OUTSTANDING does not match: deleting them leaves one byte per
# outstanding offset, counted without a match object (or a list) per offset.
_NOT_OUTSTANDING = bytes(b for b in range(256) if not _OUTSTANDING.match(bytes([b])))
_SENT_START = re.compile(rb"[\x20-\x24]")
# A run of one state byte, for each byte a run is looked for (marks, and marks in
# flight). Runs are found by searching where one may start and matching the run of that
# byte: one pattern with a backreference, ``([\x00-\x04])\1*``, gives the same runs,
# but the regex engine walks a backreference's repeat byte by byte (measured on
# 2026-12-05: a run of 2,200 accepted offsets took 20 to 150 µs, 10 to 70 ns per
# record, against about 1 µs so).
_RUN_OF: Final = {
    b: re.compile(re.escape(bytes([b])) + b"+") for b in (*range(5), *range(0x20, 0x25))
}
# Per-partition gauges: buffered (acquired, not handed out); held (handed out, or answered
# and not sent yet); in flight (answers sent, the broker's reply awaited).
_HELD_STATE = re.compile(rb"[\x00-\x04\x11]")
# Held by the member and not answered to the broker yet: buffered, handed out, or
# answered and not sent (:meth:`AckLedger.rebuilt`).
_UNSENT_HOLD = re.compile(rb"[\x00-\x04\x10\x11]")
#: A pending run's states when there is none (rule 7): never indexed.
_NO_STATES: Final = bytearray()
_ACCEPT_BYTE: Final = bytes((int(AckType.ACCEPT),))
#: No lock deadline known: such a segment never proves a lock was lost early.
_NEVER: Final = float("-inf")
#: :meth:`AckLedger.marked_deadline` with no acknowledgement waiting.
_NO_MARKS: Final = float("inf")
_RENEW_BYTE: Final = bytes((_RENEW,))
_SENT_STATE = re.compile(rb"[\x20-\x24]")


def _runs(states: bytes | bytearray, starts: re.Pattern[bytes], first: int, out: list[Run]) -> None:
    """Append ``(first + i, first + j, state)`` for each longest run ``states[i..j]`` of
    one state byte whose first byte ``starts`` matches (the byte must be in
    :data:`_RUN_OF`)."""
    pos = 0
    end = len(states)
    while True:
        m = starts.search(states, pos)
        if m is None:
            return
        i = m.start()
        state = states[i]
        if i + 1 < end and states[i + 1] == state:
            run = _RUN_OF[state].match(states, i + 1)
            assert run is not None
            pos = run.end()
        else:
            pos = i + 1  # a run of one: no second search
        out.append((first + i, first + pos - 1, state))


def _table(mapping: Mapping[int, int]) -> bytes:
    t = bytearray(range(256))
    for k, v in mapping.items():
        t[k] = v
    return bytes(t)


_TAKE_ALL = _table({t: _SENT + t for t in range(5)})
_TAKE_NO_RENEW = _table({t: _SENT + t for t in range(4)})
_ANSWER_OK = _table({**{_SENT + t: _DONE for t in range(4)}, _SENT_RENEW: _DELIVERED})
_ANSWER_REQUEUE = _table({_SENT + t: t for t in range(5)})
# Buffered records die too: the buffer drops them (forget() then finishes them), but a
# record already handed out by the iterator is still ACQUIRED and its answer must be told
# "lock lost", not "unknown". Apart from records noted as delivered: a bulk answer reports
# only those (settle_dead), since a buffered one was never the application's.
_KILL = _table(
    {
        **dict.fromkeys(range(5), _DONE),
        **{_SENT + t: _DONE for t in range(5)},
        _ACQUIRED: _DEAD_UNSEEN,
        _DELIVERED: _DEAD,
    }
)
_FORGET = _table({_ACQUIRED: _DONE, _DEAD: _DONE, _DEAD_UNSEEN: _DONE})
_SETTLE_DEAD = _table({_DEAD: _DONE})
_DEAD_RUN = re.compile(rb"\x12+")
_TO_DELIVERED = _table({_ACQUIRED: _DELIVERED})
# Superseded by a redelivery: in-flight offsets stay SENT, that request's answer reports them.
# Held records (buffered or handed out) die: an answer to the old delivery must be told
# "lock lost", never land on the new one; the buffer forgets the ones it never handed out.
_SUPERSEDE = _table({**dict.fromkeys(range(5), _DONE), _ACQUIRED: _DEAD_UNSEEN, _DELIVERED: _DEAD})
# Bulk marks, by type: held records (buffered or delivered) take the type, dead ones drop.
# With the buffered ones (close) the unseen dead drop too: the buffer is cleared; without
# them they stay, for the buffer to forget or the cursor's answer to report.
# A delivered record whose renewal is pending or in flight is held too (as for a mark of
# one record, _MARKABLE): skipping it would drop the answer, and the record would stay
# held after its renewal's answer, answered for the application and never for the broker.
_MARK_HELD = [
    _table(
        {
            _ACQUIRED: t,
            _DELIVERED: t,
            _RENEW: t,
            _SENT_RENEW: t,
            _DEAD: _DONE,
            _DEAD_UNSEEN: _DONE,
        }
    )
    for t in range(5)
]
_MARK_DELIVERED = [
    _table({_DELIVERED: t, _RENEW: t, _SENT_RENEW: t, _DEAD: _DONE}) for t in range(5)
]
_MARK_ACQUIRED = [_table({_ACQUIRED: t}) for t in range(5)]


#: Which ``add()`` a record came from: the first and last segment sequence numbers it made.
#: Answers carry it, so an answer to an old delivery never lands on a newer delivery of the
#: same offset (after a lock expired or a session was lost).
Delivery = tuple[int, int]


class MarkResult(IntEnum):
    """What :meth:`AckLedger.mark` did with an application's acknowledgement."""

    #: Recorded; it goes out with the next request to the partition's leader session.
    OK = 0
    #: Not an outstanding offset of ours: never acquired, or already finished.
    UNKNOWN = 1
    #: The record already carries a terminal acknowledgement (pending or in flight).
    ALREADY_ACKNOWLEDGED = 2
    #: The record's lock was lost (session reset or leader change); nothing will be sent.
    DEAD = 3


# The per-record answers (AckLedger.mark, ShareMachine.accept) compare with these: Final,
# the compiled build reads them from a C static instead of looking the class up in the
# module's dict and the member up through EnumType.__getattr__ on every record.
MARK_OK: Final = MarkResult.OK
MARK_UNKNOWN: Final = MarkResult.UNKNOWN
MARK_ALREADY_ACKNOWLEDGED: Final = MarkResult.ALREADY_ACKNOWLEDGED
MARK_DEAD: Final = MarkResult.DEAD
_bisect_right: Final = bisect_right


class AckFailure(Enum):
    """Why acknowledgements were not (successfully) applied by the broker."""

    #: The broker answered the partition with a non-zero error code.
    BROKER_ERROR = "the broker rejected the acknowledgements"
    #: The whole request failed (top-level error code, or the connection broke).
    REQUEST_FAILED = "the request carrying the acknowledgements failed"
    #: The share session was reset; acquisitions made under it cannot be acknowledged.
    SESSION_RESET = "the share session was reset"
    #: The partition's leader changed; the old leader's acquisition locks are gone.
    LEADER_CHANGED = "the partition moved to another leader"
    #: The broker's response did not mention the partition.
    MISSING_FROM_RESPONSE = "the response did not include the partition"
    #: The broker delivered the same offsets again (our lock had expired).
    SUPERSEDED = "the records were delivered again (the acquisition lock expired)"
    #: The leader delivered offsets again whose locks had not expired: it lost its
    #: locks on the partition (it moved away and back, say).
    PARTITION_REBUILT = "the leader lost its locks on the partition (it moved away and back)"
    #: The application answered a record whose lock this consumer had already lost (its
    #: share session was reset, or the partition moved); the broker redelivers it.
    LOCK_LOST = "the record's lock was lost before the answer (session reset or leader change)"


@dataclass(frozen=True, slots=True)
class AckResult:
    """The outcome for one partition's acknowledgements.

    ``error_code`` is 0 on success; otherwise ``reason`` says which kind of failure
    (for :attr:`AckFailure.SESSION_RESET` and similar the code is the one that caused it,
    e.g. 13 NETWORK_EXCEPTION for a broken connection).
    """

    partition: TopicIdPartition
    batches: tuple[AckBatch, ...]
    error_code: int = 0
    reason: AckFailure | None = None

    @property
    def ok(self) -> bool:
        """Whether the broker applied the acknowledgements."""
        return self.error_code == 0 and self.reason is None

    @property
    def count(self) -> int:
        """How many offsets the result covers."""
        return sum(b.count for b in self.batches)

    def error(self) -> BrokerError | None:
        """The typed exception for ``error_code`` (``None`` on success)."""
        if self.ok:
            return None
        msg = f"{self.partition}: {self.reason.value if self.reason else ''}"
        return error_for_code(self.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, msg)


@dataclass(slots=True, eq=False)
class Taken:
    """Acknowledgements taken for one request on one session (see :meth:`AckLedger.take`).

    ``acks`` maps each partition to its wire batches. If ``is_renew`` is true the request
    must set ``IsRenewAck=true`` and so cannot fetch (ShareFetch with zeroed fetch
    parameters, or ShareAcknowledge), and needs ShareFetch/ShareAcknowledge v2+.
    """

    tag: SessionTag
    acks: dict[TopicIdPartition, list[AckBatch]]
    is_renew: bool
    count: int
    _touched: dict[TopicIdPartition, list[_Segment]] = field(default_factory=dict, repr=False)


class _Segment:
    """One acquired range ``first..last`` with a state byte per offset, and the time
    before which its lock cannot have expired at the broker (:meth:`AckLedger.rebuilt`)."""

    __slots__ = ("deadline", "first", "last", "seq", "states", "tag")

    def __init__(
        self, first: int, last: int, tag: SessionTag, seq: int, deadline: float = _NEVER
    ) -> None:
        self.first = first
        self.last = last
        self.tag = tag
        self.seq = seq
        self.deadline = deadline
        self.states = bytearray(b"\x10") * (last - first + 1)

    def done(self) -> bool:
        return _NOT_DONE.search(self.states) is None

    def marked_runs(self, starts: re.Pattern[bytes], out: list[Run]) -> None:
        _runs(self.states, starts, self.first, out)


class _Partition:
    """Segments of one partition, sorted by first offset (overlaps only when superseded)."""

    __slots__ = ("max_len", "overlaps", "segments", "starts")

    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self.starts: list[int] = []
        self.max_len = 0
        # True while segments may overlap (after a redelivery); find() then scans.
        self.overlaps = False

    def insert(self, seg: _Segment) -> None:
        if self.overlapping(seg.first, seg.last):
            self.overlaps = True
        i = bisect_right(self.starts, seg.first)
        self.starts.insert(i, seg.first)
        self.segments.insert(i, seg)
        self.max_len = max(self.max_len, seg.last - seg.first + 1)

    def overlapping(self, first: int, last: int) -> list[_Segment]:
        hi = bisect_right(self.starts, last)
        out = []
        for j in range(hi - 1, -1, -1):
            seg = self.segments[j]
            if seg.first + self.max_len <= first:
                break
            if seg.last >= first:
                out.append(seg)
        return out

    def find(self, offset: int, delivery: Delivery | None = None) -> tuple[_Segment, int] | None:
        """The newest segment holding ``offset`` in a state other than DONE (of that
        ``delivery`` only, if given)."""
        if delivery is not None:
            lo, hi = delivery
            for seg in self.overlapping(offset, offset):
                if lo <= seg.seq <= hi and seg.states[offset - seg.first] != _DONE:
                    return seg, offset - seg.first
            return None
        if not self.overlaps:
            i = bisect_right(self.starts, offset) - 1
            if i < 0:
                return None
            seg = self.segments[i]
            if offset > seg.last or seg.states[offset - seg.first] == _DONE:
                return None
            return seg, offset - seg.first
        best: _Segment | None = None
        for seg in self.overlapping(offset, offset):
            if seg.states[offset - seg.first] != _DONE and (best is None or seg.seq > best.seq):
                best = seg
        return None if best is None else (best, offset - best.first)

    def prune(self) -> None:
        if any(s.done() for s in self.segments):
            self.segments = [s for s in self.segments if not s.done()]
            self.starts = [s.first for s in self.segments]
            self.max_len = max((s.last - s.first + 1 for s in self.segments), default=0)
            self.overlaps = any(
                a.last >= b.first for a, b in zip(self.segments, self.segments[1:], strict=False)
            )


def _supersede(part: _Partition, first: int, last: int, failed: list[Run]) -> None:
    """End our hold on ``first..last`` in every earlier segment of ``part``: unsent answers
    go to ``failed``, held records become dead, answered ones done."""
    for old in part.overlapping(first, last):
        lo, hi = max(first, old.first) - old.first, min(last, old.last) - old.first
        view = old.states[lo : hi + 1]
        _runs(view, _MARKED_START, old.first + lo, failed)
        old.states[lo : hi + 1] = view.translate(_SUPERSEDE)


def _union(runs: list[Run]) -> list[Run]:
    """Sorted runs of one type, overlaps merged: an offset can be dead in several
    deliveries (its lock ended and it came again while the older copy was still buffered),
    and it is reported once."""
    out: list[Run] = []
    for run in runs:
        if out and run[0] <= out[-1][1]:
            if run[1] > out[-1][1]:
                out[-1] = (out[-1][0], run[1], out[-1][2])
        else:
            out.append(run)
    return out


def _superseded(tp: TopicIdPartition, failed: list[Run]) -> list[AckResult]:
    if not failed:
        return []
    failed.sort()
    # The lock is gone: the broker itself would answer INVALID_RECORD_STATE.
    return [
        AckResult(
            tp,
            tuple(batches_from_runs(failed)),
            ErrorCode.INVALID_RECORD_STATE,
            AckFailure.SUPERSEDED,
        )
    ]


class AckLedger:
    """Acknowledgement state for every partition this consumer holds records of.

    Typical use by the consumer::

        ledger.add(tp, tag, acquired_ranges, gaps)      # on a ShareFetch response
        ledger.deliver(tp, first, last)                 # records handed to the app
        ledger.mark(tp, offset, AckType.ACCEPT)         # the app's acknowledgement
        taken = ledger.take(tag)                        # building the next request
        ledger.complete(tag, {tp: code, ...})           # its response
        ledger.invalidate(tag=old_tag, ...)             # the session was reset
    """

    def __init__(self) -> None:
        self._parts: dict[TopicIdPartition, _Partition] = {}
        self._inflight: dict[SessionTag, Taken] = {}
        self._seq = 0
        #: The partition :meth:`mark` found last, by identity: the records of one chunk
        #: share one TopicIdPartition, and its hash is a Python call, once per record.
        #: Forgotten when its entry leaves :attr:`_parts` (:meth:`_drop_empty`).
        self._hot_tp: TopicIdPartition | None = None
        self._hot_part: _Partition | None = None
        #: The segment :meth:`mark` found last, and the segment list of :attr:`_hot_part`
        #: it was found in: implicit mode answers a segment's offsets one after the other,
        #: and no search is needed while that list (replaced whenever a segment leaves
        #: it) is still the partition's and the segments do not overlap.
        self._hot_seg: _Segment | None = None
        self._hot_segs: list[_Segment] | None = None
        #: Implicit accepts not written yet (rule 7): offsets ``_run_from`` up to
        #: ``_run_next - 1`` of one segment (its states, first offset and sequence number)
        #: of ``_run_tp`` are accepted. ``_run_next < 0``: no run.
        self._run_tp: TopicIdPartition | None = None
        self._run_states = _NO_STATES
        self._run_base = 0
        self._run_seq = 0
        self._run_from = 0
        self._run_next = -1

    # -- intake ------------------------------------------------------------------------

    def add(
        self,
        tp: TopicIdPartition,
        tag: SessionTag,
        ranges: Iterable[tuple[int, int]],
        gaps: Iterable[tuple[int, int]] = (),
        deadline: float | None = None,
    ) -> list[AckResult]:
        """Record acquired ranges ``(first, last)`` of ``tp`` fetched on session ``tag``,
        whose locks cannot expire at the broker before ``deadline`` (None: unknown).

        Offsets in ``gaps`` (inside the ranges) are marked GAP at once and go out with the
        next request. Offsets we still held from an earlier delivery are superseded: the
        broker only redelivers a record after our lock on it ended.

        :returns: failures for superseded acknowledgements that had not been answered.
        """
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition()
        failed: list[Run] = []
        new: list[_Segment] = []
        for first, last in ranges:
            if last < first:
                raise ValueError(f"{tp}: acquired range {first}..{last} is inverted")
            _supersede(part, first, last, failed)
            self._seq += 1
            seg = _Segment(first, last, tag, self._seq, _NEVER if deadline is None else deadline)
            part.insert(seg)
            new.append(seg)
        for g_first, g_last in gaps:
            for seg in new:
                lo, hi = max(g_first, seg.first), min(g_last, seg.last)
                if lo <= hi:
                    seg.states[lo - seg.first : hi - seg.first + 1] = bytes(hi - lo + 1)
        part.prune()
        return _superseded(tp, failed)

    def supersede(self, tp: TopicIdPartition, ranges: Iterable[tuple[int, int]]) -> list[AckResult]:
        """The broker acquired ``ranges`` of ``tp`` for us again: the part of :meth:`add`
        that ends what we held of them from earlier deliveries, done on its own.

        For an answer whose records are taken in after the next request was sent
        (pipelining): that request must not carry answers to the earlier deliveries,
        which the broker would apply to the new acquisition (same member) and so accept
        records the application is yet to be handed again.

        :returns: failures for superseded acknowledgements that had not been sent.
        """
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            return []
        failed: list[Run] = []
        for first, last in ranges:
            if last >= first:
                _supersede(part, first, last, failed)
        part.prune()
        return _superseded(tp, failed)

    def rebuilt(
        self, tp: TopicIdPartition, tag: SessionTag, ranges: Iterable[tuple[int, int]], now: float
    ) -> bool:
        """Whether the broker, on session ``tag``, has acquired for us again (by ``now``)
        an offset of ``ranges`` that the session still holds under a lock that cannot
        have expired yet: held, not answered, its deadline after ``now``.

        The broker hands an offset out again only once our lock on it ended. Not by
        expiry (the deadline, which is no later than the broker's, is still ahead),
        nor by an answer (none was sent), nor by the session's end (the same session):
        so the leader lost its locks on ``tp``, as when the partition moved away and
        back between two fetches, and every record the session held of ``tp`` is lost.
        """
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            return False
        for first, last in ranges:
            for seg in part.overlapping(first, last):
                if seg.tag != tag or seg.deadline <= now:
                    continue
                lo, hi = max(first, seg.first) - seg.first, min(last, seg.last) - seg.first
                if _UNSENT_HOLD.search(seg.states, lo, hi + 1):
                    return True
        return False

    def deliver(
        self, tp: TopicIdPartition, first: int, last: int, delivery: Delivery | None = None
    ) -> None:
        """Note that offsets ``first..last`` of ``tp`` (of ``delivery`` only, if given)
        were handed to the application. Another delivery of the same offsets, still
        buffered, stays undelivered: a bulk answer to what was handed out must not reach it."""
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            return
        for seg in part.overlapping(first, last):
            if delivery is not None and not delivery[0] <= seg.seq <= delivery[1]:
                continue
            lo, hi = max(first, seg.first) - seg.first, min(last, seg.last) - seg.first
            seg.states[lo : hi + 1] = seg.states[lo : hi + 1].translate(_TO_DELIVERED)

    # -- the application's acknowledgements ----------------------------------------------

    @property
    def sequence(self) -> int:
        """The last segment sequence number used: ``add()`` makes the ones after it, so
        ``(before + 1, after)`` around an ``add()`` is that :data:`Delivery`."""
        return self._seq

    def mark(
        self,
        tp: TopicIdPartition,
        offset: int,
        ack: AckType,
        delivery: Delivery | None = None,
    ) -> MarkResult:
        """Record the application's acknowledgement of one record (rule 4).

        :param delivery: the ``add()`` the record came from. With it, an answer to an old
            delivery never lands on a newer delivery of the same offset: the broker hands
            an offset out again once our lock on it ended (expired, or a session lost).
        """
        if delivery is None:
            return self.mark_of(tp, offset, ack, 0, -1, False)
        return self.mark_of(tp, offset, ack, delivery[0], delivery[1])

    def mark_of(
        self,
        tp: TopicIdPartition,
        offset: int,
        ack: int,
        lo: int,
        hi: int,
        of_delivery: bool = True,
    ) -> MarkResult:
        """:meth:`mark` for a record of delivery ``(lo, hi)``, given apart (``of_delivery``
        false: of any delivery): implicit mode's once-per-record accept, which so builds
        no tuple."""
        self._settle()
        if tp is self._hot_tp:
            part = self._hot_part
        else:
            part = self._parts.get(tp)
            if part is not None:
                self._hot_tp, self._hot_part = tp, part
                self._hot_seg = self._hot_segs = None
        if part is None:
            return MARK_UNKNOWN
        if part.overlaps:
            found = part.find(offset, (lo, hi) if of_delivery else None)
            if found is None:
                return MARK_UNKNOWN
            seg, i = found
        else:  # the common case, inlined: this runs once per record
            hot = self._hot_seg
            segments = part.segments
            # Without overlaps, a segment of the current list that holds ``offset`` is the
            # one the search would find.
            if hot is not None and self._hot_segs is segments and hot.first <= offset <= hot.last:
                seg = hot
            else:
                j = _bisect_right(part.starts, offset) - 1
                if j < 0:
                    return MARK_UNKNOWN
                seg = segments[j]
                if offset > seg.last:
                    return MARK_UNKNOWN
                self._hot_seg, self._hot_segs = seg, segments
            i = offset - seg.first
            if of_delivery and not lo <= seg.seq <= hi:
                return MARK_UNKNOWN
        states = seg.states
        state = states[i]
        # ACQUIRED first: what implicit mode finds (the cursor marks records not yet noted
        # as delivered).
        if state == _ACQUIRED:
            states[i] = ack
            if of_delivery:
                # The next offsets of this segment may follow as a run (rule 7).
                self._run_tp = tp
                self._run_states = states
                self._run_base = seg.first
                self._run_seq = seg.seq
                self._run_from = self._run_next = offset + 1
            return MARK_OK
        if state in _MARKABLE:
            states[i] = ack
            return MARK_OK
        if state == _DONE:
            return MARK_UNKNOWN
        if state == _DEAD or state == _DEAD_UNSEEN:
            states[i] = _DONE
            if seg.done():
                part.prune()
                self._drop_empty()
            return MARK_DEAD
        return MARK_ALREADY_ACKNOWLEDGED

    def accept_next(self, tp: TopicIdPartition, offset: int, lo: int, hi: int) -> bool:
        """Implicit mode's accept of the record at ``offset`` of ``tp``, delivery
        ``(lo, hi)``, if it extends the pending run (rule 7): the record after the one
        last accepted, of the same segment, still buffered. False: nothing was done, and
        the caller answers it as any other (:meth:`mark_of`)."""
        if offset != self._run_next or tp is not self._run_tp:
            return False
        seq = self._run_seq
        i = offset - self._run_base
        states = self._run_states
        if lo <= seq <= hi and i < len(states) and states[i] == _ACQUIRED:
            self._run_next = offset + 1
            return True
        return False

    def _settle(self) -> None:
        """Write the pending run's accepts (rule 7); every method but
        :meth:`accept_next` starts with this."""
        nxt = self._run_next
        if nxt < 0:
            return
        self._run_next = -1
        n = nxt - self._run_from
        if n > 0:
            i = self._run_from - self._run_base
            self._run_states[i : i + n] = _ACCEPT_BYTE * n
        self._run_states = _NO_STATES
        self._run_tp = None

    def buffered_elsewhere(self, tp: TopicIdPartition, node_id: int) -> tuple[int, ...]:
        """The leaders other than ``node_id`` whose records of ``tp`` are still buffered
        (never handed out: acquired, or dead since)."""
        self._settle()
        part = self._parts.get(tp)
        out: tuple[int, ...] = ()
        if part is None:
            return out
        for seg in part.segments:
            n = seg.tag.node_id
            if n != node_id and n not in out:
                states = seg.states
                if _ACQUIRED in states or _DEAD_UNSEEN in states:
                    out += (n,)
        return out

    def holds(self, tp: TopicIdPartition, offset: int, delivery: Delivery | None = None) -> bool:
        """Whether the record is still ours to answer (held, not answered, lock not lost)."""
        self._settle()
        part = self._parts.get(tp)
        found = part.find(offset, delivery) if part is not None else None
        return found is not None and found[0].states[found[1]] in _MARKABLE

    def mark_delivered(
        self,
        ack: AckType,
        *,
        include_buffered: bool = False,
        partitions: Iterable[TopicIdPartition] | None = None,
    ) -> int:
        """Acknowledge every delivered, unacknowledged record with ``ack`` (implicit mode).

        ACCEPT when the application moves on; RELEASE on close or on an exception. With
        ``include_buffered`` the records not yet handed out are included too (close).
        Dead records are dropped.

        :returns: how many records were marked.
        """
        self._settle()
        t = int(ack)
        table = _MARK_HELD[t] if include_buffered else _MARK_DELIVERED[t]
        n = 0
        tps = list(self._parts) if partitions is None else list(partitions)
        for tp in tps:
            part = self._parts.get(tp)
            if part is None:
                continue
            for seg in part.segments:
                states = seg.states
                n += states.count(_DELIVERED) + states.count(_RENEW) + states.count(_SENT_RENEW)
                if include_buffered:
                    n += seg.states.count(_ACQUIRED)
                seg.states[:] = seg.states.translate(table)
            part.prune()
        self._drop_empty()
        return n

    def unacknowledged(self) -> dict[TopicIdPartition, list[int]]:
        """Delivered records still awaiting the application's acknowledgement (explicit mode).

        Renewed records count: a RENEW does not finish a record.
        """
        self._settle()
        out: dict[TopicIdPartition, list[int]] = {}
        for tp, part in self._parts.items():
            offs: list[int] = []
            for seg in part.segments:
                for m in _DELIVERED_RUN.finditer(seg.states):
                    offs.extend(range(seg.first + m.start(), seg.first + m.end()))
            if offs:
                offs.sort()
                out[tp] = offs
        return out

    def forget(self, tp: TopicIdPartition, delivery: Delivery, first: int, last: int) -> None:
        """Finish, without any answer, the records of ``tp`` in ``first..last`` of one
        ``delivery`` that were never handed out (the buffer dropped them: lock ended or
        lost). Other deliveries of the same offsets are left alone."""
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            return
        lo_seq, hi_seq = delivery
        for seg in part.overlapping(first, last):
            if not lo_seq <= seg.seq <= hi_seq:
                continue
            lo, hi = max(first, seg.first) - seg.first, min(last, seg.last) - seg.first
            seg.states[lo : hi + 1] = seg.states[lo : hi + 1].translate(_FORGET)
        part.prune()
        self._drop_empty()

    def mark_undelivered(
        self, tp: TopicIdPartition, delivery: Delivery, first: int, last: int, ack: AckType
    ) -> int:
        """Acknowledge with ``ack`` the records of ``tp`` in ``first..last`` of one
        ``delivery`` that are still ACQUIRED: the caller knows they were never handed out
        (they wait in the buffer). Other deliveries of the same offsets are left alone.

        :returns: how many records were marked.
        """
        self._settle()
        part = self._parts.get(tp)
        if part is None:
            return 0
        lo_seq, hi_seq = delivery
        table = _MARK_ACQUIRED[int(ack)]
        n = 0
        for seg in part.overlapping(first, last):
            if not lo_seq <= seg.seq <= hi_seq:
                continue
            lo, hi = max(first, seg.first) - seg.first, min(last, seg.last) - seg.first
            view = seg.states[lo : hi + 1]
            n += view.count(_ACQUIRED)
            seg.states[lo : hi + 1] = view.translate(table)
        return n

    def settle_dead(
        self,
        partitions: Iterable[TopicIdPartition] | None = None,
        ack: AckType = AckType.ACCEPT,
    ) -> list[AckResult]:
        """Finish every record noted as handed out whose lock was lost, reporting each as
        failed (:attr:`AckFailure.LOCK_LOST`, with the ``ack`` it was meant to get):
        implicit mode's bulk answers would otherwise drop them without a word. Records
        that died in the buffer are not the application's: the buffer forgets them, and
        they are never reported (a bulk answer did not mean them)."""
        self._settle()
        out: list[AckResult] = []
        tps = list(self._parts) if partitions is None else list(partitions)
        for tp in tps:
            part = self._parts.get(tp)
            if part is None:
                continue
            runs: list[Run] = []
            for seg in part.segments:
                n = len(runs)
                for m in _DEAD_RUN.finditer(seg.states):
                    runs.append((seg.first + m.start(), seg.first + m.end() - 1, int(ack)))
                if len(runs) > n:
                    seg.states[:] = seg.states.translate(_SETTLE_DEAD)
            if runs:
                runs.sort()
                out.append(
                    AckResult(
                        tp,
                        tuple(batches_from_runs(_union(runs))),
                        ErrorCode.INVALID_RECORD_STATE,
                        AckFailure.LOCK_LOST,
                    )
                )
            part.prune()
        self._drop_empty()
        return out

    # -- requests ----------------------------------------------------------------------

    def has_marked(self, tag: SessionTag) -> bool:
        """Whether acknowledgements for session ``tag`` wait to be sent."""
        self._settle()
        return any(
            _MARKED_START.search(seg.states) is not None
            for part in self._parts.values()
            for seg in part.segments
            if seg.tag == tag
        )

    def marked_deadline(self, tag: SessionTag) -> float:
        """The earliest lock deadline among the segments of session ``tag`` holding
        acknowledgements not sent yet: ``inf`` if there are none, ``-inf`` if one of them
        is a RENEW or a lock's deadline is unknown (they may not wait at all)."""
        self._settle()
        earliest = _NO_MARKS
        for part in self._parts.values():
            for seg in part.segments:
                if seg.tag != tag:
                    continue
                states = seg.states
                if _MARKED_START.search(states) is None:
                    continue
                if _RENEW_BYTE in states:
                    return _NEVER
                if seg.deadline < earliest:
                    earliest = seg.deadline
        return earliest

    def outstanding(self, tag: SessionTag) -> int:
        """How many offsets acquired on ``tag`` are not finished (buffered, held, marked, sent)."""
        self._settle()
        n = 0
        for part in self._parts.values():
            for seg in part.segments:
                if seg.tag == tag:
                    n += len(seg.states.translate(None, _NOT_OUTSTANDING))
        return n

    def has_outstanding(self, tag: SessionTag) -> bool:
        """Whether any offset acquired on ``tag`` is not finished (:meth:`outstanding` > 0,
        stopping at the first one: the fetch planner asks before every request)."""
        self._settle()
        return any(
            _OUTSTANDING.search(seg.states) is not None
            for part in self._parts.values()
            for seg in part.segments
            if seg.tag == tag
        )

    def has_outstanding_besides(
        self, tag: SessionTag, skip: Mapping[TopicIdPartition, Container[int]]
    ) -> bool:
        """:meth:`has_outstanding`, not counting the offsets in ``skip`` (per partition):
        whether session ``tag`` holds anything else unfinished."""
        self._settle()
        if not skip:
            return self.has_outstanding(tag)
        for tp, part in self._parts.items():
            offsets = skip.get(tp)
            for seg in part.segments:
                if seg.tag != tag:
                    continue
                states = seg.states
                if offsets is None:
                    if _OUTSTANDING.search(states) is not None:
                        return True
                    continue
                first = seg.first
                for m in _OUTSTANDING.finditer(states):
                    if first + m.start() not in offsets:
                        return True
        return False

    def outstanding_all(self) -> int:
        """How many offsets of any session are not finished: what the member holds."""
        self._settle()
        return sum(
            len(seg.states.translate(None, _NOT_OUTSTANDING))
            for part in self._parts.values()
            for seg in part.segments
        )

    def counts_by_partition(self) -> dict[TopicIdPartition, tuple[int, int, int]]:
        """``(buffered, held, in flight)`` offsets per partition: acquired and not handed
        out; handed out, or answered and not sent yet; answers sent and not confirmed."""
        self._settle()
        out = {}
        for tp, part in self._parts.items():
            buffered = held = sent = 0
            for seg in part.segments:
                states = seg.states
                buffered += states.count(_ACQUIRED)
                held += len(_HELD_STATE.findall(states))
                sent += len(_SENT_STATE.findall(states))
            out[tp] = (buffered, held, sent)
        return out

    def in_flight(self, tag: SessionTag) -> bool:
        """Whether a request with acknowledgements is in flight on session ``tag``."""
        self._settle()
        return tag in self._inflight

    def take(self, tag: SessionTag, *, include_renew: bool = True) -> Taken | None:
        """Take every marked acknowledgement of session ``tag`` for the next request.

        The offsets become SENT until :meth:`complete`, :meth:`complete_all` or
        :meth:`invalidate` answers them. With ``include_renew=False`` RENEW marks stay
        behind (so a normal fetch can carry the terminal ones).

        :returns: ``None`` when there is nothing to send.
        :raises RuntimeError: if a request of this session is already in flight (rule 3).
        """
        self._settle()
        if tag in self._inflight:
            raise RuntimeError(f"share session {tag} already has a request in flight")
        pattern = _MARKED_START if include_renew else _MARKED_START_NO_RENEW
        table = _TAKE_ALL if include_renew else _TAKE_NO_RENEW
        acks: dict[TopicIdPartition, list[AckBatch]] = {}
        touched: dict[TopicIdPartition, list[_Segment]] = {}
        is_renew = False
        count = 0
        for tp, part in self._parts.items():
            runs: list[Run] = []
            segs: list[_Segment] = []
            for seg in part.segments:
                # `is` first: the segments of the session asking hold its very tag, and a
                # dataclass's __eq__ is a Python call.
                if seg.tag is not tag and seg.tag != tag:
                    continue
                n = len(runs)
                seg.marked_runs(pattern, runs)
                if len(runs) > n:
                    seg.states[:] = seg.states.translate(table)
                    segs.append(seg)
            if not runs:
                continue
            runs.sort()
            for f, lst, t in runs:
                count += lst - f + 1
                if t == _RENEW:
                    is_renew = True
            acks[tp] = batches_from_runs(runs)
            touched[tp] = segs
        if not acks:
            return None
        taken = Taken(tag, acks, is_renew, count, touched)
        self._inflight[tag] = taken
        return taken

    def complete(
        self,
        tag: SessionTag,
        codes: Mapping[TopicIdPartition, int],
        *,
        requeue: Container[int] = (),
    ) -> list[AckResult]:
        """Apply the response to the request in flight on ``tag``.

        :param codes: the per-partition acknowledgement error code (``AcknowledgeErrorCode``
            in ShareFetch, ``ErrorCode`` in ShareAcknowledge). A partition we sent acks for
            but the response omits fails with INVALID_RECORD_STATE (as the reference client).
        :param requeue: codes after which the acknowledgements go back to MARKED, to be
            sent again on this same session (for example retriable codes in commit-sync).
        :returns: one result per partition, successes included. Nothing if no request of
            ``tag`` is in flight (a late answer after a reset).
        """
        self._settle()
        taken = self._inflight.pop(tag, None)
        if taken is None:
            return []
        out: list[AckResult] = []
        for tp, batches in taken.acks.items():
            code = codes.get(tp)
            reason: AckFailure | None = None
            if code is None:
                code, reason = ErrorCode.INVALID_RECORD_STATE, AckFailure.MISSING_FROM_RESPONSE
            elif code != 0:
                reason = AckFailure.BROKER_ERROR
            if code != 0 and code in requeue:
                table = _ANSWER_REQUEUE
            else:
                # A failed renew leaves the record held: the application must still finish it.
                table = _ANSWER_OK
                out.append(AckResult(tp, tuple(batches), code, reason))
            self._answer(tp, taken._touched.get(tp, ()), table)
        self._drop_empty()
        return out

    def complete_all(self, tag: SessionTag, error_code: int) -> list[AckResult]:
        """Fail the whole request in flight on ``tag`` (a top-level error, session kept)."""
        self._settle()
        taken = self._inflight.pop(tag, None)
        if taken is None:
            return []
        out = []
        for tp, batches in taken.acks.items():
            out.append(AckResult(tp, tuple(batches), error_code, AckFailure.REQUEST_FAILED))
            self._answer(tp, taken._touched.get(tp, ()), _ANSWER_OK)
        self._drop_empty()
        return out

    def invalidate(
        self,
        reason: AckFailure,
        error_code: int,
        *,
        tag: SessionTag | None = None,
        node_id: int | None = None,
        partition: TopicIdPartition | None = None,
    ) -> list[AckResult]:
        """Kill everything acquired under matching segments (rule 2).

        Matching means: acquired on session ``tag`` / on node ``node_id`` / of
        ``partition`` (each given criterion must hold). Use ``tag=`` after a session
        reset or transport error, ``partition=`` (with ``node_id=`` of the old leader)
        after a leader change.

        Marked and in-flight acknowledgements are failed and returned (never re-sent);
        buffered records are dropped; delivered records become dead (:meth:`mark` then
        answers :attr:`MarkResult.DEAD`).
        """
        self._settle()
        if tag is None and node_id is None and partition is None:
            raise ValueError("invalidate() needs tag=, node_id= or partition=")
        out: list[AckResult] = []
        tps = [partition] if partition is not None else list(self._parts)
        for tp in tps:
            part = self._parts.get(tp)
            if part is None:
                continue
            runs: list[Run] = []
            for seg in part.segments:
                if (tag is not None and seg.tag != tag) or (
                    node_id is not None and seg.tag.node_id != node_id
                ):
                    continue
                seg.marked_runs(_MARKED_START, runs)
                sent: list[Run] = []
                _runs(seg.states, _SENT_START, seg.first, sent)
                runs.extend((f, lst, t - _SENT) for f, lst, t in sent)
                seg.states[:] = seg.states.translate(_KILL)
            for itag, taken in self._inflight.items():
                if (tag is None or itag == tag) and (node_id is None or itag.node_id == node_id):
                    taken.acks.pop(tp, None)
                    taken._touched.pop(tp, None)
            part.prune()
            if runs:
                runs.sort()
                out.append(AckResult(tp, tuple(batches_from_runs(runs)), error_code, reason))
        for itag in [t for t, tk in self._inflight.items() if not tk.acks]:
            del self._inflight[itag]
        self._drop_empty()
        return out

    # -- internals ---------------------------------------------------------------------

    def _answer(self, tp: TopicIdPartition, segs: Iterable[_Segment], table: bytes) -> None:
        for seg in segs:
            seg.states[:] = seg.states.translate(table)
        part = self._parts.get(tp)
        if part is not None:
            part.prune()

    def _drop_empty(self) -> None:
        empty = [tp for tp, p in self._parts.items() if not p.segments]
        for tp in empty:
            del self._parts[tp]
        if empty:
            self._hot_tp = self._hot_part = None
            self._hot_seg = self._hot_segs = None

    def partitions(self) -> list[TopicIdPartition]:
        """Partitions with anything outstanding."""
        self._settle()
        return list(self._parts)
