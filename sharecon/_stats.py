"""Counters behind the clients' ``metrics()``: sans-I/O, time passed in.

Rules of this module:

1. No clock, no I/O, no logging: every method that needs the time takes ``now`` (monotonic
   seconds: the clients pass :func:`time.monotonic`, which any thread can read, and which
   costs a tenth of the event loop's clock read through anyio). Unit tests pass numbers.
   Latencies are durations the callers measured on any clock.
2. Windowed values follow the Java client's sampled statistics: a window of ``samples``
   sub-windows of ``width`` seconds each (Java: 2 x 30 s). A rate is what the live
   sub-windows saw divided by the time they cover, counted as at least ``samples - 1``
   sub-windows so that a client just started does not report a burst as a huge rate. An
   average or maximum over a window with nothing in it is NaN, as in Java.
3. Cheap to feed: the clients call these once per request, answer or batch. Only the
   poll timer runs once per record the application takes: it keeps a count, the last time
   and the largest gap (no window work), and is folded into its windowed sensor once per
   fetch answer.
4. Snapshots only read (the asks not folded yet are added to the window's figures on the
   fly), so a snapshot may be taken from another thread (an exporter's, a scrape's) while
   the event loop feeds the counters; a value read at that moment may miss that moment's
   events, nothing worse.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from sharecon.metrics import AdminMetrics, ConsumerMetrics, ProducerMetrics

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["AdminStats", "ConsumerStats", "ProducerStats", "Sensor"]

#: Java's defaults: metrics.sample.window.ms=30000, metrics.num.samples=2.
WINDOW_WIDTH = 30.0
WINDOW_SAMPLES = 2


class Outcome(Protocol):
    """An acknowledgement outcome as counted here (:class:`~sharecon.AckResult`)."""

    @property
    def ok(self) -> bool: ...
    @property
    def count(self) -> int: ...


class _Sample:
    __slots__ = ("count", "end", "max", "total")

    def __init__(self, end: float) -> None:
        self.end = end
        self.count = 0
        self.total = 0.0
        self.max = -math.inf


class Sensor:
    """Values recorded over time: all-time totals plus a sampled window (rule 2).

    ``record(now, v)`` adds one event of value ``v`` (a latency, or a number of records).
    """

    __slots__ = ("_cur", "_ring", "_samples", "_started", "_width", "events", "total")

    def __init__(
        self, now: float, *, width: float = WINDOW_WIDTH, samples: int = WINDOW_SAMPLES
    ) -> None:
        if width <= 0 or samples < 1:
            raise ValueError("a sensor needs width > 0 and at least one sample")
        self._width = width
        self._samples = samples
        self._started = now
        self._cur = _Sample(now + width)
        self._ring: list[_Sample] = [self._cur]
        #: Events recorded since the sensor was made.
        self.events = 0
        #: Sum of every value recorded since the sensor was made.
        self.total = 0.0

    def record_many(self, now: float, count: int, total: float, largest: float) -> None:
        """Add ``count`` events summing to ``total``, the largest ``largest``, at ``now``."""
        if count <= 0:
            return
        s = self._cur
        if now >= s.end:
            s = self._roll(now)
        s.count += count
        s.total += total
        if largest > s.max:
            s.max = largest
        self.events += count
        self.total += total

    def record(self, now: float, value: float = 1.0) -> None:
        """Add one event of ``value`` at ``now``."""
        s = self._cur
        if now >= s.end:
            s = self._roll(now)
        s.count += 1
        s.total += value
        if value > s.max:
            s.max = value
        self.events += 1
        self.total += value

    def _roll(self, now: float) -> _Sample:
        # Sub-windows are aligned to the sensor's start, so idle periods leave no sample.
        skipped = int((now - self._cur.end) // self._width) + 1
        s = _Sample(self._cur.end + skipped * self._width)
        self._ring.append(s)
        del self._ring[: -self._samples]
        self._cur = s
        return s

    def _live(self, now: float) -> list[_Sample]:
        oldest_end = now - (self._samples - 1) * self._width
        return [s for s in self._ring if s.end > oldest_end]

    def _elapsed(self, now: float, live: list[_Sample]) -> float:
        start = live[0].end - self._width if live else now
        start = max(start, self._started)
        return max(now - start, (self._samples - 1) * self._width, 1e-9)

    def rate(self, now: float) -> float:
        """Sum of the values recorded in the window, per second."""
        live = self._live(now)
        return sum(s.total for s in live) / self._elapsed(now, live)

    def event_rate(self, now: float) -> float:
        """Events recorded in the window, per second."""
        live = self._live(now)
        return sum(s.count for s in live) / self._elapsed(now, live)

    def avg(self, now: float, extra_count: int = 0, extra_total: float = 0.0) -> float:
        """Average value of the events in the window, plus ``extra_count`` events summing to
        ``extra_total`` not recorded yet (NaN if none)."""
        live = self._live(now)
        n = sum(s.count for s in live) + extra_count
        return (sum(s.total for s in live) + extra_total) / n if n else math.nan

    def max(self, now: float, extra: float = -math.inf) -> float:
        """Largest value recorded in the window, or ``extra`` if larger (NaN if none)."""
        m = max((s.max for s in self._live(now) if s.count), default=-math.inf)
        m = max(m, extra)
        return m if m > -math.inf else math.nan


class ConsumerStats:
    """What one share consumer counts; :meth:`snapshot` turns it into :class:`ConsumerMetrics`.

    The consumer's loops call the ``on_*`` methods; gauges (buffered and held records,
    assigned partitions) are read from the consumer's state when a snapshot is taken.
    """

    __slots__ = (
        "_last_heartbeat",
        "_last_poll",
        "_poll_mark",
        "_poll_max",
        "_polled",
        "_polls",
        "acks_failed",
        "acks_sent",
        "client_id",
        "dlq_errors",
        "dlq_records",
        "dlq_values_dropped",
        "fetch_bytes",
        "fetch_latency",
        "fetch_records",
        "fetch_throttle",
        "fetches_late",
        "group_id",
        "heartbeat_time",
        "lock_expired",
        "poll_gap",
        "rebalances",
        "renewals_failed",
        "renewals_sent",
    )

    def __init__(self, now: float, *, client_id: str, group_id: str) -> None:
        self.client_id = client_id
        self.group_id = group_id
        #: Per ShareFetch answer: records acquired, record bytes, latency (ms).
        self.fetch_records = Sensor(now)
        self.fetch_bytes = Sensor(now)
        self.fetch_latency = Sensor(now)
        #: Per ShareFetch answer: the throttle time the broker reported (ms).
        self.fetch_throttle = Sensor(now)
        #: Records whose acknowledgements were sent / came back failed.
        self.acks_sent = Sensor(now)
        self.acks_failed = Sensor(now)
        #: Per heartbeat answer: its response time (ms).
        self.heartbeat_time = Sensor(now)
        #: Per assignment change the coordinator sent.
        self.rebalances = Sensor(now, width=3600.0)
        #: Time between the application's asks for records (ms), folded in from the
        #: poll timer: asks since the last fold, the time of the last one and of the last
        #: fold, and the largest gap since (rule 3).
        self.poll_gap = Sensor(now)
        self._polls = 0
        self._last_poll = now
        self._poll_mark = now
        self._poll_max = 0.0
        self._polled = False
        self._last_heartbeat: float | None = None
        self.lock_expired = 0
        #: ShareFetches answered after the lock duration, or not at all (timed out).
        self.fetches_late = 0
        self.renewals_sent = 0
        self.renewals_failed = 0
        self.dlq_records = 0
        self.dlq_errors = 0
        self.dlq_values_dropped = 0

    # -- events ---------------------------------------------------------------------------

    def on_fetch(
        self, now: float, latency: float, records: int, nbytes: int, throttle_ms: int = 0
    ) -> None:
        """A ShareFetch answer came back after ``latency`` seconds with ``records``
        acquired records, ``nbytes`` bytes of record batches, and ``throttle_ms``."""
        self.fetch_latency.record(now, latency * 1000.0)
        self.fetch_throttle.record(now, throttle_ms)
        self.fetch_records.record(now, records)
        self.fetch_bytes.record(now, nbytes)
        if self._polls:
            self._fold_polls(now)

    def on_acks_sent(self, now: float, records: int) -> None:
        """A request carried the acknowledgements of ``records`` records."""
        if records:
            self.acks_sent.record(now, records)

    def on_ack_results(self, now: float, results: Iterable[Outcome]) -> None:
        """Acknowledgement outcomes: the failed ones are counted, per record."""
        failed = 0
        for r in results:
            if not r.ok:
                failed += r.count
        if failed:
            self.acks_failed.record(now, failed)

    def on_heartbeat(self, now: float, response_time: float) -> None:
        """A heartbeat was answered after ``response_time`` seconds."""
        self._last_heartbeat = now
        self.heartbeat_time.record(now, response_time * 1000.0)

    def on_rebalance(self, now: float) -> None:
        """The coordinator changed this member's assignment."""
        self.rebalances.record(now)

    def on_poll(self, now: float) -> None:
        """The application asked for records (once per record iterated, per ``poll()``).
        The first gap runs from :meth:`poll_timer_from` (or the start)."""
        gap = now - self._last_poll
        self._last_poll = now
        self._polls += 1
        if gap > self._poll_max:
            self._poll_max = gap

    def poll_timer_from(self, now: float) -> None:
        """Count the first gap from ``now`` (the consumer is ready), not from creation:
        joining the group is not the application's time between polls."""
        if not self._polls and not self._polled:
            self._last_poll = self._poll_mark = now

    def _fold_polls(self, now: float) -> None:
        # The gaps since the last fold sum to the time between its mark and the last ask.
        total = self._last_poll - self._poll_mark
        self.poll_gap.record_many(now, self._polls, total * 1000.0, self._poll_max * 1000.0)
        self._polled = True
        self._polls = 0
        self._poll_max = 0.0
        self._poll_mark = self._last_poll

    # -- snapshot -------------------------------------------------------------------------

    def snapshot(
        self,
        now: float,
        *,
        assigned_partitions: int,
        buffered_records: int,
        buffered_bytes: int,
        held_records: int,
        lock_expired: int,
        renewals_failed: int,
        released_unseen: int = 0,
        lost_unseen: int = 0,
    ) -> ConsumerMetrics:
        """The counters as :class:`ConsumerMetrics`, with the gauges the caller read now
        (read-only: rule 4)."""
        fr, fb, fl = self.fetch_records, self.fetch_bytes, self.fetch_latency
        # Asks not folded into the window yet count as if they were.
        polls, last, mark, largest = self._polls, self._last_poll, self._poll_mark, self._poll_max
        pending = (last - mark) * 1000.0 if polls else 0.0
        hb = self.heartbeat_time
        return ConsumerMetrics(
            client_id=self.client_id,
            group_id=self.group_id,
            records_consumed_rate=fr.rate(now),
            records_consumed_total=fr.total,
            bytes_consumed_rate=fb.rate(now),
            bytes_consumed_total=fb.total,
            records_per_request_avg=fr.avg(now),
            records_per_request_max=fr.max(now),
            fetch_size_avg=fb.avg(now),
            fetch_size_max=fb.max(now),
            fetch_latency_avg=fl.avg(now),
            fetch_latency_max=fl.max(now),
            fetch_rate=fl.event_rate(now),
            fetch_total=float(fl.events),
            fetch_throttle_time_avg=self.fetch_throttle.avg(now),
            fetch_throttle_time_max=self.fetch_throttle.max(now),
            acknowledgements_send_rate=self.acks_sent.rate(now),
            acknowledgements_send_total=self.acks_sent.total,
            acknowledgements_error_rate=self.acks_failed.rate(now),
            acknowledgements_error_total=self.acks_failed.total,
            last_poll_seconds_ago=_ago(now, last if self._polled or polls else None),
            time_between_poll_avg=self.poll_gap.avg(now, polls, pending),
            time_between_poll_max=self.poll_gap.max(now, largest * 1000.0 if polls else -math.inf),
            heartbeat_rate=hb.event_rate(now),
            heartbeat_total=float(hb.events),
            heartbeat_response_time_max=hb.max(now),
            last_heartbeat_seconds_ago=_ago(now, self._last_heartbeat),
            rebalance_total=float(self.rebalances.events),
            rebalance_rate_per_hour=self.rebalances.event_rate(now) * 3600.0,
            assigned_partitions=float(assigned_partitions),
            buffered_records=float(buffered_records),
            buffered_bytes=float(buffered_bytes),
            held_records=float(held_records),
            lock_expired_records_total=float(lock_expired),
            released_unseen_records_total=float(released_unseen),
            lost_unseen_records_total=float(lost_unseen),
            fetches_late_total=float(self.fetches_late),
            renewals_sent_total=float(self.renewals_sent),
            renewals_failed_total=float(renewals_failed),
            dlq_records_total=float(self.dlq_records),
            dlq_errors_total=float(self.dlq_errors),
            dlq_values_dropped_total=float(self.dlq_values_dropped),
        )


