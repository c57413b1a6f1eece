"""Consume-and-accept throughput: sharecon vs librdkafka, franz-go and the Java tool.

One run loads N records (100 B, and a 1 KiB run) into one topic with 3 partitions, then
each client consumes all of them through its own fresh share group (implicit acks, so
every record is accepted), on the same broker, the same data, one after another:

* sharecon: one ShareConsumer, ``batches()`` (and, with ``--styles batches,records,poll``,
  also ``async for record in consumer`` and a ``poll()`` loop: the rows named
  ``...:records`` and ``...:poll``), implicit mode, in each of its two builds:
  pure Python ("sharecon") and the per-record modules compiled with mypyc
  ("sharecon-compiled", built on first use; see ``_common.compiled_tree``);
* confluent-kafka's ``ShareConsumer`` (librdkafka), ``poll()`` loop, implicit mode;
* franz-go's share consumer (``benchmarks/franzgo``, a small Go program built with ``go
  build`` into ``~/.cache/sharecon/bench`` on first use): a ``PollFetches`` loop, each
  record accepted at the next poll; left out, with a note, where ``go`` is not installed;
* the broker's own ``kafka-share-consumer-perf-test`` (Java reference client).

With ``--baseline DIR`` another checkout of sharecon (say, main's) runs too, in both
builds ("sharecon-baseline", "sharecon-baseline-compiled"), on the same data: a change's
before and after side by side in one run.

Every client touches each record's value (its length is summed), as applications do.

Settings: every client gets the same ones. By default (tuned) sharecon runs with
``max_records=TUNED_MAX_RECORDS`` and librdkafka with ``max.poll.records`` set to the same
number (``--max-records`` changes it; librdkafka has no other knob that matches sharecon's
fetch sizing, so everything else stays at each client's defaults). With ``--defaults`` every
client runs at its own defaults: sharecon ``max_records=500``, librdkafka with no
setting at all. The Java tool runs at its defaults in both modes (``max.poll.records``
500). The JSON gives the mode and each client's settings.

Before the timed runs, ``--warm`` passes (default 3) of the first size's load go through
the broker untimed (a load of their own, read by sharecon): a fresh broker's JIT answers
this load's fetches more than twice as slowly at first, so without it whoever ran first
met the coldest broker. With ``--rounds N`` every client runs N times on the same data,
the order reversed each round, so what warming is left falls on no client alone. The
table shows each client's best round by its rate from the first record (``--pick median``:
its median round, the lower middle of an even count); the JSON has every round.

Each Python client runs in its own process, so its peak RSS and CPU time are its own (the
Java tool's CPU time includes starting its JVM). Prints a table with records/s, MB/s, the
time from start to the first record, CPU seconds per million records (of the whole
process, from the client's import on; and, for the Python clients, from the first record
to the last, which leaves out the import, start-up and close) and each sharecon build's
ratio to every client, and writes ``benchmarks/results/consume.json``.

Usage::

    python benchmarks/consume.py                 # starts a local broker (sharecon.testing)
    python benchmarks/consume.py --records 200000 --sizes 100
    python benchmarks/consume.py --defaults      # every client at its own defaults
    python benchmarks/consume.py --max-records 1000   # the tuned mode's batch size, for all
    python benchmarks/consume.py --baseline ../main   # also another checkout, same run
    python benchmarks/consume.py --styles batches,records,poll   # async for, poll() too
    python benchmarks/consume.py --rounds 2      # each client twice, order reversed; best shown
    python benchmarks/consume.py --rounds 5 --pick median   # each client's median round shown
    python benchmarks/consume.py --partitions 300 --records 300000 --sizes 100
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/consume.py
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
#: The tuned mode's records per batch: sharecon's ``max_records``, librdkafka's
#: ``max.poll.records``.
TUNED_MAX_RECORDS = 2000


def client_settings(name: str, max_records: int | None) -> dict[str, Any]:
    """The settings ``name`` runs with: ``max_records`` None is every client's defaults."""
    if max_records is None or name == "java":
        return {}
    if name.startswith("sharecon"):
        return {"max_records": max_records}
    if name == "franz-go":
        return {"ShareMaxRecords": max_records}
    return {"max.poll.records": str(max_records)}


