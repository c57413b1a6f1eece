"""FakeKafka without a broker: sharecon's clients run against it unchanged, fast.

What the fake answers is held true against real Kafka 4.1 and 4.4 by
tests/testing/test_fake_differential.py; here: lifecycle, speed, the test controls (clock,
fault hooks), the CLI, the pytest fixture, and the wire-level conformance scripts on the
lines the differential suite does not start a broker for (4.2, 4.3).
"""

from __future__ import annotations

import io
import json
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import Admin, Producer, ShareConsumer, errors
from sharecon._net.connect import ConnectionConfig, open_connection
from sharecon._net.connection import BrokerAddress
from sharecon._net.sasl import SaslConfig
from sharecon.cli import main
from sharecon.producer import ProducerRecord
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from sharecon.protocol.records import decode_records
from sharecon.testing.conformance.runner import compare
from sharecon.testing.fake import FakeKafka
from sharecon.testing.fake.log import TopicLog
from sharecon.types import AckType
from tests.testing._produce_script import play
from tests.worker._harness import counts, running_worker

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.pytest_plugin import FakeKafkaFactory

pytestmark = pytest.mark.anyio

EARLIEST = {"share.auto.offset.reset": "earliest"}


async def _records(fake: FakeKafka, topic: str, n: int, partitions: int = 1) -> None:
    fake.create_topic(topic, partitions)
    async with Producer(fake.bootstrap) as p:
        await p.send_batch(
            [ProducerRecord(topic, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(n)]
        )


def test_starts_and_stops_repeatedly() -> None:
    # How fast it starts is benchmarks/fake_speed.py's business; here: it starts, serves,
    # stops, and stopping twice does nothing.
    for _ in range(3):
        fake = FakeKafka()
        fake.start()
        assert fake.call(lambda c: 3 in c.api_ranges())  # Metadata is served
        fake.stop()
        fake.stop()  # twice does nothing
        with pytest.raises(RuntimeError, match="not running"):
            fake.advance(1)


async def test_async_context_manager_serves_admin(fake_kafka_factory: FakeKafkaFactory) -> None:
    async with FakeKafka("4.2") as fake:
        async with Admin(fake.bootstrap) as admin:
            await admin.create_topics(["t"], num_partitions=2)
            (d,) = (await admin.describe_topics(["t"])).values()
            assert [p.partition for p in d.partitions] == [0, 1]
            cluster = await admin.describe_cluster()
            assert [b.node_id for b in cluster.brokers] == [1]
    with pytest.raises(RuntimeError, match="not running"):
        fake.advance(1)


def test_the_fixture_line_comes_from_the_environment(
    fake_kafka_factory: FakeKafkaFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_FAKE_KAFKA_VERSION", "4.1")
    fake = fake_kafka_factory()
    ranges = fake.call(lambda c: c.api_ranges())
    assert fake.version == "4.1"
    assert ranges[78][1] == 1  # ShareFetch v1: no renew, no record limits on 4.1
    assert fake_kafka_factory("4.4").call(lambda c: c.api_ranges())[78][1] == 2


def test_the_fake_offers_only_the_apis_it_serves(fake_kafka_factory: FakeKafkaFactory) -> None:
    # A consumer asks for KIP-714 telemetry when the broker offers it; a broker without a
    # telemetry receiver does not, and neither does the fake (it has no handler for it).
    fake = fake_kafka_factory("4.1")
    served = fake.call(lambda c: [k for k in c.api_ranges() if hasattr(c, f"_h{k}")])
    offered = fake.call(lambda c: list(c.api_ranges()))
    assert offered == served
    assert 71 not in offered and 72 not in offered
    assert {0, 1, 3, 18, 76, 78, 79} <= set(offered)


async def test_produce_consume_accept_1000_records(
    fake_kafka: FakeKafka,
) -> None:
    fake_kafka.create_topic("speed")
    fake_kafka.configure_group("g", EARLIEST)
    async with Producer(fake_kafka.bootstrap) as p:
        await p.send_batch([ProducerRecord("speed", b"x" * 100) for _ in range(1000)])
    got = 0
    async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["speed"]) as c:
        while got < 1000:
            got += len(await c.poll(5))
        await c.commit()
    assert got == 1000
    offsets = fake_kafka.call(lambda cl: cl.model.share_offsets("g", "speed", 0))
    assert offsets is not None and offsets[1] == 0  # nothing left to deliver


async def test_advance_ends_locks_and_the_late_answer_fails(fake_kafka: FakeKafka) -> None:
    await _records(fake_kafka, "t", 3)
    fake_kafka.configure_group("g", EARLIEST)
    async with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], ack_mode="explicit", max_records=3
    ) as c:
        got = await c.poll(5)
        assert [r.delivery_count for r in got] == [1, 1, 1]
        fake_kafka.advance(16)  # past the 15 s lock: the handler was too slow
        for r in got:
            c.acknowledge(r, AckType.ACCEPT)
        verdicts = await c.commit()
        assert any(isinstance(e, errors.InvalidRecordStateError) for e in verdicts.values())
    # The records went back and come again (the open consumer may have taken them once
    # more before it closed: at least a second delivery).
    async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as c:
        again = await c.poll(5)
        assert [r.offset for r in again] == [0, 1, 2]
        assert all(r.delivery_count >= 2 for r in again)


