"""sharecon for blocking code: :class:`ShareConsumer`, :class:`Producer` and :class:`Admin`
without ``async``/``await``, for threads, scripts, notebooks, Django or Flask workers.

::

    from sharecon.sync import ShareConsumer

    with ShareConsumer("localhost:9092", group_id="billing", topics=["invoices"]) as consumer:
        for record in consumer:
            handle(record)          # accepted when the loop moves on

Each client runs the async client of the same name unchanged on an event-loop thread of
its own, started by ``with`` and stopped when it is left: the rules are the same, and so
are the errors, raised in the calling thread with their own types. See docs/sync.md.
"""

from __future__ import annotations

from sharecon.sync._admin import Admin
from sharecon.sync._consumer import ShareConsumer
from sharecon.sync._producer import Producer, SendFuture

__all__ = ["Admin", "Producer", "SendFuture", "ShareConsumer"]