class ProducerStats:
    """What one producer counts; :meth:`snapshot` turns it into :class:`ProducerMetrics`."""

    __slots__ = (
        "batch_size",
        "client_id",
        "record_errors",
        "record_retries",
        "records_sent",
        "throttle",
        "request_latency",
        "request_records",
    )

    def __init__(self, now: float, *, client_id: str) -> None:
        self.client_id = client_id
        #: Per Produce answer: its latency (ms) and how many records it carried.
        self.request_latency = Sensor(now)
        self.request_records = Sensor(now)
        #: Per Produce answer: the throttle time the broker reported (ms).
        self.throttle = Sensor(now)
        #: Per batch sent: its encoded size in bytes.
        self.batch_size = Sensor(now)
        #: Per batch finished: records written, records failed, records retried.
        self.records_sent = Sensor(now)
        self.record_errors = Sensor(now)
        self.record_retries = Sensor(now)

    def on_request(self, now: float, batch_sizes: Iterable[int]) -> None:
        """A Produce request with batches of these encoded sizes was sent."""
        for size in batch_sizes:
            self.batch_size.record(now, size)

    def on_response(self, now: float, latency: float, records: int, throttle_ms: int = 0) -> None:
        """A Produce request of ``records`` records was answered after ``latency`` s,
        throttled ``throttle_ms`` by the broker's quotas."""
        self.request_latency.record(now, latency * 1000.0)
        self.request_records.record(now, records)
        self.throttle.record(now, throttle_ms)

    def on_batch_done(self, now: float, records: int, *, failed: bool) -> None:
        """A batch of ``records`` records was written, or given up on."""
        (self.record_errors if failed else self.records_sent).record(now, records)

    def on_retry(self, now: float, records: int) -> None:
        """A batch of ``records`` records is sent again."""
        self.record_retries.record(now, records)

    def snapshot(
        self, now: float, *, buffer_total_bytes: int, buffer_available_bytes: int, in_flight: int
    ) -> ProducerMetrics:
        """The counters as :class:`ProducerMetrics`, with the gauges the caller read now."""
        lat, rr = self.request_latency, self.request_records
        return ProducerMetrics(
            client_id=self.client_id,
            record_send_rate=self.records_sent.rate(now),
            record_send_total=self.records_sent.total,
            record_error_rate=self.record_errors.rate(now),
            record_error_total=self.record_errors.total,
            record_retry_rate=self.record_retries.rate(now),
            record_retry_total=self.record_retries.total,
            request_rate=lat.event_rate(now),
            request_total=float(lat.events),
            request_latency_avg=lat.avg(now),
            request_latency_max=lat.max(now),
            records_per_request_avg=rr.avg(now),
            produce_throttle_time_avg=self.throttle.avg(now),
            produce_throttle_time_max=self.throttle.max(now),
            batch_size_avg=self.batch_size.avg(now),
            batch_size_max=self.batch_size.max(now),
            buffer_total_bytes=float(buffer_total_bytes),
            buffer_available_bytes=float(buffer_available_bytes),
            batches_in_flight=float(in_flight),
        )


class AdminStats:
    """What one admin client counts; :meth:`snapshot` turns it into :class:`AdminMetrics`."""

    __slots__ = ("client_id", "latency")

    def __init__(self, now: float, *, client_id: str) -> None:
        self.client_id = client_id
        #: Per answered request: its round trip (ms).
        self.latency = Sensor(now)

    def on_response(self, now: float, latency: float) -> None:
        """A request was answered after ``latency`` s."""
        self.latency.record(now, latency * 1000.0)

    def snapshot(self, now: float) -> AdminMetrics:
        """The counters as :class:`AdminMetrics`."""
        lat = self.latency
        return AdminMetrics(
            client_id=self.client_id,
            request_rate=lat.event_rate(now),
            request_total=float(lat.events),
            request_latency_avg=lat.avg(now),
            request_latency_max=lat.max(now),
        )


def _ago(now: float, then: float | None) -> float:
    # Java reports -1 until the first event.
    return -1.0 if then is None else now - then
