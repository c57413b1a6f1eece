"""``scripts/demo``: a live Kafka broker with share groups, records in, records out.

Steps: fetch the broker's jars (first run only), start it, show that it offers share
groups, create a topic and set the group to read from the earliest record (sharecon's
``Admin``), produce records (sharecon's ``Producer``), then consume them through one share
group with several sharecon ``ShareConsumer`` members at once, with a progress bar, and
stop the broker. Every 1000th record delivered is released on purpose, so the
summary shows redelivery (delivery count 2) as well.

``--bootstrap host:port`` runs the same steps against an existing cluster instead (with
fresh topic and group names, and nothing stopped at the end).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon import errors
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    cache_root,
    provision,
)
from sharecon.testing.broker import KafkaBroker
from sharecon.testing.probe import ShareSupport, share_support
from sharecon.testing.tools import KafkaToolError

if TYPE_CHECKING:
    from sharecon._share.ledger import AckResult
    from sharecon.record import Record

__all__ = ["main"]

TOPIC = "demo-orders"
GROUP = "demo-billing"
PARTITIONS = 3
VALUE_SIZE = 100
#: Bound on the consuming step; a healthy local run needs a few seconds.
CONSUME_TIMEOUT = 120.0


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code (0 when every record came back)."""
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument(
        "--version", default=DEFAULT_KAFKA_VERSION, help="Kafka version (default %(default)s)"
    )
    parser.add_argument(
        "--records", type=int, default=5000, help="records to produce (default %(default)s)"
    )
    parser.add_argument(
        "--members",
        type=int,
        default=3,
        help="share consumers in the group, all reading at once (default %(default)s)",
    )
    parser.add_argument(
        "--release-every",
        type=int,
        default=1000,
        metavar="N",
        help="release every Nth record delivered, on its first delivery, to show redelivery "
        "(0: never; default %(default)s)",
    )
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="use this running cluster (share groups on) instead of starting a broker",
    )
    args = parser.parse_args(argv)
    if args.records < 1 or args.members < 1 or args.release_every < 0:
        parser.error("--records and --members must be at least 1, --release-every at least 0")
    plan = _Plan(args.records, args.members, args.release_every)
    try:
        if args.bootstrap:
            suffix = uuid.uuid4().hex[:8]
            plan.topic, plan.group = f"{TOPIC}-{suffix}", f"{GROUP}-{suffix}"
            return _run_on(args.bootstrap, plan, started=time.monotonic(), version=None)
        return _run(args.version, plan)
    except (BrokerStartError, KafkaToolError, errors.KafkaError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; broker stopped", file=sys.stderr)
        return 130


@dataclass
class _Plan:
    records: int
    members: int
    release_every: int
    topic: str = TOPIC
    group: str = GROUP


def _run(version: str, plan: _Plan) -> int:
    started = time.monotonic()
    _step(f"Kafka {version}: jars from Maven Central, cached in {cache_root()}")
    t = time.monotonic()
    install = provision(version)
    print(f"    {len(list(install.lib.glob('*.jar')))} jars ready in {time.monotonic() - t:.1f} s")

    _step("starting a broker (KRaft, one node, 127.0.0.1)")
    t = time.monotonic()
    with KafkaBroker(install.version) as broker:
        print(
            f"    up at {broker.bootstrap} in {time.monotonic() - t:.1f} s (log: {broker.log_path})"
        )
        return _run_on(broker.bootstrap, plan, started=started, version=install.version)


def _run_on(bootstrap: str, plan: _Plan, *, started: float, version: str | None) -> int:
    support = share_support(bootstrap)
    apis = ", ".join(f"{name} v{lo}-{hi}" for name, (lo, hi) in support.apis.items())
    state = "ENABLED" if support.enabled else "NOT enabled"
    _step(
        f"share groups {state}: share.version={support.share_version} "
        f"(broker supports up to {support.share_version_max})"
    )
    print(f"    {apis}")
    if not support.enabled:
        return 1

    result = anyio.run(_produce_and_consume, bootstrap, plan)
    if version is not None:
        _step("stopping the broker")
    _summary(bootstrap, version, support, plan, result, time.monotonic() - started)
    return 0 if result.complete else 1


# -- the async part ---------------------------------------------------------------------


@dataclass
class _Result:
    produced_seconds: float = 0.0
    join_seconds: float = 0.0
    #: From joining to the first record (the coordinator assigns partitions meanwhile).
    wait_seconds: float = 0.0
    consume_seconds: float = 0.0
    #: (partition, offset) of every record seen at least once.
    seen: set[tuple[int, int]] = field(default_factory=set)
    deliveries: collections.Counter[int] = field(default_factory=collections.Counter)
    per_member: list[int] = field(default_factory=list)
    released: int = 0
    acked_ok: int = 0
    acked_failed: int = 0
    complete: bool = False


async def _produce_and_consume(bootstrap: str, plan: _Plan) -> _Result:
    result = _Result()
    _step(
        f"topic {plan.topic!r} ({PARTITIONS} partitions), group {plan.group!r} reading "
        "from the earliest record"
    )
    async with Admin(bootstrap) as admin:
        await admin.create_topics([plan.topic], num_partitions=PARTITIONS)
        await admin.alter_group_config(plan.group, {"share.auto.offset.reset": "earliest"})

    _step(f"producing {plan.records} records of {VALUE_SIZE} bytes with sharecon's Producer")
    value = b"x" * VALUE_SIZE
    t = time.monotonic()
    async with Producer(bootstrap) as producer:
        await producer.send_batch(
            ProducerRecord(plan.topic, value, key=b"order-%d" % i) for i in range(plan.records)
        )
    result.produced_seconds = time.monotonic() - t
    print(
        f"    {plan.records} records in {result.produced_seconds:.1f} s "
        f"({plan.records / max(result.produced_seconds, 1e-6):,.0f} records/s)"
    )

    _step(
        f"consuming through share group {plan.group!r} with {plan.members} sharecon "
        f"consumer{'s' if plan.members > 1 else ''}"
        + (f"; every {plan.release_every}th record is released once" if plan.release_every else "")
    )
    await _consume(bootstrap, plan, result)
    return result


async def _consume(bootstrap: str, plan: _Plan, result: _Result) -> None:
    expected = plan.records
    bar = _progress(expected)
    done = anyio.Event()
    first_record: list[float] = []
    last_record: list[float] = []
    result.per_member = [0] * plan.members

    def on_acknowledged(results: list[AckResult]) -> None:
        for r in results:
            if r.ok:
                result.acked_ok += r.count
            else:
                result.acked_failed += r.count

    async def member(index: int, stop: anyio.CancelScope) -> None:
        async with ShareConsumer(
            bootstrap,
            group_id=plan.group,
            topics=[plan.topic],
            client_id=f"sharecon-demo-{index}",
            on_acknowledged=on_acknowledged,
        ) as consumer:
            joined.append(time.monotonic())
            with stop:
                async for record in consumer:
                    _handle(record, index)
                    if done.is_set():
                        break
            # Implicit mode: commit() accepts the record in hand and waits for verdicts.
            await consumer.commit()

    def _handle(record: Record, index: int) -> None:
        if not first_record:
            first_record.append(time.monotonic())
        result.deliveries[record.delivery_count] += 1
        result.per_member[index] += 1
        if (
            plan.release_every
            and record.delivery_count == 1
            and result.deliveries[1] % plan.release_every == 0
        ):
            record.release()  # comes back, to any member, with delivery_count 2
            result.released += 1
            return
        result.seen.add((record.partition, record.offset))
        bar.update(len(result.seen))
        if len(result.seen) >= expected and not done.is_set():
            last_record.append(time.monotonic())
            done.set()
            for scope in stops:
                scope.cancel()

    joined: list[float] = []
    stops = [anyio.CancelScope() for _ in range(plan.members)]
    t = time.monotonic()
    with anyio.move_on_after(CONSUME_TIMEOUT):
        async with anyio.create_task_group() as tg:
            for i in range(plan.members):
                tg.start_soon(member, i, stops[i])
    end = last_record[0] if last_record else time.monotonic()
    bar.close(len(result.seen))
    result.join_seconds = (min(joined) - t) if joined else 0.0
    result.wait_seconds = (first_record[0] - min(joined)) if joined and first_record else 0.0
    result.consume_seconds = end - (first_record[0] if first_record else t)
    result.complete = len(result.seen) == expected


# -- output -----------------------------------------------------------------------------


class _Bar(Protocol):
    def update(self, n: int) -> None: ...

    def close(self, n: int) -> None: ...


def _progress(total: int) -> _Bar:
    """A rich progress bar on a terminal (rich is a dependency of sharecon), else a few
    plain lines, so a log or a pipe stays readable."""
    if sys.stdout.isatty():
        return _RichBar(total)
    return _TextBar(total)


class _RichBar:
    def __init__(self, total: int) -> None:
        import rich.progress as rp

        self._progress = rp.Progress(
            rp.TextColumn("    records"),
            rp.BarColumn(),
            rp.MofNCompleteColumn(),
            rp.TaskProgressColumn(),
            rp.TimeElapsedColumn(),
        )
        self._task = self._progress.add_task("consume", total=total)
        self._progress.start()

    def update(self, n: int) -> None:
        self._progress.update(self._task, completed=n)

    def close(self, n: int) -> None:
        self._progress.update(self._task, completed=n)
        self._progress.stop()


class _TextBar:
    """A one-line progress bar on a terminal; a few plain lines otherwise."""

    WIDTH = 30

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.tty = sys.stdout.isatty()
        self.started = time.monotonic()
        self._last = -1

    def update(self, n: int) -> None:
        pct = n * 100 // self.total
        if pct == self._last:
            return
        self._last = pct
        if self.tty:
            filled = pct * self.WIDTH // 100
            rate = n / max(time.monotonic() - self.started, 1e-6)
            sys.stdout.write(
                f"\r    [{'#' * filled}{'.' * (self.WIDTH - filled)}] {pct:3d}% "
                f"{n}/{self.total} {rate:,.0f} records/s"
            )
            sys.stdout.flush()
        elif pct % 25 == 0 and pct > 0:
            print(f"    {n}/{self.total} records ({pct}%)", flush=True)

    def close(self, n: int) -> None:
        if self.tty:
            sys.stdout.write("\n")
        print(f"    received {n} of {self.total}", flush=True)


def _summary(
    bootstrap: str,
    version: str | None,
    support: ShareSupport,
    plan: _Plan,
    result: _Result,
    total: float,
) -> None:
    got = len(result.seen)
    delivered = sum(result.deliveries.values())
    counts = ", ".join(f"{n} x delivery_count={dc}" for dc, n in sorted(result.deliveries.items()))
    members = " / ".join(str(n) for n in result.per_member)
    rate = got / max(result.consume_seconds, 1e-6)
    print()
    print("summary")
    where = f"Kafka {version} at {bootstrap}" if version else f"cluster at {bootstrap}"
    print(f"  {where}, share.version={support.share_version}")
    print(
        f"  produced    {plan.records} records into {plan.topic!r} in "
        f"{result.produced_seconds:.1f} s"
    )
    print(
        f"  consumed    {got} of {plan.records} records in {result.consume_seconds:.2f} s "
        f"({rate:,.0f} records/s) through group {plan.group!r}"
    )
    print(f"  members     {plan.members} (records per member: {members})")
    print(f"  deliveries  {delivered}: {counts or 'none'}")
    if result.released:
        again = "all delivered again" if result.complete else "not all delivered again"
        print(f"  released    {result.released} on purpose, {again}")
    print(
        f"  answers     {result.acked_ok} offsets acknowledged by the broker, "
        f"{result.acked_failed} failed"
    )
    print(
        f"  timing      joined in {result.join_seconds:.2f} s, first record "
        f"{result.wait_seconds:.2f} s later; total {total:.1f} s"
    )
    if not result.complete:
        print(f"  INCOMPLETE: {plan.records - got} records not received", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
