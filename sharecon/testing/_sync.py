"""Run sharecon clients to completion from synchronous test-support code."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import anyio

from sharecon.admin import Admin
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing.tools import ProduceResult

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")


def run_sync(main: Callable[[], Awaitable[T]], timeout: float) -> T:
    """Run ``main()`` under ``anyio.run`` in a private thread and return its result.

    The private thread owns the event loop, so this works whether or not the caller itself
    runs in one (anyio's pytest plugin, trio, plain asyncio).
    """

    async def bounded() -> T:
        with anyio.fail_after(timeout):
            return await main()

    with ThreadPoolExecutor(1, thread_name_prefix="sharecon-testing") as pool:
        return pool.submit(anyio.run, bounded).result(timeout=timeout + 30)


def with_admin(bootstrap: str, call: Callable[[Admin], Awaitable[T]], timeout: float = 60.0) -> T:
    """Connect an :class:`~sharecon.admin.Admin` to ``bootstrap``, await ``call(admin)``, close."""

    async def main() -> T:
        async with Admin(bootstrap) as admin:
            return await call(admin)

    return run_sync(main, timeout)


def produce_random(
    bootstrap: str, topic: str, n: int, *, record_size: int = 100, timeout: float = 300.0
) -> ProduceResult:
    """Write ``n`` keyless records of ``record_size`` random bytes with sharecon's Producer.

    ``acks=all``, like ``kafka-producer-perf-test``: what the ``produce_records`` fixture
    uses when there is no local Java.
    """
    # One random block sliced per record: distinct values without n calls to urandom.
    pool = os.urandom(record_size * min(n, 1000) + record_size)

    async def main() -> int:
        async with Producer(bootstrap, acks="all") as producer:
            records = [
                ProducerRecord(topic, pool[(i % 1000) : (i % 1000) + record_size]) for i in range(n)
            ]
            return len(await producer.send_batch(records))

    started = time.monotonic()
    written = run_sync(main, timeout)
    elapsed = time.monotonic() - started
    return ProduceResult(records=written, records_per_sec=written / elapsed, elapsed=elapsed)
