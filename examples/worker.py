"""A record handler run by ``sharecon.worker`` in two supervised processes of one group.

Start a broker on localhost:9092 in another terminal (``python -m
sharecon.testing.broker --port 9092``; Ctrl-C stops it), then make a topic with records,
and let the group read from the earliest record (a new share group otherwise starts at
the end of each partition)::

    sharecon topics create invoices --if-not-exists
    for v in order-1 order-2 fail-1 order-3; do echo "$v"; done | sharecon produce invoices
    sharecon groups config billing --set share.auto.offset.reset=earliest

.. doc-test: foreground

Run it (``SHARECON_BOOTSTRAP`` picks another cluster)::

    python examples/worker.py invoices billing

.. doc-test: foreground

or, the same from the shell::

    sharecon worker examples/worker.py:handle --group billing --topic invoices --processes 2

Each record is printed by the process that handled it (one line per record on stdout);
a value starting with ``fail`` raises, so the record is released and delivered again,
and on its third delivery goes to the dead-letter topic ``dlq.billing``. Progress lines
go to stderr. Ctrl-C drains: no new records, those in flight finish, exit 0.
"""

from __future__ import annotations

import os
import sys

import anyio

import sharecon.worker
from sharecon import Record


async def handle(record: Record) -> None:
    """Accepted when it returns; released (or dead-lettered) when it raises."""
    value = record.value or b""
    await anyio.sleep(0.01)  # the work: a call to another service, say
    if value.startswith(b"fail"):
        raise RuntimeError(f"cannot handle {value!r}")
    # One write per line: print() writes the text and the newline separately when
    # stdout is unbuffered, and the processes share stdout.
    sys.stdout.write(
        f"{record.topic}-{record.partition}@{record.offset} {value.decode(errors='replace')} "
        f"(pid {os.getpid()}, delivery {record.delivery_count})\n"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    # The guard matters: each worker process imports this file to find `handle`.
    if len(sys.argv) != 3:
        sys.exit("usage: python examples/worker.py TOPIC GROUP")
    topic, group = sys.argv[1:]
    sys.exit(
        sharecon.worker.run(
            handle,
            group=group,
            topics=[topic],
            processes=2,
            concurrency=8,
            dlq_after=3,
            interval=5.0,
            bootstrap=os.environ.get("SHARECON_BOOTSTRAP", "127.0.0.1:9092"),
        )
    )
