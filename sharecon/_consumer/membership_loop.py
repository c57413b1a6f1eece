"""The membership loop's steps, sans-I/O: what to do next, and what an answer means.

The consumer's ``heartbeat_loop`` (:mod:`.heartbeat`) and the simulator's member both
run this, so the order of the membership's calls and what each outcome makes the port
do are written once.

Rules of this module:

1. The :class:`~sharecon._share.membership.Membership` decides when a heartbeat is due and
   what it says. :meth:`MembershipLoop.next` asks it and names the port's next step: send
   a heartbeat (:class:`Beat`), wait until a time or a wake-up (:class:`Sleep`), or
   nothing more (:data:`ENDED`: the member left or failed).
2. A :class:`Sleep` names when the next heartbeat falls due (``None``: none is, until
   something changes: a subscribe, a rejoin, a close). The port may ask again sooner,
   as often as it likes (the consumer does every :data:`IDLE_CHECK` for its own periodic
   duties); asking early changes nothing.
3. An answer (:meth:`MembershipLoop.answered`) or a failure to get one
   (:meth:`MembershipLoop.failed`: transport, timeout, a retriable coordinator lookup
   error) becomes a :class:`Settled`: whether to look the coordinator up again, the
   assignment change to take, the error that stops the consumer (the member failed, or
   the principal may not describe a subscribed topic) or is only noted, and whether the
   member is now in the group.
4. No I/O, no clock: time is the caller's ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sharecon._share.membership import MemberState

if TYPE_CHECKING:
    from sharecon import errors
    from sharecon._share.membership import (
        AssignmentChange,
        HeartbeatOutcome,
        HeartbeatPlan,
        Membership,
    )
    from sharecon.protocol import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

__all__ = ["ENDED", "IDLE_CHECK", "Beat", "Ended", "MembershipLoop", "Settled", "Sleep"]

#: The longest the consumer's port waits between two steps, in seconds (rule 2).
IDLE_CHECK: Final = 1.0


@dataclass(frozen=True, slots=True)
class Beat:
    """Send ``request`` to the group coordinator (look it up first if not known), then
    report :meth:`MembershipLoop.answered` or :meth:`MembershipLoop.failed`."""

    plan: HeartbeatPlan
    request: ShareGroupHeartbeatRequest


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait until ``until`` (the loop's clock; ``None``: no heartbeat is due) or a
    wake-up, then ask again."""

    until: float | None


@dataclass(frozen=True, slots=True)
class Ended:
    """The member left the group or failed: the loop is over."""


ENDED: Final = Ended()


@dataclass(frozen=True, slots=True)
class Settled:
    """What one heartbeat's outcome makes the port do (rule 3).

    :ivar find_coordinator: look the group coordinator up again before the next beat.
    :ivar change: the assignment changed (including being dropped): take it.
    :ivar fatal: stop the consumer with this error.
    :ivar joined: the member is in the group (start() may return).
    """

    find_coordinator: bool
    change: AssignmentChange | None
    fatal: errors.KafkaError | None
    joined: bool


class MembershipLoop:
    """One member's heartbeat loop (rules 1-3)."""

    __slots__ = ("membership",)

    def __init__(self, membership: Membership) -> None:
        self.membership = membership

    def next(self, now: float) -> Beat | Sleep | Ended:
        """The port's next step at ``now`` (rules 1 and 2)."""
        ms = self.membership
        if ms.state in (MemberState.LEFT, MemberState.FATAL):
            return ENDED
        plan = ms.build_heartbeat(now)
        if plan is not None:
            return Beat(plan, ms.request(plan))
        deadline = ms.next_deadline()
        return Sleep(None if deadline is None else max(now, deadline))

    def answered(self, now: float, resp: ShareGroupHeartbeatResponse) -> Settled:
        """The coordinator answered the last :class:`Beat` at ``now``."""
        return self._settle(self.membership.answered(now, resp))

    def failed(self, now: float) -> Settled:
        """The last :class:`Beat` got no answer (rule 3)."""
        return self._settle(self.membership.on_error(now))

    @staticmethod
    def _settle(outcome: HeartbeatOutcome) -> Settled:
        return Settled(
            find_coordinator=outcome.find_coordinator,
            change=outcome.change,
            fatal=outcome.error,
            joined=outcome.state is MemberState.STABLE,
        )