# -- workers (run in child processes) -------------------------------------------------------


def _worker_sharecon(
    bootstrap: str, topic: str, group: str, n: int, settings: dict[str, Any]
) -> dict[str, Any]:
    import anyio

    from sharecon import ShareConsumer

    async def records() -> tuple[float, float, int, int]:
        # ``async for record in consumer``: each record accepted when the next is asked for.
        start = time.perf_counter()
        first = 0.0
        count = nbytes = 0
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic], **settings) as c:
            async for record in c:
                if not count:
                    first = time.perf_counter()
                    STEADY_CPU[0] = _cpu_seconds(resource.RUSAGE_SELF)
                count += 1
                nbytes += len(record.value or b"")
                if count >= n:
                    break
            last = time.perf_counter()
            STEADY_CPU[1] = _cpu_seconds(resource.RUSAGE_SELF)
            await c.commit()
            elapsed = time.perf_counter() - start
        return elapsed, last - first, count, nbytes

    async def main() -> tuple[float, float, int, int]:
        start = time.perf_counter()
        first = 0.0
        count = nbytes = 0
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic], **settings) as c:
            async for batch in c.batches():
                if not count:
                    first = time.perf_counter()
                    STEADY_CPU[0] = _cpu_seconds(resource.RUSAGE_SELF)
                count += len(batch)
                for r in batch:
                    nbytes += len(r.value or b"")
                if count >= n:
                    break
            last = time.perf_counter()
            STEADY_CPU[1] = _cpu_seconds(resource.RUSAGE_SELF)
            await c.commit()
            elapsed = time.perf_counter() - start
        return elapsed, last - first, count, nbytes

    async def polled() -> tuple[float, float, int, int]:
        # A ``poll()`` loop: each batch accepted when the next is asked for.
        start = time.perf_counter()
        first = 0.0
        count = nbytes = 0
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic], **settings) as c:
            while count < n:
                batch = await c.poll(1.0)
                if batch and not count:
                    first = time.perf_counter()
                    STEADY_CPU[0] = _cpu_seconds(resource.RUSAGE_SELF)
                count += len(batch)
                for r in batch:
                    nbytes += len(r.value or b"")
            last = time.perf_counter()
            STEADY_CPU[1] = _cpu_seconds(resource.RUSAGE_SELF)
            await c.commit()
            elapsed = time.perf_counter() - start
        return elapsed, last - first, count, nbytes

    styles = {"records": records, "poll": polled, "batches": main}
    elapsed, steady, count, nbytes = anyio.run(styles[STYLE])
    return {
        "elapsed": elapsed,
        "steady": steady,
        "first_record": elapsed - steady,
        "records": count,
        "bytes": nbytes,
    }


def _worker_confluent(
    bootstrap: str, topic: str, group: str, n: int, settings: dict[str, Any]
) -> dict[str, Any]:
    from confluent_kafka import ShareConsumer

    start = time.perf_counter()
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **settings})
    consumer.subscribe([topic])
    count = nbytes = 0
    first = 0.0
    deadline = time.monotonic() + 600
    while count < n and time.monotonic() < deadline:
        for msg in consumer.poll(1.0):
            if msg.error() is None:
                if not count:
                    first = time.perf_counter()
                    STEADY_CPU[0] = _cpu_seconds(resource.RUSAGE_SELF)
                count += 1
                nbytes += len(msg.value() or b"")
    last = time.perf_counter()
    STEADY_CPU[1] = _cpu_seconds(resource.RUSAGE_SELF)
    consumer.commit_sync()
    elapsed = time.perf_counter() - start
    consumer.close()
    return {
        "elapsed": elapsed,
        "steady": last - first,
        "first_record": first - start,
        "records": count,
        "bytes": nbytes,
    }


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


