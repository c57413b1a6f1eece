"""Kerberos (SASL GSSAPI) settings of the CLI and the worker: --sasl-mechanism GSSAPI with
the --kerberos-* flags and SHARECON_KERBEROS_* variables, mapped to GssapiConfig.

Only the parsing is tested here (the gssapi package is replaced, so no KDC is needed); the
login itself runs against a real KDC and broker in tests/broker/test_kerberos.py, the CLI's
too.
"""

from __future__ import annotations

import argparse
import types
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon._net import sasl_gssapi
from sharecon.cli._common import CliError, add_client_options, client_options
from sharecon.config import GssapiConfig
from sharecon.worker._config import WorkerConfig, config_from_sources

if TYPE_CHECKING:
    from pathlib import Path

PRINCIPAL = "app@EXAMPLE.COM"


@pytest.fixture(autouse=True)
def no_gssapi_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """GssapiConfig only checks that gssapi imports; a stand-in module is enough here."""
    monkeypatch.setattr(sasl_gssapi, "_gssapi", lambda: types.ModuleType("gssapi"))
    for name in ("PRINCIPAL", "KEYTAB", "SERVICE_NAME"):
        monkeypatch.delenv(f"SHARECON_KERBEROS_{name}", raising=False)
    for name in ("SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD", "COMMAND_CONFIG"):
        monkeypatch.delenv(f"SHARECON_{name}", raising=False)


@pytest.fixture
def keytab(tmp_path: Path) -> str:
    path = tmp_path / "app.keytab"
    path.write_bytes(b"\x05\x02")  # only its readability is checked before a login
    return str(path)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_client_options(parser)
    return parser.parse_args(argv)


def test_cli_keytab_login(keytab: str) -> None:
    args = parse("--sasl-mechanism", "gssapi", "--kerberos-principal", PRINCIPAL,
                 "--kerberos-keytab", keytab, "--kerberos-service-name", "kafka-prod")  # fmt: skip
    sasl = client_options(args).sasl
    assert isinstance(sasl, GssapiConfig)
    assert (sasl.mechanism, sasl.principal, sasl.keytab, sasl.service_name) == (
        "GSSAPI",
        PRINCIPAL,
        keytab,
        "kafka-prod",
    )


def test_cli_ticket_cache_login_by_default() -> None:
    sasl = client_options(parse("--sasl-mechanism", "GSSAPI")).sasl
    assert isinstance(sasl, GssapiConfig)
    assert (sasl.principal, sasl.keytab, sasl.service_name) == (None, None, "kafka")


def test_cli_kerberos_from_environment(monkeypatch: pytest.MonkeyPatch, keytab: str) -> None:
    monkeypatch.setenv("SHARECON_SASL_MECHANISM", "GSSAPI")
    monkeypatch.setenv("SHARECON_KERBEROS_PRINCIPAL", PRINCIPAL)
    monkeypatch.setenv("SHARECON_KERBEROS_KEYTAB", keytab)
    monkeypatch.setenv("SHARECON_KERBEROS_SERVICE_NAME", "kfk")
    sasl = client_options(parse()).sasl
    assert isinstance(sasl, GssapiConfig)
    assert (sasl.principal, sasl.keytab, sasl.service_name) == (PRINCIPAL, keytab, "kfk")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--kerberos-principal", PRINCIPAL], "--kerberos-principal needs --sasl-mechanism GSSAPI"),
        (
            [
                "--sasl-mechanism",
                "PLAIN",
                "--sasl-username",
                "u",
                "--sasl-password",
                "p",
                "--kerberos-service-name",
                "kafka",
            ],
            "--kerberos-service-name needs",
        ),  # fmt: skip
        (["--sasl-mechanism", "GSSAPI", "--sasl-username", "u"], "not a SASL user name"),
        (
            ["--sasl-mechanism", "GSSAPI", "--kerberos-keytab", "KEYTAB"],
            "needs --kerberos-principal",
        ),
        (
            [
                "--sasl-mechanism",
                "GSSAPI",
                "--kerberos-principal",
                PRINCIPAL,
                "--kerberos-keytab",
                "/nonexistent/app.keytab",
            ],
            "is not a readable file",
        ),  # fmt: skip
        (["--sasl-mechanism", "GSSAPI", "--kerberos-service-name", "kafka/host"], "service_name"),
        (
            ["--command-config", "client.properties", "--kerberos-principal", PRINCIPAL],
            "drop --kerberos-principal",
        ),  # fmt: skip
    ],
)
def test_cli_wrong_kerberos_options_are_usage_errors(
    keytab: str, argv: list[str], needle: str
) -> None:
    args = parse(*(keytab if a == "KEYTAB" else a for a in argv))
    with pytest.raises(CliError, match=needle) as info:
        client_options(args)
    assert info.value.code == 2


def test_cli_kerberos_variable_without_gssapi_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SHARECON_KERBEROS_PRINCIPAL", PRINCIPAL)
    with pytest.raises(CliError, match="SHARECON_KERBEROS_PRINCIPAL needs --sasl-mechanism"):
        client_options(parse())


FLAGS = {"handler": "m:f", "group": "g", "topics": ("t",)}


def test_worker_kerberos_from_flags_environment_and_toml(keytab: str) -> None:
    env = {"SHARECON_SASL_MECHANISM": "GSSAPI", "SHARECON_KERBEROS_KEYTAB": keytab}
    toml = {"kerberos_principal": PRINCIPAL, "kerberos_service_name": "from-toml"}
    flags = {**FLAGS, "kerberos_service_name": "from-flag"}
    config = config_from_sources(flags, env=env, toml=toml)
    sasl = config.sasl()
    assert isinstance(sasl, GssapiConfig)
    assert (sasl.principal, sasl.keytab, sasl.service_name) == (PRINCIPAL, keytab, "from-flag")
    # The worker processes rebuild the config from its JSON on their stdin.
    assert WorkerConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"kerberos_principal": PRINCIPAL}, "kerberos_principal needs sasl_mechanism GSSAPI"),
        ({"sasl_mechanism": "GSSAPI", "sasl_username": "u"}, "not sasl_username"),
        ({"sasl_mechanism": "GSSAPI", "kerberos_keytab": "KEYTAB"}, "keytab needs principal="),
        ({"command_config": "c.properties", "kerberos_keytab": "KEYTAB"}, "drop kerberos_keytab"),
    ],
)
def test_worker_wrong_kerberos_settings(keytab: str, settings: dict[str, str], needle: str) -> None:
    values = {k: keytab if v == "KEYTAB" else v for k, v in settings.items()}
    with pytest.raises(errors.ConfigError, match=needle):
        WorkerConfig(**FLAGS, **values)  # type: ignore[arg-type]


def test_worker_properties_file_drops_kerberos_variables(tmp_path: Path) -> None:
    """As for the other TLS/SASL variables: --command-config replaces them."""
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=127.0.0.1:9092\n")
    env = {"SHARECON_KERBEROS_PRINCIPAL": PRINCIPAL, "SHARECON_COMMAND_CONFIG": str(props)}
    config = config_from_sources(FLAGS, env=env)
    assert config.kerberos_principal is None and config.sasl() is None
