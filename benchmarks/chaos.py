"""Faults on a three-broker cluster, every record counted: sharecon beside confluent-kafka.

Starts a :class:`~sharecon.testing.cluster.KafkaCluster` (three brokers, each behind a
Toxiproxy fault proxy). For each client and each fault: a fresh topic (3 partitions,
replicated 3) and group; records with ids in their values are produced steadily
(``--rate`` per second) while three members of the client under test accept them, each
spending ``--work`` seconds per record; the fault is injected after ``--warmup`` seconds;
production stops ``--after`` seconds after the fault ends; then the run waits until every
record is accepted. The same :class:`~sharecon.testing.tally.DeliveryTally` as the test
suite judges both clients.

Per fault and client it prints records produced, lost (must be 0), duplicates and how each
is explained, time from the fault to the next delivered record, the longest time records
waited with none delivered, and the total time without progress (gaps over 1 s), then
writes ``benchmarks/results/chaos.json``.

Run::

    python benchmarks/chaos.py                         # every fault, both clients
    python benchmarks/chaos.py --faults cuts,stall --clients sharecon
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, print_table, write_json

from sharecon.testing._sync import with_admin
from sharecon.testing.chaos import Members, check_group_drained, decode_id, feed
from sharecon.testing.cluster import KafkaCluster
from sharecon.testing.tally import DeliveryTally, TallyReport

if TYPE_CHECKING:
    from collections.abc import Callable

CLIENTS = ("sharecon", "confluent-kafka")
FAULTS = (
    "kill-leader",
    "kill-coordinator",
    "rolling-restart",
    "move-leader",
    "cuts",
    "stall",
    "kill-member",
)


# -- confluent-kafka members ------------------------------------------------------------


class ConfluentMembers:
    """Three confluent-kafka ShareConsumers (librdkafka) in threads, explicit acceptance.

    Events go through a queue and are applied to the tally by :meth:`drain` on the event
    loop, so the tally is only ever touched by one thread.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        tally: DeliveryTally,
        work: float,
        count: int = 3,
    ) -> None:
        self.bootstrap, self.group, self.topic, self.tally = bootstrap, group, topic, tally
        self.work, self.count = work, count
        self.events: queue.SimpleQueue[tuple[str, tuple[Any, ...]]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self.tally.started(time.monotonic())
        for i in range(self.count):
            t = threading.Thread(target=self._member, args=(f"c{i}",), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.drain()

    def drain(self) -> None:
        while True:
            try:
                kind, args = self.events.get_nowait()
            except queue.Empty:
                return
            if kind == "delivered":
                self.tally.delivered(*args)
            else:
                topic, partition, offsets, ok, at = args
                for off in offsets:
                    self.tally.answered(topic, partition, off, off, ok=ok, at=at)

    async def wait_done(self, timeout: float, *, settle: float = 20.0) -> bool:
        for _ in range(int(timeout / 0.2) + 1):
            self.drain()
            if self.tally.done(time.monotonic(), settle=settle):
                return True
            await anyio.sleep(0.2)
        return False

    def _member(self, name: str) -> None:
        from confluent_kafka import ShareConsumer

        events = self.events

        def on_commit(offsets: Any, exc: Any) -> None:
            now = time.monotonic()
            for tp, offs in offsets.items():
                events.put(("answered", (tp.topic, tp.partition, sorted(offs), exc is None, now)))

        consumer = ShareConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "share.acknowledgement.mode": "explicit",
                "client.id": f"chaos-{name}",
            }
        )
        consumer.set_acknowledgement_commit_callback(on_commit)
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for msg in consumer.poll(0.5):
                    if msg.error():
                        continue
                    events.put(
                        (
                            "delivered",
                            (
                                decode_id(msg.value()),
                                msg.topic(),
                                msg.partition(),
                                msg.offset(),
                                msg.delivery_count() or 0,
                                name,
                                time.monotonic(),
                                -1,  # see watch_leaders
                            ),
                        )
                    )
                    if self.work:
                        time.sleep(self.work)
                    consumer.acknowledge(msg)
                consumer.commit_async()
            consumer.commit_sync()
        finally:
            consumer.close()


def _hold_confluent(bootstrap: str, group: str, topic: str) -> None:
    # A member that takes records and never answers them (the test SIGKILLs it).
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    time.sleep(3)
    n = 0
    msgs: list[Any] = []
    for _ in range(60):
        msgs = [m for m in consumer.poll(0.5) if not m.error()]
        if msgs:
            break
    for msg in msgs:
        line = {
            "id": decode_id(msg.value()),
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "delivery_count": msg.delivery_count() or 0,
            "leader_epoch": -1,  # the batch's write epoch, not the serving leader
        }
        print(json.dumps(line), flush=True)
        n += 1
    print(json.dumps({"held": n}), flush=True)
    time.sleep(3600)  # hold what was taken; poll() again would need acknowledgements


# -- faults -----------------------------------------------------------------------------


