"""How much one leader's next ShareFetch may ask for: what can arrive and be handled
before the records' acquisition locks end.

A share fetch's records are locked at the broker when it acquires them, before a byte is
sent; over a slow link a fetch sized by ``fetch_max_bytes`` alone can take longer to
arrive than the lock lasts, so every record of it comes back to the broker unseen and
burns a delivery attempt (after ``share.delivery.count.limit`` of those it is archived).

Rules of this module:

1. Per leader, one :class:`FetchSizer`. It measures what actually happens: the time from
   sending a fetch to receiving its answer and the answer's size (bytes per second from
   that leader), and the rate at which the application answers records. The leader's
   rate (:attr:`FetchSizer.bytes_per_second`, which warnings and blocked partitions
   name) weighs each answer by its transfer time: bytes over seconds, each sum halved
   at every answer. A small answer in a millisecond says more of the round trip than of
   the link, and averaged as a rate of its own it would stand for gigabytes per second
   long after the link slowed (whole-client simulation, seed 1080 on 4.1).
2. A fetch's bytes must arrive within :data:`ARRIVAL_SHARE` of the lock, and the records
   of two fetches (the one being handled and the buffered one behind it) be handled within
   :data:`HANDLE_SHARE` of it; the rest is the safety margin. With one request in flight
   per session, the answers to a fetch's records ride the request after the next one, so
   they reach the broker only after the next fetch's transfer too: two transfers fit in
   the lock. The lock duration is the one
   the broker reports in each answer (``AcquisitionLockTimeoutMs``), Kafka's default 30 s
   until one is known.
3. It starts at :data:`INITIAL_BYTES` (1.6 s at 10 KiB/s, under a ms on loopback) and
   grows after each answer that used at least half of the size asked and arrived within a
   quarter of its time budget: at least twice, at most 16 times, as far as the measured
   rate carries within a quarter of the budget, up to the configured ``fetch_max_bytes``. An answer slower
   than half its budget shrinks the size to what the measured rate carries within the
   budget; a fetch that timed out quarters it.
4. Never below one record: the broker returns the first batch of a fetch even when it is
   larger than ``max_bytes``, so a record larger than the budget is still fetched. When
   such a fetch (at the floor, or an answer larger than asked: one batch too big to split)
   cannot arrive within the lock, :meth:`FetchSizer.fetched`
   says so (``too_slow``) and the caller warns and counts it.
5. No progress while records wait: a fetch answered after its lock ended, or not
   answered at all, means the broker acquired (or may have acquired) records that this
   consumer could not deliver. From that fetch's send time until an answer arrives within
   the lock, the leader is *stalled*; stalled for longer than the lock duration (a whole
   lock passed and nothing could be delivered) is :meth:`FetchSizer.stuck`, and the
   consumer's ``health().ok`` is false.
6. No I/O, no clock: time is the caller's ``now`` (seconds, monotonic).
7. Overlap: one answer may exceed the buffer's record bound on its own (the broker keeps
   whole batches), and then no fetch could go out while the application works through it:
   every cycle would wait for the broker's answer, which carries the acknowledgements'
   persistence. At the default bound, one more answer may wait behind the records being
   handed out when, at the measured handling rate, both are handled within
   :data:`HANDLE_SHARE` of the lock (the two fetches of rule 2); unmeasured, it may not.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ARRIVAL_SHARE",
    "DEFAULT_LOCK",
    "HANDLE_SHARE",
    "INITIAL_BYTES",
    "FetchSize",
    "FetchSizer",
    "Sized",
]

#: Kafka's default ``share.record.lock.duration.ms``, in seconds, until an answer tells.
DEFAULT_LOCK = 30.0
#: The part of the lock a fetch's bytes may take to arrive (rule 2).
ARRIVAL_SHARE = 0.3
#: The part of the lock the application may take to handle two fetches' records (rule 2).
HANDLE_SHARE = 0.3
#: The first fetch's size (rule 3).
INITIAL_BYTES = 16 * 1024
#: The smallest ``max_bytes`` ever asked (rule 4: the broker still returns one batch).
MIN_BYTES = 1024
# The most one fast answer multiplies the size by (rule 3).
_MAX_JUMP = 16
# Rate samples are smoothed: new = old + (sample - old) * _ALPHA (the handling rate), and
# the link rate's sums decay by it per answer (rule 1).
_ALPHA = 0.5


@dataclass(frozen=True, slots=True)
class FetchSize:
    """The sizing of the next ShareFetch."""

    max_bytes: int
    max_records: int


@dataclass(frozen=True, slots=True)
class Sized:
    """What one answer taught the sizer.

    :param late: the answer took longer to arrive than the lock lasts (its records were
        likely released before the application could see them).
    :param too_slow: ``late`` although the fetch asked for no more than one record's worth,
        or got more than it asked (one batch larger than the ask): shrinking cannot help;
        the caller warns.
    """

    late: bool
    too_slow: bool


class FetchSizer:
    """Sizes the ShareFetches to one leader (rules 1-4).

    :param ceiling_bytes: the configured ``fetch_max_bytes``: never more.
    :param ceiling_records: the configured ``max_records``: never more.
    :param initial_bytes: the first fetch's ``max_bytes`` (capped by ``ceiling_bytes``).
    """

    __slots__ = (
        "_busy_since",
        "_bytes",
        "_ceiling_bytes",
        "_ceiling_records",
        "_floor",
        "_seconds",
        "bytes_per_second",
        "cap",
        "handled_per_second",
        "lock",
        "stalled_since",
        "warned",
    )

    def __init__(
        self, ceiling_bytes: int, ceiling_records: int, *, initial_bytes: int = INITIAL_BYTES
    ) -> None:
        self._ceiling_bytes = max(1, ceiling_bytes)
        self._ceiling_records = max(1, ceiling_records)
        self._floor = min(MIN_BYTES, self._ceiling_bytes)
        #: The current ``max_bytes``.
        self.cap = max(self._floor, min(initial_bytes, self._ceiling_bytes))
        #: The lock duration in seconds (the broker's last word, else :data:`DEFAULT_LOCK`).
        self.lock = DEFAULT_LOCK
        #: Bytes per second received from the leader, weighted by transfer time (rule 1;
        #: None: not measured yet).
        self.bytes_per_second: float | None = None
        # The decayed sums behind it (rule 1).
        self._bytes = 0.0
        self._seconds = 0.0
        #: Smoothed records the application answers per second while it holds records.
        self.handled_per_second: float | None = None
        self._busy_since: float | None = None
        #: Send time of the first late or unanswered fetch since an answer in time (rule 5).
        self.stalled_since: float | None = None
        #: The caller has warned that even one record cannot arrive in time (it warns once).
        self.warned = False

    def size(self) -> FetchSize:
        """The ``max_bytes`` and ``max_records`` of the next fetch."""
        records = self._ceiling_records
        rate = self.handled_per_second
        if rate is not None:
            # Two fetches' worth (handled + buffered) within HANDLE_SHARE of the lock.
            fits = int(rate * self.lock * HANDLE_SHARE / 2)
            records = max(1, min(records, fits))
        return FetchSize(self.cap, records)

    def overlap_fits(self, held: int) -> bool:
        """Whether one more answer may wait behind the ``held`` records being handed out
        (rule 7): ``held`` and an answer as large again handled within :data:`HANDLE_SHARE`
        of the lock at the measured rate; False while the rate is unmeasured."""
        rate = self.handled_per_second
        return rate is not None and 2 * held <= rate * self.lock * HANDLE_SHARE

    def fetched(
        self,
        sent: float,
        received: float,
        nbytes: int,
        records: int,
        *,
        lock_ms: int = 0,
        waited: float = 0.0,
    ) -> Sized:
        """A fetch sent at ``sent`` was answered at ``received`` with ``nbytes`` bytes of
        ``records`` records (rules 1-4).

        :param lock_ms: the answer's ``AcquisitionLockTimeoutMs`` (0: not reported).
        :param waited: how long the broker may have held the fetch waiting for data
            (its MaxWaitMs): not transfer time.
        """
        if lock_ms > 0:
            self.lock = lock_ms / 1000
        if records > 0 and self._busy_since is None:
            self._busy_since = received
        elapsed = max(0.0, received - sent)
        # Waiting at the broker is not transfer time; counting it as such would only shrink.
        transfer = max(elapsed - waited, 1e-6)
        if nbytes <= 0:
            # Nothing waiting (or nothing acquirable): not a stall.
            self.stalled_since = None
            return Sized(late=False, too_slow=False)
        sample = nbytes / transfer
        # Rule 1: each sum halves per answer, each answer weighed by how long it took: a
        # link that slows shows at once; one that heals, as the slow seconds halve away.
        self._bytes = self._bytes * _ALPHA + nbytes
        self._seconds = self._seconds * _ALPHA + transfer
        self.bytes_per_second = self._bytes / self._seconds
        budget = self.lock * ARRIVAL_SHARE
        asked = self.cap
        if transfer > budget / 2:
            # Too slow: ask for what this rate carries within the budget.
            self.cap = max(self._floor, min(self.cap, int(sample * budget)))
        elif nbytes * 2 >= asked and transfer <= budget / 4:
            # At least double; up to x16 when the rate measured carries that well within
            # the budget (loopback reaches fetch_max_bytes in a few answers).
            jump = min(self.cap * _MAX_JUMP, int(sample * budget / 4))
            self.cap = min(self._ceiling_bytes, max(self.cap * 2, jump))
        late = elapsed > self.lock
        if not late:
            self.stalled_since = None
        elif self.stalled_since is None:
            self.stalled_since = sent
        # More than asked: the broker sent a first batch larger than max_bytes, which no
        # smaller ask can split.
        return Sized(late=late, too_slow=late and (asked <= self._floor or nbytes > asked))

    def timed_out(self, sent: float) -> bool:
        """A fetch sent at ``sent`` got no answer in time: quarter the size (rule 3), and
        count the leader stalled from ``sent`` (rule 5). True if the size was already at the
        floor (the caller warns: not even one record arrives in time)."""
        if self.stalled_since is None:
            self.stalled_since = sent
        at_floor = self.cap <= self._floor
        self.cap = max(self._floor, self.cap // 4)
        return at_floor

    def stuck(self, now: float) -> float:
        """Seconds this leader has been stalled, if longer than the lock; else 0 (rule 5)."""
        since = self.stalled_since
        if since is None or now - since <= self.lock:
            return 0.0
        return now - since

    def handled(self, now: float, records: int, *, backlog: bool) -> None:
        """The application's answers to ``records`` records left by ``now`` (rule 1).

        ``backlog``: records were still waiting for the application, so it is the
        bottleneck and the rate measured is its own. Without a backlog it was waiting for
        records, and the rate is only a lower bound: it may raise the estimate, never lower it.
        """
        since = self._busy_since
        if records > 0 and since is not None and now > since:
            sample = records / (now - since)
            old = self.handled_per_second
            if old is None or (not backlog and sample > old):
                self.handled_per_second = sample
            elif backlog:
                self.handled_per_second = old + (sample - old) * _ALPHA
        self._busy_since = now if backlog else None
