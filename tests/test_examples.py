"""The programs in ``examples/`` and the guide run as documented against a real broker.

``examples/consume.py``: every record is printed once with delivery count 1, the poison
record is rejected (archived) rather than redelivered, and Ctrl-C (SIGINT) closes the
consumer cleanly, so afterwards the group has nothing left to deliver but new records.

``examples/worker.py``: two worker processes print each good record once, a failing one
is dead-lettered on its third delivery, and Ctrl-C drains (exit 0).

``docs/consumer.md``: its snippets import only names that exist, and its setup and
poll/commit programs run as printed.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^(?P<topic>\S+)-(?P<partition>\d+)@(?P<offset>\d+) \(delivery (?P<dc>\d+)\)$")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_consume_example_answers_every_record_and_rejects_poison(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    values = [b"order-%d" % i for i in range(8)]
    values[3] = b"poison"
    async with Producer(kafka_bootstrap) as producer:
        metas = [await producer.send_and_wait(topic, v) for v in values]
    offsets = [m.offset for m in metas]
    poison_offset = offsets[3]

    env = {**os.environ, "SHARECON_BOOTSTRAP": kafka_bootstrap, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, str(ROOT / "examples" / "consume.py"), topic, share_group]
    printed: list[tuple[int, int]] = []
    async with await anyio.open_process(cmd, env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        try:
            with anyio.fail_after(60):
                while len(printed) < len(values):
                    text = (await lines.receive_until(b"\n", 1 << 16)).decode()
                    m = LINE.match(text)
                    assert m, f"unexpected output line {text!r}"
                    assert m["topic"] == topic and m["partition"] == "0"
                    printed.append((int(m["offset"]), int(m["dc"])))
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            await proc.wait()
            err = await proc.stderr.receive()
            pytest.fail(f"consume.py printed {printed} then: {err.decode(errors='replace')}")
        proc.send_signal(signal.SIGINT)  # the example treats Ctrl-C as a normal stop
        with anyio.fail_after(30):
            code = await proc.wait()
        rest = (await _drain(proc.stderr)).decode(errors="replace")
    assert code == 0, rest
    assert "Traceback" not in rest, rest

    # Each record once, first delivery, in offset order (one partition), poison included.
    assert printed == [(o, 1) for o in offsets]

    # Nothing comes back: the accepted records are done and the poison one is archived.
    async with Producer(kafka_bootstrap) as producer:
        marker = await producer.send_and_wait(topic, b"marker")
    async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as again:
        with anyio.fail_after(30):
            record = await again.__anext__()
        assert (record.offset, record.value) == (marker.offset, b"marker")
        assert record.offset > poison_offset


async def _drain(stream: anyio.abc.ByteReceiveStream) -> bytes:
    out = bytearray()
    try:
        while True:
            out += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        pass
    return bytes(out)


# -- docs/consumer.md ------------------------------------------------------------------------

GUIDE = ROOT / "docs" / "consumer.md"


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def test_consumer_guide_snippets_use_only_existing_names() -> None:
    """Every Python block of the guide parses, and every ``from sharecon... import`` name
    exists (a renamed API fails here, not in a reader's terminal)."""
    blocks = _python_blocks(GUIDE)
    assert len(blocks) >= 6
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sharecon"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


def _guide_program(index: int, bootstrap: str, topic: str, group: str) -> str:
    block = _python_blocks(GUIDE)[index]
    return (
        block.replace('"localhost:9092"', repr(bootstrap))
        .replace('"invoices"', repr(topic))
        .replace('"billing"', repr(group))
    )


async def test_consumer_guide_setup_then_poll_and_commit(kafka_bootstrap: str) -> None:
    """The guide's first program (topic, group config, 20 records) and its poll/commit
    program run as printed: the polled records are all accepted by the broker."""
    topic, group = f"guide-{uuid.uuid4().hex[:8]}", f"guide-{uuid.uuid4().hex[:8]}"
    blocks = _python_blocks(GUIDE)
    setup = next(i for i, b in enumerate(blocks) if "alter_group_config" in b)
    commit = next(
        i for i, b in enumerate(blocks) if "await consumer.commit()" in b and "poll(" in b
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    outputs = []
    for index in (setup, commit):
        program = _guide_program(index, kafka_bootstrap, topic, group)
        with anyio.fail_after(90):
            done = await anyio.run_process([sys.executable, "-c", program], env=env, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        outputs.append(done.stdout.decode())
    out = outputs[1]
    polled = re.match(r"(\d+) records\n", out)
    # poll() returns what is buffered (one or more fetches' worth), at least one record.
    assert polled and 1 <= int(polled.group(1)) <= 20, out
    # The callback sees every answer: the polled records accepted by commit(), and those
    # fetched but never polled, released at close. None failed.
    answered = sum(int(n) for n in re.findall(r": (\d+) offsets answered", out))
    assert int(polled.group(1)) <= answered <= 20, out
    verdicts = re.findall(rf"^{topic} (\d) (\S+)", out, flags=re.M)
    assert verdicts and all(v == "accepted" for _, v in verdicts), out
    assert "failed" not in out, out


async def test_consumer_guide_serializers_program(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """The Serializers program runs as printed: JSON in and out, and a record that is not
    JSON (written first, by a plain producer) is reported while the loop goes on."""
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap) as producer:
        poison = await producer.send_and_wait(topic, b"not json", key=b"customer-1")
    block = next(i for i, b in enumerate(_python_blocks(GUIDE)) if "json_serializer()" in b)
    program = _guide_program(block, kafka_bootstrap, topic, share_group)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with anyio.fail_after(90):
        done = await anyio.run_process([sys.executable, "-c", program], env=env, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    lines = done.stdout.decode().splitlines()
    good = [line for line in lines if not line.startswith("not JSON:")]
    bad = [line for line in lines if line.startswith("not JSON:")]
    assert good == ["customer-7 12.5", "customer-9 3.0"], lines
    assert bad and set(bad) == {f"not JSON: {topic} 0 {poison.offset} value"}, lines


# -- examples/worker.py ----------------------------------------------------------------------


async def test_worker_example_handles_each_record_once_and_dead_letters_failures(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: Callable[..., str]
) -> None:
    """Two processes print every good record once; the failing one ends in dlq.GROUP after
    three deliveries; Ctrl-C drains and exits 0."""
    topic = topic_factory(3)
    group = share_group_factory()
    values = [f"order-{i}" for i in range(20)] + ["fail-1"]
    async with Producer(kafka_bootstrap) as producer:
        for v in values:
            await producer.send(topic, v.encode(), key=v.encode())
    # PYTHONPATH: this checkout's sharecon, whatever the interpreter has installed.
    env = {
        **os.environ,
        "SHARECON_BOOTSTRAP": kafka_bootstrap,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
    }
    cmd = [sys.executable, str(ROOT / "examples" / "worker.py"), topic, group]
    printed: list[str] = []
    reader = share_group_factory()
    async with await anyio.open_process(cmd, env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        try:
            with anyio.fail_after(90):
                while len(printed) < 20:
                    printed.append((await lines.receive_until(b"\n", 1 << 16)).decode())
            async with ShareConsumer(
                kafka_bootstrap, group_id=reader, topics=[f"dlq.{group}"]
            ) as dlq:
                with anyio.fail_after(90):
                    dead = await dlq.__anext__()
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            await proc.wait()
            err = await _drain(proc.stderr)
            pytest.fail(f"worker.py printed {printed} then: {err.decode(errors='replace')}")
        proc.send_signal(signal.SIGINT)
        with anyio.fail_after(60):
            code = await proc.wait()
        rest = (await _drain(proc.stderr)).decode(errors="replace")
    assert code == 0, rest
    assert "Traceback" not in rest, rest
    assert "drained" in rest, rest
    seen = sorted(line.split()[1] for line in printed)
    assert seen == sorted(values[:-1])
    assert all("delivery 1)" in line for line in printed), printed
    assert dead.value == b"fail-1"
