"""Run every scenario on the model and on a real broker, and list where they differ."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from sharecon.admin import Admin
from sharecon.testing.conformance.broker_runner import BrokerTarget, run_on_broker
from sharecon.testing.conformance.model_runner import run_on_model
from sharecon.testing.conformance.scenarios import scenarios_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.testing.conformance.scenario import Observation, Scenario

__all__ = ["Outcome", "compare"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario's result on both sides."""

    scenario: str
    model: tuple[Observation, ...]
    broker: tuple[Observation, ...]
    seconds: float

    @property
    def agrees(self) -> bool:
        """Whether every observation is the same."""
        return self.model == self.broker

    def explain(self) -> str:
        """The two runs side by side, for a failure message."""
        lines = [f"{self.scenario}: the model and the broker disagree"]
        for i in range(max(len(self.model), len(self.broker))):
            m = str(self.model[i]) if i < len(self.model) else "-"
            b = str(self.broker[i]) if i < len(self.broker) else "-"
            lines.append(f"  model  {m}" + ("" if m == b else f"\n  broker {b}"))
        return "\n".join(lines)


async def compare(
    bootstrap: str,
    version: str,
    *,
    scenarios: list[Scenario] | None = None,
    concurrency: int = 8,
    move_leader: Callable[[str, int], None] | None = None,
    stop_broker: Callable[[int], None] | None = None,
    start_broker: Callable[[int], None] | None = None,
) -> list[Outcome]:
    """Play ``scenarios`` (default: every one meant for ``version``) on the broker at
    ``bootstrap`` (Kafka ``version``) and on the model; return one outcome per scenario,
    in the scenarios' order. Scenarios run ``concurrency`` at a time (each has its own
    topic and group, and most of their time is spent waiting for locks to end).

    ``move_leader(topic, partition)`` moves a partition's leadership (blocking; a
    cluster's, for the scenarios of :func:`~.scenarios.cluster_scenarios_for`);
    ``stop_broker(node_id)`` and ``start_broker(node_id)`` stop a broker cleanly and start
    it again (blocking), for the scenarios that leave a partition without a leader."""
    chosen = scenarios if scenarios is not None else scenarios_for(version)
    results: dict[str, Outcome] = {}
    limiter = anyio.CapacityLimiter(concurrency)
    async with Admin(bootstrap, client_id="conformance-admin") as admin:
        async with anyio.create_task_group() as connections:
            target = BrokerTarget(
                bootstrap,
                version,
                admin,
                connections,
                move_leader=move_leader,
                stop_broker=stop_broker,
                start_broker=start_broker,
            )

            async def one(scenario: Scenario) -> None:
                async with limiter:
                    start = time.monotonic()
                    broker = await run_on_broker(target, scenario)
                    results[scenario.name] = Outcome(
                        scenario.name,
                        tuple(run_on_model(scenario, version)),
                        tuple(broker),
                        time.monotonic() - start,
                    )

            async with anyio.create_task_group() as tg:
                for scenario in chosen:
                    tg.start_soon(one, scenario)
            connections.cancel_scope.cancel()
    return [results[s.name] for s in chosen]