#: In a worker: the process's CPU seconds (every thread) at the first record and at the
#: last one, so the CPU per record from the first record leaves out the import, the
#: start-up and the close (``steady_cpu_s``; the first record's batch is counted).
STEADY_CPU = [0.0, 0.0]

#: In a worker: how the sharecon client consumes ("batches", or "records" for ``async for
#: record``); a client named ``name:records`` runs the second.
STYLE = "batches"


def worker_main(argv: list[str]) -> None:
    global STYLE
    full, bootstrap, topic, group, n = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    name, _, style = full.partition(":")
    STYLE = style or "batches"
    settings: dict[str, Any] = json.loads(argv[5]) if len(argv) > 5 else {}
    fn = {
        "sharecon": _worker_sharecon,
        "sharecon-compiled": _worker_sharecon,
        "sharecon-baseline": _worker_sharecon,
        "sharecon-baseline-compiled": _worker_sharecon,
        "confluent-kafka": _worker_confluent,
    }[name]
    before = _cpu_seconds(resource.RUSAGE_SELF)
    if name.startswith("sharecon"):
        check_build()
    result = fn(bootstrap, topic, group, n, settings)
    # Every thread of the process (librdkafka's included), from the client's import on.
    result["cpu_s"] = _cpu_seconds(resource.RUSAGE_SELF) - before
    result["steady_cpu_s"] = STEADY_CPU[1] - STEADY_CPU[0]
    # ru_maxrss is KiB on Linux.
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


# -- the driver ----------------------------------------------------------------------------


#: ``--baseline DIR``: another checkout of sharecon (say, main's) measured in the same
#: run as "sharecon-baseline" and "sharecon-baseline-compiled"; set by main().
BASELINE: Path | None = None


def baseline_tree(build: str) -> Path:
    """What goes first on a baseline worker's PYTHONPATH: the checkout for the pure build,
    its own compiled build (built in its ``build/`` folder, as ours is) for the other."""
    assert BASELINE is not None
    if build == "pure":
        return BASELINE
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_baseline_common", BASELINE / "benchmarks" / "_common.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.compiled_tree())


def load_props(args: argparse.Namespace) -> dict[str, str]:
    """The loader's producer settings for the timed topics and the warm-up's."""
    return {
        "batch.size": "16384" if args.spread else "262144",
        "linger.ms": "0" if args.spread else "20",
        "compression.type": args.compression,
    }


