"""Mutual TLS against a real broker that requires client certificates.

One broker for the module (``ssl.client.auth=required``, trusting the test CA); client
certificates are minted by the test kit (openssl key, keytool signature). Every client
(Admin, Producer, ShareConsumer), the CLI and the worker connect with certificate files;
a client without one, or with one from another CA, gets a prompt TlsAuthenticationError;
files replaced on disk are used by the next connection.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net.connect import open_connection
from sharecon._net.connection import BrokerAddress
from sharecon.admin import Admin
from sharecon.config import ConnectionConfig, TlsConfig
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing import KafkaBroker, TlsSetup
from tests.cli.test_cli import assert_clean_error, cli, json_lines
from tests.worker._harness import counts, running_worker

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

KEY_PASSWORD = "k3y-Pa55word"
#: The broker closes connections idle this long, so a test can make a client reconnect.
IDLE_MS = 3000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def mtls_broker() -> Iterator[KafkaBroker]:
    idle = {"connections.max.idle.ms": str(IDLE_MS)}
    with KafkaBroker(tls=TlsSetup(client_auth=True), extra_config=idle) as broker:
        yield broker


@pytest.fixture(scope="module")
def certs(mtls_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``alice`` (plain key) and ``bob`` (key encrypted with KEY_PASSWORD)."""
    folder = tmp_path_factory.mktemp("certs")
    mtls_broker.mint_client_certificate(folder, "alice")
    mtls_broker.mint_client_certificate(folder, "bob", key_password=KEY_PASSWORD)
    return folder


def tls_for(broker: KafkaBroker, cert: Path, key: Path, password: str | None = None) -> TlsConfig:
    return TlsConfig(
        ca_file=str(broker.tls_ca_file), cert_file=cert, key_file=key, key_password=password
    )


def untrusted_certificate(folder: Path, name: str = "mallory") -> tuple[Path, Path]:
    """A self-signed certificate and key the broker's CA never signed."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", f"/CN={name}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def _setup(broker: KafkaBroker, topic: str, group: str) -> None:
    # Arranged over the plaintext listener the test kit keeps for its tools.
    async with Admin(broker.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})


async def test_every_client_over_mtls_with_an_encrypted_key(
    mtls_broker: KafkaBroker, certs: Path
) -> None:
    config = ConnectionConfig(
        tls=tls_for(mtls_broker, certs / "bob.crt", certs / "bob.key", KEY_PASSWORD)
    )
    assert KEY_PASSWORD not in repr(config)
    topic, group = f"mtls-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    async with Admin(mtls_broker.bootstrap, config=config) as admin:
        await admin.create_topics([topic], num_partitions=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
        assert topic in await admin.list_topics()
    async with Producer(mtls_broker.bootstrap, config=config) as producer:
        for i in range(5):
            await producer.send_and_wait(topic, f"v{i}".encode())
    got: list[bytes | None] = []
    async with ShareConsumer(
        mtls_broker.bootstrap, group_id=group, topics=[topic], config=config
    ) as consumer:
        with anyio.fail_after(30):
            async for record in consumer:
                got.append(record.value)
                if len(got) == 5:
                    break
    assert got == [f"v{i}".encode() for i in range(5)]


async def test_a_client_without_a_certificate_is_refused_at_once(
    mtls_broker: KafkaBroker, certs: Path, tmp_path: Path
) -> None:
    # A connect timeout far above the bound below: a refusal that were retried until it
    # ran out could not pass, however loaded the machine.
    no_cert = ConnectionConfig(
        tls=TlsConfig(ca_file=str(mtls_broker.tls_ca_file)), connect_timeout=30.0
    )
    cert, key = untrusted_certificate(tmp_path)
    stranger = ConnectionConfig(tls=tls_for(mtls_broker, cert, key), connect_timeout=30.0)
    for config, says in (
        (no_cert, "requires a client certificate"),
        (stranger, "refused the client certificate"),
    ):
        clients = (
            Admin(mtls_broker.bootstrap, config=config),
            Producer(mtls_broker.bootstrap, config=config),
            ShareConsumer(mtls_broker.bootstrap, group_id="g", topics=["t"], config=config),
        )
        for client in clients:
            started = time.monotonic()
            with pytest.raises(errors.TlsAuthenticationError, match=says) as info:
                async with client:
                    pass
            # Not retried until the connect timeout: the same certificate fails again.
            assert time.monotonic() - started < 10, type(client).__name__
            assert mtls_broker.bootstrap in str(info.value)


async def test_replaced_certificate_files_are_used_by_the_next_connection(
    mtls_broker: KafkaBroker, certs: Path, tmp_path: Path
) -> None:
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copy(certs / "alice.crt", cert)
    shutil.copy(certs / "alice.key", key)
    tls = tls_for(mtls_broker, cert, key)
    config = ConnectionConfig(tls=tls)
    host, port = mtls_broker.bootstrap.rsplit(":", 1)
    address = BrokerAddress(host, int(port))

    async def connect() -> errors.TlsAuthenticationError | None:
        """Open one connection; the broker's refusal of the certificate, if it refused."""
        async with anyio.create_task_group() as tg:
            try:
                conn = await open_connection(address, config, tg)
            except errors.TlsAuthenticationError as exc:
                return exc
            await conn.aclose()
        return None

    assert await connect() is None
    assert await connect() is None
    assert tls._cache.builds == 1  # unchanged files: the context is reused
    # Replaced by a certificate the broker does not trust: the next connection uses it.
    mallory_cert, mallory_key = untrusted_certificate(tmp_path / "other", "mallory")
    os.replace(mallory_cert, cert)
    os.replace(mallory_key, key)
    refused = await connect()
    assert refused is not None and "refused the client certificate" in str(refused)
    # Renewed with a good one (as cert-manager would): accepted again, no restart.
    fresh = mtls_broker.mint_client_certificate(tmp_path / "renewed", "alice")
    os.replace(fresh.cert_file, cert)
    os.replace(fresh.key_file, key)
    assert await connect() is None
    assert tls._cache.builds == 3


