"""examples/faststream_app.py against a real broker, as its docstring runs it: typed orders
billed once each with an invoice published, a bad order delivered three times and then
dead-lettered, and Ctrl-C ending the service cleanly (exit 0, no traceback)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sharecon import Producer, ShareConsumer

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^order (?P<id>-?\d+) \(delivery (?P<dc>\d+)\)$")
DEADLINE = 120


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _read(group: str, topic: str, bootstrap: str, count: int) -> list[bytes]:
    out: list[bytes] = []
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.fail_after(DEADLINE):
            async for record in consumer:
                assert record.value is not None
                out.append(record.value)
                if len(out) == count:
                    break
    return out


async def test_example_service_bills_dead_letters_and_stops_cleanly(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    share_group_factory: ShareGroupFactory,
    tmp_path: Path,
) -> None:
    orders, invoices = topic_factory(), topic_factory()
    group = share_group_factory()
    # The example as printed, with this test's own topic and group names.
    source = (ROOT / "examples" / "faststream_app.py").read_text()
    for name, new in (('"orders"', orders), ('"invoices"', invoices), ('"billing"', group)):
        assert name in source
        source = source.replace(name, f'"{new}"')
    app = tmp_path / "faststream_app.py"
    app.write_text(source)

    good = [{"id": i, "total": i + 0.5} for i in range(1, 6)]
    async with Producer(kafka_bootstrap) as producer:
        for order in [*good, {"id": 99, "total": -1}]:
            await producer.send_and_wait(orders, json.dumps(order).encode())

    env = {**os.environ, "SHARECON_BOOTSTRAP": kafka_bootstrap, "PYTHONUNBUFFERED": "1"}
    printed: list[tuple[int, int]] = []
    async with await anyio.open_process([sys.executable, str(app)], env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        try:
            with anyio.fail_after(DEADLINE):
                while len(printed) < len(good) + 3:
                    text = (await lines.receive_until(b"\n", 1 << 16)).decode()
                    if m := LINE.match(text):
                        printed.append((int(m["id"]), int(m["dc"])))
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            await proc.wait()
            err = await proc.stderr.receive()
            pytest.fail(f"the example printed {printed} then: {err.decode(errors='replace')}")
        dead = await _read(share_group_factory(), f"dlq.{group}", kafka_bootstrap, 1)
        proc.send_signal(signal.SIGINT)  # FastStream treats Ctrl-C as a normal stop
        with anyio.fail_after(60):
            code = await proc.wait()
        rest = bytearray()
        async for chunk in proc.stderr:
            rest += chunk
    err_text = rest.decode(errors="replace")
    assert code == 0, err_text
    assert "Traceback" not in err_text, err_text

    assert sorted(printed) == sorted([(o["id"], 1) for o in good] + [(99, 1), (99, 2), (99, 3)])
    assert [json.loads(v) for v in dead] == [{"id": 99, "total": -1}]
    billed = [
        json.loads(v) for v in await _read(share_group_factory(), invoices, kafka_bootstrap, 5)
    ]
    assert sorted(billed, key=lambda b: b["order"]) == [
        {"order": o["id"], "amount": o["total"]} for o in good
    ]
