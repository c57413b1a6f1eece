"""The admin engine (sharecon._admin) without a broker: requests built, answers read,
errors named, retries decided. Admin's real-broker tests are tests/broker/test_admin.py."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from sharecon import errors
from sharecon._admin import configs, groups, peek, topics
from sharecon._admin.results import ConfigSource, NewTopic, ResourceType, TopicDescription
from sharecon._admin.retry import GroupVerdict, Retries, group_verdict
from sharecon._backoff import RETRY_BACKOFF, Backoff
from sharecon.protocol import (
    AlterShareGroupOffsetsResponse,
    CreateTopicsResponse,
    DeleteGroupsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    DescribeShareGroupOffsetsResponse,
    IncrementalAlterConfigsResponse,
    ListGroupsResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ShareGroupDescribeResponse,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from sharecon.protocol.messages.create_topics import CreatableTopicResult
from sharecon.protocol.messages.delete_groups import DeletableGroupResult
from sharecon.protocol.messages.delete_topics import DeletableTopicResult
from sharecon.protocol.messages.describe_configs import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
)
from sharecon.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from sharecon.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from sharecon.protocol.messages.incremental_alter_configs import AlterConfigsResourceResponse
from sharecon.protocol.messages.list_groups import ListedGroup
from sharecon.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from sharecon.protocol.messages.metadata import MetadataResponsePartition, MetadataResponseTopic
from sharecon.protocol.messages.share_group_describe import (
    Assignment,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.types import TopicPartition


@dataclass(frozen=True)
class Part:
    """A partition of the metadata (what PartitionInfo gives the engine)."""

    partition: int
    leader_id: int


TID = uuid.UUID(int=7)


# -- topics ----------------------------------------------------------------------------------


def test_metadata_asks_for_named_topics_or_all_and_never_creates_one() -> None:
    every = topics.metadata_request(None)
    assert every.topics is None and not every.allow_auto_topic_creation
    named = topics.metadata_request(["a", "b"])
    assert [t.name for t in named.topics or ()] == ["a", "b"]


def test_described_topics_sorted_internal_on_request_and_errors_named() -> None:
    response = MetadataResponse(
        topics=(
            MetadataResponseTopic(
                name="t",
                topic_id=TID,
                partitions=(
                    MetadataResponsePartition(partition_index=1, leader_id=2, replica_nodes=(2,)),
                    MetadataResponsePartition(partition_index=0, leader_id=1, replica_nodes=(1,)),
                ),
            ),
            MetadataResponseTopic(name="__consumer_offsets", is_internal=True),
        )
    )
    found = topics.topics_of(response, internal=False)
    assert list(found) == ["t"]
    assert [p.partition for p in found["t"].partitions] == [0, 1]
    assert found["t"].partitions[1].leader_id == 2
    assert set(topics.topics_of(response, internal=True)) == {"t", "__consumer_offsets"}
    bad = MetadataResponse(
        topics=(
            MetadataResponseTopic(name="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        )
    )
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="'gone'"):
        topics.topics_of(bad, internal=True)


def test_new_topics_fill_plain_names_and_name_the_colliding_ones() -> None:
    given = NewTopic(name="own", num_partitions=5)
    specs, colliding = topics.new_topics(
        ["a.b_c", given], num_partitions=3, replication_factor=2, configs={"k": "v"}
    )
    assert specs[0] == NewTopic(
        name="a.b_c", num_partitions=3, replication_factor=2, configs={"k": "v"}
    )
    assert specs[1] is given
    assert colliding == ["a.b_c"]
    with pytest.raises(errors.ConfigError, match="create_topics"):
        topics.new_topics(["bad name"], num_partitions=1, replication_factor=1, configs=None)
    request = topics.create_topics_request(specs, timeout=2.5, validate_only=True)
    assert request.timeout_ms == 2500 and request.validate_only
    assert [(c.name, c.value) for c in request.topics[0].configs] == [("k", "v")]


def test_created_topics_read_every_answer_then_raise_the_first_error() -> None:
    response = CreateTopicsResponse(
        topics=(
            CreatableTopicResult(name="new", topic_id=TID, num_partitions=3, replication_factor=1),
            CreatableTopicResult(name="old", error_code=ErrorCode.TOPIC_ALREADY_EXISTS),
        )
    )
    created, existing = topics.created_topics(response, exist_ok=True)
    assert [c.name for c in created] == ["new"] and created[0].created
    assert existing == ["old"]
    with pytest.raises(errors.TopicAlreadyExistsError, match="creating topic 'old'"):
        topics.created_topics(response, exist_ok=False)
    two = CreateTopicsResponse(
        topics=(
            CreatableTopicResult(
                name="x", error_code=ErrorCode.INVALID_CONFIG, error_message="no such config"
            ),
            CreatableTopicResult(name="y", error_code=ErrorCode.TOPIC_ALREADY_EXISTS),
        )
    )
    with pytest.raises(errors.InvalidConfigError, match="creating topic 'x': no such config"):
        topics.created_topics(two, exist_ok=False)


def test_existing_topics_are_reported_as_found_not_created() -> None:
    described = topics.topics_of(
        MetadataResponse(
            topics=(
                MetadataResponseTopic(
                    name="old",
                    topic_id=TID,
                    partitions=(
                        MetadataResponsePartition(partition_index=0, replica_nodes=(1, 2)),
                    ),
                ),
            )
        ),
        internal=True,
    )
    [found] = topics.existing_topics(["old"], described)
    assert (found.topic_id, found.num_partitions, found.replication_factor) == (TID, 1, 2)
    assert not found.created
    empty = {"e": TopicDescription("e", TID, False, ())}
    assert topics.existing_topics(["e"], empty)[0].replication_factor == -1


def test_a_topic_waits_until_every_partition_has_a_leader() -> None:
    expected = {"a": 2, "b": 1, "c": 0}
    parts = {"a": [Part(0, 1), Part(1, -1)], "b": [Part(0, 1)]}
    # a: one partition leaderless; c: not in the metadata yet (0 partitions means at least 1).
    assert topics.leaderless(expected, parts) == ["a", "c"]
    parts = {"a": [Part(0, 1), Part(1, 2)], "b": [Part(0, 1)], "c": [Part(0, 3)]}
    assert topics.leaderless(expected, parts) == []


def test_delete_topics_by_state_from_v6_and_missing_ok() -> None:
    assert [t.name for t in topics.delete_topics_request(["a"], version=6, timeout=1).topics] == [
        "a"
    ]
    old = topics.delete_topics_request(["a"], version=5, timeout=1)
    assert old.topic_names == ("a",) and old.timeout_ms == 1000
    missing = DeleteTopicsResponse(
        responses=(
            DeletableTopicResult(name="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        )
    )
    topics.check_deleted(missing, missing_ok=True)
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="deleting topic gone"):
        topics.check_deleted(missing, missing_ok=False)


def test_list_offsets_grouped_by_leader_and_unknowns_raised() -> None:
    assert topics.timestamp_of("earliest") == -2 and topics.timestamp_of("latest") == -1
    with pytest.raises(errors.ConfigError, match="'newest'"):
        topics.timestamp_of("newest")
    parts = {"a": [Part(0, 1), Part(1, 2), Part(2, -1)], "b": [Part(0, 1)]}
    pending = [TopicPartition("a", p) for p in range(3)] + [
        TopicPartition("b", 0),
        TopicPartition("moving", 0),
    ]
    errs = {"moving": ErrorCode.LEADER_NOT_AVAILABLE}
    # a-2 has no leader and "moving" is between leaders: both wait for the next round.
    assert topics.offsets_by_leader(pending, parts, errs) == {
        1: {"a": [0], "b": [0]},
        2: {"a": [1]},
    }
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="topic 'nope'"):
        topics.offsets_by_leader([TopicPartition("nope", 0)], parts, {})
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="has no partition 9"):
        topics.offsets_by_leader([TopicPartition("a", 9)], parts, {})
    request = topics.list_offsets_request({"a": [1, 0]}, timestamp=-2, timeout=3)
    assert request.replica_id == -1 and request.timeout_ms == 3000
    assert [(p.partition_index, p.timestamp) for p in request.topics[0].partitions] == [
        (0, -2),
        (1, -2),
    ]


def test_list_offsets_answers_fill_in_and_leader_moves_are_asked_again() -> None:
    response = ListOffsetsResponse(
        topics=(
            ListOffsetsTopicResponse(
                name="a",
                partitions=(
                    ListOffsetsPartitionResponse(partition_index=0, offset=42),
                    ListOffsetsPartitionResponse(
                        partition_index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                    ),
                ),
            ),
        )
    )
    out: dict[TopicPartition, int] = {}
    last = topics.read_offsets(response, out)
    assert out == {TopicPartition("a", 0): 42}
    assert isinstance(last, errors.NotLeaderOrFollowerError) and "a-1" in str(last)
    bad = ListOffsetsResponse(
        topics=(
            ListOffsetsTopicResponse(
                name="a",
                partitions=(
                    ListOffsetsPartitionResponse(
                        partition_index=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    ),
                ),
            ),
        )
    )
    with pytest.raises(errors.TopicAuthorizationFailedError, match="listing offsets of a-0"):
        topics.read_offsets(bad, {})
    wanted = [TopicPartition("a", 0), TopicPartition("a", 1)]
    timeout = topics.offsets_timeout("latest", wanted, out, 2.0, None)
    assert str(timeout) == "no latest offset for a-1 within 2 s (no leader)"
    assert "last error" in str(topics.offsets_timeout("latest", wanted, out, 2.0, last))


# -- retries ---------------------------------------------------------------------------------


def test_coordinator_errors_retry_and_others_raise() -> None:
    assert group_verdict(ErrorCode.NONE) is GroupVerdict.DONE
    assert group_verdict(ErrorCode.NOT_COORDINATOR) is GroupVerdict.MOVED
    assert group_verdict(ErrorCode.COORDINATOR_NOT_AVAILABLE) is GroupVerdict.MOVED
    assert group_verdict(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) is GroupVerdict.RETRY
    assert group_verdict(ErrorCode.GROUP_ID_NOT_FOUND) is GroupVerdict.RAISE


def test_retries_back_off_until_the_deadline() -> None:
    assert Retries(deadline=1.0).backoff is RETRY_BACKOFF
    steady = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
    retries = Retries(deadline=10.0, backoff=steady)
    assert [retries.delay(0.0) for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])
    # No attempt whose backoff reaches the deadline (nor exactly at it, unless asked).
    assert Retries(deadline=0.1, backoff=steady).delay(0.0) is None
    assert Retries(deadline=0.1, backoff=steady).delay(0.0, at_deadline=True) == 0.1
    assert Retries(deadline=1.0, backoff=steady).delay(1.0) is None


# -- configs ---------------------------------------------------------------------------------


def test_alter_configs_sets_and_removes_and_hides_credentials_in_errors() -> None:
    request = configs.alter_configs_request(
        ResourceType.GROUP, "g", {"share.auto.offset.reset": "earliest", "x": None}
    )
    [resource] = request.resources
    assert (resource.resource_type, resource.resource_name) == (ResourceType.GROUP, "g")
    assert [(c.name, c.config_operation, c.value) for c in resource.configs] == [
        ("share.auto.offset.reset", configs.SET, "earliest"),
        ("x", configs.DELETE, None),
    ]
    refused = IncrementalAlterConfigsResponse(
        responses=(
            AlterConfigsResourceResponse(
                error_code=ErrorCode.INVALID_CONFIG,
                error_message="bad value hunter2 for ssl.key.password",
            ),
        )
    )
    secret = {"ssl.key.password": "hunter2"}
    with pytest.raises(errors.InvalidConfigError) as caught:
        configs.check_altered(refused, ResourceType.BROKER, "1", secret)
    assert "hunter2" not in str(caught.value) and "[hidden]" in str(caught.value)
    assert "altering configs of broker '1'" in str(caught.value)


def test_described_configs_keep_unknown_sources_as_numbers() -> None:
    request = configs.describe_configs_request(ResourceType.TOPIC, "t", ["a"])
    assert request.resources[0].configuration_keys == ("a",)
    assert (
        configs.describe_configs_request(ResourceType.TOPIC, "t", None)
        .resources[0]
        .configuration_keys
        is None
    )
    response = DescribeConfigsResponse(
        results=(
            DescribeConfigsResult(
                configs=(
                    DescribeConfigsResourceResult(name="a", value="1", config_source=5),
                    DescribeConfigsResourceResult(name="b", value=None, config_source=99),
                )
            ),
        )
    )
    found = configs.configs_of(response, ResourceType.TOPIC, "t")
    assert found["a"].source is ConfigSource.DEFAULT_CONFIG and found["a"].is_default
    assert found["b"].source == 99
    failed = DescribeConfigsResponse(
        results=(DescribeConfigsResult(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)
    )
    with pytest.raises(
        errors.UnknownTopicOrPartitionError, match="describing configs of topic 't'"
    ):
        configs.configs_of(failed, ResourceType.TOPIC, "t")


# -- groups ----------------------------------------------------------------------------------


def test_listed_groups_and_a_broker_error_named() -> None:
    response = ListGroupsResponse(groups=(ListedGroup(group_id="g", group_state="Stable"),))
    assert [(g.group_id, g.state) for g in groups.groups_listed(response, 1)] == [("g", "Stable")]
    with pytest.raises(errors.CoordinatorNotAvailableError, match="on broker 3"):
        groups.groups_listed(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE), 3)
    assert groups.list_groups_request(["Empty"]).types_filter == ("share",)


def test_a_described_group_with_its_members_and_sorted_assignment() -> None:
    response = ShareGroupDescribeResponse(
        groups=(
            DescribedGroup(
                group_id="g",
                group_state="Stable",
                group_epoch=3,
                assignor_name="simple",
                members=(
                    Member(
                        member_id="m",
                        client_id="c",
                        subscribed_topic_names=("t",),
                        assignment=Assignment(
                            topic_partitions=(TopicPartitions(topic_name="t", partitions=(2, 0)),)
                        ),
                    ),
                ),
            ),
        )
    )
    assert groups.first_group_error(response) == (ErrorCode.NONE, None)
    described = groups.share_group_of(response, "g")
    assert described.state == "Stable" and described.group_epoch == 3
    assert described.members[0].assignment == (TopicPartition("t", 0), TopicPartition("t", 2))
    with pytest.raises(errors.RemoteProtocolError, match="'other'"):
        groups.share_group_of(response, "other")
    refused = ShareGroupDescribeResponse(
        groups=(DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message="no"),)
    )
    assert groups.first_group_error(refused) == (ErrorCode.GROUP_ID_NOT_FOUND, "no")
    err = groups.group_error("g", "ShareGroupDescribe", ErrorCode.GROUP_ID_NOT_FOUND, "no")
    assert isinstance(err, errors.GroupIdNotFoundError)
    assert str(err).endswith("group 'g' (ShareGroupDescribe): no")


def test_share_group_offsets_asked_for_and_read() -> None:
    wanted = groups.offsets_wanted(["t"], {"t": [Part(0, 1), Part(1, 1)]})
    assert wanted == {"t": [0, 1]}
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="'u'"):
        groups.offsets_wanted(["u"], {})
    assert groups.describe_offsets_request("g", None).groups[0].topics is None
    response = DescribeShareGroupOffsetsResponse(
        groups=(
            DescribeShareGroupOffsetsResponseGroup(
                group_id="g",
                topics=(
                    DescribeShareGroupOffsetsResponseTopic(
                        topic_name="t",
                        partitions=(
                            DescribeShareGroupOffsetsResponsePartition(
                                partition_index=0, start_offset=5, lag=2
                            ),
                        ),
                    ),
                ),
            ),
        )
    )
    [offset] = groups.share_offsets_of(response, "g").values()
    assert (offset.topic, offset.partition, offset.start_offset, offset.lag) == ("t", 0, 5, 2)
    failing = DescribeShareGroupOffsetsResponse(
        groups=(
            DescribeShareGroupOffsetsResponseGroup(
                topics=(
                    DescribeShareGroupOffsetsResponseTopic(
                        topic_name="t",
                        partitions=(
                            DescribeShareGroupOffsetsResponsePartition(
                                partition_index=3, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                            ),
                        ),
                    ),
                ),
            ),
        )
    )
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="group 'g' partition t-3"):
        groups.share_offsets_of(failing, "g")


def test_altered_offsets_grouped_by_topic_and_partition_errors_named() -> None:
    request = groups.alter_offsets_request(
        "g", {TopicPartition("a", 0): 1, TopicPartition("b", 0): 2, TopicPartition("a", 1): 3}
    )
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.topics] == [
        ("a", [0, 1]),
        ("b", [0]),
    ]
    refused = AlterShareGroupOffsetsResponse(
        error_code=ErrorCode.NON_EMPTY_GROUP,
        responses=(
            AlterShareGroupOffsetsResponseTopic(
                topic_name="a",
                partitions=(
                    AlterShareGroupOffsetsResponsePartition(
                        partition_index=1, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    ),
                ),
            ),
        ),
    )
    assert groups.top_level_error(refused) == (ErrorCode.NON_EMPTY_GROUP, None)
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="group 'g' on a-1"):
        groups.check_offsets_altered(refused, "g")


def test_delete_groups_retries_only_coordinator_errors_and_names_the_verdict() -> None:
    def answer(code: int) -> DeleteGroupsResponse:
        return DeleteGroupsResponse(results=(DeletableGroupResult(group_id="g", error_code=code),))

    error_of = groups.delete_response_error("g")
    assert error_of(answer(ErrorCode.NOT_COORDINATOR))[0] == ErrorCode.NOT_COORDINATOR
    assert error_of(answer(ErrorCode.NON_EMPTY_GROUP)) == (ErrorCode.NONE, None)
    assert groups.delete_group_result(answer(ErrorCode.NONE), "g") is None
    busy = groups.delete_group_result(answer(ErrorCode.NON_EMPTY_GROUP), "g")
    assert isinstance(busy, errors.NonEmptyGroupError) and "stop its consumers" in str(busy)
    gone = groups.delete_group_result(answer(ErrorCode.GROUP_ID_NOT_FOUND), "g")
    assert isinstance(gone, errors.GroupIdNotFoundError) and "does not exist" in str(gone)
    with pytest.raises(errors.RemoteProtocolError, match="'h'"):
        groups.delete_group_result(answer(ErrorCode.NONE), "h")
    assert groups.is_dead("Dead") and not groups.is_dead("Empty")


# -- peek ------------------------------------------------------------------------------------


def test_peek_fetches_per_leader_and_reads_the_first_record_at_the_offset() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    offsets = {a0: 5, a1: 0, b0: 0}
    parts = {"a": [Part(0, 1), Part(1, -1)], "b": [Part(0, 2)]}
    ids = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2)}
    requests = peek.peek_requests(offsets, parts, ids)
    assert set(requests) == {1, 2}  # a-1 has no leader: left out
    [topic] = requests[1].topics
    assert topic.topic_id == ids["a"] and topic.partitions[0].fetch_offset == 5
    assert requests[1].max_wait_ms == 0 and requests[1].replica_id == -1
    batch = encode_batch(
        [WireRecord(o, 1000 + o, None, b"v", ()) for o in range(3, 8)], base_offset=3
    )
    response = FetchResponse(
        responses=(
            FetchableTopicResponse(
                topic_id=ids["a"], partitions=(PartitionData(partition_index=0, records=batch),)
            ),
            FetchableTopicResponse(
                topic_id=ids["b"],
                partitions=(
                    PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        records=batch,
                    ),
                ),
            ),
        )
    )
    names = {v: k for k, v in ids.items()}
    # The batch starts at 3; the record at offset 5 is the partition's.
    assert peek.peeked_timestamps(response, offsets, names) == {a0: 1005}
