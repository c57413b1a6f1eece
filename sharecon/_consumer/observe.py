"""What one consumer tells the world about its machine's effects: log lines and the
``metrics()`` snapshot. Nothing here decides anything; each function is called by the
core (:mod:`sharecon._consumer.core`) as it carries out an effect.

Rules of this module:

1. A log line never carries a record's key, value or headers, and never a secret.
2. :func:`metrics` only reads: it is safe to call from another thread (an exporter's).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._share.effects import FetchLate, PartitionBlocked, RenewFailed, SessionLost
    from sharecon._share.expiry import ExpiryWarning
    from sharecon._share.ledger import AckResult
    from sharecon._share.machine import ShareMachine
    from sharecon._stats import ConsumerStats
    from sharecon.metrics import ConsumerMetrics

logger = logging.getLogger("sharecon.consumer")

__all__ = [
    "acks_failed",
    "expired_in_buffer",
    "fetch_late",
    "metrics",
    "raised",
    "released_unreachable",
    "released_unseen",
    "renew_failed",
    "session_lost",
]


def acks_failed(stats: ConsumerStats, results: list[AckResult]) -> None:
    """Outcomes with a failure among them: log each failed one, count them."""
    for r in results:
        if not r.ok:
            logger.info("acknowledgements of %s failed: %s", r.partition, r.error())
    stats.on_ack_results(time.monotonic(), results)


def raised(who: str, exc: Exception) -> None:
    """An acknowledgement listener or the ``on_acknowledged`` callback raised."""
    what = "the on_acknowledged callback" if who == "callback" else "an acknowledgement listener"
    logger.error("%s raised", what, exc_info=exc)


def session_lost(member_id: str, e: SessionLost, dropped: int) -> None:
    """A share session was lost and ``dropped`` buffered records with it."""
    logger.info(
        "share consumer %s: share session %s reset (%s); dropped %d buffered records",
        *(member_id, e.tag, e.reason, dropped),
    )


def renew_failed(e: RenewFailed, new: int) -> None:
    """The broker did not renew some locks (the records keep their old deadline); a
    WARNING when ``new`` of them were not refused before, else DEBUG (once per record)."""
    logger.log(
        logging.WARNING if new else logging.DEBUG,
        "node %d: the broker did not renew the locks of %d records (partitions %s); they "
        "keep their current locks (each record is told once at WARNING, repeats at DEBUG)",
        *(e.node_id, e.count, ", ".join(str(tp) for tp in e.partitions)),
    )


def fetch_late(stats: ConsumerStats, e: FetchLate) -> None:
    """Count a fetch that came back after its lock (or never), and say so when even one
    record cannot arrive in time (WARNING once per leader, as the machine says)."""
    stats.fetches_late += 1
    if e.too_slow:
        logger.log(
            logging.WARNING if e.warn else logging.DEBUG,
            "node %d: %s, longer than the %.1f s acquisition lock: records from this "
            "leader cannot arrive before their locks end (measured %.0f bytes/s)",
            *(e.node_id, e.what, e.lock, e.bytes_per_second),
        )


def partition_blocked(e: PartitionBlocked) -> None:
    """A partition is no longer fetched: its batches cannot arrive within the lock."""
    logger.warning("node %d: %s", e.node_id, e.cause)


def expired_in_buffer(
    member_id: str, said: ExpiryWarning, rate: float | None, lock: float, buffered: int, mode: str
) -> None:
    """Records' locks ended while they waited in the buffer (WARNING, as
    :mod:`sharecon._share.expiry` decides): each cost a delivery attempt nobody saw."""
    measured = "not measured yet" if rate is None else f"{rate:.1f} records/s"
    remedy = (
        "acquire_mode='record_limit' (or 'auto', Kafka 4.2+) bounds what a member holds by "
        "its handling rate"
        if mode == "batch"
        else "the hold is cut to the measured rate; a handler slower than measured, or "
        "records held while they were measured, outlast it"
    )
    logger.warning(
        "share consumer %s: the acquisition locks of %d records (%d in all) ended while they "
        "waited in this consumer's buffer, each a delivery attempt spent unseen: it held "
        "more than it handles within the %.1f s lock (handling rate %s, %d still buffered); "
        "%s",
        *(member_id, said.count, said.total, lock, measured, buffered, remedy),
    )


def released_unseen(member_id: str, released: int, why: str, bound: int) -> None:
    """Buffered records, never handed out, were released (at a close, or a leave for
    idleness): each spent a delivery attempt nobody saw."""
    logger.info(
        "share consumer %s: %s released %d buffered records never handed out, each a "
        "delivery attempt spent unseen (the buffer holds at most %d; stop_fetching() and "
        "handing out what fetching_stopped() waits for before closing spends none)",
        *(member_id, why, released, bound),
    )


def released_unreachable(member_id: str, released: int, rate: float | None) -> None:
    """Buffered records the application could not reach in time were released at once
    (batch acquisition): each spent the attempt its acquisition counted, and another
    member may have them now rather than after their locks."""
    logger.info(
        "share consumer %s: released %d buffered records it cannot reach before their "
        "locks end (handling rate %.1f records/s)",
        *(member_id, released, rate or 0.0),
    )


def metrics(
    stats: ConsumerStats,
    machine: ShareMachine,
    buffer: DeliveryBuffer,
    assigned: int,
    lost_unseen: int = 0,
) -> ConsumerMetrics:
    """The counters, and the gauges read now (rule 2); ``lost_unseen``: the buffered
    records the consumer dropped with their session or leader."""
    buffered = buffer.records
    outstanding = 0
    for _ in range(3):
        try:
            outstanding = machine.ledger.outstanding_all()
            break
        except RuntimeError:  # the loop changed the ledger while another thread read it
            continue
    stats.renewals_sent = machine.renewals_sent
    return stats.snapshot(
        time.monotonic(),
        assigned_partitions=assigned,
        buffered_records=buffered,
        buffered_bytes=buffer.nbytes,
        # What the member holds beyond its buffer: handed out, not yet confirmed.
        held_records=max(0, outstanding - buffered),
        lock_expired=buffer.expired,
        renewals_failed=machine.renewals_failed,
        released_unseen=machine.released_unseen,
        lost_unseen=lost_unseen + machine.stale_records,
    )
