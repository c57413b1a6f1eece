"""The producer simulation: the real producer engine, accumulator and futures against the
model leaders' idempotent append rules, under seeded fault schedules
(``sharecon.testing.sim.produce``; "Producer simulation" in docs/testing.md).

Fixed seeds, some random ones (printed), the seeds of the bugs it found, and the
deliberate bugs it must catch. A failure names the command that replays it.
"""

from __future__ import annotations

import random

import pytest

from sharecon.testing.sim.produce import (
    MUTANTS,
    ProduceOutcome,
    first_failure,
    main,
    run,
    search,
)

FIXED = list(range(600))
RANDOM = 200
#: Seeds of the producer bugs the simulation found, as first found (63 a second batch
#: written before a refused first one of a new producer id: order; 176 a batch resent
#: after REQUEST_TIMED_OUT fell out of the broker's five-batch memory: written twice; 734
#: and 445 a batch of unknown outcome resent under a new producer id: written twice), and
#: the seeds that catch each fix undone in today's schedules (the mutants below).
REGRESSIONS = [63, 176, 734, 445, 632, 188, 1, 517, 845, 18]


def _explain(bad: list[ProduceOutcome], mutant: str | None = None) -> str:
    return "\n".join(f"{o.violation}\n  replay: {o.replay(mutant)}" for o in bad[:5])


def test_fixed_seeds_keep_every_producer_invariant() -> None:
    bad = search(FIXED)
    assert not bad, _explain(bad)


def test_random_seeds_keep_every_producer_invariant() -> None:
    start = random.SystemRandom().randrange(10**6, 10**9)
    print(f"producer simulation: random seeds {start}..{start + RANDOM - 1}")
    bad = search(range(start, start + RANDOM))
    assert not bad, _explain(bad)


def test_the_seeds_of_found_bugs_keep_every_producer_invariant() -> None:
    bad = search(REGRESSIONS)
    assert not bad, _explain(bad)


@pytest.mark.parametrize(
    ("mutant", "invariants"),
    [
        ("no-ambiguous", {"P2", "P3"}),
        ("no-reset", None),
        ("no-first-confirm", {"P4"}),
        ("no-window", {"P8"}),
        ("rto-certain", {"P3"}),
        ("resend-unknown", {"P3"}),
    ],
)
def test_a_deliberate_producer_bug_is_caught(mutant: str, invariants: set[str] | None) -> None:
    """Proof the simulation can fail: lost requests taken as never written (an expired
    batch hands its sequence numbers back, and the next batch is answered as its
    duplicate); a reset that keeps the producer id; and each of the fixes of the bugs it
    found, undone (pipelining before a first batch is written, numbering past five batches
    not done, REQUEST_TIMED_OUT taken as not written, batches of unknown outcome resent
    under a new producer id)."""
    found = first_failure(range(3000), mutant)
    assert found is not None, f"{mutant} was not caught in 3000 schedules"
    assert found.violation is not None
    if invariants is not None:
        assert found.violation.invariant in invariants, str(found.violation)
    assert run(found.seed).violation is None  # the same seed without the bug is fine


def test_the_schedules_write_fail_and_cover_every_fault() -> None:
    kinds: dict[str, int] = {}
    written = failed = 0
    for seed in range(200):
        out = run(seed)
        assert out.violation is None, out.replay()
        assert out.written + out.failed == out.records  # every future resolved
        written += out.written
        failed += out.failed
        for f in {f.split("@")[0] for f in out.faults}:
            kinds[f] = kinds.get(f, 0) + 1
    assert written > 1000 and failed > 0
    for kind in ("cut", "down", "crash", "stall", "move", "rto", "nenough", "throttle"):
        assert kinds.get(kind, 0) >= 10, (kind, kinds)


def test_a_failing_seed_prints_its_replay_command(capsys: pytest.CaptureFixture[str]) -> None:
    found = first_failure(range(3000), "no-reset")
    assert found is not None
    assert main(["--seed", str(found.seed), "--mutant", "no-reset"]) == 1
    out = capsys.readouterr().out
    assert (
        f"replay: python -m sharecon.testing.sim.produce --seed {found.seed} --mutant no-reset"
        in out
    )
    assert main(["--seed", str(found.seed)]) == 0
    assert len(MUTANTS) == 6
