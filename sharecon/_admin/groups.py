"""Share groups: ListGroups, ShareGroupDescribe, the share-group offsets calls and
DeleteGroups; requests, the error each answer carries for its coordinator (see
:mod:`.retry`), and results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharecon import errors
from sharecon._admin.check import raise_for
from sharecon._admin.results import (
    ShareGroupDescription,
    ShareGroupListing,
    ShareMemberDescription,
    SharePartitionOffset,
)
from sharecon._admin.retry import COORDINATOR_RETRY
from sharecon.protocol import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from sharecon.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequestTopic,
)
from sharecon.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from sharecon._admin.topics import Partition
    from sharecon.protocol import (
        AlterShareGroupOffsetsResponse,
        DeleteGroupsResponse,
        DeleteShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsResponse,
        ListGroupsResponse,
        ShareGroupDescribeResponse,
    )

__all__ = [
    "alter_offsets_request",
    "check_offsets_altered",
    "check_offsets_deleted",
    "delete_group_request",
    "delete_group_result",
    "delete_offsets_request",
    "delete_response_error",
    "describe_group_request",
    "describe_offsets_request",
    "first_group_error",
    "group_error",
    "groups_listed",
    "is_dead",
    "list_groups_request",
    "not_found",
    "offsets_wanted",
    "share_group_of",
    "share_offsets_of",
    "top_level_error",
]


def group_error(
    group_id: str, api_name: str, code: int, message: str | None
) -> errors.BrokerError | None:
    """The error of a group call answered with ``code``, naming the group and the API."""
    return errors.error_for_code(
        code, f"group {group_id!r} ({api_name})" + (f": {message}" if message else "")
    )


def first_group_error(
    response: ShareGroupDescribeResponse | DescribeShareGroupOffsetsResponse,
) -> tuple[int, str | None]:
    """A per-group answer's error: its first group's (none if it names no group)."""
    if response.groups:
        return response.groups[0].error_code, response.groups[0].error_message
    return ErrorCode.NONE, None


def top_level_error(
    response: AlterShareGroupOffsetsResponse | DeleteShareGroupOffsetsResponse,
) -> tuple[int, str | None]:
    """An answer's top-level error."""
    return response.error_code, response.error_message


# -- ListGroups ------------------------------------------------------------------------------


def list_groups_request(states: Iterable[str]) -> ListGroupsRequest:
    """Share groups (only those in ``states``, if any) a broker coordinates."""
    return ListGroupsRequest(states_filter=tuple(states), types_filter=("share",))


def groups_listed(response: ListGroupsResponse, node_id: int) -> list[ShareGroupListing]:
    """The groups broker ``node_id`` listed.

    :raises BrokerError: naming the broker.
    """
    err = errors.error_for_code(response.error_code, f"listing groups on broker {node_id}")
    if err is not None:
        raise err
    return [ShareGroupListing(g.group_id, g.group_state) for g in response.groups]


# -- ShareGroupDescribe ----------------------------------------------------------------------


def describe_group_request(group_id: str) -> ShareGroupDescribeRequest:
    """Describe one share group."""
    return ShareGroupDescribeRequest(group_ids=(group_id,))


def share_group_of(response: ShareGroupDescribeResponse, group_id: str) -> ShareGroupDescription:
    """The group's description (its error was checked by the group call).

    :raises RemoteProtocolError: the answer does not mention the group.
    """
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


# -- DescribeShareGroupOffsets ---------------------------------------------------------------


def offsets_wanted(
    names: Sequence[str], partitions: Mapping[str, Sequence[Partition]]
) -> dict[str, list[int]]:
    """Every partition of the topics ``names``, from fresh metadata.

    :raises UnknownTopicOrPartitionError: a topic that does not exist.
    """
    wanted = {}
    for name in names:
        if name not in partitions:
            raise errors.UnknownTopicOrPartitionError(f"topic {name!r}")
        wanted[name] = [p.partition for p in partitions[name]]
    return wanted


