"""Blocking ``for record in consumer`` (sharecon.sync) vs ``async for`` (sharecon), one run.

One topic (3 partitions) is loaded with N records of 100 B; then each contender reads all
of them through its own fresh share group, one record at a time, implicit mode (every
record accepted when the loop moves on), touching each value. Each contender measures,
from its first record to its last, the wall-clock rate and the CPU time of its whole
process (every thread: the sync client's event-loop thread included):

* ``async``: ``async for record in sharecon.ShareConsumer(...)`` under ``anyio.run``;
* ``sync``: ``for record in sharecon.sync.ShareConsumer(...)`` (the same engine on a
  background event-loop thread, handing records over in chunks).

Both run in each of sharecon's builds (pure Python, and the per-record modules compiled
with mypyc), each in its own process started outside the checkout (each child checks
``sharecon.COMPILED``), with the same settings (``max_records``). The table gives the
medians of records/s and of CPU microseconds per record, and the ratios sync/async of the
same build (for CPU: async's CPU per record over sync's, so above 1.00x sync is faster);
the rounds alternate the order of the contenders. Writes ``benchmarks/results/sync_iter.json``.

Usage::

    python benchmarks/sync_iter.py                     # starts a local broker
    python benchmarks/sync_iter.py --records 300000 --rounds 3 --builds pure
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/sync_iter.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    build_env,
    check_build,
    compiled_tree,
    environment,
    fmt_rate,
    print_table,
    write_json,
)

PARTITIONS = 3
MAX_RECORDS = 500


def _worker_async(bootstrap: str, topic: str, group: str, n: int) -> tuple[float, float, int]:
    import anyio

    from sharecon import ShareConsumer

    async def main() -> tuple[float, float, int]:
        count = nbytes = 0
        first = cpu = 0.0
        async with ShareConsumer(
            bootstrap, group_id=group, topics=[topic], max_records=MAX_RECORDS
        ) as c:
            async for record in c:
                if not count:
                    first = time.perf_counter()
                    cpu = time.process_time()
                count += 1
                nbytes += len(record.value or b"")
                if count >= n:
                    break
            steady = time.perf_counter() - first
            cpu = time.process_time() - cpu
            await c.commit()
        return steady, cpu, count

    return anyio.run(main)


def _worker_sync(bootstrap: str, topic: str, group: str, n: int) -> tuple[float, float, int]:
    from sharecon.sync import ShareConsumer

    count = nbytes = 0
    first = cpu = 0.0
    with ShareConsumer(bootstrap, group_id=group, topics=[topic], max_records=MAX_RECORDS) as c:
        for record in c:
            if not count:
                first = time.perf_counter()
                cpu = time.process_time()
            count += 1
            nbytes += len(record.value or b"")
            if count >= n:
                break
        steady = time.perf_counter() - first
        cpu = time.process_time() - cpu
        c.commit()
    return steady, cpu, count


def worker_main(argv: list[str]) -> None:
    kind, bootstrap, topic, group, n = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    build = check_build()
    fn = _worker_sync if kind == "sync" else _worker_async
    steady, cpu, count = fn(bootstrap, topic, group, n)
    result = {"build": build, "steady": steady, "cpu": cpu, "records": count}
    print("RESULT " + json.dumps(result), flush=True)


def run_worker(kind: str, build: str, bootstrap: str, topic: str, group: str, n: int) -> Any:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", kind]
    argv += [bootstrap, topic, group, str(n)]
    with tempfile.TemporaryDirectory() as outside:  # not the checkout: no stray sharecon/
        proc = subprocess.run(
            argv, env=build_env(build), cwd=outside, capture_output=True, text=True, timeout=900
        )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{kind} {build} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each contender")
    parser.add_argument("--builds", default="pure,compiled")
    args = parser.parse_args()
    builds = [b for b in args.builds.split(",") if b]
    if "compiled" in builds:
        compiled_tree()  # built before the broker starts (about a minute once)

    from sharecon.testing import KafkaBroker

    external = os.environ.get("SHARECON_BOOTSTRAP")
    broker = None if external else KafkaBroker()
    if broker is not None:
        broker.start()
    try:
        from sharecon.testing.tools import KafkaTools

        tools = broker.tools if broker is not None else KafkaTools(external)  # type: ignore[arg-type]
        bootstrap = broker.bootstrap if broker is not None else str(external)
        topic = f"bench-sync-{uuid.uuid4().hex[:6]}"
        tools.create_topic(topic, PARTITIONS)
        tools.produce(
            topic,
            args.records,
            record_size=100,
            producer_props={"batch.size": "262144", "linger.ms": "20"},
        )
        # Warm-up: the first share group pays for the share-state topic; no contender should.
        warm = f"bench-warm-{uuid.uuid4().hex[:6]}"
        tools.alter_group_config(warm, {"share.auto.offset.reset": "earliest"})
        run_worker("async", "pure", bootstrap, topic, warm, 1000)
        rates: dict[str, list[float]] = {}
        cpus: dict[str, list[float]] = {}
        for rnd in range(args.rounds):
            order = [(k, b) for b in builds for k in ("async", "sync")]
            if rnd % 2:
                order.reverse()
            for kind, build in order:
                group = f"bench-{kind}-{build}-{uuid.uuid4().hex[:6]}"
                tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
                r = run_worker(kind, build, bootstrap, topic, group, args.records)
                rate = r["records"] / r["steady"]
                per_record = r["cpu"] / r["records"] * 1e6
                rates.setdefault(f"{kind} {build}", []).append(rate)
                cpus.setdefault(f"{kind} {build}", []).append(per_record)
                print(
                    f"  round {rnd + 1}: {kind} {build}: {fmt_rate(rate)} records/s, "
                    f"{per_record:.2f} CPU us/record",
                    flush=True,
                )
        rows = []
        for build in builds:
            a = statistics.median(rates[f"async {build}"])
            s = statistics.median(rates[f"sync {build}"])
            ca = statistics.median(cpus[f"async {build}"])
            cs = statistics.median(cpus[f"sync {build}"])
            rows.append([build, "async for", fmt_rate(a), "1.00x", f"{ca:.2f}", "1.00x"])
            # Speed from CPU time: async CPU per record over sync's (above 1.00x: sync is
            # faster), steadier than wall-clock rates on a shared machine.
            rows.append(
                [build, "sync for", fmt_rate(s), f"{s / a:.2f}x", f"{cs:.2f}", f"{ca / cs:.2f}x"]
            )
        print_table(
            [
                "build",
                "loop",
                "records/s (median)",
                "rate sync/async",
                "CPU us/record (median)",
                "speed by CPU sync/async",
            ],
            rows,
            title=(
                f"{args.records:,} records of 100 B, {PARTITIONS} partitions, implicit mode, "
                f"max_records={MAX_RECORDS}, median of {args.rounds} rounds"
            ),
        )
        path = write_json(
            "sync_iter",
            {
                "records": args.records,
                "rates": rates,
                "cpu_us_per_record": cpus,
                "environment": environment(),
            },
        )
        print(f"wrote {path}")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        main()
