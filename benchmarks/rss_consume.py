"""Peak memory of a real ShareConsumer reading records that compress to almost nothing.

End to end against a real broker (``sharecon.testing``): 20 records of 60 MiB of zeros,
each in its own zstd batch (about 2 KB each on the wire), produced by sharecon's producer.
Then, in a fresh process per run so peaks do not mix, one ``ShareConsumer`` (its own new
share group, ``earliest``) takes all 20 with ``async for`` and drops each record before
taking the next, as a handler that stores or forwards records would.

With ``--baseline PATH`` (a checkout of an older sharecon, e.g. ``git worktree add
/tmp/old fa2e30e``) the same consumer program also runs against that code, side by side.

Peak RSS is the child's ``VmHWM``. Prints a table and writes
``benchmarks/results/rss_consume.json``.

Run: ``.venv/bin/python benchmarks/rss_consume.py [--baseline PATH] [--records 20]
[--mib 60]``; ``SHARECON_BOOTSTRAP=host:port`` uses a running broker instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json

from sharecon.admin import Admin
from sharecon.producer import Producer

MIB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent

# Runs in the child, against whichever sharecon PYTHONPATH points at.
_CONSUMER = r"""
import json, sys, time
import anyio
from sharecon import ShareConsumer

def hwm() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

async def main(bootstrap: str, topic: str, group: str, n: int) -> None:
    start_rss = hwm()
    started = time.monotonic()
    got = 0
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        with anyio.fail_after(300):
            async for record in consumer:
                assert record.value is not None and not any(record.value[:4096])
                got += 1
                del record
                if got == n:
                    break
        await consumer.commit()
    print(json.dumps({"records": got, "start_rss": start_rss, "peak_rss": hwm(),
                      "seconds": time.monotonic() - started}), flush=True)

anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
"""


async def load(bootstrap: str, topic: str, records: int, size: int) -> None:
    """Create ``topic`` and write ``records`` zstd records of ``size`` zero bytes."""
    async with Admin(bootstrap) as admin:
        await admin.create_topics([topic], num_partitions=1)
    value = bytes(size)
    async with Producer(
        bootstrap,
        compression="zstd",
        max_request_size=size + MIB,
        max_batch_bytes=size + MIB,
        linger=0,
    ) as producer:
        for _ in range(records):
            # One record per batch: each is sent (and acknowledged) before the next.
            await producer.send_and_wait(topic, value)


async def prepare_group(bootstrap: str, group: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})


def run_consumer(code_root: Path, bootstrap: str, topic: str, n: int) -> dict[str, Any]:
    group = f"rss-{uuid.uuid4().hex[:8]}"
    anyio.run(prepare_group, bootstrap, group)
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    done = subprocess.run(
        [sys.executable, "-c", _CONSUMER, bootstrap, topic, group, str(n)],
        env=env,
        cwd=code_root,  # "-c" puts the working folder first on sys.path
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"consumer on {code_root} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--mib", type=int, default=60, help="MiB of zeros per record")
    parser.add_argument("--baseline", type=Path, help="an older sharecon checkout to compare")
    args = parser.parse_args()

    bootstrap = os.environ.get("SHARECON_BOOTSTRAP")
    broker = None
    if bootstrap is None:
        from sharecon.testing import KafkaBroker

        # The broker decompresses each batch to validate it: give it room for one record.
        broker = KafkaBroker(
            extra_config={"message.max.bytes": str(args.mib * MIB + MIB)},
            jvm_opts=["-Xmx1g", "-XX:+UseSerialGC"],
        ).start()
        bootstrap = broker.bootstrap
    try:
        topic = f"bomb-{uuid.uuid4().hex[:8]}"
        t0 = time.monotonic()
        anyio.run(load, bootstrap, topic, args.records, args.mib * MIB)
        print(f"produced {args.records} x {args.mib} MiB zstd in {time.monotonic() - t0:.1f} s")
        runs: dict[str, dict[str, Any]] = {
            "sharecon": run_consumer(ROOT, bootstrap, topic, args.records)
        }
        if args.baseline is not None:
            runs["baseline"] = run_consumer(args.baseline, bootstrap, topic, args.records)
    finally:
        if broker is not None:
            broker.stop()
    rows = [
        [
            name,
            r["records"],
            f"{r['start_rss'] / MIB:.0f}",
            f"{r['peak_rss'] / MIB:.0f}",
            f"{(r['peak_rss'] - r['start_rss']) / MIB:.0f}",
            f"{r['seconds']:.1f}",
        ]
        for name, r in runs.items()
    ]
    print_table(
        ["code", "records", "RSS at start MiB", "peak RSS MiB", "grew MiB", "seconds"],
        rows,
        title=f"ShareConsumer over {args.records} records of {args.mib} MiB zeros, zstd",
    )
    if "baseline" in runs:
        ratio = runs["baseline"]["peak_rss"] / runs["sharecon"]["peak_rss"]
        print(f"baseline peak / sharecon peak: {ratio:.1f}x")
    write_json(
        "rss_consume",
        {"environment": environment(), "records": args.records, "mib": args.mib, "runs": runs},
    )


if __name__ == "__main__":
    main()
