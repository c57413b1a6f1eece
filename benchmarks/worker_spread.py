"""Issue 32's scenario: who handles a backlog, and what it costs in delivery attempts.

1,000 records in 3 partitions, written at once (the broker keeps them in a few large
producer batches, ~330 records each); a handler of about 25 ms per record
(``benchmarks/_spread_handler.py``) that asks for one delayed retry of every 125th record
(``RetryLater``); ``sharecon worker`` with 2 and then 4 processes, ``--dlq-after 1``,
everything else at its defaults (the test kit's broker: a 15 s acquisition lock).

For each process count it prints, from what the handler wrote and the dead-letter topic:

* records handled by each process;
* records dead-lettered that the handler never saw, and dead letters in all;
* delivery attempts spent unseen: for each record, the deliveries before the one on which
  the handler first saw it, plus one per record dead-lettered unseen;
* the worker's own count of locks that ended in a buffer (``expired unseen``; where the
  code reports it);
* seconds from writing the records until the last one was handled, and seconds the
  drain took.

Measured on this project's 2-core CI machine, shared with the broker (Kafka 4.4; before =
the code before issue 32, after = ``--acquire-mode auto``, i.e. record limit)::

    processes  handled per process   dead (unseen)  attempts spent unseen  last handled
    before 2   506 / 349              145 (139)      139                    15.3 s
    after  2   680 / 320                0   (0)        0                    18.0 s
    before 4   519 / 327 / 0 / 0      154 (146)      146                    15.1 s
    after  4   293 / 254 / 232 / 221    0   (0)        0                     8.2 s
    batch  2   649 / 351                0   (0)      403                    18.0 s
    batch  4   541 / 453 / 4 / 2        0   (0)      136                    18.3 s

With 2 processes on 3 partitions the coordinator assigns 2 partitions to one process and
1 to the other, hence the 2:1 split. Before, the records whose locks ended in a buffer came back at delivery 2 and went to
the dead-letter topic unseen (the run "ended" sooner because they were never handled);
"batch" is Kafka 4.1's way after the change: nothing dead-lettered, but whole producer
batches still cost attempts (released at once, or expired).

It runs against this checkout, or any other given with ``--tree`` (put first on the
worker processes' ``PYTHONPATH``), so a before/after comparison is two runs of one
script::

    python benchmarks/worker_spread.py
    python benchmarks/worker_spread.py --tree /tmp/before --processes 2
    python benchmarks/worker_spread.py --acquire-mode batch   # Kafka 4.1's way
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/worker_spread.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PARTITIONS = 3
#: After every process joined, time for the coordinator to give each its partitions.
SETTLE = 3.0
#: Seconds without a record handled after which a run ends (the rest went elsewhere).
QUIET = 20.0


def _notes(out: Path) -> dict[int, list[tuple[str, int, str]]]:
    per: dict[int, list[tuple[str, int, str]]] = {}
    for path in out.glob("*.txt"):
        rows = []
        for line in path.read_text().splitlines():
            value, dc, what = line.split()
            rows.append((value, int(dc), what))
        per[int(path.stem)] = rows
    return per


async def _dead_letters(bootstrap: str, dlq: str) -> list[str]:
    import uuid

    from sharecon.admin import Admin
    from sharecon.consumer import ShareConsumer

    group = f"spread-reader-{uuid.uuid4().hex[:6]}"
    async with Admin(bootstrap) as admin:
        if dlq not in await admin.list_topics():
            return []
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    got: list[str] = []
    async with ShareConsumer(bootstrap, group_id=group, topics=[dlq]) as reader:
        while True:
            batch = await reader.poll(5.0)
            if not batch:
                return got
            got.extend((r.value or b"").decode() for r in batch)


async def run(
    bootstrap: str, processes: int, records: int, timeout: float, mode: str | None
) -> dict[str, Any]:
    """One run in this interpreter (its sharecon is the tree under test)."""
    from _common import new_topic_and_group, until

    from sharecon.producer import Producer, ProducerRecord
    from sharecon.worker import WorkerConfig
    from sharecon.worker._supervisor import Supervisor

    topic, group = await new_topic_and_group(bootstrap, "bench-spread", PARTITIONS)
    out = Path(tempfile.mkdtemp(prefix="spread-"))
    os.environ["SPREAD_OUT"] = str(out)
    extra: dict[str, Any] = {} if mode is None else {"acquire_mode": mode}
    config = WorkerConfig(
        **extra,
        handler=f"{HERE / '_spread_handler.py'}:handle",
        group=group,
        topics=(topic,),
        processes=processes,
        dlq_after=1,
        interval=None,
        bootstrap=bootstrap,
    )
    sup = Supervisor(config)

    def handled() -> set[str]:
        return {v for rows in _notes(out).values() for v, _, what in rows if what == "done"}

    result: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.run)
        await until(lambda: all(s.ready for s in sup.slots), 120)
        await anyio.sleep(SETTLE)
        async with Producer(bootstrap, linger=0.05) as producer:
            start = time.monotonic()
            await producer.send_batch(
                ProducerRecord(topic, str(i).encode(), key=str(i).encode()) for i in range(records)
            )
        # Until every record is handled, or none was for 20 s (the rest went elsewhere).
        count, last = 0, time.monotonic()
        with anyio.move_on_after(timeout):
            while count < records and time.monotonic() - last < QUIET:
                await anyio.sleep(0.2)
                now = len(handled())
                if now > count:
                    count, last = now, time.monotonic()
        result["seconds"] = last - start
        stop = time.monotonic()
        sup.stop()
    result["drain"] = time.monotonic() - stop
    notes = _notes(out)
    first_seen: dict[str, int] = {}
    for rows in notes.values():
        for value, dc, _ in rows:
            first_seen[value] = min(dc, first_seen.get(value, dc))
    done = handled()
    dead = await _dead_letters(bootstrap, f"dlq.{group}")
    unseen_dead = [v for v in dead if v not in first_seen]
    result["per_process"] = sorted(
        (sum(1 for _, _, what in rows if what == "done") for rows in notes.values()), reverse=True
    ) + [0] * (processes - len(notes))
    result["handled"] = len(done)
    result["dead"] = len(dead)
    result["dead_unseen"] = len(unseen_dead)
    result["spent_unseen"] = sum(dc - 1 for dc in first_seen.values()) + len(unseen_dead)
    result["expired"] = (
        sum(s.total("expired") for s in sup.slots) if "expired" in sup.slots[0].current else None
    )
    return result


def _child(args: argparse.Namespace) -> None:
    import json

    from _common import bootstrap_servers

    with bootstrap_servers() as bootstrap:
        for n in [int(p) for p in args.processes.split(",")]:
            r = anyio.run(run, bootstrap, n, args.records, args.timeout, args.acquire_mode)
            print(json.dumps({"processes": n, **r}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--processes", default="2,4", help="process counts to try")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--tree", help="a sharecon source tree to measure (default: this one)")
    parser.add_argument(
        "--acquire-mode", help="the worker's --acquire-mode (default: the tree's default)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    import json

    env = dict(os.environ)
    if args.tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.tree, env.get("PYTHONPATH")]))
    argv = [sys.executable, __file__, "--child", "--records", str(args.records)]
    argv += ["--processes", args.processes, "--timeout", str(args.timeout)]
    if args.acquire_mode:
        argv += ["--acquire-mode", args.acquire_mode]
    done = subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    print(
        f"{'processes':>9} | {'handled per process':<24} | handled | dead (unseen) | "
        f"attempts spent unseen | expired in buffer | handled in s | drain s"
    )
    for line in done.stdout.splitlines():
        r = json.loads(line)
        per = " / ".join(str(n) for n in r["per_process"])
        expired = "n/a" if r["expired"] is None else r["expired"]
        print(
            f"{r['processes']:>9} | {per:<24} | {r['handled']:>7} | "
            f"{r['dead']:>4} ({r['dead_unseen']:>4}) | {r['spent_unseen']:>21} | "
            f"{expired!s:>17} | {r['seconds']:>12.1f} | {r['drain']:>7.1f}"
        )


if __name__ == "__main__":
    main()