async def test_a_running_producer_reconnects_with_renewed_files(
    mtls_broker: KafkaBroker, certs: Path, tmp_path: Path
) -> None:
    topic = f"mtls-renew-{uuid.uuid4().hex[:8]}"
    await _setup(mtls_broker, topic, "unused")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copy(certs / "alice.crt", cert)
    shutil.copy(certs / "alice.key", key)
    tls = tls_for(mtls_broker, cert, key)
    async with Producer(mtls_broker.bootstrap, config=ConnectionConfig(tls=tls)) as producer:
        await producer.send_and_wait(topic, b"before")
        renewed = mtls_broker.mint_client_certificate(tmp_path / "renewed", "alice-2")
        os.replace(renewed.key_file, key)
        os.replace(renewed.cert_file, cert)
        # The broker drops the idle connection; the next send opens a new one.
        await anyio.sleep(IDLE_MS / 1000 + 2)
        with anyio.fail_after(30):
            await producer.send_and_wait(topic, b"after")
    # Loaded once at start and once for the connection made after the renewal.
    assert tls._cache.builds == 2


def _mtls_flags(broker: KafkaBroker, certs: Path, name: str) -> tuple[str, ...]:
    return (
        "-b", broker.bootstrap, "--tls-ca", str(broker.tls_ca_file),
        "--tls-cert", str(certs / f"{name}.crt"), "--tls-key", str(certs / f"{name}.key"),
    )  # fmt: skip


async def test_cli_produce_and_consume_with_certificate_flags_and_command_config(
    mtls_broker: KafkaBroker, certs: Path, tmp_path: Path
) -> None:
    topic, group = f"mtls-cli-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    await _setup(mtls_broker, topic, group)
    flags = _mtls_flags(mtls_broker, certs, "bob")
    secret = {"SHARECON_TLS_KEY_PASSWORD": KEY_PASSWORD}
    proc = await anyio.to_thread.run_sync(
        lambda: cli("produce", topic, *flags, input="a\nb\nc\n", env=secret)
    )
    assert proc.returncode == 0, proc.stderr
    assert KEY_PASSWORD not in proc.stderr + proc.stdout

    # The same broker through a Kafka properties file: a PEM keystore file holding the
    # encrypted key and its certificate, as Kafka's own tools take it.
    keystore = tmp_path / "bob-keystore.pem"
    keystore.write_text((certs / "bob.key").read_text() + (certs / "bob.crt").read_text())
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers={mtls_broker.bootstrap}\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={mtls_broker.tls_ca_file}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        f"ssl.key.password={KEY_PASSWORD}\n"
        "client.id=mtls-cli\n"
    )
    proc = await anyio.to_thread.run_sync(
        lambda: cli(
            "consume", topic, "-g", group, "--max", "3", "--json", "--command-config", str(props)
        )
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["value"] for r in json_lines(proc.stdout)] == ["a", "b", "c"]

    # Without a certificate: one line, exit 5 (unreachable), at once.
    started = time.monotonic()
    proc = await anyio.to_thread.run_sync(
        lambda: cli(
            "topics", "list", "-b", mtls_broker.bootstrap, "--tls-ca", str(mtls_broker.tls_ca_file)
        )
    )
    assert_clean_error(proc, 5, "requires a client certificate")
    assert time.monotonic() - started < 10


async def test_worker_over_mtls_keeps_the_key_password_out_of_its_processes_environment(
    mtls_broker: KafkaBroker, certs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = f"mtls-w-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    await _setup(mtls_broker, topic, group)
    async with Producer(mtls_broker.plaintext_bootstrap) as producer:
        for i in range(20):
            await producer.send_and_wait(topic, f"r{i}".encode())
    monkeypatch.setenv("SHARECON_TLS_KEY_PASSWORD", KEY_PASSWORD)
    flags = _mtls_flags(mtls_broker, certs, "bob")
    async with running_worker(
        mtls_broker.bootstrap,
        tmp_path,
        "tests.worker.handlers:record_id_and_secrets",
        "--group", group, "--topic", topic, *flags, "--interval", "1",
    ) as worker:  # fmt: skip
        await worker.wait_for("every record handled", lambda: len(counts(tmp_path)) == 20, 60)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert set(counts(tmp_path)) == {f"r{i}" for i in range(20)}
    assert counts(tmp_path, "secret-in-environment") == {}
    assert KEY_PASSWORD not in worker.stderr
