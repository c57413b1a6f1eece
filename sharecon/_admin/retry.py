"""When an admin call tries again: the coordinator's error codes, leader moves, and the
backoff bounded by the call's deadline (time passed in).

Rules:

1. A group call answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE forgets the cached
   coordinator, looks it up again and retries; COORDINATOR_LOAD_IN_PROGRESS retries the same
   coordinator after the backoff. A lost connection counts as a moved coordinator. Any
   other error is raised at once.
2. A partition whose leader moved or is not known yet (:data:`LEADER_MOVED`) is asked
   again after a metadata refresh.
3. Attempts back off by :data:`sharecon._backoff.RETRY_BACKOFF`; an attempt whose backoff
   would reach the call's deadline is not made: the caller raises the last failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sharecon._backoff import RETRY_BACKOFF, Backoff
from sharecon.protocol.error_codes import ErrorCode

__all__ = [
    "COORDINATOR_MOVED",
    "COORDINATOR_RETRY",
    "LEADER_MOVED",
    "GroupVerdict",
    "Retries",
    "group_verdict",
]

#: The coordinator moved: forget it, look it up again and retry.
COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
#: ... plus a coordinator still loading the group: retry the same one after a backoff.
COORDINATOR_RETRY = COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
#: The partition's leader moved or is not known yet: refresh the metadata and ask again.
LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


class GroupVerdict(Enum):
    """What a group call does with its answer's error code (rule 1)."""

    #: No error: the answer is the result.
    DONE = "done"
    #: Retry the same coordinator after the backoff.
    RETRY = "retry"
    #: Forget the coordinator, find it again, retry after the backoff.
    MOVED = "moved"
    #: Raise the error.
    RAISE = "raise"


def group_verdict(code: int) -> GroupVerdict:
    """The verdict on a group call answered with error ``code`` (rule 1)."""
    if code == ErrorCode.NONE:
        return GroupVerdict.DONE
    if code in COORDINATOR_MOVED:
        return GroupVerdict.MOVED
    if code in COORDINATOR_RETRY:
        return GroupVerdict.RETRY
    return GroupVerdict.RAISE


@dataclass(slots=True)
class Retries:
    """The attempts of one call until ``deadline`` (monotonic seconds; rule 3)."""

    deadline: float
    attempt: int = 0
    backoff: Backoff = RETRY_BACKOFF

    def delay(self, now: float, *, at_deadline: bool = False) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: no time is left for one.

        :param at_deadline: an attempt due exactly at the deadline is still made.
        """
        delay = self.backoff.delay(self.attempt)
        self.attempt += 1
        due = now + delay
        if due > self.deadline or (due == self.deadline and not at_deadline):
            return None
        return delay
