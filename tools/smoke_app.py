"""The release smoke test's user program: what a user does first with an installed sharecon.

``scripts/release`` installs each artifact into a fresh virtual environment (no compiler on
``PATH``, no build tools), then runs this file there against a real broker::

    python smoke_app.py BOOTSTRAP EXPECT_COMPILED

and type-checks it with ``mypy --strict`` against that environment's sharecon. It imports
nothing from the checkout and nothing of sharecon's test kit: only the public API.

It produces four records, consumes them in explicit mode answering each one a different
way (accept; release, then accept the redelivery; reject; copy to the dead-letter topic),
waits for the broker's verdicts, then reads the dead-letter copy back from its topic.
"""

from __future__ import annotations

import sys
import uuid

import anyio

import sharecon
from sharecon import (
    AckResult,
    AckType,
    Admin,
    DeadLetterPolicy,
    Producer,
    Record,
    ShareConsumer,
)
from sharecon.dlq import dead_letter_info

#: Each value names what the consumer does with it.
VALUES = (b"accept", b"release", b"reject", b"dlq")
#: The broker's verdicts expected once everything is finished.
FINISHED = {AckType.ACCEPT: 2, AckType.REJECT: 2, AckType.RELEASE: 1}
DEADLINE_S = 60.0


def confirmed(results: list[AckResult], into: dict[AckType, int]) -> None:
    """Count the offsets the broker confirmed, per answer type."""
    for result in results:
        if not result.ok:
            raise SystemExit(f"the broker refused an answer: {result}")
        for batch in result.batches:
            types = batch.types if len(batch.types) > 1 else batch.types * batch.count
            for ack in types:
                into[ack] = into.get(ack, 0) + 1


async def produce(bootstrap: str, topic: str) -> None:
    """Send the four records and check where the broker put them."""
    async with Producer(bootstrap) as producer:
        for i, value in enumerate(VALUES):
            meta = await producer.send_and_wait(topic, value, key=b"k%d" % i)
            if (meta.topic, meta.partition, meta.offset) != (topic, 0, i):
                raise SystemExit(f"record {value!r} landed at {meta}")


async def consume(bootstrap: str, topic: str, group: str, dlq: str) -> dict[bytes, list[int]]:
    """Answer each record as its value says; return each value's delivery counts."""
    verdicts: dict[AckType, int] = {}
    seen: dict[bytes, list[int]] = {}
    done = anyio.Event()

    def on_acknowledged(results: list[AckResult]) -> None:
        confirmed(results, verdicts)
        if verdicts == FINISHED:
            done.set()

    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap,
        group_id=group,
        topics=[topic],
        ack_mode="explicit",
        dead_letter=DeadLetterPolicy(topic=dlq, use_broker_dlq=False),
        on_acknowledged=on_acknowledged,
    )
    async with consumer:
        with anyio.fail_after(DEADLINE_S):
            async for record in consumer:
                await answer(consumer, record)
                seen.setdefault(record.value or b"", []).append(record.delivery_count)
                if sum(len(v) for v in seen.values()) == len(VALUES) + 1:
                    break
            await consumer.commit()
            await done.wait()
    return seen


async def answer(consumer: ShareConsumer[bytes, bytes], record: Record[bytes, bytes]) -> None:
    """Accept, release once, reject, or dead-letter ``record``, as its value says."""
    if record.value == b"accept":
        consumer.acknowledge(record, AckType.ACCEPT)
    elif record.value == b"release":
        first = record.delivery_count == 1
        consumer.acknowledge(record, AckType.RELEASE if first else AckType.ACCEPT)
    elif record.value == b"reject":
        consumer.acknowledge(record, AckType.REJECT)
    elif record.value == b"dlq":
        await consumer.reject_to_dlq(record, reason="smoke test")
    else:
        raise SystemExit(f"unexpected record {record!r}")


async def read_dead_letter(bootstrap: str, dlq: str, group: str, topic: str) -> None:
    """The dead-letter topic holds the copy, with headers naming where it came from."""
    async with ShareConsumer(bootstrap, group_id=f"{group}-dlq", topics=[dlq]) as consumer:
        with anyio.fail_after(DEADLINE_S):
            async for record in consumer:
                info = dead_letter_info(record.headers)
                if record.value != b"dlq" or info is None:
                    raise SystemExit(f"unexpected dead letter {record!r}")
                if (info.topic, info.offset, info.group, info.reason) != (
                    topic,
                    3,
                    group,
                    "smoke test",
                ):
                    raise SystemExit(f"dead letter headers say {info}")
                return


async def main(bootstrap: str, expect_compiled: bool) -> None:
    """Run the smoke test against ``bootstrap``."""
    if sharecon.COMPILED is not expect_compiled:
        raise SystemExit(f"sharecon.COMPILED is {sharecon.COMPILED}, expected {expect_compiled}")
    run = uuid.uuid4().hex[:8]
    topic, group, dlq = f"smoke-{run}", f"smoke-{run}", f"smoke-{run}.dlq"
    async with Admin(bootstrap) as admin:
        await admin.create_topics([topic, dlq])
        for g in (group, f"{group}-dlq"):
            await admin.alter_group_config(g, {"share.auto.offset.reset": "earliest"})
    await produce(bootstrap, topic)
    seen = await consume(bootstrap, topic, group, dlq)
    expected = {b"accept": [1], b"release": [1, 2], b"reject": [1], b"dlq": [1]}
    if seen != expected:
        raise SystemExit(f"delivery counts {seen}, expected {expected}")
    await read_dead_letter(bootstrap, dlq, group, topic)
    build = "compiled" if sharecon.COMPILED else "pure"
    print(f"smoke ok: sharecon {sharecon.__version__} ({build}) on Python {sys.version.split()[0]}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("0", "1"):
        sys.exit("usage: smoke_app.py BOOTSTRAP EXPECT_COMPILED(0|1)")
    anyio.run(main, sys.argv[1], sys.argv[2] == "1")
