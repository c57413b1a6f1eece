"""A real Apache Kafka 4.x broker (KRaft, one combined node, share groups on) for tests and demos.

::

    with KafkaBroker("4.4.0") as broker:
        broker.tools.create_topic("orders", partitions=3)
        run_my_consumer(broker.bootstrap)

The first use of a version fetches its jars with Maven into the cache (see
:func:`sharecon.testing._provision.provision`); later starts are offline. Each broker
formats fresh storage in a temporary folder, listens on loopback only, and is killed
(with its folder removed) however the Python process ends: ``stop()``, the context
manager, interpreter exit, or a watchdog if the process is killed outright.

Run one in the foreground: ``python -m sharecon.testing.broker --version 4.4.0 --port 9092``.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.testing._jvm import (
    DEFAULT_JVM_OPTS,
    NodeProcess,
    PortTaken,
    free_ports,
    minor,
    new_cluster_id,
)
from sharecon.testing._managed import Server
from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    ClassArchive,
    KafkaInstall,
    find_java,
    provision,
    resolve_version,
    tail,
)
from sharecon.testing.tools import KafkaTools

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from typing_extensions import Self

    from sharecon.testing.kdc import KerberosSetup

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "AuthorizerSetup",
    "BrokerStartError",
    "ClientCertificate",
    "KafkaBroker",
    "OAuthSetup",
    "SaslSetup",
    "TlsSetup",
    "main",
]

log = logging.getLogger("sharecon.testing")

_DEFAULT_START_TIMEOUT = 120.0  # a cold JVM on a busy 2-core machine takes ~8 s
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_OAUTH_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)
# Kafka 4.x refuses to fetch a JWKS (or token) URL not listed in this JVM system property.
_OAUTH_ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"

#: Broker settings every test broker gets. Lock, heartbeat and session minimums are lowered
#: so one group can opt into short values (``share.record.lock.duration.ms=1000`` for a
#: lock-expiry test) while the defaults stay far from flaky.
TEST_BROKER_CONFIG: dict[str, str] = {
    "auto.create.topics.enable": "false",  # tests create what they use; typos fail loudly
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    # The cleaner's dedupe buffer is allocated on the heap: 128 MiB by default.
    "log.cleaner.dedupe.buffer.size": "2097152",
    # An idle cleaner looks for work every 15 s by default; tests of compaction wait on it.
    "log.cleaner.backoff.ms": "1000",
    "log.segment.delete.delay.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.session.timeout.ms": "10000",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "2000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "15000",
}
#: Keys that exist only from 4.3 on (older brokers would log them as unused).
CONFIG_4_3: dict[str, str] = {
    "group.share.assignment.interval.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslSetup:
    """Add a SASL listener to the test broker.

    ``users`` maps user name to password; each is valid for every mechanism listed
    (SCRAM credentials are written at format time).
    """

    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    users: Mapping[str, str] = field(default_factory=lambda: {"sharecon": "sharecon-secret"})
    #: How the broker validates OAUTHBEARER tokens; required when ``OAUTHBEARER`` is listed.
    oauth: OAuthSetup | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthSetup:
    """OAUTHBEARER on the SASL listener, validated by Kafka's OIDC validator (KIP-768).

    The broker fetches the issuer's keys from ``jwks_url`` and checks each token's
    signature, ``exp``, ``aud`` and ``iss``; :meth:`sharecon.testing.oidc.OidcIssuer.broker_setup`
    fills it in for the test kit's issuer.

    :param jwks_url: the issuer's JSON Web Key Set.
    :param token_url: the token endpoint (listed in the JVM's allowed URLs too).
    :param issuer: the expected ``iss``.
    :param audience: the expected ``aud``.
    :param clock_skew_seconds: tolerance on ``exp``/``nbf`` (Kafka's default is 30).
    """

    jwks_url: str
    token_url: str = ""
    issuer: str = ""
    audience: str = ""
    clock_skew_seconds: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerSetup:
    """Turn on ACLs: Kafka's ``StandardAuthorizer``, nothing allowed without an ACL.

    ``super_users`` (user names of the SASL listener, e.g. an ``admin``) may do anything.
    So may every connection to the PLAINTEXT listener (its principal is
    ``User:ANONYMOUS``): :attr:`KafkaBroker.tools`, the broker itself and its controller
    use it. Clients under test use the SASL listener (:attr:`KafkaBroker.bootstrap`), as a
    user granted ACLs with :meth:`sharecon.testing.tools.KafkaTools.add_acls`.
    """

    super_users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSetup:
    """Serve the client listener over TLS with a throwaway CA made by ``keytool``.

    The CA certificate (PEM) is at :attr:`KafkaBroker.tls_ca_file` after start.

    :param client_auth: require a client certificate signed by the test CA
        (``ssl.client.auth=required``); mint them with
        :meth:`KafkaBroker.mint_client_certificate`. The principal is the certificate's
        subject DN, Kafka's default mapping (``User:CN=alice,O=sharecon tests``).
    """

    validity_days: int = 7
    client_auth: bool = False


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    """A client certificate signed by a test broker's CA, as PEM files a client loads.

    :param cert_file: the certificate (PEM).
    :param key_file: its private key (PEM; PKCS#8, encrypted when ``key_password`` is set).
    :param key_password: the key's password, or None for an unencrypted key.
    :param principal: what the broker sees: ``User:`` and the subject DN.
    """

    cert_file: Path
    key_file: Path
    key_password: str | None = field(default=None, repr=False)
    principal: str = ""


def _oauth_config(oauth: OAuthSetup) -> dict[str, str]:
    prefix = "listener.name.client.oauthbearer."
    conf = {
        prefix + "sasl.server.callback.handler.class": _OAUTH_VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": oauth.jwks_url,
        "sasl.oauthbearer.clock.skew.seconds": str(oauth.clock_skew_seconds),
    }
    if oauth.audience:
        conf["sasl.oauthbearer.expected.audience"] = oauth.audience
    if oauth.issuer:
        conf["sasl.oauthbearer.expected.issuer"] = oauth.issuer
    return conf


class KafkaBroker(Server):
    """One Kafka broker+controller process on 127.0.0.1 with share groups enabled.

    :param version: a Kafka 4.1+ version (``"4.4.0"``) or line (``"4.2"`` = newest known patch).
    :param port: the port of :attr:`bootstrap`; 0 picks a free one.
    :param sasl: add a SASL listener (then :attr:`bootstrap` points at it); ``"PLAIN"`` or
        ``"SCRAM-SHA-256"`` is short for a :class:`SaslSetup` with that one mechanism.
    :param tls: serve the client listener over TLS (``True`` or a :class:`TlsSetup`).
    :param gssapi: offer SASL GSSAPI (Kerberos) on the client listener, for the realm of a
        :class:`~sharecon.testing.kdc.KerberosKdc` (``kdc.broker_setup()``); the listener then
        advertises the service principal's host (``localhost``), and so does :attr:`bootstrap`.
    :param authorizer: turn ACLs on (``True`` or an :class:`AuthorizerSetup`); needs ``sasl``,
        whose users are the principals ACLs are granted to.
    :param extra_config: broker properties that override the test defaults.
    :param features: ``--feature name=level`` at format time, e.g. ``{"share.version": 1}``.
        4.1 gets ``share.version=1`` unless told otherwise; 4.2+ finalize share groups by default.
    :param start_timeout: seconds to wait for the broker to serve.
    :param jvm_opts: JVM options replacing the defaults (small heap, serial GC).
    :param plugins: jars or class folders added to the broker's classpath (after Kafka's
        own), for plugins named in ``extra_config`` such as a ``metric.reporters`` class.

    Tools for arranging tests (topics, group configs, producing) are at :attr:`tools`.
    When SASL or TLS is on they use a separate PLAINTEXT listener, :attr:`plaintext_bootstrap`.
    """

    def __init__(
        self,
        version: str = DEFAULT_KAFKA_VERSION,
        port: int = 0,
        *,
        sasl: SaslSetup | str | None = None,
        tls: TlsSetup | bool | None = None,
        gssapi: KerberosSetup | None = None,
        authorizer: AuthorizerSetup | bool | None = None,
        extra_config: Mapping[str, str] | None = None,
        features: Mapping[str, int] | None = None,
        start_timeout: float | None = None,
        jvm_opts: list[str] | None = None,
        plugins: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self.version = resolve_version(version)
        self._plugins = tuple(os.fspath(p) for p in plugins)
        if not 0 <= port <= 65535:
            raise BrokerStartError(f"port {port} is outside 0..65535")
        self._want_port = port
        if isinstance(sasl, str):
            if sasl not in _LOGIN_MODULES:
                raise BrokerStartError(
                    f"unknown SASL mechanism {sasl!r}; expected one of {sorted(_LOGIN_MODULES)}"
                )
            sasl = SaslSetup(mechanisms=(sasl,))
        if sasl is not None:
            bad = [m for m in sasl.mechanisms if m not in _LOGIN_MODULES]
            if bad or not sasl.mechanisms or not sasl.users:
                raise BrokerStartError(f"bad SASL setup {sasl!r}: mechanisms {bad} / no users")
            if ("OAUTHBEARER" in sasl.mechanisms) != (sasl.oauth is not None):
                raise BrokerStartError("SASL OAUTHBEARER and SaslSetup.oauth go together")
        self.sasl: SaslSetup | None = sasl
        self.tls: TlsSetup | None = TlsSetup() if tls is True else (tls or None)
        self.gssapi: KerberosSetup | None = gssapi
        self.authorizer: AuthorizerSetup | None = (
            AuthorizerSetup() if authorizer is True else (authorizer or None)
        )
        if self.authorizer is not None and sasl is None:
            # Without SASL every client is User:ANONYMOUS, the tools' super user.
            raise BrokerStartError("authorizer needs a SASL listener (sasl=...) for its users")
        self._extra = dict(extra_config or {})
        self._features = dict(features or {})
        if self.version.startswith("4.1.") and "share.version" not in self._features:
            # 4.1 formats share.version=0 (share groups are a preview there).
            self._features["share.version"] = 1
        env_timeout = os.environ.get("SHARECON_BROKER_START_TIMEOUT")
        self.start_timeout = start_timeout or (
            float(env_timeout) if env_timeout else _DEFAULT_START_TIMEOUT
        )
        env_opts = os.environ.get("SHARECON_BROKER_JVM_OPTS")
        self._jvm_opts = jvm_opts or (env_opts.split() if env_opts else list(DEFAULT_JVM_OPTS))
        if sasl is not None and sasl.oauth is not None:
            urls = ",".join(u for u in (sasl.oauth.jwks_url, sasl.oauth.token_url) if u)
            self._jvm_opts = [*self._jvm_opts, f"-D{_OAUTH_ALLOWED_URLS}={urls}"]
        self._install: KafkaInstall | None = None
        self._java = ""
        self._res = NodeProcess()
        self._finalizer = weakref.finalize(self, self._res.cleanup)
        self._client_port = 0
        self._plain_port = 0
        self._controller_port = 0
        self._tools: KafkaTools | None = None
        self.tls_ca_file: Path | None = None  #: PEM of the CA that signed the broker's certificate

    # -- public surface -------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the client listener (SASL/TLS when configured);
        ``localhost:PORT`` with GSSAPI, whose service principal names that host."""
        self._require_started()
        return f"{self._client_host}:{self._client_port}"

    @property
    def _client_host(self) -> str:
        return self.gssapi.host if self.gssapi is not None else "127.0.0.1"

    @property
    def plaintext_bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the PLAINTEXT listener (the same as :attr:`bootstrap` without SASL/TLS)."""
        self._require_started()
        return f"127.0.0.1:{self._plain_port}"

    @property
    def port(self) -> int:
        """The port of :attr:`bootstrap`."""
        self._require_started()
        return self._client_port

    @property
    def log_path(self) -> Path:
        """The broker's log file (inside its temporary folder, so gone after :meth:`stop`)."""
        if self._res.dir is None:
            raise BrokerStartError("the broker has not been started")
        return self._res.dir / "broker.log"

    @property
    def data_dir(self) -> Path:
        """The temporary folder holding config, KRaft metadata and log segments."""
        if self._res.dir is None:
            raise BrokerStartError("the broker has not been started")
        return self._res.dir

    @property
    def running(self) -> bool:
        """Whether the broker JVM is alive."""
        return self._res.proc is not None and self._res.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id while it runs."""
        return self._res.proc.pid if self.running and self._res.proc else None

    @property
    def tools(self) -> KafkaTools:
        """Kafka's Java tools (same version) pointed at :attr:`plaintext_bootstrap`."""
        self._require_started()
        if self._tools is None:
            assert self._install is not None
            self._tools = KafkaTools(self.plaintext_bootstrap, install=self._install)
        return self._tools

    def __repr__(self) -> str:
        state = f"running on {self.bootstrap}" if self.running else "stopped"
        return f"<KafkaBroker {self.version} {state}>"

    def start(self) -> Self:
        """Provision, format, launch and wait until the broker serves. Idempotent while running.

        :raises BrokerStartError: naming the failed step, with the tail of its output.
        """
        if self.running:
            return self
        if self._res.dir is not None:
            self._launch_and_wait()  # killed earlier: come back on the same data
            return self
        self._java = find_java()
        self._install = provision(self.version)
        self._res.archive = ClassArchive(self._install, self._java, "broker")
        attempts = 3 if self._want_port == 0 else 1
        for attempt in range(1, attempts + 1):
            try:
                self._prepare()
                self._launch_and_wait()
                return self
            except PortTaken as exc:
                self._res.cleanup()
                if attempt == attempts:
                    raise BrokerStartError(str(exc)) from None
                log.info("port race on start (%s), retrying with new ports", exc)
            except BaseException:
                self._res.cleanup()
                raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 30 s) and remove its folder. Idempotent."""
        self._res.stop_jvm(graceful=True)
        self._res.cleanup()
        self._tools = None

    def kill(self) -> None:
        """SIGKILL the broker JVM, keeping its data so :meth:`restart` can bring it back."""
        self._res.stop_jvm(graceful=False)

    def restart(self) -> None:
        """Stop (gracefully, if still running) and start again with the same data and ports."""
        if self._res.dir is None:
            raise BrokerStartError("restart() needs a broker that was started")
        self._res.stop_jvm(graceful=True)
        self._launch_and_wait()

    def relocate(self) -> None:
        """Stop (gracefully) and start again with the same data on new client ports,
        advertised as such: every address a client learned goes dead, as when a
        Kubernetes pod is rescheduled. :attr:`bootstrap` names the new address.

        The controller keeps its port (a static KRaft quorum is named in the config).
        """
        self._require_started()
        if self._want_port:
            raise BrokerStartError("relocate() needs a broker started with port=0")
        self._res.stop_jvm(graceful=True)
        secured = self.sasl is not None or self.tls is not None or self.gssapi is not None
        old = {self._client_port, self._plain_port}
        ports = [p for p in free_ports(4) if p not in old and p != self._controller_port]
        self._client_port = ports[0]
        self._plain_port = ports[1] if secured else self._client_port
        assert self._res.dir is not None
        self._res.write_config(self._server_config(self._res.dir))
        self._launch_and_wait()

    # -- internals ------------------------------------------------------------

    def _require_started(self) -> None:
        if self._client_port == 0:
            raise BrokerStartError("the broker has not been started")

    def _prepare(self) -> None:
        """Fresh folder, ports, config files, certificates, and ``kafka-storage format``."""
        assert self._install is not None
        tmp = Path(tempfile.mkdtemp(prefix=f"sharecon-kafka-{self.version}-"))
        self._res.dir = tmp
        secured = self.sasl is not None or self.tls is not None or self.gssapi is not None
        if self._want_port:
            _check_port_free(self._want_port)
        ports = free_ports(3)
        self._client_port = self._want_port or ports[0]
        self._plain_port = ports[1] if secured else self._client_port
        self._controller_port = ports[2]
        if self.tls is not None:
            self._make_certificates(tmp)
        self._res.write_config(self._server_config(tmp))
        self._format()

    def _server_config(self, tmp: Path) -> dict[str, str]:
        listeners = [f"PLAINTEXT://127.0.0.1:{self._plain_port}"]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        if self._plain_port != self._client_port:
            proto = {
                (True, False): "SASL_PLAINTEXT",
                (False, True): "SSL",
                (True, True): "SASL_SSL",
            }[(self.sasl is not None or self.gssapi is not None, self.tls is not None)]
            listeners.insert(0, f"CLIENT://127.0.0.1:{self._client_port}")
            protocols.append(f"CLIENT:{proto}")
        advertised = list(listeners)
        if self.gssapi is not None:
            # Binds 127.0.0.1 as ever, but advertises the host of the service principal:
            # a Kerberos client names the broker's principal after the host it connects to.
            advertised[0] = f"CLIENT://{self.gssapi.host}:{self._client_port}"
        conf = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self._controller_port}",
            "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{self._controller_port}"]),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(tmp / "kraft-logs"),
        }
        conf.update(TEST_BROKER_CONFIG)
        if minor(self.version) >= 3:
            conf.update(CONFIG_4_3)
        if self.sasl is not None or self.gssapi is not None:
            mechanisms = [
                *(self.sasl.mechanisms if self.sasl else ()),
                *(["GSSAPI"] if self.gssapi else []),
            ]
            conf["listener.name.client.sasl.enabled.mechanisms"] = ",".join(mechanisms)
        if self.gssapi is not None:
            k = self.gssapi
            conf["listener.name.client.gssapi.sasl.jaas.config"] = (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'storeKey=true keyTab="{k.keytab}" principal="{k.principal}";'
            )
            conf["sasl.kerberos.service.name"] = k.service_name
            conf["listener.name.client.gssapi.sasl.kerberos.service.name"] = k.service_name
        if self.sasl is not None:
            if self.sasl.oauth is not None:
                conf.update(_oauth_config(self.sasl.oauth))
            for mech in self.sasl.mechanisms:
                users = ""
                if mech == "PLAIN":
                    users = "".join(f' user_{name}="{pw}"' for name, pw in self.sasl.users.items())
                conf[f"listener.name.client.{mech.lower()}.sasl.jaas.config"] = (
                    f"{_LOGIN_MODULES[mech]} required{users};"
                )
        if self.tls is not None and self.tls.client_auth:
            conf["listener.name.client.ssl.client.auth"] = "required"
            conf["listener.name.client.ssl.truststore.type"] = "PEM"
            conf["listener.name.client.ssl.truststore.location"] = str(tmp / "tls" / "ca.pem")
        if self.authorizer is not None:
            conf["authorizer.class.name"] = (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            )
            conf["allow.everyone.if.no.acl.found"] = "false"
            supers = ["User:ANONYMOUS", *(f"User:{u}" for u in self.authorizer.super_users)]
            conf["super.users"] = ";".join(supers)
        if self.tls is not None:
            conf["listener.name.client.ssl.keystore.location"] = str(tmp / "tls" / "broker.p12")
            conf["listener.name.client.ssl.keystore.type"] = "PKCS12"
            conf["listener.name.client.ssl.keystore.password"] = _STORE_PASSWORD
            conf["listener.name.client.ssl.key.password"] = _STORE_PASSWORD
        conf.update(self._extra)
        return conf

    def _format(self) -> None:
        assert self._install is not None
        scram: list[str] = []
        if self.sasl is not None:
            for mech in self.sasl.mechanisms:
                if mech.startswith("SCRAM"):
                    for user, pw in self.sasl.users.items():
                        scram += ["--add-scram", f"{mech}=[name={user},password={pw}]"]
        self._res.format(
            self._java,
            self._install,
            new_cluster_id(),
            features=self._features,
            extra_args=scram,
        )

    def _make_certificates(self, tmp: Path) -> None:
        assert self.tls is not None
        keytool = str(Path(self._java).with_name("keytool"))
        if not os.access(keytool, os.X_OK):
            keytool = shutil.which("keytool") or keytool
        tls = tmp / "tls"
        tls.mkdir()
        ca, broker = str(tls / "ca.p12"), str(tls / "broker.p12")
        days = str(self.tls.validity_days)
        common = ["-storepass", _STORE_PASSWORD, "-storetype", "PKCS12"]
        steps: list[tuple[list[str], str | None]] = [
            (["-genkeypair", "-alias", "ca", "-dname", "CN=sharecon test CA", "-ext", "bc:c", "-ext", "KU:c=keyCertSign,cRLSign",
              "-keyalg", "RSA", "-keysize", "2048", "-validity", days, "-keystore", ca, *common], None),
            (["-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, *common], "ca.pem"),
            (["-genkeypair", "-alias", "broker", "-dname", "CN=localhost", "-keyalg", "RSA",
              "-keysize", "2048", "-validity", days, "-keystore", broker, *common], None),
            (["-certreq", "-alias", "broker", "-keystore", broker, *common], "broker.csr"),
            (["-gencert", "-alias", "ca", "-keystore", ca, "-infile", str(tls / "broker.csr"),
              "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-ext", "EKU=serverAuth", "-ext", "KU=digitalSignature,keyEncipherment",
              "-validity", days, "-rfc", *common], "broker.pem"),
            (["-importcert", "-noprompt", "-alias", "ca", "-file", str(tls / "ca.pem"),
              "-keystore", broker, *common], None),
            (["-importcert", "-noprompt", "-alias", "broker", "-file", str(tls / "broker.pem"),
              "-keystore", broker, *common], None),
        ]  # fmt: skip
        for args, out_name in steps:
            out = _run_tool([keytool, *args])
            if out_name:
                (tls / out_name).write_text(out)
        self.tls_ca_file = tls / "ca.pem"

    def mint_client_certificate(
        self,
        directory: str | os.PathLike[str],
        common_name: str = "client",
        *,
        key_password: str | None = None,
        validity_days: int | None = None,
    ) -> ClientCertificate:
        """Make a client key and a certificate for it signed by this broker's test CA.

        The key is made by ``openssl`` (keytool cannot write a private key as PEM) and
        signed by ``keytool`` with the CA the broker trusts. Files ``<common_name>.crt``
        and ``<common_name>.key`` are (over)written in ``directory``; the key is encrypted
        (PKCS#8, AES-256) when ``key_password`` is given.

        :raises BrokerStartError: the broker has no TLS, or a tool failed.
        """
        if self.tls is None or self._res.dir is None:
            raise BrokerStartError("mint_client_certificate needs a started broker with tls=")
        openssl = shutil.which("openssl")
        if openssl is None:
            raise BrokerStartError("mint_client_certificate needs the openssl command")
        keytool = str(Path(self._java).with_name("keytool"))
        if not os.access(keytool, os.X_OK):
            keytool = shutil.which("keytool") or keytool
        out_dir = Path(directory)
        out_dir.mkdir(parents=True, exist_ok=True)
        tls = self._res.dir / "tls"
        key, csr = out_dir / f"{common_name}.key", tls / f"{common_name}.csr"
        subject = f"/O=sharecon tests/CN={common_name}"
        # The password reaches openssl through its environment, never its command line.
        env = {**os.environ, "SHARECON_MINT_KEY_PASSWORD": key_password or ""}
        protect = ["-passout", "env:SHARECON_MINT_KEY_PASSWORD"] if key_password else ["-nodes"]
        _run_tool(
            [openssl, "req", "-new", "-newkey", "rsa:2048", *protect, "-keyout", str(key),
             "-subj", subject, "-out", str(csr)],
            env=env,
        )  # fmt: skip
        days = str(validity_days or self.tls.validity_days)
        pem = _run_tool(
            [keytool, "-gencert", "-alias", "ca", "-keystore", str(tls / "ca.p12"),
             "-storepass", _STORE_PASSWORD, "-storetype", "PKCS12", "-infile", str(csr),
             "-ext", "EKU=clientAuth", "-ext", "KU=digitalSignature", "-validity", days, "-rfc"]
        )  # fmt: skip
        cert = out_dir / f"{common_name}.crt"
        cert.write_text(pem)
        key.chmod(0o600)
        return ClientCertificate(
            cert, key, key_password, principal=f"User:CN={common_name},O=sharecon tests"
        )

    def _launch_and_wait(self) -> None:
        assert self._install is not None
        started = time.monotonic()
        jvm_opts = list(self._jvm_opts)
        if self.gssapi is not None:
            # The realm comes from the KDC's krb5.conf, not the machine's /etc/krb5.conf.
            jvm_opts.append(f"-Djava.security.krb5.conf={self.gssapi.krb5_conf}")
        offset = self._res.launch(self._java, jvm_opts, self._install, self._plugins)
        try:
            self._res.wait_ready(
                offset,
                port=self._plain_port,
                what=f"Kafka {self.version}",
                started=started,
                timeout=self.start_timeout,
                ports_fixed=self._want_port != 0,
            )
        except BaseException:
            self._res.stop_jvm(graceful=False)
            raise
        assert self._res.proc is not None
        log.info(
            "Kafka %s up on %s in %.1f s (pid %d)",
            self.version,
            self.bootstrap,
            time.monotonic() - started,
            self._res.proc.pid,
        )


_STORE_PASSWORD = "sharecon-test"  # throwaway keystores in a temporary folder


def _run_tool(argv: list[str], env: Mapping[str, str] | None = None) -> str:
    """Run keytool or openssl; its stdout, or BrokerStartError with the tail of its output."""
    what = f"{Path(argv[0]).name} {argv[1]}"
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerStartError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        raise BrokerStartError(f"{what} failed:\n{tail(done.stdout + done.stderr)}")
    return done.stdout


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the broker's own listener does (the JVM sets SO_REUSEADDR): connections of a
        # broker just stopped on this port linger in TIME_WAIT for a minute, and must not
        # make a restart on the same port fail. A live listener still fails the bind.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise BrokerStartError(f"port {port} on 127.0.0.1 is already in use") from None
            raise BrokerStartError(f"cannot use port {port}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m sharecon.testing.broker``: run a broker in the foreground until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m sharecon.testing.broker",
        description="Run a real Kafka broker (KRaft, share groups on) on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument(
        "--version", default=DEFAULT_KAFKA_VERSION, help="Kafka version (default %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=9092, help="client port, 0 = any free (default %(default)s)"
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="extra broker property"
    )
    parser.add_argument(
        "--feature",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="feature level at format",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        extra = dict(_split_pair(p, "--config") for p in args.config)
        feats = {k: int(v) for k, v in (_split_pair(p, "--feature") for p in args.feature)}
        broker = KafkaBroker(args.version, args.port, extra_config=extra, features=feats)
        broker.start()
    except (BrokerStartError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    try:
        # Inside the try: a Ctrl-C may come as soon as the address is out (a caller reads
        # it and stops the broker), even before these prints return.
        signal.signal(signal.SIGTERM, on_signal)
        print(broker.bootstrap, flush=True)
        print(
            f"Kafka {broker.version} running (log: {broker.log_path}); Ctrl-C to stop",
            file=sys.stderr,
        )
        while not stop["now"] and broker.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        code = 0 if broker.running else 1
        if code:
            print(
                f"Kafka exited unexpectedly:\n{tail(broker.log_path.read_text(errors='replace'))}",
                file=sys.stderr,
            )
        broker.stop()
    print("stopped", file=sys.stderr)
    return code


def _split_pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"{flag} wants KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


if __name__ == "__main__":
    sys.exit(main())
