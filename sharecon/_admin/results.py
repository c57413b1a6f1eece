"""The admin client's result types: small frozen dataclasses (re-exported by
:mod:`sharecon.admin`, where users import them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uuid
    from collections.abc import Mapping

    from sharecon.types import TopicPartition

__all__ = [
    "ConfigEntry",
    "ConfigSource",
    "CreatedTopic",
    "NewTopic",
    "PartitionDescription",
    "ResourceType",
    "ShareGroupDescription",
    "ShareGroupListing",
    "ShareMemberDescription",
    "SharePartitionOffset",
    "TopicDescription",
]


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
