"""Admin and dead-letter policy checks that need no broker: argument errors raised early,
and config values kept out of reprs and errors (one check against the session broker)."""

from __future__ import annotations

import logging

import anyio
import pytest

from sharecon import errors
from sharecon.admin import Admin, NewTopic, ResourceType, _redact_config_values
from sharecon.dlq import DeadLetterPolicy
from sharecon.protocol import IncrementalAlterConfigsRequest
from sharecon.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    "topic", ["bad topic!", "", ".", "..", "a/b", "a\0b", "t" * 300, NewTopic(name="x y")]
)
async def test_create_topics_refuses_illegal_names(topic: str | NewTopic) -> None:
    # Not opened: the names must be refused before the admin client touches the network.
    admin = Admin("localhost:9092")
    with anyio.fail_after(1), pytest.raises(errors.ConfigError, match="create_topics: invalid"):
        await admin.create_topics(["fine", topic])


@pytest.mark.parametrize("topic", ["", "bad topic!", "..", "x" * 250])
def test_dead_letter_policy_refuses_illegal_topic_names(topic: str) -> None:
    with pytest.raises(errors.ConfigError, match="DeadLetterPolicy.topic: invalid"):
        DeadLetterPolicy(topic=topic)


def test_config_values_never_show_in_a_request_repr() -> None:
    """IncrementalAlterConfigs carries config values such as sasl.jaas.config with a
    password inside: a logged or printed request must not show them."""
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=ResourceType.BROKER,
                resource_name="1",
                configs=(
                    AlterableConfig(name="sasl.jaas.config", value='password="S3CRET-jaas";'),
                    AlterableConfig(name="ssl.key.password", value="S3CRET-key"),
                ),
            ),
        )
    )
    text = repr(request) + str(request)
    assert "S3CRET" not in text
    assert "sasl.jaas.config" in text  # the names still say what was sent


@pytest.mark.parametrize(
    "name",
    [
        "sasl.jaas.config",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
        "ssl.key.password",
        "ssl.truststore.password",
        "sasl.oauthbearer.client.secret",
        "ssl.keystore.key",
    ],
)
def test_sensitive_config_values_are_hidden_in_broker_messages(name: str) -> None:
    """A broker that quotes a refused value ("Invalid value X for configuration Y") never
    gets a sensitive one into the error sharecon raises."""
    message = f"Invalid value p4ss-W0rd for configuration {name}: nope"
    redacted = _redact_config_values(message, {name: "p4ss-W0rd", "other": None})
    assert redacted == f"Invalid value [hidden] for configuration {name}: nope"


def test_ordinary_config_values_stay_in_broker_messages() -> None:
    message = "Invalid value sometimes for configuration share.auto.offset.reset"
    assert _redact_config_values(message, {"share.auto.offset.reset": "sometimes"}) == message


async def test_altering_a_sensitive_config_keeps_its_value_out_of_errors_and_logs(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A real broker refusing a group config named like a secret: the error names the
    config, never its value, and neither does any log line (DEBUG included)."""
    caplog.set_level(logging.DEBUG, logger="sharecon")
    secret = 'org.apache.kafka.common.security.plain.PlainLoginModule password="S3CRET-live";'
    async with Admin(kafka_bootstrap) as admin:
        with pytest.raises(errors.InvalidConfigError) as info:
            await admin.alter_configs(
                ResourceType.GROUP, "redact-group", {"sasl.jaas.config": secret}
            )
    assert "sasl.jaas.config" in str(info.value)
    assert "S3CRET" not in str(info.value) and "S3CRET" not in repr(info.value)
    assert not [r for r in caplog.records if "S3CRET" in r.getMessage()]
