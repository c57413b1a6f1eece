"""Share groups from the broker's view, as Prometheus text: what ``sharecon exporter`` serves.

::

    async with Admin("localhost:9092") as admin:
        states = await collect_groups(admin, ["billing"])
        print(render(states))

Each scrape asks the group coordinators afresh: ShareGroupDescribe (state, members and
their assignments) and DescribeShareGroupOffsets (each share-partition's start offset and,
on Kafka 4.2+ (KIP-1226), its lag: the records not yet delivery-complete); then one Fetch
per partition leader reads the record at each pending start offset, for its age. Nothing is
counted in between, so the exporter holds no state a restart could lose.

Families (every sample labelled ``group``):

* ``sharecon_share_partition_lag{topic,partition}``: the share-partition lag, where the
  broker reports it: Kafka 4.1 never does, and later versions only once the share-partition's
  state has been written (the first acknowledgement or lock expiry on it).
* ``sharecon_share_group_lag``: the sum of the known partition lags. It leaves out the
  partitions whose lag is unknown, which may hold records: it can undercount.
  ``sharecon_share_group_lag_unknown_partitions`` counts those partitions, and
  ``sharecon_share_partition_lag_unknown{topic,partition}`` (1) names each.
* ``sharecon_share_partition_lag_upper_bound{topic,partition}``: for a partition whose lag
  is unknown, the most records it can have pending: its high watermark minus its share
  start offset (or, without one, its log start offset), read with ListOffsets.
  ``sharecon_share_group_lag_upper_bound``: the known lags plus those bounds. It never
  undercounts (it may overcount a partition the group has not started on yet); it is
  what an autoscaler should read. Absent when a bound could not be read.
* ``sharecon_share_partition_start_offset{topic,partition}``: the share-partition start
  offset (SPSO), the earliest record the group still has to finish.
* ``sharecon_share_group_partitions``: partitions the group has state for.
* ``sharecon_share_group_members``, ``sharecon_share_group_state{state}`` (1),
  ``sharecon_share_group_epoch``.
* ``sharecon_share_group_member_assigned_partitions{member_id,client_id,client_host}`` and
  ``sharecon_share_group_assignment{member_id,client_id,topic,partition}`` (1 per
  assigned partition).
* ``sharecon_share_group_up``: 1 if the group could be described, 0 if not (its error is
  logged); ``sharecon_share_group_scrape_duration_seconds``.

* ``sharecon_share_partition_oldest_record_age_seconds{topic,partition}`` and
  ``sharecon_share_group_oldest_record_age_seconds`` (their maximum): seconds since the
  timestamp of the record at the share-partition start offset (SPSO), on partitions with
  a lag above 0. Kafka keeps every record from the SPSO on that is not
  delivery-complete, so this is the age of the oldest pending record *when the SPSO is at
  the first such record*. Kafka may report an SPSO behind it (4.4 was seen reporting 0
  after offsets 0-569 were accepted; its own ``kafka-share-groups`` tool shows the same):
  then the record timed is older than any pending one, and the age is an upper bound, by
  up to the time between that record and the first pending one. No Kafka 4.x API reports this age
  (DescribeShareGroupOffsets gives offsets and lag, not times): the exporter reads that
  one record with a plain Fetch from the partition's leader (which takes nothing from the
  group) and uses its timestamp (CreateTime: the producer's clock; LogAppendTime: the
  broker's). Absent when nothing is pending or the record could not be read.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon._net.http_serve import Response, serve_http

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from sharecon.admin import Admin, ShareGroupDescription, SharePartitionOffset
    from sharecon.types import TopicPartition

__all__ = ["Exporter", "GroupState", "collect_groups", "render"]

logger = logging.getLogger("sharecon.exporter")


@dataclass(frozen=True, slots=True)
class GroupState:
    """One share group as the broker reported it at one scrape.

    :ivar group_id: the group.
    :ivar description: members, assignments and state (None if it could not be read).
    :ivar offsets: each share-partition's start offset and lag.
    :ivar error: why the group could not be read (None when it was).
    :ivar seconds: how long reading it took.
    :ivar oldest_age: per partition with records pending, seconds since the timestamp of
        the record at its start offset: the age of the oldest record not yet
        delivery-complete, or more where Kafka's start offset lags behind it.
    :ivar lag_bounds: per partition whose lag is unknown, the most records it can have
        pending (high watermark minus start offset, or log start offset without one).
    """

    group_id: str
    description: ShareGroupDescription | None
    offsets: dict[TopicPartition, SharePartitionOffset] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    oldest_age: dict[TopicPartition, float] = field(default_factory=dict)
    lag_bounds: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def lag(self) -> int:
        """The group's lag: the sum of its partitions' known lags."""
        return sum(o.lag for o in self.offsets.values() if o.lag >= 0)

    @property
    def unknown_lag_partitions(self) -> int:
        """Share-partitions whose lag the broker did not report."""
        return sum(1 for o in self.offsets.values() if o.lag < 0)

    @property
    def lag_upper_bound(self) -> int | None:
        """The known lags plus, for each partition whose lag is unknown, its bound: never
        less than the records pending. None when a bound could not be read."""
        unknown = [tp for tp, o in self.offsets.items() if o.lag < 0]
        if any(tp not in self.lag_bounds for tp in unknown):
            return None
        return self.lag + sum(self.lag_bounds[tp] for tp in unknown)


async def _collect_one(admin: Admin, group_id: str, timeout: float) -> GroupState:
    started = time.monotonic()
    try:
        with anyio.fail_after(timeout):
            description = await admin.describe_share_group(group_id, timeout=timeout)
            offsets = await admin.describe_share_group_offsets(group_id, timeout=timeout)
    except (errors.KafkaError, TimeoutError) as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        logger.warning("share group %r could not be read: %s", group_id, reason)
        return GroupState(group_id, None, error=reason, seconds=time.monotonic() - started)
    try:
        with anyio.fail_after(timeout):
            ages = await _oldest_ages(admin, offsets)
    except (errors.KafkaError, TimeoutError) as exc:
        logger.info("share group %r: oldest records not read: %s", group_id, exc)
        ages = {}
    try:
        with anyio.fail_after(timeout):
            bounds = await _lag_bounds(admin, offsets)
    except (errors.KafkaError, TimeoutError) as exc:
        logger.info("share group %r: bounds of unknown lags not read: %s", group_id, exc)
        bounds = {}
    return GroupState(
        group_id,
        description,
        offsets,
        seconds=time.monotonic() - started,
        oldest_age=ages,
        lag_bounds=bounds,
    )


async def _lag_bounds(
    admin: Admin, offsets: dict[TopicPartition, SharePartitionOffset]
) -> dict[TopicPartition, int]:
    """For each partition whose lag is unknown, the most records it can have pending: its
    high watermark minus the share start offset (the log start offset without one)."""
    unknown = [tp for tp, o in offsets.items() if o.lag < 0]
    if not unknown:
        return {}
    ends = await admin.list_offsets(unknown, "latest")
    starts = await admin.list_offsets(unknown, "earliest")
    out: dict[TopicPartition, int] = {}
    for tp in unknown:
        first = max(starts[tp], offsets[tp].start_offset)
        out[tp] = max(0, ends[tp] - first)
    return out


async def _oldest_ages(
    admin: Admin, offsets: dict[TopicPartition, SharePartitionOffset]
) -> dict[TopicPartition, float]:
    """Seconds since the timestamp of the record at each pending partition's start offset,
    read with a plain Fetch (it takes nothing from the group) from each partition's leader."""
    pending = {tp: o.start_offset for tp, o in offsets.items() if o.lag > 0 and o.start_offset >= 0}
    if not pending:
        return {}
    stamps = await admin._peek_timestamps(pending)
    now_ms = time.time() * 1000.0
    return {tp: max(0.0, (now_ms - ms) / 1000.0) for tp, ms in stamps.items()}


