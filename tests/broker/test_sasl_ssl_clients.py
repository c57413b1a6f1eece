"""Every client over SASL_SSL (SCRAM-SHA-256 over TLS) against a real broker.

``ShareConsumer`` with ``async for``, ``process()`` with a ``DeadLetterPolicy``,
``reject_to_dlq``, the worker and the CLI, each counting records: nothing lost, each
delivered as often as expected. One SASL_SSL broker for the module, the one the session's
other SASL_SSL tests (tests/broker/test_security_client.py, tests/cli) share.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon._net.sasl import SaslConfig
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy, dead_letter_info
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing import SaslSetup
from tests.worker._harness import counts, running_worker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from sharecon.record import Record
    from sharecon.testing import KafkaBroker
    from sharecon.testing.pytest_plugin import BrokerPool

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

# The settings of tests/broker/test_security_client.py's SASL_SSL broker: a full run
# starts it once for all of them.
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISM = "SCRAM-SHA-256"
SASL = SaslConfig(MECHANISM, "alice", USERS["alice"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def secure(kafka_broker_pool: BrokerPool) -> KafkaBroker:
    """The SASL_SSL broker (clients reach only its SASL_SSL listener in these tests)."""
    broker = kafka_broker_pool.get(sasl=SaslSetup(mechanisms=(MECHANISM,), users=USERS), tls=True)
    assert broker.tls_ca_file is not None
    return broker  # type: ignore[return-value]


def tls(broker: KafkaBroker) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(broker.tls_ca_file))


def secured(broker: KafkaBroker) -> dict[str, object]:
    """Keyword arguments every client takes for this broker's SASL_SSL listener."""
    return {"ssl_context": tls(broker), "sasl": SASL}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def new_topic_and_group(broker: KafkaBroker, partitions: int = 1) -> tuple[str, str]:
    """A topic and a share group reading from the earliest offset, made over SASL_SSL."""
    topic, group = unique("sasl-ssl"), unique("g")
    async with Admin(broker.bootstrap, **secured(broker)) as admin:  # type: ignore[arg-type]
        await admin.create_topics([topic], num_partitions=partitions)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    return topic, group


async def produce(broker: KafkaBroker, topic: str, values: list[bytes]) -> None:
    async with Producer(broker.bootstrap, **secured(broker)) as producer:  # type: ignore[arg-type]
        metas = await producer.send_batch(ProducerRecord(topic, v, key=v) for v in values)
    assert len(metas) == len(values)


async def until(check: Callable[[], bool], timeout: float) -> None:
    with anyio.fail_after(timeout):
        while True:
            if check():
                return
            await anyio.sleep(0.05)


async def read_all(broker: KafkaBroker, topic: str, n: int) -> list[Record]:
    """``n`` records of ``topic`` through a fresh group, then a short wait for any extra."""
    group = unique("reader")
    async with Admin(broker.bootstrap, **secured(broker)) as admin:  # type: ignore[arg-type]
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    out: list[Record] = []
    async with ShareConsumer(
        broker.bootstrap,
        group_id=group,
        topics=[topic],
        **secured(broker),  # type: ignore[arg-type]
    ) as consumer:
        with anyio.fail_after(30):
            async for record in consumer:
                out.append(record)
                if len(out) == n:
                    break
        await consumer.commit()  # accepts the record in hand after the break
        out.extend(await consumer.poll(0.5))
    return out


async def test_async_for_gets_every_record_once(secure: KafkaBroker) -> None:
    topic, group = await new_topic_and_group(secure, partitions=3)
    values = [f"r{i}".encode() for i in range(60)]
    await produce(secure, topic, values)
    seen: list[tuple[bytes | None, int]] = []
    async with ShareConsumer(
        secure.bootstrap,
        group_id=group,
        topics=[topic],
        **secured(secure),  # type: ignore[arg-type]
    ) as consumer:
        with anyio.fail_after(30):
            async for record in consumer:
                seen.append((record.value, record.delivery_count))
                if len(seen) == len(values):
                    break
        await consumer.commit()  # accepts the record in hand after the break
        assert await consumer.poll(0.5) == []  # nothing more, nothing twice
    assert sorted(seen) == sorted((v, 1) for v in values)


