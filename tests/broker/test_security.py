"""SASL and TLS listeners of the test broker, checked with an independent client (librdkafka)."""

from __future__ import annotations

import socket
import ssl
import uuid
from typing import TYPE_CHECKING, Any

import confluent_kafka  # the project's [test] extra: an independent client to check against
import pytest
from confluent_kafka import admin

from sharecon.testing import BrokerStartError, KafkaBroker, SaslSetup
from sharecon.testing.probe import share_support

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = pytest.mark.broker


USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def _topics(bootstrap: str, conf: dict[str, Any], timeout: float = 15) -> set[str]:
    client = admin.AdminClient({"bootstrap.servers": bootstrap, **conf})
    return set(client.list_topics(timeout=timeout).topics)


@pytest.fixture(scope="module")
def sasl_ssl_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(sasl=SaslSetup(users=USERS), tls=True) as broker:
        broker.tools.create_topic("secured", 1)
        yield broker


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", sorted(USERS))
def test_sasl_ssl_accepts_every_user_and_mechanism(
    sasl_ssl_broker: KafkaBroker, mechanism: str, user: str
) -> None:
    conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user],
        "ssl.ca.location": str(sasl_ssl_broker.tls_ca_file),
    }
    assert "secured" in _topics(sasl_ssl_broker.bootstrap, conf)


def test_wrong_password_is_refused(sasl_ssl_broker: KafkaBroker) -> None:
    conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "not-her-password",
        "ssl.ca.location": str(sasl_ssl_broker.tls_ca_file),
        "log_level": 0,
    }
    with pytest.raises(confluent_kafka.KafkaException):
        _topics(sasl_ssl_broker.bootstrap, conf, timeout=4)


def test_certificate_verifies_with_python_ssl(sasl_ssl_broker: KafkaBroker) -> None:
    """sharecon uses the stdlib ssl module: strict X.509 checks and hostname checks must pass."""
    context = ssl.create_default_context(cafile=str(sasl_ssl_broker.tls_ca_file))
    context.verify_flags |= getattr(ssl, "VERIFY_X509_STRICT", 0)
    with (
        socket.create_connection(("127.0.0.1", sasl_ssl_broker.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() is not None
    with (
        socket.create_connection(("127.0.0.1", sasl_ssl_broker.port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
        ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1"),
    ):
        pass


def test_tools_use_the_plaintext_listener(sasl_ssl_broker: KafkaBroker) -> None:
    assert sasl_ssl_broker.plaintext_bootstrap != sasl_ssl_broker.bootstrap
    assert share_support(sasl_ssl_broker.plaintext_bootstrap).enabled
    assert "secured" in sasl_ssl_broker.tools.list_topics()


def test_cli_command_config_over_sasl_ssl(sasl_ssl_broker: KafkaBroker, tmp_path: Path) -> None:
    """sharecon's CLI (Admin, Producer, ShareConsumer) from a Kafka properties file in the
    shape a provider's console gives (JAAS with single quotes, extra producer keys)."""
    from tests.cli.test_cli import cli, json_lines

    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers={sasl_ssl_broker.bootstrap}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username='bob' password='{USERS['bob']}';\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={sasl_ssl_broker.tls_ca_file}\n"
        "acks=all\n"
    )
    config = ("--command-config", str(props))
    topic = f"cmdcfg-{uuid.uuid4().hex[:8]}"
    proc = cli("topics", "create", topic, "-v", *config)
    assert proc.returncode == 0, proc.stderr
    # -v shows the one WARNING naming the keys sharecon does not use.
    assert "WARNING sharecon._net.properties: client properties not used" in proc.stderr
    assert "acks" in proc.stderr
    proc = cli("produce", topic, *config, input="one\ntwo\n")
    assert proc.returncode == 0, proc.stderr
    proc = cli("consume", topic, "-g", f"g-{topic}", "--earliest", "--max", "2", "--json", *config)
    assert proc.returncode == 0, proc.stderr
    assert [r["value"] for r in json_lines(proc.stdout)] == ["one", "two"]
    assert USERS["bob"] not in proc.stderr
    # The wrong password in the file: exit 5 (unreachable), one line, no secret.
    props.write_text(props.read_text().replace(USERS["bob"], "not-bobs-pw"))
    proc = cli("topics", "list", *config)
    assert proc.returncode == 5, proc.stderr
    assert "not-bobs-pw" not in proc.stderr and "Traceback" not in proc.stderr


def test_sasl_plaintext_with_one_mechanism(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(sasl="PLAIN", shared=False)
    conf = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "sharecon",
        "sasl.password": "sharecon-secret",
    }
    broker.tools.create_topic("over-sasl-plaintext", 1)
    assert "over-sasl-plaintext" in _topics(broker.bootstrap, conf)
    scram = {**conf, "sasl.mechanism": "SCRAM-SHA-256", "log_level": 0}
    with pytest.raises(confluent_kafka.KafkaException):
        _topics(broker.bootstrap, scram, timeout=4)


def test_unknown_sasl_mechanism_is_rejected() -> None:
    with pytest.raises(BrokerStartError, match="unknown SASL mechanism 'GSSAPI'"):
        KafkaBroker(sasl="GSSAPI")
