"""A member's backlog per partition: ``consumer.partition_metrics()``, with the
share-partition lag the broker keeps.

Rules of this module:

1. One board per process: every member of a group in this process (same cluster, same
   group) reads the same entry, and one DescribeShareGroupOffsets per group per
   :data:`REFRESH_INTERVAL` seconds at most serves them all, whichever member's loop sends
   it.
2. On demand: the lag is only fetched while someone reads it (``partition_metrics()``
   was called within :data:`WANTED_FOR` seconds), so a consumer whose metrics nobody
   reads sends nothing more.
3. Readers never wait and never do I/O: they get the last values (the lag of a partition
   the broker has not reported, or not yet, is ``-1``). Readers may be other threads (a
   Prometheus scrape): they only read a dict that the event loop replaces whole.
4. A failed fetch keeps the last values and is logged at debug; lag is a metric, never a
   reason to fail the consumer.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon import errors
from sharecon.metrics import PartitionMetrics

if TYPE_CHECKING:
    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._net.cluster import Cluster
    from sharecon._share.ledger import AckLedger
    from sharecon.types import TopicIdPartition

__all__ = [
    "REFRESH_INTERVAL",
    "LagBoard",
    "LagEntry",
    "MemberCounts",
    "board",
    "keep_lag",
    "partition_metrics",
]


class MemberCounts(Protocol):
    """What ``partition_metrics()`` reads of a member (``ConsumerCore`` has all of it)."""

    @property
    def ledger(self) -> AckLedger:
        """Buffered, held and in-flight records per partition."""
        ...

    @property
    def buffer(self) -> DeliveryBuffer:
        """Lock expiries in the buffer per partition."""
        ...

    @property
    def assignment(self) -> frozenset[TopicIdPartition]:
        """The assigned partitions."""
        ...


logger = logging.getLogger("sharecon.consumer")

#: The least time between two fetches of one group's lag, in seconds.
REFRESH_INTERVAL = 10.0
#: Lag is fetched while it was read within this many seconds.
WANTED_FOR = 60.0
#: How often a member's loop looks whether its group's lag is due.
_TICK = 1.0


class LagEntry:
    """One group's lag on one cluster, shared by the members in this process."""

    __slots__ = ("fetched_at", "lags", "members", "refreshing", "wanted_at")

    def __init__(self) -> None:
        #: ``(topic, partition) -> lag`` as last fetched (replaced whole, rule 3).
        self.lags: dict[tuple[str, int], int] = {}
        #: time.monotonic() of the last fetch, of the last read; None before any.
        self.fetched_at: float | None = None
        self.wanted_at: float | None = None
        self.refreshing = False
        self.members = 0

    def read(self, now: float) -> dict[tuple[str, int], int]:
        """The last lags (rule 3), noting that they are wanted (rule 2)."""
        self.wanted_at = now
        return self.lags

    def due(self, now: float, interval: float) -> bool:
        """Whether a member should fetch now (rules 1, 2)."""
        if self.refreshing or self.wanted_at is None or now - self.wanted_at > WANTED_FOR:
            return False
        return self.fetched_at is None or now - self.fetched_at >= interval


