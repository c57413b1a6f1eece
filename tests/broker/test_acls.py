"""Least privilege against a real broker with ACLs (Kafka's StandardAuthorizer).

One broker for the module: a SASL PLAIN listener for the users under test, each granted
the ACLs docs/security.md names for its role, or those minus one. The kit's tools and
the privileged checks use the PLAINTEXT listener (User:ANONYMOUS, a super user).

Each missing ACL must give a named error within a few seconds, and nothing may be lost:
after each case a privileged consumer of the same group reads every record back and
checks how many deliveries it spent (or the dead-letter topic holds every copy).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import ConnectionConfig
from sharecon._net.sasl import SaslConfig
from sharecon.admin import Admin
from sharecon.cli._clients import set_earliest
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy, dead_letter_info
from sharecon.producer import Producer
from sharecon.testing import AuthorizerSetup, KafkaBroker, SaslSetup
from sharecon.testing.env import env_version
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sharecon.record import Record

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

#: Every topic and group of this module starts with this, so ACLs can be prefixed ones.
P = "acl-"
USERS = {
    "admin": "admin-secret",  # a super user over SASL
    "reader": "reader-secret",  # consumer: READ on the group, READ (+DESCRIBE) on topics
    "writer": "writer-secret",  # consumer + DLQ writer: also WRITE on topics
    "producer": "producer-secret",  # WRITE on topics
    "describer": "describer-secret",  # DESCRIBE on topics, READ on groups: no topic READ/WRITE
    "grouponly": "grouponly-secret",  # READ on groups, nothing on topics (no DESCRIBE)
    "topiconly": "topiconly-secret",  # READ on topics, nothing on groups
}
#: Within this, each missing ACL is a named error (the issue's "a second or two", with
#: room for a loaded CI machine).
PROMPT = 8.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def acl_broker() -> Iterator[KafkaBroker]:
    """The module's broker (its own: ACLs would get in the way of every other test)."""
    with KafkaBroker(
        env_version(),
        sasl=SaslSetup(mechanisms=("PLAIN",), users=USERS),
        authorizer=AuthorizerSetup(super_users=("admin",)),
    ) as broker:
        tools = broker.tools
        # The ACLs docs/security.md names, granted on prefixes, several users a run (each
        # kafka-acls run is a JVM: about 2-3 s here).
        tools.add_acls(["reader", "writer"], ["Read"], topics=[P], groups=[P], prefixed=True)
        tools.add_acls(["producer", "writer"], ["Write"], topics=[P], prefixed=True)
        tools.add_acls("describer", ["Describe"], topics=[P], prefixed=True)
        tools.add_acls(["describer", "grouponly"], ["Read"], groups=[P], prefixed=True)
        tools.add_acls("topiconly", ["Read"], topics=[P], prefixed=True)
        yield broker


def as_user(user: str) -> ConnectionConfig:
    return ConnectionConfig(sasl=sasl_of(user))


def sasl_of(user: str) -> SaslConfig:
    return SaslConfig("PLAIN", user, USERS[user])


def name(kind: str) -> str:
    return f"{P}{kind}-{uuid.uuid4().hex[:8]}"


