"""Topics: Metadata, CreateTopics, DeleteTopics and ListOffsets requests and what their
answers mean; which created topics still lack a leader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from sharecon import errors
from sharecon._admin.check import raise_for
from sharecon._admin.results import CreatedTopic, NewTopic, PartitionDescription, TopicDescription
from sharecon._admin.retry import LEADER_MOVED
from sharecon.protocol import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig
from sharecon.protocol.messages.delete_topics import DeleteTopicState
from sharecon.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsTopic
from sharecon.protocol.messages.metadata import MetadataRequestTopic
from sharecon.protocol.names import topic_name_may_collide, validate_topic_name
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    import uuid
    from collections.abc import Iterable, Mapping, Sequence

    from sharecon.protocol import (
        CreateTopicsResponse,
        DeleteTopicsResponse,
        ListOffsetsResponse,
        MetadataResponse,
    )

__all__ = [
    "Leaders",
    "check_deleted",
    "create_topics_request",
    "created_topics",
    "delete_topics_request",
    "existing_topics",
    "leaderless",
    "list_offsets_request",
    "metadata_request",
    "new_topics",
    "offsets_by_leader",
    "offsets_timeout",
    "read_offsets",
    "timestamp_of",
    "topics_of",
]

# ListOffsets timestamps that stand for "the first offset" and "the next offset to write".
EARLIEST, LATEST = -2, -1
#: ``{leader id: {topic: [partitions]}}``: what one ListOffsets per leader asks.
Leaders = dict[int, dict[str, list[int]]]


class Partition(Protocol):
    """One partition as the cluster's metadata describes it (``PartitionInfo``)."""

    @property
    def partition(self) -> int: ...
    @property
    def leader_id(self) -> int: ...


# -- Metadata --------------------------------------------------------------------------------


def metadata_request(names: Sequence[str] | None) -> MetadataRequest:
    """Describe ``names`` (``None``: every topic), never creating one."""
    return MetadataRequest(
        topics=None if names is None else tuple(MetadataRequestTopic(name=n) for n in names),
        allow_auto_topic_creation=False,
    )


def topics_of(response: MetadataResponse, *, internal: bool) -> dict[str, TopicDescription]:
    """The described topics by name (internal ones only if ``internal``).

    :raises BrokerError: a topic's error, naming it.
    """
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


# -- CreateTopics ----------------------------------------------------------------------------


def new_topics(
    topics: Iterable[str | NewTopic],
    *,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None,
) -> tuple[list[NewTopic], list[str]]:
    """``(specs, names that may collide)``: plain names get the other arguments; the
    second list names topics mixing ``.`` and ``_`` (their metrics may clash: the caller
    warns, as Kafka does).

    :raises ConfigError: an invalid topic name.
    """
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
    colliding = []
    for s in specs:
        validate_topic_name(s.name, param="create_topics")
        if topic_name_may_collide(s.name):
            colliding.append(s.name)
    return specs, colliding


def create_topics_request(
    specs: Sequence[NewTopic], *, timeout: float, validate_only: bool
) -> CreateTopicsRequest:
    """Create ``specs``; the broker waits up to ``timeout`` seconds."""
    return CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=s.name,
                num_partitions=s.num_partitions,
                replication_factor=s.replication_factor,
                configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in s.configs.items()),
            )
            for s in specs
        ),
        timeout_ms=int(timeout * 1000),
        validate_only=validate_only,
    )


def created_topics(
    response: CreateTopicsResponse, *, exist_ok: bool
) -> tuple[list[CreatedTopic], list[str]]:
    """``(created, already there)``; the second only with ``exist_ok``.

    :raises BrokerError: the first topic's error (every topic is read first), naming it.
    """
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
    return results, existing


def existing_topics(
    names: Iterable[str], described: Mapping[str, TopicDescription]
) -> list[CreatedTopic]:
    """Topics found already there, as ``created=False`` results."""
    out = []
    for name in names:
        d = described[name]
        rf = len(d.partitions[0].replicas) if d.partitions else -1
        out.append(CreatedTopic(name, d.topic_id, len(d.partitions), rf, created=False))
    return out


def leaderless(
    expected: Mapping[str, int], partitions: Mapping[str, Sequence[Partition]]
) -> list[str]:
    """Topics of ``expected`` (name: partition count) that do not yet have that many
    partitions, each with a leader, in ``partitions`` (the metadata's)."""
    return [
        name
        for name, count in expected.items()
        if len(partitions.get(name, ())) < max(count, 1)
        or any(p.leader_id < 0 for p in partitions.get(name, ()))
    ]


