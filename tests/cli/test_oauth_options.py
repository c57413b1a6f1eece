"""OAUTHBEARER settings of the CLI and the worker: flags and SHARECON_* variables, the
client secret from the environment only, and never shown."""

from __future__ import annotations

import argparse

import pytest

from sharecon import errors
from sharecon.cli._common import CliError, add_client_options, client_options
from sharecon.config import OidcTokenProvider
from sharecon.worker._config import config_from_sources

SECRET = "cl1ent-s3cret-value"
URL = "https://idp.example.com/oauth2/token"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_client_options(parser)
    return parser.parse_args(argv)


def test_cli_builds_an_oidc_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARECON_OAUTH_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("SHARECON_OAUTH_SCOPE", "kafka")
    args = parse("--sasl-mechanism", "oauthbearer", "--oauth-token-url", URL,
                 "--oauth-client-id", "app")  # fmt: skip
    options = client_options(args)
    assert options.sasl is not None and options.sasl.mechanism == "OAUTHBEARER"
    provider = options.sasl.token_provider
    assert isinstance(provider, OidcTokenProvider)
    assert (provider.token_url, provider.client_id, provider.scope) == (URL, "app", "kafka")
    assert SECRET not in repr(options) and SECRET not in repr(options.sasl)


def test_cli_has_no_secret_flag() -> None:
    with pytest.raises(SystemExit):
        parse("--oauth-client-secret", SECRET)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--oauth-token-url", URL, "--oauth-client-id", "app"], "SHARECON_OAUTH_CLIENT_SECRET"),
        (["--oauth-client-id", "app"], "--oauth-token-url"),
        (["--sasl-username", "u", "--oauth-token-url", URL], "not a SASL user name"),
        (["--oauth-token-url", "http://idp.example.com/t", "--oauth-client-id", "a"], "https"),
    ],
)
def test_cli_incomplete_oauth_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], needle: str
) -> None:
    monkeypatch.delenv("SHARECON_OAUTH_CLIENT_SECRET", raising=False)
    if needle != "SHARECON_OAUTH_CLIENT_SECRET":
        monkeypatch.setenv("SHARECON_OAUTH_CLIENT_SECRET", SECRET)
    with pytest.raises(CliError, match=needle) as info:
        client_options(parse("--sasl-mechanism", "OAUTHBEARER", *argv))
    assert info.value.code == 2 and SECRET not in str(info.value)


def test_worker_oauth_from_environment() -> None:
    env = {
        "SHARECON_SASL_MECHANISM": "OAUTHBEARER",
        "SHARECON_OAUTH_TOKEN_URL": URL,
        "SHARECON_OAUTH_CLIENT_ID": "app",
        "SHARECON_OAUTH_CLIENT_SECRET": SECRET,
    }
    flags = {"handler": "m:f", "group": "g", "topics": ("t",)}
    config = config_from_sources(flags, env=env)
    sasl = config.sasl()
    assert sasl is not None and isinstance(sasl.token_provider, OidcTokenProvider)
    assert sasl.token_provider.client_id == "app"
    assert SECRET not in repr(config)
    # The children get the whole config on stdin, secret included, and rebuild it.
    assert type(config).from_dict(config.to_dict()) == config
    with pytest.raises(errors.ConfigError, match="oauth_client_secret") as info:
        config_from_sources(flags, env={**env, "SHARECON_OAUTH_CLIENT_SECRET": ""})
    assert SECRET not in str(info.value)
    with pytest.raises(errors.ConfigError, match="not sasl_username"):
        config_from_sources(flags, env={**env, "SHARECON_SASL_USERNAME": "u"})


def test_a_properties_file_replaces_the_oauth_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """As for TLS and the other SASL settings: --command-config with an --oauth-* flag is a
    usage error, and the worker drops the SHARECON_OAUTH_* variables."""
    with pytest.raises(CliError, match="drop --oauth-token-url") as info:
        client_options(parse("--command-config", "c.properties", "--oauth-token-url", URL))
    assert info.value.code == 2
    env = {"SHARECON_OAUTH_TOKEN_URL": URL, "SHARECON_OAUTH_CLIENT_SECRET": SECRET}
    flags = {"handler": "m:f", "group": "g", "topics": ("t",), "command_config": "c.properties"}
    config = config_from_sources(flags, env=env)
    assert (config.oauth_token_url, config.oauth_client_secret) == (None, None)
    with pytest.raises(errors.ConfigError, match="drop oauth_client_id"):
        config_from_sources({**flags, "oauth_client_id": "app"}, env={})


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        # No mechanism: the flags were silently ignored and the connection was made without
        # SASL.
        (["--oauth-token-url", URL], "--oauth-token-url needs --sasl-mechanism OAUTHBEARER"),
        (["--oauth-scope", "kafka"], "--oauth-scope needs --sasl-mechanism OAUTHBEARER"),
        # Another mechanism: the login would be PLAIN, not what the flags ask for.
        (
            [
                "--sasl-mechanism",
                "PLAIN",
                "--sasl-username",
                "u",
                "--sasl-password",
                "p",
                "--oauth-client-id",
                "app",
            ],
            "--oauth-client-id needs --sasl-mechanism OAUTHBEARER",
        ),  # fmt: skip
    ],
)
def test_cli_oauth_flags_without_oauthbearer_are_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], needle: str
) -> None:
    for name in ("SASL_MECHANISM", "OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID", "OAUTH_SCOPE"):
        monkeypatch.delenv(f"SHARECON_{name}", raising=False)
    with pytest.raises(CliError, match=needle) as info:
        client_options(parse(*argv))
    assert info.value.code == 2


def test_cli_oauth_variable_without_oauthbearer_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SHARECON_SASL_MECHANISM", raising=False)
    monkeypatch.setenv("SHARECON_OAUTH_CLIENT_ID", "app")
    with pytest.raises(CliError, match="SHARECON_OAUTH_CLIENT_ID needs --sasl-mechanism"):
        client_options(parse())


@pytest.mark.parametrize(
    "settings",
    [
        {"oauth_token_url": URL},
        {
            "sasl_mechanism": "PLAIN",
            "sasl_username": "u",
            "sasl_password": "p",
            "oauth_scope": "kafka",
        },
    ],  # fmt: skip
)
def test_worker_oauth_settings_without_oauthbearer(settings: dict[str, str]) -> None:
    flags = {"handler": "m:f", "group": "g", "topics": ("t",), **settings}
    with pytest.raises(errors.ConfigError, match=r"oauth_\w+ needs sasl_mechanism OAUTHBEARER"):
        config_from_sources(flags, env={})
