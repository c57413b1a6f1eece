"""Run a :class:`~.scenario.Scenario` against a real Kafka broker, request by request.

The runner speaks the share protocol itself over sharecon's connection layer, so the
scenario decides exactly what is sent: each member gets its own
:class:`~sharecon._net.connection.BrokerConnection` (its share session lives on it), and
the requests are the same bodies the model runner hands the model broker
(:func:`~.model_runner.fetch_request`, :func:`~.model_runner.acknowledge_request`).
Each scenario gets its own topic (one partition) and share group. Members and the
producer talk to the partition's leader, the joining member to the group coordinator, so
the runner works on a cluster too; there a :class:`~.scenario.MoveLeader` step moves the
leadership with the target's ``move_leader`` (for example
:meth:`sharecon.testing.KafkaCluster.move_leader`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from sharecon._net.connect import ConnectionConfig, open_connection
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon.protocol.messages.find_coordinator import FindCoordinatorRequest
from sharecon.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from sharecon.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from sharecon.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from sharecon.protocol.records import Record, encode_batch
from sharecon.testing.conformance.model_runner import (
    DISCONNECT_SETTLE,
    acknowledge_request,
    fetch_request,
    observe_fetch,
)
from sharecon.testing.conformance.scenario import (
    Ack,
    CloseOld,
    Disconnect,
    Fetch,
    LookUp,
    MoveLeader,
    NewSession,
    Observation,
    Produce,
    Scenario,
    StartLeader,
    StopLeader,
    Wait,
    member_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from sharecon.admin import Admin

__all__ = ["BrokerTarget", "play_on_broker", "run_on_broker"]


@dataclass(slots=True)
class BrokerTarget:
    """A running broker and the clients the runner shares between scenarios."""

    bootstrap: str
    version: str
    admin: Admin
    task_group: TaskGroup
    config: ConnectionConfig = field(
        default_factory=lambda: ConnectionConfig(client_id="conformance", request_timeout=20.0)
    )
    #: ``move_leader(topic, partition)``: make another broker lead it (blocking; run in a
    #: worker thread). ``None`` on a single broker: a scenario that moves one fails.
    move_leader: Callable[[str, int], None] | None = None
    #: ``stop_broker(node_id)`` / ``start_broker(node_id)``: stop a broker cleanly, start it
    #: again (blocking; run in a worker thread), for :class:`~.scenario.StopLeader` and
    #: :class:`~.scenario.StartLeader`. ``None`` on a single broker.
    stop_broker: Callable[[int], None] | None = None
    start_broker: Callable[[int], None] | None = None

    @property
    def address(self) -> BrokerAddress:
        """The first bootstrap broker's address."""
        host, _, port = self.bootstrap.split(",")[0].rpartition(":")
        return BrokerAddress(host, int(port))


async def _connect(target: BrokerTarget, address: BrokerAddress | None = None) -> BrokerConnection:
    """A new connection of the runner's own (to the first bootstrap broker by default)."""
    return await open_connection(address or target.address, target.config, target.task_group)


async def _leader(target: BrokerTarget, topic: str, topic_id: uuid.UUID) -> BrokerAddress:
    """The address of the broker leading partition 0 of ``topic`` now."""
    for _ in range(100):
        meta = await target.admin.metadata([topic])
        leader = meta.leader_for(topic_id, 0)
        if leader is not None and leader in meta.brokers:
            return meta.brokers[leader]
        await anyio.sleep(0.2)
    raise AssertionError(f"{topic}-0 has no leader")


async def _leaderless(
    target: BrokerTarget, topic: str, topic_id: uuid.UUID, stopped: int
) -> BrokerAddress:
    """Wait until the metadata names no leader for partition 0 of ``topic`` (its broker
    ``stopped``); return the address of a broker that is up."""
    for _ in range(150):
        meta = await target.admin.metadata([topic])
        others = [a for n, a in sorted(meta.brokers.items()) if n != stopped]
        if meta.leader_for(topic_id, 0) is None and others:
            return others[0]
        await anyio.sleep(0.2)
    raise AssertionError(f"{topic}-0 still has a leader after broker {stopped} stopped")


@dataclass(slots=True)
class _Member:
    member_id: str
    conn: BrokerConnection
    epoch: int = 0
    #: connections a NewSession left open (CloseOld closes them)
    old: list[BrokerConnection] = field(default_factory=list)


