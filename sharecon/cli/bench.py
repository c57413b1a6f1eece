"""``sharecon bench``: a consume-throughput measurement against a given cluster.

A self-contained, smaller cousin of ``benchmarks/consume.py`` (which needs the source
tree): produce N records into a fresh topic with sharecon's Producer, then consume them
all through a fresh share group with ShareConsumer (implicit acks, so every record is
accepted), and report records/s and MB/s. ``--compare-confluent`` runs librdkafka's
ShareConsumer (confluent-kafka) on the same records through another fresh group.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sharecon.cli._clients import make_admin, make_consumer, make_producer, set_earliest
from sharecon.cli._common import CliError, ExitCode, positive_int, print_table
from sharecon.cli._progress import Progress
from sharecon.producer import ProducerRecord

if TYPE_CHECKING:
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]

# The --help text: the module docstring is reST (``code``), which a terminal shows as is.
_DESCRIPTION = """\
A consume-throughput measurement against a given cluster: produce N records of random
bytes into a fresh topic with sharecon's Producer, then consume them all through a fresh
share group with ShareConsumer (implicit acks, so every record is accepted), and report
records/s and MB/s for each step. --compare-confluent also consumes the same records with
librdkafka's ShareConsumer (confluent-kafka) through another fresh group.

A smaller cousin of benchmarks/consume.py in the source tree, which also runs Kafka's
Java tool and measures memory.
"""

_EPILOG = """\
examples:
  sharecon bench --bootstrap kafka:9092 --records 200000 --size 100
  sharecon bench --records 50000 --size 1024 --partitions 6 --compression lz4 --json
  sharecon bench --compare-confluent     # needs `pip install confluent-kafka`