def run_worker(
    name: str, bootstrap: str, topic: str, group: str, n: int, settings: dict[str, Any]
) -> dict[str, Any]:
    base = name.partition(":")[0]
    build = "compiled" if base.endswith("-compiled") else "pure"
    argv = [__file__, "--worker", name, bootstrap, topic, group, str(n), json.dumps(settings)]
    if name.startswith("sharecon-baseline"):
        env = {
            **os.environ,
            "SHARECON_BENCH_BUILD": build,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(baseline_tree(build)), os.environ.get("PYTHONPATH")])
            ),
        }
        proc = subprocess.run(
            [sys.executable, *argv], env=env, capture_output=True, text=True, timeout=900
        )
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                baseline: dict[str, Any] = json.loads(line[7:])
                return baseline
        raise RuntimeError(f"{name} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = run_child(argv, build, f"{name} worker", timeout=900)
    return result


FRANZGO_SOURCE = Path(__file__).resolve().parent / "franzgo"


def franzgo_binary() -> Path | None:
    """franz-go's contender, built once per source into a cache outside the checkout;
    ``None`` (and a note) where ``go`` is missing or the build fails."""
    import hashlib
    import shutil

    go = shutil.which("go")
    if go is None:
        print("franz-go left out: no `go` on PATH", flush=True)
        return None
    digest = hashlib.sha256()
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((FRANZGO_SOURCE / name).read_bytes())
    out = Path.home() / ".cache" / "sharecon" / "bench" / f"franzgo-{digest.hexdigest()[:12]}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [go, "build", "-o", str(out), "."],
            cwd=FRANZGO_SOURCE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            print(f"franz-go left out: go build failed:\n{proc.stderr[-2000:]}", flush=True)
            return None
    return out


def run_franzgo(
    binary: Path, bootstrap: str, topic: str, group: str, n: int, max_records: int | None
) -> dict[str, Any]:
    argv = [str(binary), bootstrap, topic, group, str(n), str(max_records or 0)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            return result
    raise RuntimeError(f"franz-go failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def run_java(tools: Any, topic: str, group: str, n: int) -> dict[str, Any]:
    # ShareConsumerPerformance prints: start, end, MB, MB/s, nMsg/s, nMsg, fetch.time.ms.
    start = time.perf_counter()
    cpu_before = _cpu_seconds(resource.RUSAGE_CHILDREN)
    out = tools.run(
        "org.apache.kafka.tools.ShareConsumerPerformance",
        "--bootstrap-server",
        tools.bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--messages",
        str(n),
        "--timeout",
        "600000",
        timeout=900,
        perf=True,
    )
    wall = time.perf_counter() - start
    # The JVM's start and JIT included: the tool cannot report less.
    cpu_s = _cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before
    rows = [line.split(",") for line in out.splitlines() if line.count(",") >= 6]
    row = [c.strip() for c in rows[-1]]
    records = int(row[5])
    # The tool's own clock starts after the JVM is up (fairer to Java than our wall clock);
    # fetch.time.ms is its time spent fetching, our nearest to "from the first record".
    elapsed = records / float(row[4]) if float(row[4]) > 0 else wall
    steady = float(row[6]) / 1000 if float(row[6]) > 0 else elapsed
    return {
        "elapsed": elapsed,
        "steady": steady,
        "records": records,
        "bytes": float(row[2]) * 1024 * 1024,
        "wall": wall,
        "cpu_s": cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    parser.add_argument("--version", default=None, help="Kafka version for the local broker")
    parser.add_argument("--skip", default="", help="comma-separated clients to skip")
    parser.add_argument(
        "--partitions",
        type=int,
        default=PARTITIONS,
        help=f"partitions of the topic (default {PARTITIONS}; many: per-partition costs)",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="write the topic in small batches (16 KiB, no linger: the sticky partitioner "
        "moves on after each batch), so answers hold a few records of many partitions, "
        "not one partition's large batch",
    )
    parser.add_argument(
        "--compression",
        default="none",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="the codec the topic's batches are written with (the loader's compression.type)",
    )
    parser.add_argument(
        "--styles",
        default="batches",
        help="how sharecon consumes, comma-separated: batches (batches()), records (async for),"
        " poll (a poll() loop)",
    )
    parser.add_argument(
        "--defaults", action="store_true", help="every client at its own default settings"
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=TUNED_MAX_RECORDS,
        help="tuned mode: sharecon's max_records and librdkafka's max.poll.records"
        f" (default {TUNED_MAX_RECORDS})",
    )
    parser.add_argument(
        "--warm",
        type=int,
        default=3,
        help="untimed passes of the first size's load through the broker before the timed"
        " runs, so its JIT is warm for every client (0: only a 1,000-record first share"
        " group)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of every client on the same data, in forward then reverse order (so no"
        " client always meets the broker colder or warmer); each client's best round is shown",
    )
    parser.add_argument(
        "--pick",
        choices=("best", "median"),
        default="best",
        help="which of each client's rounds the table shows: its best by the rate from the"
        " first record, or its median one (the lower middle of an even count)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another sharecon checkout (e.g. main's) to measure in the same run, both builds",
    )
    args = parser.parse_args()
    unknown = set(filter(None, args.styles.split(","))) - {"batches", "records", "poll"}
    if unknown:
        parser.error(f"--styles: unknown {', '.join(sorted(unknown))} (batches, records, poll)")
    global BASELINE
    BASELINE = args.baseline.resolve() if args.baseline else None
    max_records: int | None = None if args.defaults else args.max_records
    mode = "defaults" if args.defaults else "tuned"

    from sharecon.testing import KafkaBroker

    skip = set(filter(None, args.skip.split(",")))
    if "sharecon-compiled" not in skip:
        compiled_tree()  # built before any broker starts (about a minute once)
    if BASELINE is not None and "sharecon-baseline-compiled" not in skip:
        baseline_tree("compiled")

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
        # Warm-up: the first share group on a fresh broker pays for creating and loading
        # the share-state topic; no timed client should. And the broker's JIT: measured on
        # 2026-12-06 (ten passes of a million 100 B records), a fresh broker answered the
        # first pass's fetches in 5.1 ms on average and the eighth to tenth's in 1.8 to
        # 2.0 ms, and a client's rate followed (compiled `async for` at its defaults:
        # 0.41M/s in the first pass, 0.91M/s in the ninth), so whoever ran first lost.
        # ``--warm`` passes of the first size's load go through the broker untimed first.
        warm_topic = f"bench-warm-{uuid.uuid4().hex[:6]}"
        first_size = int(args.sizes.split(",")[0])
        # Without --warm, one small pass still opens the share-state topic.
        warm_n = (
            (args.records if first_size <= 100 else max(args.records // 4, 1000))
            if args.warm
            else 1000
        )
        tools.create_topic(warm_topic, args.partitions)
        tools.produce(
            warm_topic,
            warm_n,
            record_size=first_size,
            producer_props=load_props(args),
        )
        warmer = "sharecon" if "sharecon-compiled" in skip else "sharecon-compiled"
        for k in range(max(1, args.warm)):
            warm_group = f"bench-warm-{uuid.uuid4().hex[:6]}"
            tools.alter_group_config(warm_group, {"share.auto.offset.reset": "earliest"})
            t0 = time.perf_counter()
            run_worker(warmer, bootstrap, warm_topic, warm_group, warm_n, {})
            if args.warm:
                print(f"warm-up pass {k + 1}: {time.perf_counter() - t0:.1f} s", flush=True)
        franzgo = None if "franz-go" in skip else franzgo_binary()
        rows = []
        results: dict[str, Any] = {}
        for size in [int(s) for s in args.sizes.split(",")]:
            n = args.records if size <= 100 else max(args.records // 4, 1000)
            topic = f"bench-consume-{size}-{uuid.uuid4().hex[:6]}"
            tools.create_topic(topic, args.partitions)
            t0 = time.perf_counter()
            tools.produce(
                topic,
                n,
                record_size=size,
                producer_props=load_props(args),
            )
            print(
                f"loaded {n:,} records of {size} B in {time.perf_counter() - t0:.1f} s", flush=True
            )
            per: dict[str, dict[str, Any]] = {}
            clients = ["sharecon", "sharecon-compiled", "confluent-kafka", "java"]
            if franzgo is not None:
                clients.append("franz-go")
            if BASELINE is not None:
                clients[2:2] = ["sharecon-baseline", "sharecon-baseline-compiled"]
            styles = [s for s in args.styles.split(",") if s]
            clients = [
                c if style == "batches" else f"{c}:{style}"
                for c in clients
                for style in (styles if c.startswith("sharecon") else ["batches"])
            ]
            clients = [c for c in clients if c not in skip and c.partition(":")[0] not in skip]
            every: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
            for round_no in range(args.rounds):
                # Forward, then reverse: the broker warms up (its JIT, the page cache) as
                # the run goes on, so whoever always went first would always be slower.
                order = clients if round_no % 2 == 0 else clients[::-1]
                for name in order:
                    group = f"bench-{name}-{uuid.uuid4().hex[:6]}"
                    tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
                    if name == "java":
                        r = run_java(tools, topic, group, n)
                    elif name == "franz-go":
                        assert franzgo is not None
                        r = run_franzgo(franzgo, bootstrap, topic, group, n, max_records)
                    else:
                        r = run_worker(
                            name, bootstrap, topic, group, n, client_settings(name, max_records)
                        )
                    r["settings"] = client_settings(name, max_records)
                    r["round"] = round_no + 1
                    r["records_per_s"] = r["records"] / r["elapsed"]
                    r["steady_records_per_s"] = (
                        r["records"] / r["steady"] if r["steady"] > 0 else 0.0
                    )
                    r["mb_per_s"] = r["bytes"] / r["steady"] / 1e6 if r["steady"] > 0 else 0.0
                    every[name].append(r)
                    print(
                        f"  round {round_no + 1} {name}: "
                        f"{fmt_rate(r['records_per_s'])} records/s overall, "
                        f"{fmt_rate(r['steady_records_per_s'])} from the first record",
                        flush=True,
                    )
            for name in clients:
                # Each client's best (or median) round, by its rate from the first
                # record; every round is in the JSON. The median is one real round, so
                # its CPU figures are that round's, not a blend.
                by_rate = sorted(every[name], key=lambda r: r["steady_records_per_s"])
                shown = by_rate[-1] if args.pick == "best" else by_rate[(len(by_rate) - 1) // 2]
                per[name] = {**shown, "rounds": every[name]}
            pure, compiled = per.get("sharecon"), per.get("sharecon-compiled")

            def ratio(base: dict[str, Any] | None, r: dict[str, Any], key: str) -> str:
                return f"{base[key] / r[key]:.2f}x" if base and r[key] else "n/a"

            for name, r in per.items():
                rows.append(
                    [
                        f"{size} B",
                        name,
                        fmt_rate(r["records"]),
                        f"{r['elapsed']:.2f}",
                        fmt_rate(r["records_per_s"]),
                        fmt_rate(r["steady_records_per_s"]),
                        f"{r['mb_per_s']:.1f}",
                        f"{r['first_record']:.2f}" if "first_record" in r else "n/a",
                        f"{r['cpu_s'] / r['records'] * 1e6:.2f}" if r["records"] else "n/a",
                        f"{r['steady_cpu_s'] / r['records'] * 1e6:.2f}"
                        if r["records"] and "steady_cpu_s" in r
                        else "n/a",
                        f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "n/a",
                        ratio(pure, r, "records_per_s"),
                        ratio(pure, r, "steady_records_per_s"),
                        ratio(compiled, r, "records_per_s"),
                        ratio(compiled, r, "steady_records_per_s"),
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
                "steady rec/s",
                "steady MB/s",
                "first record s",
                "CPU s/M rec",
                "from first: CPU s/M rec",
                "peak RSS MB",
                "pure/this",
                "steady pure/this",
                "compiled/this",
                "steady compiled/this",
            ],
            rows,
            title=(
                f"Share-group consume + accept, {args.partitions} partitions, "
                f"{args.compression if args.compression != 'none' else 'uncompressed'} "
                f"{'small batches spread over the partitions' if args.spread else 'batches'}, "
                "one consumer each, "
                + (f"{args.pick} of {args.rounds} rounds, " if args.rounds > 1 else "")
                + (
                    "every client at its defaults"
                    if max_records is None
                    else f"{max_records} records per batch for sharecon and librdkafka"
                )
            ),
        )
        path = write_json(
            "consume",
            {
                "results": results,
                "mode": mode,
                "partitions": args.partitions,
                "compression": args.compression,
                "spread": args.spread,
                "max_records": max_records,
                "rounds": args.rounds,
                "pick": args.pick,
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
