"""Compatibility smoke over the Kafka lines sharecon supports: each must start here with
share groups usable, accept topics and group configs, and serve a share consumer."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from sharecon.testing import LATEST_PATCH
from sharecon.testing.probe import SHARE_APIS, share_support

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

# Finalized share.version right after format: 4.1 needs (and gets) share.version=1 at
# format time; 4.2 and 4.3 default to 1; 4.4 defaults to 2 (adds dead-letter queues).
EXPECTED_SHARE_VERSION = {"4.1": 1, "4.2": 1, "4.3": 1, "4.4": 2}
MATRIX = ["4.1", "4.2", "4.4"]


@pytest.mark.parametrize("line", MATRIX)
def test_version_smoke(line: str, kafka_broker_factory: BrokerFactory) -> None:
    # Not kept for the session: other tests use the default version.
    broker = kafka_broker_factory(LATEST_PATCH[line], shared=False)
    assert broker.version == LATEST_PATCH[line]

    support = share_support(broker.bootstrap)
    assert support.share_version == EXPECTED_SHARE_VERSION[line]
    assert set(support.apis) == set(SHARE_APIS)
    assert all(low >= 1 for low, _ in support.apis.values())  # v0 was 4.0 early access
    features = broker.tools.describe_features()
    assert features["metadata.version"].finalized.startswith(f"{line}-IV")
    assert int(features["share.version"].finalized) == support.share_version

    topic, group = f"smoke-{uuid.uuid4().hex[:8]}", f"smoke-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 2)
    broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    assert broker.tools.describe_group_config(group) == {"share.auto.offset.reset": "earliest"}
    broker.tools.produce(topic, 500)
    assert broker.tools.share_consume(topic, group, 500, timeout=60) == 500
