"""The cluster view: bootstrap, one connection per broker, metadata, group coordinators.

Rules of this module:

1. One cached :class:`BrokerConnection` per node id. A connection that is closed, broken, or
   idle past ``idle_timeout`` is replaced on next use; opens to one node are serialised, so
   concurrent callers share one new connection, and repeated failures to reach a node back
   off (jittered, exponential, capped) before the next attempt.
2. :class:`ClusterMetadata` is immutable. Every update (a Metadata response, a leader hint from
   a ShareFetch response, a coordinator's endpoint) builds a new one, so a reader always sees
   a consistent view without locks.
3. Leader epochs never go backwards: a Metadata response from a lagging broker cannot undo a
   newer leader learnt from a hint.
4. Every wait is bounded: bootstrap by ``bootstrap_timeout``, requests by their own or the
   configured timeout, coordinator lookups by a deadline, close by ``close_timeout``.
5. The task group passed in (owned by the top-level client) runs the connection readers and
   the periodic metadata refresh; :meth:`Cluster.aclose` stops both.
6. Rebootstrap (``metadata_recovery_strategy="rebootstrap"``, the default): when no known
   broker could be reached for the trigger time, or Metadata answers REBOOTSTRAP_REQUIRED,
   the learned brokers and their connections are dropped and the next request goes to the
   bootstrap names, resolved again (DNS is asked on every connect, never cached here). The
   decision is :class:`~sharecon._net.rebootstrap.RebootstrapPolicy`'s.
"""

from __future__ import annotations

import logging
import math
import ssl
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from sharecon import errors
from sharecon._backoff import RECONNECT_BACKOFF, RETRY_BACKOFF, Backoff
from sharecon._net.clock import event_loop_clock
from sharecon._net.connect import open_connection
from sharecon._net.connection import BrokerAddress, BrokerConnection, SentRequest
from sharecon._net.health import ClusterHealth, HealthTracker
from sharecon._net.numerals import ascii_int
from sharecon._net.rebootstrap import RebootstrapPolicy
from sharecon.protocol import (
    FindCoordinatorRequest,
    MetadataRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.metadata import MetadataRequestTopic
from sharecon.protocol.versions import CLIENT_VERSIONS, api_name
from sharecon.types import ZERO_UUID

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from sharecon._net.connect import ConnectionConfig
    from sharecon.protocol import MetadataResponse, Request, Response, VersionTable

R = TypeVar("R", bound="Response")

__all__ = [
    "GROUP_KEY_TYPE",
    "Cluster",
    "ClusterHealth",
    "ClusterMetadata",
    "PartitionInfo",
    "parse_bootstrap",
    "require_share_groups",
]

logger = logging.getLogger(__name__)

#: FindCoordinator key type for consumer and share groups.
GROUP_KEY_TYPE = 0
DEFAULT_PORT = 9092

# Metadata answers these for a topic that does not exist (any more): drop what we knew.
_TOPIC_GONE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)
# FindCoordinator answers these while the group's __consumer_offsets partition moves or loads.
_COORDINATOR_RETRY = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
_SHARE_APIS = (ShareGroupHeartbeatRequest, ShareFetchRequest, ShareAcknowledgeRequest)
_SHARE_FEATURE = "share.version"
# Seconds bootstrap keeps retrying while every address answers definitely that it cannot
# serve us (refused, or not Kafka): waiting out the connect timeout would help no one.
_DEFINITE_GIVE_UP = 2.0


