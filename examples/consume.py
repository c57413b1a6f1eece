"""Consume a topic through a share group, answering each record.

Start a broker on localhost:9092 in another terminal (``python -m
sharecon.testing.broker --port 9092``; Ctrl-C stops it). A new share group starts at the
*end* of each partition, so records written before it first joined are never delivered
to it; to read from the earliest record, set the group's ``share.auto.offset.reset`` to
``earliest`` before it first consumes (the CLI below, or
``Admin.alter_group_config("billing", {"share.auto.offset.reset": "earliest"})``)::

    sharecon topics create invoices --if-not-exists
    sharecon groups config billing --set share.auto.offset.reset=earliest
    for v in order-1 order-2 poison order-3; do echo "$v"; done | sharecon produce invoices

.. doc-test: foreground

Then consume (Ctrl-C stops it; ``SHARECON_BOOTSTRAP`` picks another cluster)::

    python examples/consume.py invoices billing

Records whose value is ``b"poison"`` are rejected (archived); handler errors release the
record so that it is delivered again (to this or another member), up to the group's
delivery-count limit.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
import anyio.lowlevel

from sharecon import ShareConsumer, errors


class PoisonError(Exception):
    """The record can never be processed."""


async def handle(value: bytes | None) -> None:
    if value == b"poison":
        raise PoisonError("unprocessable payload")
    await anyio.lowlevel.checkpoint()  # real work goes here


async def main(topic: str, group: str) -> None:
    bootstrap = os.environ.get("SHARECON_BOOTSTRAP", "127.0.0.1:9092")
    async with ShareConsumer(
        bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        async for record in consumer:
            try:
                await handle(record.value)
            except PoisonError:
                record.reject()
            except Exception:
                logging.exception("handler failed; releasing offset %d", record.offset)
                record.release()
            else:
                record.accept()
            print(
                f"{record.topic}-{record.partition}@{record.offset} "
                f"(delivery {record.delivery_count})",
                flush=True,
            )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    if len(sys.argv) != 3:
        sys.exit("usage: consume.py TOPIC GROUP")
    try:
        anyio.run(main, sys.argv[1], sys.argv[2])
    except KeyboardInterrupt:
        pass
    except errors.KafkaError as exc:
        sys.exit(f"error: {exc}")
