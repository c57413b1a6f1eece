"""``ShareConsumer.process()``'s workers: each takes a record, prepares it (deserializers,
lock keeping), runs the handler and answers for it.

Rules of this module:

1. Each record is accepted when the handler returns; when it raises an ``Exception`` the
   record is released (and noted as failed here: ``ShareMachine.note_failed``), or, on
   delivery ``max_deliveries`` or later under a dead-letter policy, routed to the
   dead-letter topic with the exception as the reason (logged, WARNING); with the policy's
   ``retry_backoff``, an error before the last allowed delivery releases it after the
   backoff's delay. A handler that raises or returns :class:`~sharecon.record.RetryLater`
   releases the record after its delay. An answer the handler gave itself stands.
2. A record the deserializers fail for never reaches the handler: it is disposed of (see
   ``Host.dispose``), and the error logged (WARNING) and kept for ``recent_errors``.
3. One test per record decides whether there is anything to prepare: a consumer without
   deserializers and lock keeping pays nothing more.
4. A worker ends when the consumer closes or fails, never with the failure: the caller
   raises it once, not in an exception group. A dead-letter topic that cannot be written
   stops the consumer (the routing said so) and ends the workers.
5. A lock keeper that only this call needs runs while its workers do, and ends with them.
6. With a dead-letter circuit breaker (``sharecon._share.breaker``), each record's final
   outcome is counted: accepted, or sent to the dead-letter topic. When it opens, fetching
   pauses, one WARNING is logged, and the workers hand out nothing more until it is no
   longer open; what is buffered stays buffered (releasing it would spend the same
   delivery attempt a lock running out does, and feed it at once to other members
   running the same broken handler). The workers look again at least every 0.5 s.
   Fetching's hold is the breaker's state, asked by the buffer: it ends with the
   cool-down even when no worker runs any more, and a timer wakes the fetchers then.
7. With deserializers, a worker first serves the records a cancelled hand-out took
   (``sharecon._consumer.holdback``), and cancelled while deserializing it keeps its
   record there: nothing taken from the buffer is lost unseen.
8. A worker cancelled while its handler runs (``process()`` itself was cancelled: a
   deadline, a cancel scope) releases that record unless the handler answered it: the
   handler did not finish, and the record comes back at once instead of when its lock
   ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from sharecon import errors
from sharecon.record import RetryLater
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from anyio.abc import TaskGroup

    from sharecon._backoff import Backoff
    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._consumer.core import ConsumerCore
    from sharecon._consumer.holdback import Holdback
    from sharecon._share.breaker import DeadLetterBreaker
    from sharecon._share.lock_keeper import LockKeeper
    from sharecon._share.machine import ShareMachine
    from sharecon.record import Record

logger = logging.getLogger("sharecon.consumer")

__all__ = ["BreakerPort", "Host", "breaker_opened", "run_workers", "wait_while_open"]

#: Longest sleep of a worker while the breaker is open (a reset is seen within it).
_BREAKER_POLL = 0.5


class BreakerPort(Protocol):
    """What the breaker's steps use of the consumer (``ConsumerCore`` has all of it)."""

    @property
    def buffer(self) -> DeliveryBuffer:
        """Woken (``resume``) when the breaker lets fetching go on."""
        ...

    @property
    def tg(self) -> TaskGroup:
        """Where the cool-down's timer runs."""
        ...

    @property
    def member_id(self) -> str:
        """For the log line."""
        ...

    @property
    def closing(self) -> bool:
        """Whether close() has begun (the wait ends)."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer (the wait ends)."""
        ...

    def clock(self) -> float:
        """The time the breaker's window is on."""
        ...