# -- metadata ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as the metadata last described it. ``leader_id`` is -1 without a leader."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """An immutable snapshot of what the client knows about the cluster.

    ``partitions`` is keyed by topic name, each tuple sorted by partition number.
    ``topic_errors`` holds the error code of each topic the last refresh asked about and
    could not describe (keyed by the name, or by the id for a lookup by id).
    """

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: Mapping[int, BrokerAddress] = field(default_factory=lambda: MappingProxyType({}))
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: MappingProxyType({}))
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: MappingProxyType({}))
    partitions: Mapping[str, tuple[PartitionInfo, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    topic_errors: Mapping[str | uuid.UUID, int] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def partition(self, topic_id: uuid.UUID, partition: int) -> PartitionInfo | None:
        """The partition's info, or None if the topic id or partition is unknown."""
        name = self.topic_names.get(topic_id)
        if name is None:
            return None
        parts = self.partitions.get(name, ())
        # Partitions are numbered 0..n-1 and sorted, so the index is the number.
        if 0 <= partition < len(parts) and parts[partition].partition == partition:
            return parts[partition]
        for info in parts:
            if info.partition == partition:
                return info
        return None

    def leader_for(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The leader's node id, or None if unknown or leaderless."""
        info = self.partition(topic_id, partition)
        if info is None or info.leader_id < 0:
            return None
        return info.leader_id

    def partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 if unknown)."""
        return len(self.partitions.get(topic, ()))


# -- configuration helpers -----------------------------------------------------------------


def _says_unreachable(exc: errors.KafkaError) -> bool:
    """Whether a failed connect counts toward a rebootstrap (KIP-899): a broker that could
    not be reached does; a token the identity provider could not give does not (the
    brokers were never asked, and new addresses would bring no token)."""
    return isinstance(exc, errors.BrokerConnectError) and not isinstance(
        exc, errors.OAuthTokenUnavailableError
    )


def parse_bootstrap(bootstrap: str | Sequence[str]) -> tuple[BrokerAddress, ...]:
    """Parse ``"host:port,host2:port2"`` or a list of ``"host:port"`` (IPv6 as ``[::1]:9092``).

    A missing port means 9092.

    :raises ConfigError: naming the entry that is not ``host[:port]``.
    """
    entries = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out: list[BrokerAddress] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        host, port_text = entry, ""
        scheme, sep, _rest = entry.partition("://")
        if sep:
            # Checked first: "kafka://h:9092" has two colons and would otherwise be taken
            # for an IPv6 address written without brackets.
            raise errors.ConfigError(
                f"bootstrap address {entry!r}: a URL scheme ({scheme}://) is not accepted; "
                "write host:port (TLS and SASL are set with their own options)"
            )
        if entry.startswith("["):
            end = entry.find("]")
            if end < 0:
                raise errors.ConfigError(f"bootstrap address {entry!r}: unclosed '['")
            host, rest = entry[1:end], entry[end + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise errors.ConfigError(f"bootstrap address {entry!r}: expected ':port'")
                port_text = rest[1:]
        elif entry.count(":") == 1:
            host, port_text = entry.split(":")
        elif entry.count(":") > 1:
            raise errors.ConfigError(
                f"bootstrap address {entry!r}: write IPv6 addresses as [addr]:port"
            )
        port = DEFAULT_PORT
        if port_text:
            given = ascii_int(port_text)
            if given is None or not 0 < given < 65536:
                raise errors.ConfigError(f"bootstrap address {entry!r}: bad port {port_text!r}")
            port = given
        if not host:
            raise errors.ConfigError(f"bootstrap address {entry!r}: empty host")
        out.append(BrokerAddress(host, port))
    if not out:
        raise errors.ConfigError("no bootstrap address given")
    return tuple(out)


def require_share_groups(versions: VersionTable, broker: object) -> None:
    """Check that the broker can serve a share consumer; explain precisely if not.

    Tells apart a broker that is too old (no share-group APIs at versions we speak: Kafka
    before 4.1) from a new-enough cluster where share groups are switched off (the
    ``share.version`` feature is not finalized at level 1 or more).

    :param broker: names the broker in the message (an address or node id).
    :raises IncompatibleBrokerError: with one of the two explanations.
    """
    supports_feature = _SHARE_FEATURE in versions.supported_features
    level = versions.feature_level(_SHARE_FEATURE)
    missing = [cls for cls in _SHARE_APIS if not versions.supports(cls)]
    if supports_feature and level < 1:
        raise errors.IncompatibleBrokerError(
            f"{broker}: share groups are disabled on this cluster ({_SHARE_FEATURE} is "
            f"finalized at level {level}); enable them with "
            f"'kafka-features.sh upgrade --feature {_SHARE_FEATURE}=1' "
            f"(or format the storage with --feature {_SHARE_FEATURE}=1)"
        )
    if not missing:
        return
    parts = []
    for cls in missing:
        offered = versions.broker_ranges.get(cls.api_key)
        ours = CLIENT_VERSIONS.get(cls.api_key, (0, 0))
        text = "not offered" if offered is None else f"offered at v{offered[0]}-{offered[1]}"
        parts.append(f"{api_name(cls)} {text} (this client speaks v{ours[0]}-{ours[1]})")
    raise errors.IncompatibleBrokerError(
        f"{broker}: the broker is too old for share groups: " + "; ".join(parts) + ". "
        "Share groups need Apache Kafka 4.1 or newer."
    )


def has_record_limit(versions: VersionTable) -> bool:
    """Whether the broker has strict record limits (ShareFetch v2, Kafka 4.2+)."""
    version = versions.get(ShareFetchRequest)
    return version is not None and version >= 2


def require_record_limit(versions: VersionTable) -> None:
    """Check that the broker has strict record limits (ShareFetch v2, Kafka 4.2+).

    Older brokers would silently drop the acquire mode (the field is ignorable) and acquire
    whole batches, so this is refused up front instead.

    :raises UnsupportedVersionError: naming the version the broker offers.
    """
    version = versions.get(ShareFetchRequest)
    if version is None or version < 2:
        offered = "none" if version is None else f"v{version}"
        raise errors.UnsupportedVersionError(
            "acquire_mode='record_limit' needs ShareFetch v2 (Kafka 4.2 or newer); the broker "
            f"offers {offered}. Use acquire_mode='batch' there: the broker then acquires whole "
            "batches, so a member may hold more than max_records."
        )


# -- the cluster ---------------------------------------------------------------------------


class ClusterSent(Generic[R]):
    """A request sent through the cluster; a broken connection is dropped from the cache."""

    __slots__ = ("_cluster", "_conn", "_sent")

    def __init__(self, cluster: Cluster, conn: BrokerConnection, sent: SentRequest[R]) -> None:
        self._cluster = cluster
        self._conn = conn
        self._sent = sent

    @property
    def connection(self) -> BrokerConnection:
        """The connection the request went out on (a share session lives and dies with it)."""
        return self._conn

    async def wait(self, timeout: float | None = None) -> R:
        """The response (errors as :meth:`Cluster.request`)."""
        try:
            return await self._sent.wait(timeout)
        except errors.BrokerDisconnectedError:
            self._cluster._forget(self._conn)
            raise


class Cluster:
    """Connections to every broker of one cluster, and the client's view of its metadata.

    ::

        async with anyio.create_task_group() as tg:
            cluster = Cluster("localhost:9092", ConnectionConfig(), tg)
            await cluster.connect()
            try:
                meta = await cluster.refresh_metadata(["orders"])
                node = await cluster.coordinator("billing")
                response = await cluster.request(node, ShareGroupDescribeRequest(...))
            finally:
                await cluster.aclose()

    :param bootstrap: ``"host:port,..."`` or a sequence of ``"host:port"``, tried in order.
    :param config: how to open connections (timeouts, TLS, SASL).
    :param task_group: runs connection readers and the periodic metadata refresh.
    :param required_apis: API keys every broker must offer (else IncompatibleBrokerError).
    :param metadata_max_age: seconds after which the metadata is refreshed in the
        background (``math.inf`` or 0 turns that off).
    :param bootstrap_timeout: seconds :meth:`connect` keeps trying the bootstrap list
        (default: ``config.connect_timeout`` per address).
    :param idle_timeout: an idle connection older than this is replaced on next use rather
        than reused (brokers close idle connections after ``connections.max.idle.ms``,
        10 minutes by default).
    :param close_timeout: bound on :meth:`aclose`.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        config: ConnectionConfig,
        task_group: TaskGroup,
        *,
        required_apis: Iterable[int] = (),
        metadata_max_age: float = 300.0,
        bootstrap_timeout: float | None = None,
        idle_timeout: float = 540.0,
        close_timeout: float = 5.0,
        reconnect_backoff: Backoff = RECONNECT_BACKOFF,
        retry_backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self._config = config
        self._tg = task_group
        self._required = frozenset(required_apis)
        self._metadata_max_age = metadata_max_age if metadata_max_age > 0 else math.inf
        self._bootstrap_timeout = (
            bootstrap_timeout
            if bootstrap_timeout is not None
            else config.connect_timeout * len(self._bootstrap)
        )
        if self._bootstrap_timeout <= 0 or idle_timeout <= 0 or close_timeout <= 0:
            raise errors.ConfigError("bootstrap, idle and close timeouts must be positive seconds")
        self._idle_timeout = idle_timeout
        # The loop's clock, read per request (anyio.current_time costs ~1 us each time).
        try:
            self._clock: Callable[[], float] = event_loop_clock()
        except RuntimeError:
            self._clock = anyio.current_time
        self._close_timeout = close_timeout
        self._reconnect_backoff = reconnect_backoff
        self._retry_backoff = retry_backoff

        self._connections: dict[int, BrokerConnection] = {}
        self._last_used: dict[int, float] = {}
        self._connect_locks: dict[int, anyio.Lock] = {}
        self._failures: dict[int, tuple[int, float]] = {}  # node -> (failures in a row, when)
        # The connection bootstrap made, when its address matches no advertised broker.
        self._bootstrap_conn: BrokerConnection | None = None
        # Dropped from the cache while still open (their broker moved): closed once idle.
        self._retired: list[BrokerConnection] = []
        self._versions: VersionTable | None = None

        self._metadata = ClusterMetadata()
        self._metadata_at = -math.inf
        self._refresh_lock = anyio.Lock()
        self._tracked_names: set[str] = set()
        self._tracked_ids: set[uuid.UUID] = set()
        self._refresh_scope: anyio.CancelScope | None = None
        #: Set to cut the periodic refresh's wait short (a rebootstrap made it due now).
        self._refresh_due: anyio.Event | None = None

        self._coordinators: dict[str, int] = {}
        self._coordinator_locks: dict[str, anyio.Lock] = {}
        self._closed = False
        # An outage longer than a request timeout is worth a WARNING: requests now fail.
        self._health = HealthTracker(config.request_timeout)
        self._recovery = RebootstrapPolicy(
            config.metadata_recovery_strategy,
            config.metadata_recovery_rebootstrap_trigger_ms / 1000,
        )

    def __repr__(self) -> str:
        live = sorted(n for n, c in self._connections.items() if not c.closed)
        return f"<Cluster {self._metadata.cluster_id or '?'} connected to {live}>"

    # -- public state ------------------------------------------------------------------------

    @property
    def metadata(self) -> ClusterMetadata:
        """The latest metadata snapshot (immutable; replaced on every update)."""
        return self._metadata

    @property
    def versions(self) -> VersionTable:
        """Versions negotiated with the bootstrap broker (for feature checks such as share.version).

        :raises BrokerConnectError: before :meth:`connect` succeeded.
        """
        if self._versions is None:
            raise errors.BrokerConnectError("the cluster is not connected yet; call connect()")
        return self._versions

    @property
    def bootstrap_addresses(self) -> tuple[BrokerAddress, ...]:
        """The parsed bootstrap list."""
        return self._bootstrap

    @property
    def closed(self) -> bool:
        """True after :meth:`aclose`."""
        return self._closed

    @property
    def rebootstraps(self) -> int:
        """How many times the view dropped its learned brokers and rebootstrapped."""
        return self._recovery.count

    def health(self) -> ClusterHealth:
        """A read-only status for health checks: per broker, reachable or since when not.

        ``ok`` is False before :meth:`connect`, after :meth:`aclose`, while no broker can be
        reached, or while a broker stays unreachable for longer than the request timeout.
        """
        connected = self._versions is not None and not self._closed
        return self._health.snapshot(connected=connected)

    # -- bootstrap ---------------------------------------------------------------------------

    async def connect(self) -> None:
        """Reach the first bootstrap address that answers, then load the metadata.

        Addresses are tried in order; between rounds the wait grows (jittered, exponential,
        capped at ``reconnect_backoff.maximum``) until ``bootstrap_timeout`` has passed. When
        every address answers definitely (refuses the connection, or is not Kafka), retrying
        stops after about 2 s: a restarting broker gets a moment, a wrong port is told fast.

        :raises BrokerConnectError: no address could be reached; the message names the last
            failure of each address (refused, timed out, not Kafka, TLS, ...), and the last
            one is chained.
        :raises IncompatibleBrokerError: the broker lacks a required API.
        :raises BrokerError: SASL authentication failed (retrying would not help).
        """
        self._raise_if_closed()
        start = anyio.current_time()
        deadline = start + self._bootstrap_timeout
        failures: dict[BrokerAddress, errors.BrokerConnectError] = {}
        last: errors.BrokerConnectError | None = None
        # When the current run of rounds in which every address failed definitely began.
        definite_since: float | None = None
        attempt = 0
        while True:
            round_start = anyio.current_time()
            all_definite = True
            for address in self._bootstrap:
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    all_definite = False
                    break
                try:
                    conn = await open_connection(
                        address,
                        self._config,
                        self._tg,
                        required_apis=self._required,
                        timeout=remaining,
                    )
                except errors.BrokerConnectError as exc:
                    if _is_permanent(exc):
                        raise
                    # Once per address at INFO: fast retries would otherwise flood the log.
                    logger.log(
                        logging.DEBUG if address in failures else logging.INFO,
                        "bootstrap: %s",
                        exc,
                    )
                    failures[address] = last = exc
                    all_definite = all_definite and exc.definite
                    continue
                try:
                    await self._bootstrapped(address, conn)
                except errors.BrokerDisconnectedError as exc:
                    # ApiVersions is allowed before authentication; anything after is not.
                    hint = (
                        " (does this listener require SASL?)" if self._config.sasl is None else ""
                    )
                    raise errors.BrokerConnectError(
                        f"{address}: the broker closed the connection after the "
                        f"version handshake{hint}: {exc}"
                    ) from exc
                return
            if not all_definite:
                definite_since = None
            elif definite_since is None:
                definite_since = round_start
            now = anyio.current_time()
            delay = self._reconnect_backoff.delay(attempt)
            attempt += 1
            if now + delay >= deadline:
                raise self._bootstrap_error(
                    failures, last, f" within {self._bootstrap_timeout:g} s"
                )
            if definite_since is not None and now + delay - definite_since > _DEFINITE_GIVE_UP:
                raise self._bootstrap_error(failures, last, "")
            await anyio.sleep(delay)

    def _bootstrap_error(
        self,
        failures: Mapping[BrokerAddress, errors.BrokerConnectError],
        last: errors.BrokerConnectError | None,
        within: str,
    ) -> errors.BrokerConnectError:
        # Each address's own last failure: they often differ (one refused, one not Kafka).
        causes = "; ".join(
            str(failures[a]) if a in failures else f"{a} was not tried in time"
            for a in self._bootstrap
        )
        err = errors.BrokerConnectError(f"could not reach any bootstrap broker{within}: {causes}")
        err.__cause__ = last
        return err

    async def _bootstrapped(self, address: BrokerAddress, conn: BrokerConnection) -> None:
        assert conn.versions is not None
        self._versions = conn.versions
        self._bootstrap_conn = conn
        try:
            await self._refresh_over(conn, MetadataRequest(topics=()), set(), set(), False)
        except BaseException:
            await conn.aclose()
            self._bootstrap_conn = None
            raise
        self._adopt_bootstrap(address, conn)
        logger.info(
            "connected to cluster %s via %s (%d brokers)",
            self._metadata.cluster_id,
            address,
            len(self._metadata.brokers),
        )
        if self._metadata_max_age < math.inf:
            await self._tg.start(self._refresh_loop)

    def _adopt_bootstrap(self, address: BrokerAddress, conn: BrokerConnection) -> None:
        # Reuse the bootstrap connection as the node's own when the addresses agree.
        for node_id, broker in self._metadata.brokers.items():
            if (broker.host, broker.port) == (address.host, address.port):
                if node_id not in self._connections:
                    # From now on its errors and logs name the node, not just host:port.
                    conn.address = broker
                    self._connections[node_id] = conn
                    self._last_used[node_id] = anyio.current_time()
                    self._bootstrap_conn = None
                return

    # -- connections -------------------------------------------------------------------------

    async def connection(self, node_id: int) -> BrokerConnection:
        """The live connection to broker ``node_id``, opened (or reopened) if needed.

        :raises BrokerConnectError: the broker is unknown or cannot be reached.
        :raises IncompatibleBrokerError: the broker lacks a required API.
        """
        conn = self._usable(node_id)
        if conn is not None:
            return conn
        self._raise_if_closed()
        if self._recovery.due(anyio.current_time()):
            self._rebootstrap("no known broker was reachable for the trigger time")
        address = self._metadata.brokers.get(node_id)
        if address is None:
            # A node we have not seen may have just joined: look once more.
            await self.refresh_metadata()
            address = self._metadata.brokers.get(node_id)
        if address is None:
            known = ", ".join(str(n) for n in sorted(self._metadata.brokers)) or "none"
            raise errors.BrokerConnectError(
                f"broker {node_id} is not in the cluster metadata (known brokers: {known})"
            )
        return await self._connect(node_id, address)

    async def _connect(self, node_id: int, address: BrokerAddress) -> BrokerConnection:
        """The live connection to broker ``node_id`` at ``address``, opened if needed (one
        opening at a time per node). No metadata is read here: :meth:`any_connection` calls
        it from inside a refresh, with the addresses it already holds."""
        lock = self._connect_locks.setdefault(node_id, anyio.Lock())
        async with lock:
            conn = self._usable(node_id)
            if conn is not None:
                return conn
            self._raise_if_closed()
            stale = self._connections.pop(node_id, None)
            if stale is not None:
                if not stale.closed:
                    logger.debug("%s: replacing idle connection", stale.address)
                await stale.aclose()
            await self._close_retired()
            await self._reconnect_pause(node_id)
            try:
                conn = await open_connection(
                    address, self._config, self._tg, required_apis=self._required
                )
            except errors.KafkaError as exc:
                count, _ = self._failures.get(node_id, (0, 0.0))
                self._failures[node_id] = (count + 1, anyio.current_time())
                self._health.failed(node_id, str(address), exc)
                if _says_unreachable(exc) and not self._any_live():
                    self._recovery.unreachable(anyio.current_time())
                raise
            self._failures.pop(node_id, None)
            self._recovery.reached()
            self._health.reached(node_id, str(address))
            if self._closed:
                await conn.aclose()
                self._raise_if_closed()
            self._connections[node_id] = conn
            self._last_used[node_id] = anyio.current_time()
            return conn

    def _usable(self, node_id: int) -> BrokerConnection | None:
        conn = self._connections.get(node_id)
        if conn is None or conn.closed:
            return None
        now = self._clock()
        if conn.in_flight == 0 and now - self._last_used.get(node_id, now) > self._idle_timeout:
            return None
        self._last_used[node_id] = now
        return conn

    async def _reconnect_pause(self, node_id: int) -> None:
        failures = self._failures.get(node_id)
        if failures is None:
            return
        count, when = failures
        wait = when + self._reconnect_backoff.delay(count - 1) - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)

    async def any_connection(self) -> BrokerConnection:
        """A live connection for requests any broker can answer (Metadata, admin calls).

        Prefers the open connection with the fewest requests in flight; otherwise opens
        one to a known broker, then to the bootstrap addresses.

        :raises BrokerConnectError: no broker could be reached.
        """
        self._raise_if_closed()
        live = [c for n in list(self._connections) if (c := self._usable(n)) is not None]
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            live.append(self._bootstrap_conn)
        if live:
            return min(live, key=lambda c: c.in_flight)
        last: errors.KafkaError | None = None
        if self._recovery.due(anyio.current_time()):
            self._rebootstrap("no known broker was reachable for the trigger time")
        brokers_failed = False
        for node_id, address in list(self._metadata.brokers.items()):
            try:
                return await self._connect(node_id, address)
            except errors.BrokerConnectError as exc:
                last = exc
                brokers_failed |= _says_unreachable(exc)
        if brokers_failed:
            # Every known broker failed: the clock of the rebootstrap trigger runs.
            self._recovery.unreachable(anyio.current_time())
        for address in self._bootstrap:
            try:
                conn = await open_connection(
                    address, self._config, self._tg, required_apis=self._required
                )
            except errors.BrokerConnectError as exc:
                self._health.failed(-1, str(address), exc)
                last = exc
                continue
            self._health.reached(-1, str(address))
            self._bootstrap_conn = conn
            return conn
        err = errors.BrokerConnectError(
            f"no broker of the cluster could be reached; last error: {last}"
        )
        tried = [str(a) for a in self._metadata.brokers.values()] + [
            str(a) for a in self._bootstrap
        ]
        self._health.cluster_failed(", ".join(tried), last or err)
        raise err from last

    def _any_live(self) -> bool:
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return True
        return any(not c.closed for c in self._connections.values())

    def _rebootstrap(self, reason: str) -> None:
        """Drop the learned brokers, their connections and coordinators (KIP-899).

        Topics asked about stay tracked: the next refresh, over a connection to a bootstrap
        name resolved afresh, describes them and the brokers as they are now.
        """
        meta = self._metadata
        logger.warning(
            "rebootstrapping: %s; dropping %d learned broker(s), reconnecting via %s",
            reason,
            len(meta.brokers),
            ", ".join(str(a) for a in self._bootstrap),
        )
        for conn in list(self._connections.values()):
            self._forget(conn)
        if self._bootstrap_conn is not None:
            self._forget(self._bootstrap_conn)
        self._failures.clear()
        self._coordinators.clear()
        self._metadata = replace(meta, brokers=MappingProxyType({}), controller_id=-1)
        # Due now: the periodic refresh must not wait out metadata_max_age.
        self._metadata_at = -math.inf
        if self._refresh_due is not None:
            self._refresh_due.set()
        self._recovery.rebootstrapped()

    def _forget(self, conn: BrokerConnection) -> None:
        for node_id, cached in list(self._connections.items()):
            if cached is conn:
                del self._connections[node_id]
                self._last_used.pop(node_id, None)
        if self._bootstrap_conn is conn:
            self._bootstrap_conn = None
        if not conn.closed and conn not in self._retired:
            self._retired.append(conn)

    async def _close_retired(self) -> None:
        keep = []
        for conn in self._retired:
            if conn.in_flight:
                keep.append(conn)
            else:
                await conn.aclose()
        self._retired = keep

    # -- requests ----------------------------------------------------------------------------

    async def request(self, node_id: int, body: Request[R], *, timeout: float | None = None) -> R:
        """Send ``body`` to broker ``node_id`` and return its response.

        :param timeout: seconds; default ``config.request_timeout``.
        :raises BrokerConnectError: the broker could not be reached.
        :raises BrokerDisconnectedError: the connection broke; it is dropped from the cache
            (the next call reconnects) and the caller decides whether to retry.
        :raises RequestTimeoutError: no response in time.
        """
        conn = await self.connection(node_id)
        return await self._request_on(conn, body, timeout)

    def rebind(self, task_group: TaskGroup) -> None:
        """Run the reader tasks of connections opened from now on in ``task_group``.

        For a client's farewell: when its own task group was cancelled from outside, the
        last requests (final acknowledgements, leaving the group) reconnect in a shielded
        task group of the closing task.
        """
        self._tg = task_group

    async def send(self, node_id: int, body: Request[R]) -> ClusterSent[R]:
        """Write ``body`` to broker ``node_id``; ``await handle.wait(timeout)`` answers it.

        For pipelining (see :meth:`BrokerConnection.send`); errors as :meth:`request`.
        """
        conn = await self.connection(node_id)
        try:
            return ClusterSent(self, conn, await conn.send(body))
        except errors.BrokerDisconnectedError:
            self._forget(conn)
            raise

    async def request_any(self, body: Request[R], *, timeout: float | None = None) -> R:
        """Send ``body`` to any broker (see :meth:`any_connection`); errors as :meth:`request`."""
        conn = await self.any_connection()
        return await self._request_on(conn, body, timeout)

    async def _request_on(
        self, conn: BrokerConnection, body: Request[R], timeout: float | None
    ) -> R:
        try:
            return await conn.request(
                body, timeout=self._config.request_timeout if timeout is None else timeout
            )
        except errors.BrokerDisconnectedError:
            self._forget(conn)
            raise

    # -- metadata ----------------------------------------------------------------------------

    async def refresh_metadata(
        self,
        topics: Iterable[str] | None = None,
        *,
        topic_ids: Iterable[uuid.UUID] = (),
        all_topics: bool = False,
        timeout: float | None = None,
    ) -> ClusterMetadata:
        """Ask the cluster about topics and merge the answer into :attr:`metadata`.

        :param topics: topic names to describe; None means every topic asked about before.
            Named topics are remembered for later refreshes (periodic ones included).
        :param topic_ids: topics to describe by id (a share assignment names only ids).
        :param all_topics: describe every topic in the cluster; topics that are gone are
            dropped from the view.
        :param timeout: seconds for the Metadata request (default ``config.request_timeout``).
        :returns: the new snapshot. A topic that does not exist is absent from it, with its
            error code in ``topic_errors``.
        :raises BrokerConnectError: no broker could be reached.
        """
        self._raise_if_closed()
        async with self._refresh_lock:
            names = set(self._tracked_names)
            ids = set(self._tracked_ids)
            if topics is not None:
                names.update(topics)
                self._tracked_names.update(names)
            ids.update(topic_ids)
            self._tracked_ids.update(topic_ids)
            known = self._metadata.topic_names
            by_id = sorted((i for i in ids if i not in known or known[i] not in names), key=str)
            request = MetadataRequest(
                topics=None
                if all_topics
                else tuple(MetadataRequestTopic(name=n) for n in sorted(names))
                + tuple(MetadataRequestTopic(topic_id=i, name=None) for i in by_id),
                allow_auto_topic_creation=False,
            )
            attempt = 0
            rebooted = False
            while True:
                conn = await self.any_connection()
                try:
                    await self._refresh_over(conn, request, names, set(by_id), all_topics, timeout)
                except errors.BrokerDisconnectedError:
                    self._forget(conn)
                    if attempt >= 1:
                        raise
                    attempt += 1
                    continue
                except errors.RebootstrapRequiredError as exc:
                    # Once per refresh: a broker that keeps saying so is not obeyed forever.
                    if rebooted or not self._recovery.required_by(exc.code):
                        raise
                    rebooted = True
                    self._rebootstrap(f"{conn.address} answered REBOOTSTRAP_REQUIRED")
                    continue
                return self._metadata

    async def _refresh_over(
        self,
        conn: BrokerConnection,
        request: MetadataRequest,
        names: set[str],
        ids: set[uuid.UUID],
        all_topics: bool,
        timeout: float | None = None,
    ) -> None:
        response = await conn.request(
            request, timeout=self._config.request_timeout if timeout is None else timeout
        )
        err = errors.error_for_code(
            response.error_code, f"in the Metadata response from {conn.address}"
        )
        if err is not None:
            raise err
        self._metadata = _merge(self._metadata, response, all_topics=all_topics)
        self._metadata_at = anyio.current_time()
        self._recovery.reached()
        self._health.keep_only(self._metadata.brokers.keys())
        # A broker that moved (same id, new endpoint) needs a new connection.
        for node_id, cached in list(self._connections.items()):
            now = self._metadata.brokers.get(node_id)
            if now is not None and (now.host, now.port) != (
                cached.address.host,
                cached.address.port,
            ):
                self._forget(cached)
        for name in names:
            if self._metadata.topic_errors.get(name) in _TOPIC_GONE:
                self._tracked_names.discard(name)
        for tid in ids:
            if self._metadata.topic_errors.get(tid) in _TOPIC_GONE:
                self._tracked_ids.discard(tid)

    async def _refresh_loop(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.CancelScope() as scope:
            self._refresh_scope = scope
            task_status.started()
            failures = 0
            while not self._closed:
                due = self._metadata_at + self._metadata_max_age
                self._refresh_due = woken = anyio.Event()
                with anyio.move_on_after(max(0.0, due - anyio.current_time())):
                    await woken.wait()
                if anyio.current_time() < self._metadata_at + self._metadata_max_age:
                    continue  # someone refreshed meanwhile
                try:
                    await self.refresh_metadata()
                    failures = 0
                except errors.KafkaError as exc:
                    # Background refresh is best effort: callers refresh on demand anyway.
                    logger.info("periodic metadata refresh failed: %s", exc)
                    await anyio.sleep(self._reconnect_backoff.delay(failures))
                    failures += 1

    def apply_leader_hint(
        self,
        topic_id: uuid.UUID,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        endpoint: BrokerAddress | None,
    ) -> bool:
        """Record a new leader learnt from a response (ShareFetch CurrentLeader/NodeEndpoints).

        :param endpoint: the new leader's address when the response carried it.
        :returns: True if the view changed; False for an unknown partition or a hint whose
            epoch is older than (or the same as) what is known.
        """
        meta = self._metadata
        changed = False
        brokers = meta.brokers
        if endpoint is not None and endpoint.node_id >= 0:
            old = brokers.get(endpoint.node_id)
            if old is None or (old.host, old.port) != (endpoint.host, endpoint.port):
                brokers = MappingProxyType({**brokers, endpoint.node_id: endpoint})
                cached = self._connections.get(endpoint.node_id)
                if cached is not None and old is not None:
                    self._forget(cached)
                changed = True
        info = meta.partition(topic_id, partition)
        partitions = meta.partitions
        if info is not None and leader_id >= 0 and leader_epoch >= 0:
            newer = leader_epoch > info.leader_epoch
            if newer or (leader_epoch == info.leader_epoch and info.leader_id < 0):
                if info.leader_id != leader_id or newer:
                    updated = PartitionInfo(
                        info.topic, topic_id, partition, leader_id, leader_epoch
                    )
                    parts = tuple(
                        updated if p.partition == partition else p
                        for p in meta.partitions[info.topic]
                    )
                    partitions = MappingProxyType({**partitions, info.topic: parts})
                    changed = True
        if changed:
            self._metadata = ClusterMetadata(
                cluster_id=meta.cluster_id,
                controller_id=meta.controller_id,
                brokers=brokers,
                topic_ids=meta.topic_ids,
                topic_names=meta.topic_names,
                partitions=partitions,
                topic_errors=meta.topic_errors,
            )
            logger.debug(
                "leader hint: %s-%d -> broker %d epoch %d",
                topic_id,
                partition,
                leader_id,
                leader_epoch,
            )
        return changed

    def forget_topics(self, topics: Iterable[str]) -> None:
        """Drop topics from the view and from later refreshes (after deleting them)."""
        names = set(topics)
        self._tracked_names -= names
        meta = self._metadata
        gone_ids = {meta.topic_ids[n] for n in names if n in meta.topic_ids}
        self._tracked_ids -= gone_ids
        if not names & set(meta.topic_ids) and not names & set(meta.partitions):
            return
        self._metadata = ClusterMetadata(
            cluster_id=meta.cluster_id,
            controller_id=meta.controller_id,
            brokers=meta.brokers,
            topic_ids=MappingProxyType({k: v for k, v in meta.topic_ids.items() if k not in names}),
            topic_names=MappingProxyType(
                {k: v for k, v in meta.topic_names.items() if v not in names}
            ),
            partitions=MappingProxyType(
                {k: v for k, v in meta.partitions.items() if k not in names}
            ),
            topic_errors=meta.topic_errors,
        )

    # -- coordinators ------------------------------------------------------------------------

    async def coordinator(self, group_id: str, *, timeout: float | None = None) -> int:
        """The node id of ``group_id``'s coordinator (FindCoordinator, key type GROUP), cached.

        Retries COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and
        lost connections with backoff until ``timeout`` (default ``config.request_timeout``).

        :raises BrokerError: a non-retriable error (e.g. GROUP_AUTHORIZATION_FAILED), or the
            last retriable one when time ran out; the message names the group.
        """
        cached = self._coordinators.get(group_id)
        if cached is not None:
            return cached
        lock = self._coordinator_locks.setdefault(group_id, anyio.Lock())
        async with lock:
            cached = self._coordinators.get(group_id)
            if cached is not None:
                return cached
            node = await self._find_coordinator(group_id, timeout)
            self._coordinators[group_id] = node
            return node

    async def _find_coordinator(self, group_id: str, timeout: float | None) -> int:
        limit = self._config.request_timeout if timeout is None else timeout
        deadline = anyio.current_time() + limit
        request = FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,))
        attempt = 0
        while True:
            remaining = deadline - anyio.current_time()
            failure: errors.KafkaError
            try:
                response = await self.request_any(request, timeout=max(remaining, 0.001))
            except (errors.BrokerDisconnectedError, errors.BrokerConnectError) as exc:
                failure = exc
            else:
                found = next((c for c in response.coordinators if c.key == group_id), None)
                if found is None:
                    raise errors.RemoteProtocolError(
                        f"FindCoordinator response does not mention group {group_id!r}"
                    )
                if found.error_code == ErrorCode.NONE:
                    self._learn_broker(BrokerAddress(found.host, found.port, found.node_id))
                    logger.debug("group %r: coordinator is broker %d", group_id, found.node_id)
                    return found.node_id
                err = errors.error_for_code(
                    found.error_code,
                    f"finding the coordinator of group {group_id!r}"
                    + (f": {found.error_message}" if found.error_message else ""),
                )
                assert err is not None
                if found.error_code not in _COORDINATOR_RETRY:
                    raise err
                failure = err
            delay = self._retry_backoff.delay(attempt)
            attempt += 1
            if anyio.current_time() + delay >= deadline:
                raise failure
            logger.debug("group %r: coordinator not ready (%s); retrying", group_id, failure)
            await anyio.sleep(delay)

    def invalidate_coordinator(self, group_id: str) -> None:
        """Forget ``group_id``'s coordinator (after NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE)."""
        self._coordinators.pop(group_id, None)

    def _learn_broker(self, address: BrokerAddress) -> None:
        meta = self._metadata
        old = meta.brokers.get(address.node_id)
        if old is not None and (old.host, old.port) == (address.host, address.port):
            return
        if old is not None:
            cached = self._connections.get(address.node_id)
            if cached is not None:
                self._forget(cached)
        self._metadata = ClusterMetadata(
            cluster_id=meta.cluster_id,
            controller_id=meta.controller_id,
            brokers=MappingProxyType({**meta.brokers, address.node_id: address}),
            topic_ids=meta.topic_ids,
            topic_names=meta.topic_names,
            partitions=meta.partitions,
            topic_errors=meta.topic_errors,
        )

    # -- close -------------------------------------------------------------------------------

    def _raise_if_closed(self) -> None:
        if self._closed:
            raise errors.BrokerConnectError("the cluster client is closed")

    async def aclose(self) -> None:
        """Stop the metadata refresh and close every connection. Shielded and bounded."""
        self._closed = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._close_timeout):
            if self._refresh_scope is not None:
                self._refresh_scope.cancel()
            conns = [*self._connections.values(), *self._retired]
            if self._bootstrap_conn is not None:
                conns.append(self._bootstrap_conn)
            self._connections.clear()
            self._retired.clear()
            self._bootstrap_conn = None
            per_conn = self._close_timeout / max(len(conns), 1)
            for conn in conns:
                await conn.aclose(per_conn)