def describe_offsets_request(
    group_id: str, wanted: Mapping[str, Iterable[int]] | None
) -> DescribeShareGroupOffsetsRequest:
    """The group's start offsets on ``wanted`` (``{topic: partitions}``; ``None``: every
    partition the group has state for)."""
    topics = (
        None
        if wanted is None
        else tuple(
            DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
            for t, ps in wanted.items()
        )
    )
    return DescribeShareGroupOffsetsRequest(
        groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics),)
    )


def share_offsets_of(
    response: DescribeShareGroupOffsetsResponse, group_id: str
) -> dict[TopicPartition, SharePartitionOffset]:
    """The group's start offsets (and lag) by partition.

    :raises BrokerError: a partition's error, naming the group and the partition.
    """
    out: dict[TopicPartition, SharePartitionOffset] = {}
    for g in response.groups:
        for t in g.topics:
            for p in t.partitions:
                raise_for(
                    p.error_code,
                    f"group {group_id!r} partition {t.topic_name}-{p.partition_index}",
                    p.error_message,
                )
                tp = TopicPartition(t.topic_name, p.partition_index)
                out[tp] = SharePartitionOffset(
                    t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag
                )
    return out


# -- AlterShareGroupOffsets / DeleteShareGroupOffsets ----------------------------------------


def alter_offsets_request(
    group_id: str, offsets: Mapping[TopicPartition, int]
) -> AlterShareGroupOffsetsRequest:
    """Set the group's start offset per partition."""
    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            AlterShareGroupOffsetsRequestPartition(
                partition_index=tp.partition, start_offset=offset
            )
        )
    return AlterShareGroupOffsetsRequest(
        group_id=group_id,
        topics=tuple(
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )


def check_offsets_altered(response: AlterShareGroupOffsetsResponse, group_id: str) -> None:
    """:raises BrokerError: a partition's error, naming the group and the partition."""
    for t in response.responses:
        for p in t.partitions:
            raise_for(
                p.error_code,
                f"altering offsets of group {group_id!r} on {t.topic_name}-{p.partition_index}",
                p.error_message,
            )


def delete_offsets_request(group_id: str, topics: Iterable[str]) -> DeleteShareGroupOffsetsRequest:
    """Delete the group's state for whole topics."""
    return DeleteShareGroupOffsetsRequest(
        group_id=group_id,
        topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
    )


def check_offsets_deleted(response: DeleteShareGroupOffsetsResponse, group_id: str) -> None:
    """:raises BrokerError: a topic's error, naming the group and the topic."""
    for t in response.responses:
        raise_for(
            t.error_code,
            f"deleting offsets of group {group_id!r} on topic {t.topic_name!r}",
            t.error_message,
        )


# -- DeleteGroups ----------------------------------------------------------------------------


def is_dead(state: str) -> bool:
    """Some brokers describe an unknown group id as a Dead group rather than an error."""
    return state.lower() == "dead"


def not_found(group_id: str, detail: str = "") -> errors.GroupIdNotFoundError:
    """The error for a share group that does not exist."""
    return errors.GroupIdNotFoundError(f"share group {group_id!r} does not exist{detail}")


def delete_group_request(group_id: str) -> DeleteGroupsRequest:
    """Delete one group."""
    return DeleteGroupsRequest(groups_names=(group_id,))


def delete_response_error(
    group_id: str,
) -> Callable[[DeleteGroupsResponse], tuple[int, str | None]]:
    """Only the coordinator errors of a DeleteGroups answer (the group call retries them);
    the group's own verdict is :func:`delete_group_result`'s."""

    def error_of(response: DeleteGroupsResponse) -> tuple[int, str | None]:
        r = next((r for r in response.results if r.group_id == group_id), None)
        if r is not None and r.error_code in COORDINATOR_RETRY:
            return r.error_code, r.error_message
        return ErrorCode.NONE, None

    return error_of


def delete_group_result(response: DeleteGroupsResponse, group_id: str) -> errors.BrokerError | None:
    """``None`` if the group was deleted, else its error, naming it.

    :raises RemoteProtocolError: the answer does not mention the group.
    """
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
        return not_found(group_id, detail)
    return errors.error_for_code(r.error_code, f"deleting share group {group_id!r}{detail}")
