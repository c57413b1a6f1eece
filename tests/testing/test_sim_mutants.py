"""The deliberate bugs both simulations share (``sharecon.testing.sim.mutants``)."""

from __future__ import annotations

from sharecon._share.machine import ShareMachine
from sharecon._share.requests import FetchParams
from sharecon.testing.sim import mutants

PARAMS = FetchParams(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, max_records=8, batch_size=8)


def _dry() -> ShareMachine:
    machine = ShareMachine("g", PARAMS)
    machine.leader(1).planner.dry = True
    return machine


def test_dry_forever_waits_with_no_deadline_and_stays_dry() -> None:
    machine = _dry()
    # The real machine bounds a dry planner's wait by a long poll, and its end clears dry.
    assert machine.idle_timeout(1, 0.1, now=0.0) is not None
    assert mutants.dry_forever_idle_timeout(machine, 1, 0.1, 0.0) is None
    mutants.dry_forever_idle_expired(machine, 1)
    assert machine.leader(1).planner.dry


def test_dry_forever_is_planted_in_the_class_only_while_the_context_runs() -> None:
    with mutants.dry_forever():
        assert _dry().idle_timeout(1, 0.1, now=0.0) is None
    assert _dry().idle_timeout(1, 0.1, now=0.0) is not None
