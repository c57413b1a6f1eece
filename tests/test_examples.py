"""The programs in ``examples/`` run as documented against a real broker.

``examples/consume.py``: every record is printed once with delivery count 1, the poison
record is rejected (archived) rather than redelivered, and Ctrl-C (SIGINT) closes the
consumer cleanly, so afterwards the group has nothing left to deliver but new records.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer

if TYPE_CHECKING:
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
        metas = [await producer.send(topic, v) for v in values]
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
        marker = await producer.send(topic, b"marker")
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
