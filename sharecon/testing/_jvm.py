"""One Kafka node's JVM: format its storage, launch it, wait until it serves, stop or kill it.

Shared by :class:`~sharecon.testing.broker.KafkaBroker` (one combined node) and
:class:`~sharecon.testing.kafka_cluster.KafkaCluster` (a controller and several brokers).
Whatever way the Python process ends, the JVM goes with it: a watchdog process kills it
if its parent dies without stopping it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING

from sharecon.testing._provision import BrokerStartError, ClassArchive, KafkaInstall, tail

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

log = logging.getLogger("sharecon.testing")

STARTED_LINE = b"Kafka Server started"
STOP_TIMEOUT = 30.0
FORMAT_TIMEOUT = 120.0
DEFAULT_JVM_OPTS = [
    "-Xms128m",
    "-Xmx768m",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]

NODE_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {root}
rootLogger.appenderRef.out.ref = STDOUT
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
"""

# Kills the JVM if the Python process that started it dies without stopping it.
WATCHDOG = """\
import os, signal, sys, time
parent, jvm = int(sys.argv[1]), int(sys.argv[2])
while True:
    time.sleep(0.5)
    if os.getppid() != parent:
        try:
            os.killpg(jvm, signal.SIGKILL)
        except OSError:
            pass
        sys.exit(0)
"""


class PortTaken(Exception):
    """A port picked as free was taken by someone else before the JVM bound it."""


class NodeProcess:
    """The JVM, its watchdog and its folder: what must go however the node object ends."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.dir: Path | None = None
        self.archive: ClassArchive | None = None

    @property
    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self.proc is not None and self.proc.poll() is None

    def write_config(self, config: Mapping[str, str]) -> None:
        """Write ``server.properties`` and the log4j settings into the node's folder."""
        assert self.dir is not None
        root_level = os.environ.get("SHARECON_BROKER_LOG_LEVEL", "WARN")
        (self.dir / "log4j2.properties").write_text(NODE_LOG4J.format(root=root_level))
        (self.dir / "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in config.items())
        )

    def format(
        self,
        java: str,
        install: KafkaInstall,
        cluster_id: str,
        *,
        features: Mapping[str, int] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """``kafka-storage format`` of the node's folder for ``cluster_id``."""
        assert self.dir is not None
        cmd = [
            java,
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            *(self.archive.jvm_flags(dump=False) if self.archive else []),
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            install.classpath,
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.dir / "server.properties"),
        ]
        for name, level in (features or {}).items():
            cmd += ["--feature", f"{name}={level}"]
        cmd += list(extra_args)
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=FORMAT_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerStartError(
                f"formatting Kafka {install.version} storage took over {FORMAT_TIMEOUT:.0f} s"
            ) from exc
        except OSError as exc:
            raise BrokerStartError(f"could not run {java}: {exc}") from exc
        if done.returncode != 0:
            raise BrokerStartError(
                f"formatting Kafka {install.version} storage failed (exit {done.returncode}):\n"
                + tail(done.stdout + done.stderr)
            )

    def launch(
        self,
        java: str,
        jvm_opts: Sequence[str],
        install: KafkaInstall,
        plugins: Sequence[str] = (),
    ) -> int:
        """Start the JVM (not waiting); returns where its log was before, for :meth:`wait_ready`.

        :param plugins: classpath entries after Kafka's own (a class archive is used but
            never written with them: it must match Kafka's classpath alone)."""
        assert self.dir is not None
        log_file = self.dir / "broker.log"
        offset = log_file.stat().st_size if log_file.exists() else 0
        cmd = [
            java,
            *jvm_opts,
            *(self.archive.jvm_flags(dump=not plugins) if self.archive else []),
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            os.pathsep.join([install.classpath, *plugins]),
            "kafka.Kafka",
            str(self.dir / "server.properties"),
        ]
        with open(log_file, "ab") as out:
            try:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: killpg reaches only the JVM
                )
            except OSError as exc:
                raise BrokerStartError(f"could not run {java}: {exc}") from exc
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", WATCHDOG, str(os.getpid()), str(self.proc.pid)],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return offset

    def wait_ready(
        self,
        offset: int,
        *,
        port: int,
        what: str,
        started: float,
        timeout: float,
        ports_fixed: bool,
    ) -> None:
        """Wait until the node logged that it started and ``port`` accepts connections.

        :raises PortTaken: the JVM could not bind a port that was picked as free.
        :raises BrokerStartError: it exited, or did not serve ``timeout`` s after ``started``.
        """
        proc = self.proc
        assert proc is not None and self.dir is not None
        log_file = self.dir / "broker.log"
        deadline = started + timeout
        seen_line = False
        while True:
            code = proc.poll()
            text = read_from(log_file, offset)
            if code is not None:
                detail = tail(text.decode(errors="replace"))
                if b"Address already in use" in text or b"BindException" in text:
                    if not ports_fixed:
                        raise PortTaken(f"a port was taken while starting {what}:\n{detail}")
                    raise BrokerStartError(f"{what} could not bind its ports:\n{detail}")
                raise BrokerStartError(
                    f"{what} exited with code {code} during start; log {log_file}:\n{detail}"
                )
            seen_line = seen_line or STARTED_LINE in text
            # A broker's listeners open only once it is unfenced and caught up.
            if seen_line and can_connect(port):
                return
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"{what} did not serve on port {port} within {timeout:.0f} s; log {log_file}:\n"
                    + tail(text.decode(errors="replace"))
                )
            time.sleep(0.1)

    def stop_jvm(self, *, graceful: bool) -> None:
        """SIGTERM (then SIGKILL after 30 s) or SIGKILL the JVM; stop the watchdog."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                proc.wait(timeout=STOP_TIMEOUT if graceful else 10.0)
            except subprocess.TimeoutExpired:
                log.warning(
                    "Kafka pid %d ignored SIGTERM for %.0f s; killing it", proc.pid, STOP_TIMEOUT
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10.0)
                graceful = False
            if self.archive is not None:
                # A JVM that exits normally (SIGTERM included) dumps the archive it was asked for.
                self.archive.after_exit(graceful)
        elif proc is not None:
            proc.wait()
            if self.archive is not None:
                self.archive.after_exit(False)
        dog, self.watchdog = self.watchdog, None
        if dog is not None:
            dog.kill()
            dog.wait()

    def cleanup(self) -> None:
        """Kill the JVM and remove the folder (kept with ``SHARECON_KEEP_BROKER_DIR``)."""
        self.stop_jvm(graceful=False)
        folder, self.dir = self.dir, None
        if folder is not None:
            if os.environ.get("SHARECON_KEEP_BROKER_DIR"):
                log.warning("keeping broker folder %s (SHARECON_KEEP_BROKER_DIR)", folder)
            else:
                shutil.rmtree(folder, ignore_errors=True)


def minor(version: str) -> int:
    """``"4.3.1"`` -> 3."""
    return int(version.split(".")[1])


def new_cluster_id() -> str:
    """A random KRaft cluster id (22 base64url characters)."""
    # Kafka's Uuid.randomUuid() never starts with '-' so the id cannot look like a flag.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 right now (all held open while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def can_connect(port: int) -> bool:
    """Whether 127.0.0.1:``port`` accepts a TCP connection."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def read_from(path: Path, offset: int) -> bytes:
    """The file's bytes from ``offset`` on (empty if it does not exist yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read()
    except FileNotFoundError:
        return b""
