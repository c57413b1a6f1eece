"""KafkaBroker's own life: stop, kill, restart, async use, the CLI, and cleanup on every exit path."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from sharecon.testing import KafkaBroker
from sharecon.testing.probe import share_support

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = pytest.mark.broker


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _current_pid(broker: KafkaBroker) -> int | None:
    return broker.pid


def test_kill_and_restart_keep_data_and_port(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(shared=False)
    bootstrap, pid = broker.bootstrap, broker.pid
    assert pid is not None
    broker.tools.create_topic("survivor", 2)

    broker.kill()
    assert _current_pid(broker) is None
    assert _wait_until(lambda: not _pid_alive(pid), 10)
    assert not _port_open(broker.port)

    broker.restart()
    assert _current_pid(broker) not in (None, pid)
    assert broker.bootstrap == bootstrap
    assert "survivor" in broker.tools.list_topics()

    broker.restart()  # graceful this time
    assert broker.bootstrap == bootstrap
    assert broker.tools.topic_partitions("survivor") == 2


def test_stop_ends_the_jvm_and_removes_the_folder() -> None:
    broker = KafkaBroker()
    with broker:
        folder, pid, port = broker.data_dir, broker.pid, broker.port
        assert folder.is_dir() and broker.log_path.is_file()
    assert pid is not None
    assert not _pid_alive(pid)
    assert not folder.exists()
    assert not _port_open(port)
    broker.stop()  # idempotent


@pytest.mark.anyio
async def test_async_context_manager_and_feature_pin() -> None:
    """Also: ``features`` pins share.version (4.4 would default to 2)."""
    async with KafkaBroker("4.4.0", features={"share.version": 1}) as broker:
        support = share_support(broker.bootstrap)
        assert support.share_version == 1
        assert support.share_version_max == 2
        pid = broker.pid
    assert pid is not None and not _pid_alive(pid)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sharecon.testing.broker", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()  # bounded by the broker's own start timeout
    if not line:
        proc.kill()
        pytest.fail(f"CLI printed no bootstrap address: {proc.communicate(timeout=30)[1]}")
    return proc, line


def test_cli_prints_bootstrap_and_stops_on_ctrl_c() -> None:
    proc, bootstrap = _start_cli()
    port = int(bootstrap.rpartition(":")[2])
    try:
        assert bootstrap.startswith("127.0.0.1:")
        assert share_support(bootstrap).enabled
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in err
    assert not _port_open(port)


def test_jvm_dies_with_a_killed_python_process() -> None:
    """The watchdog ends the broker even when its Python parent gets SIGKILL."""
    proc, bootstrap = _start_cli()
    port = int(bootstrap.rpartition(":")[2])
    assert _port_open(port)
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_until(lambda: not _port_open(port), 15), "broker outlived its parent"


def test_cli_rejects_bad_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sharecon.testing.broker", "--version", "3.9.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Kafka 4.1 or newer" in done.stderr
