"""One client workload under a profiler: where sharecon's time goes, top entries by own time.

Workloads (each client at its defaults, against one local broker, or ``$SHARECON_BOOTSTRAP``):

* ``consume``: a ShareConsumer reads ``--records`` records of ``--size`` bytes from a
  topic of ``--partitions`` partitions with ``batches()`` (implicit acks), or with
  ``async for record in consumer`` (``--style records``), touching every value, then
  commits;
* ``produce``: a Producer writes ``--records`` records with the ``await send()`` loop
  (``--mode loop``), ``send_batch`` in chunks of 10,000 (``batch``) or ``send_nowait()``
  (``nowait``), then flushes;
* ``roundtrip``: ``--records`` Metadata requests, 200 in flight, on one connection.

The workload runs in a child process under sharecon's ``--build`` (pure or compiled).
By default it runs under cProfile, which sees every Python frame (the time spent waiting
in epoll for the broker is left out of the table: it is not the client's cost); in the compiled build the
compiled modules' functions are not Python frames, so their time shows in their callers.
``--perf`` runs the child under Linux ``perf record`` instead and reports native symbols
(the compiled modules' C functions appear as ``CPyDef_...``; pure Python shows as the
interpreter's own functions), over the whole child process, its imports and start included,
so give it enough records for the workload to dominate. (Not named ``profile.py``: that would shadow the standard
library's ``profile``, which ``cProfile`` imports, for every script in this folder.) Prints a Markdown table of the top ``--top`` entries by own
time, to paste into a note::

    python benchmarks/hotspots.py consume
    python benchmarks/hotspots.py consume --style records --build compiled
    python benchmarks/hotspots.py consume --partitions 300
    python benchmarks/hotspots.py produce --mode nowait --build compiled
    python benchmarks/hotspots.py consume --build compiled --perf
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import build_env, check_build, compiled_tree

HERE = Path(__file__).resolve()
PARTITIONS = 3


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- workloads (in the child) ---------------------------------------------------------------


async def _consume(
    bootstrap: str, topic: str, group: str, n: int, prof: Any, style: str = "batches"
) -> int:
    from sharecon import ShareConsumer

    count = 0
    prof.enable()
    async with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as consumer:
        if style == "records":
            async for record in consumer:
                len(record.value or b"")
                count += 1
                if count >= n:
                    break
            await consumer.commit()
            prof.disable()
            return count
        async for batch in consumer.batches():
            for record in batch:
                len(record.value or b"")
            count += len(batch)
            if count >= n:
                break
        await consumer.commit()
    prof.disable()
    return count


async def _produce(bootstrap: str, topic: str, n: int, size: int, mode: str, prof: Any) -> int:
    import anyio

    from sharecon.errors import WouldBlockError
    from sharecon.producer import Producer, ProducerRecord

    payload = os.urandom(size)
    async with Producer(bootstrap) as producer:
        await producer.send_and_wait(topic, b"warm-up")  # connections, producer id
        prof.enable()
        if mode == "loop":
            for _ in range(n):
                await producer.send(topic, payload)
        elif mode == "batch":
            for first in range(0, n, 10_000):
                count = min(10_000, n - first)
                await producer.send_batch([ProducerRecord(topic, payload) for _ in range(count)])
        else:
            send = producer.send_nowait
            for i in range(n):
                try:
                    send(topic, payload)
                except WouldBlockError:
                    await producer.send(topic, payload)
                if i % 1000 == 999:
                    await anyio.lowlevel.checkpoint()
        await producer.flush()
        prof.disable()
    return n


async def _roundtrip(bootstrap: str, topic: str, n: int, prof: Any) -> int:
    import anyio

    from sharecon._net.cluster import Cluster
    from sharecon._net.connect import ConnectionConfig
    from sharecon.protocol import MetadataRequest
    from sharecon.protocol.messages.metadata import MetadataRequestTopic

    request = MetadataRequest(topics=(MetadataRequestTopic(name=topic),))
    async with anyio.create_task_group() as tg:
        cluster = Cluster(bootstrap, ConnectionConfig(), tg, metadata_max_age=0)
        await cluster.connect()
        node = next(iter(cluster.metadata.brokers))
        await cluster.request(node, request)  # the connection, versions
        concurrency = 200

        async def worker(k: int) -> None:
            for _ in range(k):
                await cluster.request(node, request)

        prof.enable()
        async with anyio.create_task_group() as inner:
            for i in range(concurrency):
                inner.start_soon(worker, n // concurrency + (1 if i < n % concurrency else 0))
        prof.disable()
        await cluster.aclose()
        tg.cancel_scope.cancel()
    return n


def worker_main(spec: dict[str, Any]) -> None:
    import anyio

    build = check_build()

    class _Off:
        def enable(self) -> None: ...
        def disable(self) -> None: ...

    # cProfile's own clock (wall time, the cheapest to read) unless --cpu-timer: on a busy
    # machine, wall time also charges a function for the time it was descheduled.
    # print_top leaves out the time spent waiting in epoll for the broker.
    prof: Any = (
        _Off()
        if spec["perf"]
        else cProfile.Profile(time.process_time)
        if spec.get("cpu_timer")
        else cProfile.Profile()
    )
    workload, bootstrap, topic, n = spec["workload"], spec["bootstrap"], spec["topic"], spec["n"]
    wall, cpu = time.perf_counter(), _cpu()
    if workload == "consume":
        done = anyio.run(
            _consume, bootstrap, topic, spec["group"], n, prof, spec.get("style") or "batches"
        )
    elif workload == "produce":
        done = anyio.run(_produce, bootstrap, topic, n, spec["size"], spec["mode"], prof)
    else:
        done = anyio.run(_roundtrip, bootstrap, topic, n, prof)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    what = "records" if workload != "roundtrip" else "requests"
    print(
        f"{workload}{' ' + spec['mode'] if spec.get('mode') else ''}, {done:,} {what}, "
        f"sharecon {build} build: "
        f"{wall:.2f} s wall, {cpu:.2f} s CPU ({cpu / done * 1e6:.2f} µs per {what[:-1]}"
        f"{', under cProfile' if not spec['perf'] else ''})\n"
    )
    if not spec["perf"]:
        if os.environ.get("SHARECON_PROFILE_OUT"):
            prof.dump_stats(os.environ["SHARECON_PROFILE_OUT"])  # for pstats' callers/callees
        print_top(pstats.Stats(prof), spec["top"])


def _where(path: str, line: int, func: str) -> str:
    if path == "~":
        return func  # a built-in
    marker = f"{os.sep}sharecon{os.sep}"
    short = "sharecon/" + path.rsplit(marker, 1)[1] if marker in path else Path(path).name
    return f"`{short}:{line}` {func}"


#: The event loops' waits for I/O (asyncio's and trio's): idle, not the client's work.
_IDLE = ("<method 'poll' of 'select.epoll' objects>", "<method 'select' of 'select.epoll' objects>")


def print_top(stats: pstats.Stats, top: int) -> None:
    """The ``top`` entries by own time, as a Markdown table."""
    entries = dict(stats.stats)  # type: ignore[attr-defined]
    idle = {k: v for k, v in entries.items() if k[0] == "~" and k[2] in _IDLE}
    for key in idle:
        del entries[key]
    total = sum(v[2] for v in entries.values()) or 1.0
    waited = sum(v[2] for v in idle.values())
    print(f"{total:.2f} s of own time profiled; {waited:.2f} s waiting in epoll left out\n")
    rows = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    print("| own s | own % | cumulative s | calls | function |")
    print("|---|---|---|---|---|")
    for (path, line, func), (_cc, calls, own, cum, _callers) in rows:
        print(
            f"| {own:.3f} | {own / total * 100:.1f} | {cum:.3f} | {calls:,} | "
            f"{_where(path, line, func)} |"
        )


# -- the driver -----------------------------------------------------------------------------


def perf_report(data: Path, top: int) -> None:
    """The top native symbols by own samples, from ``perf record`` data."""
    out = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "-g", "none",
         "--sort", "dso,symbol", "--percent-limit", "0.3"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    lines = [ln for ln in out.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    print("| own % | library | symbol |")
    print("|---|---|---|")
    for line in lines[:top]:
        parts = line.split(None, 3)
        if len(parts) == 4:
            percent, dso, _kind, symbol = parts
            symbol = re.sub(r"(\s+-)+\s*$", "", symbol).strip()  # perf's empty columns
            print(f"| {percent.rstrip('%')} | {dso} | `{symbol}` |")
    if not lines:
        print(out.stderr[-2000:], file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=("consume", "produce", "roundtrip"))
    parser.add_argument("--build", choices=("pure", "compiled"), default="pure")
    parser.add_argument("--records", type=int, default=None, help="records (or requests)")
    parser.add_argument("--size", type=int, default=100, help="record size in bytes")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="the topic's")
    parser.add_argument(
        "--style",
        choices=("batches", "records"),
        default="batches",
        help="consume: batches() or `async for record in consumer`",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="consume: write the topic in small batches (16 KiB, no linger), as "
        "consume.py --spread does",
    )
    parser.add_argument("--mode", choices=("loop", "batch", "nowait"), default="loop")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--perf", action="store_true", help="Linux perf instead of cProfile")
    parser.add_argument(
        "--cpu-timer",
        action="store_true",
        help="cProfile on CPU time (steadier on a busy machine, more overhead per call)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(json.loads(args.worker))
        return 0
    if args.perf and shutil.which("perf") is None:
        parser.error("--perf needs Linux perf on PATH")
    n = args.records or {"consume": 300_000, "produce": 200_000, "roundtrip": 20_000}[args.workload]
    if args.build == "compiled":
        compiled_tree()

    from sharecon.testing import KafkaBroker
    from sharecon.testing.tools import KafkaTools

    external = os.environ.get("SHARECON_BOOTSTRAP")
    broker = None if external else KafkaBroker().start()
    try:
        bootstrap = broker.bootstrap if broker is not None else str(external)
        tools = broker.tools if broker is not None else KafkaTools(bootstrap)
        topic = f"profile-{args.workload}-{uuid.uuid4().hex[:6]}"
        group = f"profile-{uuid.uuid4().hex[:6]}"
        tools.create_topic(topic, args.partitions)
        if args.workload == "consume":
            tools.produce(
                topic, n, record_size=args.size,
                producer_props={
                    "batch.size": "16384" if args.spread else "262144",
                    "linger.ms": "0" if args.spread else "20",
                },
                timeout=900,
            )  # fmt: skip
            tools.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
        spec = {
            "workload": args.workload, "bootstrap": bootstrap, "topic": topic, "group": group,
            "n": n, "size": args.size, "mode": args.mode if args.workload == "produce" else None,
            "top": args.top, "perf": args.perf, "cpu_timer": args.cpu_timer,
            "style": args.style,
        }  # fmt: skip
        cmd = [sys.executable, str(HERE), args.workload, "--worker", json.dumps(spec)]
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "perf.data"
            if args.perf:
                cmd = ["perf", "record", "-F", "999", "-g", "-q", "-o", str(data), "--", *cmd]
            proc = subprocess.run(cmd, env=build_env(args.build), check=False, timeout=1800)
            if proc.returncode != 0:
                return proc.returncode
            if args.perf:
                perf_report(data, args.top)
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
