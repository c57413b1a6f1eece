"""Differential conformance: every scripted scenario on the model broker and a real one.

One broker per Kafka line (4.1 to 4.4, from the session's broker pool, which the version
tests in the same xdist group use too); the scenarios of a
line run concurrently, each on its own topic and group. A disagreement is a model bug until
a real broker's source says otherwise (see "The model broker" in docs/testing.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from sharecon.testing.conformance.runner import compare
from sharecon.testing.conformance.scenarios import scenarios_for

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


@pytest.fixture
def anyio_backend() -> str:
    # The runner drives the broker's protocol directly: one event loop is enough, and each
    # run costs a broker's worth of waiting.
    return "asyncio"


@pytest.mark.parametrize("version", ["4.1", "4.2", "4.3", "4.4"])
async def test_the_model_answers_as_the_broker_does(
    kafka_broker_factory: BrokerFactory, version: str
) -> None:
    broker = kafka_broker_factory(version)
    start = time.monotonic()
    outcomes = await compare(broker.bootstrap, version)
    took = time.monotonic() - start
    assert len(outcomes) == len(scenarios_for(version)) >= 30
    wrong = [o.explain() for o in outcomes if not o.agrees]
    assert not wrong, "\n".join(wrong)
    # Every scenario showed something (a scenario that observes nothing cannot disagree).
    assert all(o.model for o in outcomes)
    print(f"conformance on {version}: {len(outcomes)} scenarios in {took:.1f} s")
