"""``sharecon worker --autoscale`` against a real broker: a step in the feed rate, the
process count following it, and every record handled once, on its first delivery."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.producer import Producer
from tests.worker._harness import counts, noted, running_worker

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

CHANGE = re.compile(r"autoscale: (\d+) -> (\d+) processes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _feed(bootstrap: str, topic: str, start: int, rate: float, seconds: float) -> int:
    """Write ``r{start}`` ... at ``rate`` records a second for ``seconds``; returns the
    next index."""
    i = start
    async with Producer(bootstrap) as producer:
        began = anyio.current_time()
        while anyio.current_time() - began < seconds:
            due = start + int((anyio.current_time() - began) * rate)
            while i <= due:
                v = f"r{i}".encode()
                await producer.send(topic, v, key=v)
                i += 1
            await anyio.sleep(0.02)
        await producer.flush()
    return i


async def test_process_count_follows_a_step_in_the_feed_and_nothing_is_lost_or_redone(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    topic = topic_factory(4)
    # One process handles about 2 / 0.05 = 40 records/s; the step feeds 100/s.
    args = (
        "--group",
        share_group,
        "--topic",
        topic,
        "--concurrency",
        "2",
        # Enough per fetch that the handlers, not the fetches, are the bottleneck: the
        # rule adds a process for busy handlers.
        "--max-records",
        "10",
        "--autoscale",
        "1:3",
        "--scale-up-after",
        "1",
        "--scale-down-after",
        "2",
        "--scale-cooldown",
        "2",
        "--interval",
        "1",
    )
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:record_id", *args, sleep=0.05
    ) as worker:
        await worker.wait_for("the first process", lambda: worker.pids(0), 60)

        def counts_seen() -> list[int]:
            return [1] + [int(m[2]) for line in worker.lines if (m := CHANGE.search(line))]

        # Low, then the step up: 100 records/s for 10 s.
        n = await _feed(kafka_bootstrap, topic, 0, 10, 2)
        n = await _feed(kafka_bootstrap, topic, n, 100, 10)
        assert max(counts_seen()) >= 2, worker.stderr
        # The step down: nothing more; the backlog is worked off and processes go.
        await worker.wait_for("every record handled", lambda: len(counts(tmp_path)) >= n, 40)
        await worker.wait_for("back to one process", lambda: counts_seen()[-1] == 1, 30)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    seen = counts_seen()
    assert seen[0] == 1 and max(seen) >= 2 and seen[-1] == 1, seen
    assert "| processes " in worker.stderr  # progress lines tell the count
    handled = counts(tmp_path)
    assert set(handled) == {f"r{i}" for i in range(n)}, "records lost"
    assert max(handled.values()) == 1, [v for v, c in handled.items() if c > 1]
    # The scale-downs drained without spending a delivery attempt: every record was
    # handled on its first delivery.
    assert {dc for _, dc in noted(tmp_path)} == {1}, worker.stderr
