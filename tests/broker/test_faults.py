"""Bad input and faults give a clear BrokerStartError, fast, and leave nothing running."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
from typing import TYPE_CHECKING

import pytest

from sharecon.errors import KafkaError
from sharecon.testing import DEFAULT_KAFKA_VERSION, BrokerStartError, KafkaBroker, provision
from sharecon.testing._provision import resolve_version

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.broker


def test_broker_start_error_is_a_kafka_error() -> None:
    assert issubclass(BrokerStartError, KafkaError)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("banana", "not a version number"),
        ("4.0.0", "Kafka 4.1 or newer"),
        ("3.9.1", "Kafka 4.1 or newer"),
        ("4.7", "names no patch release"),
        ("", "not a version number"),
    ],
)
def test_bad_versions_fail_before_any_work(version: str, message: str) -> None:
    with pytest.raises(BrokerStartError, match=message):
        KafkaBroker(version)


def test_version_lines_resolve_to_their_newest_patch() -> None:
    assert resolve_version("4.2") == "4.2.2"
    assert resolve_version("4.1.0") == "4.1.0"


def test_unknown_release_is_reported_by_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path))
    started = time.monotonic()
    with pytest.raises(BrokerStartError, match=r"Kafka 4\.9\.9 is not on Maven Central"):
        KafkaBroker("4.9.9").start()
    assert time.monotonic() - started < 120  # no retries for a definite "not found"
    assert not (tmp_path / "4.9.9" / "lib").exists()


def test_missing_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHARECON_JAVA", str(tmp_path / "no-java-here"))
    with pytest.raises(BrokerStartError, match="Java not found"):
        KafkaBroker().start()


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = _script(tmp_path / "java", "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    monkeypatch.setenv("SHARECON_JAVA", str(fake))
    with pytest.raises(BrokerStartError, match="Java 11; Kafka 4 needs Java 17"):
        KafkaBroker().start()


def test_missing_maven_on_a_cold_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SHARECON_MAVEN", str(tmp_path / "no-mvn-here"))
    with pytest.raises(BrokerStartError, match=r"Maven \('mvn'\) not found"):
        provision(DEFAULT_KAFKA_VERSION)


def test_maven_failure_shows_its_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mvn = _script(tmp_path / "mvn", "echo '[ERROR] settings.xml is broken here'\nexit 1\n")
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SHARECON_MAVEN", str(mvn))
    with pytest.raises(BrokerStartError, match="settings.xml is broken here"):
        provision(DEFAULT_KAFKA_VERSION)
    assert not (tmp_path / "cache" / DEFAULT_KAFKA_VERSION / "lib").exists()


def _copying_mvn(tmp_path: Path, fail_first: bool) -> Path:
    """A stand-in for Maven that copies real jars (and can fail once like a flaky network)."""
    real_lib = provision(DEFAULT_KAFKA_VERSION).lib
    calls = tmp_path / "calls"
    return _script(
        tmp_path / "mvn",
        f"""echo run >> {calls}
if [ {int(fail_first)} = 1 ] && [ "$(wc -l < {calls})" = 1 ]; then
  echo '[ERROR] Could not transfer artifact org.apache.kafka:kafka_2.13: Connection reset'; exit 1
fi
sleep 1
for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${{a#-DoutputDirectory=}}";; esac; done
mkdir -p "$out" && cp {real_lib}/*.jar "$out"/
""",
    )


def test_transient_maven_failure_is_retried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mvn = _copying_mvn(tmp_path, fail_first=True)
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SHARECON_MAVEN", str(mvn))
    install = provision(DEFAULT_KAFKA_VERSION)
    assert (install.lib / f"kafka_2.13-{DEFAULT_KAFKA_VERSION}.jar").is_file()
    assert (tmp_path / "calls").read_text().count("run") == 2
    # No staging leftovers next to the finished lib folder.
    assert sorted(p.name for p in install.home.iterdir()) == ["lib"]


def test_concurrent_provisioning_runs_maven_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mvn = _copying_mvn(tmp_path, fail_first=False)
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SHARECON_MAVEN", str(mvn))
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(provision(DEFAULT_KAFKA_VERSION)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 3
    assert (tmp_path / "calls").read_text().count("run") == 1


def test_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerStartError, match=f"port {port} on 127.0.0.1 is already in use"):
            KafkaBroker(port=port).start()


def test_broker_that_dies_during_start_shows_its_log() -> None:
    broker = KafkaBroker(extra_config={"group.share.heartbeat.interval.ms": "-5"})
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    message = str(info.value)
    assert "group.share.heartbeat.interval.ms" in message
    assert not broker.running


def test_jvm_that_exits_at_once_is_reported() -> None:
    broker = KafkaBroker(jvm_opts=["-Xmx1k"])
    with pytest.raises(BrokerStartError, match=r"exited with code \d+ during start"):
        broker.start()
    assert not broker.running


def test_start_timeout_is_bounded_and_kills_the_jvm() -> None:
    broker = KafkaBroker(start_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(BrokerStartError, match=r"did not serve on port \d+ within 0 s") as info:
        broker.start()
    assert time.monotonic() - started < 30
    assert "log " in str(info.value)
    assert not broker.running
    assert broker.pid is None


def test_no_stray_temp_dirs_after_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A temporary folder of its own: brokers of tests running alongside (pytest-xdist)
    # come and go in the shared one.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(BrokerStartError):
        KafkaBroker(jvm_opts=["-Xmx1k"]).start()
    assert tempfile.gettempdir() == str(tmp_path)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("sharecon-kafka-")]