async def test_fail_next_answers_with_the_error_code(fake_kafka: FakeKafka) -> None:
    fake_kafka.fail_next("CreateTopics", 1, ErrorCode.POLICY_VIOLATION)
    async with Admin(fake_kafka.bootstrap) as admin:
        with pytest.raises(errors.PolicyViolationError):
            await admin.create_topics(["refused"])
        await admin.create_topics(["refused"])  # only the next one failed
        assert "refused" in await admin.list_topics()


async def test_share_fetch_errors_are_retried_and_nothing_is_lost(fake_kafka: FakeKafka) -> None:
    await _records(fake_kafka, "t", 5)
    fake_kafka.configure_group("g", EARLIEST)
    fake_kafka.fail_next("ShareFetch", 2, ErrorCode.UNKNOWN_SERVER_ERROR)
    seen: list[tuple[int, int]] = []
    async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as c:
        with anyio.fail_after(10):
            while len(seen) < 5:
                seen.extend((r.offset, r.delivery_count) for r in await c.poll(5))
    assert seen == [(o, 1) for o in range(5)]


async def test_cut_member_releases_its_records(fake_kafka: FakeKafka) -> None:
    await _records(fake_kafka, "t", 4)
    fake_kafka.configure_group("g", EARLIEST)
    async with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], ack_mode="explicit"
    ) as c:
        got = await c.poll(5)
        assert len(got) == 4
        assert fake_kafka.cut(c.member_id) >= 1
        # The session that held them is gone: answering them now fails.
        for r in got:
            c.acknowledge(r, AckType.ACCEPT)
        verdicts = await c.commit()
        assert any(e is not None for e in verdicts.values())
        with anyio.fail_after(10):
            while not (again := await c.poll(5)):
                pass
    # 4.4 keeps the delivery count of records a closing session held.
    assert [(r.offset, r.delivery_count) for r in again] == [(o, 2) for o in range(4)]


async def test_move_leader_and_restart_keep_records_flowing(fake_kafka: FakeKafka) -> None:
    await _records(fake_kafka, "t", 6)
    fake_kafka.configure_group("g", EARLIEST)
    seen: set[int] = set()
    async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"], max_records=2) as c:
        seen.update(r.offset for r in await c.poll(5))
        fake_kafka.move_leader("t", 0)
        fake_kafka.restart()
        with anyio.fail_after(15):
            while len(seen) < 6:
                seen.update(r.offset for r in await c.poll(5))
    async with Admin(fake_kafka.bootstrap) as admin:
        (d,) = (await admin.describe_topics(["t"])).values()
        assert d.partitions[0].leader_epoch == 2  # one move, one restart


def test_idempotent_retry_is_answered_without_a_second_append() -> None:
    producers = TopicLog().producers
    assert producers.check(7, 0, 0, 5) == (ErrorCode.NONE, -1)
    producers.note(7, 0, 0, 5, first=10)
    assert producers.check(7, 0, 0, 5) == (ErrorCode.NONE, 10)  # the retry
    assert producers.check(7, 0, 5, 5) == (ErrorCode.NONE, -1)  # the next batch
    assert producers.check(7, 0, 9, 1)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    producers.note(7, 1, 0, 1, first=20)
    assert producers.check(7, 0, 1, 1)[0] == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_fake_answers_idempotent_batches_as_the_broker_does(fake_kafka: FakeKafka) -> None:
    # The script the real broker answers in test_produce_model_conformance.py: before the
    # fake called the model's rules it refused a producer id with no state at sequence 7,
    # and took the resend of any batch but the last for a new one.
    fake_kafka.create_topic("idem", partitions=1)
    wrong = await play(fake_kafka.bootstrap, "idem")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_fake_plays_the_conformance_scripts_as_the_model_on_4_2_and_4_3() -> None:
    # 4.1 and 4.4 are played against real brokers by the differential suite.
    async def line(version: str) -> None:
        with FakeKafka(version) as fake:
            outcomes = await compare(fake.bootstrap, version, concurrency=50)
        wrong = [o.explain() for o in outcomes if not o.agrees]
        assert len(outcomes) >= 40 and not wrong, "\n".join(wrong)

    async with anyio.create_task_group() as tg:
        tg.start_soon(line, "4.2")
        tg.start_soon(line, "4.3")


