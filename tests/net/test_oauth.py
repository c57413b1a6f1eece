"""OAUTHBEARER without a broker: the mechanism's messages, tokens, and the OIDC provider.

The provider is exercised against the test kit's OIDC issuer (a real HTTP server on
loopback): refresh, retries, a wrong secret, an expired token, and what shows in reprs,
errors and logs.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._net import http
from sharecon._net.connect import ConnectionConfig, fetch_token, open_connection
from sharecon._net.connection import BrokerAddress
from sharecon._net.properties import parse_jaas
from sharecon._net.sasl import OAuthBearerMechanism
from sharecon.config import (
    OAuthBearerToken,
    OidcTokenProvider,
    SaslConfig,
    oauthbearer_from_properties,
)
from sharecon.testing.oidc import OidcIssuer

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

SECRET = "s3cret-Client-Pa55"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer({"app": SECRET}, audience="kafka", lifetime=100) as issuer:
        yield issuer


@pytest.fixture(autouse=True)
def _reset(issuer: OidcIssuer) -> None:
    issuer.lifetime, issuer.backdate, issuer.fail_next = 100, 0.0, 0


# -- the mechanism ------------------------------------------------------------------------


def test_client_first_message_is_rfc7628_with_extensions() -> None:
    token = OAuthBearerToken(
        "eyJ.abc.def",
        time.time() + 60,
        principal="app",
        extensions={"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy1"},
    )
    mech = OAuthBearerMechanism(token)
    first = mech.step(None)
    assert first == (
        b"n,,\x01auth=Bearer eyJ.abc.def\x01logicalCluster=lkc-abc12\x01"
        b"identityPoolId=pool-Xy1\x01\x01"
    )
    done_after_first = mech.done
    assert mech.step(b"") == b""  # the broker's empty answer: success
    assert not done_after_first and mech.done and mech.failure is None


def test_server_error_json_is_acknowledged_and_named() -> None:
    mech = OAuthBearerMechanism(OAuthBearerToken("tok", time.time() + 60))
    mech.step(None)
    answer = b'{"status":"invalid_token","scope":"kafka","openid-configuration":"x"}'
    assert mech.step(answer) == b"\x01"  # RFC 7628 3.2.3: the client's dummy reply
    assert mech.failure == "the broker rejected the token: status 'invalid_token', scope 'kafka'"
    # A broker that then reports success must not be taken at its word.
    with pytest.raises(errors.SaslAuthenticationFailedError, match="invalid_token"):
        mech.step(b"")


@pytest.mark.parametrize(
    ("value", "extensions"),
    [
        ("", {}),
        ("has space", {}),
        ("tok\x01", {}),
        ("tok", {"auth": "x"}),
        ("tok", {"bad-key": "x"}),
        ("tok", {"ok": ""}),
        ("tok", {"ok": "\x01"}),
    ],
)
def test_bad_tokens_and_extensions_are_config_errors(
    value: str, extensions: dict[str, str]
) -> None:
    with pytest.raises(errors.ConfigError):
        OAuthBearerToken(value, 0.0, extensions=extensions)


def test_sasl_config_oauthbearer_rules() -> None:
    with pytest.raises(errors.ConfigError, match="token_provider"):
        SaslConfig("OAUTHBEARER")
    with pytest.raises(errors.ConfigError, match="no username"):
        SaslConfig("OAUTHBEARER", "alice", "pw", token_provider=lambda: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(errors.ConfigError, match="OAUTHBEARER only"):
        SaslConfig("PLAIN", "alice", "pw", token_provider=lambda: None)  # type: ignore[arg-type,return-value]
    # Positional PLAIN/SCRAM configs still read as before.
    assert SaslConfig("PLAIN", "alice", "pw").username == "alice"


def test_token_and_config_reprs_hide_secrets(issuer: OidcIssuer) -> None:
    value = issuer.mint("app")
    token = OAuthBearerToken(value, time.time() + 60, principal="app", extensions={"a": "b"})
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET, scope="kafka")
    config = SaslConfig("OAUTHBEARER", token_provider=provider)
    for text in (repr(token), str(token), repr(provider), repr(config), str(config)):
        assert value not in text and SECRET not in text
    assert "app" in repr(token) and "client_id='app'" in repr(provider)


# -- calling providers ----------------------------------------------------------------------


async def test_plain_and_async_providers() -> None:
    token = OAuthBearerToken("tok", time.time() + 60)
    threads: list[threading.Thread] = []

    def plain() -> OAuthBearerToken:
        threads.append(threading.current_thread())
        return token

    async def asynchronous() -> OAuthBearerToken:
        return token

    assert await fetch_token(plain) is token
    assert await fetch_token(asynchronous) is token
    # A plain provider may block (HTTP, a signer): it runs off the event loop's thread.
    assert len(threads) == 1 and threads[0] is not threading.current_thread()


async def test_a_failing_provider_is_named_by_type_only() -> None:
    def leaky() -> OAuthBearerToken:
        raise RuntimeError(f"could not log in with {SECRET}")

    with pytest.raises(errors.OAuthTokenError, match="RuntimeError") as info:
        await fetch_token(leaky)
    assert SECRET not in str(info.value)

    with pytest.raises(errors.OAuthTokenError, match="returned str"):
        await fetch_token(lambda: "just-a-string")  # type: ignore[arg-type,return-value]


async def test_a_providers_network_failure_may_heal_its_other_failures_do_not() -> None:
    """Your own provider: an OSError (its endpoint refused the connection) is an outage the
    clients wait out (OAuthTokenUnavailableError, a BrokerConnectError); anything else is
    a plain OAuthTokenError that stops them."""

    def down() -> OAuthBearerToken:
        raise ConnectionRefusedError(f"vault at 10.0.0.1 refused ({SECRET})")

    with pytest.raises(errors.OAuthTokenUnavailableError, match="ConnectionRefusedError") as info:
        await fetch_token(down)
    assert isinstance(info.value, errors.BrokerConnectError) and info.value.retriable
    assert SECRET not in str(info.value)

    def broken() -> OAuthBearerToken:
        raise KeyError("token")

    with pytest.raises(errors.OAuthTokenError) as failed:
        await fetch_token(broken)
    assert not isinstance(failed.value, errors.BrokerConnectError)
    assert not failed.value.retriable


# -- the OIDC provider ----------------------------------------------------------------------


async def test_provider_gets_caches_and_refreshes(issuer: OidcIssuer) -> None:
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET)
    before = issuer.issued.get("app", 0)
    first = await provider()
    assert first.principal == "app"
    assert 95 < first.expires_at - time.time() <= 100
    assert await provider() is first  # cached
    assert issuer.issued["app"] == before + 1
    # Refreshed between 76 % and 84 % of its lifetime: not at 75 s, surely at 85 s.
    start = time.time()
    provider._clock = lambda: start + 75
    assert await provider() is first
    provider._clock = lambda: start + 85
    second = await provider()
    assert second is not first and second.value != first.value
    assert issuer.issued["app"] == before + 2 and provider.fetches == 2


async def test_many_callers_share_one_fetch(issuer: OidcIssuer) -> None:
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET)
    got: list[OAuthBearerToken] = []

    async def call() -> None:
        got.append(await provider())

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(call)
    assert provider.fetches == 1 and len({id(t) for t in got}) == 1


async def test_wrong_secret_fails_at_once_without_the_secret(
    issuer: OidcIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = OidcTokenProvider(issuer.token_url, "app", "wrong-" + SECRET)
    refused = issuer.refused
    start = time.monotonic()
    with pytest.raises(errors.OAuthTokenError) as info:
        await provider()
    assert time.monotonic() - start < 5.0  # not retried with backoff (a 4xx is final)
    assert issuer.refused == refused + 1  # a 401 is not retried
    message = str(info.value)
    assert "HTTP 401" in message and "invalid_client" in message and "'app'" in message
    assert SECRET not in message and SECRET not in caplog.text


async def test_a_5xx_is_retried_with_backoff(issuer: OidcIssuer) -> None:
    issuer.fail_next = 2
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET, attempts=3)
    start = time.monotonic()
    token = await provider()
    assert token.principal == "app" and issuer.fail_next == 0
    assert 0.45 < time.monotonic() - start < 10.0  # waited ~0.2 s then ~0.4 s (±20 %)
    issuer.fail_next = 5
    with pytest.raises(errors.OAuthTokenError, match=r"HTTP 503.*after 2 attempts"):
        await OidcTokenProvider(issuer.token_url, "app", SECRET, attempts=2)()


async def test_a_still_valid_token_outlives_a_failed_refresh(
    issuer: OidcIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET, attempts=1)
    first = await provider()
    start = time.time()
    provider._clock = lambda: start + 90  # due for refresh, 10 s left
    issuer.fail_next = 1
    with caplog.at_level(logging.WARNING):
        assert await provider() is first
    assert "using the current token" in caplog.text
    provider._clock = lambda: start + 101  # expired: the failure is the caller's now
    issuer.fail_next = 1
    with pytest.raises(errors.OAuthTokenError, match="503"):
        await provider()


async def test_an_already_expired_token_is_refused(issuer: OidcIssuer) -> None:
    issuer.backdate = 200
    with pytest.raises(errors.OAuthTokenError, match=r"expired \d+ s ago"):
        await OidcTokenProvider(issuer.token_url, "app", SECRET)()


async def test_unreachable_endpoint_is_a_typed_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OidcTokenProvider(f"http://127.0.0.1:{port}/token", "app", SECRET, attempts=2)
    with anyio.fail_after(5), pytest.raises(errors.OAuthTokenError, match="after 2 attempts"):
        await provider()


def test_plain_http_only_to_loopback() -> None:
    with pytest.raises(errors.ConfigError, match="https"):
        OidcTokenProvider("http://idp.example.com/token", "app", SECRET)
    with pytest.raises(errors.ConfigError, match="not an http"):
        OidcTokenProvider("ftp://idp.example.com/token", "app", SECRET)
    OidcTokenProvider("https://idp.example.com/token", "app", SECRET)
    OidcTokenProvider("http://[::1]:8080/token", "app", SECRET)


# -- Kafka client properties ----------------------------------------------------------------


def test_jaas_options_quoting() -> None:
    module, options = parse_jaas(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        "clientId='id-1' clientSecret=\"a b\\\"c\" scope=kafka extension_logicalCluster='lkc-1';"
    )
    assert module.endswith("OAuthBearerLoginModule")
    assert options == {
        "clientId": "id-1",
        "clientSecret": 'a b"c',
        "scope": "kafka",
        "extension_logicalCluster": "lkc-1",
    }
    with pytest.raises(errors.ConfigError) as info:
        parse_jaas("Module required clientSecret='x' broken")
    assert "'x'" not in str(info.value)


def test_confluent_cloud_properties() -> None:
    # The shape of Confluent Cloud's OAuth client.properties.
    config = oauthbearer_from_properties(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
            "sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f"clientId='app-1' clientSecret='{SECRET}' scope='kafka.read' "
                "extension_logicalCluster='lkc-abc12' extension_identityPoolId='pool-Xy1';"
            ),
        }
    )
    provider = config.token_provider
    assert isinstance(provider, OidcTokenProvider)
    assert provider.client_id == "app-1" and provider.scope == "kafka.read"
    assert dict(provider.extensions) == {
        "logicalCluster": "lkc-abc12",
        "identityPoolId": "pool-Xy1",
    }
    assert SECRET not in repr(config)
    with pytest.raises(errors.ConfigError, match="token.endpoint.url"):
        oauthbearer_from_properties({"sasl.jaas.config": "x required;"})
    with pytest.raises(errors.ConfigError, match="client id and secret"):
        oauthbearer_from_properties({"sasl.oauthbearer.token.endpoint.url": "https://a/t"})
    # KIP-1139's dedicated properties work without a JAAS line.
    alt = oauthbearer_from_properties(
        {
            "sasl.oauthbearer.token.endpoint.url": "https://a/t",
            "sasl.oauthbearer.client.credentials.client.id": "id2",
            "sasl.oauthbearer.client.credentials.client.secret": SECRET,
            "sasl.oauthbearer.scope": "s",
        }
    )
    assert isinstance(alt.token_provider, OidcTokenProvider)
    assert alt.token_provider.client_id == "id2" and alt.token_provider.scope == "s"


async def test_a_slow_provider_is_named_not_the_broker() -> None:
    """The token comes first, within connect_timeout: a provider that hangs is reported as
    such, before any connection to the broker is opened."""

    async def hangs() -> OAuthBearerToken:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    config = ConnectionConfig(
        connect_timeout=0.5, sasl=SaslConfig("OAUTHBEARER", token_provider=hangs)
    )
    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        with pytest.raises(errors.OAuthTokenError, match=r"no token within 0\.5 s"):
            await open_connection(BrokerAddress("127.0.0.1", 9), config, tg)
    assert time.monotonic() - start < 5.0  # the 0.5 s connect timeout, not a hang


async def test_https_endpoint_is_verified_by_default() -> None:
    with OidcIssuer({"app": SECRET}, tls=True) as tls_issuer:
        assert tls_issuer.token_url.startswith("https://127.0.0.1:")
        assert tls_issuer.ca_file is not None
        # The system's CAs do not know the issuer's self-signed certificate: refused.
        untrusting = OidcTokenProvider(tls_issuer.token_url, "app", SECRET, attempts=1)
        with pytest.raises(errors.OAuthTokenError, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting()
        assert tls_issuer.issued == {}
        trusting = OidcTokenProvider(
            tls_issuer.token_url,
            "app",
            SECRET,
            ssl_context=ssl.create_default_context(cafile=str(tls_issuer.ca_file)),
        )
        assert (await trusting()).principal == "app"
        assert tls_issuer.issued == {"app": 1}


def test_http_answers_with_length_chunks_or_neither() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    sized = http._parse("u", head + b"Content-Length: 4\r\n\r\nbody-and-more")
    assert (sized.status, sized.body) == (200, b"body")
    chunked = http._parse(
        "u", head + b"Transfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n3;x=y\r\n-ok\r\n0\r\n\r\n"
    )
    assert chunked.body == b"body-ok" and http._complete(
        head + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    assert http._parse("u", head + b"\r\nto-the-end").body == b"to-the-end"
    # A length that does not read as ASCII digits is no length: the body runs to the end.
    odd = head + b"Content-Length: \xb2\r\n\r\nab"  # latin-1 "\u00b2": a digit to isdigit
    assert http._parse("u", odd).body == b"ab" and not http._complete(odd)
    with pytest.raises(http.HttpError, match="not HTTP"):
        http._parse("u", b"SSH-2.0-OpenSSH\r\n\r\n")


async def test_a_secret_with_reserved_characters(issuer: OidcIssuer) -> None:
    odd = "p+a ss:w/o%rd&="
    issuer.clients["odd:id"] = odd
    try:
        token = await OidcTokenProvider(issuer.token_url, "odd:id", odd)()
        assert token.principal == "odd:id"
    finally:
        del issuer.clients["odd:id"]


async def test_an_outage_past_expiry_fails_fast_typed_then_heals(issuer: OidcIssuer) -> None:
    """The endpoint is down past the token's expiry: the provider's failure is an
    ``OAuthTokenUnavailableError`` (a ``BrokerConnectError``: clients retry it), asks in
    the hold fail without a request, and once the endpoint is back a token comes again."""
    issuer.lifetime = 100
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET, attempts=1)
    await provider()
    start = time.time()
    provider._clock = lambda: start + 101  # expired
    issuer.fail_next = 1
    with pytest.raises(errors.OAuthTokenUnavailableError, match="503") as info:
        await provider()
    assert isinstance(info.value, errors.BrokerConnectError) and info.value.retriable
    issuer.fail_next = 1  # would fail again, but the hold keeps the provider from asking
    with pytest.raises(errors.OAuthTokenUnavailableError, match="next attempt in"):
        await provider()
    assert issuer.fail_next == 1
    issuer.fail_next, issuer.lifetime = 0, 200  # back, with tokens valid past the fake now
    provider._clock = lambda: start + 101 + 6  # past the longest hold
    fetched = provider.fetches
    token = await provider()
    assert provider.fetches == fetched + 1 and token.expires_at > start + 101


async def test_refusals_are_typed_permanent(issuer: OidcIssuer) -> None:
    provider = OidcTokenProvider(issuer.token_url, "app", "wrong-" + SECRET)
    for _ in range(2):  # never held back as an outage would be: asked and refused again
        with pytest.raises(errors.OAuthTokenRefusedError, match="HTTP 401") as info:
            await provider()
        assert not isinstance(info.value, errors.BrokerConnectError)
        assert not info.value.retriable