The topic (bench-<random>) is deleted afterwards unless --keep-topic. The first share
group on a fresh broker pays for creating the share-state topic; run bench twice on a
new cluster for steady figures.
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add ``bench`` to the command tree."""
    p = sub.add_parser(
        "bench",
        parents=parents,
        help="measure produce and share-consume throughput against a cluster",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-n", "--records", type=positive_int, default=100_000, help="records (default 100000)"
    )
    p.add_argument(
        "-s", "--size", type=positive_int, default=100, help="value size in bytes (default 100)"
    )
    p.add_argument(
        "-p", "--partitions", type=positive_int, default=3, help="topic partitions (default 3)"
    )
    p.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        default="none",
        help="producer compression (default none)",
    )
    p.add_argument(
        "--max-records",
        type=positive_int,
        default=2000,
        help="ShareConsumer max_records per fetch (default 2000)",
    )
    p.add_argument(
        "--compare-confluent",
        action="store_true",
        help="also consume with confluent-kafka's ShareConsumer (librdkafka)",
    )
    p.add_argument("--keep-topic", action="store_true", help="do not delete the topic afterwards")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.set_defaults(func=run)


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


async def _produce(options: ClientOptions, args: argparse.Namespace, topic: str) -> float:
    # Random bytes (per chunk, repeated) so compression has realistic work to do.
    chunk = 5000
    value = os.urandom(args.size)
    start = time.perf_counter()
    async with make_producer(options, compression=args.compression, linger=0.02) as producer:
        with Progress("producing", total=args.records, enabled=not args.quiet) as bar:
            sizes = [min(chunk, args.records - i) for i in range(0, args.records, chunk)]
            # A few chunks in flight at once, so batches keep filling while others travel.
            limiter = anyio.CapacityLimiter(4)

            async def send(n: int) -> None:
                async with limiter:
                    await producer.send_batch(ProducerRecord(topic, value) for _ in range(n))
                    bar.advance(n)

            async with anyio.create_task_group() as tg:
                for n in sizes:
                    tg.start_soon(send, n)
    return time.perf_counter() - start


async def _consume_sharecon(
    options: ClientOptions, args: argparse.Namespace, topic: str, group: str
) -> dict[str, float]:
    count = nbytes = 0
    first = last = 0.0
    start = time.perf_counter()
    consumer = make_consumer(
        options, group=group, topics=[topic], max_records=args.max_records, ack_mode="implicit"
    )
    async with consumer:
        with Progress("consuming (sharecon)", total=args.records, enabled=not args.quiet) as bar:
            while count < args.records:
                with anyio.move_on_after(options.timeout) as scope:
                    batch = await consumer.poll(None)
                if scope.cancelled_caught:
                    raise CliError(
                        f"no records for {options.timeout:g} s after {count} of {args.records}",
                        ExitCode.KAFKA,
                    )
                if not count:
                    first = time.perf_counter()
                count += len(batch)
                for r in batch:
                    nbytes += len(r.value or b"")
                bar.advance(len(batch))
            last = time.perf_counter()
        await consumer.commit()
    elapsed = time.perf_counter() - start
    return _result(count, nbytes, elapsed, last - first)


def _result(count: int, nbytes: int, elapsed: float, steady: float) -> dict[str, float]:
    return {
        "records": count,
        "bytes": nbytes,
        "seconds": elapsed,
        "records_per_s": _rate(count, elapsed),
        "mb_per_s": _rate(nbytes / 1e6, elapsed),
        "steady_records_per_s": _rate(count, steady),
    }


def _consume_confluent(
    options: ClientOptions, args: argparse.Namespace, topic: str, group: str
) -> dict[str, float]:
    from confluent_kafka import ShareConsumer as RdShareConsumer

    config: dict[str, Any] = {"bootstrap.servers": options.bootstrap, "group.id": group}
    start = time.perf_counter()
    consumer = RdShareConsumer(config)
    consumer.subscribe([topic])
    count = nbytes = 0
    first = 0.0
    deadline = time.monotonic() + max(options.timeout, 60.0)
    try:
        while count < args.records:
            if time.monotonic() > deadline:
                raise CliError(
                    f"confluent-kafka: only {count} of {args.records} records arrived",
                    ExitCode.KAFKA,
                )
            for msg in consumer.poll(1.0):
                if msg.error() is None:
                    if not count:
                        first = time.perf_counter()
                    count += 1
                    nbytes += len(msg.value() or b"")
        last = time.perf_counter()
        consumer.commit_sync()
    finally:
        consumer.close()
    return _result(count, nbytes, time.perf_counter() - start, last - first)


async def run(args: argparse.Namespace, options: ClientOptions) -> int:
    """Produce, consume, report; see the subcommand's help."""
    if args.compare_confluent:
        if options.sasl is not None or options.ssl_context is not None or options.config:
            raise CliError("--compare-confluent supports plaintext clusters only", ExitCode.USAGE)
        try:
            import confluent_kafka

            if not hasattr(confluent_kafka, "ShareConsumer"):
                raise ImportError("no ShareConsumer")
        except ImportError:
            raise CliError(
                "--compare-confluent needs confluent-kafka with ShareConsumer "
                "(pip install 'confluent-kafka>=2.12')",
                ExitCode.USAGE,
            ) from None
    tag = uuid.uuid4().hex[:8]
    topic = f"bench-{tag}"
    results: dict[str, Any] = {
        "records": args.records,
        "size": args.size,
        "partitions": args.partitions,
        "compression": args.compression,
        "topic": topic,
    }
    async with make_admin(options) as admin:
        await admin.create_topics([topic], num_partitions=args.partitions)
        try:
            produce_s = await _produce(options, args, topic)
            results["produce"] = _result(
                args.records, args.records * args.size, produce_s, produce_s
            )
            group = f"bench-sharecon-{tag}"
            await set_earliest(admin, group)
            results["sharecon"] = await _consume_sharecon(options, args, topic, group)
            if args.compare_confluent:
                group = f"bench-confluent-{tag}"
                await set_earliest(admin, group)
                results["confluent-kafka"] = await anyio.to_thread.run_sync(
                    _consume_confluent, options, args, topic, group
                )
        finally:
            if not args.keep_topic:
                with anyio.CancelScope(shield=True):
                    await admin.delete_topics([topic], missing_ok=True)
    if args.json:
        sys.stdout.write(json.dumps(results) + "\n")
        return ExitCode.OK
    rows = []
    for name in ("produce", "sharecon", "confluent-kafka"):
        r = results.get(name)
        if r is None:
            continue
        label = "produce (sharecon)" if name == "produce" else f"consume ({name})"
        rows.append(
            (
                label,
                f"{r['records']:,}",
                f"{r['seconds']:.2f}",
                f"{r['records_per_s']:,.0f}",
                f"{r['mb_per_s']:.1f}",
                "-" if name == "produce" else f"{r['steady_records_per_s']:,.0f}",
            )
        )
    sys.stdout.write(
        f"{args.records:,} records of {args.size} B, {args.partitions} partition(s), "
        f"compression {args.compression}, against {options.bootstrap}\n"
    )
    print_table(("STEP", "RECORDS", "SECONDS", "RECORDS/S", "MB/S", "STEADY RECORDS/S"), rows)
    sys.stdout.write(
        "(consume seconds include joining the group; steady = from the first record on)\n"
    )
    return ExitCode.OK
