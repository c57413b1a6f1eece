"""The differential suite: FakeKafka against real brokers, on Kafka 4.1 and 4.4.

Every client-level scenario of :mod:`sharecon.testing.fake.differential` runs on a fake
and on the session's real broker of the same line, both lines at once, each scenario on a
topic and group of its own; what the clients observe must be the same. The wire-level
conformance scripts run on the same fakes request by request and must give the model
broker's answers, which tests/testing/test_conformance.py holds against these same real
brokers (one real-broker run of the scripts per line, not two).

A difference is a bug in the fake (or in the model broker under it), or a limit
documented in docs/testing.md ("FakeKafka") with a test of its own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.testing.conformance.runner import compare as compare_with_model
from sharecon.testing.conformance.scenarios import scenarios_for
from sharecon.testing.fake import FakeKafka
from sharecon.testing.fake.differential import CLIENT_SCENARIOS, TIMES, Outcome, compare

if TYPE_CHECKING:
    from sharecon.testing.conformance.runner import Outcome as ConformanceOutcome
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("version", ["4.1", "4.4"])
async def test_the_fake_answers_as_the_broker_does(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    # One line at a time: the scenarios time what a fresh member gets, and two busy brokers
    # on a small machine answer late enough to change that.
    broker = kafka_broker_factory(version)
    start = time.monotonic()
    with FakeKafka(version) as fake:
        async with anyio.create_task_group() as tg:
            clients_box: list[list[Outcome]] = []
            wire_box: list[list[ConformanceOutcome]] = []

            async def clients() -> None:
                clients_box.append(await compare(fake.bootstrap, broker.bootstrap, version))

            async def wire() -> None:  # the fake alone: no load on the real broker
                wire_box.append(await compare_with_model(fake.bootstrap, version, concurrency=50))

            tg.start_soon(clients)
            tg.start_soon(wire)
        assert not fake.errors, fake.errors
    took = time.monotonic() - start
    slowest = sorted(TIMES.items(), key=lambda kv: -kv[1])[:5]
    print(f"differential {version}: {len(CLIENT_SCENARIOS)} client scenarios, {took:.1f} s")
    print("  slowest:", ", ".join(f"{name} {t:.1f} s" for name, t in slowest))
    (client_outcomes,), (wire_outcomes,) = clients_box, wire_box
    wrong = [o.explain() for o in (*client_outcomes, *wire_outcomes) if not o.agrees]
    # A scenario that failed on both sides in the same way would agree: none may fail.
    wrong += [
        f"{o.scenario} failed: {o.real}" for o in client_outcomes if "failed:" in str(o.real)[:9]
    ]
    assert not wrong, "\n".join(wrong)
    assert len(client_outcomes) == len(CLIENT_SCENARIOS) >= 40  # issue 25: at least 40
    assert len(wire_outcomes) == len(scenarios_for(version))
    assert len(client_outcomes) + len(wire_outcomes) >= 60
