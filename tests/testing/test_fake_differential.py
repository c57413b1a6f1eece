"""The differential suite: FakeKafka against a real broker, on Kafka 4.1 and 4.4.

Every client-level scenario of :mod:`sharecon.testing.fake.differential` and every
wire-level conformance script runs on a fake and on the session's real broker of the same
line, at once, each on a topic and group of its own; what the clients observe must be the
same. A difference is a bug in the fake (or in the model broker under it), or a limit
documented in docs/testing.md ("FakeKafka") with a test of its own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from sharecon.testing.conformance.scenarios import scenarios_for
from sharecon.testing.fake import FakeKafka
from sharecon.testing.fake.differential import CLIENT_SCENARIOS, compare, compare_wire

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("version", ["4.1", "4.4"])
async def test_the_fake_answers_as_the_broker_does(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    broker = kafka_broker_factory(version)
    start = time.monotonic()
    with FakeKafka(version) as fake:
        clients = await compare(fake.bootstrap, broker.bootstrap, version)
        wire = await compare_wire(fake.bootstrap, broker.bootstrap, version)
        assert not fake.errors, fake.errors
    took = time.monotonic() - start
    print(f"differential {version}: {len(clients)} client + {len(wire)} wire scenarios, {took:.1f} s")
    assert len(clients) == len(CLIENT_SCENARIOS)
    assert len(wire) == len(scenarios_for(version))
    assert len(clients) + len(wire) >= 60
    wrong = [o.explain() for o in (*clients, *wire) if not o.agrees]
    assert not wrong, "\n".join(wrong)
    # A scenario that failed on both sides in the same way would agree: none may fail.
    failed = [o.scenario for o in clients if str(o.real).startswith("failed:")]
    assert not failed, failed
    assert took < 45, f"the differential run of {version} took {took:.0f} s"