def _is_permanent(exc: errors.BrokerConnectError) -> bool:
    # A certificate the client rejects will be rejected on every retry: say so at once.
    # So will the broker reject our certificate again.
    if isinstance(exc, errors.TlsAuthenticationError):
        return True
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__
    return False


def _merge(
    old: ClusterMetadata, response: MetadataResponse, *, all_topics: bool
) -> ClusterMetadata:
    brokers = {b.node_id: BrokerAddress(b.host, b.port, b.node_id) for b in response.brokers}
    if all_topics:
        topic_ids: dict[str, uuid.UUID] = {}
        topic_names: dict[uuid.UUID, str] = {}
        partitions: dict[str, tuple[PartitionInfo, ...]] = {}
    else:
        topic_ids = dict(old.topic_ids)
        topic_names = dict(old.topic_names)
        partitions = dict(old.partitions)
    topic_errors: dict[str | uuid.UUID, int] = {}

    def drop(name: str | None, tid: uuid.UUID) -> None:
        if name is not None:
            gone = topic_ids.pop(name, None)
            if gone is not None:
                topic_names.pop(gone, None)
            partitions.pop(name, None)
        if tid != ZERO_UUID:
            gone_name = topic_names.pop(tid, None)
            if gone_name is not None:
                topic_ids.pop(gone_name, None)
                partitions.pop(gone_name, None)

    for topic in response.topics:
        key: str | uuid.UUID = topic.name if topic.name else topic.topic_id
        if topic.error_code in _TOPIC_GONE:
            topic_errors[key] = topic.error_code
            drop(topic.name, topic.topic_id)
            continue
        if topic.error_code:
            topic_errors[key] = topic.error_code
            if not topic.partitions:
                continue  # e.g. LEADER_NOT_AVAILABLE while a new topic settles: keep the old view
        name = topic.name
        if not name:
            continue
        previous_id = topic_ids.get(name)
        if previous_id is not None and previous_id != topic.topic_id:
            drop(name, previous_id)  # deleted and recreated under the same name
        old_parts = {p.partition: p for p in old.partitions.get(name, ())}
        new_parts = []
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            info = PartitionInfo(
                name, topic.topic_id, p.partition_index, p.leader_id, p.leader_epoch
            )
            before = old_parts.get(p.partition_index)
            if (
                before is not None
                and before.topic_id == topic.topic_id
                and before.leader_epoch > info.leader_epoch
            ):
                info = before  # this broker lags behind a leader change we already know of
            new_parts.append(info)
        topic_ids[name] = topic.topic_id
        if topic.topic_id != ZERO_UUID:
            topic_names[topic.topic_id] = name
        partitions[name] = tuple(new_parts)
    return ClusterMetadata(
        cluster_id=response.cluster_id,
        controller_id=response.controller_id,
        brokers=MappingProxyType(brokers),
        topic_ids=MappingProxyType(topic_ids),
        topic_names=MappingProxyType(topic_names),
        partitions=MappingProxyType(partitions),
        topic_errors=MappingProxyType(topic_errors),
    )
