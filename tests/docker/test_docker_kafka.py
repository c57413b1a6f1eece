"""Kafka in a container (``SHARECON_BROKER=docker``): it serves on loopback only, the
fixtures need no local Java, and a container that cannot start is an error."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import docker
import pytest

from sharecon.testing import BrokerStartError
from sharecon.testing.env import DockerKafka
from tests.testing.no_java import run_user_tests_without_java

if TYPE_CHECKING:
    from sharecon.testing.env import ClusterHandle

pytestmark = pytest.mark.broker

_LISTEN = "0A"  # TCP state in /proc/net/tcp*


def _listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket the process ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = fd.readlink().as_posix() if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != _LISTEN or fields[9] not in inodes:
                continue
            hex_addr, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_addr)
            # The kernel prints the address as 32-bit words in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return found


def test_the_container_listens_on_loopback_only(kafka_broker: ClusterHandle) -> None:
    assert isinstance(kafka_broker, DockerKafka)
    assert kafka_broker.container_id is not None
    client = docker.from_env()
    try:
        attrs = client.containers.get(kafka_broker.container_id).attrs
    finally:
        client.close()
    assert attrs["HostConfig"]["NetworkMode"] == "host"
    listening = _listening(attrs["State"]["Pid"])
    port = int(kafka_broker.bootstrap.rsplit(":", 1)[1])
    assert port in {p for _, p in listening}
    assert len(listening) >= 2  # the client listener and the controller's
    for address, _ in listening:
        assert address in {"127.0.0.1", "::ffff:127.0.0.1"}, listening


def test_fixtures_need_no_java_with_docker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_BROKER", "docker")
    monkeypatch.delenv("SHARECON_BOOTSTRAP", raising=False)
    result = run_user_tests_without_java(pytester, monkeypatch)
    result.assert_outcomes(passed=3)


def test_a_container_that_cannot_start_is_an_error() -> None:
    broker = DockerKafka(image="sharecon-test/no-such-image:0")
    with pytest.raises(BrokerStartError, match="could not start sharecon-test/no-such-image:0"):
        broker.start()
    assert not broker.running


def test_a_killed_session_leaves_no_container() -> None:
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from sharecon.testing.env import DockerKafka; "
            "print(DockerKafka().start().container_id, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        cid = owner.stdout.readline().strip()
    finally:
        owner.kill()  # SIGKILL: no atexit, no stop(); only the watchdog is left
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    assert cid, "the owner did not start a container"
    client = docker.from_env()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client.containers.get(cid)
            except docker.errors.NotFound:
                break
            assert time.monotonic() < deadline, f"container {cid[:12]} outlived its owner by 60 s"
            time.sleep(0.5)
    finally:
        client.close()
