"""``reject_to_dlq``: copy one record to the dead-letter topic, then reject it.

Rules of this module:

1. Nothing is lost: the original is rejected only once the copy is acknowledged; a copy
   that cannot be written gives the record back (released) and raises.
2. A failure that may pass is tried again while the record's lock lasts
   (:mod:`sharecon._share.dead_letter_retry` decides the waits); each release would spend
   a delivery attempt, a retry spends none.
3. A dead-letter topic that cannot be written (:class:`~sharecon.errors.DeadLetterTopicError`)
   stops the consumer: routing anything else would fail the same way.
4. A record whose lock this consumer lost gets no copy (the broker delivers it again; a
   copy now would be a duplicate): the reject is reported as lost, never raised.

It takes the few things it uses (the core's machine-side reads, a :class:`Router`, and
the consumer's own ``acknowledge``), so the consumer's ``reject_to_dlq()``, its
dead-letter routing job and ``process()`` share one copy of these rules. The router and
the error wrapping are the public layer's (:class:`sharecon.dlq.DeadLetterRouter`,
:func:`sharecon.dlq.routing_error`), which this layer may not import: the consumer
hands them in, with the retry rule (:func:`sharecon._share.dead_letter_retry.retry_in`,
which the whole-client simulation replaces in ``sharecon.consumer`` to plant a bug).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from sharecon import errors
from sharecon._share.dead_letter_retry import stub_next
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup, TaskStatus

    from sharecon._consumer.handout import Handout
    from sharecon._stats import ConsumerStats
    from sharecon.record import Record

__all__ = ["RejectPort", "RetryIn", "Router", "RoutingError", "reject_to_dlq", "release_quietly"]


class RejectPort(Protocol):
    """What ``reject_to_dlq`` uses of its consumer (``ConsumerCore`` has all of it)."""

    @property
    def handout(self) -> Handout:
        """Whether the record is still held."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer (rule 3)."""
        ...

    @property
    def tg(self) -> TaskGroup:
        """Where the router's clients are started, on first use."""
        ...

    @property
    def stats(self) -> ConsumerStats:
        """``dlq_records``, ``dlq_values_dropped`` and ``dlq_errors``."""
        ...

    def clock(self) -> float:
        """The time lock deadlines are on."""
        ...

    def is_closing(self) -> bool:
        """Whether close() has begun (re-read after an await)."""
        ...

    def fail(self, exc: BaseException) -> None:
        """Stop the consumer with ``exc`` (rule 3)."""
        ...


class Router(Protocol):
    """What writes the dead-letter copies (:class:`sharecon.dlq.DeadLetterRouter`)."""

    @property
    def default_topic(self) -> str:
        """The dead-letter topic when the caller names none."""
        ...

    @property
    def started(self) -> bool:
        """Whether its clients are up."""
        ...

    async def host(self, *, task_status: TaskStatus[None] = ...) -> None:
        """Run its clients until it is stopped (started in the consumer's task group)."""
        ...

    async def write(
        self, record: Record[Any, Any], reason: str, topic: str, *, stub: bool = False
    ) -> Any:
        """Write the copy (``stub``: without the value); what the broker said of it
        (``None``: the broker wrote it).

        :raises DeadLetterError: the copy could not be written.
        """
        ...

    async def stop(self) -> None:
        """Stop its clients."""
        ...


class RetryIn(Protocol):
    """:func:`sharecon._share.dead_letter_retry.retry_in`: seconds before the next
    attempt at a copy that failed ``failures`` times, or ``None``: release now."""

    def __call__(
        self, failures: int, now: float, lock_deadline: float | None, *, may_pass: bool = True
    ) -> float | None: ...


class RoutingError(Protocol):
    """:func:`sharecon.dlq.routing_error`: a failure to write a copy, as the
    :class:`~sharecon.errors.DeadLetterError` (or ``DeadLetterTopicError``) it means."""

    def __call__(self, what: str, exc: errors.KafkaError) -> errors.DeadLetterError: ...


logger = logging.getLogger("sharecon.consumer")

#: Dead-letter copy failures that another attempt at the same record cannot fix.
_NEVER_FITS = (errors.MessageTooLargeError, errors.RecordListTooLargeError)


