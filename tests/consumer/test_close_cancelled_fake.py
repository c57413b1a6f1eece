"""A consumer left by the cancellation of a scope around it (an application's timeout, a
task group cancelled at SIGTERM) still closes cleanly: its pending answers reach the
broker before its share sessions end (rule 8 of ``sharecon._lifecycle``). Against
FakeKafka (no JVM), on asyncio and trio.

Before the fix the cancellation reached the consumer's connection readers first; the
connections closed, the share sessions with them, and every record the application had
handled since its answers last went out came back AVAILABLE, a delivery attempt spent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing.model.partition import RecordState

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.fake.cluster import FakeCluster
    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio

N = 10


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


async def _write(fake: FakeKafka) -> None:
    fake.create_topic("t")
    fake.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with Producer(fake.bootstrap) as producer:
        for i in range(N):
            await producer.send_and_wait("t", b"v%d" % i, partition=0)


def _states(fake: FakeKafka) -> list[str]:
    """How the group's share state holds each record: finished, in flight, or persisted."""

    def read(cluster: FakeCluster) -> list[str]:
        model = cluster.model
        key = ("g", (model.topics["t"], 0))
        finished = model.finished.get(key, {})
        loaded = model.partitions.get(key)
        persisted = model.persister.get(key, (0, {}))[1]
        out = []
        for offset in range(N):
            if offset in finished:
                out.append(finished[offset].name)
            elif loaded is not None and offset in loaded.states:
                out.append(loaded.states[offset].state.name)
            else:
                out.append(persisted.get(offset, (RecordState.AVAILABLE, 0))[0].name)
        return out

    states: list[str] = fake.call(read)
    return states


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_answers_given_before_an_outer_cancellation_reach_the_broker(
    fake_kafka_factory: FakeKafkaFactory, mode: str
) -> None:
    fake = fake_kafka_factory("4.4")
    await _write(fake)
    handled = 0
    with anyio.fail_after(30):
        with anyio.CancelScope() as outer:  # the application's, around the consumer
            async with ShareConsumer(
                fake.bootstrap, group_id="g", topics=["t"], ack_mode=mode
            ) as consumer:
                async for record in consumer:
                    handled += 1
                    if mode == "explicit":
                        record.accept()
                    if handled == N:
                        outer.cancel()  # right away: the answers have not gone out yet
        assert outer.cancelled_caught
    assert handled == N
    # Every record answered before the cancellation took effect is accepted at the broker
    # (implicit mode: the loop asked for the next record, which accepted the tenth, and
    # the cancellation struck at its checkpoint).
    assert _states(fake) == ["ACKNOWLEDGED"] * N
