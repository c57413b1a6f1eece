"""Helpers for consumer tests: a third-party producer (confluent-kafka / librdkafka).

Producing with another implementation also proves our batch decoder against its batches,
for every codec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import pytest
from confluent_kafka import Producer

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from sharecon.errors import KafkaError
    from sharecon.types import TopicPartition


@pytest.fixture
def anyio_backend() -> str:
    """Consumer tests run under asyncio; the trio ones parametrize this themselves."""
    return "asyncio"


@dataclass(frozen=True)
class Produced:
    """One record as the producer's delivery report saw it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes


def produce_sync(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    codec: str = "none",
    key: bytes | None = None,
    partition: int | None = None,
    linger_ms: int = 5,
) -> list[Produced]:
    """Produce ``values`` with librdkafka and return where each landed (blocking).

    ``linger_ms``: a test that needs its records in one producer batch sets it well above
    the time to queue them (``flush()`` sends at once); 5 ms can split them on a busy
    machine.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": linger_ms,
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    out: list[Produced] = []
    failures: list[str] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            out.append(Produced(msg.partition(), msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        kwargs: dict[str, object] = {"value": value, "key": key if key is not None else b"k%d" % i}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, on_delivery=report, **kwargs)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not failures, f"produce failed: {failures or remaining}"
    return out


async def produce(
    bootstrap: str, topic: str, values: list[bytes], **kwargs: object
) -> list[Produced]:
    """:func:`produce_sync` in a worker thread, so the event loop keeps running."""
    return await anyio.to_thread.run_sync(lambda: produce_sync(bootstrap, topic, values, **kwargs))  # type: ignore[arg-type]


def assert_clean_commit(
    verdict: Mapping[TopicPartition, KafkaError | None],
    must_name: Collection[TopicPartition],
    may_name: Collection[TopicPartition] = (),
) -> None:
    """``commit()`` succeeded for the partitions that had answers pending.

    ``all(err is None ...)`` alone passes on an empty verdict, so this also checks that the
    verdict names every partition of ``must_name`` and nothing outside ``may_name``.
    """
    assert verdict, "commit() returned an empty verdict"
    assert set(must_name) <= set(verdict), f"commit() verdict {verdict} lacks {set(must_name)}"
    assert set(verdict) <= set(must_name) | set(may_name), f"unexpected partitions in {verdict}"
    assert all(err is None for err in verdict.values()), verdict
