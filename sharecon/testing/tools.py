"""Kafka's own Java command-line tools, run with ``java -cp`` against any cluster.

Tests use these to arrange what sharecon's client cannot do yet (create topics, set share
group configs, produce records, read the finalized features). Each call starts a JVM
(about 1.5-2.5 s here), so fixtures call them once per test at most.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharecon.errors import KafkaError
from sharecon.testing._provision import ClassArchive, KafkaInstall, find_java, provision, tail

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

__all__ = ["FeatureLevel", "KafkaToolError", "KafkaTools", "ProduceResult"]

log = logging.getLogger("sharecon.testing")

_TOOL_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""
# Short-lived JVMs: C1 only and one GC thread start faster; the class archive does the most.
_QUICK_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
_PERF_JVM = ["-Xmx512m", "-XX:+UseSerialGC"]

_TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
_FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
_PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
_CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
_SHARE_CONSUMER_PERF = "org.apache.kafka.tools.ShareConsumerPerformance"
_ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
_SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
# ConfigCommand moved from core (Scala) to kafka-tools in 4.4.
_CONFIG_COMMANDS = ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")


class KafkaToolError(KafkaError):
    """A Kafka Java tool failed or timed out; the message holds the command and its output."""


@dataclass(frozen=True, slots=True)
class FeatureLevel:
    """One row of ``kafka-features describe``. Levels are strings: metadata.version is ``4.4-IV2``."""

    name: str
    supported_min: str
    supported_max: str
    finalized: str


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """What a bulk write reported: ``kafka-producer-perf-test``, or sharecon's Producer."""

    records: int
    records_per_sec: float
    elapsed: float  #: seconds, measured around the whole write (a JVM start included)