def test_the_cli_runs_against_the_fake(
    fake_kafka: FakeKafka, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process (the fake serves from its own thread): as `sharecon ...` would.
    b = ("-b", fake_kafka.bootstrap)
    assert main(["topics", "create", "clitopic", "--partitions", "1", *b]) == 0
    fake_kafka.configure_group("cli", EARLIEST)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a:1\nb:2\n")))
    assert main(["produce", "clitopic", "--key-separator", ":", *b]) == 0
    capsys.readouterr()
    assert main(["consume", "clitopic", "-g", "cli", "--max", "2", "--json", *b]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["key"], r["value"], r["delivery_count"]) for r in rows] == [
        ("a", "1", 1),
        ("b", "2", 1),
    ]


async def test_fetch_reads_the_producers_batches_and_waits_for_more(fake_kafka: FakeKafka) -> None:
    await _records(fake_kafka, "log", 3)
    topic_id = fake_kafka.call(lambda c: c.topics["log"].topic_id)

    def fetch(offset: int, wait_ms: int) -> FetchRequest:
        return FetchRequest(
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=(
                FetchTopic(
                    topic="log",
                    topic_id=topic_id,
                    partitions=(
                        FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
        )

    host, _, port = fake_kafka.bootstrap.rpartition(":")
    async with anyio.create_task_group() as tg:
        conn = await open_connection(BrokerAddress(host, int(port)), ConnectionConfig(), tg)
        resp = await conn.request(fetch(1, 0))
        (part,) = resp.responses[0].partitions
        records = decode_records(part.records)
        assert part.high_watermark == 3
        assert [(r.offset, r.key, r.value) for r in records if r.offset >= 1] == [
            (1, b"k1", b"v1"),
            (2, b"k2", b"v2"),
        ]
        started = anyio.current_time()
        resp = await conn.request(fetch(3, 300))  # nothing new: it waits, then answers
        assert anyio.current_time() - started >= 0.25
        assert not resp.responses[0].partitions[0].records
        await conn.aclose()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_worker_runs_against_the_fake(fake_kafka: FakeKafka, tmp_path: Path) -> None:
    await _records(fake_kafka, "work", 40, partitions=2)
    fake_kafka.configure_group("workers", EARLIEST)
    args = ("--group", "workers", "--topic", "work", "--processes", "1", "--concurrency", "4")
    async with running_worker(
        fake_kafka.bootstrap, tmp_path, "tests.worker.handlers:record_id", *args
    ) as worker:
        await worker.wait_for("every record handled", lambda: len(counts(tmp_path)) == 40, 60)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    handled = counts(tmp_path)
    assert set(handled) == {f"v{i}" for i in range(40)}
    assert max(handled.values()) == 1


# -- documented limits (docs/testing.md, "FakeKafka") -----------------------------------------


async def test_limit_no_sasl_is_said_plainly(fake_kafka: FakeKafka) -> None:
    with pytest.raises(errors.IncompatibleBrokerError, match="SaslHandshake"):
        async with Admin(fake_kafka.bootstrap, sasl=SaslConfig("PLAIN", "u", "p")):
            pass


async def test_limit_one_node_and_no_broker_side_dlq(fake_kafka: FakeKafka) -> None:
    async with Admin(fake_kafka.bootstrap) as admin:
        with pytest.raises(errors.InvalidReplicationFactorError):
            await admin.create_topics(["replicated"], replication_factor=2)
        assert len((await admin.describe_cluster()).brokers) == 1
    # Kafka 4.4 finalizes share.version=2 (broker-side dead-letter queues); the fake
    # finalizes 1 on every line, so a client sees no broker DLQ.
    features = fake_kafka.call(lambda c: c._h18(None, 4, "", 0.0).finalized_features)
    assert {f.name: f.max_version_level for f in features}["share.version"] == 1
