"""sharecon.admin.Admin against a real broker: every call, checked where possible against
Kafka's own Java tools (an independent oracle), and every error naming what it concerns."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, ConfigSource, NewTopic, ResourceType
from sharecon.producer import Producer, ProducerRecord
from sharecon.protocol import ShareGroupHeartbeatRequest
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from sharecon.testing.pytest_plugin import ProduceRecords, TopicFactory
    from sharecon.testing.tools import KafkaTools

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def admin(kafka_bootstrap: str) -> AsyncIterator[Admin]:
    async with Admin(kafka_bootstrap, request_timeout=30.0) as client:
        yield client


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    """Poll ``check`` until it holds; fail the test after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        for _ in range(10**6):
            if await check():
                return
            await anyio.sleep(0.2)


_COORDINATOR_MOVING = frozenset(
    {
        errors.CoordinatorLoadInProgressError.code,
        errors.CoordinatorNotAvailableError.code,
        errors.NotCoordinatorError.code,
    }
)


class BareMember:
    """A share-group member driven by hand with ShareGroupHeartbeat (no fetching)."""

    def __init__(self, admin: Admin, group: str, topic: str) -> None:
        self.admin, self.group, self.topic = admin, group, topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.assigned: set[int] = set()

    async def heartbeat(self, epoch: int | None = None) -> None:
        request = ShareGroupHeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch,
            subscribed_topic_names=(self.topic,) if self.epoch == 0 else None,
        )
        with anyio.fail_after(30):
            while True:
                node = await self.admin._open_cluster.coordinator(self.group)
                response = await self.admin._open_cluster.request(node, request)
                if response.error_code not in _COORDINATOR_MOVING:
                    break
                # A fresh broker loads its group state first (and on a busy machine the
                # coordinator may not be settled yet): ask where it is again.
                self.admin._open_cluster.invalidate_coordinator(self.group)
                await anyio.sleep(0.2)
        assert response.error_code == 0, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.assigned = {
                p for tp in response.assignment.topic_partitions for p in tp.partitions
            }

    async def join_until_assigned(self, partitions: int) -> None:
        with anyio.fail_after(30):
            await self.heartbeat()
            while len(self.assigned) < partitions:
                await anyio.sleep(0.2)
                await self.heartbeat()

    async def leave(self) -> None:
        await self.heartbeat(epoch=-1)


# -- topics ---------------------------------------------------------------------------------


