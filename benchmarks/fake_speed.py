"""FakeKafka's speed: how long a fake takes to start, and a 1,000-record round.

The figures ``docs/testing.md`` quotes ("Speed") come from here, not from the tests: the
tests assert what the fake does, never how fast. Each figure is measured ``--repeat``
times in this one process (client and fake share it); CPU time is the process's (both
threads), wall time is ``time.perf_counter``. Two rounds are timed: implicit answers,
and explicit answers with a final ``commit()`` (whose close waits out the fetch left at
the broker, up to ``max_wait_ms``), the latter also with ``max_wait_ms=50``.

::

    python benchmarks/fake_speed.py --repeat 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from sharecon import Producer, ProducerRecord, ShareConsumer
from sharecon.testing.fake import FakeKafka

EARLIEST = {"share.auto.offset.reset": "earliest"}


def start_stop() -> tuple[float, float]:
    """CPU and wall seconds to start one fake."""
    c0, w0 = time.process_time(), time.perf_counter()
    fake = FakeKafka()
    fake.start()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    fake.stop()
    return cpu, wall


async def round_trip(explicit: bool, max_wait_ms: int | None) -> tuple[float, float]:
    """CPU and wall seconds to produce, consume and answer 1,000 records of 100 B."""
    async with FakeKafka() as fake:
        fake.create_topic("speed")
        fake.configure_group("g", EARLIEST)
        c0, w0 = time.process_time(), time.perf_counter()
        async with Producer(fake.bootstrap) as p:
            await p.send_batch([ProducerRecord("speed", b"x" * 100) for _ in range(1000)])
        options: dict[str, object] = {"ack_mode": "explicit"} if explicit else {}
        if max_wait_ms is not None:
            options["max_wait_ms"] = max_wait_ms
        got = 0
        async with ShareConsumer(fake.bootstrap, group_id="g", topics=["speed"], **options) as c:  # type: ignore[arg-type]
            while got < 1000:
                batch = await c.poll(5)
                got += len(batch)
                if explicit:
                    for r in batch:
                        r.accept()
            await c.commit()
        return time.process_time() - c0, time.perf_counter() - w0


def _show(name: str, runs: list[tuple[float, float]]) -> None:
    cpu = [c for c, _ in runs]
    wall = [w for _, w in runs]
    print(
        f"{name:<44} wall {min(wall) * 1000:7.1f} to {max(wall) * 1000:7.1f} ms "
        f"(median {statistics.median(wall) * 1000:.1f}), CPU min {min(cpu) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    _show("start", [start_stop() for _ in range(args.repeat)])
    for name, explicit, wait in (
        ("1,000 records, implicit answers", False, None),
        ("1,000 records, explicit + commit()", True, None),
        ("1,000 records, explicit + commit(), 50 ms wait", True, 50),
    ):
        _show(name, [asyncio.run(round_trip(explicit, wait)) for _ in range(args.repeat)])


if __name__ == "__main__":
    main()