class KafkaTools:
    """Runs Kafka's Java tools from a provisioned install against ``bootstrap``.

    :param bootstrap: ``host:port`` of a PLAINTEXT listener.
    :param install: the jars to run; by default those of ``version`` (fetched if needed).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        version: str | None = None,
        install: KafkaInstall | None = None,
    ) -> None:
        if install is None:
            from sharecon.testing._provision import DEFAULT_KAFKA_VERSION

            install = provision(version or DEFAULT_KAFKA_VERSION)
        self.bootstrap = bootstrap
        self.install = install
        self._java = find_java()
        self._log4j = _ensure_tool_log4j(install.home)
        self._archive = ClassArchive(install, self._java, "tools")

    def __repr__(self) -> str:
        return f"KafkaTools({self.bootstrap!r}, version={self.install.version!r})"

    def run(
        self,
        main_class: str,
        *args: str,
        timeout: float = 120.0,
        input: str | None = None,
        perf: bool = False,
    ) -> str:
        """Run ``main_class`` with ``args``; return its stdout.

        :raises KafkaToolError: non-zero exit or timeout.
        """
        cmd = [
            self._java,
            *(_PERF_JVM if perf else _QUICK_JVM),
            *self._archive.jvm_flags(),
            f"-Dlog4j2.configurationFile={self._log4j}",
            "-cp",
            self.install.classpath,
            main_class,
            *args,
        ]
        short = f"{main_class.rsplit('.', 1)[-1]} {' '.join(args)}"
        log.debug("running %s", short)
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            self._archive.after_exit(False)
            out = exc.stderr if isinstance(exc.stderr, str) else ""
            raise KafkaToolError(
                f"{short} did not finish within {timeout:.0f} s\n{tail(out)}"
            ) from exc
        except OSError as exc:
            self._archive.after_exit(False)
            raise KafkaToolError(f"could not run {self._java}: {exc}") from exc
        self._archive.after_exit(done.returncode == 0)
        if done.returncode != 0:
            raise KafkaToolError(
                f"{short} exited with {done.returncode}\n{tail(done.stdout + done.stderr)}"
            )
        return done.stdout

    # -- ACLs -----------------------------------------------------------------

    def add_acls(
        self,
        users: str | Iterable[str],
        operations: Iterable[str],
        *,
        topics: Iterable[str] = (),
        groups: Iterable[str] = (),
        cluster: bool = False,
        prefixed: bool = False,
    ) -> None:
        """Allow each of ``users`` (``User:<name>``) every operation in ``operations`` (Kafka's names: ``Read``,
        ``Write``, ``Describe``, ``Create``, ``AlterConfigs``...) on every resource named, with
        Kafka's ``kafka-acls`` (one JVM run: group resources so the calls stay few).

        :param prefixed: the names are prefixes (``--resource-pattern-type prefixed``).
        :raises KafkaToolError: the tool failed (e.g. the broker has no authorizer).
        """
        args = ["--bootstrap-server", self.bootstrap, "--add"]
        for user in [users] if isinstance(users, str) else users:
            args += ["--allow-principal", f"User:{user}"]
        for op in operations:
            args += ["--operation", op]
        for topic in topics:
            args += ["--topic", topic]
        for group in groups:
            args += ["--group", group]
        if cluster:
            args.append("--cluster")
        if prefixed:
            args += ["--resource-pattern-type", "prefixed"]
        self.run(_ACL_COMMAND, *args, "--force")

    # -- topics ---------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 3,
        *,
        config: Mapping[str, str] | None = None,
        replication_factor: int = 1,
    ) -> None:
        """Create ``name`` with ``partitions`` partitions, each on ``replication_factor`` brokers."""
        args = ["--bootstrap-server", self.bootstrap, "--create", "--topic", name]
        args += ["--partitions", str(partitions), "--replication-factor", str(replication_factor)]
        for key, value in (config or {}).items():
            args += ["--config", f"{key}={value}"]
        self.run(_TOPIC_COMMAND, *args)

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name``."""
        self.run(_TOPIC_COMMAND, "--bootstrap-server", self.bootstrap, "--delete", "--topic", name)

    def topic_partitions(self, name: str) -> int:
        """The partition count of topic ``name`` (from ``kafka-topics --describe``)."""
        out = self.run(
            _TOPIC_COMMAND, "--bootstrap-server", self.bootstrap, "--describe", "--topic", name
        )
        m = re.search(r"PartitionCount:\s*(\d+)", out)
        if m is None:
            raise KafkaToolError(f"no PartitionCount for topic {name!r} in:\n{tail(out)}")
        return int(m[1])

    def list_topics(self) -> list[str]:
        """Names of all topics, internal ones included."""
        out = self.run(_TOPIC_COMMAND, "--bootstrap-server", self.bootstrap, "--list")
        return [line.strip() for line in out.splitlines() if line.strip()]

    # -- group configs --------------------------------------------------------

    def alter_group_config(self, group: str, config: Mapping[str, str]) -> None:
        """Set dynamic group configs, e.g. ``{"share.auto.offset.reset": "earliest"}``.

        The group need not exist yet. Values are checked by the broker against its
        ``group.share.min.*``/``max.*`` bounds.
        """
        if not config:
            return
        joined = ",".join(f"{k}={v}" for k, v in config.items())
        self.run(
            self._config_command(),
            "--bootstrap-server",
            self.bootstrap,
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            group,
            "--add-config",
            joined,
        )

    def describe_group_config(self, group: str) -> dict[str, str]:
        """The dynamic configs set on ``group`` (defaults are not listed)."""
        out = self.run(
            self._config_command(),
            "--bootstrap-server",
            self.bootstrap,
            "--describe",
            "--entity-type",
            "groups",
            "--entity-name",
            group,
        )
        found: dict[str, str] = {}
        for line in out.splitlines():
            m = re.match(r"\s+([\w.\-]+)=(\S*) sensitive=", line)
            if m:
                found[m[1]] = m[2]
        return found

    def _config_command(self) -> str:
        for cls in _CONFIG_COMMANDS:
            if self.install.has_class(cls):
                return cls
        raise KafkaToolError(f"no ConfigCommand class in {self.install.lib}")

    # -- features -------------------------------------------------------------

    def describe_features(self) -> dict[str, FeatureLevel]:
        """``kafka-features describe``: every feature with its supported and finalized levels."""
        out = self.run(_FEATURE_COMMAND, "--bootstrap-server", self.bootstrap, "describe")
        features: dict[str, FeatureLevel] = {}
        for line in out.splitlines():
            fields = dict(re.findall(r"(\w+):\s+(\S+)", line))
            if "Feature" in fields:
                features[fields["Feature"]] = FeatureLevel(
                    name=fields["Feature"],
                    supported_min=fields.get("SupportedMinVersion", ""),
                    supported_max=fields.get("SupportedMaxVersion", ""),
                    finalized=fields.get("FinalizedVersionLevel", ""),
                )
        return features

    # -- producing ------------------------------------------------------------

    def produce(
        self,
        topic: str,
        num_records: int,
        *,
        record_size: int = 100,
        throughput: int = -1,
        producer_props: Mapping[str, str] | None = None,
        timeout: float = 300.0,
    ) -> ProduceResult:
        """Write ``num_records`` records of ``record_size`` random bytes with ``kafka-producer-perf-test``.

        Records have no key, so they spread over the partitions. ``acks=all`` by default.
        """
        props = {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": "5"}
        props.update(producer_props or {})
        started = time.monotonic()
        out = self.run(
            _PRODUCER_PERF,
            "--topic",
            topic,
            "--num-records",
            str(num_records),
            "--record-size",
            str(record_size),
            "--throughput",
            str(throughput),
            # --producer-props works on 4.1-4.4 (4.2+ calls it deprecated).
            "--producer-props",
            *(f"{k}={v}" for k, v in props.items()),
            timeout=timeout,
            perf=True,
        )
        elapsed = time.monotonic() - started
        # The summary is the last line: "N records sent, R records/sec (...)".
        summaries = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
        m = summaries[-1] if summaries else None
        if m is None or int(m[0]) != num_records:
            raise KafkaToolError(
                f"producer perf test did not report {num_records} records:\n{tail(out)}"
            )
        return ProduceResult(records=int(m[0]), records_per_sec=float(m[1]), elapsed=elapsed)

    def produce_lines(
        self,
        topic: str,
        lines: Iterable[str],
        *,
        key_separator: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        """Write one record per line with ``kafka-console-producer`` (``key<sep>value`` if a separator is given)."""
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic]
        if key_separator is not None:
            args += ["--property", "parse.key=true", "--property", f"key.separator={key_separator}"]
        text = "".join(f"{line}\n" for line in lines)
        self.run(_CONSOLE_PRODUCER, *args, input=text, timeout=timeout)

    # -- share groups ---------------------------------------------------------

    def share_consume(
        self, topic: str, group: str, num_records: int, *, timeout: float = 60.0
    ) -> int:
        """Consume ``num_records`` through share group ``group`` with ``kafka-share-consumer-perf-test``.

        Returns how many records the Java share consumer received. The group needs
        ``share.auto.offset.reset=earliest`` to see records produced before it joined.

        :raises KafkaToolError: if it received fewer within ``timeout`` seconds.
        """
        out = self.run(
            _SHARE_CONSUMER_PERF,
            "--bootstrap-server",
            self.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--messages",  # --num-records from 4.2 on; --messages works on 4.1-4.4
            str(num_records),
            # The tool interrupts itself after --timeout in total, not between records.
            "--timeout",
            str(int(timeout * 1000)),
            timeout=timeout + 60,
            perf=True,
        )
        rows = [line.split(",") for line in out.splitlines() if line.count(",") >= 6]
        try:
            return int(rows[-1][5])
        except (IndexError, ValueError):
            raise KafkaToolError(
                f"no summary from the share consumer perf tool:\n{tail(out)}"
            ) from None

    def describe_share_group(self, group: str, *flags: str) -> str:
        """Raw ``kafka-share-groups --describe --group G [flags]`` output (e.g. ``--offsets``)."""
        return self.run(
            _SHARE_GROUP_COMMAND,
            "--bootstrap-server",
            self.bootstrap,
            "--describe",
            "--group",
            group,
            *flags,
        )


def _ensure_tool_log4j(home: Path) -> Path:
    path = home / "tools-log4j2.properties"
    if not path.is_file() or path.read_text() != _TOOL_LOG4J:
        fd, tmp = tempfile.mkstemp(dir=home, prefix=".log4j-")
        with os.fdopen(fd, "w") as fh:
            fh.write(_TOOL_LOG4J)
        os.replace(tmp, path)
    return path