@dataclass(frozen=True, slots=True)
class Host:
    """What the workers need of the consumer that runs them."""

    #: The application asked for a record (liveness counts it).
    asked: Callable[[ConsumerCore], None]
    #: Wait until records are buffered.
    wait_for_records: Callable[[ConsumerCore], Awaitable[None]]
    #: Whether the consumer was closed.
    closed: Callable[[], bool]
    #: Deserialize a record in place (``None``: no deserializers, or an async one).
    deserialize: Callable[[Record[Any, Any]], None] | None
    #: Route or release a record the deserializers failed for.
    dispose: Callable[
        [ConsumerCore, Record[Any, Any], errors.DeserializationError], Awaitable[None]
    ]
    #: Copy a record to the dead-letter topic with a reason, then reject it.
    to_dead_letters: Callable[[ConsumerCore, Record[Any, Any], str], Awaitable[object]]
    #: Answer a record for the handler.
    answer: Callable[[Record[Any, Any], AckType], None]
    #: Release a record after a delay, for the handler.
    release_later: Callable[[Record[Any, Any], float], None]
    #: Renew held records' locks until cancelled (for a keeper of this call's own).
    keep_locks: Callable[[ConsumerCore, LockKeeper[Record[Any, Any]]], Coroutine[Any, Any, None]]
    #: Deserialize a record in place, awaited (an async deserializer; else ``None``).
    deserialize_async: Callable[[Record[Any, Any]], Awaitable[None]] | None = None
    #: Records a cancelled hand-out took, served first (with deserializers: rule 7).
    held: Holdback | None = None


async def run_workers(
    core: ConsumerCore,
    host: Host,
    handler: Callable[[Record[Any, Any]], Awaitable[object]],
    *,
    concurrency: int,
    keeper: LockKeeper[Record[Any, Any]] | None,
    own_keeper: bool,
    dead_letter_limit: int | None,
    retry_backoff: Backoff | None = None,
    breaker: DeadLetterBreaker | None = None,
) -> None:
    """Run ``concurrency`` workers until the consumer closes or fails (rules 1-6).

    :param own_keeper: ``keeper`` is this call's own: run it alongside the workers.
    """
    hold = keeper.hold if keeper is not None else None
    deserialize = host.deserialize
    deserialize_async = host.deserialize_async
    decode = deserialize is not None or deserialize_async is not None
    prepare = hold is not None or decode  # rule 3
    limit = dead_letter_limit
    backoff = retry_backoff
    held = host.held if decode else None
    # Its truth is the one extra test per record (an empty tuple without deserializers).
    held_items: Any = held.items if held is not None else ()

    async def worker() -> None:
        buffer = core.buffer
        clock = core.clock
        while True:
            host.asked(core)
            if core.fatal is not None:
                return  # raised by the caller, once (rule 4)
            # (opened_at first: a closed breaker costs this hot loop no call per record.)
            if breaker is not None and breaker.opened_at is not None and breaker.holds(clock):
                await wait_while_open(core, breaker, host.closed)  # rule 6
                continue
            record: Record[Any, Any] | None = None
            decoded = False
            if held_items and held is not None:  # rule 7
                kept = held.take(clock)
                if kept is not None:
                    record, decoded = kept
            if record is None:
                record = buffer.pop_one(clock)
                if record is None:
                    if host.closed() or core.closing:
                        return
                    await host.wait_for_records(core)
                    continue
            if prepare:
                if decode and not decoded:
                    try:
                        if deserialize is not None:
                            deserialize(record)
                        elif deserialize_async is not None:
                            await deserialize_async(record)
                    except errors.DeserializationError as exc:
                        await host.dispose(core, record, exc)
                        logger.warning("share consumer %s: %s", core.member_id, exc)
                        core.note_error(exc)
                        continue
                    except BaseException:
                        if held is not None:
                            held.keep((), record)  # rule 7
                        raise
                if hold is not None:
                    hold(record, clock(), record.lock_deadline)
            try:
                result = await handler(record)
            except RetryLater as retry:
                host.release_later(record, retry.delay)
            except Exception as exc:
                if limit is not None and record.delivery_count >= limit:
                    reason = f"{type(exc).__name__}: {exc}"
                    _log_routing(core.machine, core.member_id, record, limit, reason)
                    try:
                        await host.to_dead_letters(core, record, reason)
                    except errors.DeadLetterError as dlq_exc:
                        if _failed(core):
                            return  # it stopped the consumer (rule 4)
                        core.note_error(dlq_exc)
                    else:
                        if breaker is not None and breaker.outcome(True, clock()):
                            breaker_opened(core, breaker)
                else:
                    # A failure: past the limit, its next delivery is routed on arrival.
                    core.machine.note_failed(
                        record.topic_partition, record.offset, record.delivery_count
                    )
                    if backoff is not None:
                        host.release_later(record, backoff.delay(record.delivery_count - 1))
                    else:
                        host.answer(record, AckType.RELEASE)
            except BaseException:
                host.answer(record, AckType.RELEASE)  # rule 8 (an answer given stands)
                raise
            else:
                if isinstance(result, RetryLater):
                    host.release_later(record, result.delay)
                else:
                    host.answer(record, AckType.ACCEPT)
                    if breaker is not None:
                        breaker.outcome(False, clock())

    async with anyio.create_task_group() as tg:
        if keeper is not None and own_keeper:
            tg.start_soon(host.keep_locks, core, keeper)
        async with anyio.create_task_group() as workers:
            for _ in range(concurrency):
                workers.start_soon(worker)
        tg.cancel_scope.cancel()  # the workers are done: so is this keeper (rule 5)