async def _produce(
    target: BrokerTarget, conn: BrokerConnection, topic: str, topic_id: uuid.UUID, step: Produce
) -> None:
    for _ in range(step.batches):
        now = int(time.time() * 1000)
        batch = encode_batch(
            [Record(offset=i, timestamp=now, key=None, value=b"x") for i in range(step.records)]
        )
        resp = await conn.request(
            ProduceRequest(
                acks=-1,
                timeout_ms=10000,
                topic_data=(
                    TopicProduceData(
                        name=topic,
                        topic_id=topic_id,
                        partition_data=(PartitionProduceData(index=0, records=batch),),
                    ),
                ),
            ),
            timeout=20,
        )
        err = resp.responses[0].partition_responses[0].error_code
        if err:
            raise AssertionError(f"produce to {topic} failed with error {err}")


async def _join(
    target: BrokerTarget, spare: list[BrokerConnection], group: str, member_id: str, topic: str
) -> None:
    """Join the share group and wait until the partition is assigned to ``member_id``.

    Kafka initialises a share group's state for a partition when it first assigns it, so
    the first fetch would otherwise find nothing to read. The heartbeats go to the group
    coordinator (FindCoordinator asked of the first bootstrap broker); the connections
    opened go to ``spare``, closed with the scenario's.
    """
    epoch = 0
    lookup = await _connect(target)
    spare.append(lookup)
    conn: BrokerConnection | None = None
    deadline = anyio.current_time() + 30
    while anyio.current_time() < deadline:
        # FindCoordinator also makes the broker create and load the offsets topic.
        found = await lookup.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        if any(c.error_code for c in found.coordinators):
            await anyio.sleep(0.2)
            continue
        if conn is None:
            c = found.coordinators[0]
            conn = await _connect(target, BrokerAddress(c.host, c.port))
            spare.append(conn)
        resp = await conn.request(
            ShareGroupHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                subscribed_topic_names=(topic,) if epoch == 0 else None,
            ),
            timeout=10,
        )
        if resp.error_code in (14, 15, 16):  # the coordinator is still loading, or moved
            conn = None if resp.error_code == 16 else conn
            await anyio.sleep(0.2)
            continue
        if resp.error_code:
            raise AssertionError(f"heartbeat of {member_id} in {group}: error {resp.error_code}")
        epoch = resp.member_epoch
        if resp.assignment is not None and any(
            tp.partitions for tp in resp.assignment.topic_partitions
        ):
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"{member_id} got no assignment in {group} within 30 s")


def _keeps_waiting(step: Fetch, seen: Observation) -> bool:
    """Whether ``seen`` is an empty answer to a fetch that expected records."""
    return (
        step.patience > 0
        and step.expect
        and not step.final
        and not step.renew
        and step.epoch is None
        and not seen.error
        and not seen.partition_error
        and not seen.acquired
    )


async def _fetch_again(
    m: _Member, group: str, topic_id: uuid.UUID, step: Fetch, first: Observation
) -> Observation:
    """Repeat an expecting fetch, without its acknowledgements (sent once already), until
    it acquires something, fails, or the step's ``patience`` runs out.

    The observation keeps the first answer's acknowledgement error: only the records are
    waited for. Repeating is sound because an empty fetch changes nothing on the broker
    but the session's epoch, which the member tracks.
    """
    again = replace(step, acks=())
    seen = first
    deadline = time.monotonic() + step.patience
    while time.monotonic() < deadline and not seen.acquired:
        req = fetch_request(group, m.member_id, m.epoch, topic_id, again, first=False)
        resp = await m.conn.request(req, timeout=20)
        if resp.error_code == 0:
            m.epoch += 1
        seen = observe_fetch(first.step, first.member, resp)
        if seen.error or seen.partition_error:
            break
    return replace(seen, ack_error=first.ack_error)


