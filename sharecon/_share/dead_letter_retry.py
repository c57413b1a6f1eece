"""A dead-letter copy that failed for a reason that may pass: try again while the record's
lock lasts, rather than release it at once. Pure.

Rules of this module:

1. Pure: no clock, no I/O; ``now`` and the record's lock deadline are passed in.
2. Releasing a record after a failed copy spends one of its delivery attempts (its next
   delivery counts one more), and a copy refused at once (``POLICY_VIOLATION``, a record
   too large) comes back at once: released at each failure, a record refused for a few
   seconds would reach the broker's ``share.delivery.count.limit`` and be archived unseen.
   So the copy is tried again after :data:`RETRY_BACKOFF` (0.5 s doubling, at most 5 s)
   while the record is still this consumer's, and released only when the next attempt
   could not end before its lock does (:data:`LOCK_MARGIN` to spare) or its lock is
   unknown. A refusal costs each record at most one delivery attempt per lock it holds
   (with renewals, Kafka 4.2+ ``process()``: none until ``max_hold``).
3. A copy that fails for a reason retrying cannot fix is not retried (``may_pass`` false):
   the topic cannot be written (``DeadLetterTopicError``: the consumer stops with it,
   ``sharecon.dlq`` rule 1), or this record is too large for it (its copy never fits).
4. A whole copy that never fits (MESSAGE_TOO_LARGE) is followed, once, by a stub: the copy
   without its value (``sharecon.dlq`` rule 2, :func:`stub_next`). Released instead, the
   record would come back on every delivery until the broker archived it with no copy.
   Only a stub that fails too is released (rule 3).
"""

from __future__ import annotations

from sharecon._backoff import Backoff

__all__ = ["LOCK_MARGIN", "RETRY_BACKOFF", "retry_in", "stub_next"]

#: Waits between attempts at one record's copy (rule 2).
RETRY_BACKOFF = Backoff(initial=0.5, maximum=5.0, multiplier=2.0, jitter=0.0)
#: Seconds of lock kept for the attempt itself and the reject after it (rule 2).
LOCK_MARGIN = 1.0


def retry_in(
    failures: int, now: float, lock_deadline: float | None, *, may_pass: bool = True
) -> float | None:
    """Seconds to wait before the next attempt at a copy that failed ``failures`` times
    (``>= 1``) in a row, or ``None``: release the record now (rules 2 and 3).

    :param lock_deadline: when the record's lock ends (``now``'s clock), renewals included.
    :param may_pass: another attempt could succeed (rule 3).
    """
    if lock_deadline is None or not may_pass:
        return None
    delay = RETRY_BACKOFF.delay(failures - 1)
    if now + delay + LOCK_MARGIN >= lock_deadline:
        return None
    return delay


def stub_next(*, never_fits: bool, stubbed: bool, held: bool) -> bool:
    """Whether the next attempt is a stub (rule 4): the whole copy failed as one that
    never fits, no stub was tried yet, and the record is still this consumer's."""
    return never_fits and not stubbed and held
