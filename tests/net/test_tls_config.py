"""TlsConfig without a broker: loading, errors that keep secrets out, reuse and reload.

Certificates are made with openssl in a temporary folder (a CA, and client keys signed
by it); whether a broker accepts them is tests/broker/test_mtls.py's job.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon.config import ConnectionConfig, TlsConfig

if TYPE_CHECKING:
    from pathlib import Path

PASSWORD = "Secr3t-key-pw"


def _openssl(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        ["openssl", *args],
        check=True,
        capture_output=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def _client(folder: Path, ca: Path, ca_key: Path, name: str, password: str | None = None) -> None:
    key, csr, crt = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.crt"
    protect = ["-passout", "env:PW"] if password else ["-nodes"]
    _openssl("req", "-new", "-newkey", "rsa:2048", *protect, "-keyout", str(key),
             "-subj", f"/CN={name}", "-out", str(csr), env={"PW": password or ""})  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
             "-CAcreateserial", "-days", "1", "-out", str(crt))  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ca.pem``; ``alice`` and ``carol`` (plain keys), ``bob`` (encrypted with PASSWORD)."""
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
             "-out", str(ca), "-days", "1", "-subj", "/CN=test CA")  # fmt: skip
    _client(folder, ca, ca_key, "alice")
    _client(folder, ca, ca_key, "bob", PASSWORD)
    _client(folder, ca, ca_key, "carol")
    return folder


def test_loads_files_and_keeps_the_password_out_of_repr(pki: Path) -> None:
    tls = TlsConfig(
        ca_file=pki / "ca.pem",
        cert_file=pki / "bob.crt",
        key_file=pki / "bob.key",
        key_password=PASSWORD,
    )
    assert tls.mutual and tls.ca_file == str(pki / "ca.pem")
    assert PASSWORD not in repr(tls) + repr(ConnectionConfig(tls=tls))
    assert tls.context().verify_mode.name == "CERT_REQUIRED"
    assert tls.context().check_hostname


@pytest.mark.parametrize(
    ("key", "password", "says"),
    [
        ("bob.key", "not-it", "wrong key_password"),
        ("bob.key", None, "encrypted and no key_password"),
        ("alice.key", PASSWORD + "x", None),  # a plain key: the password is not needed
    ],
)
def test_key_password_errors_name_the_file_never_the_secret(
    pki: Path, key: str, password: str | None, says: str | None
) -> None:
    cert = "bob.crt" if key == "bob.key" else "alice.crt"
    make = lambda: TlsConfig(  # noqa: E731
        cert_file=pki / cert, key_file=pki / key, key_password=password
    )
    if says is None:
        make()
        return
    with pytest.raises(errors.ConfigError, match=says) as info:
        make()
    assert str(pki / cert) in str(info.value)
    assert "not-it" not in str(info.value) and PASSWORD not in str(info.value)


def test_wrong_pairs_and_paths_are_config_errors(pki: Path) -> None:
    with pytest.raises(errors.ConfigError, match="does not belong to the certificate"):
        TlsConfig(cert_file=pki / "alice.crt", key_file=pki / "bob.key", key_password=PASSWORD)
    with pytest.raises(errors.ConfigError, match="nope.pem: cannot load CA"):
        TlsConfig(ca_file=pki / "nope.pem")
    with pytest.raises(errors.ConfigError, match="needs its certificate"):
        TlsConfig(key_file=pki / "alice.key")
    with pytest.raises(errors.ConfigError, match="not both"):
        ConnectionConfig(ssl_context=TlsConfig().context(), tls=TlsConfig())


def test_hostname_check_off_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sharecon._net.tls"):
        tls = TlsConfig(check_hostname=False)
    assert not tls.context().check_hostname
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "hostname verification is off" in caplog.text


def test_context_is_reused_until_a_file_changes_then_rebuilt(pki: Path, tmp_path: Path) -> None:
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    shutil.copy(pki / "alice.crt", cert)
    shutil.copy(pki / "alice.key", key)
    tls = TlsConfig(ca_file=pki / "ca.pem", cert_file=cert, key_file=key)
    first = tls.context()
    assert all(tls.context() is first for _ in range(100))
    assert tls._cache.builds == 1
    # Renewed (cert-manager, a cron job): the new key is written first; until its
    # certificate follows, the pair does not match and the old context stays in use.
    shutil.copy(pki / "carol.key", key)
    assert tls.context() is first
    shutil.copy(pki / "carol.crt", cert)
    second = tls.context()
    assert second is not first and tls._cache.builds == 2
    assert tls.context() is second


def test_a_half_replaced_pair_warns_once_and_keeps_the_old_context(
    pki: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    shutil.copy(pki / "alice.crt", cert)
    shutil.copy(pki / "alice.key", key)
    tls = TlsConfig(cert_file=cert, key_file=key)
    good = tls.context()
    shutil.copy(pki / "bob.crt", cert)  # the new certificate, its key not written yet
    with caplog.at_level(logging.WARNING, logger="sharecon._net.tls"):
        for _ in range(5):
            assert tls.context() is good
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "still using the certificates loaded before" in caplog.text


def test_checking_unchanged_files_costs_a_few_microseconds(pki: Path) -> None:
    """What each new connection pays: three stats, against a full load when one changed."""
    tls = TlsConfig(ca_file=pki / "ca.pem", cert_file=pki / "alice.crt", key_file=pki / "alice.key")
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        tls.context()
    check = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for _ in range(20):
        tls._build()
    build = (time.perf_counter() - start) / 20
    # Generous bounds for a loaded machine; measured 62 us against 6.5 ms at load 12 on
    # 2 cores (a stat there cost 5 us).
    assert check < 1e-3, check
    assert check * 5 < build, (check, build)
