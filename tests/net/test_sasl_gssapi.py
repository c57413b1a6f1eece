"""GssapiConfig's checks, which need neither a KDC nor (except where said) the gssapi package.

The exchange itself is tested against a real KDC and broker in tests/broker/test_kerberos.py.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon.config import GssapiConfig, SaslConfig

if TYPE_CHECKING:
    from pathlib import Path


def test_without_gssapi_installed_is_a_config_error_saying_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(errors.ConfigError, match=r"pip install 'sharecon\[kerberos\]'.*libkrb5"):
        GssapiConfig()


def test_gssapi_through_sasl_config_points_at_gssapi_config() -> None:
    with pytest.raises(errors.ConfigError, match="GssapiConfig"):
        SaslConfig("GSSAPI", "alice", "")


def test_keytab_needs_a_principal(tmp_path: Path) -> None:
    keytab = tmp_path / "app.keytab"
    keytab.write_bytes(b"\x05\x02")
    with pytest.raises(errors.ConfigError, match="keytab needs principal="):
        GssapiConfig(keytab=keytab)


def test_missing_keytab_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigError, match=r"missing\.keytab.* is not a readable file"):
        GssapiConfig(principal="app@EXAMPLE.COM", keytab=tmp_path / "missing.keytab")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"service_name": ""}, "service_name"),
        ({"service_name": "kafka/host"}, "service_name"),
        ({"service_host": "broker:9092"}, "service_host"),
        ({"service_host": ""}, "service_host"),
        ({"principal": " "}, "principal must not be empty"),
        ({"ticket_cache": ""}, "ticket_cache must not be empty"),
    ],
)
def test_malformed_values_are_config_errors(kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(errors.ConfigError, match=match):
        GssapiConfig(**kwargs)
