"""``sharecon exporter`` against a real broker: scraped while a group is fed and drained."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import TYPE_CHECKING

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sharecon import Admin, Producer, ProducerRecord, ShareConsumer
from sharecon.exporter import Exporter, GroupState, collect_groups, render

if TYPE_CHECKING:
    from sharecon.record import Record

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


async def _scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    return await anyio.to_thread.run_sync(_get, f"http://127.0.0.1:{port}{path}")


def test_render_escapes_labels_and_leaves_unknown_lag_out() -> None:
    text = render([GroupState('odd"group\\', None, error="GroupIdNotFoundError")])
    samples = _samples(text)
    assert samples[("sharecon_share_group_up", (("group", 'odd"group\\'),))] == 0
    assert not any(name == "sharecon_share_group_lag" for name, _ in samples)


@pytest.mark.broker
async def test_scrapes_follow_a_group_fed_then_drained(
    kafka_bootstrap: str, topic_factory: object, share_group: str
) -> None:
    topic = topic_factory(3)  # type: ignore[operator]
    n = 30
    g = (("group", share_group),)
    with anyio.fail_after(90):
        async with Admin(kafka_bootstrap) as admin, anyio.create_task_group() as tg:
            exporter = Exporter(admin, [share_group], min_interval=0.0)
            bound: list[int] = []
            listening = anyio.Event()

            def on_listening(host: str, port: int) -> None:
                bound.append(port)
                listening.set()

            tg.start_soon(lambda: exporter.serve("127.0.0.1", 0, on_listening=on_listening))
            await listening.wait()
            port = bound[0]

            # No member has joined yet: the group does not exist, and says so.
            status, text = await _scrape(port)
            assert status == 200
            assert _samples(text)[("sharecon_share_group_up", g)] == 0
            assert (await _scrape(port, "/healthz")) == (200, "ok\n")

            fed = time.time()
            async with Producer(kafka_bootstrap) as producer:
                await producer.send_batch(
                    [ProducerRecord(topic, b"v", partition=i % 3) for i in range(n)]
                )
            consumer = ShareConsumer(
                kafka_bootstrap,
                group_id=share_group,
                topics=[topic],
                ack_mode="explicit",
                client_id="exp-c",
            )
            async with consumer:
                # The broker knows a share-partition's lag once its state was written
                # (the first acknowledgement on it): accept one record per partition.
                # A record taken and not answered yet is not delivery-complete.
                remaining = dict.fromkeys(range(3), n // 3)

                def accept(records: list[Record[bytes, bytes]]) -> None:
                    for r in records:
                        r.accept()
                        remaining[r.partition] -= 1

                held: list[Record[bytes, bytes]] = []
                while max(remaining.values()) == n // 3:
                    batch = await consumer.poll(5.0)
                    firsts = {r.partition: r for r in reversed(batch)}
                    accept(list(firsts.values()))
                    held = [r for r in batch if r not in firsts.values()]
                    if max(remaining.values()) == n // 3:
                        accept(held)  # explicit mode: answered in full before the next poll
                await consumer.commit()
                while True:
                    s = _samples((await _scrape(port))[1])
                    if s.get(("sharecon_share_group_lag", g)) == sum(remaining.values()):
                        break
                    await anyio.sleep(0.2)
                assert s[("sharecon_share_group_up", g)] == 1
                assert s[("sharecon_share_group_members", g)] == 1
                assert s[("sharecon_share_group_lag_unknown_partitions", g)] == 0
                # The oldest pending record's age: from its timestamp, read at the start
                # offset; every record was written after `fed`.
                age = s[("sharecon_share_group_oldest_record_age_seconds", g)]
                assert 0 <= age <= time.time() - fed + 1
                ages = [
                    v
                    for (name, _), v in s.items()
                    if name.endswith("partition_oldest_record_age_seconds")
                ]
                assert len(ages) == sum(1 for v in remaining.values() if v) and max(ages) == age
                for p in range(3):
                    where = (("group", share_group), ("partition", str(p)), ("topic", topic))
                    assert s[("sharecon_share_partition_lag", where)] == remaining[p]
                    assigned = (
                        ("client_id", "exp-c"),
                        ("group", share_group),
                        ("member_id", consumer.member_id),
                        ("partition", str(p)),
                        ("topic", topic),
                    )
                    assert s[("sharecon_share_group_assignment", assigned)] == 1

                # Drain: every record accepted; the lag falls to 0.
                accept(held)
                while sum(remaining.values()):
                    accept(await consumer.poll(5.0))
                await consumer.commit()
                while True:
                    s = _samples((await _scrape(port))[1])
                    if s.get(("sharecon_share_group_lag", g)) == 0:
                        break
                    await anyio.sleep(0.2)
                assert s[("sharecon_share_group_members", g)] == 1
                # Nothing pending: no age.
                assert ("sharecon_share_group_oldest_record_age_seconds", g) not in s
            tg.cancel_scope.cancel()


@pytest.mark.broker
def test_the_command_serves_until_sigterm(kafka_bootstrap: str, share_group: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sharecon.cli",
            "exporter",
            "-b",
            kafka_bootstrap,
            "--group",
            share_group,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("sharecon exporter: serving http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        status, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert f'sharecon_share_group_up{{group="{share_group}"}} 0' in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_unknown_lags_are_named_and_bounded_so_the_bound_never_undercounts() -> None:
    from sharecon._admin.results import SharePartitionOffset
    from sharecon.types import TopicPartition

    known, fresh, unread = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    offsets = {
        known: SharePartitionOffset("t", 0, 10, 0, 7),
        fresh: SharePartitionOffset("t", 1, -1, -1, -1),
        unread: SharePartitionOffset("t", 2, 40, 0, -1),
    }
    state = GroupState("g", None, offsets, lag_bounds={fresh: 25, unread: 3})
    assert (state.lag, state.unknown_lag_partitions, state.lag_upper_bound) == (7, 2, 35)
    # A bound that could not be read: no group bound rather than a low one.
    assert GroupState("g", None, offsets, lag_bounds={fresh: 25}).lag_upper_bound is None


@pytest.mark.broker
async def test_a_partition_never_acknowledged_is_counted_by_the_upper_bound(
    kafka_bootstrap: str, topic_factory: object, share_group: str
) -> None:
    """Kafka reports no lag for a share-partition whose state was never written: the group
    lag leaves it out (undercounts); the upper bound counts it, never below the truth."""
    topic = topic_factory(2)  # type: ignore[operator]
    per_partition = 10

    async def feed(partition: int) -> None:
        async with Producer(kafka_bootstrap) as producer:
            await producer.send_batch(
                [ProducerRecord(topic, b"v", partition=partition) for _ in range(per_partition)]
            )

    g = (("group", share_group),)
    await feed(0)
    async with (
        Admin(kafka_bootstrap) as admin,
        ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
        ) as consumer,
    ):
        with anyio.fail_after(60):
            # Partition 0: every record accepted, so its state is written.
            accepted = 0
            while accepted < per_partition:
                for r in await consumer.poll(5.0):
                    r.accept()
                    accepted += 1
            await consumer.commit()
            # Partition 1: records taken and held unanswered (no poll after these), so
            # its share-partition state is never written.
            await feed(1)
            while not await consumer.poll(5.0):
                pass
            while True:
                (state,) = await collect_groups(admin, [share_group])
                p0 = [o for tp, o in state.offsets.items() if tp.partition == 0]
                if p0 and p0[0].lag == 0:
                    break
                await anyio.sleep(0.2)
        s = _samples(render([state]))
        pending = per_partition  # partition 1's records, none delivery-complete
        unknown = [tp for tp, o in state.offsets.items() if o.lag < 0]
        assert unknown, "Kafka reported every lag: nothing to bound"
        assert s[("sharecon_share_group_lag_unknown_partitions", g)] == len(unknown)
        for tp in unknown:
            where = (*g, ("partition", str(tp.partition)), ("topic", topic))
            assert s[("sharecon_share_partition_lag_unknown", where)] == 1
        assert s[("sharecon_share_group_lag", g)] < pending  # the undercount
        assert s[("sharecon_share_group_lag_upper_bound", g)] >= pending
        assert s[("sharecon_share_group_lag_upper_bound", g)] <= 2 * per_partition
