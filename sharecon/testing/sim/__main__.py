"""``python -m sharecon.testing.sim --seed N --version 4.4``: replay (or search) schedules."""

from __future__ import annotations

import argparse
import sys

from sharecon.testing.sim.world import MUTANTS, run


def main(argv: list[str] | None = None) -> int:
    """Replay one seed (``--seed``) or search ``--count`` seeds from ``--start``."""
    ap = argparse.ArgumentParser(prog="python -m sharecon.testing.sim", description=__doc__)
    ap.add_argument("--seed", type=int, help="replay this seed")
    ap.add_argument("--start", type=int, default=0, help="first seed of a search")
    ap.add_argument("--count", type=int, default=1000, help="seeds to search")
    ap.add_argument("--version", default="4.4", help="Kafka line of the model (4.1 .. 4.4)")
    ap.add_argument("--mutant", choices=MUTANTS, help="run against a deliberate bug")
    ap.add_argument(
        "--delayed-release",
        action="store_true",
        help="after the faults, release a record with a delay while a producer writes (4.2+)",
    )
    ap.add_argument(
        "--no-poll",
        action="store_true",
        help="no poll() applications: the schedules as they were before them",
    )
    ap.add_argument("--trace", action="store_true", help="print every event and effect")
    ap.add_argument("--faults", action="store_true", help="print the schedule's faults")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    failed = 0
    for seed in seeds:
        out = run(
            seed,
            args.version,
            args.mutant,
            print if args.trace else None,
            delayed=args.delayed_release,
            poll=not args.no_poll,
        )
        if out.violation is not None or args.seed is not None:
            status = str(out.violation) if out.violation else "ok"
            print(f"seed {seed} ({out.events} events, {out.handed} handed out): {status}")
            if args.faults or args.seed is not None:
                print("  faults:", ", ".join(out.faults) or "none")
            if out.violation is not None:
                print("  replay:", out.replay(args.mutant))
                failed += 1
    if args.seed is None:
        print(f"{len(seeds)} schedules, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
