"""Run a :class:`~.scenario.Scenario` against the model broker, on a virtual clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.share_acknowledge import (
    AcknowledgementBatch as AckBatch,
)
from sharecon.protocol.messages.share_acknowledge import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from sharecon.protocol.messages.share_fetch import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
    ShareFetchResponse,
)
from sharecon.testing.conformance.scenario import (
    Ack,
    AckRange,
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
from sharecon.testing.model.broker import ModelBroker

if TYPE_CHECKING:
    import uuid

__all__ = [
    "acknowledge_request",
    "fetch_request",
    "observe_fetch",
    "play_on_model",
    "run_on_model",
]

#: The step between requests on the model's clock (a real run takes some milliseconds).
_TICK = 0.01
#: Seconds both runners give the broker to handle a closed connection.
DISCONNECT_SETTLE = 0.5


def fetch_request(
    group: str, member: str, epoch: int, topic_id: uuid.UUID, step: Fetch, *, first: bool
) -> ShareFetchRequest:
    """The ShareFetch body a :class:`Fetch` step sends (both runners use it)."""
    batches = tuple(
        AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=(t,))
        for a, b, t in step.acks
    )
    parts = (FetchPartition(partition_index=0, acknowledgement_batches=batches),)
    send_topic = first or bool(batches)
    fetching = not (step.final or step.renew)
    return ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=0 if not fetching else (3000 if step.expect else 300),
        min_bytes=0 if not fetching else 1,
        max_bytes=0 if not fetching else 1 << 20,
        max_records=0 if not fetching else step.max_records,
        batch_size=0 if not fetching else step.max_records,
        share_acquire_mode=1 if step.record_limit else 0,
        is_renew_ack=step.renew,
        topics=(FetchTopic(topic_id=topic_id, partitions=parts),) if send_topic else (),
    )


def acknowledge_request(
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: tuple[AckRange, ...],
    *,
    renew: bool,
) -> ShareAcknowledgeRequest:
    """The ShareAcknowledge body an :class:`Ack` step sends."""
    batches = tuple(
        AckBatch(first_offset=a, last_offset=b, acknowledge_types=(t,)) for a, b, t in acks
    )
    return ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=(
            AcknowledgeTopic(
                topic_id=topic_id,
                partitions=(
                    AcknowledgePartition(partition_index=0, acknowledgement_batches=batches),
                ),
            ),
        ),
    )


def observe_fetch(index: int, member: str, response: ShareFetchResponse) -> Observation:
    """What a ShareFetch answer shows, for comparison."""
    acquired: list[tuple[int, int]] = []
    ack_error = part_error = 0
    for t in response.responses:
        for p in t.partitions:
            ack_error = ack_error or p.acknowledge_error_code
            part_error = part_error or p.error_code
            for r in p.acquired_records:
                acquired.extend(
                    (o, r.delivery_count) for o in range(r.first_offset, r.last_offset + 1)
                )
    return Observation(
        index,
        "fetch",
        member,
        response.error_code,
        ack_error,
        tuple(sorted(acquired)),
        partition_error=part_error,
    )


@dataclass(slots=True)
class _Member:
    member_id: str
    connection: str
    epoch: int = 0
    #: connections a NewSession left open (CloseOld closes them)
    old: list[str] = field(default_factory=list)


def run_on_model(scenario: Scenario, version: str) -> list[Observation]:
    """Play ``scenario`` on a fresh :class:`ModelBroker` of ``version``."""
    broker = ModelBroker(version)
    return play_on_model(broker, scenario, broker.create_topic("t", 1))


def play_on_model(
    broker: ModelBroker, scenario: Scenario, topic_id: uuid.UUID
) -> list[Observation]:
    """Play ``scenario`` on partition 0 of the topic ``"t"`` of ``broker``, whose log may
    hold records already (as :func:`~.broker_runner.play_on_broker` allows)."""
    group = "g"
    broker.configure_group(
        group,
        lock_ms=scenario.lock_ms,
        earliest=True,
        renew_enabled=scenario.renew_enabled,
    )
    now = 0.0
    members: dict[str, _Member] = {}
    connections = 0
    out: list[Observation] = []

    def member(name: str) -> _Member:
        nonlocal connections
        m = members.get(name)
        if m is None:
            connections += 1
            m = members[name] = _Member(member_id(), f"c{connections}")
        return m

    for i, step in enumerate(scenario.steps):
        now += _TICK
        if isinstance(step, Produce):
            for _ in range(step.batches):
                broker.produce("t", 0, step.records)
        elif isinstance(step, Wait):
            now += step.seconds
            broker.advance(now)
        elif isinstance(step, Disconnect):
            m = member(step.member)
            broker.disconnect(m.connection, now)
            now += DISCONNECT_SETTLE
            connections += 1
            m.connection, m.epoch = f"c{connections}", 0
        elif isinstance(step, NewSession):
            m = member(step.member)
            m.old.append(m.connection)
            connections += 1
            m.connection, m.epoch = f"c{connections}", 0
        elif isinstance(step, CloseOld):
            m = member(step.member)
            for old in m.old:
                broker.disconnect(old, now)
            m.old.clear()
            now += DISCONNECT_SETTLE
        elif isinstance(step, MoveLeader):
            # The model broker plays the new leader too: the share partition is dropped
            # and rebuilt from the persisted state; every member starts a new session
            # (the old connections stay, as they do to the old leader).
            broker.move_leader("t", 0, now)
            for m in members.values():
                connections += 1
                m.connection, m.epoch = f"c{connections}", 0
        elif isinstance(step, StopLeader | StartLeader):
            # The model plays every broker: the one that stopped (the share partition
            # dropped, as in a leader move; then no leader), the others the members turn
            # to meanwhile, and the restarted leader; each turn is a new session.
            if isinstance(step, StopLeader):
                broker.withdraw_leader("t", 0, now)
            else:
                broker.restore_leader("t", 0, now)
            for m in members.values():
                connections += 1
                m.connection, m.epoch = f"c{connections}", 0
        elif isinstance(step, LookUp):
            member(step.member)
            named = broker.leader_of((topic_id, 0)).leader_id >= 0
            code = 0 if named else ErrorCode.LEADER_NOT_AVAILABLE
            out.append(Observation(i, "metadata", step.member, code, leader=named))
        elif isinstance(step, Fetch):
            m = member(step.member)
            epoch = -1 if step.final else (m.epoch if step.epoch is None else step.epoch)
            req = fetch_request(group, m.member_id, epoch, topic_id, step, first=m.epoch == 0)
            resp = broker.share_fetch(req, m.connection, now)
            if resp.error_code == 0 and step.epoch is None:
                m.epoch = 0 if step.final else m.epoch + 1
            out.append(observe_fetch(i, step.member, resp))
        elif isinstance(step, Ack):
            m = member(step.member)
            epoch = -1 if step.final else (m.epoch if step.epoch is None else step.epoch)
            ack = acknowledge_request(
                group, m.member_id, epoch, topic_id, step.acks, renew=step.renew
            )
            aresp = broker.share_acknowledge(ack, m.connection, now)
            if aresp.error_code == 0 and step.epoch is None:
                m.epoch = 0 if step.final else m.epoch + 1
            part_err = next((p.error_code for t in aresp.responses for p in t.partitions), 0)
            out.append(Observation(i, "ack", step.member, aresp.error_code, part_err))
    return out