# -- DeleteTopics ----------------------------------------------------------------------------


def delete_topics_request(
    names: Sequence[str], *, version: int, timeout: float
) -> DeleteTopicsRequest:
    """Delete ``names`` (by topic state from v6, by name before)."""
    if version >= 6:
        return DeleteTopicsRequest(
            topics=tuple(DeleteTopicState(name=n) for n in names), timeout_ms=int(timeout * 1000)
        )
    return DeleteTopicsRequest(topic_names=tuple(names), timeout_ms=int(timeout * 1000))


def check_deleted(response: DeleteTopicsResponse, *, missing_ok: bool) -> None:
    """:raises BrokerError: a topic's error (an unknown one only without ``missing_ok``)."""
    for r in response.responses:
        if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and missing_ok:
            continue
        raise_for(r.error_code, f"deleting topic {r.name or r.topic_id!s}", r.error_message)


# -- ListOffsets -----------------------------------------------------------------------------


def timestamp_of(which: str) -> int:
    """The ListOffsets timestamp of ``"earliest"`` or ``"latest"``.

    :raises ConfigError: anything else.
    """
    if which not in ("earliest", "latest"):
        raise errors.ConfigError(f"which must be 'earliest' or 'latest', not {which!r}")
    return EARLIEST if which == "earliest" else LATEST


def offsets_by_leader(
    pending: Iterable[TopicPartition],
    partitions: Mapping[str, Sequence[Partition]],
    topic_errors: Mapping[str, int] | Mapping[str | uuid.UUID, int],
) -> Leaders:
    """``pending`` grouped by leader, from fresh metadata; partitions without a leader, and
    topics whose leader moved (:data:`~.retry.LEADER_MOVED`), wait for the next round.

    :raises UnknownTopicOrPartitionError: a topic or partition that does not exist (other
        topic errors likewise).
    """
    by_leader: Leaders = {}
    for tp in pending:
        if tp.topic not in partitions:
            code = topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if code in LEADER_MOVED:
                continue
            err = errors.error_for_code(code, f"topic {tp.topic!r}")
            raise err or errors.UnknownTopicOrPartitionError(f"topic {tp.topic!r}")
        info = next((p for p in partitions[tp.topic] if p.partition == tp.partition), None)
        if info is None:
            raise errors.UnknownTopicOrPartitionError(
                f"topic {tp.topic!r} has no partition {tp.partition}"
            )
        if info.leader_id >= 0:
            by_leader.setdefault(info.leader_id, {}).setdefault(tp.topic, []).append(tp.partition)
    return by_leader


def list_offsets_request(
    topics: Mapping[str, list[int]], *, timestamp: int, timeout: float
) -> ListOffsetsRequest:
    """One leader's ListOffsets for ``topics`` (``{topic: partitions}``)."""
    return ListOffsetsRequest(
        replica_id=-1,  # a client, not a follower
        topics=tuple(
            ListOffsetsTopic(
                name=t,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in sorted(ps)
                ),
            )
            for t, ps in topics.items()
        ),
        timeout_ms=int(timeout * 1000),
    )


def read_offsets(
    response: ListOffsetsResponse, out: dict[TopicPartition, int]
) -> errors.KafkaError | None:
    """Add the answer's offsets to ``out``; the last leader-moved error (those partitions
    are asked again), or ``None``.

    :raises BrokerError: any other partition error, naming the partition.
    """
    last: errors.KafkaError | None = None
    for t in response.topics:
        for p in t.partitions:
            where = f"{t.name}-{p.partition_index}"
            err = errors.error_for_code(p.error_code, f"listing offsets of {where}")
            if p.error_code in LEADER_MOVED:
                last = err
                continue
            if err is not None:
                raise err
            out[TopicPartition(t.name, p.partition_index)] = p.offset
    return last


def offsets_timeout(
    which: Literal["earliest", "latest"],
    wanted: Iterable[TopicPartition],
    found: Mapping[TopicPartition, int],
    limit: float,
    last: errors.KafkaError | None,
) -> errors.KafkaTimeoutError:
    """The error of a ListOffsets call that ran out of time."""
    missing = ", ".join(f"{tp.topic}-{tp.partition}" for tp in wanted if tp not in found)
    return errors.KafkaTimeoutError(
        f"no {which} offset for {missing} within {limit:g} s"
        + (f" (last error: {last})" if last is not None else " (no leader)")
    )
