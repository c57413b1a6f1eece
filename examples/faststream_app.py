"""A FastStream service on a share group: typed orders in, invoices out, bad orders
dead-lettered (the ``faststream`` extra).

Start a broker on localhost:9092 in another terminal (``python -m
sharecon.testing.broker --port 9092``; Ctrl-C stops it), make the topics, and let the
group read from the earliest record (a new share group otherwise starts at the end)::

    sharecon topics create orders --if-not-exists
    sharecon topics create invoices --if-not-exists
    sharecon groups config billing --set share.auto.offset.reset=earliest
    echo '{"id": 1, "total": 9.5}' | sharecon produce orders
    echo '{"id": 2, "total": -1}' | sharecon produce orders

.. doc-test: foreground

Then run it (Ctrl-C stops it: the handlers finish what was fetched, the rest is
released, the producer is flushed)::

    python examples/faststream_app.py

* each order is decoded into ``Order`` and billed once: an invoice goes to ``invoices``;
* an order with a negative total raises: the record is released, delivered again, and on
  its third delivery copied to ``dlq.billing`` and rejected
  (``DeadLetterPolicy(max_deliveries=3)``);
* ``SHARECON_BOOTSTRAP`` overrides ``localhost:9092``.
"""

from __future__ import annotations

import asyncio
import os

from faststream import FastStream
from pydantic import BaseModel

from sharecon import DeadLetterPolicy
from sharecon.faststream import ShareBroker

# At run time: FastStream reads the handler's annotations to inject the message.
from sharecon.faststream.annotations import ShareMessage  # noqa: TC001


class Order(BaseModel):
    id: int
    total: float


class Invoice(BaseModel):
    order: int
    amount: float


broker = ShareBroker(os.environ.get("SHARECON_BOOTSTRAP", "localhost:9092"))
app = FastStream(broker)


@broker.subscriber(
    "orders",
    group_id="billing",
    max_workers=4,
    dead_letter=DeadLetterPolicy(max_deliveries=3),
)
@broker.publisher("invoices")
async def bill(order: Order, msg: ShareMessage) -> Invoice:
    print(f"order {order.id} (delivery {msg.delivery_count})", flush=True)
    if order.total < 0:
        raise ValueError(f"order {order.id}: negative total")
    return Invoice(order=order.id, amount=order.total)


@app.after_startup
async def ready() -> None:
    print("billing: consuming orders", flush=True)


if __name__ == "__main__":
    asyncio.run(app.run())
