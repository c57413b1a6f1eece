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
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._lifecycle import ClientRuntime
from sharecon._net.cluster import Cluster, ClusterMetadata, PartitionInfo
from sharecon._net.connect import ConnectionConfig
from sharecon._net.connection import BrokerAddress
from sharecon._stats import AdminStats
from sharecon._telemetry import check_enabled, metric_points
from sharecon.metrics import ADMIN_METRICS
from sharecon.protocol import (
    AlterShareGroupOffsetsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeShareGroupOffsetsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ShareGroupDescribeRequest,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from sharecon.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig
from sharecon.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequestTopic,
)
from sharecon.protocol.messages.delete_topics import DeleteTopicState
from sharecon.protocol.messages.describe_configs import DescribeConfigsResource
from sharecon.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from sharecon.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
)
from sharecon.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsTopic
from sharecon.protocol.messages.metadata import MetadataRequestTopic
from sharecon.protocol.names import topic_name_may_collide, validate_topic_name
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    import ssl
    import uuid
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from types import TracebackType

    from typing_extensions import Self

    from sharecon._net.sasl import SaslConfig
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon.metrics import AdminMetrics
    from sharecon.protocol import DeleteGroupsResponse, Request, Response

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

# The coordinator moved: forget it, look it up again and retry.
_COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
# ... plus a coordinator still loading the group: retry the same one after a backoff.
_COORDINATOR_RETRY = _COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_SET, _DELETE = 0, 1  # IncrementalAlterConfigs operations
# Config names whose values are credentials (ssl.key.password, sasl.jaas.config,
# ...oauthbearer.client.secret, ssl.keystore.key): such a value never appears in an error.
_SENSITIVE_CONFIG = re.compile(r"password|secret|jaas|token|credential|keystore\.key", re.I)
_HIDDEN = "[hidden]"
# ListOffsets timestamps that stand for "the first offset" and "the next offset to write".
_EARLIEST, _LATEST = -2, -1
# The partition's leader moved or is not known yet: refresh the metadata and ask again.
_LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


