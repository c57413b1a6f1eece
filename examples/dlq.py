"""Dead-letter routing: poison records go to a DLQ topic, flaky ones are retried, then routed.

Run a local broker (``python -m sharecon.testing.broker --port 9092``), create the
topic and give the group ``share.auto.offset.reset=earliest``, then::

    SHARECON_BOOTSTRAP=127.0.0.1:9092 python examples/dlq.py invoices billing

* a value starting with ``b"poison"`` is copied to ``dlq.billing`` and rejected at once;
* a handler that raises releases the record; on its third delivery it is routed to the
  dead-letter topic instead (``DeadLetterPolicy(max_deliveries=3)``);
* ``sharecon dlq inspect --topic dlq.billing`` shows what arrived and why, and
  ``sharecon dlq replay --from dlq.billing --to invoices`` moves records back.
"""

from __future__ import annotations

import os
import sys

import anyio

from sharecon import DeadLetterPolicy, Record, ShareConsumer, errors


class PoisonError(Exception):
    """The record can never be processed."""


async def main(topic: str, group: str, limit: int | None) -> None:
    bootstrap = os.environ.get("SHARECON_BOOTSTRAP", "127.0.0.1:9092")
    done = anyio.Event()
    handled = 0

    async with ShareConsumer(
        bootstrap,
        group_id=group,
        topics=[topic],
        dead_letter=DeadLetterPolicy(topic=f"dlq.{group}", max_deliveries=3),
    ) as consumer:

        async def handler(record: Record) -> None:
            nonlocal handled
            value = record.value or b""
            if value.startswith(b"poison"):
                # Copy to the DLQ, then reject; if the copy fails the record is released.
                await consumer.reject_to_dlq(record, reason="poison payload")
                print(f"dead-lettered {record.topic}-{record.partition}@{record.offset}")
            elif value.startswith(b"flaky"):
                raise RuntimeError("downstream timeout")  # released; routed on delivery 3
            else:
                print(f"processed {record.topic}-{record.partition}@{record.offset}: {value!r}")
            handled += 1
            if limit is not None and handled >= limit:
                done.set()

        async with anyio.create_task_group() as tg:

            async def stop_when_done() -> None:
                await done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_when_done)
            await consumer.process(handler, concurrency=4)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: dlq.py TOPIC GROUP [MAX_RECORDS]")
    try:
        anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else None)
    except KeyboardInterrupt:
        pass
    except errors.KafkaError as exc:
        sys.exit(f"error: {exc}")
