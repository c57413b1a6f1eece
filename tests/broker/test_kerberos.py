"""SASL GSSAPI (Kerberos) against a real broker and a real MIT KDC, both on loopback.

One KDC (sharecon.testing.kdc: a throwaway realm SHARECON.TEST, made with kdb5_util and
kadmin.local) and one broker with a SASL_PLAINTEXT GSSAPI listener serve the whole module.
The broker grants 3 s sessions, so every connection here re-authenticates as it goes.
The module needs MIT Kerberos' programs and the gssapi package (scripts/kerberos-kit
installs both); without them it is skipped locally and fails under CI=true.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import ShareConsumer, errors
from sharecon.admin import Admin
from sharecon.config import ConnectionConfig, GssapiConfig
from sharecon.producer import Producer
from sharecon.protocol import MetadataRequest
from sharecon.testing import KafkaBroker
from tests.broker.test_connection import open_cluster
from tests.worker._harness import counts, running_worker

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sharecon.testing import KerberosKdc

# tests/conftest.py puts the module in one xdist group: one KDC and one GSSAPI broker.
pytestmark = [pytest.mark.anyio, pytest.mark.broker]

REAUTH_MS = 3000
RECORDS = 200
# A login that cannot work must say so at once (no retries against the KDC or the broker).
PROMPT = 8.0  # loose: CI is a loaded 2-core machine; the old behaviour waited for timeouts


@pytest.fixture
def anyio_backend() -> str:
    # The login path is the same under both backends (the worker thread is anyio's); the
    # produce-and-consume test runs under trio as well.
    return "asyncio"


@pytest.fixture(scope="module")
def kdc() -> Iterator[KerberosKdc]:
    """The realm's KDC; KRB5_CONFIG points this process's Kerberos library at it."""
    try:
        import gssapi  # noqa: F401
    except ImportError:
        pytest.skip("the gssapi package is not installed (scripts/kerberos-kit installs it)")
    from sharecon.testing.kdc import KdcStartError, KerberosKdc, kdc_programs

    try:
        kdc_programs()
    except KdcStartError as exc:
        pytest.skip(str(exc))
    # Past this point a KDC that does not start is an error, never a skip.
    with KerberosKdc() as kdc, pytest.MonkeyPatch.context() as mp:
        for key, value in kdc.env.items():
            mp.setenv(key, value)
        # No test may fall back on the machine's own ticket cache.
        mp.setenv("KRB5CCNAME", f"FILE:{kdc.dir / 'no-such-cache'}")
        yield kdc


@pytest.fixture(scope="module")
def gssapi_broker(kdc: KerberosKdc) -> Iterator[KafkaBroker]:
    with KafkaBroker(
        gssapi=kdc.broker_setup(),
        extra_config={"connections.max.reauth.ms": str(REAUTH_MS)},
    ) as broker:
        yield broker


def keytab_login(kdc: KerberosKdc) -> GssapiConfig:
    return GssapiConfig(principal=kdc.client_principal, keytab=kdc.client_keytab)


async def produce_and_consume(broker: KafkaBroker, sasl: GssapiConfig) -> int:
    """Produce RECORDS records and read them back through a new share group, both over
    GSSAPI; returns how many distinct records the group delivered."""
    topic, group = f"krb-{uuid.uuid4().hex[:8]}", f"krb-group-{uuid.uuid4().hex[:8]}"
    async with Admin(broker.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=2)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    async with Producer(broker.bootstrap, config=ConnectionConfig(sasl=sasl)) as producer:
        futures = [await producer.send(topic, b"v%d" % i) for i in range(RECORDS)]
        await producer.flush()
    assert all(f.done() for f in futures)
    seen: set[bytes] = set()
    async with ShareConsumer(broker.bootstrap, group_id=group, topics=[topic], sasl=sasl) as c:
        with anyio.fail_after(30):
            while len(seen) < RECORDS:
                for record in await c.poll(timeout=1.0):
                    assert record.value is not None
                    seen.add(record.value)
    assert seen == {b"v%d" % i for i in range(RECORDS)}
    return len(seen)


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_keytab_login_produces_and_consumes(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker
) -> None:
    assert gssapi_broker.bootstrap.startswith("localhost:")
    assert await produce_and_consume(gssapi_broker, keytab_login(kdc)) == RECORDS


async def test_ticket_cache_login_produces_and_consumes(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """kinit with the password into a temporary cache; GssapiConfig() uses KRB5CCNAME."""
    monkeypatch.setenv("KRB5CCNAME", kdc.kinit(tmp_path / "ccache"))
    assert await produce_and_consume(gssapi_broker, GssapiConfig()) == RECORDS


async def test_named_ticket_cache_and_service_host(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A named cache, and 127.0.0.1 as the address with the principal's host given apart."""
    cache = kdc.kinit(tmp_path / "ccache")
    sasl = GssapiConfig(principal=kdc.client_principal, ticket_cache=cache, service_host=kdc.host)
    address = gssapi_broker.bootstrap.replace("localhost", "127.0.0.1")
    async with open_cluster(address, ConnectionConfig(sasl=sasl)) as cluster:
        meta = await cluster.refresh_metadata([])
        assert [b.host for b in meta.brokers.values()] == ["localhost"]


