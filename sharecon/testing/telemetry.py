"""A KIP-714 client-telemetry receiver for a test broker: compiled here with the local JDK,
loaded by the broker as a metrics reporter, writing every push it gets to a file.

Usage (the plugin's folder goes on the broker's classpath)::

    receiver = build_receiver(tmp_path / "plugin")
    out = tmp_path / "pushes.txt"
    broker = KafkaBroker(extra_config=receiver.broker_config(out), plugins=[receiver.classes])
    ...
    pushes = read_pushes(out)

The receiver implements ``org.apache.kafka.common.metrics.MetricsReporter`` and
``org.apache.kafka.server.telemetry.ClientTelemetry`` (Kafka 3.7+); the broker hands its
``ClientTelemetryReceiver`` each PushTelemetry it accepts. One line per push:
``INSTANCE_ID TERMINATING CONTENT_TYPE BASE64(DATA)``, where ``DATA`` is the metrics as
the client sent them, decompressed (OTLP ``MetricsData``). A client-metrics subscription
must exist on the broker for a client to push (``Admin.alter_configs`` on a
``CLIENT_METRICS`` resource, or :func:`subscribe`).
"""

from __future__ import annotations

import base64
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    find_java,
    provision,
    tail,
)

if TYPE_CHECKING:
    from sharecon.admin import Admin

__all__ = [
    "OUT_PROPERTY",
    "RECEIVER_CLASS",
    "TelemetryPush",
    "TelemetryReceiver",
    "build_receiver",
    "read_pushes",
    "subscribe",
]

#: The reporter class to name in ``metric.reporters``.
RECEIVER_CLASS = "sharecon.testkit.TelemetryFileReceiver"
#: The broker property giving the file the receiver appends to.
OUT_PROPERTY = "sharecon.telemetry.out"

_SOURCE = """\
package sharecon.testkit;

import java.io.FileWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

/** Appends every client-telemetry push to the file named by sharecon.telemetry.out. */
public class TelemetryFileReceiver implements MetricsReporter, ClientTelemetry {
    private volatile String out;

    @Override public void configure(Map<String, ?> configs) {
        Object path = configs.get("sharecon.telemetry.out");
        out = path == null ? null : path.toString();
    }
    @Override public void init(List<KafkaMetric> metrics) {}
    @Override public void metricChange(KafkaMetric metric) {}
    @Override public void metricRemoval(KafkaMetric metric) {}
    @Override public void close() {}

    @Override public ClientTelemetryReceiver clientReceiver() {
        return (AuthorizableRequestContext context, ClientTelemetryPayload payload) -> {
            ByteBuffer data = payload.data().duplicate();
            byte[] bytes = new byte[data.remaining()];
            data.get(bytes);
            String line = payload.clientInstanceId() + " " + payload.isTerminating() + " "
                + payload.contentType() + " " + Base64.getEncoder().encodeToString(bytes) + "\\n";
            synchronized (TelemetryFileReceiver.class) {
                try (FileWriter w = new FileWriter(out, true)) {
                    w.write(line);
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }
        };
    }
}
"""


@dataclass(frozen=True, slots=True)
class TelemetryReceiver:
    """The compiled receiver: its class folder (for ``KafkaBroker(plugins=[...])``)."""

    classes: Path

    def broker_config(self, out: Path) -> dict[str, str]:
        """Broker properties that load the receiver, writing to ``out``."""
        return {"metric.reporters": RECEIVER_CLASS, OUT_PROPERTY: str(out)}


@dataclass(frozen=True, slots=True)
class TelemetryPush:
    """One PushTelemetry the broker accepted."""

    client_instance_id: str
    terminating: bool
    content_type: str
    data: bytes


def build_receiver(folder: Path, version: str = DEFAULT_KAFKA_VERSION) -> TelemetryReceiver:
    """Compile the receiver into ``folder`` with ``javac`` (next to the ``java`` the test
    kit runs brokers with) against Kafka ``version``'s jars.

    :raises BrokerStartError: no ``javac``, or it failed (its output included).
    """
    java = find_java()
    javac = str(Path(java).with_name("javac"))
    if not os.path.exists(javac):
        raise BrokerStartError(f"no javac next to {java}: a JDK is needed to build the receiver")
    install = provision(version)
    src = folder / "src" / "sharecon" / "testkit" / "TelemetryFileReceiver.java"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(_SOURCE)
    classes = folder / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    cmd = [javac, "-nowarn", "-cp", install.classpath, "-d", str(classes), str(src)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerStartError(f"javac failed: {exc}") from exc
    if done.returncode != 0:
        raise BrokerStartError("javac failed:\n" + tail(done.stdout + done.stderr))
    return TelemetryReceiver(classes)


def read_pushes(out: Path) -> list[TelemetryPush]:
    """Every push the receiver wrote to ``out`` so far (none if it has not written yet)."""
    try:
        text = out.read_text()
    except FileNotFoundError:
        return []
    pushes = []
    for line in text.splitlines():
        instance, terminating, content_type, data = line.split(" ")
        pushes.append(
            TelemetryPush(instance, terminating == "true", content_type, base64.b64decode(data))
        )
    return pushes


async def subscribe(
    admin: Admin, name: str, *, metrics: str = "*", interval_ms: int = 1000
) -> None:
    """Create (or replace) the client-metrics subscription ``name`` on the cluster:
    ``metrics`` is a comma-separated list of name prefixes (``*`` for every metric)."""
    from sharecon.admin import ResourceType

    await admin.alter_configs(
        ResourceType.CLIENT_METRICS,
        name,
        {"metrics": metrics, "interval.ms": str(interval_ms)},
    )
