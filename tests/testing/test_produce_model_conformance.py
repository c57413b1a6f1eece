"""The model leaders' idempotent append rules (sharecon.testing.model.produce), held true
against a real broker: the same raw Produce batches (producer id, epoch, sequence, record
count) go to a fresh partition and to a fresh model partition, and each answer's error
code and base offset must agree. These are the rules the producer simulation's findings
rest on (docs/testing.md, "Producer simulation"), and FakeKafka's idempotence (it calls
the same rules; tests/testing/test_fake.py plays this script against it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.testing._produce_script import play

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_model_appends_idempotent_batches_as_the_broker_does(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    wrong = await play(kafka_bootstrap, topic_factory(1))
    assert not wrong, "\n".join(wrong)