async def _thread(call: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(call)


async def kill_leader(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    leader = c.leader_of(topic, 0)
    tally.fault(f"SIGKILL leader {leader.node_id}", time.monotonic())
    await _thread(leader.kill)
    await anyio.sleep(a.down)
    tally.fault(f"restart {leader.node_id}", time.monotonic())
    await _thread(leader.start)


async def kill_coordinator(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    coordinator = c.coordinator_of(group)
    tally.fault(f"SIGKILL coordinator {coordinator.node_id}", time.monotonic())
    await _thread(coordinator.kill)
    await anyio.sleep(a.down)
    tally.fault(f"restart {coordinator.node_id}", time.monotonic())
    await _thread(coordinator.start)


async def rolling_restart(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    for broker in c.brokers:
        tally.fault(f"restart {broker.node_id}", time.monotonic())
        await _thread(broker.restart)
        await _thread(c.wait_in_sync)


async def move_leader(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    for _round in range(2):
        for p in range(3):
            to = c.leader_of(topic, p).node_id % 3 + 1
            tally.fault(f"move {p} -> {to}", time.monotonic())
            await _thread(lambda p=p, to=to: c.move_leader(topic, p, to))
            await anyio.sleep(2)


async def cuts(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    for _ in range(a.cuts):
        tally.fault("cut all", time.monotonic())
        for proxy in c.proxies:
            proxy.cut()
        # Every connection closed at once: the brokers may reload their share partitions.
        tally.sessions_ended(time.monotonic())
        await anyio.sleep(a.cut_every)


async def stall(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    tally.fault(f"stall {a.stall:.0f} s", time.monotonic())
    for proxy in c.proxies:
        proxy.stall()
    await anyio.sleep(a.stall)
    for proxy in c.proxies:
        proxy.heal()
    # Ending the stall closes every connection it held, all at once: see
    # DeliveryTally.sessions_ended and "The model broker" in docs/testing.md.
    tally.sessions_ended(time.monotonic())
    tally.fault("healed", time.monotonic())


async def kill_member(
    c: KafkaCluster,
    topic: str,
    group: str,
    tally: DeliveryTally,
    a: argparse.Namespace,
    client: str,
) -> None:
    mode = "hold-confluent" if client == "confluent-kafka" else "hold-sharecon"
    cmd = [sys.executable, __file__, mode, c.bootstrap, group, topic]
    holder = await anyio.to_thread.run_sync(
        lambda: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    )
    assert holder.stdout is not None
    out = holder.stdout
    held: list[dict[str, Any]] = []

    def read_some() -> None:
        for line in out:
            item = json.loads(line)
            if "held" in item:
                return
            held.append(item)

    try:
        with anyio.move_on_after(60):
            await anyio.to_thread.run_sync(read_some, abandon_on_cancel=True)
    finally:
        holder.kill()
        holder.wait()
        out.close()
    now = time.monotonic()
    tally.fault(f"SIGKILL member holding {len(held)}", now)
    for h in held:
        tally.delivered(
            h["id"],
            h["topic"],
            h["partition"],
            h["offset"],
            h["delivery_count"],
            "killed",
            now - 0.001,
            h["leader_epoch"],
        )


FAULT_FNS: dict[str, Any] = {
    "kill-leader": kill_leader,
    "kill-coordinator": kill_coordinator,
    "rolling-restart": rolling_restart,
    "move-leader": move_leader,
    "cuts": cuts,
    "stall": stall,
    "kill-member": kill_member,
}


# -- one run ------------------------------------------------------------------------------


async def run_one(
    cluster: KafkaCluster, client: str, fault: str, a: argparse.Namespace
) -> dict[str, Any]:
    topic = f"chaos-{fault}-{uuid.uuid4().hex[:6]}"
    group = f"chaos-{client}-{fault}-{uuid.uuid4().hex[:6]}"
    cluster.tools.create_topic(topic, partitions=3, replication_factor=3)
    with_admin(
        cluster.plaintext_bootstrap,
        lambda ad: ad.alter_group_config(group, {"share.auto.offset.reset": "earliest"}),
    )
    tally = DeliveryTally(same_count_redelivery=cluster.version.startswith("4.1."))
    stop_feeding = anyio.Event()
    started = time.monotonic()
    per_tick = max(1, int(a.rate / 2))
    done = False
    async with anyio.create_task_group() as tg:
        if client == "sharecon":
            members: Any = Members(cluster.bootstrap, group, [topic], tally, count=3, work=a.work)
            tg.start_soon(members.run)
        else:
            members = ConfluentMembers(cluster.bootstrap, group, topic, tally, a.work)
            members.start()
            # librdkafka's Message.leader_epoch() is the epoch the batch was written in,
            # not the leader that served it: report leader changes from metadata instead.
            tg.start_soon(watch_leaders, cluster, topic, tally, stop_feeding)
        tg.start_soon(
            lambda: feed(cluster.bootstrap, topic, tally, stop_feeding, per_tick=per_tick)
        )
        await anyio.sleep(a.warmup)
        await FAULT_FNS[fault](cluster, topic, group, tally, a, client)
        await anyio.sleep(a.after)
        stop_feeding.set()
        done = await members.wait_done(a.timeout)
        if client == "sharecon":
            members.stop()
        else:
            await anyio.to_thread.run_sync(members.stop)
    report: TallyReport = tally.report()
    left = await anyio.to_thread.run_sync(
        lambda: check_group_drained(cluster.plaintext_bootstrap, group, tally)
    )
    first = report.faults[0] if report.faults else None
    return {
        "client": client,
        "fault": fault,
        "finished": done,
        "seconds": round(time.monotonic() - started, 1),
        "produced": report.produced,
        "lost": len(report.lost),
        "duplicates": report.duplicates,
        "explained": report.explained,
        "unexplained": len(report.unexplained),
        "double_accepted": len(report.double_accepted),
        "left_at_broker": len(left),
        "to_next_delivery_s": None
        if first is None or first.to_next_delivery is None
        else round(first.to_next_delivery, 2),
        "longest_gap_s": round(report.longest_gap, 2),
        "without_progress_s": round(report.time_without_progress, 2),
        "summary": report.summary(),
    }


async def watch_leaders(
    cluster: KafkaCluster, topic: str, tally: DeliveryTally, stop: anyio.Event
) -> None:
    from sharecon.admin import Admin

    epochs: dict[int, int] = {}
    async with Admin(cluster.plaintext_bootstrap) as admin:
        while not stop.is_set():
            with anyio.move_on_after(5):
                described = await admin.describe_topics([topic])
                now = time.monotonic()
                for p in described[topic].partitions:
                    if epochs.get(p.partition, p.leader_epoch) != p.leader_epoch:
                        tally.leader_changed(topic, p.partition, now)
                    epochs[p.partition] = p.leader_epoch
            await anyio.sleep(0.25)


async def heal(cluster: KafkaCluster) -> None:
    for proxy in cluster.proxies:
        proxy.heal()
    for broker in cluster.brokers:
        await anyio.to_thread.run_sync(broker.start)
    await anyio.to_thread.run_sync(cluster.wait_in_sync)


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 5 and sys.argv[1] in ("hold-sharecon", "hold-confluent"):
        if sys.argv[1] == "hold-confluent":
            _hold_confluent(*sys.argv[2:5])
        else:
            from sharecon.testing.chaos import _hold

            anyio.run(_hold, sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--version", default=None, help="Kafka version (default: sharecon.testing's)")
    p.add_argument("--rate", type=float, default=250.0, help="records produced per second")
    p.add_argument("--work", type=float, default=0.01, help="seconds a member spends per record")
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--after", type=float, default=15.0, help="seconds of load after the fault")
    p.add_argument("--down", type=float, default=20.0, help="seconds a killed broker stays down")
    p.add_argument("--cuts", type=int, default=8)
    p.add_argument("--cut-every", type=float, default=5.0)
    p.add_argument("--stall", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--out", default="chaos", help="results file name in benchmarks/results/")
    a = p.parse_args(argv)
    faults = [f for f in a.faults.split(",") if f]
    clients = [c for c in a.clients.split(",") if c]
    for f in faults:
        if f not in FAULT_FNS:
            p.error(f"unknown fault {f!r}; choose from {', '.join(FAULTS)}")
    results: list[dict[str, Any]] = []
    kwargs = {"version": a.version} if a.version else {}
    with KafkaCluster(3, proxy=True, **kwargs) as cluster:
        print(f"cluster {cluster.version}: {cluster.bootstrap}", file=sys.stderr)
        for fault in faults:
            for client in clients:
                print(f"== {client}: {fault}", file=sys.stderr)
                res = anyio.run(run_one, cluster, client, fault, a)
                print(res["summary"], file=sys.stderr)
                results.append(res)
                anyio.run(heal, cluster)
        version = cluster.version
    rows = []
    for r in results:
        expl = ", ".join(f"{k}: {v}" for k, v in sorted(r["explained"].items())) or "-"
        rows.append(
            [
                r["fault"], r["client"], str(r["produced"]), str(r["lost"]),
                f"{r['duplicates']} ({expl})", str(r["unexplained"] + r["double_accepted"]),
                "-" if r["to_next_delivery_s"] is None else f"{r['to_next_delivery_s']:.2f}",
                f"{r['longest_gap_s']:.2f}", f"{r['without_progress_s']:.2f}",
                "yes" if r["finished"] and not r["left_at_broker"] else "NO",
            ]
        )  # fmt: skip
    print_table(
        ["fault", "client", "produced", "lost", "duplicates (explained)", "unexplained",
         "fault->next s", "longest gap s", "no progress s", "drained"],
        rows,
    )  # fmt: skip
    write_json(
        a.out,
        {
            "environment": environment(("confluent-kafka",)),
            "kafka": version,
            "settings": {k: v for k, v in vars(a).items() if k not in ("faults", "clients", "out")},
            "results": [{k: v for k, v in r.items() if k != "summary"} for r in results],
        },
    )
    bad = [
        r
        for r in results
        if r["lost"] or r["unexplained"] or r["double_accepted"] or not r["finished"]
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
