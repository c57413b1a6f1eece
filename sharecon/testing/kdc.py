"""A real MIT Kerberos KDC on loopback, with a throwaway realm, for tests of SASL GSSAPI.

::

    with KerberosKdc() as kdc:
        with KafkaBroker(gssapi=kdc.broker_setup()) as broker:
            config = GssapiConfig(principal=kdc.client_principal, keytab=kdc.client_keytab)
            ...

:class:`KerberosKdc` writes a ``krb5.conf`` and a ``kdc.conf`` into a temporary folder,
creates the realm's database (``kdb5_util``), the principals and their keytabs
(``kadmin.local``), and runs ``krb5kdc`` in the foreground on a free 127.0.0.1 port until
:meth:`~KerberosKdc.stop`. Nothing outside the folder is touched: clients find the realm
through ``KRB5_CONFIG`` (:attr:`~KerberosKdc.env`), the broker JVM through
``-Djava.security.krb5.conf``.

It needs MIT Kerberos' server and client programs (Debian: ``krb5-kdc``,
``krb5-admin-server``, ``krb5-user``; ``scripts/kerberos-kit`` installs them);
:class:`KdcStartError` says which is missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sharecon.testing._jvm import free_ports
from sharecon.testing._managed import Server

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["KdcStartError", "KerberosKdc", "KerberosSetup", "kdc_programs"]

log = logging.getLogger("sharecon.testing")

_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "kdestroy")
# Debian puts the KDC's programs in /usr/sbin, which a non-root PATH may lack.
_EXTRA_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
# Java and MIT Kerberos both support these; leaving out the rest keeps the keytabs small.
_ENCTYPES = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"


class KdcStartError(RuntimeError):
    """The KDC could not be set up or started; the message names the step and its output."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KerberosSetup:
    """What a broker needs for a SASL GSSAPI listener (see :meth:`KerberosKdc.broker_setup`).

    :param krb5_conf: the realm's ``krb5.conf`` (given to the JVM).
    :param keytab: the broker's keytab, holding :attr:`principal`'s key.
    :param principal: the broker's service principal, ``kafka/localhost@REALM``.
    :param service_name: ``sasl.kerberos.service.name``.
    :param host: the host clients name in the service principal; the listener advertises it.
    """

    krb5_conf: Path
    keytab: Path
    principal: str
    service_name: str = "kafka"
    host: str = "localhost"


