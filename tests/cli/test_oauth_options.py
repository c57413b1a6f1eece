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
