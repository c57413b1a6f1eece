"""Every client benchmark in one run, on one broker: the source of the docs' tables.

Starts ONE local broker (``sharecon.testing``, Kafka 4.4 by default), or uses
``$SHARECON_BOOTSTRAP``, and runs on it, one after another:

* ``consume.py``: consume + accept, 100 B and 1 KiB records;
* ``produce.py``: ``send_batch``, the awaited ``send()`` loop and the ``send_nowait()``
  loop, 100 B and 1 KiB records;
* ``decode.py``: record decoding (no broker);
* ``roundtrip.py``: pipelined requests on one connection, once per sharecon build.

Each script is run as it ships (its own clients: sharecon's pure and compiled builds,
librdkafka, the Java perf tools, aiokafka and kafka-python where installed). A script
that has a ``--defaults`` flag runs twice: every client at its own defaults ("defaults"),
and every client with the same tuning ("tuned"); one without it runs once ("script",
with the settings its docstring gives). A part that fails is recorded with the end of
its output, and the others still run.

Writes ``benchmarks/results/all.json``: every script's own JSON, the machine (cores, load
average before and after each part, Python, Kafka version, git commit) and how long each
part took; each part's output goes to ``benchmarks/results/all-logs/``. Then::

    python benchmarks/tables.py          # rewrites the tables in README.md and docs/performance.md

Usage::

    python benchmarks/all.py                     # about 10 minutes on 2 cores
    python benchmarks/all.py --quick             # a smoke run: small sizes, one round
    python benchmarks/all.py --parts consume,decode
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, ROOT, build_env, compiled_tree, environment

HERE = Path(__file__).resolve().parent
PARTS = ("consume", "produce", "decode", "roundtrip")
LOGS = RESULTS_DIR / "all-logs"

#: Sizes of a full run (about 10 minutes on 2 cores) and of ``--quick`` (a smoke run).
FULL = {
    "consume": ["--records", "500000", "--sizes", "100,1024", "--styles", "batches,records,poll"],
    "produce": ["--records", "300000", "--sizes", "100,1024"],
    "decode": ["--repeats", "3", "--min-time", "0.05"],
    "roundtrip": ["--requests", "5000", "--rounds", "3"],
}
QUICK = {
    "consume": ["--records", "20000", "--sizes", "100,1024", "--styles", "batches,records,poll"],
    "produce": ["--records", "20000", "--sizes", "100,1024"],
    "decode": ["--repeats", "1", "--min-time", "0.02"],
    "roundtrip": ["--requests", "1000", "--rounds", "1"],
}

#: Runs ``roundtrip.py`` under the build in ``$SHARECON_BENCH_BUILD``: sharecon is imported
#: (and its build checked) before the script runs, so the script's own ``sys.path`` line,
#: which puts the checkout first, cannot swap the compiled build for the pure one.
_ROUNDTRIP_UNDER_BUILD = (
    "import runpy, sys; sys.path.insert(0, {here!r}); import _common; _common.check_build(); "
    "sys.argv = [{script!r}, *sys.argv[1:]]; runpy.run_path({script!r}, run_name='__main__')"
)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _help(script: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(HERE / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=HERE,
    )
    return proc.stdout


def modes(script: str) -> dict[str, list[str]]:
    """The settings ``script`` offers, as mode name -> extra arguments."""
    text = _help(script)
    if "--defaults" not in text:
        return {"script": []}
    return {"defaults": ["--defaults"], "tuned": ["--tuned"] if "--tuned" in text else []}


def run_step(
    label: str, argv: list[str], env: dict[str, str], result_name: str, timeout: float
) -> dict[str, Any]:
    """Run one script; return its JSON result with timing and load, or the error."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{label.replace('/', '-')}.log"
    result_file = RESULTS_DIR / f"{result_name}.json"
    result_file.unlink(missing_ok=True)
    shown = argv[3:] if argv[1] == "-c" else argv[1:]  # roundtrip.py's arguments only
    print(f"==> {label}: {' '.join(Path(a).name if '/' in a else a for a in shown)}", flush=True)
    step: dict[str, Any] = {"argv": shown, "load_before": _load()}
    start = time.perf_counter()
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                argv,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
                cwd=HERE,
            )
            rc: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {timeout:.0f} s"
    step["seconds"] = round(time.perf_counter() - start, 1)
    step["load_after"] = _load()
    if rc == 0 and result_file.exists():
        step["result"] = json.loads(result_file.read_text())
        print(f"    done in {step['seconds']} s", flush=True)
    else:
        tail = log.read_text(errors="replace")[-3000:]
        step["error"] = f"exit {rc}: {tail}"
        print(f"    FAILED ({rc}) in {step['seconds']} s; see {log}", flush=True)
    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument("--version", default=None, help="Kafka version of the local broker")
    parser.add_argument(
        "--out", type=Path, default=RESULTS_DIR / "all.json", help="where to write the JSON"
    )
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; expected some of {list(PARTS)}")
    sizes = QUICK if args.quick else FULL
    began, wall0 = time.time(), time.perf_counter()
    machine: dict[str, Any] = {
        "cores": os.cpu_count(),
        "load_before": _load(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(began)),
        "quick": args.quick,
        **environment(["sharecon", "confluent-kafka", "aiokafka", "kafka-python", "anyio"]),
    }
    machine.pop("timer", None)  # each part's JSON says how it timed
    print("building or finding the compiled build ...", flush=True)
    compiled_tree()  # once per state of the sources, before the broker starts

    from sharecon.testing import KafkaBroker
    from sharecon.testing._provision import DEFAULT_KAFKA_VERSION

    external = os.environ.get("SHARECON_BOOTSTRAP")
    broker = None
    if external is None and any(p != "decode" for p in parts):
        broker = KafkaBroker(args.version or DEFAULT_KAFKA_VERSION)
        broker.start()
        print(f"broker {broker.version} at {broker.bootstrap}", flush=True)
    machine["kafka_version"] = (
        broker.version if broker is not None else (args.version or DEFAULT_KAFKA_VERSION)
    )
    machine["broker"] = "external ($SHARECON_BOOTSTRAP)" if external else "local, one for the run"
    env = dict(os.environ)
    if broker is not None:
        env["SHARECON_BOOTSTRAP"] = broker.bootstrap
    steps: dict[str, dict[str, Any]] = {}
    try:
        for part in parts:
            extra = sizes[part]
            if part in ("consume", "produce"):
                for mode, flags in modes(f"{part}.py").items():
                    steps[f"{part}/{mode}"] = run_step(
                        f"{part}/{mode}",
                        [sys.executable, str(HERE / f"{part}.py"), *extra, *flags],
                        env,
                        part,
                        timeout=1800,
                    )
            elif part == "decode":
                steps["decode/script"] = run_step(
                    "decode/script",
                    [sys.executable, str(HERE / "decode.py"), *extra],
                    env,
                    "decode",
                    timeout=1800,
                )
            else:
                script = str(HERE / "roundtrip.py")
                for build in ("pure", "compiled"):
                    code = _ROUNDTRIP_UNDER_BUILD.format(here=str(HERE), script=script)
                    steps[f"roundtrip/{build}"] = run_step(
                        f"roundtrip/{build}",
                        [sys.executable, "-c", code, *extra],
                        {
                            **build_env(build),
                            "SHARECON_BOOTSTRAP": env.get("SHARECON_BOOTSTRAP", ""),
                        },
                        "roundtrip",
                        timeout=1200,
                    )
    finally:
        if broker is not None:
            broker.stop()
    machine["load_after"] = _load()
    machine["seconds"] = round(time.perf_counter() - wall0, 1)
    payload = {"schema": 1, "machine": machine, "sizes": sizes, "steps": steps}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    failed = [name for name, step in steps.items() if "error" in step]
    print(f"wrote {args.out} in {machine['seconds']:.0f} s; load {machine['load_after']}")
    if failed:
        print(f"FAILED parts: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