async def test_reauthentication_keeps_the_connection(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker grants 3 s sessions: the connection logs in again with a new context."""
    caplog.set_level(logging.DEBUG, logger="sharecon._net.connection")
    config = ConnectionConfig(sasl=keytab_login(kdc))
    async with open_cluster(gssapi_broker.bootstrap, config, metadata_max_age=0) as cluster:
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        with anyio.fail_after(30):
            for _ in range(2):  # two session lifetimes
                await anyio.sleep(REAUTH_MS / 1000)
                async with anyio.create_task_group() as tg:
                    for _ in range(10):
                        tg.start_soon(conn.request, MetadataRequest(topics=()))
        assert await cluster.connection(node) is conn and not conn.closed
    reauths = [r for r in caplog.records if "re-authenticating" in r.getMessage()]
    assert len(reauths) >= 2


async def test_keytab_login_outlives_its_tickets(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Tickets of 4 s: each re-authentication finds them expired and logs in from the keytab
    again, and the connection carries on."""
    caplog.set_level(logging.DEBUG, logger="sharecon._net.connection")
    keytab = tmp_path / "short.keytab"
    name = kdc.add_principal(f"short-{uuid.uuid4().hex[:6]}", keytab=keytab, max_life=4)
    config = ConnectionConfig(sasl=GssapiConfig(principal=name, keytab=keytab))
    async with open_cluster(gssapi_broker.bootstrap, config, metadata_max_age=0) as cluster:
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        with anyio.fail_after(30):
            for _ in range(2):
                await anyio.sleep(4.5)  # past the ticket's end
                await conn.request(MetadataRequest(topics=()))
        assert await cluster.connection(node) is conn and not conn.closed
    reauths = [r for r in caplog.records if "re-authenticating" in r.getMessage()]
    assert len(reauths) >= 2
    # Each came from a new AS exchange: the KDC logged one per login for this principal.
    logins = [ln for ln in kdc.log_path.read_text().splitlines() if "AS_REQ" in ln and name in ln]
    assert len(logins) >= 3


async def test_stalled_kdc_ends_at_the_connect_deadline(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker
) -> None:
    """The KDC is frozen (SIGSTOP): the login waits in a worker thread, and connect_timeout
    still ends it; the event loop stays free meanwhile."""
    config = ConnectionConfig(sasl=keytab_login(kdc), connect_timeout=2.0)  # a fresh cache
    assert kdc.pid is not None
    os.kill(kdc.pid, signal.SIGSTOP)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.1)
            ticks += 1

    failure: errors.BrokerConnectError | None = None
    try:
        started = time.monotonic()
        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                try:
                    async with open_cluster(gssapi_broker.bootstrap, config, bootstrap_timeout=3):
                        pass
                except errors.BrokerConnectError as exc:
                    failure = exc
                tg.cancel_scope.cancel()
        elapsed = time.monotonic() - started
    finally:
        os.kill(kdc.pid, signal.SIGCONT)
    assert failure is not None and "timed out" in str(failure)
    assert elapsed < 12.0  # the 3 s bootstrap timeout, not the 15 s guard (loose: CI is loaded)
    assert ticks >= elapsed / 0.1 * 0.5  # the loop kept running while the KDC did not answer


async def expect_login_failure(broker: KafkaBroker, sasl: GssapiConfig, match: str) -> None:
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(errors.SaslAuthenticationFailedError, match=match):
        async with open_cluster(broker.bootstrap, ConnectionConfig(sasl=sasl)):
            pass
    assert time.monotonic() - started < PROMPT


async def test_unknown_service_principal_fails_promptly(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker
) -> None:
    """A wrong service_name: the KDC knows no such principal, and the error says what to check."""
    sasl = GssapiConfig(
        principal=kdc.client_principal, keytab=kdc.client_keytab, service_name="kafka-typo"
    )
    await expect_login_failure(
        gssapi_broker, sasl, "getting a ticket for kafka-typo/localhost failed.*check service_name"
    )


