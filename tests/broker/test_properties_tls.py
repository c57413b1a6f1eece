"""The same client.properties files read by Kafka 4.4's own tool and by ``from_properties``.

One broker requiring client certificates. Each file holds its trust store and key store
inline, in one of the layouts Kafka's docs and tools use (PEM lines continued with a
trailing backslash, the ``\\n``-escaped form, one line with spaces). For every file Kafka's
``kafka-topics --command-config`` and sharecon's Admin either both connect or both refuse.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin
from sharecon.config import from_properties
from sharecon.testing import KafkaBroker, TlsSetup
from sharecon.testing.tools import KafkaToolError
from tests.net.test_properties_format import continued, escaped, spaced

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

KEY_PASSWORD = "k3y-Pa55word"
_TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(tls=TlsSetup(client_auth=True)) as started:
        yield started


@pytest.fixture(scope="module")
def certs(broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("certs")
    broker.mint_client_certificate(folder, "alice")
    broker.mint_client_certificate(folder, "bob", key_password=KEY_PASSWORD)
    # The test kit's encrypted key is PBES2 (openssl's default), which Kafka cannot decrypt
    # (Java has no "PBES2" SecretKeyFactory); "carol" holds bob's key again as PKCS#8 v1
    # (PBE-SHA1-3DES), which both read.
    env = {"SHARECON_TEST_PW": KEY_PASSWORD}
    subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", str(folder / "bob.key"),
         "-passin", "env:SHARECON_TEST_PW", "-passout", "env:SHARECON_TEST_PW",
         "-out", str(folder / "carol.key")],
        check=True, capture_output=True, timeout=60, env=env,
    )  # fmt: skip
    (folder / "carol.crt").write_text((folder / "bob.crt").read_text())
    # A CA the broker's certificate was not signed by.
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
         str(folder / "other.key"), "-out", str(folder / "other.pem"), "-days", "1",
         "-subj", "/CN=another CA"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return folder


def kafka_connects(broker: KafkaBroker, props: Path) -> bool:
    try:
        broker.tools.run(
            _TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--list",
            "--command-config", str(props), timeout=180,
        )  # fmt: skip
    except KafkaToolError:
        return False
    return True


async def sharecon_connects(props: Path) -> bool:
    try:
        with anyio.fail_after(90):  # a hang is neither: TimeoutError fails the test
            async with Admin(**from_properties(props)) as admin:
                await admin.list_topics()
    except errors.KafkaError:
        return False
    return True


CASES: dict[str, tuple[Callable[[str, str], str], str, str, bool, tuple[bool, bool]]] = {
    # name: (layout, trust store, key, with the key password, (Kafka connects, we connect))
    "continued-plain-key": (continued, "ca", "alice", False, (True, True)),
    "continued-pbes1-key": (continued, "ca", "carol", True, (True, True)),
    "escaped-pbes1-key": (escaped, "ca", "carol", True, (True, True)),
    "spaced-plain-key": (spaced, "ca", "alice", False, (True, True)),
    "continued-untrusted-ca": (continued, "other", "alice", False, (False, False)),
    "continued-pbes1-key-no-password": (continued, "ca", "carol", False, (False, False)),
    "continued-plain-key-with-password": (continued, "ca", "alice", True, (False, False)),
    # The one difference: Kafka cannot decrypt a PBES2 key (openssl's default for
    # `openssl req -newkey` and `openssl pkcs8 -topk8`); OpenSSL can, so sharecon connects.
    "continued-pbes2-key": (continued, "ca", "bob", True, (False, True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_kafka_tool_and_from_properties_agree(
    broker: KafkaBroker, certs: Path, tmp_path: Path, case: str
) -> None:
    layout, trust, name, with_password, expected = CASES[case]
    ca = broker.tls_ca_file.read_text() if trust == "ca" else (certs / "other.pem").read_text()  # type: ignore[union-attr]
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers={broker.bootstrap}\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        + layout(ca, "ssl.truststore.certificates")
        + "ssl.keystore.type=PEM\n"
        + layout((certs / f"{name}.key").read_text(), "ssl.keystore.key")
        + layout((certs / f"{name}.crt").read_text(), "ssl.keystore.certificate.chain")
        + (f"ssl.key.password={KEY_PASSWORD}\n" if with_password else "")
        + "default.api.timeout.ms=30000\nrequest.timeout.ms=20000\n"
    )
    ours = await sharecon_connects(props)
    kafka = await anyio.to_thread.run_sync(kafka_connects, broker, props)
    assert (kafka, ours) == expected
