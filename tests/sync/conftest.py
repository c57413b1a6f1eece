"""Helpers for the blocking clients' tests (sharecon.sync), all blocking code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sharecon.sync import Producer, ShareConsumer

if TYPE_CHECKING:
    from sharecon.record import Record


def produce(bootstrap: str, topic: str, values: list[bytes], **send: Any) -> None:
    """Write ``values`` with the blocking producer and wait for every one."""
    with Producer(bootstrap) as producer:
        futures = [producer.send(topic, v, **send) for v in values]
        for f in futures:
            f.result(timeout=60)


def take(consumer: ShareConsumer[bytes, bytes], n: int, deadline: float = 60) -> list[Record]:
    """``n`` records from ``poll()`` calls (explicit mode: the caller answers them), or
    fewer if ``deadline`` seconds of polling bring no more."""
    import time

    out: list[Record] = []
    end = time.monotonic() + deadline
    while len(out) < n and time.monotonic() < end:
        out.extend(consumer.poll(timeout=1.0, max_records=n - len(out)))
    return out
