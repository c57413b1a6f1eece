"""Deterministic simulation: the real share machine against the model broker.

:func:`run` plays one seeded fault schedule (see :mod:`.world`) and returns an
:class:`Outcome`; :func:`search` plays many. The invariants are in :mod:`.checks` and in
"Simulation" in ``docs/testing.md``. A failing seed replays with
``python -m sharecon.testing.sim --seed N --version V``.
"""

from __future__ import annotations

from sharecon.testing.sim.checks import Violation
from sharecon.testing.sim.world import MUTANTS, Outcome, run

__all__ = ["MUTANTS", "Outcome", "Violation", "first_failure", "run", "search"]


def search(
    seeds: list[int],
    versions: tuple[str, ...] = ("4.1", "4.4"),
    mutant: str | None = None,
    *,
    delayed: bool = False,
    poll: bool = True,
) -> list[Outcome]:
    """Run every seed on every version (``delayed``: with a delayed release after the
    faults; ``poll=False``: without ``poll()`` applications); the failing outcomes, in
    order."""
    bad = []
    for seed in seeds:
        for version in versions:
            out = run(seed, version, mutant, delayed=delayed, poll=poll)
            if out.violation is not None:
                bad.append(out)
    return bad


def first_failure(
    seeds: list[int], versions: tuple[str, ...] = ("4.1", "4.4"), mutant: str | None = None
) -> Outcome | None:
    """The first failing outcome among the seeds and versions, if any."""
    for seed in seeds:
        for version in versions:
            out = run(seed, version, mutant)
            if out.violation is not None:
                return out
    return None
