"""``sharecon worker`` against a real broker: real processes, real group, real signals.

Each test runs the command as a user would (``python -m sharecon.cli worker
tests.worker.handlers:...``); the handlers note every record they handle in files, one
per process, so the test counts what was handled across processes and restarts.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer
from sharecon.dlq import dead_letter_info
from sharecon.errors import KafkaError
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing.env import env_version
from tests.worker._harness import counts, noted, running_worker

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

HEALTH_LINE = re.compile(r"health on http://127\.0\.0\.1:(\d+)/healthz")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _produce(bootstrap: str, topic: str, n: int, *, batch: int | None = None) -> list[str]:
    """Write ``r0`` .. ``r{n-1}``, keyed by themselves (spread over the partitions); with
    ``batch``, flushed every ``batch`` records (small batches: a fetch acquires whole
    batches)."""
    values = [f"r{i}" for i in range(n)]
    step = batch or n
    async with Producer(bootstrap) as producer:
        for i in range(0, n, step):
            await producer.send_batch(
                ProducerRecord(topic, v.encode(), key=v.encode()) for v in values[i : i + step]
            )
            await producer.flush()
    return values


async def _nothing_left(bootstrap: str, group: str, topic: str) -> None:
    """A fresh member of ``group`` gets a record written now as its first: nothing older
    is left to deliver, and nothing is held by a member that is gone."""
    async with Producer(bootstrap) as producer:
        marker = await producer.send_and_wait(topic, b"marker", partition=0)
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as fresh:
        with anyio.fail_after(30):
            record = await fresh.__anext__()
    assert (record.partition, record.offset, record.value) == (0, marker.offset, b"marker")


async def test_two_processes_handle_every_record_exactly_once(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    topic = topic_factory(3)
    values = await _produce(kafka_bootstrap, topic, 300)
    args = ("--group", share_group, "--topic", topic, "--processes", "2", "--concurrency", "4")
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:record_id", *args, "--interval", "1"
    ) as worker:
        await worker.wait_for("two processes", lambda: worker.pids(1), 60)
        await worker.wait_for("every record handled", lambda: len(counts(tmp_path)) == 300, 90)
        await worker.wait_for("a progress line", lambda: "rec/s" in worker.stderr, 30)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert "drained: handled 300," in worker.stderr
    handled = counts(tmp_path)
    assert set(handled) == set(values)
    assert max(handled.values()) == 1, [v for v, n in handled.items() if n > 1]
    await _nothing_left(kafka_bootstrap, share_group, topic)


async def test_killed_process_is_restarted_and_its_records_handled(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    topic = topic_factory(3)
    values = await _produce(kafka_bootstrap, topic, 400)
    args = ("--group", share_group, "--topic", topic, "--processes", "2", "--concurrency", "2")
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:record_id", *args, sleep=0.05
    ) as worker:
        await worker.wait_for("two processes", lambda: worker.pids(1), 60)
        first = {slot: worker.pids(slot)[0] for slot in (0, 1)}

        def handling() -> list[int]:
            return [s for s, pid in first.items() if (tmp_path / f"handled-{pid}.txt").exists()]

        # Killed once it is handling records: it holds acquired records not yet handled.
        # Whichever process that is: the first to join may have acquired every record.
        await worker.wait_for("a process handling", handling, 60)
        slot = handling()[0]
        victim = first[slot]
        os.kill(victim, signal.SIGKILL)
        await worker.wait_for("a restart", lambda: len(worker.pids(slot)) == 2, 30)
        await worker.wait_for(
            "every record handled", lambda: set(counts(tmp_path)) >= set(values), 120
        )
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert f"process {slot} (pid {victim}) was killed by SIGKILL; restarting" in worker.stderr
    assert set(counts(tmp_path)) == set(values)
    # What the killed process had acquired and not answered came back to the group.
    assert any(dc >= 2 for _, dc in noted(tmp_path)), noted(tmp_path)
    await _nothing_left(kafka_bootstrap, share_group, topic)


async def test_sigterm_drains_and_leaves_nothing_held(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory, tmp_path: Path
) -> None:
    # Locks of 60 s: a record the drain left locked could not reach the fresh member
    # below before its 30 s deadline, so that deadline tells released from held.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(3)
    # Batches of about 3 records per partition, fetched 4 at most: each process holds a
    # few records when the drain begins, far from all of them.
    values = await _produce(kafka_bootstrap, topic, 300, batch=10)
    args = ("--group", group, "--topic", topic, "--processes", "2", "--concurrency", "2")
    async with running_worker(
        kafka_bootstrap,
        tmp_path,
        "tests.worker.handlers:record_id",
        *args,
        "--grace",
        "20",
        "--max-records",
        "4",
        sleep=0.05,
    ) as worker:
        await worker.wait_for("records handled", lambda: len(noted(tmp_path)) >= 30, 60)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    handled = counts(tmp_path)
    assert max(handled.values()) == 1
    assert len(handled) < len(values), "the drain came too late to test anything"
    # What the processes had fetched was handled, not released: no delivery attempt spent.
    assert {dc for _, dc in noted(tmp_path)} == {1}
    # The rest is there for a fresh member at once: released, not held, none lost.
    rest = set(values) - set(handled)
    got: set[str] = set()
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as fresh:
        with anyio.fail_after(30):
            async for record in fresh:
                got.add((record.value or b"").decode())
                if got >= rest:
                    break
    assert got == rest


async def test_a_slow_handler_spreads_over_both_processes_and_dead_letters_nothing_unseen(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory, tmp_path: Path
) -> None:
    """Issue 32's scenario, small: a backlog written at once (whole producer batches), a
    handler of 25 ms per record, 2 processes, ``--dlq-after 1``, delayed retries, a 3 s
    lock. Before, one process acquired every batch, the locks ended in its buffer and
    every record back at delivery 2 was dead-lettered unseen, the retried ones too; the
    other process sat idle. Now each process holds what it handles within the lock, a
    record the handler never failed is never routed, and the attempts spent are shown."""
    group = share_group_factory({"share.record.lock.duration.ms": "3000"})
    topic = topic_factory(3)
    args = ("--group", group, "--topic", topic, "--processes", "2", "--dlq-after", "1")
    async with running_worker(
        kafka_bootstrap,
        tmp_path,
        "tests.worker.handlers:slow_retry_some",
        *args,
        "--interval",
        "1",
        sleep=0.025,
    ) as worker:
        await worker.wait_for("two processes", lambda: worker.pids(1), 60)
        await _members(kafka_bootstrap, group, 2)
        values = await _produce(kafka_bootstrap, topic, 240)
        await worker.wait_for(
            "every record handled", lambda: set(counts(tmp_path)) == set(values), 120
        )
        await worker.wait_for("a progress line", lambda: "expired unseen" in worker.stderr, 30)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    # Nothing dead-lettered: no handler failed (the worker counts every copy written).
    final = worker.stderr.rsplit("drained: ", 1)[-1]
    assert re.match(r"handled \d[\d,]*, failed 0, dlq 0, expired unseen \d+", final), final
    retried = {v for v, _ in noted(tmp_path, "retry")}
    # Asked for on a first delivery (a record first seen later is handled at once).
    assert retried and retried <= {v for v in values if int(v[1:]) % 10 == 0}
    # Retried records were handled on a later delivery, not dead-lettered.
    assert all(dc >= 2 for v, dc in noted(tmp_path) if v in retried)
    per_process = _per_process(tmp_path)
    assert len(per_process) == 2 and min(per_process) > 0, per_process


def _per_process(out: Path) -> list[int]:
    """Records handled by each process (one file per process)."""
    return [len(p.read_text().splitlines()) for p in out.glob("handled-*.txt")]


async def _members(bootstrap: str, group: str, n: int) -> None:
    """Wait until ``group`` has ``n`` members (each worker process joined)."""
    from sharecon.admin import Admin

    async with Admin(bootstrap) as admin:
        with anyio.fail_after(60):
            while True:
                try:
                    described = await admin.describe_share_group(group)
                except KafkaError:  # not created yet: look again
                    described = None
                if described is not None and len(described.members) >= n:
                    return
                await anyio.sleep(0.2)


async def test_failing_handler_ends_in_the_dead_letter_topic(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory, tmp_path: Path
) -> None:
    group = share_group_factory()
    topic = topic_factory(1)
    dlq_topic = f"{topic}-dlq-{uuid.uuid4().hex[:6]}"
    values = await _produce(kafka_bootstrap, topic, 5)
    args = ("--group", group, "--topic", topic, "--dlq-after", "2", "--dlq-topic", dlq_topic)
    reader_group = share_group_factory()
    dead: dict[str, str] = {}
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:always_fails", *args
    ) as worker:
        async with ShareConsumer(kafka_bootstrap, group_id=reader_group, topics=[dlq_topic]) as dlq:
            with anyio.fail_after(90):
                async for record in dlq:
                    info = dead_letter_info(record.headers)
                    assert info is not None
                    dead[(record.value or b"").decode()] = info.reason
                    if len(dead) == len(values):
                        break
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert sorted(dead) == sorted(values)
    assert set(dead.values()) == {"RuntimeError: handler always fails"}
    # Tried on the first and the second delivery, then dead-lettered, never tried again.
    attempts = sorted(noted(tmp_path, "attempt"))
    assert attempts == sorted((v, dc) for v in values for dc in (1, 2))
    assert "dlq 5" in worker.stderr
    await _nothing_left(kafka_bootstrap, group, topic)


async def test_hung_handler_gets_its_process_replaced(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    values = await _produce(kafka_bootstrap, topic, 3)
    args = ("--group", share_group, "--topic", topic, "--handler-timeout", "2")
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:hangs_first_time", *args
    ) as worker:
        await worker.wait_for(
            "every record handled", lambda: set(counts(tmp_path)) == set(values), 90
        )
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert "(handler timeout 2 s): killing it" in worker.stderr
    assert len(worker.pids(0)) >= 2
    # Each record hung on its first delivery and was handled on a later one.
    assert all(dc >= 2 for _, dc in noted(tmp_path)), noted(tmp_path)


async def test_sync_handlers_run_and_one_stuck_past_grace_is_released(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory, tmp_path: Path
) -> None:
    """A synchronous handler runs (in a thread); one still running when the grace period
    ends does not stop the drain: exit 0, and its record is released, not left locked."""
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(1)
    values = await _produce(kafka_bootstrap, topic, 1)
    args = ("--group", group, "--topic", topic, "--grace", "1")
    async with running_worker(
        kafka_bootstrap,
        tmp_path,
        "tests.worker.handlers:started_then_sleeps_sync",
        *args,
        sleep=300,
    ) as worker:
        await worker.wait_for("the handler started", lambda: noted(tmp_path, "started"), 60)
        code = await worker.terminate(timeout=30)
    assert code == 0, worker.stderr
    assert noted(tmp_path, "started") == [(values[0], 1)]
    assert noted(tmp_path) == []  # never finished
    # Released at close (a lock of 60 s would keep it from the fresh member otherwise).
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as fresh:
        with anyio.fail_after(30):
            record = await fresh.__anext__()
    assert (record.value, record.delivery_count) == (values[0].encode(), 2)


async def test_records_never_started_when_the_grace_ends_are_counted_as_released_unseen(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory, tmp_path: Path
) -> None:
    """One handler at a time, stuck on the first of five records fetched together: when
    the grace period ends, the close releases the stuck one (seen) and the four never
    started (each a delivery attempt nobody saw). The final line counts the four; on
    Kafka 4.1 the close leaves them to the session's end, which spends none."""
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(1)
    await _produce(kafka_bootstrap, topic, 5)
    args = ("--group", group, "--topic", topic, "--grace", "1", "--concurrency", "1")
    async with running_worker(
        kafka_bootstrap,
        tmp_path,
        "tests.worker.handlers:started_then_sleeps_sync",
        *args,
        "--max-records",
        "5",
        sleep=300,
    ) as worker:
        await worker.wait_for("the handler started", lambda: noted(tmp_path, "started"), 60)
        code = await worker.terminate(timeout=30)
    assert code == 0, worker.stderr
    assert len(noted(tmp_path, "started")) == 1
    spent = 0 if env_version().startswith("4.1.") else 4
    final = worker.stderr.strip().splitlines()[-1]
    assert final.startswith("sharecon worker: drained: handled 0,"), final
    if spent:
        assert final.endswith(f", released unseen {spent}"), final
    else:
        assert "released unseen" not in final, final


