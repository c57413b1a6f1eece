"""``sharecon worker --autoscale``: time to follow a step in the feed rate, and the
delivery counts after 20 scale-downs.

1. **Step.** The worker (``sharecon.worker.Supervisor``, real worker processes) runs with
   ``--autoscale 1:MAX`` on an I/O-bound handler (``anyio.sleep(0.02)``, ``--concurrency 4``:
   one process handles about 200 records/s). The feed runs at ``--low`` records/s, then
   steps to ``--high`` for ``--step`` seconds, then stops. Reported: the time from the step
   up to each added process (decision, then ready: joined the group), the time from the
   end of the feed until the backlog is worked off and until one process is left, and
   the process count over time.
2. **Scale-downs.** Under a steady feed, the benchmark makes the supervisor go from 1 to 2
   processes and back ``--cycles`` times (each scale-down is a drain of a process that
   holds fetched records), then counts what the handlers saw: records handled, and
   records that arrived with a delivery count above 1 (a delivery attempt spent).

Measured on this project's CI machine (2 cores shared with the broker and other work;
defaults: step 50 -> 500 records/s for 20 s, ``1:3``, up after 1 s, down after 3 s,
cool-down 2 s, ``--max-records 4``)::

    step up -> first decision to add          2.94 s   (1 -> 2; 2 -> 3 at 8.57 s)
    step up -> that process joined and ready  5.87 s   (starting one takes about 3 s)
    step up -> 3 processes ready             10.92 s
    feed end -> backlog worked off            8.55 s   (10,147 records in the run)
    feed end -> back to 1 process            15.66 s   (3 -> 2 at +12.2 s, 2 -> 1 at +15.7 s)
    20 scale-downs under a 200/s feed:       17,912 written, 17,912 handled,
                                             0 with a delivery count above 1,
                                             111 fetched records finished while draining
    drain time                               2.02 s avg, 2.24 s max

An earlier run on the same machine under heavier load: first decision 4.98 s, back to 1
process 19.56 s, 20 scale-downs with 21,136 records handled, none redelivered, 118
finished while draining.

Since a draining process leaves once ``ShareConsumer.fetching_stopped()`` says no fetch is
outstanding (instead of after 1 s with nothing held), drains are shorter. A run with
``--step 10`` (load average about 16 on the 2 cores): 20 scale-downs, 20,186 records
written and handled, 0 with a delivery count above 1, 115 finished while draining, drain
time 1.06 s avg and 1.52 s max (2.02 / 2.24 s before).

The first decision waits for busyness to pass 75 %: with ``--max-records`` equal to the
concurrency, a process also waits on its fetches, so its handler slots fill more slowly
than the backlog grows. The records finished while draining are what drains used to
release, one delivery attempt each.

Usage::

    python benchmarks/autoscale.py                    # starts a local broker
    python benchmarks/autoscale.py --cycles 5 --step 10
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/autoscale.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bootstrap_servers, environment, new_topic_and_group, print_table, write_json
from _common import until as _until_every

from sharecon.producer import Producer
from sharecon.worker import WorkerConfig, handler_spec
from sharecon.worker._autoscale import Decision
from sharecon.worker._supervisor import Supervisor

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.record import Record

PARTITIONS = 6
CONCURRENCY = 4


async def io_handler(record: Record) -> None:
    """Twenty milliseconds of waiting (a call to another service)."""
    await anyio.sleep(0.02)


async def _setup(bootstrap: str) -> tuple[str, str]:
    return await new_topic_and_group(bootstrap, "bench-autoscale", PARTITIONS)


async def _feed(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    sent: list[int],
    stop: anyio.Event | None = None,
) -> None:
    """``rate`` records/s for ``seconds`` (or until ``stop``); ``sent[0]`` counts them."""
    async with Producer(bootstrap) as producer:
        began = anyio.current_time()
        while (now := anyio.current_time()) - began < seconds and not (stop and stop.is_set()):
            due = int((now - began) * rate)
            while sent[1] < due:
                await producer.send(topic, b"x" * 32, key=str(sent[0]).encode())
                sent[0] += 1
                sent[1] += 1
            await anyio.sleep(0.01)
        await producer.flush()
    sent[1] = 0


async def _until(check: Callable[[], bool], timeout: float) -> None:
    await _until_every(check, timeout, every=0.02)


def _config(bootstrap: str, topic: str, group: str, **kw: Any) -> WorkerConfig:
    return WorkerConfig(
        handler=handler_spec(io_handler),
        group=group,
        topics=(topic,),
        concurrency=CONCURRENCY,
        max_records=CONCURRENCY,
        interval=None,
        bootstrap=bootstrap,
        **kw,
    )


def _handled(sup: Supervisor) -> int:
    return sum(s.total("handled") + s.total("failed") for s in sup.slots)


async def run_step(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time to follow a step up and a step down."""
    topic, group = await _setup(bootstrap)
    config = _config(
        bootstrap,
        topic,
        group,
        autoscale=f"1:{args.max}",
        scale_up_after=args.up_after,
        scale_down_after=args.down_after,
        scale_cooldown=args.cooldown,
    )
    sup = Supervisor(config)
    sent = [0, 0]
    out: dict[str, Any] = {}
    timeline: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.run)
        await _until(lambda: all(s.ready for s in sup.slots), 120)
        await _feed(bootstrap, topic, args.low, 3.0, sent)
        step = anyio.current_time()

        async def watch() -> None:
            # (seconds after the step, processes joined and running) at each change.
            last = -1
            while True:
                ready = sum(1 for s in sup._active() if s.ready)
                if ready != last:
                    timeline.append((anyio.current_time() - step, ready))
                    last = ready
                await anyio.sleep(0.05)

        tg.start_soon(watch)
        await _feed(bootstrap, topic, args.high, args.step, sent)
        fed = anyio.current_time()
        await _until(lambda: _handled(sup) >= sent[0], 300)
        caught_up = anyio.current_time()
        await _until(lambda: len(sup._active()) == 1 and sup.slots[0].ready, 300)
        back = anyio.current_time()
        sup.stop()
        tg.cancel_scope.cancel()
    ups = [(t - step, d.target) for t, d in sup.scale_changes if d.target > d.current]
    out["records"] = sent[0]
    out["scale_up_decisions"] = ups
    out["ready_timeline"] = timeline
    out["first_added_ready_s"] = next((t for t, n in timeline if n >= 2), None)
    out["max_ready_s"] = next((t for t, n in timeline if n == max(n for _, n in timeline)), None)
    out["max_processes"] = max(n for _, n in timeline) if timeline else 1
    out["caught_up_after_feed_s"] = caught_up - fed
    out["back_to_one_after_feed_s"] = back - fed
    out["changes"] = [
        (round(t - step, 2), d.current, d.target, d.reason) for t, d in sup.scale_changes
    ]
    return out


