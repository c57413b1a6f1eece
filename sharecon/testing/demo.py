"""``scripts/demo``: a live Kafka broker with share groups, records in, records out.

Steps: fetch the broker's jars (first run only), start it, show that it offers share
groups, create a topic, produce records with Kafka's perf producer, then consume them
through a share group with sharecon's consumer (once it exists), and stop the broker.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import Any

import anyio

from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    BrokerStartError,
    cache_root,
    provision,
)
from sharecon.testing.broker import KafkaBroker
from sharecon.testing.probe import share_support
from sharecon.testing.tools import KafkaToolError

__all__ = ["main"]

TOPIC = "demo-orders"
GROUP = "demo-billing"


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument(
        "--version", default=DEFAULT_KAFKA_VERSION, help="Kafka version (default %(default)s)"
    )
    parser.add_argument(
        "--records", type=int, default=5000, help="records to produce (default %(default)s)"
    )
    args = parser.parse_args(argv)
    try:
        return _run(args.version, args.records)
    except (BrokerStartError, KafkaToolError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; broker stopped", file=sys.stderr)
        return 130


def _run(version: str, records: int) -> int:
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

        support = share_support(broker.bootstrap)
        apis = ", ".join(f"{name} v{lo}-{hi}" for name, (lo, hi) in support.apis.items())
        state = "ENABLED" if support.enabled else "NOT enabled"
        _step(
            f"share groups {state}: share.version={support.share_version} (broker supports up to {support.share_version_max})"
        )
        print(f"    {apis}")
        if not support.enabled:
            return 1

        _step(f"topic {TOPIC!r} (3 partitions), group {GROUP!r} reading from the earliest record")
        broker.tools.create_topic(TOPIC, 3)
        broker.tools.alter_group_config(GROUP, {"share.auto.offset.reset": "earliest"})

        _step(f"producing {records} records with kafka-producer-perf-test")
        produced = broker.tools.produce(TOPIC, records, record_size=100)
        print(f"    {produced.records} records, {produced.records_per_sec:,.0f} records/s")

        consumer_module = _consumer_module()
        if consumer_module is None:
            _step("sharecon's ShareConsumer has not landed yet: the demo stops here")
            consumed = None
        else:
            _step(f"consuming through share group {GROUP!r} with sharecon")
            consumed = anyio.run(_consume, consumer_module, broker.bootstrap, records)
        _step("stopping the broker")

    print()
    print("summary")
    print(f"  Kafka {install.version} at 127.0.0.1, share.version={support.share_version}")
    print(f"  produced {produced.records} records into {TOPIC!r}")
    if consumed is not None:
        count, seconds = consumed
        print(f"  consumed {count} records through share group {GROUP!r} in {seconds:.1f} s")
    print(f"  total {time.monotonic() - started:.1f} s")
    return 0 if consumed is None or consumed[0] == records else 1


def _consumer_module() -> Any | None:
    try:
        module = importlib.import_module("sharecon.consumer")
    except ImportError:
        return None
    return module if hasattr(module, "ShareConsumer") else None


async def _consume(module: Any, bootstrap: str, expected: int) -> tuple[int, float]:
    started = time.monotonic()
    count = 0
    bar = _Progress(expected)
    with anyio.move_on_after(120):
        async with module.ShareConsumer(bootstrap, group_id=GROUP, topics=[TOPIC]) as consumer:
            async for _record in consumer:
                count += 1
                bar.update(count)
                if count >= expected:
                    break
    bar.done(count)
    return count, time.monotonic() - started


class _Progress:
    """A one-line progress bar on a terminal; a few plain lines otherwise."""

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
            filled = pct * 30 // 100
            rate = n / max(time.monotonic() - self.started, 1e-6)
            sys.stdout.write(
                f"\r    [{'#' * filled}{'.' * (30 - filled)}] {n}/{self.total} {rate:,.0f}/s"
            )
            sys.stdout.flush()
        elif pct % 25 == 0 and pct > 0:
            print(f"    {n}/{self.total} records", flush=True)

    def done(self, n: int) -> None:
        if self.tty:
            sys.stdout.write("\n")
        print(f"    received {n} of {self.total}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