def kdc_programs() -> dict[str, str]:
    """The MIT Kerberos programs the KDC needs, by name, or KdcStartError naming the missing."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_EXTRA_DIRS])
    found = {name: shutil.which(name, path=path) for name in _PROGRAMS}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        raise KdcStartError(
            f"MIT Kerberos programs not found: {', '.join(missing)} (Debian: apt-get install "
            "krb5-kdc krb5-admin-server krb5-user; or run scripts/kerberos-kit)"
        )
    return {name: str(where) for name, where in found.items()}


class KerberosKdc(Server):
    """An MIT KDC for a temporary realm on 127.0.0.1, with a broker and a client principal.

    :param realm: the realm's name.
    :param service_name: the broker's service name; its principal is ``<service>/<host>``.
    :param host: the broker's host name in its principal (clients must use the same).
    :param client: the client principal's name (without the realm).
    :param max_life: longest ticket lifetime the KDC grants, in seconds.
    :param start_timeout: seconds to wait for the KDC to accept connections.

    After :meth:`start`: :attr:`client_keytab`, :attr:`client_password` (for ``kinit``),
    :attr:`krb5_conf`, :attr:`env` and :meth:`kinit`.
    """

    def __init__(
        self,
        realm: str = "SHARECON.TEST",
        *,
        service_name: str = "kafka",
        host: str = "localhost",
        client: str = "sharecon-client",
        max_life: int = 3600,
        start_timeout: float = 20.0,
    ) -> None:
        self.realm = realm
        self.service_name = service_name
        self.host = host
        self.client_principal = f"{client}@{realm}"
        self.broker_principal = f"{service_name}/{host}@{realm}"
        self.max_life = max_life
        self.start_timeout = start_timeout
        # A throwaway password in a throwaway realm: the test needs it for kinit.
        self.client_password = os.urandom(12).hex()
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._programs: dict[str, str] = {}
        self.port = 0

    # -- public surface -------------------------------------------------------

    @property
    def dir(self) -> Path:
        """The temporary folder holding the realm (configs, database, keytabs, log)."""
        if self._dir is None:
            raise KdcStartError("the KDC has not been started")
        return self._dir

    @property
    def krb5_conf(self) -> Path:
        """The clients' ``krb5.conf`` for this realm (point ``KRB5_CONFIG`` at it)."""
        return self.dir / "krb5.conf"

    @property
    def client_keytab(self) -> Path:
        """A keytab with the client principal's key (its password stays valid too)."""
        return self.dir / "client.keytab"

    @property
    def broker_keytab(self) -> Path:
        """The broker's keytab, with :attr:`broker_principal`'s key."""
        return self.dir / "broker.keytab"

    @property
    def log_path(self) -> Path:
        """The KDC's log file."""
        return self.dir / "kdc.log"

    @property
    def env(self) -> dict[str, str]:
        """Environment variables for a Kerberos client of this realm (``KRB5_CONFIG``)."""
        return {"KRB5_CONFIG": str(self.krb5_conf)}

    @property
    def pid(self) -> int | None:
        """The ``krb5kdc`` process id while it runs."""
        return self._proc.pid if self._proc is not None and self.running else None

    @property
    def running(self) -> bool:
        """Whether the ``krb5kdc`` process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def broker_setup(self) -> KerberosSetup:
        """What ``KafkaBroker(gssapi=...)`` needs for a GSSAPI listener of this realm."""
        return KerberosSetup(
            krb5_conf=self.krb5_conf,
            keytab=self.broker_keytab,
            principal=self.broker_principal,
            service_name=self.service_name,
            host=self.host,
        )

    def kinit(self, ccache: str | Path, *, lifetime: str | None = None) -> str:
        """``kinit`` the client principal with its password into ``ccache``; returns the
        cache name (``FILE:...``) for ``KRB5CCNAME`` or ``GssapiConfig(ticket_cache=...)``.

        :param lifetime: the ticket lifetime, in kinit's syntax (``"5s"``, ``"10m"``).
        """
        name = str(ccache) if str(ccache).startswith(("FILE:", "MEMORY:", "DIR:")) else ""
        name = name or f"FILE:{ccache}"
        args = [self._programs["kinit"], "-c", name]
        if lifetime is not None:
            args += ["-l", lifetime]
        self._run([*args, self.client_principal], "kinit", stdin=self.client_password + "\n")
        return name

    def add_principal(
        self, name: str, keytab: Path | None = None, *, max_life: int | None = None
    ) -> str:
        """Add a principal with a random key (to ``keytab`` when given); returns its full name.

        :param max_life: the longest ticket lifetime the principal gets, in seconds.
        """
        full = name if "@" in name else f"{name}@{self.realm}"
        life = f'-maxlife "{max_life} seconds" ' if max_life is not None else ""
        self._kadmin(f"addprinc -randkey {life}{full}")
        if keytab is not None:
            self._kadmin(f"ktadd -k {keytab} {full}")
        return full

    def rekey(self, principal: str) -> None:
        """Give ``principal`` a new random key: keytabs made before hold a stale one."""
        self._kadmin(f"cpw -randkey {principal}")

    def __repr__(self) -> str:
        state = f"running on 127.0.0.1:{self.port}" if self.running else "stopped"
        return f"<KerberosKdc {self.realm} {state}>"

    def start(self) -> Self:
        """Create the realm and its principals, start ``krb5kdc``, wait until it serves.

        :raises KdcStartError: naming the failed step, with its output.
        """
        if self.running:
            return self
        self._programs = kdc_programs()
        try:
            self._dir = Path(tempfile.mkdtemp(prefix="sharecon-kdc-"))
            (self.port,) = free_ports(1)
            self._write_configs()
            self._create_realm()
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the KDC and remove its folder. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- internals ------------------------------------------------------------

    def _write_configs(self) -> None:
        d = self.dir
        # Clients: only this KDC, over TCP (udp_preference_limit=1), and no DNS: the host in
        # a service principal is taken as written, so "localhost" stays "localhost".
        self.krb5_conf.write_text(
            f"""[libdefaults]
    default_realm = {self.realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = {self.max_life}
    forwardable = false
    default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
    default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
    permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
    {self.realm} = {{
        kdc = 127.0.0.1:{self.port}
    }}

[domain_realm]
    {self.host} = {self.realm}
"""
        )
        (d / "kdc.conf").write_text(
            f"""[kdcdefaults]
    kdc_ports = {self.port}
    kdc_tcp_ports = {self.port}
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {self.realm} = {{
        database_name = {d / "principal"}
        key_stash_file = {d / "stash"}
        acl_file = {d / "kadm5.acl"}
        max_life = {self.max_life}s
        max_renewable_life = 0s
        supported_enctypes = {_ENCTYPES}
        master_key_type = aes256-cts-hmac-sha1-96
    }}

[logging]
    kdc = FILE:{self.log_path}
"""
        )
        (d / "kadm5.acl").write_text("")

    def _kdc_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.dir / "kdc.conf"),
        }

    def _run(self, args: list[str], what: str, *, stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                args,
                input=(stdin or "").encode(),
                capture_output=True,
                env=self._kdc_env(),
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KdcStartError(f"{what} failed: {exc}") from exc
        out = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode != 0:
            raise KdcStartError(f"{what} failed (exit {done.returncode}):\n{out[-2000:]}")
        return out

    def _kadmin(self, query: str) -> None:
        # kadmin.local works on the database directly: no kadmind, no admin password.
        self._run(
            [self._programs["kadmin.local"], "-r", self.realm, "-q", query],
            f"kadmin.local {query.split()[0]}",
        )

    def _create_realm(self) -> None:
        master = os.urandom(16).hex()  # the stash file keeps it; nobody types it
        self._run(
            [self._programs["kdb5_util"], "-r", self.realm, "create", "-s", "-W"],
            "kdb5_util create",
            stdin=f"{master}\n{master}\n",
        )
        self.add_principal(
            f"{self.service_name}/{self.host}@{self.realm}", keytab=self.broker_keytab
        )
        # The client keeps its password (for kinit) and gets a keytab of the same key
        # (-norandkey, which only kadmin.local offers).
        # The password goes in on stdin (kadmin prompts twice), never on a command line.
        self._run(
            [self._programs["kadmin.local"], "-r", self.realm, "-q",
             f"addprinc {self.client_principal}"],
            "kadmin.local addprinc (client)",
            stdin=f"{self.client_password}\n{self.client_password}\n",
        )  # fmt: skip
        self._kadmin(f"ktadd -k {self.client_keytab} -norandkey {self.client_principal}")

    def _launch(self) -> None:
        started = time.monotonic()
        with open(self.dir / "krb5kdc.out", "wb") as out:
            self._proc = subprocess.Popen(
                [self._programs["krb5kdc"], "-n", "-r", self.realm],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._kdc_env(),
                start_new_session=True,  # a Ctrl-C of the test run does not reach it first
            )
        deadline = started + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KdcStartError(f"krb5kdc exited with {self._proc.returncode}:\n{self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    log.info(
                        "KDC for %s up on 127.0.0.1:%d in %.1f s",
                        self.realm,
                        self.port,
                        time.monotonic() - started,
                    )
                    return
            except OSError:
                time.sleep(0.1)
        raise KdcStartError(
            f"krb5kdc did not listen on 127.0.0.1:{self.port} within {self.start_timeout:g} s:\n"
            f"{self._tail()}"
        )

    def _tail(self) -> str:
        texts = []
        for name in ("krb5kdc.out", "kdc.log"):
            path = self.dir / name
            if path.exists():
                texts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(texts)
