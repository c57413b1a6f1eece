"""Admin checks that need no broker: argument errors raised before any request."""

from __future__ import annotations

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, NewTopic

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
