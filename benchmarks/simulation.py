"""Deterministic simulation: how many fault schedules one CPU runs per hour.

Runs seeds ``--start`` .. ``--start + --schedules - 1`` of :mod:`sharecon.testing.sim`
on each ``--versions`` Kafka line (the real share machine and buffer against the model
broker, every invariant checked) and reports schedules per CPU hour
(``time.process_time``: time the process ran, not time it waited for a shared CPU), the
events per schedule, and the violations found (there should be none). Then, for each
deliberate bug (``--mutant`` of the simulator), the first seed that catches it and the
CPU time that took.

It measures the build the interpreter imports (``sharecon.COMPILED`` says which).

Run: ``.venv/bin/python benchmarks/simulation.py [--schedules N] [--versions 4.1,4.4]``
(JSON in ``benchmarks/results/simulation.json``).
"""

from __future__ import annotations

import argparse
import time

from _common import environment, fmt_rate, print_table, write_json

import sharecon
from sharecon.testing.sim import MUTANTS, run


def measure(seeds: range, version: str) -> dict[str, float]:
    """Run ``seeds`` on ``version``: CPU seconds, events and violations."""
    run(seeds[0], version)  # warm up: imports, lazily built tables
    events = bad = 0
    start = time.process_time()
    for seed in seeds:
        out = run(seed, version)
        events += out.events
        bad += out.violation is not None
    cpu = time.process_time() - start
    n = len(seeds)
    return {
        "schedules": n,
        "cpu_s": cpu,
        "per_cpu_hour": n / cpu * 3600,
        "events_per_schedule": events / n,
        "us_per_event": cpu / events * 1e6,
        "violations": bad,
    }


def detect(mutant: str, version: str, limit: int) -> dict[str, object]:
    """The first seed (from 0) whose schedule catches ``mutant``, and the CPU it took."""
    start = time.process_time()
    for seed in range(limit):
        out = run(seed, version, mutant)
        if out.violation is not None:
            return {
                "seed": seed,
                "schedules": seed + 1,
                "cpu_s": time.process_time() - start,
                "violation": str(out.violation),
                "replay": out.replay(mutant),
            }
    return {"seed": None, "schedules": limit, "cpu_s": time.process_time() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--schedules", type=int, default=3000, help="seeds per version")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--versions", default="4.1,4.4", help="Kafka lines of the model")
    ap.add_argument("--limit", type=int, default=5000, help="seeds to try per mutant")
    args = ap.parse_args()
    versions = args.versions.split(",")
    build = "compiled" if sharecon.COMPILED else "pure"
    rates = {v: measure(range(args.start, args.start + args.schedules), v) for v in versions}
    print_table(
        [
            "version",
            "schedules",
            "CPU s",
            "schedules/CPU-hour",
            "events/schedule",
            "µs/event",
            "violations",
        ],
        [
            [
                v,
                r["schedules"],
                f"{r['cpu_s']:.1f}",
                fmt_rate(r["per_cpu_hour"]),
                f"{r['events_per_schedule']:.0f}",
                f"{r['us_per_event']:.1f}",
                r["violations"],
            ]
            for v, r in rates.items()
        ],
        title=f"Fault schedules ({build} build)",
    )
    caught = {f"{m} {v}": detect(m, v, args.limit) for m in MUTANTS for v in versions}
    print_table(
        ["mutant", "first seed", "schedules", "CPU s", "violation"],
        [
            [k, c["seed"], c["schedules"], f"{c['cpu_s']:.2f}", c.get("violation", "not caught")]
            for k, c in caught.items()
        ],
        title="Deliberate bugs: time to detection",
    )
    path = write_json(
        "simulation",
        {"environment": environment(), "build": build, "rates": rates, "mutants": caught},
    )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
