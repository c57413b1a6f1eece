"""Strict record limits (KIP-1206): a member never holds more than it may, nor more than it
can handle before the records' locks end.

In the broker's ``record_limit`` acquire mode (ShareFetch v2, Kafka 4.2+) a ShareFetch
acquires at most its ``MaxRecords`` records, instead of whole batches. That bounds one
request; the member as a whole stays within its limit only if no request asks for more
than what is left: records still held (buffered, handed out, or answered but not yet
confirmed) and records that requests already in flight, to any leader, may bring. This
module keeps that count; the fetchers ask it before each fetch.

Rules of this module:

1. The limit is the configured ``max_records`` (the *ceiling*), cut to what the member can
   handle within :data:`HOLD_SHARE` of the lock at its measured handling rate
   (:func:`hold_limit`): a record acquired beyond that would wait in the buffer until its
   lock ends, spending one of its delivery attempts unseen, while another member could
   have handled it. Until the rate is measured the member holds at most
   :data:`INITIAL_HOLD` records, so a member that starts first does not take a backlog
   from members starting a moment later. Never below the records the application handles
   at once by design (``process(concurrency=N)``: N, within the ceiling): its handlers
   may each wait for the others' records, and a record a handler holds waits in no
   buffer.
2. The handling rate (:class:`HandlingRate`) is measured per leader from the answers each
   request carries over the time since that leader's previous request: answers made in
   an interval are at most what the application can do in it, so a sample is never too
   high. While records waited for the application the whole interval (a backlog) the
   sample is its rate and is smoothed in; without one it is only a lower bound and may
   raise the estimate, never lower it. A sample covers at least :data:`WINDOW` seconds
   (the answers of shorter intervals are gathered), so a burst of answers made earlier (a
   batch of delayed releases) cannot pass for a rate. The member's rate is the sum over
   its leaders, so a leader that no longer leads any assigned partition (leadership
   moved, the partition was revoked) is forgotten (:meth:`HandlingRate.forget`): its last
   rate would otherwise be counted on top of the new leader's for good, overstating the
   rate, raising the hold limit, and leaving records to expire in the buffer.
3. No I/O, no clock: time is the caller's ``now``, the lock the fetch sizers' (the
   broker's word).
4. Turns between leaders (kept by :meth:`.ShareMachine.next_turn`): a leader the budget
   refused waits for it, and the other leaders yield it their turn; a leader that yields
   waits for the budget too if its last fetch brought records. The budget coming free
   (a reservation settled, records finished) wakes the waiting leaders at once, not at
   their next idle wake-up. A fetch granted while another leader waits does not wait at
   the broker (MaxWaitMs 0): a leader with nothing to give hands the budget back at once
   instead of holding it for a long poll while records wait elsewhere. A leader whose
   last fetch came back empty does not wait for the budget when it yields (it asks again
   at its next wake-up), so leaders that all have nothing take turns at long polls
   instead of spinning on no-wait fetches. Records waiting out a delay (parked) take no
   place in the budget: they need no handling.
"""

from __future__ import annotations

__all__ = ["HOLD_SHARE", "INITIAL_HOLD", "WINDOW", "HandlingRate", "RecordBudget", "hold_limit"]

#: The part of the lock the records a member holds must be handled within (rule 1); the
#: rest is the margin for a rate that drops (a slower record, a busier machine).
HOLD_SHARE = 0.5
#: Records a member may hold before its handling rate is measured (rule 1).
INITIAL_HOLD = 16


def hold_limit(ceiling: int, rate: float | None, lock: float) -> int:
    """The most records a member may hold (rule 1): ``ceiling`` cut to ``rate`` records per
    second for ``HOLD_SHARE`` of ``lock`` seconds; :data:`INITIAL_HOLD` while ``rate`` is
    ``None`` (not measured). Never below 1."""
    if rate is None:
        return max(1, min(ceiling, INITIAL_HOLD))
    return max(1, min(ceiling, int(rate * lock * HOLD_SHARE)))


# Samples are smoothed: new = old + (sample - old) * _ALPHA.
_ALPHA = 0.5
#: The shortest time a rate sample covers, in seconds (rule 2).
WINDOW = 0.5


class HandlingRate:
    """The application's answering rate, records per second, over its leaders (rule 2)."""

    __slots__ = ("_acc", "_busy", "_per_node", "_start")

    def __init__(self) -> None:
        #: Per leader: when the current window began, the answers in it, and whether
        #: records waited for the application all through it.
        self._start: dict[int, float] = {}
        self._acc: dict[int, int] = {}
        self._busy: dict[int, bool] = {}
        self._per_node: dict[int, float] = {}

    def sent(self, node_id: int, now: float, answered: int, *, backlog: bool) -> None:
        """A request to ``node_id`` went at ``now`` carrying ``answered`` answers;
        ``backlog``: records waited for the application since the previous one."""
        start = self._start.get(node_id)
        if start is None or now < start:
            self._start[node_id], self._acc[node_id], self._busy[node_id] = now, 0, True
            return
        acc = self._acc[node_id] + answered
        busy = self._busy[node_id] and backlog
        if now - start < WINDOW:
            # Too short to tell: answers made earlier (delayed releases) can come in a
            # burst; gather them with the next requests' until the window is long enough.
            self._acc[node_id], self._busy[node_id] = acc, busy
            return
        self._start[node_id], self._acc[node_id], self._busy[node_id] = now, 0, True
        if acc <= 0 and not busy:
            return
        sample = acc / (now - start)
        old = self._per_node.get(node_id)
        if old is None:
            if acc > 0:
                self._per_node[node_id] = sample
        elif busy or sample > old:
            self._per_node[node_id] = old + (sample - old) * _ALPHA

    def forget(self, node_id: int) -> None:
        """``node_id`` leads no assigned partition any more: its rate no longer counts
        (rule 2); if it leads one again, it is measured afresh."""
        if node_id in self._start:
            del self._start[node_id], self._acc[node_id], self._busy[node_id]
        self._per_node.pop(node_id, None)

    def rate(self) -> float | None:
        """Records per second over every leader; ``None`` until measured."""
        return sum(self._per_node.values()) if self._per_node else None


class RecordBudget:
    """How many more records this member may acquire, shared by its fetch loops.

    :param limit: the most records the member may hold at once (``max_records``): the
        ceiling; :meth:`fit` cuts :attr:`limit` below it (rule 1).
    """

    __slots__ = ("ceiling", "limit", "reserved")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        #: The configured bound (``max_records``).
        self.ceiling = limit
        #: The bound now (at most :attr:`ceiling`).
        self.limit = limit
        #: Records that fetches in flight may still acquire.
        self.reserved = 0

    def fit(self, rate: float | None, lock: float, floor: int = 1) -> int:
        """Set :attr:`limit` to what ``rate`` records/s handle within the ``lock``, but no
        less than ``floor`` records the application handles at once by design, within
        the ceiling (rule 1); returns it."""
        self.limit = max(min(self.ceiling, floor), hold_limit(self.ceiling, rate, lock))
        return self.limit

    def grant(self, held: int) -> int:
        """Reserve what a fetch may acquire now, given ``held`` records not yet finished;
        0 means this fetch must not ask for records at all."""
        n = self.limit - held - self.reserved
        if n <= 0:
            return 0
        self.reserved += n
        return n

    def settle(self, granted: int) -> None:
        """The fetch that was granted ``granted`` was answered (its records are now held
        and counted by the caller), failed, or was never sent."""
        self.reserved = max(0, self.reserved - granted)