async def setup(broker: KafkaBroker, values: list[bytes]) -> tuple[str, str]:
    """A fresh topic with ``values`` and a fresh group reading from the earliest."""
    topic, group = name("t"), name("g")
    async with Admin(broker.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    async with Producer(broker.plaintext_bootstrap) as producer:
        for v in values:
            await producer.send_and_wait(topic, v)
    return topic, group


async def read_back(broker: KafkaBroker, group: str, topic: str, n: int) -> list[Record[Any, Any]]:
    """Every record of ``topic`` through ``group`` (privileged), accepted: what is left."""
    out: list[Record[Any, Any]] = []
    async with ShareConsumer(broker.plaintext_bootstrap, group_id=group, topics=[topic]) as c:
        with anyio.fail_after(30):
            async for record in c:
                out.append(record)
                if len(out) == n:
                    break
    return out


async def test_a_consumer_with_the_documented_acls_consumes(acl_broker: KafkaBroker) -> None:
    topic, group = await setup(acl_broker, [b"a", b"b", b"c"])
    got = []
    async with ShareConsumer(
        acl_broker.bootstrap, group_id=group, topics=[topic], sasl=sasl_of("reader")
    ) as consumer:
        with anyio.fail_after(30):
            async for record in consumer:
                got.append(record.value)
                if len(got) == 3:
                    break
    assert sorted(got) == [b"a", b"b", b"c"]


async def test_missing_describe_on_the_topic_fails_start_promptly(
    acl_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21 defect 1: was ~2,400 heartbeats a second, then a timeout after 40 s."""
    topic, group = await setup(acl_broker, [b"a", b"b"])
    consumer = ShareConsumer(
        acl_broker.bootstrap, group_id=group, topics=[topic], sasl=sasl_of("grouponly")
    )
    began = time.monotonic()
    with caplog.at_level(logging.DEBUG, "sharecon"):
        with pytest.raises(errors.TopicAuthorizationFailedError, match=topic):
            with anyio.fail_after(PROMPT):
                await consumer.start()
    assert time.monotonic() - began < PROMPT
    heartbeats = [r for r in caplog.records if r.getMessage().startswith("heartbeat epoch")]
    assert len(heartbeats) <= 5
    assert not any("do not exist" in r.getMessage() for r in caplog.records)
    got = await read_back(acl_broker, group, topic, 2)
    assert [r.delivery_count for r in got] == [1, 1]  # nothing acquired on the way


async def test_missing_read_on_the_topic_fails_the_iteration_promptly(
    acl_broker: KafkaBroker,
) -> None:
    topic, group = await setup(acl_broker, [b"a", b"b"])
    async with ShareConsumer(
        acl_broker.bootstrap, group_id=group, topics=[topic], sasl=sasl_of("describer")
    ) as consumer:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            with anyio.fail_after(PROMPT):
                async for _ in consumer:
                    pytest.fail("a record without READ on the topic")
        assert not consumer.health().ok
    got = await read_back(acl_broker, group, topic, 2)
    assert [r.delivery_count for r in got] == [1, 1]


async def test_missing_read_on_the_group_fails_start_promptly(acl_broker: KafkaBroker) -> None:
    topic, group = await setup(acl_broker, [b"a"])
    consumer = ShareConsumer(
        acl_broker.bootstrap, group_id=group, topics=[topic], sasl=sasl_of("topiconly")
    )
    with pytest.raises(errors.GroupAuthorizationFailedError):
        with anyio.fail_after(PROMPT):
            await consumer.start()
    got = await read_back(acl_broker, group, topic, 1)
    assert [r.delivery_count for r in got] == [1]


async def test_producer_needs_write(acl_broker: KafkaBroker) -> None:
    topic, _ = await setup(acl_broker, [])
    elsewhere = f"no-{topic}"  # outside the producer's prefix
    async with Admin(acl_broker.plaintext_bootstrap) as admin:
        await admin.create_topics([elsewhere], num_partitions=1)
    async with Producer(acl_broker.bootstrap, config=as_user("producer")) as producer:
        await producer.send_and_wait(topic, b"granted")
        with pytest.raises(errors.TopicAuthorizationFailedError):
            with anyio.fail_after(PROMPT):
                await producer.send_and_wait(elsewhere, b"refused")
    # Without WRITE on any topic, the idempotent producer's InitProducerId is refused.
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        with anyio.fail_after(PROMPT):
            async with Producer(acl_broker.bootstrap, config=as_user("describer")) as producer:
                await producer.send_and_wait(topic, b"refused")
    async with Admin(acl_broker.plaintext_bootstrap) as admin:
        ends = await admin.list_offsets(
            [TopicPartition(topic, 0), TopicPartition(elsewhere, 0)], "latest"
        )
    assert sorted(ends.values()) == [0, 1]  # the granted record only


async def test_dlq_writer_needs_no_create_when_the_topic_exists(acl_broker: KafkaBroker) -> None:
    """Issue 21 defect 3: CreateTopics(exist_ok) is refused without CREATE, even for a
    topic that exists; the copies are written anyway."""
    topic, group = await setup(acl_broker, [b"a", b"b", b"c"])
    dlq = name("dlq")
    async with Admin(acl_broker.plaintext_bootstrap) as admin:
        await admin.create_topics([dlq], num_partitions=1)

    async def poison(record: Record[Any, Any]) -> None:
        raise ValueError("poison")

    async with ShareConsumer(
        acl_broker.bootstrap,
        group_id=group,
        topics=[topic],
        sasl=sasl_of("writer"),
        dead_letter=DeadLetterPolicy(topic=dlq, max_deliveries=1),
    ) as consumer:
        with anyio.move_on_after(PROMPT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, poison)
                for _ in range(int(PROMPT * 10)):
                    if consumer.metrics().dlq_records_total >= 3:
                        break
                    await anyio.sleep(0.1)
                tg.cancel_scope.cancel()
        assert consumer.metrics().dlq_records_total == 3
        assert consumer.metrics().dlq_errors_total == 0
    reader = name("g")
    async with Admin(acl_broker.plaintext_bootstrap) as admin:
        await admin.alter_group_config(reader, {"share.auto.offset.reset": "earliest"})
    copies = await read_back(acl_broker, reader, dlq, 3)
    infos = [dead_letter_info(c.headers) for c in copies]
    assert sorted((i.topic, i.offset) for i in infos if i is not None) == [
        (topic, 0),
        (topic, 1),
        (topic, 2),
    ]


async def test_dlq_without_write_stops_the_consumer_and_loses_nothing(
    acl_broker: KafkaBroker,
) -> None:
    """Issue 21 defect 2: each routing failed and released the record, the broker archived
    it at its delivery limit (3 of 3 gone), process() never raised, health().ok stayed."""
    topic, group = await setup(acl_broker, [b"a", b"b", b"c"])
    dlq = name("dlq")
    async with Admin(acl_broker.plaintext_bootstrap) as admin:
        await admin.create_topics([dlq], num_partitions=1)

    async def poison(record: Record[Any, Any]) -> None:
        raise ValueError("poison")

    async with ShareConsumer(
        acl_broker.bootstrap,
        group_id=group,
        topics=[topic],
        sasl=sasl_of("reader"),  # READ everywhere, no WRITE on the dead-letter topic
        dead_letter=DeadLetterPolicy(topic=dlq, max_deliveries=1),
    ) as consumer:
        with pytest.raises(errors.DeadLetterTopicError, match=dlq) as caught:
            with anyio.fail_after(PROMPT):
                await consumer.process(poison)
        # No WRITE anywhere: the idempotent producer's InitProducerId is refused first.
        assert isinstance(caught.value.__cause__, errors.ClusterAuthorizationFailedError)
        health = consumer.health()
        assert (
            not health.ok and health.failed is not None and "DeadLetterTopicError" in health.failed
        )
        spent = consumer.metrics().dlq_errors_total
        assert 1 <= spent <= 3
    # Nothing archived: all three come back, each having spent at most one delivery more.
    got = await read_back(acl_broker, group, topic, 3)
    assert sorted(r.value for r in got) == [b"a", b"b", b"c"]
    assert all(r.delivery_count <= 2 for r in got)


async def test_dlq_that_does_not_exist_without_create_names_create(
    acl_broker: KafkaBroker,
) -> None:
    topic, group = await setup(acl_broker, [b"a"])

    async def poison(record: Record[Any, Any]) -> None:
        raise ValueError("poison")

    async with ShareConsumer(
        acl_broker.bootstrap,
        group_id=group,
        topics=[topic],
        sasl=sasl_of("writer"),  # WRITE (so DESCRIBE) on acl-*, no CREATE
        dead_letter=DeadLetterPolicy(topic=name("dlq-absent"), max_deliveries=1),
    ) as consumer:
        with pytest.raises(errors.DeadLetterTopicError, match="CREATE"):
            with anyio.fail_after(PROMPT):
                await consumer.process(poison)
    got = await read_back(acl_broker, group, topic, 1)
    assert [r.delivery_count for r in got] == [2]


async def test_earliest_without_alter_configs_names_the_acl(acl_broker: KafkaBroker) -> None:
    group = name("g")
    async with Admin(acl_broker.bootstrap, config=as_user("reader")) as admin:
        with pytest.raises(errors.BrokerError, match="ALTER_CONFIGS on the group") as caught:
            with anyio.fail_after(PROMPT):
                await set_earliest(admin, group)
    assert isinstance(caught.value, errors.GroupAuthorizationFailedError)
