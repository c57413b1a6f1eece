"""One worker process: ``python -m sharecon.worker._child --report-fd N`` (started by the
supervisor).

Protocol with the supervisor (rules of this module):

1. stdin: the first line is ``{"index": N, "config": {...}}`` (JSON); then ``drain``
   lines. A ``drain`` line, end of file (the supervisor is gone), SIGTERM or SIGINT make
   this process drain: fetch no more records, handle the records in flight **and those
   already fetched** (releasing them would spend one of their delivery attempts for
   nothing), within ``grace`` seconds, release what is left after that, close the
   consumer (leaving the group) and exit 0.
2. File descriptor ``N`` (a pipe the supervisor passed down) is the report channel: one
   JSON object per line, every ``REPORT_EVERY`` seconds, with counters, the age of the
   oldest record in flight and ``busy``, the share of handler slots in use since the
   last report (what ``--autoscale`` decides on). stdout and stderr are the supervisor's: what the handler
   prints goes where the worker's own output goes.
3. The process runs in its own session (the supervisor starts it so): a Ctrl-C at the
   terminal reaches only the supervisor, which decides what each child does.
4. Exit codes: 0 drained, 1 error (restarted by the supervisor), 2 bad configuration or
   handler, 3 a topic does not exist (neither is restarted).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.record import RetryLater
from sharecon.worker._config import WorkerConfig, is_async_handler, load_handler
from sharecon.worker._protocol import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    REPORT_EVERY,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sharecon.consumer import ConsumerHealth
    from sharecon.record import Record

logger = logging.getLogger("sharecon.worker")


class Stats:
    """This process's counters, and the records in its handler right now.

    :param concurrency: handler slots (the denominator of ``busy``).
    """

    def __init__(self, concurrency: int = 1) -> None:
        self.concurrency = concurrency
        self.handled = 0
        self.failed = 0
        self.dlq = 0
        self.redelivered = 0
        self.ready = False
        self.draining = False
        #: The consumer's health as ``(ok, reason)``, once it runs.
        self.health: Callable[[], tuple[bool, str]] | None = None
        #: The consumer's counts of attempts spent: ``(expired in the buffer, routed to
        #: the dead-letter topic, released at close without being handed out, dropped
        #: from the buffer with their session or leader)``, once it runs.
        self.spent: Callable[[], tuple[int, int, int, int]] | None = None
        #: Records fetched and handled while draining (finished rather than released).
        self.finished_in_drain = 0
        self._started: dict[int, float] = {}
        self._next = 0
        # Handler-slot seconds used since the last report (integral of in_flight).
        self._busy_since = time.monotonic()
        self._busy_mark = self._busy_since
        self._busy_area = 0.0

    def start_draining(self) -> None:
        """The drain began: records handed out from now on were fetched before it."""
        self.draining = True

    @property
    def in_flight(self) -> int:
        """Records in the handler now."""
        return len(self._started)

    def _account(self, now: float) -> None:
        self._busy_area += len(self._started) * (now - self._busy_mark)
        self._busy_mark = now

    def start(self) -> int:
        """A record enters the handler; returns its token for :meth:`finish`."""
        now = time.monotonic()
        self._account(now)
        self._next += 1
        self._started[self._next] = now
        return self._next

    def finish(self, token: int) -> None:
        """The record of ``token`` left the handler."""
        self._account(time.monotonic())
        self._started.pop(token, None)

    def busy(self) -> float:
        """The share of handler slots in use since the last call (0..1); starts a new period."""
        now = time.monotonic()
        self._account(now)
        elapsed = now - self._busy_since
        area, self._busy_area, self._busy_since = self._busy_area, 0.0, now
        if elapsed <= 0:
            return min(1.0, len(self._started) / self.concurrency)
        return min(1.0, area / (elapsed * self.concurrency))

    def report(self) -> dict[str, Any]:
        """What the supervisor is told."""
        oldest = min(self._started.values(), default=None)
        healthy, why = False, "consumer not started"
        if self.health is not None:
            try:
                healthy, why = self.health()
            except errors.KafkaError as exc:  # closed under us: the report still goes
                healthy, why = False, f"consumer closed: {exc}"
        expired = routed = released = lost = 0
        if self.spent is not None:
            try:
                expired, routed, released, lost = self.spent()
            except errors.KafkaError:  # closed under us: the counts of the last report stand
                pass
        return {
            "expired": expired,
            "released": released,
            "lost": lost,
            "health_ok": healthy,
            "health_reason": why,
            "busy": self.busy(),
            "finished_in_drain": self.finished_in_drain,
            "handled": self.handled,
            "failed": self.failed,
            # Every copy the consumer wrote: after a handler error, and on arrival.
            "dlq": max(self.dlq, routed),
            "redelivered": self.redelivered,
            "in_flight": self.in_flight,
            "oldest": None if oldest is None else time.monotonic() - oldest,
            "ready": self.ready,
            "draining": self.draining,
        }


def health_of(health: ConsumerHealth) -> tuple[bool, str]:
    """``health.ok`` and, when not ok, the first reason it is not (one line)."""
    if health.ok:
        return True, "ok"
    if health.failed is not None:
        return False, f"consumer failed: {health.failed}"
    if not health.running:
        return False, "consumer closing"
    if health.member_state != "stable":
        return False, f"group membership {health.member_state}"
    if not health.cluster.ok:
        return False, f"brokers unreachable: {health.cluster.last_error or 'no connection'}"
    if health.blocked:
        return False, f"partitions not fetched: {'; '.join(health.blocked)}"
    if health.stuck_for:
        return False, f"records stuck at a leader for {health.stuck_for:.0f} s"
    if health.dead_letter_breaker is not None:
        return False, f"dead-letter circuit breaker open: {health.dead_letter_breaker}"
    return False, "not ok"


class Reporter:
    """Writes report lines to the supervisor; a broken pipe means it is gone."""

    def __init__(self, fd: int, on_gone: Callable[[], None]) -> None:
        self._fd = fd
        self._on_gone = on_gone
        self.gone = False

    def send(self, message: dict[str, Any]) -> None:
        """One line (well under PIPE_BUF, so the write is atomic and does not block long)."""
        if self.gone:
            return
        try:
            os.write(self._fd, (json.dumps(message) + "\n").encode())
        except OSError:
            self.gone = True
            self._on_gone()


def wrap_handler(
    handler: Callable[..., object], stats: Stats, dlq_after: int | None
) -> Callable[[Record], Awaitable[object]]:
    """``handler`` as the async callable ``process()`` runs, counting what happens.

    A :class:`~sharecon.RetryLater` the handler raises or returns goes to ``process()``
    as it came (the record is released after its delay); it is neither handled nor
    failed, and is logged.

    While draining, a record ``process()`` still hands out was fetched before the drain
    began (the consumer fetches no more): it is handled like any other, since releasing
    it would cost it a delivery attempt for nothing.
    """
    call: Callable[[Record], Awaitable[object]]
    if is_async_handler(handler):
        call = handler  # type: ignore[assignment]
    else:

        async def call(record: Record) -> object:
            # abandon_on_cancel: a sync handler still running when the grace period ends
            # must not keep the process from closing its consumer; the process exits next.
            return await anyio.to_thread.run_sync(handler, record, abandon_on_cancel=True)

    async def wrapped(record: Record) -> object:
        if stats.draining:
            stats.finished_in_drain += 1
        if record.delivery_count > 1:
            stats.redelivered += 1
        token = stats.start()
        try:
            result = await call(record)
        except RetryLater as retry:
            _retried(record, retry)
            raise
        except Exception as exc:
            stats.failed += 1
            if dlq_after is not None and record.delivery_count >= dlq_after:
                stats.dlq += 1  # process() routes it to the dead-letter topic
            logger.info(
                "%s-%d@%d (delivery %d) failed: %s: %s",
                record.topic,
                record.partition,
                record.offset,
                record.delivery_count,
                type(exc).__name__,
                exc,
            )
            raise
        else:
            if isinstance(result, RetryLater):
                _retried(record, result)
                return result
            stats.handled += 1
            return None
        finally:
            stats.finish(token)

    return wrapped


def _retried(record: Record, retry: RetryLater) -> None:
    logger.info(
        "%s-%d@%d (delivery %d): retry in %g s",
        record.topic,
        record.partition,
        record.offset,
        record.delivery_count,
        retry.delay,
    )


async def serve_child(config: WorkerConfig, index: int, report_fd: int) -> int:
    """Run one worker process until drained; returns its exit code."""
    handler = load_handler(config.handler)
    stats = Stats(config.concurrency)
    drain = anyio.Event()
    reporter = Reporter(report_fd, drain.set)

    async def report_loop() -> None:
        while True:
            reporter.send(stats.report())
            await anyio.sleep(REPORT_EVERY)

    async def control_loop() -> None:
        stdin = sys.stdin.buffer
        while True:
            line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            if not line or line.strip() == b"drain":
                drain.set()
                return

    async def signal_loop() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                drain.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(report_loop)
        tg.start_soon(control_loop)
        tg.start_soon(signal_loop)
        try:
            await _consume(config, handler, stats, drain)
        finally:
            tg.cancel_scope.cancel()
    reporter.send({**stats.report(), "exit": EXIT_OK})
    return EXIT_OK


async def _consume(
    config: WorkerConfig, handler: Callable[..., object], stats: Stats, drain: anyio.Event
) -> None:
    policy = (
        DeadLetterPolicy(max_deliveries=config.dlq_after, topic=config.dlq_topic)
        if config.dlq_after is not None
        else None
    )
    consumer = ShareConsumer(
        config.bootstrap_servers(),
        group_id=config.group,
        topics=list(config.topics),
        max_records=config.max_records,
        acquire_mode=config.acquire_mode,  # type: ignore[arg-type]
        dead_letter=policy,
        # Close must not wait the full request timeout when the broker is gone.
        close_timeout=min(config.timeout, 10.0),
        **config.client_kwargs(),
    )
    wrapped = wrap_handler(handler, stats, config.dlq_after)
    async with consumer:
        stats.ready = True
        stats.health = lambda: health_of(consumer.health())
        stats.spent = lambda: _spent(consumer)
        async with anyio.create_task_group() as work:

            async def run_process() -> None:
                await consumer.process(wrapped, concurrency=config.concurrency)
                drain.set()  # process() ends only when the consumer closes

            work.start_soon(run_process)
            await drain.wait()
            # Fetch no more, and handle what was fetched: releasing a record never started
            # would spend one of its delivery attempts (the broker archives a record after
            # share.delivery.count.limit of them), and under --autoscale drains are routine.
            consumer.stop_fetching()
            stats.start_draining()
            with anyio.move_on_after(config.grace):
                await _until_finished(consumer, stats)
            left = stats.in_flight + _buffered(consumer)
            if left:
                logger.warning(
                    "%d records still in the handler or fetched after the %g s grace period: "
                    "releasing them",
                    left,
                    config.grace,
                )
            # Handlers still running are cancelled: their records are unanswered, and
            # closing the consumer (leaving this block) releases them.
            work.cancel_scope.cancel()


def _spent(consumer: ShareConsumer[Any, Any]) -> tuple[int, int, int, int]:
    """Records whose locks ended in the buffer, records routed to the dead-letter topic,
    records released without being handed out (at close, after the grace period), and
    records dropped from the buffer with their session or leader."""
    health = consumer.health()
    dlq = int(consumer.metrics().dlq_records_total)
    return health.expired_in_buffer, dlq, health.released_unseen, health.lost_unseen


def _buffered(consumer: ShareConsumer[Any, Any]) -> int:
    return int(consumer.metrics().buffered_records)


async def _until_finished(consumer: ShareConsumer[Any, Any], stats: Stats) -> None:
    """Wait until no fetch can bring more records, and every record fetched was handled
    and its answer confirmed (the caller bounds the wait with the grace period)."""
    await consumer.fetching_stopped()
    while True:
        m = consumer.metrics()
        if not (stats.in_flight or m.buffered_records or m.held_records):
            return
        await anyio.sleep(0.05)


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, errors.ConfigError):
        return EXIT_USAGE
    if isinstance(exc, errors.UnknownTopicOrPartitionError | errors.UnknownTopicIdError):
        return EXIT_NOT_FOUND
    return EXIT_ERROR


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups (duck-typed: no
    BaseExceptionGroup builtin before Python 3.11)."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or not inner:
            return exc
        exc = inner[0]


def main() -> None:
    """Entry point; never returns (the process ends with :func:`os._exit`, so threads of
    a sync handler abandoned at the end of the grace period cannot keep it alive)."""
    code = EXIT_ERROR
    prefix = f"sharecon worker [pid {os.getpid()}]"
    try:
        if len(sys.argv) != 3 or sys.argv[1] != "--report-fd":
            raise ValueError("usage: python -m sharecon.worker._child --report-fd N")
        report_fd = int(sys.argv[2])
        hello = json.loads(sys.stdin.buffer.readline())
        config = WorkerConfig.from_dict(hello["config"])
        index = int(hello["index"])
        prefix = f"sharecon worker [process {index}, pid {os.getpid()}]"
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix} %(levelname)s: %(message)s"))
        root = logging.getLogger("sharecon")
        root.addHandler(handler)
        root.setLevel(config.log_level)
        code = anyio.run(serve_child, config, index, report_fd)
    except BaseException as exc:
        leaf = _leaf(exc)
        code = _exit_code(leaf)
        if isinstance(leaf, errors.KafkaError | ValueError | KeyError):
            sys.stderr.write(f"{prefix}: error: {leaf}\n")
        elif not isinstance(leaf, KeyboardInterrupt):
            traceback.print_exception(leaf)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