async def _http_get(port: int, path: str) -> tuple[int, str] | None:
    """``(status, body)`` of ``GET path`` on loopback, or ``None`` when nothing answers.

    Nothing answers when nothing listens, and also when the connection closes before a
    byte comes back: the kernel completes a handshake on a listening socket before the
    server accepts it, so a worker exiting just then closes an accepted connection
    unanswered (seen once in CI, asking /readyz while the worker drained to its end).
    """
    try:
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            data = b""
            with anyio.fail_after(5):
                try:
                    while True:
                        data += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
    except OSError:
        return None
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


async def test_health_endpoints_ready_then_draining(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    # Slow records, a few fetched at once: the drain has work to finish, long enough to
    # ask /readyz during it.
    await _produce(kafka_bootstrap, topic, 40, batch=2)
    args = ("--group", share_group, "--topic", topic, "--max-records", "4", "--grace", "10")
    async with running_worker(
        kafka_bootstrap,
        tmp_path,
        "tests.worker.handlers:record_id",
        *args,
        "--health-port",
        "0",
        sleep=0.4,
    ) as worker:
        ports: list[int] = []

        def listening() -> bool:
            ports.extend(int(m[1]) for line in worker.lines if (m := HEALTH_LINE.search(line)))
            return bool(ports)

        await worker.wait_for("the health endpoints", listening, 20)
        port = ports[0]
        with anyio.fail_after(20):
            while True:
                answer = await _http_get(port, "/readyz")
                if answer is not None and answer[0] == 200:
                    break
                await anyio.sleep(0.2)
        assert "consumers healthy" in answer[1]
        live = await _http_get(port, "/healthz")
        assert live is not None and live[0] == 200, live
        await worker.wait_for("a record handled", lambda: len(noted(tmp_path)) >= 1, 20)

        worker.proc.send_signal(signal.SIGTERM)
        during: tuple[int, str] | None = None
        with anyio.fail_after(20):
            while worker.proc.returncode is None:
                answer = await _http_get(port, "/readyz")
                if answer is not None:
                    during = answer
                    assert answer[0] == 503, answer
                await anyio.sleep(0.1)
        assert worker.proc.returncode == 0, worker.stderr
    # Draining took the records in flight: /readyz was asked and said so.
    assert during == (503, "draining\n")


async def test_a_handler_retries_later_by_raising_or_returning_retry_later(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str, tmp_path: Path
) -> None:
    """docs/worker.md, delayed retry: RetryLater raised or returned releases the record
    after its delay (one delivery), and is not counted as a failure."""
    topic = topic_factory(1)
    values = await _produce(kafka_bootstrap, topic, 4)
    args = ("--group", share_group, "--topic", topic, "--interval", "1")
    async with running_worker(
        kafka_bootstrap, tmp_path, "tests.worker.handlers:retry_first", *args
    ) as worker:
        await worker.wait_for(
            "every record retried and handled", lambda: len(counts(tmp_path)) >= 4, 40
        )
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert sorted(noted(tmp_path, "retry")) == [(v, 1) for v in values]  # each retried once
    assert sorted(noted(tmp_path)) == [(v, 2) for v in values]  # and back, on delivery 2
    # Not failures: every count of failures said is 0.
    failed = re.findall(r"failed (\d+)", worker.stderr)
    assert failed and set(failed) == {"0"}, worker.stderr
    # Nor handled: only the second deliveries count.
    assert re.findall(r"handled (\d+)", worker.stderr)[-1] == "4", worker.stderr
