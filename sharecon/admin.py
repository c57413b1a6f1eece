"""A small admin client: topics, group configs and share-group inspection.

::

    async with Admin("localhost:9092") as admin:
        await admin.create_topics(["orders"], num_partitions=3)
        await admin.alter_group_config("billing", {"share.auto.offset.reset": "earliest"})
        print(await admin.describe_share_group("billing"))

It covers what tests, the CLI and the share consumer need, not the whole admin API.
Besides its own result types it exports the cluster's description types its results
hold: :class:`BrokerAddress`, :class:`ClusterMetadata` (from :meth:`Admin.metadata`) and
:class:`PartitionInfo`.

Rules of this module:

1. Results are small frozen dataclasses; errors are :mod:`sharecon.errors` exceptions whose
   message names the topic or group they concern.
2. Group calls go to the group's coordinator. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
   COORDINATOR_LOAD_IN_PROGRESS and lost connections are retried with backoff (forgetting the
   cached coordinator where it moved), bounded by the call's timeout.
3. The Admin owns its task group (connection readers run there); leaving ``async with``
   closes every connection, shielded and bounded.
4. This module is the façade: the public API and the I/O (sending through the cluster,
   sleeping between attempts). What each request holds and what each answer means (error
   mapping per topic, partition and group; when to retry; the results) is decided in the
   sans-I/O engine, :mod:`sharecon._admin`, which has its own broker-free tests.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from sharecon import errors
from sharecon._admin import configs as config_calls
from sharecon._admin import groups as group_calls
from sharecon._admin import peek
from sharecon._admin import topics as topic_calls
from sharecon._admin.configs import (  # noqa: F401 - its old name here, which tests use
    redact_config_values as _redact_config_values,
)
from sharecon._admin.results import (
    ConfigEntry,
    ConfigSource,
    CreatedTopic,
    NewTopic,
    PartitionDescription,
    ResourceType,
    ShareGroupDescription,
    ShareGroupListing,
    ShareMemberDescription,
    SharePartitionOffset,
    TopicDescription,
)
from sharecon._admin.retry import GroupVerdict, Retries, group_verdict
from sharecon._lifecycle import ClientRuntime
from sharecon._net.cluster import Cluster, ClusterMetadata, PartitionInfo
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon._stats import AdminStats
from sharecon._telemetry import check_enabled, metric_points
from sharecon.metrics import ADMIN_METRICS
from sharecon.protocol import DeleteTopicsRequest

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from types import TracebackType

    from typing_extensions import Self

    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon.metrics import AdminMetrics
    from sharecon.protocol import Request, Response, VersionTable
    from sharecon.types import TopicPartition

R = TypeVar("R", bound="Response")

__all__ = [
    "Admin",
    "BrokerAddress",
    "ClusterDescription",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigSource",
    "CreatedTopic",
    "NewTopic",
    "PartitionDescription",
    "PartitionInfo",
    "ResourceType",
    "ShareGroupDescription",
    "ShareGroupListing",
    "ShareMemberDescription",
    "SharePartitionOffset",
    "TopicDescription",
]

logger = logging.getLogger(__name__)
#: Every admin metric as a KIP-714 point.
_ADMIN_POINTS = metric_points(ADMIN_METRICS, "admin")


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The cluster id, controller and brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerAddress, ...]


# -- the client ----------------------------------------------------------------------------


class Admin:
    """Admin calls against one cluster; use as ``async with Admin(bootstrap) as admin``
    (or ``await admin.start()`` ... ``await admin.aclose()``). Used before it is started,
    or after it is closed, it raises :class:`~sharecon.errors.ClientNotStartedError` or
    :class:`~sharecon.errors.ClientClosedError`.

    :param bootstrap: ``"host:port,..."`` or a sequence of ``"host:port"``.
    :param client_id: sent in request headers.
    :param connect_timeout: seconds to open and set up one connection.
    :param request_timeout: default seconds for each call (retries included).
    :param ssl_context: enables TLS (see :class:`~sharecon._net.connect.ConnectionConfig`).
    :param sasl: SASL credentials (:class:`~sharecon.config.SaslConfig`), or a Kerberos
        login (:class:`~sharecon.config.GssapiConfig`).
    :param config: a complete connection config instead of the separate options.
    :param enable_metrics_push: push this client's metrics (:meth:`metrics`) to brokers
        that ask for them (KIP-714 client telemetry, Java's ``enable.metrics.push``). Off
        by default, as for the Java ``Admin`` (its producer and consumer have it on).
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "sharecon-admin",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslConfig | GssapiConfig | None = None,
        config: ConnectionConfig | None = None,
        enable_metrics_push: bool = False,
    ) -> None:
        self._enable_metrics_push = check_enabled(enable_metrics_push)
        self._bootstrap = bootstrap
        self._config = config or ConnectionConfig(
            client_id=client_id,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            ssl_context=ssl_context,
            sasl=sasl,
        )
        self._runtime = ClientRuntime("Admin")
        #: The counters behind metrics() (on time.monotonic: see sharecon._stats).
        self._stats = AdminStats(time.monotonic(), client_id=self._config.client_id)

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def start(self) -> None:
        """Connect to the cluster: what entering ``async with`` does. Pair it with
        :meth:`aclose`.

        :raises BrokerConnectError: no bootstrap broker could be reached (the client is
            then closed: make a new one to try again).
        :raises ClientStateError: it was started already; :class:`ClientClosedError`
            (a subclass) once it was closed.
        """
        await self._runtime.start(
            lambda tg: Cluster(self._bootstrap, self._config, tg, metadata_max_age=0)
        )
        if self._enable_metrics_push:
            self._runtime.push_metrics(
                lambda: _ADMIN_POINTS(self.metrics()),
                resource={"client_id": self._config.client_id},
                request_timeout=self._config.request_timeout,
                logger=logger,
            )

    def metrics(self) -> AdminMetrics:
        """This client's request counts and latencies (see
        :data:`~sharecon.metrics.ADMIN_METRICS`); readable at any time."""
        return self._stats.snapshot(time.monotonic())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._runtime.begin_close()
        await self._runtime.shutdown()

    async def aclose(self) -> None:
        """Close the client (what leaving ``async with`` does). Closing again, or closing a
        client never started, does nothing."""
        await self.__aexit__(None, None, None)

    @property
    def _open_cluster(self) -> Cluster:
        """The underlying cluster view (errors as :attr:`ClientRuntime.cluster`)."""
        return self._runtime.cluster

    async def _request(self, node: int, request: Request[R], *, timeout: float) -> R:
        """``request`` sent to broker ``node``, counted in :meth:`metrics`."""
        started = time.monotonic()
        response = await self._open_cluster.request(node, request, timeout=timeout)
        now = time.monotonic()
        self._stats.on_response(now, now - started)
        return response

    async def _request_any(self, request: Request[R], *, timeout: float | None = None) -> R:
        """``request`` sent to any broker, counted in :meth:`metrics`."""
        started = time.monotonic()
        response = await self._open_cluster.request_any(request, timeout=timeout)
        now = time.monotonic()
        self._stats.on_response(now, now - started)
        return response

    async def _refresh(self, topics: list[str]) -> ClusterMetadata:
        """Fresh metadata for ``topics`` (a Metadata request, counted in :meth:`metrics`)."""
        started = time.monotonic()
        meta = await self._open_cluster.refresh_metadata(topics)
        now = time.monotonic()
        self._stats.on_response(now, now - started)
        return meta

    def _timeout(self, timeout: float | None) -> float:
        return self._config.request_timeout if timeout is None else timeout

    # -- cluster and topics ------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller id and brokers, from a fresh Metadata request."""
        meta = await self._refresh([])
        return ClusterDescription(
            meta.cluster_id,
            meta.controller_id,
            tuple(meta.brokers[n] for n in sorted(meta.brokers)),
        )

    @property
    def api_versions(self) -> VersionTable:
        """The Kafka API versions this client speaks with the cluster (the highest both it
        and the bootstrap broker offer, negotiated at start), and the broker's finalized
        features: ``admin.api_versions.get(ShareFetchRequest)`` is 2 or more from Kafka 4.2
        (record-limit acquisition). Read-only; no request is sent.

        :raises ClientNotStartedError: before ``start()`` (or ``async with``).
        """
        return self._open_cluster.versions

    async def find_coordinator(self, group_id: str, *, timeout: float | None = None) -> int:
        """The node id of the broker coordinating ``group_id`` now (a share group or any
        other group), as in :meth:`describe_cluster`'s brokers. Asks the cluster afresh
        (FindCoordinator), retrying while the coordinator is being elected or loaded.

        :raises BrokerError: a non-retriable error (e.g. ``GroupAuthorizationFailedError``),
            or the last retriable one when ``timeout`` passed; the message names the group.
        """
        cluster = self._open_cluster
        cluster.invalidate_coordinator(group_id)
        return await cluster.coordinator(group_id, timeout=self._timeout(timeout))

    async def metadata(self, topics: Iterable[str]) -> ClusterMetadata:
        """Fresh metadata (topic ids, leaders) for ``topics``."""
        return await self._refresh(list(topics))

    async def list_topics(self, *, internal: bool = False) -> dict[str, TopicDescription]:
        """Every topic in the cluster by name (internal ones such as ``__consumer_offsets`` on request)."""
        return await self._describe_topics(None, internal=internal)

    async def describe_topics(self, topics: Iterable[str]) -> dict[str, TopicDescription]:
        """Describe the named topics.

        :raises UnknownTopicOrPartitionError: naming a topic that does not exist.
        """
        names = list(topics)
        return await self._describe_topics(names, internal=True)

    async def _describe_topics(
        self, names: list[str] | None, *, internal: bool
    ) -> dict[str, TopicDescription]:
        response = await self._request_any(topic_calls.metadata_request(names))
        return topic_calls.topics_of(response, internal=internal)

    async def create_topics(
        self,
        topics: Iterable[str | NewTopic],
        *,
        num_partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        exist_ok: bool = False,
        wait: bool = True,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> tuple[CreatedTopic, ...]:
        """Create topics; plain names get ``num_partitions``, ``replication_factor``, ``configs``.

        :param exist_ok: a topic that already exists is not an error (``created=False``).
        :param wait: return only once every partition has a leader in the metadata, so the
            topic can be used at once.
        :raises TopicAlreadyExistsError: (without ``exist_ok``) naming the topic; other
            broker errors likewise. Every topic is attempted before the first error is raised.
        """
        limit = self._timeout(timeout)
        deadline = anyio.current_time() + limit
        specs, colliding = topic_calls.new_topics(
            topics,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=configs,
        )
        for name in colliding:
            # Kafka itself only warns: metrics replace '.' with '_', so a.b and a_b clash.
            logger.warning(
                "topic %r mixes '.' and '_': its metrics may collide with another topic's", name
            )
        if not specs:
            return ()
        request = topic_calls.create_topics_request(
            specs, timeout=limit, validate_only=validate_only
        )
        response = await self._request_any(request, timeout=limit + 5.0)
        results, existing = topic_calls.created_topics(response, exist_ok=exist_ok)
        if validate_only:
            return tuple(results)
        if existing:
            described = await self._describe_topics(existing, internal=True)
            results += topic_calls.existing_topics(existing, described)
        if wait:
            await self._wait_for_leaders({r.name: r.num_partitions for r in results}, deadline)
        return tuple(results)

    async def _wait_for_leaders(self, expected: Mapping[str, int], deadline: float) -> None:
        retries = Retries(deadline)
        while True:
            meta = await self._refresh(list(expected))
            pending = topic_calls.leaderless(expected, meta.partitions)
            if not pending:
                return
            delay = retries.delay(anyio.current_time(), at_deadline=True)
            if delay is None:
                raise errors.KafkaTimeoutError(
                    f"topics {', '.join(sorted(pending))} have no leader for every partition yet"
                )
            await anyio.sleep(delay)

    async def delete_topics(
        self, topics: Iterable[str], *, missing_ok: bool = False, timeout: float | None = None
    ) -> None:
        """Delete topics by name.

        :param missing_ok: a topic that does not exist is not an error.
        :raises UnknownTopicOrPartitionError: (without ``missing_ok``) naming the topic.
        """
        names = list(topics)
        if not names:
            return
        limit = self._timeout(timeout)
        conn = await self._open_cluster.any_connection()
        assert conn.versions is not None
        request = topic_calls.delete_topics_request(
            names, version=conn.versions.version(DeleteTopicsRequest), timeout=limit
        )
        response = await self._request_any(request, timeout=limit + 5.0)
        topic_calls.check_deleted(response, missing_ok=missing_ok)
        self._open_cluster.forget_topics(names)

    async def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        which: Literal["earliest", "latest"],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """Each partition's first offset (``"earliest"``, the log start) or the offset the
        next record will get (``"latest"``, the high watermark), asked of its leader.

        Leader changes are retried (with a metadata refresh) until the call's deadline.

        :raises ConfigError: ``which`` is neither ``"earliest"`` nor ``"latest"``.
        :raises UnknownTopicOrPartitionError: naming a topic or partition that does not exist.
        :raises KafkaTimeoutError: a partition still had no usable leader at the deadline.
        """
        stamp = topic_calls.timestamp_of(which)
        wanted = list(dict.fromkeys(partitions))
        limit = self._timeout(timeout)
        deadline = anyio.current_time() + limit
        retries = Retries(deadline)
        out: dict[TopicPartition, int] = {}
        while True:
            pending = [tp for tp in wanted if tp not in out]
            if not pending:
                return {tp: out[tp] for tp in wanted}
            meta = await self._refresh(sorted({tp.topic for tp in pending}))
            by_leader = topic_calls.offsets_by_leader(pending, meta.partitions, meta.topic_errors)
            last: errors.KafkaError | None = None
            for leader, asked in sorted(by_leader.items()):
                request = topic_calls.list_offsets_request(asked, timestamp=stamp, timeout=limit)
                remaining = max(deadline - anyio.current_time(), 0.001)
                try:
                    response = await self._request(leader, request, timeout=remaining)
                except (errors.BrokerDisconnectedError, errors.BrokerConnectError) as exc:
                    last = exc
                    continue
                last = topic_calls.read_offsets(response, out) or last
            if all(tp in out for tp in wanted):
                continue
            delay = retries.delay(anyio.current_time())
            if delay is None:
                raise topic_calls.offsets_timeout(which, wanted, out, limit, last)
            await anyio.sleep(delay)

    # -- group configs -----------------------------------------------------------------------

    async def alter_group_config(
        self, group_id: str, configs: Mapping[str, str | None], *, timeout: float | None = None
    ) -> None:
        """Set (or, for a None value, remove) dynamic configs of a group.

        For example ``{"share.auto.offset.reset": "earliest"}``. The group need not exist yet.

        :raises InvalidConfigError: naming the group and the broker's reason.
        """
        await self.alter_configs(ResourceType.GROUP, group_id, configs, timeout=timeout)

    async def describe_group_config(
        self,
        group_id: str,
        keys: Iterable[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, ConfigEntry]:
        """The group's configs (all, or only ``keys``), by name."""
        return await self.describe_configs(ResourceType.GROUP, group_id, keys, timeout=timeout)

    async def alter_configs(
        self,
        resource_type: ResourceType,
        name: str,
        configs: Mapping[str, str | None],
        *,
        timeout: float | None = None,
    ) -> None:
        """Incrementally set (value) or remove (None) dynamic configs of one resource.

        :raises BrokerError: e.g. InvalidConfigError, naming the resource and the broker's reason.
        """
        request = config_calls.alter_configs_request(resource_type, name, configs)
        response = await self._request_any(request, timeout=self._timeout(timeout))
        config_calls.check_altered(response, resource_type, name, configs)

    async def describe_configs(
        self,
        resource_type: ResourceType,
        name: str,
        keys: Iterable[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, ConfigEntry]:
        """Configs of one resource (all, or only ``keys``), by config name."""
        request = config_calls.describe_configs_request(resource_type, name, keys)
        response = await self._request_any(request, timeout=self._timeout(timeout))
        return config_calls.configs_of(response, resource_type, name)

    # -- share groups ------------------------------------------------------------------------

    async def list_share_groups(
        self, *, states: Iterable[str] = (), timeout: float | None = None
    ) -> tuple[ShareGroupListing, ...]:
        """Every share group in the cluster (each broker lists the groups it coordinates).

        :param states: only groups in these states (``"Empty"``, ``"Stable"``, ...).
        """
        request = group_calls.list_groups_request(states)
        meta = await self._refresh([])
        found: dict[str, ShareGroupListing] = {}
        for node_id in sorted(meta.brokers):
            response = await self._request(node_id, request, timeout=self._timeout(timeout))
            for g in group_calls.groups_listed(response, node_id):
                found[g.group_id] = g
        return tuple(found[k] for k in sorted(found))

    async def describe_share_group(
        self, group_id: str, *, timeout: float | None = None
    ) -> ShareGroupDescription:
        """Members, assignments and state of a share group.

        :raises GroupIdNotFoundError: naming the group if it does not exist.
        """
        response = await self._group_call(
            group_id,
            group_calls.describe_group_request(group_id),
            group_calls.first_group_error,
            timeout,
        )
        return group_calls.share_group_of(response, group_id)

    async def describe_share_group_offsets(
        self,
        group_id: str,
        topics: Mapping[str, Iterable[int]] | Iterable[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset]:
        """The group's start offsets (and lag, where the broker reports it).

        :param topics: None for every partition the group has state for; topic names for all
            their partitions; or ``{topic: partitions}``.
        :raises BrokerError: naming the group (and topic-partition for partition errors).
        """
        wanted: Mapping[str, Iterable[int]] | None
        if topics is None:
            wanted = None
        elif isinstance(topics, dict):
            wanted = {t: sorted(ps) for t, ps in topics.items()}
        else:
            names = list(topics)
            meta = await self._refresh(names)
            wanted = group_calls.offsets_wanted(names, meta.partitions)
        response = await self._group_call(
            group_id,
            group_calls.describe_offsets_request(group_id, wanted),
            group_calls.first_group_error,
            timeout,
        )
        return group_calls.share_offsets_of(response, group_id)

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout: float | None = None,
    ) -> None:
        """Set the group's start offset per partition. The group must have no active members.

        :raises NonEmptyGroupError: the group has members (naming it); other errors likewise,
            naming the topic-partition when the broker reported it per partition.
        """
        request = group_calls.alter_offsets_request(group_id, offsets)
        response = await self._group_call(group_id, request, group_calls.top_level_error, timeout)
        group_calls.check_offsets_altered(response, group_id)

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout: float | None = None
    ) -> None:
        """Delete the group's state for whole topics. The group must have no active members.

        :raises BrokerError: naming the group and, for per-topic errors, the topic.
        """
        request = group_calls.delete_offsets_request(group_id, topics)
        response = await self._group_call(group_id, request, group_calls.top_level_error, timeout)
        group_calls.check_offsets_deleted(response, group_id)

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, errors.BrokerError | None]:
        """Delete share groups (DeleteGroups, sent to each group's coordinator).

        Deleting a group removes it with its state on every partition (start offsets,
        delivery counts); its dynamic group configs (``share.auto.offset.reset``, ...)
        are the broker's to keep or drop. Groups are deleted one request each, all at once.

        Only share groups are deleted: each id is first described with ShareGroupDescribe,
        so a consumer or classic group of that name is reported as not found and kept.

        :returns: per group id, ``None`` when it was deleted, else the error, naming the
            group: :class:`~sharecon.errors.NonEmptyGroupError` (it has active members;
            stop its consumers first), :class:`~sharecon.errors.GroupIdNotFoundError` (no
            such share group), :class:`~sharecon.errors.GroupAuthorizationFailedError`, ...
        :raises ConfigError: an empty group id.
        :raises KafkaError: a failure that is not about one group (the cluster cannot be
            reached, the deadline passed).
        """
        ids = list(dict.fromkeys(group_ids))
        if any(not g for g in ids):
            raise errors.ConfigError("delete_share_groups: a group id must not be empty")
        results: dict[str, errors.BrokerError | None] = {}
        failures: list[errors.KafkaError] = []

        async def delete_one(group_id: str) -> None:
            # Caught here and raised after the task group, so the caller gets the error
            # itself rather than an ExceptionGroup around it.
            try:
                results[group_id] = await self._delete_share_group(group_id, timeout)
            except errors.KafkaError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for group_id in ids:
                tg.start_soon(delete_one, group_id)
        if failures:
            raise failures[0]
        return {g: results[g] for g in ids}

    async def _delete_share_group(
        self, group_id: str, timeout: float | None
    ) -> errors.BrokerError | None:
        limit = self._timeout(timeout)
        deadline = anyio.current_time() + limit
        try:
            state = (await self.describe_share_group(group_id, timeout=limit)).state
        except errors.GroupIdNotFoundError:
            state = "Dead"
        except errors.BrokerError as exc:
            return exc
        if group_calls.is_dead(state):
            return group_calls.not_found(group_id)
        remaining = max(deadline - anyio.current_time(), 0.001)
        try:
            response = await self._group_call(
                group_id,
                group_calls.delete_group_request(group_id),
                group_calls.delete_response_error(group_id),
                remaining,
            )
        except errors.BrokerError as exc:
            return exc
        return group_calls.delete_group_result(response, group_id)

    # -- for sharecon's own tools ----------------------------------------------------------

    async def _peek_timestamps(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The timestamp (ms) of the record at each partition's offset in ``offsets``, read
        with a plain Fetch from its leader: as a client, not a group member, so nothing is
        acquired (the exporter's oldest pending record). Partitions without a leader, or
        with no record there, are left out (:mod:`sharecon._admin.peek`)."""
        meta = await self._refresh(sorted({tp.topic for tp in offsets}))
        requests = peek.peek_requests(offsets, meta.partitions, meta.topic_ids)
        out: dict[TopicPartition, int] = {}
        for leader, request in requests.items():
            response = await self._request(leader, request, timeout=self._timeout(None))
            out.update(peek.peeked_timestamps(response, offsets, meta.topic_names))
        return out

    # -- coordinator calls -------------------------------------------------------------------

    async def _group_call(
        self,
        group_id: str,
        body: Request[R],
        error_of: Callable[[R], tuple[int, str | None]],
        timeout: float | None,
    ) -> R:
        """Send ``body`` to the group's coordinator until its answer (``error_of``) carries
        no coordinator error, or the deadline (:mod:`sharecon._admin.retry`'s rule 1)."""
        cluster = self._open_cluster
        deadline = anyio.current_time() + self._timeout(timeout)
        retries = Retries(deadline)
        while True:
            remaining = max(deadline - anyio.current_time(), 0.001)
            failure: errors.KafkaError
            try:
                node = await cluster.coordinator(group_id, timeout=remaining)
                response = await self._request(node, body, timeout=remaining)
            except (errors.BrokerDisconnectedError, errors.BrokerConnectError) as exc:
                cluster.invalidate_coordinator(group_id)
                failure = exc
            else:
                code, message = error_of(response)
                verdict = group_verdict(code)
                if verdict is GroupVerdict.DONE:
                    return response
                err = group_calls.group_error(group_id, type(body).api_name, code, message)
                assert err is not None
                if verdict is GroupVerdict.RAISE:
                    raise err
                if verdict is GroupVerdict.MOVED:
                    cluster.invalidate_coordinator(group_id)
                failure = err
            delay = retries.delay(anyio.current_time())
            if delay is None:
                raise failure
            logger.debug("group %r: %s; retrying in %.2f s", group_id, failure, delay)
            await anyio.sleep(delay)
