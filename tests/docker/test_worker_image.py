"""The image for an application run by ``sharecon worker`` (``sharecon.testing.app_image``):
built with the local engine from Debian's Python and the sharecon wheel, run against the
test broker; it handles every record, its health endpoints answer from the host (200, then
``503 draining`` once ``docker stop`` sends SIGTERM), and it drains to exit 0."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import Admin, Producer, ProducerRecord
from sharecon.testing.app_image import build_worker_image

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
TAG = "sharecon/worker-app:test"


@pytest.fixture(scope="module")
def worker_image() -> str:
    return build_worker_image([ROOT / "examples" / "worker.py"], tag=TAG)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str] | None:
    """``GET http://127.0.0.1:PORT/PATH`` from the host: (status, body), or None when
    nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return None


async def _lag(bootstrap: str, group: str) -> int | None:
    async with Admin(bootstrap) as admin:
        offsets = await admin.describe_share_group_offsets(group)
    lags = [o.lag for o in offsets.values()]
    return None if not lags or min(lags) < 0 else sum(lags)


def test_the_image_runs_the_worker_and_drains_on_stop(
    worker_image: str, kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(2)
    n = 40
    values = [f"order-{i}" for i in range(n)]

    async def feed() -> None:
        async with Producer(kafka_bootstrap) as producer:
            await producer.send_batch(
                [ProducerRecord(topic, v.encode(), partition=i % 2) for i, v in enumerate(values)]
            )

    anyio.run(feed)
    name = f"sharecon-worker-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    subprocess.run(
        [
            "docker", "run", "-d", "--name", name, "--network", "host", worker_image,
            "worker.py:handle", "-b", kafka_bootstrap, "-g", share_group, "-t", topic,
            "--processes", "2", "--concurrency", "4", "--grace", "10",
            "--health-port", str(port),
        ],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            logs = subprocess.run(
                ["docker", "logs", name], capture_output=True, text=True, timeout=30
            ).stdout
            handled = {line.split()[1] for line in logs.splitlines() if "@" in line}
            if handled >= set(values) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert handled == set(values)
        # The probes, from the host (host networking: the container's loopback is ours).
        deadline = time.monotonic() + 30
        while (ready := _get(port, "/readyz")) is None or ready[0] != 200:
            assert time.monotonic() < deadline, (ready, logs)
            time.sleep(0.2)
        assert ready[1].startswith("ready: 2 of 2 consumers healthy"), ready
        assert _get(port, "/healthz") == (200, "live: 2 of 2 processes running\n")
        # docker stop sends SIGTERM: /readyz says draining until the worker is gone.
        stopped: list[subprocess.CompletedProcess[bytes]] = []
        stopper = threading.Thread(
            target=lambda: stopped.append(
                subprocess.run(
                    ["docker", "stop", "-t", "30", name], capture_output=True, timeout=60
                )
            )
        )
        stopper.start()
        during: list[tuple[int, str]] = []
        while stopper.is_alive():
            answer = _get(port, "/readyz")
            if answer is not None and answer[0] != 200:
                during.append(answer)
            time.sleep(0.02)
        stopper.join()
        assert stopped and stopped[0].returncode == 0
        assert during and set(during) == {(503, "draining\n")}, during
        state = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.ExitCode}}", name],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        assert state.stdout.strip() == "0"  # drained: every member left, nothing held
        assert anyio.run(_lag, kafka_bootstrap, share_group) == 0
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