async def test_process_with_a_dead_letter_policy_and_reject_to_dlq(secure: KafkaBroker) -> None:
    """process(): good records accepted on their first delivery; a record that always fails
    goes to the dead-letter topic on its 2nd (max_deliveries=2). Then reject_to_dlq of an
    explicit consumer. Nothing lost: every record is handled or dead-lettered once."""
    topic, group = await new_topic_and_group(secure)
    dlq = unique("dlq")
    values = [b"bad-1", *(f"ok-{i}".encode() for i in range(20)), b"bad-2"]
    await produce(secure, topic, values)
    handled: list[tuple[bytes | None, int]] = []

    async def handler(record: Record) -> None:
        handled.append((record.value, record.delivery_count))
        if (record.value or b"").startswith(b"bad"):
            raise ValueError("cannot parse")

    def done() -> bool:
        ok = sum(1 for v, _ in handled if (v or b"").startswith(b"ok"))
        bad = sum(1 for v, _ in handled if (v or b"").startswith(b"bad"))
        return ok == 20 and bad == 4

    policy = DeadLetterPolicy(topic=dlq, max_deliveries=2)
    async with ShareConsumer(
        secure.bootstrap,
        group_id=group,
        topics=[topic],
        dead_letter=policy,
        **secured(secure),  # type: ignore[arg-type]
    ) as consumer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.process, handler)
            await until(done, 45)
            copies = await read_all(secure, dlq, 2)  # routed while process() runs on
            assert consumer.health().ok
            tg.cancel_scope.cancel()
    assert sorted(v for v, dc in handled if dc == 1) == sorted(values)
    assert sorted(v for v, dc in handled if dc == 2) == [b"bad-1", b"bad-2"]
    assert sorted(c.value for c in copies) == [b"bad-1", b"bad-2"]  # type: ignore[type-var]
    for copy in copies:
        info = dead_letter_info(copy.headers)
        assert info is not None and info.delivery_count == 2 and info.topic == topic

    # reject_to_dlq over SASL_SSL: the copy is written, the original archived.
    topic2, group2 = await new_topic_and_group(secure)
    await produce(secure, topic2, [b"keep", b"poison"])
    async with ShareConsumer(
        secure.bootstrap,
        group_id=group2,
        topics=[topic2],
        ack_mode="explicit",
        **secured(secure),  # type: ignore[arg-type]
    ) as explicit:
        got: list[bytes | None] = []
        with anyio.fail_after(30):
            while len(got) < 2:
                for record in await explicit.poll(5):
                    got.append(record.value)
                    if record.value == b"poison":
                        assert (
                            await explicit.reject_to_dlq(record, reason="poison", topic=dlq)
                            is not None
                        )
                    else:
                        explicit.acknowledge(record)
        results = await explicit.commit()
        assert all(err is None for err in results.values()), results
    assert sorted(got) == [b"keep", b"poison"]  # type: ignore[type-var]
    later = await read_all(secure, dlq, 3)
    assert sorted(c.value for c in later) == [b"bad-1", b"bad-2", b"poison"]  # type: ignore[type-var]


async def test_worker_handles_every_record_once(secure: KafkaBroker, tmp_path: Path) -> None:
    """The worker over SASL_SSL from SHARECON_* variables: its processes get the password
    on stdin (not in their environment) and handle every record exactly once."""
    topic, group = await new_topic_and_group(secure, partitions=2)
    values = [f"w{i}" for i in range(40)]
    await produce(secure, topic, [v.encode() for v in values])
    env = {
        "SHARECON_TLS_CA": str(secure.tls_ca_file),
        "SHARECON_SASL_MECHANISM": MECHANISM,
        "SHARECON_SASL_USERNAME": "alice",
        "SHARECON_SASL_PASSWORD": USERS["alice"],
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        args = ("--group", group, "--topic", topic, "--processes", "2")
        async with running_worker(
            secure.bootstrap, tmp_path, "tests.worker.handlers:record_id", *args
        ) as worker:
            await worker.wait_for("every record", lambda: len(counts(tmp_path)) == 40, 60)
            code = await worker.terminate()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert code == 0, worker.stderr
    handled = counts(tmp_path)
    assert set(handled) == set(values) and max(handled.values()) == 1
    assert USERS["alice"] not in worker.stderr


def test_cli_produce_then_consume(secure: KafkaBroker) -> None:
    """`sharecon produce` and `sharecon consume` over SASL_SSL: every line comes back once."""
    topic = unique("cli")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    env |= {
        "SHARECON_BOOTSTRAP": secure.bootstrap,
        "SHARECON_TLS_CA": str(secure.tls_ca_file),
        "SHARECON_SASL_MECHANISM": MECHANISM,
        "SHARECON_SASL_USERNAME": "bob",
        "SHARECON_SASL_PASSWORD": USERS["bob"],
    }

    def run(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        cmd = [sys.executable, "-m", "sharecon.cli", *args]
        return subprocess.run(cmd, input=data, capture_output=True, env=env, timeout=90)

    assert run("topics", "create", topic).returncode == 0
    lines = [f"line-{i}" for i in range(50)]
    produced = run("produce", topic, data="".join(f"{x}\n" for x in lines).encode())
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", topic, "-g", unique("g"), "--earliest", "--max", "50", "--value-only")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.decode().split()) == sorted(lines)
    again = run("consume", topic, "-g", unique("g"), "--earliest", "--max", "50", "--json")
    assert again.returncode == 0 and again.stdout.count(b'"delivery_count": 1') == 50
    assert USERS["bob"].encode() not in produced.stderr + consumed.stderr
