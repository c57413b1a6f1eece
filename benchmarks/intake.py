"""Intake cost of one acquired record from a huge batch: strict record limit, max 1.

One batch of N empty records (null key, empty value), zstd-compressed, is written into a
one-partition topic by a raw Produce (sharecon's ``BatchBuilder``, then one
``ProduceRequest``: the cheapest way to get exactly one batch of millions of records).
A ShareConsumer then joins with ``acquire_mode="record_limit"`` and ``max_records=1``
(KIP-1206 strict mode): every ShareFetch acquires one offset, and the broker answers
with the whole batch around it. The consumer takes 20 records one at a time (poll one,
accept it, poll the next).

Measured per N (1,000,000 and 5,000,000 by default) and per sharecon build (pure and
compiled, each in a child process of its own, on fresh share groups):

* first record: seconds from creating the consumer to the first record in hand (the
  join included);
* 20 records: seconds from creating the consumer to the 20th;
* peak RSS and CPU seconds of the child process, and the broker's CPU seconds during
  the run (Linux), to tell the client's share of the wall time from the broker's.

A run that does not get its records within ``--budget`` seconds reports how many it got.

Usage::

    python benchmarks/intake.py                      # starts a local broker (sharecon.testing)
    python benchmarks/intake.py --sizes 1000000 --take 5

Results go to ``benchmarks/results/intake.json``. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    BUILDS,
    check_build,
    compiled_tree,
    environment,
    print_table,
    run_child,
    write_json,
)

#: The topic's max.message.bytes: a zstd batch of 5 M empty records is about 4 MB.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


# -- the worker (a child process per build) ---------------------------------------------------


def worker(bootstrap: str, topic: str, group: str, take: int, budget: float) -> dict[str, Any]:
    """Join in strict mode with max_records=1; take ``take`` records one at a time."""
    import anyio

    from sharecon import ShareConsumer

    async def main() -> dict[str, Any]:
        start = time.perf_counter()
        first: float | None = None
        offsets: list[int] = []
        async with ShareConsumer(
            bootstrap,
            group_id=group,
            topics=[topic],
            ack_mode="explicit",
            acquire_mode="record_limit",
            max_records=1,
        ) as consumer:
            with anyio.move_on_after(budget):
                while len(offsets) < take:
                    for record in await consumer.poll(30, max_records=1):
                        if first is None:
                            first = time.perf_counter() - start
                        offsets.append(record.offset)
                        record.accept()
            last = time.perf_counter() - start
            with anyio.move_on_after(30):
                await consumer.commit()
        return {
            "first_record_s": first,
            "taken": len(offsets),
            "take_s": last if len(offsets) >= take else None,
            "elapsed_s": last,
            "distinct_offsets": len(set(offsets)),
        }

    check_build()
    result = anyio.run(main)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # This process's CPU seconds: the rest of the wall time is the broker's, or waiting.
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    # ru_maxrss is KiB on Linux.
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


# -- the driver ------------------------------------------------------------------------------


def build_batch(n: int) -> tuple[bytes, int]:
    """One zstd batch of ``n`` empty records; returns it and its uncompressed size."""
    from sharecon.protocol.records import BatchBuilder, Codec

    builder = BatchBuilder()
    ts = int(time.time() * 1000)
    for _ in range(n):
        builder.append(ts, None, b"")
    return builder.build(codec=Codec.ZSTD), builder.size


def produce_batch(bootstrap: str, topic: str, batch: bytes) -> None:
    """Write ``batch`` whole into partition 0 of ``topic`` with one raw Produce."""
    import anyio

    from sharecon.admin import Admin
    from sharecon.protocol import ProduceRequest
    from sharecon.protocol.messages.produce import PartitionProduceData, TopicProduceData

    async def main() -> None:
        async with Admin(bootstrap) as admin:
            cluster = admin._open_cluster
            meta = await cluster.refresh_metadata([topic])
            topic_id = meta.topic_ids[topic]
            leader = meta.leader_for(topic_id, 0)
            if leader is None:
                raise RuntimeError(f"{topic}-0 has no leader")
            request = ProduceRequest(
                acks=-1,
                timeout_ms=120_000,
                topic_data=(
                    TopicProduceData(
                        name=topic,
                        topic_id=topic_id,
                        partition_data=(PartitionProduceData(index=0, records=batch),),
                    ),
                ),
            )
            response = await cluster.request(leader, request, timeout=180)
            for t in response.responses:
                for p in t.partition_responses:
                    if p.error_code:
                        raise RuntimeError(f"Produce to {topic}-{p.index}: error {p.error_code}")

    anyio.run(main)


def run_worker(
    build: str, bootstrap: str, topic: str, group: str, take: int, budget: float
) -> dict[str, Any]:
    """One worker in a child process running sharecon's ``build``."""
    result: dict[str, Any] = run_child(
        [__file__, "--worker", bootstrap, topic, group, str(take), str(budget)],
        build,
        f"{build} worker",
        timeout=budget + 300,
    )
    return result


