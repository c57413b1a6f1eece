"""Run a record handler in several processes of one share group, supervised.

::

    import sharecon.worker

    async def handle(record):          # in myapp/handlers.py
        ...

    if __name__ == "__main__":
        raise SystemExit(sharecon.worker.run("myapp.handlers:handle", group="billing",
                                             topics=["invoices"], processes=4))

Each process runs one :class:`~sharecon.consumer.ShareConsumer` and calls the handler
through :meth:`~sharecon.consumer.ShareConsumer.process`: a record is accepted when the
handler returns and released when it raises (or, with ``dlq_after``, routed to the
dead-letter topic when it raises on that delivery). A synchronous handler runs in a
worker thread. Dead processes are restarted, hung ones replaced, and SIGINT/SIGTERM
drains. The ``sharecon worker`` command is the same from the shell. See docs/worker.md.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from sharecon.worker._config import ENV, WorkerConfig, handler_spec, load_handler, load_toml
from sharecon.worker._supervisor import EXIT_DRAINED, EXIT_ERROR, serve

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "ENV",
    "EXIT_DRAINED",
    "EXIT_ERROR",
    "WorkerConfig",
    "handler_spec",
    "load_handler",
    "load_toml",
    "run",
    "serve",
]


def run(
    handler: Callable[..., object] | str,
    *,
    group: str,
    topics: Iterable[str],
    quiet: bool = False,
    **settings: Any,
) -> int:
    """Run the worker until SIGINT/SIGTERM drains it; returns the exit code (0 drained,
    1 a process failed to drain or could not run, 130/143 killed by a second signal).

    Call it from the main thread (it handles the signals) and, when ``handler`` is defined
    in the script itself, under ``if __name__ == "__main__":`` (each worker process imports
    that script again to find it).

    :param handler: an importable function (not a lambda or a nested function), or its
        path ``"package.module:function"`` / ``"path/to/file.py:function"``.
    :param group: the share group.
    :param topics: topics to subscribe to.
    :param quiet: no status or progress lines (else they go to stderr).
    :param settings: any other :class:`WorkerConfig` field (``processes``,
        ``concurrency``, ``dlq_after``, ``handler_timeout``, ``grace``, ``interval``,
        ``bootstrap``, TLS and SASL settings, ...).
    :raises ConfigError: a wrong setting, or a handler that cannot be imported.
    :raises UnknownTopicOrPartitionError: a topic does not exist.
    """
    config = WorkerConfig(
        handler=handler_spec(handler), group=group, topics=tuple(topics), **settings
    )
    return anyio.run(_serve, config, None if quiet else sys.stderr)


async def _serve(config: WorkerConfig, stream: TextIO | None) -> int:
    return await serve(config, stream=stream)
