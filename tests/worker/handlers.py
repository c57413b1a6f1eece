"""Handlers the worker tests run in real worker processes (``tests.worker.handlers:NAME``).

Each writes one line per call, ``VALUE DELIVERY_COUNT``, to a file of its own process in
the folder named by ``SHARECON_TEST_WORKER_OUT``, so the test can count what was handled
across processes (and across restarts).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from sharecon.record import RetryLater

if TYPE_CHECKING:
    from sharecon.record import Record

OUT_ENV = "SHARECON_TEST_WORKER_OUT"
SLEEP_ENV = "SHARECON_TEST_WORKER_SLEEP"


def _note(kind: str, record: Record) -> None:
    value = (record.value or b"").decode()
    path = Path(os.environ[OUT_ENV]) / f"{kind}-{os.getpid()}.txt"
    # One short append per record: whole lines even when the process is killed.
    with open(path, "a") as f:
        f.write(f"{value} {record.delivery_count}\n")


async def record_id(record: Record) -> None:
    """Handled: noted, then accepted."""
    await anyio.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    _note("handled", record)


def record_id_sync(record: Record) -> None:
    """The same as a synchronous handler (run in a worker thread)."""
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    _note("handled", record)


def started_then_sleeps_sync(record: Record) -> None:
    """Synchronous: noted as started, then sleeps (a handler stuck in a thread)."""
    _note("started", record)
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    _note("handled", record)


async def retry_first(record: Record) -> RetryLater | None:
    """Delivery 1: noted as ``retry``, then retried in 1 s, the ``RetryLater`` returned for
    an even record number and raised for an odd one; later deliveries are handled."""
    if record.delivery_count == 1:
        _note("retry", record)
        if int((record.value or b"r0").decode()[1:]) % 2:
            raise RetryLater(1.0)
        return RetryLater(1.0)
    _note("handled", record)
    return None


async def always_fails(record: Record) -> None:
    """Every attempt is noted, then fails."""
    _note("attempt", record)
    raise RuntimeError("handler always fails")


async def hangs_first_time(record: Record) -> None:
    """Hangs for good on a record's first delivery; handles it on the next."""
    if record.delivery_count == 1:
        _note("hung", record)
        await anyio.sleep_forever()
    _note("handled", record)


async def record_id_and_secrets(record: Record) -> None:
    """Handled, and noted as ``secret-in-environment`` if a secret variable reached this
    worker process (its config comes on stdin; secrets must not be in its environment)."""
    if any(v in os.environ for v in ("SHARECON_TLS_KEY_PASSWORD", "SHARECON_SASL_PASSWORD")):
        _note("secret-in-environment", record)
    _note("handled", record)


async def slow_retry_some(record: Record) -> RetryLater | None:
    """Takes ``SHARECON_TEST_WORKER_SLEEP`` seconds; every 10th record (``r0``, ``r10``,
    ...) is retried in 0.5 s on its first delivery (noted as ``retry``); the rest, and
    later deliveries, are handled."""
    await anyio.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    if record.delivery_count == 1 and int((record.value or b"r0").decode()[1:]) % 10 == 0:
        _note("retry", record)
        return RetryLater(0.5)
    _note("handled", record)
    return None
