"""The dead-letter job: routes the records the machine set aside as past the policy's
delivery limit (``DeadLetterPolicy.max_deliveries``) to the dead-letter topic.

Rules of this module:

1. The records come from the machine (``ShareMachine.take_dead_letters``): they arrived
   past the limit, and the application released them on an earlier delivery here (or the
   policy routes unseen ones too, ``route_unseen``). Each routing is logged (WARNING) with
   that history, which the copy's reason header carries too.
2. Each is copied, then rejected (``route``: the consumer's ``reject_to_dlq`` path); a
   copy that cannot be written leaves the record released by that path, and its error is
   kept for ``recent_errors``. The job goes on with the next.
3. While the consumer closes or after it failed, queued records are released, not routed:
   another attempt could only fail the same way, or outlive the close.
4. The job never raises into the consumer's task group.
5. While the dead-letter circuit breaker is open, queued records wait: nothing more goes
   to the dead-letter topic until it closes.
6. Each record taken is settled with the machine once routed or released
   (``ShareMachine.dead_letter_settled``), so the machine knows how many acquired records
   the router holds (the whole-client simulation's invariant 7 counts them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol, cast

from sharecon import errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sharecon._consumer.signal import Signal
    from sharecon._share.breaker import DeadLetterBreaker
    from sharecon._share.machine import ShareMachine
    from sharecon.record import Record

__all__ = ["RoutingPort", "route_dead_letters"]

logger = logging.getLogger("sharecon.consumer")

#: Seconds between looks at the queue when nothing wakes the job.
_IDLE = 1.0


class RoutingPort(Protocol):
    """What the routing job uses of its consumer (``ConsumerCore`` has all of it)."""

    @property
    def machine(self) -> ShareMachine:
        """Its queue of dead letters, and their histories."""
        ...

    @property
    def closing(self) -> bool:
        """Whether close() has begun (the job ends)."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer (rule 3: release, not route)."""
        ...

    @property
    def dead_letter_signal(self) -> Signal:
        """Set when dead letters are queued, and at close."""
        ...

    @property
    def member_id(self) -> str:
        """For the log lines."""
        ...

    def clock(self) -> float:
        """The time the breaker's window is on."""
        ...

    def is_closing(self) -> bool:
        """:attr:`closing`, re-read after an await."""
        ...

    def note_error(self, exc: errors.KafkaError) -> None:
        """Keep an error for ``recent_errors`` (it is not raised)."""
        ...


async def route_dead_letters(
    core: RoutingPort,
    route: Callable[[Record[Any, Any], str], Awaitable[object]],
    release: Callable[[Record[Any, Any]], None],
    breaker: DeadLetterBreaker | None = None,
) -> None:
    """Route queued dead letters until the consumer closes (rules 1-5).

    :param route: copies one record to the dead-letter topic with a reason, then rejects
        it (releasing it instead when the copy fails, and raising).
    :param release: releases one record, raising nothing.
    """
    machine = core.machine
    limit = machine.dead_letter_limit
    while not core.closing:
        if core.fatal is not None:
            # The consumer failed (maybe this routing): release, not route (rule 3).
            for record in cast("list[Record[Any, Any]]", machine.take_dead_letters()):
                release(record)
                machine.dead_letter_settled()
            await core.dead_letter_signal.wait(timeout=_IDLE)
            continue
        if not machine.dead_letters or (
            breaker is not None and breaker.is_open(core.clock())  # rule 5
        ):
            await core.dead_letter_signal.wait(timeout=_IDLE)
            continue
        for record in cast("list[Record[Any, Any]]", machine.take_dead_letters()):
            if core.is_closing():  # may have changed during the previous await
                release(record)
                machine.dead_letter_settled()
                continue
            released = machine.released_before(record.topic_partition, record.offset)
            history = (
                f"it failed here on delivery {released}"
                if released
                else "never failed here (route_unseen=True)"
            )
            reason = f"delivered {record.delivery_count} times (max_deliveries={limit}); {history}"
            logger.warning(
                "share consumer %s: %s-%d@%d to the dead-letter topic: %s",
                core.member_id,
                record.topic,
                record.partition,
                record.offset,
                reason,
            )
            try:
                await route(record, reason)
            except errors.KafkaError as exc:
                core.note_error(exc)
            machine.dead_letter_settled()
