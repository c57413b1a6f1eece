"""Where a consumer's time goes between fetches: passes of one load through one broker, and
a trace of each fetch's send and answer and of every wait of the application for records.

One topic of ``--partitions`` partitions is loaded with ``--records`` records of 100 B (as
``consume.py`` loads it: 256 KiB batches unless ``--batch-size`` says otherwise, 20 ms
linger), then read ``--passes`` times, each pass through a fresh share group at
sharecon's defaults, in the styles given (``records``: ``async for``; ``batches``:
``batches()``), one after the other in one child process per pass. Each pass prints one
line: its rate from the first record, CPU per record, ShareFetch answers and records per
answer, the mean time from a fetch to its answer, how often and how long the application
waited for records, and the requests it sent by kind (a ShareAcknowledge carries answers
on their own, with no fetch). With ``--trace N`` a pass also prints N events from its
middle, in order: a request sent (its kind; a fetch's MaxBytes, MaxRecords and
MaxWaitMs; how many answers it carried), its answer received, and the application's
waits, each with the records buffered then.

A fresh broker's JIT warms up over the passes, and the fetch times show it::

    python benchmarks/pace.py --passes records,records,batches,records --trace 24

A pass written ``records:2000`` runs with ``max_records=2000`` (how the size of each
ShareFetch answer changes the broker's share of a cycle).

The trace wraps the fetcher's and the iteration's methods (the pure Python ones, present
in both builds): it costs a little per fetch, nothing per record.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import build_env

CHILD = r"""
import json, sys, time

import anyio

import sharecon
from sharecon import ShareConsumer
from sharecon._consumer import fetcher as fetcher_module
from sharecon._consumer.iteration import Iteration

build = "compiled" if sharecon.COMPILED else "pure"
bootstrap, topic, group, n, style, trace, wanted, limit = sys.argv[1:9]
if build != wanted:
    sys.exit(f"asked for the {wanted} build, got {build} from {sharecon.__file__}")
n, trace = int(n), int(trace)
events = []
waits = [0, 0.0]
kinds = {}  # requests sent, by kind

def wrap_fetcher(name):
    inner = getattr(fetcher_module.NodeFetcher, name)

    async def step(self, a, *args, **kwargs):
        buf = self.core.buffer
        what = name.lstrip("_")
        if name == "_send":
            b = a.body
            kind = type(b).__name__.removesuffix("Request")
            kinds[kind] = kinds.get(kind, 0) + 1
            what += f" {kind}"
            if hasattr(b, "max_bytes"):
                what += (
                    f" MaxBytes={b.max_bytes} MaxRecords={getattr(b, 'max_records', '-')}"
                    f" MaxWaitMs={b.max_wait_ms}"
                )
            what += f" answers={a.taken.count if a.taken else 0}"
        events.append((time.perf_counter(), what + " begins", buf.records))
        try:
            return await inner(self, a, *args, **kwargs)
        finally:
            events.append((time.perf_counter(), name.lstrip("_") + " ends", buf.records))

    setattr(fetcher_module.NodeFetcher, name, step)

for name in ("_send", "_await", "_idle", "_pause"):
    wrap_fetcher(name)

wait_for_records = Iteration.wait_for_records

async def waiting(self, core, *args, **kwargs):
    t = time.perf_counter()
    events.append((t, "application waits", core.buffer.records))
    try:
        return await wait_for_records(self, core, *args, **kwargs)
    finally:
        waits[0] += 1
        waits[1] += time.perf_counter() - t
        events.append((time.perf_counter(), "application goes on", core.buffer.records))

Iteration.wait_for_records = waiting