class LagBoard:
    """Every group's :class:`LagEntry`, keyed by cluster and group."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], LagEntry] = {}
        #: Seconds between fetches (a test may shorten it).
        self.interval = REFRESH_INTERVAL

    def join(self, cluster_key: str, group_id: str) -> LagEntry:
        """The entry a member of ``group_id`` reads, counted as one more member."""
        entry = self._entries.setdefault((cluster_key, group_id), LagEntry())
        entry.members += 1
        return entry

    def leave(self, cluster_key: str, group_id: str) -> None:
        """One member fewer; the entry goes with the last."""
        entry = self._entries.get((cluster_key, group_id))
        if entry is not None:
            entry.members -= 1
            if entry.members <= 0:
                del self._entries[(cluster_key, group_id)]

    async def keep(self, entry: LagEntry, cluster: Cluster, group_id: str) -> None:
        """A member's loop: fetch the group's lag whenever it is due, until cancelled."""
        while True:
            await anyio.sleep(_TICK)
            if entry.due(time.monotonic(), self.interval):
                entry.refreshing = True
                try:
                    await self._fetch(entry, cluster, group_id)
                finally:
                    entry.refreshing = False
                    entry.fetched_at = time.monotonic()

    async def _fetch(self, entry: LagEntry, cluster: Cluster, group_id: str) -> None:
        # Imported here: a consumer whose lag nobody reads never creates these classes
        # (rule 2), and importing the consumer stays cheap (docs/performance.md).
        from sharecon.protocol.messages.describe_share_group_offsets import (
            DescribeShareGroupOffsetsRequest,
            DescribeShareGroupOffsetsRequestGroup,
        )

        request = DescribeShareGroupOffsetsRequest(
            groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),)
        )
        try:
            with anyio.fail_after(self.interval):
                node = await cluster.coordinator(group_id)
                response = await cluster.request(node, request)
        except Exception as exc:  # rule 4: whatever went wrong, the consumer goes on
            logger.debug("share group %s: lag not fetched: %r", group_id, exc)
            if isinstance(exc, errors.BrokerDisconnectedError | errors.NotCoordinatorError):
                cluster.invalidate_coordinator(group_id)
            return
        lags: dict[tuple[str, int], int] = {}
        for g in response.groups:
            if g.error_code:
                logger.debug("share group %s: lag not fetched: error %d", group_id, g.error_code)
                return
            for t in g.topics:
                for p in t.partitions:
                    if not p.error_code:
                        lags[(t.topic_name, p.partition_index)] = p.lag
        entry.lags = lags


#: The process's board (rule 1).
board = LagBoard()


#: Each running member's entry, by ``id()`` of its core: the compiled build's core takes
#: no weak reference, and :func:`keep_lag` removes the key before the core can go.
_entry_of: dict[int, LagEntry] = {}


def _cluster_key(cluster: Cluster) -> str:
    return cluster.metadata.cluster_id or ",".join(map(str, cluster.bootstrap_addresses))


async def keep_lag(cluster: Cluster, group_id: str, member: MemberCounts) -> None:
    """The member's part of the board (rule 1): joined while the consumer runs
    (``member``: what :func:`partition_metrics` is given for it)."""
    key = _cluster_key(cluster)
    entry = board.join(key, group_id)
    _entry_of[id(member)] = entry
    try:
        await board.keep(entry, cluster, group_id)
    finally:
        del _entry_of[id(member)]
        board.leave(key, group_id)


def partition_metrics(core: MemberCounts) -> tuple[PartitionMetrics, ...]:
    """Every partition assigned to the member or holding its records, sorted (read-only:
    safe from another thread, like ``metrics()``)."""
    entry = _entry_of.get(id(core))
    lags = entry.read(time.monotonic()) if entry is not None else {}
    counts: dict[tuple[str, int], tuple[int, int, int]] = {}
    for _ in range(3):
        try:
            counts = {
                (tp.topic or str(tp.topic_id), tp.partition): c
                for tp, c in core.ledger.counts_by_partition().items()
            }
            expired = {
                (tp.topic or str(tp.topic_id), tp.partition): n
                for tp, n in list(core.buffer.expired_by.items())
            }
            break
        except RuntimeError:  # the loop changed a dict while another thread read it
            continue
    else:
        expired = {}
    keys = set(counts) | {(tp.topic or str(tp.topic_id), tp.partition) for tp in core.assignment}
    out = []
    for key in sorted(keys):
        buffered, held, sent = counts.get(key, (0, 0, 0))
        out.append(
            PartitionMetrics(
                topic=key[0],
                partition=key[1],
                records_lag=float(lags.get(key, -1)),
                buffered_records=float(buffered),
                held_records=float(held),
                in_flight_records=float(sent),
                lock_expired_records_total=float(expired.get(key, 0)),
            )
        )
    return tuple(out)
