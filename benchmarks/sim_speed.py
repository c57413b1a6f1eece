"""Simulation speed, side by side: schedules per CPU-hour of the core simulation
(:mod:`sharecon.testing.sim`) and of the whole-client one (:mod:`sharecon.testing.sim.client`).

Each simulation runs in its own child process, outside the checkout, on the same seeds
(``--start`` .. ``--start + --seeds - 1``; the core one, about 40 times faster,
``--core-factor`` times as many) on every ``--versions`` Kafka line. The children
take turns, a chunk of seeds each, so a shared machine's load falls on them alike; each
counts its own CPU time (``time.process_time``: time it ran, not time it waited for a
CPU). The targets are issue 30's: 1,000,000 core and 250,000 whole-client schedules per
CPU-hour.

``--against DIR`` adds the same two simulations of another sharecon tree (for example
``git archive <commit> sharecon | tar -x -C DIR``), taking turns with the others: a before
and after under one load.

Run: ``.venv/bin/python benchmarks/sim_speed.py [--seeds 40] [--versions 4.1,4.2,4.3,4.4]``
(JSON in ``benchmarks/results/sim_speed.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import build_env, check_build, environment, fmt_rate, print_table, write_json

#: Schedules per CPU-hour each simulation should reach (issue 30, item 7).
TARGETS = {"core": 1_000_000, "client": 250_000}


def child(kind: str) -> None:
    """In a child: run the chunks of seeds read from stdin, print each one's CPU time."""
    check_build()
    if kind == "core":
        from sharecon.testing.sim import run
    else:
        from sharecon.testing.sim.client import run  # type: ignore[assignment]
    run(0, "4.4")  # warm up: imports, lazily built tables
    for line in sys.stdin:
        first, end, versions = line.split()
        bad = n = 0
        start = time.process_time()
        for version in versions.split(","):
            for seed in range(int(first), int(end)):
                bad += run(seed, version).violation is not None
                n += 1
        cpu = time.process_time() - start
        print(json.dumps({"schedules": n, "cpu_s": cpu, "violations": bad}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=40, help="seeds per version")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--versions", default="4.1,4.2,4.3,4.4", help="Kafka lines to imitate")
    ap.add_argument("--chunk", type=int, default=5, help="seeds per turn")
    ap.add_argument(
        "--core-factor",
        type=int,
        default=10,
        help="the core simulation runs this many times the seeds (it is about 40x faster)",
    )
    ap.add_argument("--against", type=Path, help="another sharecon tree to measure too")
    ap.add_argument("--child", choices=sorted(TARGETS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    trees: dict[str, str | None] = {"this tree": None}
    if args.against is not None:
        if not (args.against / "sharecon" / "__init__.py").exists():
            sys.exit(f"--against {args.against}: no sharecon package there")
        trees[str(args.against)] = str(args.against.resolve())
    procs: dict[tuple[str, str], subprocess.Popen[str]] = {}
    with tempfile.TemporaryDirectory() as outside:
        for tree, path in trees.items():
            env = build_env("pure")
            if path is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
            for kind in TARGETS:
                procs[(tree, kind)] = subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), "--child", kind],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                    cwd=outside,
                )
        totals = {key: {"schedules": 0, "cpu_s": 0.0, "violations": 0} for key in procs}
        end = args.start + args.seeds
        try:
            for first in range(args.start, end, args.chunk):
                for key, proc in procs.items():
                    assert proc.stdin is not None and proc.stdout is not None
                    lo, hi = first, min(first + args.chunk, end)
                    if key[1] == "core":
                        f = args.core_factor
                        lo, hi = (
                            args.start + (lo - args.start) * f,
                            args.start + (hi - args.start) * f,
                        )
                    proc.stdin.write(f"{lo} {hi} {args.versions}\n")
                    proc.stdin.flush()
                    line = proc.stdout.readline()
                    if not line:
                        sys.exit(f"the {key[1]} simulation of {key[0]} failed (see above)")
                    for k, v in json.loads(line).items():
                        totals[key][k] += v
        finally:
            for proc in procs.values():
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait()
    rows = []
    for (tree, kind), t in totals.items():
        rate = t["schedules"] / t["cpu_s"] * 3600
        t["per_cpu_hour"] = rate
        rows.append(
            [
                tree,
                kind,
                t["schedules"],
                f"{t['cpu_s']:.1f}",
                fmt_rate(rate),
                f"{rate / TARGETS[kind]:.2f}x",
                t["violations"],
            ]
        )
    print_table(
        [
            "tree",
            "simulation",
            "schedules",
            "CPU s",
            "schedules/CPU-hour",
            "of target",
            "violations",
        ],
        rows,
        title=(
            f"Simulation speed, seeds from {args.start} (client {args.seeds}, core"
            f" {args.seeds * args.core_factor} per line) on {args.versions}"
        ),
    )
    if args.against is not None:
        for kind in TARGETS:
            ratio = (
                totals[("this tree", kind)]["per_cpu_hour"]
                / totals[(str(args.against), kind)]["per_cpu_hour"]
            )
            print(f"{kind}: this tree runs {ratio:.2f}x the schedules per CPU-hour")
    written = write_json(
        "sim_speed",
        {
            "environment": environment(["trio", "anyio"]),
            "seeds": [args.start, end],
            "versions": args.versions,
            "targets": TARGETS,
            "results": {f"{tree}: {kind}": t for (tree, kind), t in totals.items()},
        },
    )
    print(f"\nwritten to {written}")


if __name__ == "__main__":
    main()
