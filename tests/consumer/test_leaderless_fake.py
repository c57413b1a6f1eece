"""A partition whose leader is gone for a while, then back (issue 30's liveness; found by
``tests/cluster/test_rebootstrap_move.py`` in CI): the consumer looks its leader up again
until it finds one, and takes up fetching by itself, well within the metadata max age.

The answer that said the leader moved named no leader; the metadata lookup it caused found
none (or the cluster was unreachable). Before the fix nothing looked again until the
periodic refresh, 5 minutes later: the member stayed in the group and heartbeated, with
its partition unfetched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from unittest import mock

import anyio
import pytest

from sharecon import errors
from sharecon._net.cluster import Cluster
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from sharecon._net.cluster import ClusterMetadata
    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio


async def test_a_partition_whose_leader_returns_is_fetched_again(
    fake_kafka_factory: FakeKafkaFactory,
) -> None:
    fake = fake_kafka_factory()
    fake.create_topic("t", 1)
    fake.configure_group("g", {"share.auto.offset.reset": "earliest"})
    async with (
        Producer(fake.bootstrap) as producer,
        ShareConsumer(fake.bootstrap, group_id="g", topics=["t"]) as consumer,
    ):
        await producer.send_and_wait("t", b"before")
        with anyio.fail_after(20):
            first = await consumer.__anext__()
        assert first.value == b"before"
        core = consumer._core
        assert core is not None
        (tp,) = core.assignment
        fake.withdraw_leader("t", 0)
        with anyio.fail_after(20):
            while core.leader(tp) is not None:  # noqa: ASYNC110 - told, then looked up
                await anyio.sleep(0.05)
        await anyio.sleep(2.0)  # lookups meanwhile find no leader (the periodic one: 300 s)
        fake.restore_leader("t", 0)
        await producer.send_and_wait("t", b"after")
        values = []
        with anyio.fail_after(15):
            while b"after" not in values:
                values.append((await consumer.__anext__()).value)
        # "before" may come again: its acceptance could not reach a leader (the locks
        # went with the old one), so the broker delivers it once more.
        assert set(values) <= {b"before", b"after"}
        assert core.leader(tp) == 1


async def test_an_assignment_whose_metadata_cannot_be_read_is_taken_all_the_same(
    fake_kafka_factory: FakeKafkaFactory,
) -> None:
    """The heartbeat that brings the assignment is answered, then the metadata lookup for
    its partitions fails (the cluster went away in between): the consumer takes the
    assignment and looks for the leaders later; it used to stop for good on that error."""
    fake = fake_kafka_factory()
    fake.create_topic("t", 1)
    fake.configure_group("g", {"share.auto.offset.reset": "earliest"})
    fake.withdraw_leader("t", 0)  # so the assignment needs a lookup
    real = Cluster.refresh_metadata
    failed = anyio.Event()

    async def flaky(self: Cluster, *args: Any, **kwargs: Any) -> ClusterMetadata:
        if kwargs.get("topic_ids") and not failed.is_set():
            failed.set()
            raise errors.BrokerConnectError("no broker of the cluster could be reached (test)")
        return await real(self, *args, **kwargs)

    with mock.patch.object(Cluster, "refresh_metadata", flaky):
        async with (
            Producer(fake.bootstrap) as producer,
            ShareConsumer(fake.bootstrap, group_id="g", topics=["t"]) as consumer,
        ):
            with anyio.fail_after(20):
                await failed.wait()
            fake.restore_leader("t", 0)
            await producer.send_and_wait("t", b"x")
            with anyio.fail_after(15):
                record = await consumer.__anext__()
            assert record.value == b"x"
            assert consumer.health().failed is None
            # Taken without its topic's name, the assignment is named once it is known.
            assert {tp.topic for tp in consumer.assignment} == {"t"}
