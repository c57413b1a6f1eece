"""Helpers for producer tests: read back with librdkafka (confluent-kafka), an independent
client, so our batches are checked by someone else's decoder."""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio
import pytest
from confluent_kafka import Consumer, TopicPartition


@pytest.fixture
def anyio_backend() -> str:
    """Producer tests run under asyncio; the trio one parametrizes this itself."""
    return "asyncio"


@dataclass(frozen=True)
class Read:
    """One record as librdkafka's consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def read_sync(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 60.0
) -> list[Read]:
    """Read every record of ``topic`` from the start until ``expect`` arrived (then a little more,
    so duplicates would show), blocking."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Read] = []
        end = time.monotonic() + timeout
        quiet_until: float | None = None
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(out) >= expect:
                    if quiet_until is None:
                        quiet_until = time.monotonic() + 1.0
                    elif time.monotonic() >= quiet_until:
                        break
                continue
            if msg.error():
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append(
                Read(
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return out
    finally:
        consumer.close()


async def read_back(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 60.0
) -> list[Read]:
    """:func:`read_sync` in a worker thread."""
    return await anyio.to_thread.run_sync(read_sync, bootstrap, topic, partitions, expect, timeout)