async def main():
    count = 0
    start = cpu = None
    tuning = {"max_records": int(limit)} if limit != "-" else {}
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic], **tuning) as consumer:
        if style == "records":
            async for _record in consumer:
                if start is None:
                    start, cpu, waits[:], events[:] = time.perf_counter(), time.process_time(), [0, 0.0], []
                    kinds.clear()
                count += 1
                if count >= n:
                    break
        else:
            async for batch in consumer.batches():
                if start is None:
                    start, cpu, waits[:], events[:] = time.perf_counter(), time.process_time(), [0, 0.0], []
                    kinds.clear()
                count += len(batch)
                if count >= n:
                    break
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        fetched = consumer._live().stats.fetch_records
        latency = consumer._live().stats.fetch_latency
    out = {
        "build": build, "style": style, "records": count,
        "rate": count / wall, "cpu_us": cpu / count * 1e6,
        "answers": fetched.events, "per_answer": fetched.total / max(fetched.events, 1),
        "fetch_ms": latency.total / max(latency.events, 1),
        "waits": waits[0], "waited_s": waits[1], "wall_s": wall, "requests": dict(kinds),
    }
    if trace:
        mid = len(events) // 2
        t0 = events[mid][0]
        out["trace"] = [
            f"{(t - t0) * 1000:8.2f} ms  {what:<80} buffered {buffered}"
            for t, what, buffered in events[mid : mid + trace]
        ]
    print("RESULT " + json.dumps(out))

anyio.run(main)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument(
        "--passes",
        default="records,batches,records,batches",
        help="the styles of the passes, in order (records, batches), each with"
        " ':N' for max_records=N (else sharecon's default)",
    )
    ap.add_argument(
        "--batch-size",
        type=int,
        default=262144,
        help="the loading producer's batch.size in bytes (consume.py's 256 KiB by default)",
    )
    ap.add_argument("--build", choices=("pure", "compiled"), default="compiled")
    ap.add_argument("--trace", type=int, default=0, help="events to print of each pass")
    args = ap.parse_args()
    passes = [s.partition(":") for s in args.passes.split(",") if s]
    styles = [style for style, _, _ in passes]
    limits = [n or "-" for _, _, n in passes]
    if not all(n == "-" or n.isdigit() for n in limits):
        ap.error(f"--passes: a pass's ':N' must be a number: {args.passes}")
    unknown = set(styles) - {"records", "batches"}
    if unknown:
        ap.error(f"--passes: unknown {', '.join(sorted(unknown))} (records, batches)")

    from sharecon.testing import KafkaBroker

    broker = KafkaBroker()
    broker.start()
    try:
        tools = broker.tools
        topic = f"bench-pace-{uuid.uuid4().hex[:6]}"
        tools.create_topic(topic, args.partitions)
        tools.produce(
            topic,
            args.records,
            record_size=100,
            producer_props={"batch.size": str(args.batch_size), "linger.ms": "20"},
        )
        for k, (style, limit) in enumerate(zip(styles, limits, strict=True), 1):
            group = f"bench-pace-{uuid.uuid4().hex[:6]}"
            tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
            argv = [broker.bootstrap, topic, group, str(args.records), style, str(args.trace)]
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, *argv, args.build, limit],
                env=build_env(args.build),
                cwd=tempfile.gettempdir(),  # not the checkout: no sharecon/ beside
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            got = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if not got:
                sys.exit(f"pass {k} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            r = json.loads(got[0][7:])
            print(
                f"pass {k} ({r['build']}, {style}"
                f"{'' if limit == '-' else f', max_records={limit}'}):"
                f" {r['rate']:,.0f} records/s from the first,"
                f" {r['cpu_us']:.2f} µs CPU a record, {r['answers']} answers of"
                f" {r['per_answer']:,.0f} records, fetch {r['fetch_ms']:.2f} ms on average,"
                f" {r['waits']} waits for records, {r['waited_s']:.2f} s of {r['wall_s']:.2f} s;"
                " requests: "
                + ", ".join(f"{n} {kind}" for kind, n in sorted(r["requests"].items())),
                flush=True,
            )
            for line in r.get("trace", []):
                print("    " + line)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