async def run_on_broker(target: BrokerTarget, scenario: Scenario) -> list[Observation]:
    """Play ``scenario`` on the broker of ``target``, on a topic and group of its own."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"conf-{scenario.name}-{suffix}"
    group = f"conf-{scenario.name}-{suffix}"
    created = await target.admin.create_topics([topic], num_partitions=1)
    del created
    described = await target.admin.describe_topics([topic])
    return await play_on_broker(target, scenario, topic, described[topic].topic_id, group)


async def play_on_broker(
    target: BrokerTarget, scenario: Scenario, topic: str, topic_id: uuid.UUID, group: str
) -> list[Observation]:
    """Play ``scenario`` on partition 0 of ``topic``, which exists and may hold records
    already (a log the scenario's steps cannot write, such as one the log cleaner
    compacted), for a share group ``group`` that has not read it yet."""
    minor = int(target.version.split(".")[1])
    settings: dict[str, str | None] = {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": str(scenario.lock_ms),
    }
    if scenario.renew_enabled is not None and minor >= 3:
        settings["share.renew.acknowledge.enable"] = str(scenario.renew_enabled).lower()
    await target.admin.alter_group_config(group, settings)
    leader = await _leader(target, topic, topic_id)
    producer = await _connect(target, leader)
    spare: list[BrokerConnection] = [producer]
    # One member joins the group first: that initialises the partition's share state.
    await _join(target, spare, group, member_id(), topic)
    members: dict[str, _Member] = {}
    out: list[Observation] = []
    stopped: int | None = None  # the broker StopLeader stopped

    async def turn_to(address: BrokerAddress) -> None:
        # Every member and the producer to ``address``, on new connections (epoch 0); the
        # old ones are closed at the end, as after a leader move.
        nonlocal producer
        spare.append(producer)
        producer = await _connect(target, address)
        for m in members.values():
            spare.append(m.conn)
            m.conn, m.epoch = await _connect(target, address), 0

    async def member(name: str) -> _Member:
        m = members.get(name)
        if m is None:
            m = members[name] = _Member(member_id(), await _connect(target, leader))
        return m

    try:
        for i, step in enumerate(scenario.steps):
            if isinstance(step, Produce):
                await _produce(target, producer, topic, topic_id, step)
            elif isinstance(step, Wait):
                await anyio.sleep(step.seconds)
            elif isinstance(step, Disconnect):
                m = await member(step.member)
                await m.conn.aclose()
                await anyio.sleep(DISCONNECT_SETTLE)
                m.conn, m.epoch = await _connect(target, leader), 0
            elif isinstance(step, NewSession):
                m = await member(step.member)
                m.old.append(m.conn)
                m.conn, m.epoch = await _connect(target, leader), 0
            elif isinstance(step, CloseOld):
                m = await member(step.member)
                for old in m.old:
                    await old.aclose()
                m.old.clear()
                await anyio.sleep(DISCONNECT_SETTLE)
            elif isinstance(step, MoveLeader):
                if target.move_leader is None:
                    raise AssertionError(f"{scenario.name} moves a leader: it needs a cluster")
                await anyio.to_thread.run_sync(target.move_leader, topic, 0)
                new_leader = await _leader(target, topic, topic_id)
                if new_leader == leader:
                    raise AssertionError(f"the leader of {topic}-0 did not move")
                leader = new_leader
                await turn_to(leader)
            elif isinstance(step, StopLeader):
                if target.stop_broker is None:
                    raise AssertionError(f"{scenario.name} stops a broker: it needs a cluster")
                stopped = leader.node_id
                await anyio.to_thread.run_sync(target.stop_broker, stopped)
                leader = await _leaderless(target, topic, topic_id, stopped)
                await turn_to(leader)
            elif isinstance(step, StartLeader):
                if target.start_broker is None or stopped is None:
                    raise AssertionError(f"{scenario.name} starts a broker it did not stop")
                await anyio.to_thread.run_sync(target.start_broker, stopped)
                leader = await _leader(target, topic, topic_id)
                await turn_to(leader)
            elif isinstance(step, LookUp):
                m = await member(step.member)
                meta = await m.conn.request(
                    MetadataRequest(
                        topics=(MetadataRequestTopic(name=topic),),
                        allow_auto_topic_creation=False,
                    ),
                    timeout=20,
                )
                t = meta.topics[0]
                p = t.partitions[0] if t.partitions else None
                code = t.error_code or (p.error_code if p is not None else 0)
                named = p is not None and p.leader_id >= 0
                out.append(Observation(i, "metadata", step.member, code, leader=named))
            elif isinstance(step, Fetch):
                m = await member(step.member)
                epoch = -1 if step.final else (m.epoch if step.epoch is None else step.epoch)
                req = fetch_request(group, m.member_id, epoch, topic_id, step, first=m.epoch == 0)
                resp = await m.conn.request(req, timeout=20)
                if resp.error_code == 0 and step.epoch is None:
                    m.epoch = 0 if step.final else m.epoch + 1
                seen = observe_fetch(i, step.member, resp)
                if _keeps_waiting(step, seen):
                    seen = await _fetch_again(m, group, topic_id, step, seen)
                out.append(seen)
            elif isinstance(step, Ack):
                m = await member(step.member)
                epoch = -1 if step.final else (m.epoch if step.epoch is None else step.epoch)
                ack = acknowledge_request(
                    group, m.member_id, epoch, topic_id, step.acks, renew=step.renew
                )
                aresp = await m.conn.request(ack, timeout=20)
                if aresp.error_code == 0 and step.epoch is None:
                    m.epoch = 0 if step.final else m.epoch + 1
                part_err = next((p.error_code for t in aresp.responses for p in t.partitions), 0)
                out.append(Observation(i, "ack", step.member, aresp.error_code, part_err))
    finally:
        with anyio.CancelScope(shield=True):
            conns = [*spare, *(m.conn for m in members.values())]
            for conn in conns + [c for m in members.values() for c in m.old]:
                await conn.aclose()
    return out
