"""First end-to-end proof: produce with the Java tool, consume through a share group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.types import TopicPartition
from tests.consumer.conftest import assert_clean_commit

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ProduceRecords

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_consume_all_records_once(
    kafka_bootstrap: str, topic: str, share_group: str, produce_records: ProduceRecords
) -> None:
    produce_records(topic, 300)
    seen: set[tuple[int, int]] = set()
    last = -1
    with anyio.fail_after(60):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
            async for record in consumer:
                seen.add((record.partition, record.offset))
                last = record.partition
                assert record.delivery_count == 1
                if len(seen) == 300:
                    break
            results = await consumer.commit()
    assert len(seen) == 300
    # The last record was answered by commit() itself; earlier ones may have gone already.
    assert_clean_commit(
        results, {TopicPartition(topic, last)}, {TopicPartition(topic, p) for p, _ in seen}
    )