def release_quietly(
    acknowledge: Callable[[Record[Any, Any], AckType], None], record: Record[Any, Any]
) -> None:
    """Give ``record`` back after a failed dead-letter write, raising nothing
    (``acknowledge``: the consumer's own, which keeps its cursor's bookkeeping)."""
    try:
        acknowledge(record, AckType.RELEASE)
    except errors.KafkaError as exc:
        logger.info("releasing %s after a failed dead-letter write: %s", record, exc)


async def reject_to_dlq(
    core: RejectPort,
    router: Router,
    routing_error: RoutingError,
    retry_in: RetryIn,
    acknowledge: Callable[[Record[Any, Any], AckType], None],
    record: Record[Any, Any],
    reason: str,
    topic: str | None,
) -> object:
    """Copy ``record`` to ``topic`` (default: the router's), then reject it (rules 1-4);
    returns what the router said of the copy (``None`` when none was written).

    Also for the consumer's own routing, which may still run while it closes.

    :raises DeadLetterError: the copy could not be written (the record was released).
    """
    if not core.handout.holds(record):
        # Lock lost (reported, not raised) or never ours / already answered (raised).
        acknowledge(record, AckType.REJECT)
        return None
    target = topic or router.default_topic
    if core.fatal is not None:
        # A dead-letter topic that cannot be written stopped the consumer: another
        # attempt would fail the same way; give the record back once and say why.
        release_quietly(acknowledge, record)
        raise core.fatal
    failures = 0
    stub = False  # the copy without its value (sharecon.dlq rule 2)
    while True:
        try:
            if not router.started:
                await core.tg.start(router.host)
            written = await router.write(record, reason, target, stub=stub)
            break
        except errors.KafkaError as exc:
            err = exc
            if not isinstance(exc, errors.DeadLetterError):
                # E.g. the router's producer could not start (InitProducerId refused).
                err = routing_error(
                    f"{record.topic}-{record.partition}@{record.offset}: dead-letter "
                    f"routing to {target!r} failed",
                    exc,
                )
                err.__cause__ = exc
        except BaseException:
            release_quietly(acknowledge, record)
            raise
        # The wait runs outside the except clauses: a cancellation during it must
        # still give the record back (the ``except BaseException`` above would not
        # see one raised inside its sibling clause).
        failures += 1
        wait = None
        held = core.fatal is None and not core.is_closing() and core.handout.holds(record)
        never_fits = isinstance(err.__cause__, _NEVER_FITS)
        if stub_next(never_fits=never_fits, stubbed=stub, held=held):
            logger.warning("%s; writing a copy without the value instead", err)
            stub = True
            continue
        if held:
            # Each release spends a delivery attempt: try again while the lock
            # lasts (sharecon._share.dead_letter_retry).
            wait = retry_in(
                failures,
                core.clock(),
                record.lock_deadline,
                may_pass=not isinstance(err, errors.DeadLetterTopicError) and not never_fits,
            )
        if wait is not None:
            logger.info("%s; trying again in %.1f s", err, wait)
            try:
                await anyio.sleep(wait)
            except BaseException:
                release_quietly(acknowledge, record)
                raise
            if core.handout.holds(record) and not core.is_closing():
                continue
        core.stats.dlq_errors += 1
        # Released, not left to its lock: either way its next delivery counts one
        # more (docs/security.md), and a release cannot be auto-accepted later.
        release_quietly(acknowledge, record)
        if isinstance(err, errors.DeadLetterTopicError) and not core.is_closing():
            core.fail(err)  # stop: routing anything else would fail the same way
        raise err from err.__cause__
    core.stats.dlq_records += 1
    if stub:
        core.stats.dlq_values_dropped += 1
    if not core.handout.holds(record):
        # Its lock was lost while the copy was written (a slow or retried write, a
        # lost session): the broker delivers it again, and it may be copied again (at
        # least once, docs/dlq.md). The loss is reported, as above, never raised: the
        # copy is written and the application has nothing to answer for.
        try:
            acknowledge(record, AckType.REJECT)
        except errors.InvalidRecordStateError:
            logger.info(
                "%s-%d@%d: its lock was lost while its dead-letter copy was written; "
                "it will be delivered again",
                *(record.topic, record.partition, record.offset),
            )
        return written
    acknowledge(record, AckType.REJECT)
    return written
