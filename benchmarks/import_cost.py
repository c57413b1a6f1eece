"""What ``from sharecon import ShareConsumer`` costs: CPU, wall time, modules, dataclasses.

Each run is a fresh interpreter started outside the checkout (so that it imports the
sharecon installed in that interpreter, not the source tree), which imports ``anyio``
first (every client imports it) and then times ``from sharecon import ShareConsumer``
with ``resource.getrusage`` (CPU, user + system) and ``time.perf_counter`` (wall). It
reports the modules the import added (all of them, and sharecon's own) and the dataclasses
it created (each one costs its generated methods' ``exec``; a class mypyc compiled is
not one). ``confluent_kafka``'s import is timed beside it when
``--other`` names an interpreter that has it.

The interpreters are run in alternation, ``--runs`` times each, and the medians printed:

    python benchmarks/import_cost.py --python pure=.venv/bin/python \\
        --python compiled=/tmp/compiled/venv/bin/python --runs 7

Each ``--python LABEL=PATH`` is one contender; each child checks ``sharecon.COMPILED`` and
prints it, so a table row cannot silently measure the wrong build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import gc, json, resource, sys, time

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

what = sys.argv[1]
a0 = cpu()
import anyio  # every client imports it; timed apart so that the figure is sharecon's
anyio_cpu = cpu() - a0
# Every dataclass decoration goes through dataclasses._process_class (which builds and
# exec's the generated methods): count its calls. A mypyc-compiled class is not one.
import dataclasses
made = [0]
_process_class = dataclasses._process_class

def counting(*args, **kwargs):
    made[0] += 1
    return _process_class(*args, **kwargs)

dataclasses._process_class = counting
before = set(sys.modules)
c0, w0 = cpu(), time.perf_counter()
if what == "sharecon":
    from sharecon import ShareConsumer
else:
    import confluent_kafka
c1, w1 = cpu(), time.perf_counter()
added = set(sys.modules) - before
out = {
    "cpu_s": c1 - c0,
    "with_anyio_cpu_s": c1 - c0 + anyio_cpu,
    "wall_s": w1 - w0,
    "modules": len(added),
    "own_modules": sum(1 for m in added if m.split(".")[0] == what),
    "dataclasses": made[0],
}
if what == "sharecon":
    import sharecon
    out["compiled"] = sharecon.COMPILED
    out["file"] = sharecon.__file__
print(json.dumps(out))
"""


def run_once(python: str, what: str, cwd: str) -> dict[str, object]:
    # Bytecode is written and used, as in an installed package: with
    # PYTHONDONTWRITEBYTECODE set, a source tree would be compiled again on every run.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [python, "-c", CHILD, what], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", required=True, metavar="LABEL=PATH")
    parser.add_argument("--other", metavar="PATH", help="an interpreter with confluent_kafka")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    # Absolute paths: the children run in a scratch directory, outside the checkout.
    contenders = [
        (label, os.path.abspath(path)) for label, path in (p.split("=", 1) for p in args.python)
    ]
    if args.other:
        contenders.append(("confluent_kafka", os.path.abspath(args.other)))
    results: dict[str, list[dict[str, object]]] = {label: [] for label, _ in contenders}
    with tempfile.TemporaryDirectory() as cwd:
        for label, python in contenders:  # a warm-up run each: bytecode, file cache
            run_once(python, "confluent_kafka" if label == "confluent_kafka" else "sharecon", cwd)
        for _ in range(args.runs):
            for label, python in contenders:
                what = "confluent_kafka" if label == "confluent_kafka" else "sharecon"
                results[label].append(run_once(python, what, cwd))
    print(
        f"{'contender':<28} {'CPU s':>7} {'wall s':>7} {'+anyio':>7} {'modules':>8} {'own':>5}"
        f" {'dataclasses':>11}"
    )
    for label, runs in results.items():
        cpu = statistics.median(float(r["cpu_s"]) for r in runs)  # type: ignore[arg-type]
        wall = statistics.median(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
        with_anyio = statistics.median(float(r["with_anyio_cpu_s"]) for r in runs)  # type: ignore[arg-type]
        first = runs[0]
        build = (
            "" if "compiled" not in first else f" ({'compiled' if first['compiled'] else 'pure'})"
        )
        print(
            f"{label + build:<28} {cpu:>7.3f} {wall:>7.3f} {with_anyio:>7.3f} {first['modules']:>8} "
            f"{first['own_modules']:>5} {first['dataclasses']:>11}"
        )
        spread = ", ".join(f"{float(r['cpu_s']):.3f}" for r in runs)  # type: ignore[arg-type]
        print(f"{'':<28} CPU of each run: {spread}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