async def run_cycles(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """``cycles`` scale-ups and scale-downs under a steady feed; delivery counts after."""
    topic, group = await _setup(bootstrap)
    config = _config(bootstrap, topic, group, processes=1)
    sup = Supervisor(config)
    sent = [0, 0]
    drain_times: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.run)
        await _until(lambda: all(s.ready for s in sup.slots), 120)
        stop_feeding = anyio.Event()
        fed = anyio.Event()

        async def feed() -> None:
            await _feed(bootstrap, topic, args.cycle_rate, 10_000, sent, stop_feeding)
            fed.set()

        tg.start_soon(feed)
        for _ in range(args.cycles):
            sup.apply(Decision(1, 2, "benchmark: up"))
            await _until(lambda: all(s.ready for s in sup._active()), 60)
            # Let the new process fetch and hold records before it drains.
            await _until(lambda: sup.slots[1].total("handled") > sup.slots[1].base["handled"], 30)
            began = anyio.current_time()
            sup.apply(Decision(2, 1, "benchmark: down"))
            await _until(lambda: sup.slots[1].done, 60)
            drain_times.append(anyio.current_time() - began)
        stop_feeding.set()
        await fed.wait()
        await _until(lambda: _handled(sup) >= sent[0], 120)
        sup.stop()
    handled = sum(s.total("handled") for s in sup.slots)
    return {
        "cycles": args.cycles,
        "records": sent[0],
        "handled": handled,
        "redelivered": sum(s.total("redelivered") for s in sup.slots),
        "finished_while_draining": sum(s.total("finished_in_drain") for s in sup.slots),
        "drain_seconds_avg": sum(drain_times) / len(drain_times),
        "drain_seconds_max": max(drain_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=3, help="autoscale maximum")
    parser.add_argument("--low", type=float, default=50.0, help="records/s before the step")
    parser.add_argument("--high", type=float, default=500.0, help="records/s in the step")
    parser.add_argument("--step", type=float, default=20.0, help="seconds of the step")
    parser.add_argument("--up-after", type=float, default=1.0)
    parser.add_argument("--down-after", type=float, default=3.0)
    parser.add_argument("--cooldown", type=float, default=2.0)
    parser.add_argument("--cycles", type=int, default=20, help="scale-downs to count")
    parser.add_argument("--cycle-rate", type=float, default=200.0, help="records/s meanwhile")
    args = parser.parse_args()

    with bootstrap_servers() as bootstrap:
        started = time.perf_counter()
        step = anyio.run(run_step, bootstrap, args)
        print("changes, t from the step up:")
        for change in step["changes"]:
            print(f"  t={change[0]:6.2f} s  {change[1]} -> {change[2]}  ({change[3]})")
        print("processes ready, t from the step up:", step["ready_timeline"], flush=True)
        cycles = anyio.run(run_cycles, bootstrap, args)
        print_table(
            ["measure", "value"],
            [
                ["records in the step run", f"{step['records']:,}"],
                [
                    "step up -> first decision to add (s)",
                    f"{step['scale_up_decisions'][0][0]:.2f}"
                    if step["scale_up_decisions"]
                    else "none",
                ],
                [
                    "step up -> first added process ready (s)",
                    f"{step['first_added_ready_s']:.2f}"
                    if step["first_added_ready_s"] is not None
                    else "none",
                ],
                ["most processes", step["max_processes"]],
                ["step up -> most processes ready (s)", f"{step['max_ready_s']:.2f}"],
                ["feed end -> backlog worked off (s)", f"{step['caught_up_after_feed_s']:.2f}"],
                ["feed end -> back to 1 process (s)", f"{step['back_to_one_after_feed_s']:.2f}"],
                [f"scale-downs under a {args.cycle_rate:g}/s feed", cycles["cycles"]],
                ["records written / handled", f"{cycles['records']:,} / {cycles['handled']:,}"],
                ["handled with delivery count > 1", cycles["redelivered"]],
                ["finished while draining (not released)", cycles["finished_while_draining"]],
                [
                    "drain time avg / max (s)",
                    f"{cycles['drain_seconds_avg']:.2f} / {cycles['drain_seconds_max']:.2f}",
                ],
            ],
            title=f"sharecon worker --autoscale: {os.cpu_count()} CPUs (broker on the same machine)",
        )
        path = write_json(
            "autoscale",
            {
                "settings": vars(args),
                "step": step,
                "cycles": cycles,
                "seconds": time.perf_counter() - started,
                "environment": environment(["sharecon", "anyio"]),
            },
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