def process_cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds a process has used so far (Linux ``/proc``), or ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,5000000", help="records per batch")
    parser.add_argument("--take", type=int, default=20, help="records taken one at a time")
    parser.add_argument("--budget", type=float, default=300, help="seconds per run at most")
    parser.add_argument("--builds", default=",".join(BUILDS), help="pure,compiled")
    parser.add_argument("--version", default=None, help="Kafka version (4.2+) for the broker")
    parser.add_argument("--label", default="", help="a name for this run in the JSON file")
    args = parser.parse_args()
    builds = [b for b in args.builds.split(",") if b]
    if "compiled" in builds:
        compiled_tree()  # built before the broker starts (about a minute once)

    from sharecon.testing import KafkaBroker

    broker = KafkaBroker(**({"version": args.version} if args.version else {}))
    broker.start()
    try:
        tools = broker.tools
        # The first share group on a fresh broker pays for the share-state topic: not timed.
        warm_topic = f"bench-warm-{uuid.uuid4().hex[:6]}"
        tools.create_topic(warm_topic, 1)
        tools.produce(warm_topic, 10, record_size=10)
        warm_group = f"bench-warm-{uuid.uuid4().hex[:6]}"
        tools.alter_group_config(warm_group, {"share.auto.offset.reset": "earliest"})
        run_worker("pure", broker.bootstrap, warm_topic, warm_group, 1, 60)
        rows: list[list[object]] = []
        results: dict[str, Any] = {}
        for n in [int(s) for s in args.sizes.split(",")]:
            topic = f"bench-intake-{n}-{uuid.uuid4().hex[:6]}"
            tools.create_topic(topic, 1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
            batch, raw = build_batch(n)
            t0 = time.perf_counter()
            produce_batch(broker.bootstrap, topic, batch)
            print(
                f"wrote one zstd batch of {n:,} empty records: {len(batch):,} bytes "
                f"({raw:,} uncompressed) in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            per: dict[str, Any] = {"batch_bytes": len(batch), "uncompressed_bytes": raw}
            for build in builds:
                group = f"bench-intake-{build}-{uuid.uuid4().hex[:6]}"
                tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
                before = process_cpu_seconds(broker.pid)
                r = run_worker(build, broker.bootstrap, topic, group, args.take, args.budget)
                after = process_cpu_seconds(broker.pid)
                r["broker_cpu_s"] = None if before is None or after is None else after - before
                per[build] = r
                print(f"  {build}: {json.dumps(r)}", flush=True)
                rows.append(
                    [
                        f"{n:,}",
                        build,
                        _fmt(r["first_record_s"], ".2f"),
                        f"{r['taken']}/{args.take}",
                        _fmt(r["take_s"], ".2f"),
                        f"{r['peak_rss_mb']:.0f}",
                        f"{r['cpu_s']:.2f}",
                        _fmt(r["broker_cpu_s"], ".2f"),
                    ]
                )
            results[str(n)] = per
        print_table(
            [
                "records in batch",
                "build",
                "first record s",
                "taken",
                f"{args.take} records s",
                "peak RSS MiB",
                "client CPU s",
                "broker CPU s",
            ],
            rows,
            title=(
                "One zstd batch of empty records, strict record limit (max_records=1): "
                "records taken one at a time"
            ),
        )
        name = f"intake-{args.label}" if args.label else "intake"
        path = write_json(
            name, {"take": args.take, "results": results, "environment": environment(["zstandard"])}
        )
        print(f"wrote {path}")
    finally:
        broker.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        a = sys.argv[2:]
        print(
            "RESULT " + json.dumps(worker(a[0], a[1], a[2], int(a[3]), float(a[4]))),
            flush=True,
        )
    else:
        main()
