"""Produce throughput: sharecon's Producer vs confluent-kafka (librdkafka) vs the Java tool.

Each client writes N records of a fixed size (100 B, and 1 KiB) with no key into its own
fresh topic with 3 partitions, on the same broker, one after another, with the same
settings: ``acks=all``, idempotence on, no compression, a 5 ms linger, 512 KiB batches
(librdkafka's default batch.size is about 1 MB). With ``--defaults`` every client runs
at its own defaults instead (sharecon's are the settings above; librdkafka's leave
idempotence off).

* sharecon: ``Producer.send_batch`` in chunks of 10,000 records, 4 chunks in flight;
* sharecon-send-loop: the naive loop, ``for ...: await producer.send(...)`` (each call
  returns once the record is queued), then ``await producer.flush()``;
* sharecon-send-nowait: the same loop with the plain call ``producer.send_nowait(...)``
  (an ``await producer.send(...)`` for a record it refuses, and a pass through the event
  loop every 1,000 records), then ``await producer.flush()``;
* each of those again with "-compiled": sharecon's compiled build (the per-record
  modules compiled with mypyc; built on first use, see ``_common.compiled_tree``);
* confluent-kafka's ``Producer`` (librdkafka): a ``produce()`` loop, then ``flush()``;
* the broker's own ``kafka-producer-perf-test`` (Java reference client; its own clock,
  which starts after the JVM is up).

For the Python clients the table also gives the client's CPU time per record over the
timed part (user + system, all threads), which the 2-core machines we measure on make
the steadier figure: the wall clock also depends on what else runs there.

Each Python client runs in its own process, so its peak RSS is its own. Prints a table
with records/s, MB/s and each sharecon build's ratio to every client, and writes ``benchmarks/results/produce.json``.

Usage::

    python benchmarks/produce.py                 # starts a local broker (sharecon.testing)
    python benchmarks/produce.py --records 200000 --sizes 100
    python benchmarks/produce.py --records 100000 --sizes 100 --skip sharecon,confluent-kafka,java
    python benchmarks/produce.py --defaults      # every client at its own defaults
    python benchmarks/produce.py --baseline ../main  # also each sharecon client from ../main
    python benchmarks/produce.py --profile       # top-10 profile entries of each sharecon client
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/produce.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    check_build,
    compiled_tree,
    environment,
    fmt_rate,
    print_table,
    run_child,
    write_json,
)

PARTITIONS = 3
CLIENTS = (
    "sharecon",
    "sharecon-compiled",
    "sharecon-send-loop",
    "sharecon-send-loop-compiled",
    "sharecon-send-nowait",
    "sharecon-send-nowait-compiled",
    "confluent-kafka",
    "java",
)
CHUNK = 10_000
IN_FLIGHT_CHUNKS = 4
#: ``--baseline DIR``: each sharecon client is also run from DIR's sources, named so.
BASE = "@base"
#: ``--defaults``: every client at its own defaults (set in the workers from the environment).
DEFAULTS = os.environ.get("SHARECON_BENCH_DEFAULTS") == "1"


# -- workers (run in child processes) -------------------------------------------------------


def _cpu() -> float:
    """CPU seconds of this process so far, every thread (librdkafka's too), user + system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worker_sharecon(bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    import anyio

    from sharecon.producer import Producer, ProducerRecord

    payload = os.urandom(size)

    async def main() -> tuple[float, float]:
        async with Producer(bootstrap, linger=0.005) as producer:
            await producer.send_and_wait(topic, b"warm-up")  # connections, producer id: untimed
            start, cpu = time.perf_counter(), _cpu()
            chunks = iter(range(0, n, CHUNK))

            async def worker() -> None:
                for first in chunks:
                    count = min(CHUNK, n - first)
                    await producer.send_batch(
                        [ProducerRecord(topic, payload) for _ in range(count)]
                    )

            async with anyio.create_task_group() as tg:
                for _ in range(IN_FLIGHT_CHUNKS):
                    tg.start_soon(worker)
            return time.perf_counter() - start, _cpu() - cpu

    elapsed, cpu = anyio.run(main)
    return {"elapsed": elapsed, "records": n, "bytes": n * size, "cpu": cpu}


def _worker_sharecon_send_loop(bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    import anyio

    from sharecon.producer import Producer

    payload = os.urandom(size)

    async def main() -> tuple[float, float]:
        async with Producer(bootstrap, linger=0.005) as producer:
            await producer.send_and_wait(topic, b"warm-up")  # connections, producer id: untimed
            start, cpu = time.perf_counter(), _cpu()
            for _ in range(n):
                await producer.send(topic, payload)
            await producer.flush()
            return time.perf_counter() - start, _cpu() - cpu

    elapsed, cpu = anyio.run(main)
    return {"elapsed": elapsed, "records": n, "bytes": n * size, "cpu": cpu}


def _worker_sharecon_send_nowait(bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    import anyio

    from sharecon.errors import WouldBlockError
    from sharecon.producer import Producer

    payload = os.urandom(size)

    async def main() -> tuple[float, float]:
        async with Producer(bootstrap, linger=0.005) as producer:
            await producer.send_and_wait(topic, b"warm-up")  # connections, producer id: untimed
            start, cpu = time.perf_counter(), _cpu()
            send = producer.send_nowait
            for i in range(n):
                try:
                    send(topic, payload)
                except WouldBlockError:
                    await producer.send(topic, payload)  # waits for buffer space
                if i % 1000 == 999:
                    await anyio.lowlevel.checkpoint()  # let the dispatcher send batches
            await producer.flush()
            return time.perf_counter() - start, _cpu() - cpu

    elapsed, cpu = anyio.run(main)
    return {"elapsed": elapsed, "records": n, "bytes": n * size, "cpu": cpu}


def _worker_confluent(bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    payload = os.urandom(size)
    settings: dict[str, object] = {"bootstrap.servers": bootstrap}
    if not DEFAULTS:
        settings.update(
            {
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "none",
                "queue.buffering.max.messages": 1_000_000,
            }
        )
    producer = Producer(settings)
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    failures = 0

    def report(err: object, _msg: object) -> None:
        nonlocal failures
        if err is not None:
            failures += 1

    start, cpu = time.perf_counter(), _cpu()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(600)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if failures:
        raise RuntimeError(f"confluent-kafka: {failures} records failed")
    return {"elapsed": elapsed, "records": n, "bytes": n * size, "cpu": cpu}


def worker_main(argv: list[str]) -> None:
    name, bootstrap, topic, n, size = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    if name.endswith(BASE):
        # The baseline's sources (or its compiled build) ahead of this checkout's.
        name = name.removesuffix(BASE)
        build = "compiled" if name.endswith("-compiled") else "pure"
        sys.path.insert(0, os.environ[f"SHARECON_BENCH_BASE_{build.upper()}"])
    fn = {
        "sharecon": _worker_sharecon,
        "sharecon-send-loop": _worker_sharecon_send_loop,
        "sharecon-send-nowait": _worker_sharecon_send_nowait,
        "confluent-kafka": _worker_confluent,
    }[name.removesuffix("-compiled")]
    if name.startswith("sharecon"):
        check_build()
    profile = os.environ.get("SHARECON_BENCH_PROFILE") == "1" and name.startswith("sharecon")
    if profile:
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        result = profiler.runcall(fn, bootstrap, topic, n, size)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(10)
        result["profile"] = out.getvalue()
    else:
        result = fn(bootstrap, topic, n, size)
    # ru_maxrss is KiB on Linux.
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


# -- the driver ----------------------------------------------------------------------------


def run_worker(name: str, bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    result: dict[str, Any] = run_child(
        [__file__, "--worker", name, bootstrap, topic, str(n), str(size)],
        "compiled" if name.removesuffix(BASE).endswith("-compiled") else "pure",
        f"{name} worker",
        timeout=1800,
    )
    return result


def run_java(tools: Any, topic: str, n: int, size: int) -> dict[str, Any]:
    result = tools.produce(
        topic,
        n,
        record_size=size,
        # batch.size as sharecon's max_batch_bytes (Java's 16 KiB default starves 1 KiB runs).
        producer_props={}
        if DEFAULTS
        else {
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": "5",
            "batch.size": "524288",
        },
        timeout=1800,
    )
    # The tool's records/s is measured by its own clock, after the JVM started.
    elapsed = n / result.records_per_sec
    return {"elapsed": elapsed, "records": n, "bytes": n * size, "wall": result.elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    parser.add_argument("--version", default=None, help="Kafka version for the local broker")
    parser.add_argument("--skip", default="", help="comma-separated clients to skip")
    parser.add_argument(
        "--defaults", action="store_true", help="every client at its own default settings"
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="another sharecon checkout: each sharecon client also runs from its sources "
        "(pure and compiled, the latter built by its own benchmarks/_common.py), right after "
        "this checkout's, as '<client>@base'",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the sharecon clients under cProfile and print their top-10 entries "
        "(own time); the figures then include the profiler's cost",
    )
    args = parser.parse_args()
    if args.profile:
        os.environ["SHARECON_BENCH_PROFILE"] = "1"  # read by the workers
    clients: list[str] = list(CLIENTS)
    if args.baseline:
        base = Path(args.baseline).resolve()
        os.environ["SHARECON_BENCH_BASE_PURE"] = str(base)
        if any(c.endswith("-compiled") and c not in args.skip.split(",") for c in CLIENTS):
            built = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; sys.path.insert(0, sys.argv[1]); import _common; "
                    "print(_common.compiled_tree())",
                    str(base / "benchmarks"),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            os.environ["SHARECON_BENCH_BASE_COMPILED"] = built.stdout.strip().splitlines()[-1]
        clients = [
            c
            for name in CLIENTS
            for c in ((name, name + BASE) if name.startswith("sharecon") else (name,))
        ]
    if args.defaults:
        os.environ["SHARECON_BENCH_DEFAULTS"] = "1"  # read by the workers
        global DEFAULTS
        DEFAULTS = True

    from sharecon.testing import KafkaBroker

    if any(c.endswith("-compiled") and c not in args.skip.split(",") for c in CLIENTS):
        compiled_tree()  # built before any broker starts (about a minute once)

    external = os.environ.get("SHARECON_BOOTSTRAP")
    broker = (
        None if external else KafkaBroker(**({"version": args.version} if args.version else {}))
    )
    if broker is not None:
        broker.start()
    try:
        from sharecon.testing.tools import KafkaTools

        tools = broker.tools if broker is not None else KafkaTools(external)  # type: ignore[arg-type]
        bootstrap = broker.bootstrap if broker is not None else str(external)
        skip = set(filter(None, args.skip.split(",")))
        rows = []
        results: dict[str, Any] = {}
        for size in [int(s) for s in args.sizes.split(",")]:
            n = args.records if size <= 100 else max(args.records // 4, 1000)
            per: dict[str, dict[str, Any]] = {}
            for name in clients:
                if name.removesuffix(BASE) in skip:
                    continue
                topic = f"bench-produce-{name.replace('@', '-')}-{size}-{uuid.uuid4().hex[:6]}"
                tools.create_topic(topic, PARTITIONS)
                if name == "java":
                    per[name] = run_java(tools, topic, n, size)
                else:
                    per[name] = run_worker(name, bootstrap, topic, n, size)
                r = per[name]
                r["records_per_s"] = r["records"] / r["elapsed"]
                r["mb_per_s"] = r["bytes"] / r["elapsed"] / 1e6
                print(
                    f"  {size} B {name}: {fmt_rate(r['records_per_s'])} records/s, "
                    f"{r['mb_per_s']:.1f} MB/s",
                    flush=True,
                )
                if "profile" in r:
                    print(r.pop("profile"), flush=True)
            pure, compiled = per.get("sharecon"), per.get("sharecon-compiled")

            def ratio(base: dict[str, Any] | None, r: dict[str, Any]) -> str:
                return f"{base['records_per_s'] / r['records_per_s']:.2f}x" if base else "n/a"

            for name, r in per.items():
                rows.append(
                    [
                        f"{size} B",
                        name,
                        fmt_rate(r["records"]),
                        f"{r['elapsed']:.2f}",
                        fmt_rate(r["records_per_s"]),
                        f"{r['mb_per_s']:.1f}",
                        f"{r['cpu'] * 1e6 / r['records']:.2f}" if "cpu" in r else "n/a",
                        f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "n/a",
                        ratio(pure, r),
                        ratio(compiled, r),
                    ]
                )
            results[f"{size}B"] = per
        print_table(
            [
                "size",
                "client",
                "records",
                "seconds",
                "records/s",
                "MB/s",
                "client CPU us/record",
                "peak RSS MB",
                "pure/this",
                "compiled/this",
            ],
            rows,
            title=(
                f"Produce, every client at its defaults, {PARTITIONS} partitions"
                if DEFAULTS
                else f"Produce, acks=all, idempotent, no compression, linger 5 ms, "
                f"{PARTITIONS} partitions"
            ),
        )
        path = write_json(
            "produce",
            {
                "results": results,
                "environment": environment(["sharecon", "confluent-kafka", "anyio"]),
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