class ResourceType(IntEnum):
    """Config resource types (DescribeConfigs / IncrementalAlterConfigs)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a config value comes from (DescribeConfigs ``config_source``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTopic:
    """A topic to create. ``-1`` for partitions or replication factor means the broker default."""

    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """A topic the broker created (or, with ``exist_ok``, found already there)."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    created: bool = True


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition of a described topic."""

    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic as the Metadata API describes it."""

    name: str
    topic_id: uuid.UUID
    internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The cluster id, controller and brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerAddress, ...]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config value of a resource."""

    name: str
    value: str | None
    source: ConfigSource | int
    read_only: bool
    sensitive: bool

    @property
    def is_default(self) -> bool:
        """True when no override is set (the value is the broker's default)."""
        return self.source in (ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG)


@dataclass(frozen=True, slots=True)
class ShareGroupListing:
    """A share group as ListGroups reports it."""

    group_id: str
    state: str


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    """One member of a share group and its assignment."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A share group as ShareGroupDescribe reports it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...]


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share group's start offset on one partition (``-1`` when it has none yet).

    ``lag`` is the number of records not yet delivered and acknowledged (``-1`` when unknown,
    or from brokers that only speak DescribeShareGroupOffsets v0).
    """

    topic: str
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int


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
        request = MetadataRequest(
            topics=None if names is None else tuple(MetadataRequestTopic(name=n) for n in names),
            allow_auto_topic_creation=False,
        )
        response = await self._request_any(request)
        out: dict[str, TopicDescription] = {}
        for t in response.topics:
            if t.error_code:
                err = errors.error_for_code(t.error_code, f"topic {t.name!r}")
                assert err is not None
                raise err
            if (t.is_internal and not internal) or not t.name:
                continue
            parts = tuple(
                PartitionDescription(
                    p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes
                )
                for p in sorted(t.partitions, key=lambda p: p.partition_index)
            )
            out[t.name] = TopicDescription(t.name, t.topic_id, t.is_internal, parts)
        return out

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
        specs = [
            t
            if isinstance(t, NewTopic)
            else NewTopic(
                name=t,
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                configs=dict(configs or {}),
            )
            for t in topics
        ]
        for s in specs:
            validate_topic_name(s.name, param="create_topics")
            if topic_name_may_collide(s.name):
                # Kafka itself only warns: metrics replace '.' with '_', so a.b and a_b clash.
                logger.warning(
                    "topic %r mixes '.' and '_': its metrics may collide with another topic's",
                    s.name,
                )
        if not specs:
            return ()
        request = CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=s.name,
                    num_partitions=s.num_partitions,
                    replication_factor=s.replication_factor,
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in s.configs.items()
                    ),
                )
                for s in specs
            ),
            timeout_ms=int(limit * 1000),
            validate_only=validate_only,
        )
        response = await self._request_any(request, timeout=limit + 5.0)
        results: list[CreatedTopic] = []
        failure: errors.BrokerError | None = None
        existing: list[str] = []
        for r in response.topics:
            if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and exist_ok:
                existing.append(r.name)
                continue
            if r.error_code:
                if failure is None:
                    failure = errors.error_for_code(
                        r.error_code,
                        f"creating topic {r.name!r}: {r.error_message or ''}".rstrip(": "),
                    )
                continue
            results.append(CreatedTopic(r.name, r.topic_id, r.num_partitions, r.replication_factor))
        if failure is not None:
            raise failure
        if validate_only:
            return tuple(results)
        if existing:
            described = await self._describe_topics(existing, internal=True)
            for name in existing:
                d = described[name]
                rf = len(d.partitions[0].replicas) if d.partitions else -1
                results.append(CreatedTopic(name, d.topic_id, len(d.partitions), rf, created=False))
        if wait:
            await self._wait_for_leaders({r.name: r.num_partitions for r in results}, deadline)
        return tuple(results)

    async def _wait_for_leaders(self, expected: Mapping[str, int], deadline: float) -> None:
        attempt = 0
        while True:
            meta = await self._refresh(list(expected))
            pending = [
                name
                for name, count in expected.items()
                if len(meta.partitions.get(name, ())) < max(count, 1)
                or any(p.leader_id < 0 for p in meta.partitions.get(name, ()))
            ]
            if not pending:
                return
            delay = RETRY_BACKOFF.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay > deadline:
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
        version = conn.versions.version(DeleteTopicsRequest)
        if version >= 6:
            request = DeleteTopicsRequest(
                topics=tuple(DeleteTopicState(name=n) for n in names), timeout_ms=int(limit * 1000)
            )
        else:
            request = DeleteTopicsRequest(topic_names=tuple(names), timeout_ms=int(limit * 1000))
        response = await self._request_any(request, timeout=limit + 5.0)
        for r in response.responses:
            if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and missing_ok:
                continue
            err = errors.error_for_code(
                r.error_code,
                f"deleting topic {r.name or r.topic_id!s}"
                + (f": {r.error_message}" if r.error_message else ""),
            )
            if err is not None:
                raise err
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
        if which not in ("earliest", "latest"):
            raise errors.ConfigError(f"which must be 'earliest' or 'latest', not {which!r}")
        stamp = _EARLIEST if which == "earliest" else _LATEST
        wanted = list(dict.fromkeys(partitions))
        limit = self._timeout(timeout)
        deadline = anyio.current_time() + limit
        out: dict[TopicPartition, int] = {}
        attempt = 0
        while True:
            pending = [tp for tp in wanted if tp not in out]
            if not pending:
                return {tp: out[tp] for tp in wanted}
            meta = await self._refresh(sorted({tp.topic for tp in pending}))
            by_leader: dict[int, dict[str, list[int]]] = {}
            for tp in pending:
                parts = {p.partition: p for p in meta.partitions.get(tp.topic, ())}
                if tp.topic not in meta.partitions:
                    code = meta.topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if code in _LEADER_MOVED:
                        continue
                    err = errors.error_for_code(code, f"topic {tp.topic!r}")
                    raise err or errors.UnknownTopicOrPartitionError(f"topic {tp.topic!r}")
                info = parts.get(tp.partition)
                if info is None:
                    raise errors.UnknownTopicOrPartitionError(
                        f"topic {tp.topic!r} has no partition {tp.partition}"
                    )
                if info.leader_id >= 0:
                    by_leader.setdefault(info.leader_id, {}).setdefault(tp.topic, []).append(
                        tp.partition
                    )
            last: errors.KafkaError | None = None
            for leader, topics in sorted(by_leader.items()):
                request = ListOffsetsRequest(
                    replica_id=-1,  # a client, not a follower
                    topics=tuple(
                        ListOffsetsTopic(
                            name=t,
                            partitions=tuple(
                                ListOffsetsPartition(partition_index=p, timestamp=stamp)
                                for p in sorted(ps)
                            ),
                        )
                        for t, ps in topics.items()
                    ),
                    timeout_ms=int(limit * 1000),
                )
                remaining = max(deadline - anyio.current_time(), 0.001)
                try:
                    response = await self._request(leader, request, timeout=remaining)
                except (errors.BrokerDisconnectedError, errors.BrokerConnectError) as exc:
                    last = exc
                    continue
                for t in response.topics:
                    for p in t.partitions:
                        where = f"{t.name}-{p.partition_index}"
                        if p.error_code in _LEADER_MOVED:
                            last = errors.error_for_code(
                                p.error_code, f"listing offsets of {where}"
                            )
                            continue
                        err = errors.error_for_code(p.error_code, f"listing offsets of {where}")
                        if err is not None:
                            raise err
                        out[TopicPartition(t.name, p.partition_index)] = p.offset
            if all(tp in out for tp in wanted):
                continue
            delay = RETRY_BACKOFF.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay >= deadline:
                missing = ", ".join(f"{tp.topic}-{tp.partition}" for tp in wanted if tp not in out)
                raise errors.KafkaTimeoutError(
                    f"no {which} offset for {missing} within {limit:g} s"
                    + (f" (last error: {last})" if last is not None else " (no leader)")
                )
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
        request = IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=tuple(
                        AlterableConfig(
                            name=k,
                            config_operation=_DELETE if v is None else _SET,
                            value=v,
                        )
                        for k, v in configs.items()
                    ),
                ),
            )
        )
        response = await self._request_any(request, timeout=self._timeout(timeout))
        for r in response.responses:
            detail = r.error_message and _redact_config_values(r.error_message, configs)
            err = errors.error_for_code(
                r.error_code,
                f"altering configs of {_resource(resource_type, name)}"
                + (f": {detail}" if detail else ""),
            )
            if err is not None:
                raise err

    async def describe_configs(
        self,
        resource_type: ResourceType,
        name: str,
        keys: Iterable[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, ConfigEntry]:
        """Configs of one resource (all, or only ``keys``), by config name."""
        request = DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configuration_keys=None if keys is None else tuple(keys),
                ),
            )
        )
        response = await self._request_any(request, timeout=self._timeout(timeout))
        out: dict[str, ConfigEntry] = {}
        for result in response.results:
            err = errors.error_for_code(
                result.error_code,
                f"describing configs of {_resource(resource_type, name)}"
                + (f": {result.error_message}" if result.error_message else ""),
            )
            if err is not None:
                raise err
            for c in result.configs:
                out[c.name] = ConfigEntry(
                    c.name, c.value, _source(c.config_source), c.read_only, c.is_sensitive
                )
        return out

    # -- share groups ------------------------------------------------------------------------

    async def list_share_groups(
        self, *, states: Iterable[str] = (), timeout: float | None = None
    ) -> tuple[ShareGroupListing, ...]:
        """Every share group in the cluster (each broker lists the groups it coordinates).

        :param states: only groups in these states (``"Empty"``, ``"Stable"``, ...).
        """
        request = ListGroupsRequest(states_filter=tuple(states), types_filter=("share",))
        meta = await self._refresh([])
        found: dict[str, ShareGroupListing] = {}
        for node_id in sorted(meta.brokers):
            response = await self._request(node_id, request, timeout=self._timeout(timeout))
            err = errors.error_for_code(response.error_code, f"listing groups on broker {node_id}")
            if err is not None:
                raise err
            for g in response.groups:
                found[g.group_id] = ShareGroupListing(g.group_id, g.group_state)
        return tuple(found[k] for k in sorted(found))

    async def describe_share_group(
        self, group_id: str, *, timeout: float | None = None
    ) -> ShareGroupDescription:
        """Members, assignments and state of a share group.

        :raises GroupIdNotFoundError: naming the group if it does not exist.
        """
        response = await self._group_call(
            group_id,
            ShareGroupDescribeRequest(group_ids=(group_id,)),
            lambda r: (
                (r.groups[0].error_code, r.groups[0].error_message)
                if r.groups
                else (ErrorCode.NONE, None)
            ),
            timeout,
        )
        g = next((g for g in response.groups if g.group_id == group_id), None)
        if g is None:
            raise errors.RemoteProtocolError(
                f"ShareGroupDescribe response does not mention group {group_id!r}"
            )
        return ShareGroupDescription(
            group_id=g.group_id,
            state=g.group_state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor=g.assignor_name,
            members=tuple(
                ShareMemberDescription(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    subscribed_topics=m.subscribed_topic_names,
                    assignment=tuple(
                        TopicPartition(tp.topic_name, p)
                        for tp in m.assignment.topic_partitions
                        for p in sorted(tp.partitions)
                    ),
                )
                for m in g.members
            ),
        )

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
        request_topics: tuple[DescribeShareGroupOffsetsRequestTopic, ...] | None
        if topics is None:
            request_topics = None
        else:
            if isinstance(topics, dict):
                wanted = {t: sorted(ps) for t, ps in topics.items()}
            else:
                names = list(topics)
                meta = await self._refresh(names)
                wanted = {}
                for name in names:
                    if name not in meta.partitions:
                        raise errors.UnknownTopicOrPartitionError(f"topic {name!r}")
                    wanted[name] = [p.partition for p in meta.partitions[name]]
            request_topics = tuple(
                DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
                for t, ps in wanted.items()
            )
        request = DescribeShareGroupOffsetsRequest(
            groups=(
                DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=request_topics),
            )
        )
        response = await self._group_call(
            group_id,
            request,
            lambda r: (
                (r.groups[0].error_code, r.groups[0].error_message)
                if r.groups
                else (ErrorCode.NONE, None)
            ),
            timeout,
        )
        out: dict[TopicPartition, SharePartitionOffset] = {}
        for g in response.groups:
            for t in g.topics:
                for p in t.partitions:
                    err = errors.error_for_code(
                        p.error_code,
                        f"group {group_id!r} partition {t.topic_name}-{p.partition_index}"
                        + (f": {p.error_message}" if p.error_message else ""),
                    )
                    if err is not None:
                        raise err
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    out[tp] = SharePartitionOffset(
                        t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag
                    )
        return out

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
        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                AlterShareGroupOffsetsRequestPartition(
                    partition_index=tp.partition, start_offset=offset
                )
            )
        request = AlterShareGroupOffsetsRequest(
            group_id=group_id,
            topics=tuple(
                AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        response = await self._group_call(
            group_id, request, lambda r: (r.error_code, r.error_message), timeout
        )
        for t in response.responses:
            for p in t.partitions:
                err = errors.error_for_code(
                    p.error_code,
                    f"altering offsets of group {group_id!r} on {t.topic_name}-{p.partition_index}"
                    + (f": {p.error_message}" if p.error_message else ""),
                )
                if err is not None:
                    raise err

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout: float | None = None
    ) -> None:
        """Delete the group's state for whole topics. The group must have no active members.

        :raises BrokerError: naming the group and, for per-topic errors, the topic.
        """
        request = DeleteShareGroupOffsetsRequest(
            group_id=group_id,
            topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
        )
        response = await self._group_call(
            group_id, request, lambda r: (r.error_code, r.error_message), timeout
        )
        for t in response.responses:
            err = errors.error_for_code(
                t.error_code,
                f"deleting offsets of group {group_id!r} on topic {t.topic_name!r}"
                + (f": {t.error_message}" if t.error_message else ""),
            )
            if err is not None:
                raise err

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
        # Some brokers describe an unknown id as a Dead group rather than an error.
        if state.lower() == "dead":
            return errors.GroupIdNotFoundError(f"share group {group_id!r} does not exist")

        def group_error(response: DeleteGroupsResponse) -> tuple[int, str | None]:
            # Only the coordinator errors go back to _group_call (it retries them); the
            # group's own verdict is read below.
            r = next((r for r in response.results if r.group_id == group_id), None)
            if r is not None and r.error_code in _COORDINATOR_RETRY:
                return r.error_code, r.error_message
            return ErrorCode.NONE, None

        remaining = max(deadline - anyio.current_time(), 0.001)
        try:
            response = await self._group_call(
                group_id, DeleteGroupsRequest(groups_names=(group_id,)), group_error, remaining
            )
        except errors.BrokerError as exc:
            return exc
        r = next((r for r in response.results if r.group_id == group_id), None)
        if r is None:
            raise errors.RemoteProtocolError(
                f"DeleteGroups response does not mention group {group_id!r}"
            )
        detail = f": {r.error_message}" if r.error_message else ""
        if r.error_code == ErrorCode.NON_EMPTY_GROUP:
            return errors.NonEmptyGroupError(
                f"cannot delete share group {group_id!r}: it has active members "
                f"(stop its consumers first){detail}"
            )
        if r.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return errors.GroupIdNotFoundError(f"share group {group_id!r} does not exist{detail}")
        return errors.error_for_code(r.error_code, f"deleting share group {group_id!r}{detail}")

    # -- coordinator calls -------------------------------------------------------------------

    async def _group_call(
        self,
        group_id: str,
        body: Request[R],
        error_of: Callable[[R], tuple[int, str | None]],
        timeout: float | None,
    ) -> R:
        cluster = self._open_cluster
        limit = self._timeout(timeout)
        deadline = anyio.current_time() + limit
        attempt = 0
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
                err = errors.error_for_code(
                    code,
                    f"group {group_id!r} ({type(body).api_name})"
                    + (f": {message}" if message else ""),
                )
                if err is None:
                    return response
                if code not in _COORDINATOR_RETRY:
                    raise err
                if code in _COORDINATOR_MOVED:
                    cluster.invalidate_coordinator(group_id)
                failure = err
            delay = RETRY_BACKOFF.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay >= deadline:
                raise failure
            logger.debug("group %r: %s; retrying in %.2f s", group_id, failure, delay)
            await anyio.sleep(delay)


def _resource(resource_type: ResourceType, name: str) -> str:
    return f"{resource_type.name.lower().replace('_', ' ')} {name!r}"


def _source(value: int) -> ConfigSource | int:
    try:
        return ConfigSource(value)
    except ValueError:
        return value


def _is_sensitive_config(name: str) -> bool:
    """True for a config whose value is a credential (its name mentions a password, a
    secret, a token, a JAAS config or a private key), so it is never shown."""
    return _SENSITIVE_CONFIG.search(name) is not None


def _redact_config_values(text: str, configs: Mapping[str, str | None]) -> str:
    """``text`` (e.g. a broker's error message) with the value of every sensitive config in
    ``configs`` replaced by ``[hidden]``: brokers may quote a value they refuse."""
    for key, value in configs.items():
        if value and _is_sensitive_config(key):
            text = text.replace(value, _HIDDEN)
    return text
