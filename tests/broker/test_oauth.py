"""OAUTHBEARER against a real broker running Kafka's OIDC validator (KIP-768).

One broker for the module: a SASL_PLAINTEXT listener with OAUTHBEARER, validating RS256
tokens against the JWKS of the test kit's OIDC issuer on loopback (expected audience and
issuer, no clock skew), and sessions of at most 3 s (``connections.max.reauth.ms``), so
the client re-authenticates with fresh tokens while it consumes.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin
from sharecon.config import ConnectionConfig, OAuthBearerToken, OidcTokenProvider, SaslConfig
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.testing import KafkaBroker, SaslSetup
from sharecon.testing.oidc import OidcIssuer
from tests.cli.test_cli import assert_clean_error, cli

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

SECRET = "oidc-client-s3cret"
TOKEN_LIFETIME = 6  # seconds: several tokens expire during one test
REAUTH_MS = 3000


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer({"app": SECRET}, audience="kafka", lifetime=TOKEN_LIFETIME) as issuer:
        yield issuer


@pytest.fixture(scope="module")
def oauth_broker(issuer: OidcIssuer) -> Iterator[KafkaBroker]:
    setup = SaslSetup(mechanisms=("OAUTHBEARER",), oauth=issuer.broker_setup())
    with KafkaBroker(sasl=setup, extra_config={"connections.max.reauth.ms": str(REAUTH_MS)}) as b:
        yield b


def oauth(provider: object, **kwargs: float) -> ConnectionConfig:
    return ConnectionConfig(
        sasl=SaslConfig("OAUTHBEARER", token_provider=provider),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # 18 s: once is enough
async def test_consume_while_tokens_expire_loses_nothing(
    oauth_broker: KafkaBroker, issuer: OidcIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    """Tokens live 6 s, sessions 3 s: a 13 s produce-and-consume run re-authenticates many
    times with fresh tokens, and every record arrives exactly once."""
    caplog.set_level(logging.DEBUG, logger="sharecon")  # every line, to search for secrets
    topic, group = "oauth-rolling", "oauth-rolling-group"
    oauth_broker.tools.create_topic(topic, partitions=2)
    oauth_broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    provider = OidcTokenProvider(
        issuer.token_url,
        "app",
        SECRET,
        scope="kafka",
        # Confluent Cloud's extensions travel with every token; Kafka's validator ignores them.
        extensions={"logicalCluster": "lkc-test1", "identityPoolId": "pool-test1"},
    )
    config = oauth(provider)
    issued_before = issuer.issued.get("app", 0)
    sent: set[bytes] = set()
    seen: dict[bytes, int] = {}
    rounds = 26

    async def produce(producer: Producer) -> None:
        for i in range(rounds):  # 10 records every 0.5 s for 13 s
            batch = [f"r{i}-{j}".encode() for j in range(10)]
            for value in batch:
                await producer.send(topic, value)
            await producer.flush()
            sent.update(batch)
            await anyio.sleep(0.5)

    with anyio.fail_after(60):
        async with (
            Producer(oauth_broker.bootstrap, config=config) as producer,
            ShareConsumer(
                oauth_broker.bootstrap, group_id=group, topics=[topic], sasl=config.sasl
            ) as consumer,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(produce, producer)
            async for record in consumer:
                assert record.value is not None
                seen[record.value] = seen.get(record.value, 0) + 1
                if len(seen) >= rounds * 10:
                    break
            await consumer.commit()
    assert len(sent) == rounds * 10
    assert set(seen) == sent and all(n == 1 for n in seen.values())
    # More than one token lifetime passed: the provider fetched fresh tokens, and the
    # connections re-authenticated (rather than reconnecting) with them.
    assert issuer.issued["app"] - issued_before >= 3
    reauths = [r for r in caplog.records if "re-authenticating" in r.getMessage()]
    assert len(reauths) >= 4
    for text in (caplog.text, repr(config), repr(provider)):
        assert SECRET not in text
        assert provider._token is not None and provider._token.value not in text


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # ~40 s: once is enough
async def test_token_endpoint_outage_longer_than_a_token_heals_by_itself(
    oauth_broker: KafkaBroker, issuer: OidcIssuer
) -> None:
    """The identity provider goes down for two token lifetimes (the cached token expires
    and re-authentication cannot get a new one), then comes back: the same consumer,
    producer and admin objects carry on, and the consumer's health says so meanwhile."""
    topic, group = "oauth-outage", "oauth-outage-group"
    oauth_broker.tools.create_topic(topic, partitions=1)
    oauth_broker.tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    provider = OidcTokenProvider(issuer.token_url, "app", SECRET, scope="kafka")
    # A short request timeout: health() names an outage after it, well within this one.
    config = oauth(provider, request_timeout=3.0)
    seen: list[bytes] = []
    got = anyio.Event()
    failed: list[BaseException] = []

    async def consume(consumer: ShareConsumer) -> None:
        try:
            async for record in consumer:
                assert record.value is not None
                seen.append(record.value)
                got.set()
        except Exception as exc:  # the failure under test: recorded, then re-raised
            failed.append(exc)
            raise

    with anyio.fail_after(150):
        async with (
            Producer(oauth_broker.bootstrap, config=config) as producer,
            Admin(oauth_broker.bootstrap, config=config) as admin,
            ShareConsumer(
                oauth_broker.bootstrap, group_id=group, topics=[topic], config=config
            ) as consumer,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(consume, consumer)
            await producer.send_and_wait(topic, b"before")
            await got.wait()
            issuer.pause()
            try:
                # Down for two token lifetimes: every token the clients hold expires.
                outage_seen = False
                end = time.monotonic() + 2 * TOKEN_LIFETIME
                await anyio.sleep(TOKEN_LIFETIME)  # the producer's token has expired too
                # Sent in the outage: waits in the producer, delivered after it.
                during = await producer.send(topic, b"during")
                while time.monotonic() < end:
                    await anyio.sleep(0.5)
                    outage_seen = outage_seen or not consumer.health().ok
                assert not failed, failed
                assert outage_seen, consumer.health()
            finally:
                issuer.resume()
            resumed = time.monotonic()
            await during
            after = [f"after-{i}".encode() for i in range(15)]
            for value in after:
                await producer.send_and_wait(topic, value)
            while not {b"during", *after} <= set(seen):
                assert not failed, failed
                await anyio.sleep(0.2)
            logging.getLogger(__name__).info(
                "recovered: %d records consumed %.1f s after the issuer came back",
                len(after),
                time.monotonic() - resumed,
            )
            assert topic in await admin.list_topics()
            # health() back to ok by itself (polled: it is a status, not an event).
            while not consumer.health().ok:  # noqa: ASYNC110
                await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
    assert all(seen.count(v) == 1 for v in [b"before", b"during", *after])


async def test_wrong_client_secret_is_a_prompt_token_error(
    oauth_broker: KafkaBroker, issuer: OidcIssuer
) -> None:
    provider = OidcTokenProvider(issuer.token_url, "app", "not-the-secret")
    start = time.monotonic()
    # Refused, not unavailable: never retried like an outage of the endpoint.
    with anyio.fail_after(10), pytest.raises(errors.OAuthTokenRefusedError) as info:
        async with ShareConsumer(
            oauth_broker.bootstrap,
            group_id="g-wrong-secret",
            topics=["t"],
            sasl=oauth(provider).sasl,
        ):
            pass
    # Prompt: one exchange, not retried until the 10 s connect timeout (loose bound: CI is
    # a loaded 2-core machine).
    assert time.monotonic() - start < 6.0
    assert "HTTP 401" in str(info.value) and "invalid_client" in str(info.value)
    assert "not-the-secret" not in str(info.value)


@pytest.mark.parametrize(
    ("case", "mint"),
    [
        ("expired", {"lifetime": -120}),
        ("wrong audience", {"audience": "not-kafka"}),
    ],
)
async def test_broker_rejects_bad_tokens_promptly(
    oauth_broker: KafkaBroker, issuer: OidcIssuer, case: str, mint: dict[str, object]
) -> None:
    """A token signed by the trusted issuer but expired, or for another audience: the
    broker's validator refuses it, and the client names the broker's status."""
    value = issuer.mint("app", **mint)  # type: ignore[arg-type]

    def provider() -> OAuthBearerToken:
        # A provider with a stale or misconfigured token, claiming it is still good.
        return OAuthBearerToken(value, time.time() + 60, principal="app")

    start = time.monotonic()
    with anyio.fail_after(10), pytest.raises(errors.SaslAuthenticationFailedError) as info:
        async with ShareConsumer(
            oauth_broker.bootstrap, group_id="g-bad-token", topics=["t"], sasl=oauth(provider).sasl
        ):
            pass
    assert time.monotonic() - start < 6.0, case  # one exchange, not retried
    message = str(info.value)
    assert "status 'invalid_token'" in message and oauth_broker.bootstrap in message
    assert value not in message


def test_cli_over_oauthbearer_from_the_environment(
    oauth_broker: KafkaBroker, issuer: OidcIssuer
) -> None:
    """``sharecon`` with --sasl-mechanism OAUTHBEARER: the secret only in the environment."""
    env = {
        "SHARECON_BOOTSTRAP": oauth_broker.bootstrap,
        "SHARECON_OAUTH_CLIENT_SECRET": SECRET,
    }
    flags = ["--sasl-mechanism", "OAUTHBEARER", "--oauth-token-url", issuer.token_url]
    flags += ["--oauth-client-id", "app", "--oauth-scope", "kafka"]
    created = cli("topics", "create", "oauth-cli-topic", "-p", "1", *flags, env=env)
    assert created.returncode == 0, created.stderr
    wrong = cli(
        "topics", "list", *flags, env={**env, "SHARECON_OAUTH_CLIENT_SECRET": "not-it-4711"}
    )
    assert_clean_error(wrong, 5, "HTTP 401", "invalid_client")
    assert "not-it-4711" not in wrong.stdout + wrong.stderr
