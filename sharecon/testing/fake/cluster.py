"""The fake's broker logic: decoded requests in, response bodies out, at a given time.

Sans-I/O: :class:`FakeCluster` never reads a clock and never touches a socket; the server
(:mod:`.server`) passes the time and the connection a request came on. Share-partition
semantics (acquisition, locks, delivery counts, sessions) are the model broker's
(:class:`~sharecon.testing.model.ModelBroker`); this module adds what a client needs
around them: topics and their record bytes, produce with idempotence, metadata, the
share-group coordinator, configs and the share-group admin APIs.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages import REQUESTS
from sharecon.protocol.messages import alter_share_group_offsets as aso
from sharecon.protocol.messages import api_versions as av
from sharecon.protocol.messages import create_topics as ct
from sharecon.protocol.messages import delete_groups as dg
from sharecon.protocol.messages import delete_share_group_offsets as dso
from sharecon.protocol.messages import delete_topics as dt
from sharecon.protocol.messages import describe_configs as dc
from sharecon.protocol.messages import describe_share_group_offsets as dsgo
from sharecon.protocol.messages import fetch as fe
from sharecon.protocol.messages import find_coordinator as fc
from sharecon.protocol.messages import incremental_alter_configs as iac
from sharecon.protocol.messages import init_producer_id as ipi
from sharecon.protocol.messages import list_groups as lg
from sharecon.protocol.messages import list_offsets as lo
from sharecon.protocol.messages import metadata as md
from sharecon.protocol.messages import produce as pr
from sharecon.protocol.messages import share_acknowledge as sa
from sharecon.protocol.messages import share_fetch as sf
from sharecon.protocol.messages import share_group_describe as sgd
from sharecon.protocol.messages import share_group_heartbeat as sgh
from sharecon.testing.fake.groups import FakeGroup, FakeMember
from sharecon.testing.fake.log import TopicLog, split_batches
from sharecon.testing.model import ModelBroker

if TYPE_CHECKING:
    from sharecon.protocol.messages._base import Request, Response

__all__ = ["GROUP_CONFIG_DEFAULTS", "GROUP_CONFIG_DEFAULTS_4_3", "FakeCluster"]

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_SASL_KEYS = frozenset({17, 36})
#: APIs whose requests never change what a waiting fetch looks at (logs, share-partition
#: states, share sessions), so a server need not wake the fetches it holds after one:
#: Fetch, ListOffsets, Metadata, FindCoordinator, ListGroups, ApiVersions, InitProducerId,
#: DescribeConfigs, ShareGroupHeartbeat (it changes the coordinator's assignment and at
#: most the persister's initial state, which a waiting fetch does not read),
#: ShareGroupDescribe, DescribeShareGroupOffsets.
QUIET_APIS = frozenset({1, 2, 3, 10, 16, 18, 22, 32, 76, 77, 90})
_EARLIEST, _LATEST = -2, -1
_GROUP_RESOURCE, _TOPIC_RESOURCE, _BROKER_RESOURCE = 32, 2, 4
_SET, _DELETE = 0, 1

#: Share-group configs a group may set on every line, with the test broker's defaults.
GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    "share.auto.offset.reset": "latest",
    "share.record.lock.duration.ms": "15000",
    "share.session.timeout.ms": "10000",
    "share.heartbeat.interval.ms": "1000",
    "share.isolation.level": "read_uncommitted",
}
_RENEW_CONFIG = "share.renew.acknowledge.enable"
#: Group configs from Kafka 4.3 on (before that these are broker-wide only).
GROUP_CONFIG_DEFAULTS_4_3: dict[str, str] = {
    "share.delivery.count.limit": "5",
    "share.partition.max.record.locks": "2000",
    _RENEW_CONFIG: "true",
}
#: The range the test broker allows for a group's lock duration (ms).
_LOCK_RANGE = (1000, 3_600_000)


#: Lowest versions Kafka 4.1-4.4 offer where the codec reads older ones (ShareFetch and
#: ShareAcknowledge v0 were Kafka 4.0's early access only).
_KAFKA_4_MIN = {sf.ShareFetchRequest.api_key: 1, sa.ShareAcknowledgeRequest.api_key: 1}


@dataclass(slots=True)
class _Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Failure:
    """An injected failure: the next ``count`` requests of ``api_key`` get ``code``."""

    api_key: int
    count: int
    code: int


@dataclass(slots=True)
class FakeCluster:
    """One fake broker (node ``node_id`` at ``host:port``) imitating Kafka ``version``."""

    version: str
    host: str
    port: int
    node_id: int = 1
    cluster_id: str = "sharecon-fake-cluster"
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 1000
    model: ModelBroker = field(init=False)
    minor: int = field(init=False)
    topics: dict[str, _Topic] = field(default_factory=dict, init=False)
    logs: dict[tuple[uuid.UUID, int], TopicLog] = field(default_factory=dict, init=False)
    groups: dict[str, FakeGroup] = field(default_factory=dict, init=False)
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    broker_configs: dict[str, str] = field(default_factory=dict, init=False)
    failures: list[Failure] = field(default_factory=list, init=False)
    #: connection -> member id of the last share request on it (for ``cut``)
    connection_members: dict[str, str] = field(default_factory=dict, init=False)
    #: the client id of the request being answered (members are described with it)
    client_id: str = field(default="", init=False)
    _next_producer_id: int = field(default=1000, init=False)

    def __post_init__(self) -> None:
        self.model = ModelBroker(self.version, self.node_id)
        self.minor = int(self.model.behaviour.version.split(".")[1])

    # -- versions ----------------------------------------------------------------------------

    def api_ranges(self) -> dict[int, tuple[int, int]]:
        """The ApiVersions ranges this fake offers (the line's own caps applied)."""
        caps = {
            sf.ShareFetchRequest.api_key: self.model.behaviour.fetch_version,
            sa.ShareAcknowledgeRequest.api_key: self.model.behaviour.fetch_version,
            dsgo.DescribeShareGroupOffsetsRequest.api_key: 0 if self.minor < 2 else 1,
            dg.DeleteGroupsRequest.api_key: 3 if self.minor >= 4 else 2,
        }
        out: dict[int, tuple[int, int]] = {}
        for key, cls in sorted(REQUESTS.items()):
            # Only what it serves: a broker without a client-telemetry receiver does not
            # offer GetTelemetrySubscriptions or PushTelemetry either (KIP-714).
            if key in _SASL_KEYS or not hasattr(self, f"_h{key}"):
                continue
            # Every version the codec reads and writes, as far as Kafka 4.x offers it: other
            # clients (librdkafka, aiokafka) speak older versions than sharecon does.
            lo_v = max(cls.min_version, _KAFKA_4_MIN.get(key, 0))
            out[key] = (lo_v, min(cls.max_version, caps.get(key, cls.max_version)))
        return out

    # -- dispatch ----------------------------------------------------------------------------

    def handle(
        self,
        api_key: int,
        version: int,
        body: Request[Response],
        connection: str,
        now: float,
        client_id: str | None = None,
    ) -> Response | None:
        """Answer one request (None: no answer, as for ``acks=0``)."""
        self.client_id = client_id or ""
        failure = next((f for f in self.failures if f.api_key == api_key), None)
        if failure is not None:
            failure.count -= 1
            if failure.count <= 0:
                self.failures.remove(failure)
            return _error_response(body, failure.code)
        handler = getattr(self, f"_h{api_key}", None)
        if handler is None:
            raise AssertionError(f"the fake does not serve API key {api_key}")
        self.tick(now)
        result: Response | None = handler(body, version, connection, now)
        return result

    def tick(self, now: float) -> None:
        """Let time reach ``now``: locks end, silent members leave their groups."""
        self.model.advance(now)
        for group in self.groups.values():
            gone = [
                m
                for m in group.members.values()
                if now - m.last_seen > self.session_timeout_ms / 1000.0
            ]
            for m in gone:
                del group.members[m.member_id]
            if gone:
                self._reassign(group)

    def disconnect(self, connection: str, now: float) -> None:
        """A client connection closed."""
        self.connection_members.pop(connection, None)
        self.model.disconnect(connection, now)

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> uuid.UUID:
        """Create a topic (what CreateTopics does); returns its id."""
        tid = self.model.create_topic(name, partitions)
        self.topics[name] = _Topic(name, tid, partitions, dict(configs or {}))
        for p in range(partitions):
            self.logs[(tid, p)] = TopicLog()
        for group in self.groups.values():
            self._reassign(group)
        return tid

    def delete_topic(self, name: str) -> None:
        """Delete a topic with its records and every group's state for it."""
        t = self.topics.pop(name)
        self.model.delete_topic(name)
        for p in range(t.partitions):
            del self.logs[(t.topic_id, p)]
        for group in self.groups.values():
            self._reassign(group)

    def append(self, topic: str, partition: int, data: bytes | memoryview) -> int:
        """Append a produce request's record batches; returns the first base offset."""
        t = self.topics[topic]
        log = self.logs[(t.topic_id, partition)]
        epoch = self.model.leader_epochs[(t.topic_id, partition)]
        base = -1
        for raw, span, _pid, _pe, _seq, _n, max_ts in split_batches(data):
            first, last = self.model.produce(topic, partition, span)
            log.append(first, last, raw, epoch, max_ts)
            if base < 0:
                base = first
        return base

    def _by_id(self, topic_id: uuid.UUID) -> _Topic | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def _leader_epoch(self, t: _Topic, p: int) -> int:
        return self.model.leader_epochs.get((t.topic_id, p), 0)

    # -- API handlers: cluster and topics ----------------------------------------------------

    def _h18(self, body: Any, version: int, conn: str, now: float) -> Response:  # ApiVersions
        del body, version, conn, now
        return av.ApiVersionsResponse(
            api_keys=tuple(
                av.ApiVersion(api_key=k, min_version=a, max_version=b)
                for k, (a, b) in self.api_ranges().items()
            ),
            supported_features=(
                av.SupportedFeatureKey(name="share.version", min_version=0, max_version=1),
                av.SupportedFeatureKey(name="group.version", min_version=0, max_version=1),
            ),
            finalized_features_epoch=1,
            finalized_features=(
                av.FinalizedFeatureKey(
                    name="share.version", max_version_level=1, min_version_level=1
                ),
                av.FinalizedFeatureKey(
                    name="group.version", max_version_level=1, min_version_level=1
                ),
            ),
        )

    def _h3(self, body: Any, version: int, conn: str, now: float) -> Response:  # Metadata
        del version, conn, now
        wanted: list[_Topic | tuple[str | None, uuid.UUID | None]]
        if body.topics is None:
            wanted = [self.topics[n] for n in sorted(self.topics)]
        else:
            wanted = []
            for rt in body.topics:
                t = self.topics.get(rt.name) if rt.name is not None else self._by_id(rt.topic_id)
                wanted.append(t if t is not None else (rt.name, rt.topic_id))
        topics = []
        for w in wanted:
            if not isinstance(w, _Topic):
                name, tid = w
                topics.append(
                    md.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if name is not None
                        else ErrorCode.UNKNOWN_TOPIC_ID,
                        name=name,
                        topic_id=tid or uuid.UUID(int=0),
                    )
                )
                continue
            topics.append(
                md.MetadataResponseTopic(
                    name=w.name,
                    topic_id=w.topic_id,
                    partitions=tuple(
                        md.MetadataResponsePartition(
                            partition_index=p,
                            leader_id=self.node_id,
                            leader_epoch=self._leader_epoch(w, p),
                            replica_nodes=(self.node_id,),
                            isr_nodes=(self.node_id,),
                        )
                        if (w.topic_id, p) not in self.model.leaderless
                        else md.MetadataResponsePartition(
                            # As KRaft does: no leader, under a new leader epoch.
                            error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                            partition_index=p,
                            leader_id=-1,
                            leader_epoch=self._leader_epoch(w, p),
                            replica_nodes=(self.node_id,),
                            isr_nodes=(),
                        )
                        for p in range(w.partitions)
                    ),
                )
            )
        return md.MetadataResponse(
            brokers=(
                md.MetadataResponseBroker(node_id=self.node_id, host=self.host, port=self.port),
            ),
            cluster_id=self.cluster_id,
            controller_id=self.node_id,
            topics=tuple(topics),
        )

    def _h10(self, body: Any, version: int, conn: str, now: float) -> Response:  # FindCoordinator
        del conn, now
        if version < 4:  # one key per request, answered at the top level
            return fc.FindCoordinatorResponse(
                error_message=None, node_id=self.node_id, host=self.host, port=self.port
            )
        return fc.FindCoordinatorResponse(
            coordinators=tuple(
                fc.Coordinator(key=k, node_id=self.node_id, host=self.host, port=self.port)
                for k in body.coordinator_keys
            )
        )

    def _h19(self, body: Any, version: int, conn: str, now: float) -> Response:  # CreateTopics
        del version, conn, now
        results = []
        for t in body.topics:
            parts = 1 if t.num_partitions == -1 else t.num_partitions
            rf = 1 if t.replication_factor == -1 else t.replication_factor
            code, message = ErrorCode.NONE, None
            if not _TOPIC_NAME.match(t.name) or t.name in (".", ".."):
                code, message = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic name {t.name!r} is invalid",
                )
            elif t.name in self.topics:
                code, message = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
            elif parts < 1:
                code, message = (
                    ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions must be larger than 0.",
                )
            elif rf < 1 or rf > 1:
                code = ErrorCode.INVALID_REPLICATION_FACTOR
                message = (
                    f"Unable to replicate the partition {rf} time(s): The target "
                    "replication factor of 1 cannot be reached because only 1 broker(s) "
                    "are registered."
                    if rf > 1
                    else "Replication factor must be larger than 0."
                )
            if code:
                results.append(
                    ct.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
                )
                continue
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            tid = uuid.uuid4() if body.validate_only else self.create_topic(t.name, parts, configs)
            results.append(
                ct.CreatableTopicResult(
                    name=t.name, topic_id=tid, num_partitions=parts, replication_factor=rf
                )
            )
        return ct.CreateTopicsResponse(topics=tuple(results))

    def _h20(self, body: Any, version: int, conn: str, now: float) -> Response:  # DeleteTopics
        del conn, now
        asked: list[tuple[str | None, uuid.UUID | None]]
        if version >= 6:
            asked = [(s.name, s.topic_id if s.name is None else None) for s in body.topics]
        else:
            asked = [(n, None) for n in body.topic_names]
        results = []
        for name, tid in asked:
            t = self.topics.get(name) if name is not None else self._by_id(tid or uuid.UUID(int=0))
            if t is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name else ErrorCode.UNKNOWN_TOPIC_ID
                results.append(
                    dt.DeletableTopicResult(
                        name=name,
                        topic_id=tid or uuid.UUID(int=0),
                        error_code=code,
                        error_message="This server does not host this topic-partition."
                        if name
                        else "This server does not host this topic ID.",
                    )
                )
                continue
            self.delete_topic(t.name)
            results.append(dt.DeletableTopicResult(name=t.name, topic_id=t.topic_id))
        return dt.DeleteTopicsResponse(responses=tuple(results))

    # -- API handlers: produce and fetch -----------------------------------------------------

    def _h22(self, body: Any, version: int, conn: str, now: float) -> Response:  # InitProducerId
        del version, conn, now
        if body.producer_id >= 0:
            return ipi.InitProducerIdResponse(
                producer_id=body.producer_id, producer_epoch=body.producer_epoch + 1
            )
        self._next_producer_id += 1
        return ipi.InitProducerIdResponse(producer_id=self._next_producer_id, producer_epoch=0)

    def _h0(self, body: Any, version: int, conn: str, now: float) -> Response | None:  # Produce
        del conn, now
        topics = []
        for td in body.topic_data:
            t = self.topics.get(td.name) if version < 13 else self._by_id(td.topic_id)
            parts = []
            for pd in td.partition_data:
                parts.append(self._produce_one(t, pd))
            topics.append(
                pr.TopicProduceResponse(
                    name=td.name, topic_id=td.topic_id, partition_responses=tuple(parts)
                )
            )
        if body.acks == 0:
            return None
        return pr.ProduceResponse(responses=tuple(topics))

    def _produce_one(self, t: _Topic | None, pd: Any) -> pr.PartitionProduceResponse:
        if t is None or not 0 <= pd.index < t.partitions:
            return pr.PartitionProduceResponse(
                index=pd.index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, base_offset=-1
            )
        log = self.logs[(t.topic_id, pd.index)]
        leader = pr.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
        try:
            batches = split_batches(pd.records or b"")
        except Exception:
            return pr.PartitionProduceResponse(
                index=pd.index, error_code=ErrorCode.CORRUPT_MESSAGE, base_offset=-1
            )
        base = -1
        for raw, span, pid, pe, seq, n, max_ts in batches:
            code, dup = log.producers.check(pid, pe, seq, n)
            if code:
                return pr.PartitionProduceResponse(
                    index=pd.index, error_code=code, base_offset=-1, current_leader=leader
                )
            if dup >= 0:
                base = dup if base < 0 else base
                continue
            first = self.append(t.name, pd.index, raw)
            log.producers.note(pid, pe, seq, n, first)
            base = first if base < 0 else base
            del max_ts, span
        model_log = self.model.logs[(t.topic_id, pd.index)]
        return pr.PartitionProduceResponse(
            index=pd.index,
            base_offset=base,
            log_append_time_ms=-1,
            log_start_offset=model_log.start,
            current_leader=leader,
        )

    def _h2(self, body: Any, version: int, conn: str, now: float) -> Response:  # ListOffsets
        del version, conn, now
        topics = []
        for rt in body.topics:
            t = self.topics.get(rt.name)
            parts = []
            for rp in rt.partitions:
                if t is None or not 0 <= rp.partition_index < t.partitions:
                    parts.append(
                        lo.ListOffsetsPartitionResponse(
                            partition_index=rp.partition_index,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            timestamp=-1,
                            offset=-1,
                        )
                    )
                    continue
                mlog = self.model.logs[(t.topic_id, rp.partition_index)]
                if rp.timestamp == _EARLIEST:
                    offset: int | None = mlog.start
                elif rp.timestamp == _LATEST:
                    offset = mlog.end
                else:
                    offset = self.logs[(t.topic_id, rp.partition_index)].offset_for_time(
                        rp.timestamp
                    )
                parts.append(
                    lo.ListOffsetsPartitionResponse(
                        partition_index=rp.partition_index,
                        timestamp=-1,
                        offset=-1 if offset is None else offset,
                        leader_epoch=self._leader_epoch(t, rp.partition_index),
                    )
                )
            topics.append(lo.ListOffsetsTopicResponse(name=rt.name, partitions=tuple(parts)))
        return lo.ListOffsetsResponse(topics=tuple(topics))

    def fetch_ready(self, body: fe.FetchRequest, version: int) -> bool:
        """Whether a Fetch has something to return now (else it may wait)."""
        for rt in body.topics:
            t = self.topics.get(rt.topic) if version < 13 else self._by_id(rt.topic_id)
            if t is None:
                return True
            for rp in rt.partitions:
                if not 0 <= rp.partition < t.partitions:
                    return True
                if rp.fetch_offset < self.model.logs[(t.topic_id, rp.partition)].end:
                    return True
        return False

    def _h1(self, body: Any, version: int, conn: str, now: float) -> Response:  # Fetch
        del conn, now
        topics = []
        budget = body.max_bytes
        for rt in body.topics:
            t = self.topics.get(rt.topic) if version < 13 else self._by_id(rt.topic_id)
            parts = []
            for rp in rt.partitions:
                if t is None or not 0 <= rp.partition < t.partitions:
                    code = (
                        ErrorCode.UNKNOWN_TOPIC_ID
                        if version >= 13
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    parts.append(
                        fe.PartitionData(
                            partition_index=rp.partition, error_code=code, high_watermark=-1
                        )
                    )
                    continue
                mlog = self.model.logs[(t.topic_id, rp.partition)]
                common = {
                    "partition_index": rp.partition,
                    "high_watermark": mlog.end,
                    "last_stable_offset": mlog.end,
                    "log_start_offset": mlog.start,
                }
                if not mlog.start <= rp.fetch_offset <= mlog.end:
                    parts.append(
                        fe.PartitionData(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, **common)
                    )
                    continue
                data = b""
                if budget > 0:
                    data = self.logs[(t.topic_id, rp.partition)].read(
                        rp.fetch_offset, min(rp.partition_max_bytes, budget)
                    )
                    budget -= len(data)
                parts.append(fe.PartitionData(records=data, **common))
            topics.append(
                fe.FetchableTopicResponse(
                    topic=rt.topic, topic_id=rt.topic_id, partitions=tuple(parts)
                )
            )
        return fe.FetchResponse(responses=tuple(topics))

    # -- API handlers: share groups ----------------------------------------------------------

    def _reassign(self, group: FakeGroup) -> None:
        if group.reassign({t.name: t.partitions for t in self.topics.values()}):
            for tps in group.assignment.values():
                for topic, p in tps:
                    self.model.initialize_group_state(group.group_id, topic, p)

    def _h76(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # ShareGroupHeartbeat
        del version
        gid, mid, epoch = body.group_id, body.member_id, body.member_epoch
        if not gid:
            return sgh.ShareGroupHeartbeatResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId can't be empty."
            )
        if not mid:
            return sgh.ShareGroupHeartbeatResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message="MemberId can't be empty."
            )
        self.connection_members[conn] = mid
        group = self.groups.get(gid)
        if epoch == -1:
            if group is not None and group.members.pop(mid, None) is not None:
                self._reassign(group)
            return sgh.ShareGroupHeartbeatResponse(
                member_id=mid, member_epoch=-1, heartbeat_interval_ms=self._interval(gid)
            )
        if epoch == 0:
            if not body.subscribed_topic_names:
                return sgh.ShareGroupHeartbeatResponse(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="SubscribedTopicNames must be set in first request.",
                )
            if group is None:
                group = self.groups[gid] = FakeGroup(gid)
            member = group.members.get(mid)
            if member is None:
                member = group.members[mid] = FakeMember(
                    mid,
                    self.client_id,
                    "/127.0.0.1",
                    body.rack_id,
                    tuple(body.subscribed_topic_names),
                )
            member.sent = None
        else:
            member = group.members.get(mid) if group is not None else None
            if member is None or group is None:
                return sgh.ShareGroupHeartbeatResponse(
                    error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                    error_message=f"Member {mid} is not a member of group {gid}.",
                )
            if epoch != member.epoch:
                return sgh.ShareGroupHeartbeatResponse(
                    error_code=ErrorCode.FENCED_MEMBER_EPOCH,
                    error_message=f"The share group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({member.epoch}).",
                )
        member.last_seen = now
        if (
            body.subscribed_topic_names is not None
            and tuple(body.subscribed_topic_names) != member.subscribed
        ):
            member.subscribed = tuple(body.subscribed_topic_names)
        self._reassign(group)
        if epoch == 0 and group.epoch == 0:
            group.epoch = 1
        mine = group.assignment.get(mid, frozenset())
        assignment = None
        if member.sent != mine or epoch == 0:
            member.sent = mine
            member.epoch = group.epoch
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(mine):
                by_topic.setdefault(topic, []).append(p)
            assignment = sgh.Assignment(
                topic_partitions=tuple(
                    sgh.TopicPartitions(topic_id=self.topics[n].topic_id, partitions=tuple(ps))
                    for n, ps in by_topic.items()
                )
            )
        return sgh.ShareGroupHeartbeatResponse(
            member_id=mid,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self._interval(gid),
            assignment=assignment,
        )

    def _interval(self, gid: str) -> int:
        return int(
            self.group_configs.get(gid, {}).get(
                "share.heartbeat.interval.ms", self.heartbeat_interval_ms
            )
        )

    def _h77(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # ShareGroupDescribe
        del version, conn, now
        out = []
        for gid in body.group_ids:
            group = self.groups.get(gid)
            if group is None:
                out.append(
                    sgd.DescribedGroup(
                        group_id=gid,
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {gid} not found.",
                        group_state="Dead",
                    )
                )
                continue
            members = []
            for m in group.members.values():
                by_topic: dict[str, list[int]] = {}
                for topic, p in sorted(group.assignment.get(m.member_id, frozenset())):
                    by_topic.setdefault(topic, []).append(p)
                members.append(
                    sgd.Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed,
                        assignment=sgd.Assignment(
                            topic_partitions=tuple(
                                sgd.TopicPartitions(
                                    topic_id=self.topics[n].topic_id,
                                    topic_name=n,
                                    partitions=tuple(ps),
                                )
                                for n, ps in by_topic.items()
                            )
                        ),
                    )
                )
            out.append(
                sgd.DescribedGroup(
                    group_id=gid,
                    group_state=group.state,
                    group_epoch=group.epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name="simple",
                    members=tuple(members),
                )
            )
        return sgd.ShareGroupDescribeResponse(groups=tuple(out))

    def share_fetch_ready(self, body: sf.ShareFetchRequest, arrived: float, now: float) -> bool:
        """Whether a ShareFetch should be answered now rather than wait for records."""
        return not self.model.fetch_would_wait(body, now, arrived)

    def next_change(self, now: float) -> float | None:
        """When a waiting ShareFetch may next become ready without a request (a lock
        ends, a release is persisted), if ever: the server sleeps until then."""
        return self.model.next_change(now)

    def _h78(self, body: Any, version: int, conn: str, now: float) -> Response:  # ShareFetch
        del version
        if body.member_id:
            self.connection_members[conn] = body.member_id
        resp = self.model.share_fetch(body, conn, now)
        if not resp.responses:
            return resp
        topics = []
        for t in resp.responses:
            parts = []
            for p in t.partitions:
                data = b""
                if p.acquired_records:
                    log = self.logs[(t.topic_id, p.partition_index)]
                    data = log.covering(
                        [(r.first_offset, r.last_offset) for r in p.acquired_records]
                    )
                # The model's records are its own (values only); a client gets the
                # producer's batches. Records are not nullable from v1 on.
                parts.append(dataclasses.replace(p, records=data))
            topics.append(dataclasses.replace(t, partitions=tuple(parts)))
        return dataclasses.replace(resp, responses=tuple(topics))

    def _h79(self, body: Any, version: int, conn: str, now: float) -> Response:  # ShareAcknowledge
        del version
        if body.member_id:
            self.connection_members[conn] = body.member_id
        return self.model.share_acknowledge(body, conn, now)

    # -- API handlers: groups and configs ----------------------------------------------------

    def _h16(self, body: Any, version: int, conn: str, now: float) -> Response:  # ListGroups
        del version, conn, now
        states = {s.lower() for s in body.states_filter}
        types = {s.lower() for s in body.types_filter}
        out = [
            lg.ListedGroup(
                group_id=g.group_id, protocol_type="share", group_state=g.state, group_type="share"
            )
            for g in sorted(self.groups.values(), key=lambda g: g.group_id)
            if (not states or g.state.lower() in states) and (not types or "share" in types)
        ]
        return lg.ListGroupsResponse(groups=tuple(out))

    def _h42(self, body: Any, version: int, conn: str, now: float) -> Response:  # DeleteGroups
        del version, conn, now
        out = []
        for gid in body.groups_names:
            group = self.groups.get(gid)
            if group is None:
                out.append(
                    dg.DeletableGroupResult(group_id=gid, error_code=ErrorCode.GROUP_ID_NOT_FOUND)
                )
            elif group.members:
                out.append(
                    dg.DeletableGroupResult(group_id=gid, error_code=ErrorCode.NON_EMPTY_GROUP)
                )
            else:
                del self.groups[gid]
                self.model.delete_group_state(gid)
                out.append(dg.DeletableGroupResult(group_id=gid))
        return dg.DeleteGroupsResponse(results=tuple(out))

    def _h44(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # IncrementalAlterConfigs
        del version, conn, now
        out = []
        for r in body.resources:
            code, message = self._alter(r, body.validate_only)
            out.append(
                iac.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
            )
        return iac.IncrementalAlterConfigsResponse(responses=tuple(out))

    def _group_config_defaults(self) -> dict[str, str]:
        if self.minor >= 3:
            return {**GROUP_CONFIG_DEFAULTS, **GROUP_CONFIG_DEFAULTS_4_3}
        return dict(GROUP_CONFIG_DEFAULTS)

    def _group_config_names(self) -> set[str]:
        return set(self._group_config_defaults())

    def _alter(self, r: Any, validate_only: bool) -> tuple[int, str | None]:
        if r.resource_type == _GROUP_RESOURCE:
            allowed = self._group_config_names()
            current = dict(self.group_configs.get(r.resource_name, {}))
            for c in r.configs:
                if c.name not in allowed:
                    return ErrorCode.INVALID_CONFIG, f"Unknown group config name: {c.name}"
                if c.config_operation == _DELETE:
                    current.pop(c.name, None)
                elif c.config_operation == _SET:
                    problem = _check_group_value(c.name, c.value)
                    if problem:
                        return ErrorCode.INVALID_CONFIG, problem
                    current[c.name] = c.value
                else:
                    return (
                        ErrorCode.INVALID_REQUEST,
                        f"operation {c.config_operation} is not supported on group configs",
                    )
            if not validate_only:
                self.group_configs[r.resource_name] = current
                self._apply_group_configs(r.resource_name)
            return ErrorCode.NONE, None
        if r.resource_type == _TOPIC_RESOURCE:
            t = self.topics.get(r.resource_name)
            if t is None:
                return (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"Topic {r.resource_name} does not exist",
                )
            target = t.configs
        elif r.resource_type == _BROKER_RESOURCE:
            target = self.broker_configs
        else:
            return (
                ErrorCode.INVALID_REQUEST,
                f"resource type {r.resource_type} is not served by the fake",
            )
        if not validate_only:
            for c in r.configs:
                if c.config_operation == _DELETE:
                    target.pop(c.name, None)
                elif c.value is not None:
                    target[c.name] = c.value
        return ErrorCode.NONE, None

    def _apply_group_configs(self, gid: str) -> None:
        c = {
            **GROUP_CONFIG_DEFAULTS,
            **GROUP_CONFIG_DEFAULTS_4_3,
            **self.group_configs.get(gid, {}),
        }
        self.model.configure_group(
            gid,
            lock_ms=int(c["share.record.lock.duration.ms"]),
            delivery_limit=int(c["share.delivery.count.limit"]),
            max_locks=int(c["share.partition.max.record.locks"]),
            earliest=c["share.auto.offset.reset"] == "earliest",
            renew_enabled=c[_RENEW_CONFIG] == "true",
        )

    def _h32(self, body: Any, version: int, conn: str, now: float) -> Response:  # DescribeConfigs
        del version, conn, now
        out = []
        for r in body.resources:
            if r.resource_type == _GROUP_RESOURCE:
                mine = self.group_configs.get(r.resource_name, {})
                values = self._group_config_defaults()
                entries = [
                    dc.DescribeConfigsResourceResult(
                        name=n,
                        value=mine.get(n, v),
                        config_source=8 if n in mine else 5,
                    )
                    for n, v in sorted(values.items())
                ]
            elif r.resource_type == _TOPIC_RESOURCE:
                t = self.topics.get(r.resource_name)
                if t is None:
                    out.append(
                        dc.DescribeConfigsResult(
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=f"Topic {r.resource_name} does not exist",
                            resource_type=r.resource_type,
                            resource_name=r.resource_name,
                        )
                    )
                    continue
                entries = [
                    dc.DescribeConfigsResourceResult(name=n, value=v, config_source=1)
                    for n, v in sorted(t.configs.items())
                ]
            else:
                entries = [
                    dc.DescribeConfigsResourceResult(name=n, value=v, config_source=2)
                    for n, v in sorted(self.broker_configs.items())
                ]
            if r.configuration_keys is not None:
                keys = set(r.configuration_keys)
                entries = [e for e in entries if e.name in keys]
            out.append(
                dc.DescribeConfigsResult(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    configs=tuple(entries),
                )
            )
        return dc.DescribeConfigsResponse(results=tuple(out))

    def _h90(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # DescribeShareGroupOffsets
        del conn, now
        out = []
        for g in body.groups:
            gid = g.group_id
            if g.topics is None:
                asked = {
                    t.name: list(range(t.partitions))
                    for t in self.topics.values()
                    if any(
                        self.model.share_offsets(gid, t.name, p) is not None
                        for p in range(t.partitions)
                    )
                }
            else:
                asked = {t.topic_name: list(t.partitions) for t in g.topics}
            topics = []
            for name, parts in asked.items():
                t = self.topics.get(name)
                rows = []
                for p in parts:
                    if t is None or not 0 <= p < t.partitions:
                        rows.append(
                            dsgo.DescribeShareGroupOffsetsResponsePartition(
                                partition_index=p,
                                start_offset=-1,
                                leader_epoch=-1,
                                lag=-1,
                                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                error_message="This server does not host this topic-partition.",
                            )
                        )
                        continue
                    state = self.model.share_offsets(gid, name, p)
                    if state is None:
                        rows.append(
                            dsgo.DescribeShareGroupOffsetsResponsePartition(
                                partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1
                            )
                        )
                        continue
                    start, lag = state
                    if version < 1:
                        lag = 0
                    rows.append(
                        dsgo.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=p,
                            start_offset=start,
                            leader_epoch=self._leader_epoch(t, p),
                            lag=lag,
                        )
                    )
                topics.append(
                    dsgo.DescribeShareGroupOffsetsResponseTopic(
                        topic_name=name,
                        topic_id=t.topic_id if t else uuid.UUID(int=0),
                        partitions=tuple(rows),
                    )
                )
            out.append(
                dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=tuple(topics))
            )
        return dsgo.DescribeShareGroupOffsetsResponse(groups=tuple(out))

    def _h91(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # AlterShareGroupOffsets
        del version, conn, now
        group = self.groups.get(body.group_id)
        if self.minor < 2:
            # Kafka 4.1 answers success and changes nothing, members or not (seen by the
            # differential suite).
            return aso.AlterShareGroupOffsetsResponse(
                responses=tuple(
                    aso.AlterShareGroupOffsetsResponseTopic(
                        topic_name=rt.topic_name,
                        topic_id=self.topics[rt.topic_name].topic_id
                        if rt.topic_name in self.topics
                        else uuid.UUID(int=0),
                        partitions=tuple(
                            aso.AlterShareGroupOffsetsResponsePartition(
                                partition_index=rp.partition_index
                            )
                            for rp in rt.partitions
                        ),
                    )
                    for rt in body.topics
                )
            )
        if group is not None and group.members:
            return aso.AlterShareGroupOffsetsResponse(
                error_code=ErrorCode.NON_EMPTY_GROUP, error_message="The group is not empty."
            )
        topics = []
        for rt in body.topics:
            t = self.topics.get(rt.topic_name)
            rows = []
            for rp in rt.partitions:
                if t is None or not 0 <= rp.partition_index < t.partitions:
                    rows.append(
                        aso.AlterShareGroupOffsetsResponsePartition(
                            partition_index=rp.partition_index,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message="This server does not host this topic-partition.",
                        )
                    )
                    continue
                self.model.set_start_offset(
                    body.group_id, t.name, rp.partition_index, rp.start_offset
                )
                rows.append(
                    aso.AlterShareGroupOffsetsResponsePartition(partition_index=rp.partition_index)
                )
            topics.append(
                aso.AlterShareGroupOffsetsResponseTopic(
                    topic_name=rt.topic_name,
                    topic_id=t.topic_id if t else uuid.UUID(int=0),
                    partitions=tuple(rows),
                )
            )
        if group is None:
            self.groups[body.group_id] = FakeGroup(body.group_id)
        return aso.AlterShareGroupOffsetsResponse(responses=tuple(topics))

    def _h92(
        self, body: Any, version: int, conn: str, now: float
    ) -> Response:  # DeleteShareGroupOffsets
        del version, conn, now
        group = self.groups.get(body.group_id)
        if group is None:
            return dso.DeleteShareGroupOffsetsResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {body.group_id} not found.",
            )
        if group.members:
            return dso.DeleteShareGroupOffsetsResponse(
                error_code=ErrorCode.NON_EMPTY_GROUP, error_message="The group is not empty."
            )
        out = []
        for rt in body.topics:
            t = self.topics.get(rt.topic_name)
            if t is None:
                out.append(
                    dso.DeleteShareGroupOffsetsResponseTopic(
                        topic_name=rt.topic_name,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="This server does not host this topic-partition.",
                    )
                )
                continue
            self.model.delete_group_state(body.group_id, t.name)
            out.append(
                dso.DeleteShareGroupOffsetsResponseTopic(topic_name=t.name, topic_id=t.topic_id)
            )
        return dso.DeleteShareGroupOffsetsResponse(responses=tuple(out))


