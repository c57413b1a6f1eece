"""Run the plugin's fixtures in a pytest subprocess that has no Java at all.

Used by the external-cluster test here and by the container leg (tests/docker): the
child's PATH keeps no folder holding a ``java``, and ``JAVA_HOME`` / ``SHARECON_JAVA`` are
unset, so anything reaching for Kafka's Java tools fails there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.testing._provision import cache_root

if TYPE_CHECKING:
    import pytest

# Read at import, before pytester points HOME elsewhere.
_JAR_CACHE = cache_root()

# What a user's test module would do with the fixtures, Java-free.
USER_TESTS = """
import shutil

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.testing import BrokerStartError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_there_is_no_java_here():
    assert shutil.which("java") is None


async def test_fixtures_arrange_and_produce_without_java(
    kafka_bootstrap, topic_factory, share_group, produce_records
):
    topic = topic_factory(2)
    result = produce_records(topic, 50, record_size=20)
    assert result.records == 50
    seen = set()
    with anyio.fail_after(60):
        # Records written before the consumer joined arrive: share_group set "earliest".
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as c:
            async for record in c:
                assert len(record.value) == 20
                seen.add((record.partition, record.offset))
                if len(seen) == 50:
                    break
    assert len(seen) == 50


def test_only_the_java_tools_need_java(kafka_broker):
    with pytest.raises(BrokerStartError, match="Java not found"):
        kafka_broker.tools
"""


def without_java(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take every ``java`` off PATH and unset the variables that point at one."""
    kept = [
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not (Path(folder) / "java").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
    for name in ("JAVA_HOME", "SHARECON_JAVA"):
        monkeypatch.delenv(name, raising=False)


def run_user_tests_without_java(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> pytest.RunResult:
    """Write :data:`USER_TESTS` and run them in a child pytest with no Java."""
    without_java(monkeypatch)
    # pytester gives the child its own HOME: keep the jar cache, so what the Java tools
    # miss there is Java, not the jars.
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(_JAR_CACHE))
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=600)
