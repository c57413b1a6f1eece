"""A sans-I/O model of Kafka's share-group broker side (4.1 to 4.4), for tests.

* :class:`ModelBroker`: share sessions, the session cache, share partitions; answers
  ShareFetch and ShareAcknowledge request bodies at a virtual time.
* :class:`ModelCoordinator`: a share group's coordinator (ShareGroupHeartbeat), which can
  be lost: unavailable, moved, or a member's session timed out.
* :class:`Behaviour`: the rules that differ between Kafka lines.
* :class:`SharePartitionModel`: one share partition's records, locks and persisted state.

See "The model broker" in ``docs/testing.md``.
"""

from __future__ import annotations

from sharecon.testing.model.behaviour import Behaviour
from sharecon.testing.model.broker import BrokerEvent, ModelBroker
from sharecon.testing.model.coordinator import CoordinatorEvent, ModelCoordinator
from sharecon.testing.model.partition import (
    AckType,
    GroupSettings,
    OffsetState,
    PartitionLog,
    RecordState,
    SharePartitionModel,
)

__all__ = [
    "AckType",
    "Behaviour",
    "BrokerEvent",
    "CoordinatorEvent",
    "GroupSettings",
    "ModelBroker",
    "ModelCoordinator",
    "OffsetState",
    "PartitionLog",
    "RecordState",
    "SharePartitionModel",
]