def _check_group_value(name: str, value: str | None) -> str | None:
    if value is None:
        return f"Null value not supported for : {name}"
    if name == "share.auto.offset.reset":
        return (
            None
            if value in ("earliest", "latest")
            else f"Invalid value {value} for configuration {name}"
        )
    if name in ("share.isolation.level",):
        return (
            None
            if value in ("read_committed", "read_uncommitted")
            else f"Invalid value {value} for configuration {name}"
        )
    if name == _RENEW_CONFIG:
        return (
            None
            if value in ("true", "false")
            else f"Invalid value {value} for configuration {name}"
        )
    try:
        number = int(value)
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type INT"
    if name == "share.record.lock.duration.ms" and not _LOCK_RANGE[0] <= number <= _LOCK_RANGE[1]:
        return f"Invalid value {value} for configuration {name}: Value must be at least {_LOCK_RANGE[0]}"
    if name == "share.delivery.count.limit" and not 2 <= number <= 10:
        return f"Invalid value {value} for configuration {name}"
    if number < 1:
        return f"Invalid value {value} for configuration {name}"
    return None


def _error_response(body: Request[Response], code: int) -> Response:
    """The answer of an injected failure: ``code`` where this API reports errors."""
    cls = body.response_type
    names = {f.name for f in cls.kafka_fields}
    if "error_code" in names:
        return cls(error_code=code)  # type: ignore[call-arg]
    if isinstance(body, pr.ProduceRequest):
        return pr.ProduceResponse(
            responses=tuple(
                pr.TopicProduceResponse(
                    name=td.name,
                    topic_id=td.topic_id,
                    partition_responses=tuple(
                        pr.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
                        for p in td.partition_data
                    ),
                )
                for td in body.topic_data
            )
        )
    if isinstance(body, ct.CreateTopicsRequest):
        return ct.CreateTopicsResponse(
            topics=tuple(ct.CreatableTopicResult(name=t.name, error_code=code) for t in body.topics)
        )
    if isinstance(body, dt.DeleteTopicsRequest):
        return dt.DeleteTopicsResponse(
            responses=tuple(
                dt.DeletableTopicResult(name=n, error_code=code)
                for n in [*body.topic_names, *(t.name for t in body.topics)]
            )
        )
    if isinstance(body, fc.FindCoordinatorRequest):
        return fc.FindCoordinatorResponse(
            coordinators=tuple(
                fc.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
                for k in body.coordinator_keys
            )
        )
    if isinstance(body, sgd.ShareGroupDescribeRequest):
        return sgd.ShareGroupDescribeResponse(
            groups=tuple(sgd.DescribedGroup(group_id=g, error_code=code) for g in body.group_ids)
        )
    if isinstance(body, dg.DeleteGroupsRequest):
        return dg.DeleteGroupsResponse(
            results=tuple(
                dg.DeletableGroupResult(group_id=g, error_code=code) for g in body.groups_names
            )
        )
    if isinstance(body, md.MetadataRequest):
        return md.MetadataResponse(
            topics=tuple(
                md.MetadataResponseTopic(name=t.name, topic_id=t.topic_id, error_code=code)
                for t in (body.topics or ())
            )
        )
    raise AssertionError(f"{cls.api_name} is not in FAILABLE")


#: API keys :meth:`FakeKafka.fail_next` can fail: those with a top-level error code, and
#: those whose per-item error codes the fake fills in.
FAILABLE: frozenset[int] = frozenset(
    {
        k
        for k, req in REQUESTS.items()
        if any(f.name == "error_code" for f in req.response_type.kafka_fields)
    }
    | {
        pr.ProduceRequest.api_key,
        ct.CreateTopicsRequest.api_key,
        dt.DeleteTopicsRequest.api_key,
        fc.FindCoordinatorRequest.api_key,
        sgd.ShareGroupDescribeRequest.api_key,
        dg.DeleteGroupsRequest.api_key,
        md.MetadataRequest.api_key,
    }
)
