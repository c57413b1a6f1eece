"""Admin and dead-letter policy checks that need no broker: argument errors raised early."""

from __future__ import annotations

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, NewTopic
from sharecon.dlq import DeadLetterPolicy

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    "topic", ["bad topic!", "", ".", "..", "a/b", "a\0b", "t" * 300, NewTopic(name="x y")]
)
async def test_create_topics_refuses_illegal_names(topic: str | NewTopic) -> None:
    # Not opened: the names must be refused before the admin client touches the network.
    admin = Admin("localhost:9092")
    with anyio.fail_after(1), pytest.raises(errors.ConfigError, match="create_topics: invalid"):
        await admin.create_topics(["fine", topic])


@pytest.mark.parametrize("topic", ["", "bad topic!", "..", "x" * 250])
def test_dead_letter_policy_refuses_illegal_topic_names(topic: str) -> None:
    with pytest.raises(errors.ConfigError, match="DeadLetterPolicy.topic: invalid"):
        DeadLetterPolicy(topic=topic)
