"""A consumer left by the cancellation of a scope around ``async with`` (a deadline, a
task group cancelled at SIGTERM) sends its pending answers before its share session
ends (rule 8 of ``sharecon._lifecycle``), against a real broker.

Before the fix the cancellation ended the consumer's connections first, and with them
its share session: the records it had handled came back, delivered again to the next
consumer of the group. Here the next consumer must find nothing left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

N = 20


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_answers_given_before_an_outer_cancellation_are_not_delivered_again(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    mode: str,
) -> None:
    topic = topic_factory(1)
    group = share_group_factory()
    async with Producer(kafka_bootstrap) as producer:
        for i in range(N):
            await producer.send(topic, b"v%d" % i, partition=0)
    handled = 0
    with anyio.fail_after(60):
        with anyio.CancelScope() as outer:  # the application's, around the consumer
            async with ShareConsumer(
                kafka_bootstrap, group_id=group, topics=[topic], ack_mode=mode
            ) as consumer:
                async for record in consumer:
                    handled += 1
                    if mode == "explicit":
                        record.accept()
                    if handled == N:
                        outer.cancel()  # right away: the answers have not gone out yet
    assert outer.cancelled_caught and handled == N
    # A second consumer of the group: every record was accepted, none comes back. (The
    # broker would deliver a released record again at once.)
    again: list[tuple[int, int]] = []
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as second:
        with anyio.move_on_after(8):
            async for record in second:
                again.append((record.offset, record.delivery_count))
    assert again == []