async def test_keytab_without_the_principal_fails_promptly(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    other = tmp_path / "other.keytab"
    kdc.add_principal(f"other-{uuid.uuid4().hex[:6]}", keytab=other)
    sasl = GssapiConfig(principal=kdc.client_principal, keytab=other)
    await expect_login_failure(
        gssapi_broker, sasl, f"GSSAPI: logging in as {kdc.client_principal} failed.*{other.name}"
    )


async def test_stale_keytab_fails_promptly(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A keytab whose key the KDC no longer has (the principal's key was changed since)."""
    stale = tmp_path / "stale.keytab"
    name = kdc.add_principal(f"stale-{uuid.uuid4().hex[:6]}", keytab=stale)
    kdc.rekey(name)
    await expect_login_failure(
        gssapi_broker, GssapiConfig(principal=name, keytab=stale), f"logging in as {name}"
    )


async def test_absent_ticket_cache_fails_promptly(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    sasl = GssapiConfig(ticket_cache=f"FILE:{tmp_path / 'nothing-here'}")
    await expect_login_failure(gssapi_broker, sasl, "GSSAPI: logging in as .* failed.*kinit")


async def test_expired_ticket_fails_promptly(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    cache = kdc.kinit(tmp_path / "ccache", lifetime="1s")
    await anyio.sleep(2.0)
    sasl = GssapiConfig(ticket_cache=cache)
    await expect_login_failure(
        gssapi_broker, sasl, f"GSSAPI: .*Ticket expired .*no usable ticket in {cache}: run kinit"
    )


def test_cli_keytab_login_from_flags_and_environment(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker
) -> None:
    """``sharecon`` with --sasl-mechanism GSSAPI and the --kerberos-* flags, then the same
    from SHARECON_* variables; a wrong service name is exit 5 (unreachable), promptly."""
    topic = f"krb-cli-{uuid.uuid4().hex[:8]}"
    cli = [sys.executable, "-m", "sharecon.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARECON_")}
    flags = ["--bootstrap", gssapi_broker.bootstrap, "--timeout", "10",
             "--sasl-mechanism", "GSSAPI", "--kerberos-principal", kdc.client_principal,
             "--kerberos-keytab", str(kdc.client_keytab)]  # fmt: skip
    created = subprocess.run(
        [*cli, "topics", "create", topic, *flags], env=env, capture_output=True, text=True
    )
    assert created.returncode == 0, created.stderr
    env |= {
        "SHARECON_BOOTSTRAP": gssapi_broker.bootstrap,
        "SHARECON_SASL_MECHANISM": "GSSAPI",
        "SHARECON_KERBEROS_PRINCIPAL": kdc.client_principal,
        "SHARECON_KERBEROS_KEYTAB": str(kdc.client_keytab),
        "SHARECON_TIMEOUT": "10",
    }
    listed = subprocess.run([*cli, "topics", "list"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr
    started = time.monotonic()
    wrong = subprocess.run(
        [*cli, "topics", "list"],
        env=env | {"SHARECON_KERBEROS_SERVICE_NAME": "kafka-typo"},
        capture_output=True,
        text=True,
    )
    assert wrong.returncode == 5, wrong.stderr
    assert "kafka-typo/localhost" in wrong.stderr and "Traceback" not in wrong.stderr
    assert time.monotonic() - started < PROMPT + 3  # the interpreter's start included


async def test_worker_keytab_login(
    kdc: KerberosKdc, gssapi_broker: KafkaBroker, tmp_path: Path
) -> None:
    """``sharecon worker`` with the Kerberos flags: its process logs in from the keytab
    (the settings reach it on stdin) and handles every record."""
    topic, group = f"krb-w-{uuid.uuid4().hex[:8]}", f"krb-wg-{uuid.uuid4().hex[:8]}"
    async with Admin(gssapi_broker.plaintext_bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1)
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    async with Producer(gssapi_broker.plaintext_bootstrap) as producer:
        for i in range(10):
            await producer.send_and_wait(topic, f"r{i}".encode())
    async with running_worker(
        gssapi_broker.bootstrap,
        tmp_path,
        "tests.worker.handlers:record_id",
        "--group", group, "--topic", topic, "--interval", "1",
        "--sasl-mechanism", "GSSAPI", "--kerberos-principal", kdc.client_principal,
        "--kerberos-keytab", str(kdc.client_keytab),
    ) as worker:  # fmt: skip
        await worker.wait_for("every record handled", lambda: len(counts(tmp_path)) == 10, 30)
        code = await worker.terminate()
    assert code == 0, worker.stderr
    assert set(counts(tmp_path)) == {f"r{i}" for i in range(10)}
