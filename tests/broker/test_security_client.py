"""sharecon's own client over SASL (PLAIN, SCRAM-SHA-256/512, re-authentication) and TLS listeners.

The brokers are started by sharecon.testing with a SASL listener (SCRAM users written at
format time) or a TLS listener whose certificate is signed by a throwaway CA.
"""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import ConnectionConfig
from sharecon._net.sasl import SaslConfig
from sharecon.admin import Admin
from sharecon.protocol import ApiVersionsRequest, MetadataRequest
from sharecon.testing import KafkaBroker, SaslSetup
from sharecon.testing._provision import find_java
from tests.broker.test_connection import open_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = pytest.mark.anyio

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
REAUTH_MS = 3000
API_VERSIONS = ApiVersionsRequest(
    client_software_name="sharecon-tests", client_software_version="0"
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sasl_broker(kafka_broker_factory: BrokerFactory) -> KafkaBroker:
    """A SASL_PLAINTEXT listener offering every mechanism, re-authentication every 3 s."""
    return kafka_broker_factory(
        sasl=SaslSetup(mechanisms=MECHANISMS, users=USERS),
        extra_config={"connections.max.reauth.ms": str(REAUTH_MS)},
    )


@pytest.fixture
def tls_broker(kafka_broker_factory: BrokerFactory) -> KafkaBroker:
    """An SSL listener with a certificate signed by a throwaway CA."""
    return kafka_broker_factory(tls=True)


def trusting(broker: KafkaBroker) -> ssl.SSLContext:
    assert broker.tls_ca_file is not None
    return ssl.create_default_context(cafile=str(broker.tls_ca_file))


# -- SASL -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_sasl_login_then_requests(sasl_broker: KafkaBroker, mechanism: str) -> None:
    config = ConnectionConfig(sasl=SaslConfig(mechanism, "alice", USERS["alice"]))
    async with open_cluster(sasl_broker.bootstrap, config) as cluster:
        meta = await cluster.refresh_metadata([])
        # The advertised address is the SASL listener's, so new connections authenticate too.
        (broker,) = meta.brokers.values()
        assert f"{broker.host}:{broker.port}" == sasl_broker.bootstrap
        node = await cluster.coordinator("sasl-group")
        assert node == broker.node_id
        assert (await cluster.request(node, API_VERSIONS)).error_code == 0


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_wrong_password_is_an_authentication_error(
    sasl_broker: KafkaBroker, mechanism: str
) -> None:
    config = ConnectionConfig(sasl=SaslConfig(mechanism, "alice", "not-the-password"))
    # Rejected at once: a wrong password is not retried until the bootstrap timeout.
    with anyio.fail_after(5), pytest.raises(errors.SaslAuthenticationFailedError) as info:
        async with open_cluster(sasl_broker.bootstrap, config):
            pass
    assert "not-the-password" not in str(info.value)
    assert sasl_broker.bootstrap in str(info.value)


async def test_unknown_scram_user_is_rejected(sasl_broker: KafkaBroker) -> None:
    config = ConnectionConfig(sasl=SaslConfig("SCRAM-SHA-256", "mallory", "whatever"))
    with anyio.fail_after(5), pytest.raises(errors.SaslAuthenticationFailedError):
        async with open_cluster(sasl_broker.bootstrap, config):
            pass


async def test_no_credentials_on_a_sasl_listener_says_so(sasl_broker: KafkaBroker) -> None:
    with anyio.fail_after(10), pytest.raises(errors.BrokerConnectError, match="SASL"):
        async with open_cluster(sasl_broker.bootstrap, ConnectionConfig()):
            pass


async def test_sasl_reauthentication_keeps_the_connection(
    sasl_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker grants 3 s sessions; requests after that still work on the same connection."""
    caplog.set_level(logging.DEBUG, logger="sharecon._net.connection")
    config = ConnectionConfig(sasl=SaslConfig("SCRAM-SHA-512", "bob", USERS["bob"]))
    async with open_cluster(sasl_broker.bootstrap, config, metadata_max_age=0) as cluster:
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        with anyio.fail_after(30):
            for _ in range(3):  # three session lifetimes
                await anyio.sleep(REAUTH_MS / 1000)
                # Many requests at once while the session is due: one re-authenticates, the
                # others wait for it, and nobody is refused.
                async with anyio.create_task_group() as tg:
                    for _ in range(20):
                        tg.start_soon(conn.request, MetadataRequest(topics=()))
        assert await cluster.connection(node) is conn and not conn.closed
    reauths = [r for r in caplog.records if "re-authenticating" in r.getMessage()]
    assert len(reauths) >= 3


# -- TLS ------------------------------------------------------------------------------------


async def test_tls_with_the_broker_ca(tls_broker: KafkaBroker) -> None:
    config = ConnectionConfig(ssl_context=trusting(tls_broker))
    async with open_cluster(tls_broker.bootstrap, config) as cluster:
        node = await cluster.coordinator("tls-group")
        assert (await cluster.request(node, API_VERSIONS)).error_code == 0
    async with Admin(tls_broker.bootstrap, ssl_context=trusting(tls_broker)) as admin:
        assert (await admin.describe_cluster()).cluster_id


async def test_tls_rejects_the_system_trust_store(tls_broker: KafkaBroker) -> None:
    config = ConnectionConfig(ssl_context=ssl.create_default_context())
    # A certificate failure is final: no retrying until the bootstrap timeout.
    with anyio.fail_after(5), pytest.raises(errors.BrokerConnectError, match="certificate"):
        async with open_cluster(tls_broker.bootstrap, config, bootstrap_timeout=30):
            pass


async def test_tls_rejects_another_ca(tls_broker: KafkaBroker, tmp_path: Path) -> None:
    other_ca = make_unrelated_ca(tmp_path)
    config = ConnectionConfig(ssl_context=ssl.create_default_context(cafile=str(other_ca)))
    with anyio.fail_after(5), pytest.raises(errors.BrokerConnectError, match="certificate"):
        async with open_cluster(tls_broker.bootstrap, config, bootstrap_timeout=30):
            pass


async def test_plaintext_client_on_a_tls_listener_fails_bounded(tls_broker: KafkaBroker) -> None:
    config = ConnectionConfig(connect_timeout=2.0)
    # The broker answers with a TLS alert: named as such, not as a 350 MB "frame size".
    with (
        anyio.fail_after(10),
        pytest.raises(errors.BrokerConnectError, match="is this a TLS listener") as info,
    ):
        async with open_cluster(tls_broker.bootstrap, config, bootstrap_timeout=3):
            pass
    assert f"{tls_broker.bootstrap} does not speak Kafka (it answered with TLS" in str(info.value)


async def test_sasl_over_tls(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(
        sasl=SaslSetup(mechanisms=("SCRAM-SHA-256",), users=USERS), tls=True
    )
    config = ConnectionConfig(
        ssl_context=trusting(broker), sasl=SaslConfig("SCRAM-SHA-256", "alice", USERS["alice"])
    )
    async with open_cluster(broker.bootstrap, config) as cluster:
        assert (await cluster.request_any(API_VERSIONS)).error_code == 0
    bad = ConnectionConfig(
        ssl_context=trusting(broker), sasl=SaslConfig("SCRAM-SHA-256", "alice", "x")
    )
    with anyio.fail_after(5), pytest.raises(errors.SaslAuthenticationFailedError):
        async with open_cluster(broker.bootstrap, bad):
            pass


def make_unrelated_ca(folder: Path) -> Path:
    """A self-signed CA certificate (PEM) that signed nothing the broker uses."""
    pem = folder / "other-ca.pem"
    openssl = shutil.which("openssl")
    if openssl:
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=unrelated test CA", "-keyout", str(folder / "key.pem"), "-out", str(pem)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        return pem
    keytool = str(__import__("pathlib").Path(find_java()).with_name("keytool"))
    store = ["-keystore", str(folder / "ca.p12"), "-storepass", "changeit", "-storetype", "PKCS12"]
    subprocess.run(
        [keytool, "-genkeypair", "-alias", "ca", "-dname", "CN=unrelated test CA", "-ext", "bc:c",
         "-keyalg", "RSA", "-keysize", "2048", "-validity", "1", *store],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    out = subprocess.run(
        [keytool, "-exportcert", "-rfc", "-alias", "ca", *store],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    pem.write_text(out.stdout)
    return pem