async def test_create_describe_list_delete_topics(admin: Admin, kafka_tools: KafkaTools) -> None:
    a, b = fresh("adm-a"), fresh("adm-b")
    created = await admin.create_topics(
        [a, NewTopic(name=b, num_partitions=2, configs={"retention.ms": "3600000"})],
        num_partitions=3,
    )
    by_name = {c.name: c for c in created}
    assert by_name[a].num_partitions == 3 and by_name[b].num_partitions == 2
    assert all(c.created and c.replication_factor == 1 for c in created)
    # The Java tools agree, and the topic is usable at once (every partition has a leader).
    assert kafka_tools.topic_partitions(a) == 3
    assert kafka_tools.topic_partitions(b) == 2
    meta = admin._open_cluster.metadata
    assert meta.topic_ids[a] == by_name[a].topic_id
    assert all(p.leader_id >= 0 for p in meta.partitions[a])

    described = await admin.describe_topics([a, b])
    assert [p.partition for p in described[a].partitions] == [0, 1, 2]
    assert described[b].topic_id == by_name[b].topic_id
    assert not described[a].internal

    listed = await admin.list_topics()
    assert {a, b} <= set(listed)
    assert not any(name.startswith("__") for name in listed)
    with_internal = await admin.list_topics(internal=True)
    assert set(listed) <= set(with_internal)
    assert all(with_internal[n].internal for n in set(with_internal) - set(listed))

    topic_conf = await admin.describe_configs(ResourceType.TOPIC, b, ["retention.ms"])
    assert topic_conf["retention.ms"].value == "3600000"
    assert topic_conf["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG

    await admin.delete_topics([a, b])

    async def both_gone() -> bool:
        return not {a, b} & set(await admin.list_topics())

    await eventually(both_gone)
    assert a not in kafka_tools.list_topics()
    assert a not in admin._open_cluster.metadata.topic_ids


async def test_create_existing_topic_names_it(admin: Admin, topic_factory: TopicFactory) -> None:
    name = topic_factory(2)
    with pytest.raises(errors.TopicAlreadyExistsError, match=name):
        await admin.create_topics([name])
    (again,) = await admin.create_topics([name], exist_ok=True)
    assert not again.created
    assert again.num_partitions == 2
    assert again.topic_id == (await admin.metadata([name])).topic_ids[name]


async def test_create_topic_errors_are_typed(admin: Admin) -> None:
    with pytest.raises(errors.InvalidReplicationFactorError, match="bad-rf"):
        await admin.create_topics([fresh("bad-rf")], replication_factor=3)
    # An illegal name is refused before any request, naming what is wrong with it.
    with pytest.raises(errors.ConfigError, match="invalid topic name 'bad name!'"):
        await admin.create_topics(["bad name!"])
    with pytest.raises(errors.InvalidConfigError, match="bad-conf"):
        await admin.create_topics([fresh("bad-conf")], configs={"retention.ms": "soon"})
    name = fresh("validate")
    (result,) = await admin.create_topics([name], num_partitions=4, validate_only=True)
    assert result.num_partitions == 4
    assert name not in await admin.list_topics()


async def test_delete_missing_topic(admin: Admin) -> None:
    name = fresh("missing")
    with pytest.raises(errors.UnknownTopicOrPartitionError, match=name):
        await admin.delete_topics([name])
    await admin.delete_topics([name], missing_ok=True)


async def test_describe_unknown_topic_names_it(admin: Admin) -> None:
    name = fresh("nope")
    with pytest.raises(errors.UnknownTopicOrPartitionError, match=name):
        await admin.describe_topics([name])


async def test_describe_cluster(admin: Admin, kafka_bootstrap: str) -> None:
    cluster = await admin.describe_cluster()
    assert cluster.cluster_id
    assert cluster.controller_id in {b.node_id for b in cluster.brokers}
    host, _, port = kafka_bootstrap.rpartition(":")
    assert any((b.host, b.port) == (host, int(port)) for b in cluster.brokers)


# -- group configs --------------------------------------------------------------------------


async def test_group_config_round_trip(admin: Admin, kafka_tools: KafkaTools) -> None:
    group = fresh("cfg")
    await admin.alter_group_config(
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "5000"},
    )
    # The broker applies the controller's config change from its metadata log a moment
    # after AlterConfigs answers (read back at once, CI once saw the default): read again
    # for a bounded time until it has.
    for _ in range(50):
        conf = await admin.describe_group_config(group)
        if not conf["share.record.lock.duration.ms"].is_default:
            break
        await anyio.sleep(0.1)
    assert conf["share.auto.offset.reset"].value == "earliest"
    assert conf["share.auto.offset.reset"].source is ConfigSource.GROUP_CONFIG
    assert not conf["share.auto.offset.reset"].is_default
    assert conf["share.record.lock.duration.ms"].value == "5000"
    # Kafka's own ConfigCommand reads back what we wrote.
    java = kafka_tools.describe_group_config(group)
    assert java["share.auto.offset.reset"] == "earliest"
    assert java["share.record.lock.duration.ms"] == "5000"

    # None removes the override: the value falls back to the broker default (read again
    # until the broker has applied it, as above).
    await admin.alter_group_config(group, {"share.record.lock.duration.ms": None})
    for _ in range(50):
        only = await admin.describe_group_config(group, ["share.record.lock.duration.ms"])
        if only["share.record.lock.duration.ms"].is_default:
            break
        await anyio.sleep(0.1)
    assert set(only) == {"share.record.lock.duration.ms"}
    assert only["share.record.lock.duration.ms"].value != "5000"
    assert only["share.record.lock.duration.ms"].is_default
    assert "share.record.lock.duration.ms" not in kafka_tools.describe_group_config(group)


