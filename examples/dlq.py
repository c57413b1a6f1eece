"""Dead-letter routing: poison records go to a DLQ topic, flaky ones are retried, then routed.

Start a broker on localhost:9092 in another terminal (``python -m
sharecon.testing.broker --port 9092``; Ctrl-C stops it), then make a topic with a few
records, and let the group read from the earliest record (a new share group otherwise
starts at the end of each partition)::

    sharecon topics create invoices --if-not-exists
    for v in order-1 poison-1 flaky-1 order-2; do echo "$v"; done | sharecon produce invoices
    sharecon groups config billing --set share.auto.offset.reset=earliest

and run it; with a count it ends once that many records are finished (accepted, or
dead-lettered), as the broker confirmed; without one it runs until Ctrl-C::

    python examples/dlq.py invoices billing 4

* a value starting with ``b"poison"`` is copied to ``dlq.billing`` and rejected at once;
* a handler that raises releases the record; on its third delivery it is routed to the
  dead-letter topic instead (``DeadLetterPolicy(max_deliveries=3)``).

Then see what arrived and why, and move the records back::

    sharecon dlq inspect dlq.billing
    sharecon dlq replay --from dlq.billing --to invoices
"""

from __future__ import annotations

import os
import sys

import anyio

from sharecon import AckResult, AckType, DeadLetterPolicy, Record, ShareConsumer, errors

MAX_DELIVERIES = 3
#: Answers that finish a record: accepted, or rejected (after its dead-letter copy).
FINISHED = (AckType.ACCEPT, AckType.REJECT)


def finished(results: list[AckResult]) -> int:
    """How many offsets these confirmed answers finished."""
    n = 0
    for result in results:
        if not result.ok:
            continue
        for batch in result.batches:
            if len(batch.types) == 1:
                n += batch.count if batch.types[0] in FINISHED else 0
            else:
                n += sum(1 for t in batch.types if t in FINISHED)
    return n


async def main(topic: str, group: str, limit: int | None) -> None:
    bootstrap = os.environ.get("SHARECON_BOOTSTRAP", "127.0.0.1:9092")
    done = anyio.Event()
    count = 0

    def on_acknowledged(results: list[AckResult]) -> None:
        # The broker's confirmations, so a record counts once its answer (and, for a
        # dead letter, its copy) is really done; releases do not count.
        nonlocal count
        count += finished(results)
        if limit is not None and count >= limit:
            done.set()

    async with ShareConsumer(
        bootstrap,
        group_id=group,
        topics=[topic],
        dead_letter=DeadLetterPolicy(topic=f"dlq.{group}", max_deliveries=MAX_DELIVERIES),
        on_acknowledged=on_acknowledged,
    ) as consumer:

        async def handler(record: Record) -> None:
            value = record.value or b""
            where = f"{record.topic}-{record.partition}@{record.offset}"
            if value.startswith(b"poison"):
                # Copy to the DLQ, then reject; if the copy fails the record is released.
                await consumer.reject_to_dlq(record, reason="poison payload")
                print(f"dead-lettered {where}", flush=True)
            elif value.startswith(b"flaky"):
                if record.delivery_count >= MAX_DELIVERIES:
                    print(f"dead-lettered {where} by the policy (delivery {record.delivery_count})")
                else:
                    print(f"released {where} (delivery {record.delivery_count})", flush=True)
                raise RuntimeError("downstream timeout")  # released; routed on delivery 3
            else:
                print(f"processed {where}: {value!r}", flush=True)

        async with anyio.create_task_group() as tg:

            async def stop_when_done() -> None:
                await done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_when_done)
            await consumer.process(handler, concurrency=4)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: dlq.py TOPIC GROUP [RECORDS]")
    try:
        anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else None)
    except KeyboardInterrupt:
        pass
    except errors.KafkaError as exc:
        sys.exit(f"error: {exc}")