async def collect_groups(
    admin: Admin, group_ids: Sequence[str], *, timeout: float = 10.0
) -> list[GroupState]:
    """Read every group in ``group_ids`` at once (one pair of requests per group, to its
    coordinator), each bounded by ``timeout`` seconds. A group that cannot be read comes
    back with its ``error`` set; it never fails the others."""
    out: list[GroupState | None] = [None] * len(group_ids)

    async def one(i: int, group_id: str) -> None:
        out[i] = await _collect_one(admin, group_id, timeout)

    async with anyio.create_task_group() as tg:
        for i, group_id in enumerate(group_ids):
            tg.start_soon(one, i, group_id)
    return [s for s in out if s is not None]


# -- the text format -----------------------------------------------------------------------

_FAMILIES: tuple[tuple[str, str], ...] = (
    ("sharecon_share_group_up", "1 if the group could be described at this scrape, else 0."),
    ("sharecon_share_group_scrape_duration_seconds", "Seconds reading the group took."),
    (
        "sharecon_share_group_state",
        "The group's state (Empty, Stable, ...): 1 on the current state's sample.",
    ),
    ("sharecon_share_group_epoch", "The group epoch."),
    ("sharecon_share_group_members", "Members of the group."),
    ("sharecon_share_group_partitions", "Share-partitions the group has state for."),
    (
        "sharecon_share_group_lag",
        "Records of the group not yet delivery-complete: the sum of its partitions' known lags.",
    ),
    (
        "sharecon_share_group_lag_unknown_partitions",
        "Share-partitions of the group whose lag the broker did not report.",
    ),
    (
        "sharecon_share_partition_lag",
        "Records of the share-partition not yet delivery-complete (KIP-1226, Kafka 4.2+).",
    ),
    (
        "sharecon_share_partition_lag_unknown",
        "1 for each share-partition whose lag the broker did not report.",
    ),
    (
        "sharecon_share_partition_lag_upper_bound",
        "Most records a share-partition of unknown lag can have pending (high watermark "
        "minus start offset).",
    ),
    (
        "sharecon_share_group_lag_upper_bound",
        "The known lags plus the bounds of the unknown ones: never below the records pending.",
    ),
    (
        "sharecon_share_group_oldest_record_age_seconds",
        "Seconds since the timestamp of the group's oldest record not yet delivery-complete.",
    ),
    (
        "sharecon_share_partition_oldest_record_age_seconds",
        "Seconds since the timestamp of the share-partition's record at its start offset.",
    ),
    (
        "sharecon_share_partition_start_offset",
        "The share-partition start offset: the earliest record the group has to finish.",
    ),
    (
        "sharecon_share_group_member_assigned_partitions",
        "Partitions assigned to the member.",
    ),
    ("sharecon_share_group_assignment", "1 for each partition assigned to a member."),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(states: Sequence[GroupState]) -> str:
    """``states`` in the Prometheus text exposition format (version 0.0.4)."""
    samples: dict[str, list[str]] = {name: [] for name, _ in _FAMILIES}

    def add(name: str, labels: Iterable[tuple[str, str]], value: float) -> None:
        samples[name].append(f"{name}{{{_labels(labels)}}} {_number(value)}")

    for s in states:
        g = (("group", s.group_id),)
        add("sharecon_share_group_up", g, 0 if s.description is None else 1)
        add("sharecon_share_group_scrape_duration_seconds", g, s.seconds)
        d = s.description
        if d is None:
            continue
        add("sharecon_share_group_state", (*g, ("state", d.state)), 1)
        add("sharecon_share_group_epoch", g, d.group_epoch)
        add("sharecon_share_group_members", g, len(d.members))
        add("sharecon_share_group_partitions", g, len(s.offsets))
        add("sharecon_share_group_lag", g, s.lag)
        add("sharecon_share_group_lag_unknown_partitions", g, s.unknown_lag_partitions)
        bound = s.lag_upper_bound
        if bound is not None:
            add("sharecon_share_group_lag_upper_bound", g, bound)
        if s.oldest_age:
            add("sharecon_share_group_oldest_record_age_seconds", g, max(s.oldest_age.values()))
        for tp in sorted(s.offsets, key=lambda tp: (tp.topic, tp.partition)):
            o = s.offsets[tp]
            where = (*g, ("topic", tp.topic), ("partition", str(tp.partition)))
            if o.lag >= 0:
                add("sharecon_share_partition_lag", where, o.lag)
            else:
                add("sharecon_share_partition_lag_unknown", where, 1)
                if tp in s.lag_bounds:
                    add("sharecon_share_partition_lag_upper_bound", where, s.lag_bounds[tp])
            add("sharecon_share_partition_start_offset", where, o.start_offset)
            if tp in s.oldest_age:
                add("sharecon_share_partition_oldest_record_age_seconds", where, s.oldest_age[tp])
        for m in sorted(d.members, key=lambda m: m.member_id):
            who = (*g, ("member_id", m.member_id), ("client_id", m.client_id))
            add(
                "sharecon_share_group_member_assigned_partitions",
                (*who, ("client_host", m.client_host)),
                len(m.assignment),
            )
            for tp in m.assignment:
                add(
                    "sharecon_share_group_assignment",
                    (*who, ("topic", tp.topic), ("partition", str(tp.partition))),
                    1,
                )
    lines = []
    for name, help_text in _FAMILIES:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(samples[name])
    return "\n".join(lines) + "\n"


# -- the HTTP endpoint ---------------------------------------------------------------------

_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Exporter:
    """Serves :func:`render` of ``group_ids`` over HTTP: ``GET /metrics`` (and ``/``) reads
    the groups from the broker then and there; ``GET /healthz`` answers ``ok`` without
    asking the broker.

    Scrapes that arrive together share one read of the groups, and one read is reused
    for ``min_interval`` seconds, so several scrapers cost the broker no more than one.

    :param admin: a started :class:`~sharecon.admin.Admin`.
    :param group_ids: the share groups to report.
    :param timeout: seconds each group's read may take.
    :param min_interval: seconds a read is reused for.
    """

    def __init__(
        self,
        admin: Admin,
        group_ids: Sequence[str],
        *,
        timeout: float = 10.0,
        min_interval: float = 1.0,
    ) -> None:
        if not group_ids:
            raise errors.ConfigError("the exporter needs at least one share group")
        self._admin = admin
        self._groups = list(dict.fromkeys(group_ids))
        self._timeout = timeout
        self._min_interval = min_interval
        self._lock = anyio.Lock()
        self._last: tuple[float, str] | None = None
        #: Scrapes served (reads of the broker are fewer when scrapes overlap).
        self.scrapes = 0

    async def scrape(self) -> str:
        """The groups as Prometheus text, read now or reused (see the class docs)."""
        async with self._lock:
            now = time.monotonic()
            self.scrapes += 1
            if self._last is not None and now - self._last[0] < self._min_interval:
                return self._last[1]
            text = render(await collect_groups(self._admin, self._groups, timeout=self._timeout))
            self._last = (time.monotonic(), text)
            return text

    async def serve(
        self,
        host: str,
        port: int,
        *,
        on_listening: Callable[[str, int], None] | None = None,
    ) -> None:
        """Listen on ``host``:``port`` until cancelled; ``on_listening(host, port)`` is
        called once the socket listens (with the port the system chose for ``port=0``)."""
        await serve_http(
            host,
            port,
            self._route,
            not_found="not found: try /metrics\n",
            on_listening=on_listening,
        )

    async def _route(self, path: str) -> Response | None:
        if path in ("/metrics", "/"):
            return Response(200, await self.scrape(), _CONTENT_TYPE)
        if path == "/healthz":
            return Response(200, "ok\n")
        return None