async def test_bad_group_config_names_group(admin: Admin) -> None:
    group = fresh("badcfg")
    with pytest.raises(errors.InvalidConfigError, match=group):
        await admin.alter_group_config(group, {"share.auto.offset.reset": "sometimes"})
    with pytest.raises(errors.InvalidConfigError, match=group):
        await admin.alter_group_config(group, {"no.such.group.config": "1"})


# -- share groups ---------------------------------------------------------------------------


async def test_share_group_lifecycle(
    admin: Admin, topic_factory: TopicFactory, produce_records: ProduceRecords
) -> None:
    topic = topic_factory(2)
    group = fresh("sg")
    produce_records(topic, 20)
    await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})

    member = BareMember(admin, group, topic)
    await member.join_until_assigned(2)
    listed = {g.group_id: g for g in await admin.list_share_groups()}
    assert group in listed
    assert listed[group].state in ("Stable", "Empty", "Assigning", "Reconciling")

    desc = await admin.describe_share_group(group)
    (m,) = desc.members
    assert desc.group_id == group
    assert m.member_id == member.member_id
    assert m.member_epoch == member.epoch
    assert m.subscribed_topics == (topic,)
    assert m.client_id == admin._open_cluster._config.client_id
    assert set(m.assignment) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    assert desc.group_epoch >= 1

    # A group with a live member cannot have its offsets changed.
    with pytest.raises(errors.NonEmptyGroupError, match=group):
        await admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 3})

    await member.leave()

    async def no_members() -> bool:
        return not (await admin.describe_share_group(group)).members

    await eventually(no_members)
    assert group in {g.group_id for g in await admin.list_share_groups(states=["Empty"])}
    assert group not in {g.group_id for g in await admin.list_share_groups(states=["Stable"])}

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await admin.alter_share_group_offsets(group, {tp0: 0, tp1: 0})
    offsets = await admin.describe_share_group_offsets(group, [topic])
    assert {tp: o.start_offset for tp, o in offsets.items()} == {tp0: 0, tp1: 0}
    # Lag (DescribeShareGroupOffsets v1) counts every record not yet delivered: all 20.
    assert sum(o.lag for o in offsets.values()) == 20
    busy = max(offsets, key=lambda tp: offsets[tp].lag)
    await admin.alter_share_group_offsets(group, {busy: 3})
    moved = await admin.describe_share_group_offsets(group)
    assert moved[busy].start_offset == 3
    assert moved[busy].lag == offsets[busy].lag - 3
    just_one = await admin.describe_share_group_offsets(group, {topic: [busy.partition]})
    assert set(just_one) == {busy}

    await admin.delete_share_group_offsets(group, [topic])
    assert await admin.describe_share_group_offsets(group) == {}
    cleared = await admin.describe_share_group_offsets(group, [topic])
    assert {tp: o.start_offset for tp, o in cleared.items()} == {
        TopicPartition(topic, 0): -1,
        TopicPartition(topic, 1): -1,
    }


