"""The CLI's certificate and --command-config options, without a broker (usage errors).

Runs against real brokers: tests/broker/test_mtls.py and tests/broker/test_security.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.cli.test_cli import UNREACHABLE, assert_clean_error, cli

if TYPE_CHECKING:
    from pathlib import Path


def test_a_key_without_its_certificate_is_a_usage_error() -> None:
    proc = cli("topics", "list", "-b", UNREACHABLE, "--tls-key", "client.key")
    assert_clean_error(proc, 2, "--tls-key needs --tls-cert")


def test_an_unreadable_key_is_named_and_its_password_never_shown(tmp_path: Path) -> None:
    cert = tmp_path / "client.crt"
    cert.write_text("not a certificate\n")
    proc = cli(
        "topics", "list", "-b", UNREACHABLE, "--tls-cert", str(cert),
        env={"SHARECON_TLS_KEY_PASSWORD": "pw-never-shown"},
    )  # fmt: skip
    assert_clean_error(proc, 2, "--tls-cert/--tls-key", str(cert))
    assert "pw-never-shown" not in proc.stderr + proc.stdout


def test_command_config_refuses_security_flags_and_names_a_missing_file(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(f"bootstrap.servers={UNREACHABLE}\n")
    proc = cli("topics", "list", "--command-config", str(props), "--sasl-username", "u")
    assert_clean_error(proc, 2, "drop --sasl-username")
    proc = cli("topics", "list", "--command-config", str(tmp_path / "nope.properties"))
    assert_clean_error(proc, 2, "nope.properties")
    # From the environment too; the file's bootstrap.servers is used (unreachable: exit 5).
    proc = cli("topics", "list", "--timeout", "1", env={"SHARECON_COMMAND_CONFIG": str(props)})
    assert_clean_error(proc, 5, UNREACHABLE)
