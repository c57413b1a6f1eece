"""No secret in any log line, at any level: a whole SASL session logged at DEBUG.

Admin, Producer and ShareConsumer log in with SASL (PLAIN and SCRAM), create a topic, write,
consume and acknowledge; a wrong password is tried too. Every record the ``sharecon``
loggers emitted (message, arguments, exception text) is searched for the passwords.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import Admin, Producer, ProducerRecord, SaslConfig, ShareConsumer, errors
from sharecon.testing import KafkaBroker, SaslSetup

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

PASSWORD = "Sup3r-s3cret-pw"
WRONG = "Wr0ng-pa55word"
USERS = {"alice": PASSWORD}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sasl_broker(kafka_broker_factory: BrokerFactory) -> KafkaBroker:
    return kafka_broker_factory(sasl=SaslSetup(mechanisms=("PLAIN", "SCRAM-SHA-512"), users=USERS))


def _forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, raw.hex(), base64.b64encode(raw).decode(), repr(raw)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_a_sasl_session_at_debug_logs_no_password(
    sasl_broker: KafkaBroker, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sharecon")
    sasl = SaslConfig(mechanism, "alice", PASSWORD)
    topic, group = f"secrets-{mechanism.lower()}", f"secrets-g-{mechanism.lower()}"
    with anyio.fail_after(90):
        async with Admin(sasl_broker.bootstrap, sasl=sasl) as admin:
            await admin.create_topics([topic], num_partitions=1)
            await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
        async with Producer(sasl_broker.bootstrap, sasl=sasl) as producer:
            await producer.send_batch([ProducerRecord(topic, b"v%d" % i) for i in range(5)])
        async with ShareConsumer(
            sasl_broker.bootstrap, group_id=group, topics=[topic], sasl=sasl
        ) as consumer:
            seen = 0
            async for _ in consumer:
                seen += 1
                if seen == 5:
                    break
            await consumer.commit()
        with pytest.raises(errors.KafkaError) as info:
            async with Admin(
                sasl_broker.bootstrap, sasl=SaslConfig(mechanism, "alice", WRONG)
            ) as admin:
                await admin.list_topics()
    assert WRONG not in str(info.value)

    records = [r for r in caplog.records if r.name.startswith("sharecon")]
    # The session was logged at DEBUG (so the search below had something to search).
    assert any(r.levelno == logging.DEBUG for r in records)
    logged = (
        "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in records) + caplog.text
    )
    for secret in (PASSWORD, WRONG):
        for form in _forms(secret):
            assert form not in logged, f"{form!r} appears in the logs"
