"""The handler of ``benchmarks/worker_spread.py`` (loaded by each worker process by path).

About 25 ms per record (``await anyio.sleep``); every 125th record asks to be retried in
1 s on its first delivery (``RetryLater``). Each call appends ``VALUE DELIVERY`` to a file
of its own process in ``$SPREAD_OUT``, so the benchmark can count who handled what, and
on which delivery the handler first saw each record.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio

from sharecon.record import RetryLater

if TYPE_CHECKING:
    from sharecon.record import Record

#: Seconds per record.
COST = 0.025
#: Every RETRY_EVERY-th record is retried once.
RETRY_EVERY = 125


async def handle(record: Record) -> RetryLater | None:
    """25 ms of waiting; a retry on the first delivery of every 125th record."""
    await anyio.sleep(COST)
    value = (record.value or b"").decode()
    retry = record.delivery_count == 1 and int(value) % RETRY_EVERY == 0
    _note(f"{value} {record.delivery_count} {'retry' if retry else 'done'}\n")
    return RetryLater(1.0) if retry else None


def _note(line: str) -> None:
    # One short append: whole lines even when the process is killed.
    with open(os.path.join(os.environ["SPREAD_OUT"], f"{os.getpid()}.txt"), "a") as f:
        f.write(line)