def breaker_opened(core: BreakerPort, breaker: DeadLetterBreaker) -> None:
    """The breaker just opened: fetching holds (the buffer asks the breaker), say so once,
    and wake the fetchers when the cool-down ends, whether or not a worker still runs
    (rule 6)."""
    left = breaker.remaining(core.clock())
    logger.warning(
        "share consumer %s: dead-letter circuit breaker open: %s; no more records are "
        "handled or fetched %s (what is buffered stays, unhandled)",
        core.member_id,
        breaker.reason,
        "until reset_dead_letter_breaker()" if left is None else f"for {left:.0f} s",
    )
    if left is not None:
        core.tg.start_soon(_resume_after, core, breaker, left, name="sharecon breaker cool-down")


async def _resume_after(core: BreakerPort, breaker: DeadLetterBreaker, delay: float) -> None:
    """Wake the fetchers once the cool-down that ends in ``delay`` seconds is over: no
    worker may be left to notice (``process()`` ended while it was open)."""
    await anyio.sleep(delay)
    if not breaker.is_open(core.clock()):
        core.buffer.resume()


async def wait_while_open(
    core: BreakerPort, breaker: DeadLetterBreaker, closed: Callable[[], bool]
) -> None:
    """Sleep while the breaker is open (at most ``_BREAKER_POLL`` at a time), then wake
    the fetchers (rule 6)."""
    while core.fatal is None and not core.closing and not closed():
        now = core.clock()
        if not breaker.is_open(now):
            core.buffer.resume()
            return
        left = breaker.remaining(now)
        await anyio.sleep(_BREAKER_POLL if left is None else min(_BREAKER_POLL, left))


def _log_routing(
    machine: ShareMachine, member_id: str, record: Record[Any, Any], limit: int, reason: str
) -> None:
    """Say that a record goes to the dead-letter topic, with what this member saw of it."""
    earlier = machine.released_before(record.topic_partition, record.offset)
    history = f"; it failed here on delivery {earlier} too" if earlier else ""
    logger.warning(
        "share consumer %s: %s-%d@%d to the dead-letter topic: the handler raised on "
        "delivery %d (max_deliveries=%d)%s: %s",
        *(member_id, record.topic, record.partition, record.offset),
        *(record.delivery_count, limit, history, reason),
    )


def _failed(core: BreakerPort) -> bool:
    """Whether the consumer failed (a call, so type checkers re-read it after awaits)."""
    return core.fatal is not None
