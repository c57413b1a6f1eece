"""The order of a consumer's close, sans-I/O: what ``ShareConsumer.close()`` and the seeded
simulation (:mod:`sharecon.testing.sim`) both run.

Rules of this module:

1. The machine refuses the application's answers first (rule 6 of
   :mod:`sharecon._share.machine`): an answer given during the close is raised, never
   half taken.
2. The dead-letter router stops before anything is released: a copy it is writing is
   written (or given up) while the record's lock is still held, so the record is rejected
   after its copy, never released under it.
3. Then everything the application holds and everything buffered is released (the
   machine's answers, carried out, then the buffer cleared: a dropped chunk's records are
   released, not forgotten) and the fetch loops close: each sends the releases and every
   pending answer with its FINAL request, which ends its share session.
4. The member leaves its group last, once no fetch loop runs: leaving earlier would give
   its partitions to another member while its answers are still on their way.
5. On Kafka 4.1 the buffered records, never handed out, are not released by an answer:
   4.1 gives back what a share session still holds when the session ends (the FINAL
   request, or the connection's close) with its delivery count lowered by one, but keeps
   the count of an explicit release. Left to the session's end, prefetch costs no
   delivery attempt there; so are the records of an answer that arrives during the
   close. (From 4.2 both keep the count, so the answer is sent, as before, and
   counted.) Records handed out are always released by an answer: one the
   application saw and never answered must spend its attempt, or a record that makes the
   application crash and close would come back for ever.

:func:`close_steps` does what needs no I/O and yields a :class:`CloseStep` where the
runtime must act (stop the router, close the loops, leave); the runtime resumes it when
that is done (or bounded out).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._share.machine import ShareMachine

__all__ = ["CloseStep", "close_steps", "release_held", "spares_buffered"]


class CloseStep(Enum):
    """Where the runtime acts during a close (rules 2-4)."""

    #: Stop the dead-letter router (rule 2).
    STOP_DEAD_LETTERS = "stop dead letters"
    #: Wake the fetch loops and wait until each sent its FINAL request and stopped (rule 3).
    CLOSE_FETCHERS = "close fetchers"
    #: Leave the group (rule 4).
    LEAVE_GROUP = "leave group"


def spares_buffered(share_fetch_version: int | None) -> bool:
    """Whether a close leaves the buffered records to the end of their share sessions
    (rule 5): the brokers are Kafka 4.1, which serves ShareFetch v1 at most (``None``:
    the version is not known, nothing was fetched, so nothing is buffered)."""
    return share_fetch_version is not None and share_fetch_version < 2


def release_held(
    machine: ShareMachine,
    buffer: DeliveryBuffer,
    settle: Callable[[], None],
    *,
    spare_buffered: bool = False,
) -> int:
    """Release every record handed out and unanswered and every buffered one: the
    machine's answers, carried out (``settle``), then the buffer cleared (rule 3). The
    caller wakes its fetch loops. Returns how many buffered records, never handed out,
    were released (each a delivery attempt spent unseen: the machine counts them).

    With ``spare_buffered`` (rule 5) the buffered records are forgotten instead: no
    answer is sent for them, and the end of their share session gives them back."""
    waiting = buffer.waiting()
    if spare_buffered:
        for tp, delivery, first, last in waiting:
            machine.forget(tp, delivery, first, last)
        unseen = 0
    else:
        unseen = machine.release_buffered(waiting)
    machine.release_held()
    settle()
    buffer.clear()
    return unseen


def close_steps(
    machine: ShareMachine,
    buffer: DeliveryBuffer,
    settle: Callable[[], None],
    *,
    spare_buffered: bool = False,
) -> Iterator[CloseStep]:
    """The close, in order (rules 1-5): resume after carrying out each step.
    ``spare_buffered``: the brokers are Kafka 4.1 (rule 5)."""
    machine.closing = True  # rule 1: from now on the machine refuses answers
    machine.closing_spares = spare_buffered  # rule 5, for records still to arrive too
    yield CloseStep.STOP_DEAD_LETTERS
    release_held(machine, buffer, settle, spare_buffered=spare_buffered)
    yield CloseStep.CLOSE_FETCHERS
    yield CloseStep.LEAVE_GROUP