async def test_delete_share_groups(
    admin: Admin, topic_factory: TopicFactory, produce_records: ProduceRecords
) -> None:
    """A group with a member is refused (naming it); an empty one is deleted with its state;
    an unknown id, or one that only has configs, is reported as not found."""
    topic = topic_factory(1)
    produce_records(topic, 5)
    busy, ghost, configured = fresh("del-busy"), fresh("del-ghost"), fresh("del-cfg")
    await admin.alter_group_config(busy, {"share.auto.offset.reset": "earliest"})
    await admin.alter_group_config(configured, {"share.auto.offset.reset": "earliest"})
    member = BareMember(admin, busy, topic)
    await member.join_until_assigned(1)

    results = await admin.delete_share_groups([busy, ghost, configured])
    assert list(results) == [busy, ghost, configured]
    assert isinstance(results[busy], errors.NonEmptyGroupError)
    assert busy in str(results[busy]) and "active members" in str(results[busy])
    assert isinstance(results[ghost], errors.GroupIdNotFoundError)
    assert ghost in str(results[ghost])
    assert isinstance(results[configured], errors.GroupIdNotFoundError)
    assert (await admin.describe_share_group(busy)).members  # still there

    await member.leave()

    async def no_members() -> bool:
        return not (await admin.describe_share_group(busy)).members

    await eventually(no_members)
    await admin.alter_share_group_offsets(busy, {TopicPartition(topic, 0): 2})
    assert await admin.delete_share_groups([busy]) == {busy: None}
    with pytest.raises(errors.GroupIdNotFoundError, match=busy):
        await admin.describe_share_group(busy)
    assert busy not in {g.group_id for g in await admin.list_share_groups()}
    # The group's state went with it; its dynamic configs are kept by the broker.
    gone = await admin.describe_share_group_offsets(busy, [topic])
    assert {tp: o.start_offset for tp, o in gone.items()} == {TopicPartition(topic, 0): -1}
    kept = await admin.describe_group_config(busy, ["share.auto.offset.reset"])
    assert kept["share.auto.offset.reset"].value == "earliest"

    with pytest.raises(errors.ConfigError, match="empty"):
        await admin.delete_share_groups(["ok", ""])


async def test_list_offsets(
    admin: Admin, topic_factory: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topic_factory(2)
    async with Producer(kafka_bootstrap) as producer:
        await producer.send_batch(
            [ProducerRecord(topic, b"x", partition=0) for _ in range(3)]
            + [ProducerRecord(topic, b"y", partition=1) for _ in range(7)]
        )
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert await admin.list_offsets([tp0, tp1], "latest") == {tp0: 3, tp1: 7}
    assert await admin.list_offsets([tp1, tp0], "earliest") == {tp1: 0, tp0: 0}
    with pytest.raises(errors.UnknownTopicOrPartitionError, match=f"{topic}.*no partition 2"):
        await admin.list_offsets([TopicPartition(topic, 2)], "latest")
    missing = fresh("no-topic")
    with pytest.raises(errors.UnknownTopicOrPartitionError, match=missing):
        await admin.list_offsets([TopicPartition(missing, 0)], "earliest")
    with pytest.raises(errors.ConfigError, match="earliest"):
        await admin.list_offsets([tp0], "first")  # type: ignore[arg-type]


async def test_describe_missing_share_group_names_it(admin: Admin) -> None:
    group = fresh("ghost")
    with pytest.raises(errors.GroupIdNotFoundError, match=group):
        await admin.describe_share_group(group)


async def test_alter_offsets_of_missing_topic(admin: Admin) -> None:
    group = fresh("sg-missing")
    topic = fresh("nope")
    with pytest.raises(errors.BrokerError, match=group):
        await admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})


async def test_admin_outside_context_is_a_clear_error() -> None:
    client = Admin("127.0.0.1:1")
    with pytest.raises(errors.ClientNotStartedError, match="async with Admin"):
        await client.list_topics()


# -- seams for sharecon's own tools (the CLI, the test kit) ----------------------------------


async def test_api_versions_and_find_coordinator(
    admin: Admin, kafka_bootstrap: str, kafka_tools: KafkaTools
) -> None:
    """The public seams the CLI and the test kit use instead of the Admin's cluster view."""
    from sharecon.protocol import ShareFetchRequest

    # Kafka 4.1 speaks ShareFetch v1, 4.2+ v2 (record limits): what `consume --max` checks.
    assert admin.api_versions.get(ShareFetchRequest) in (1, 2)
    assert admin.api_versions.feature_level("share.version") >= 1
    group = fresh("adm-coord")
    node = await admin.find_coordinator(group)
    brokers = (await admin.describe_cluster()).brokers
    assert node in {b.node_id for b in brokers}
    assert await admin.find_coordinator(group) == node  # asked again: the same broker
    unstarted = Admin(kafka_bootstrap)
    with pytest.raises(errors.ClientNotStartedError):
        unstarted.api_versions  # noqa: B018 - the property raises
