"""The ShareGroupHeartbeat state machine: joining, staying, being fenced, leaving.

Rules of this module:

1. The member id is made here, once per consumer, and kept across rejoins. It has the
   form of Kafka's own ``Uuid.toString()`` (22 URL-safe base64 characters, no padding),
   as the reference client sends, so it reads the same as Java members in broker tools.
2. MemberEpoch: 0 joins (or rejoins after fencing), -1 leaves, otherwise the epoch from
   the last response is echoed.
3. SubscribedTopicNames is sent when joining and when it changed since last sent; RackId
   on the first heartbeat of a join. A failed heartbeat forgets what was sent, so the next
   one sends both again.
4. One heartbeat in flight at a time. The next is due ``HeartbeatIntervalMs`` after the
   response; at once after an assignment change (to acknowledge it). Sooner while a
   member that just joined (or changed its subscription) has no partitions yet: see
   rule 7. Every error answer backs off (rule 8).
5. An assignment (topic id -> partitions) replaces the previous one whole; ``None`` means
   unchanged. The diff is returned so the consumer can adjust sessions without losing
   pending acknowledgements.
6. Errors are data: a fatal one is returned as a typed :class:`sharecon.errors.BrokerError`
   and the state becomes FATAL; nothing is raised here. No I/O, no clock.
7. Early heartbeats while unassigned. A Kafka 4.x coordinator answers a join with an
   epoch and an *empty* assignment: it first initialises the share-partition state, and
   hands the partitions out on a later heartbeat. Waiting the full interval (1-5 s) for
   that later heartbeat is most of the time to the first record. So while the member is
   in the group, subscribed, and assigned nothing, the next heartbeat is due after the
   ``early`` backoff (50, 100, 200 ms..., never later than the interval), for at most
   ``early_tries`` heartbeats per join or subscription change; then the interval again.
   The Java client does not do this: its membership manager goes from JOINING to STABLE
   on an empty assignment and heartbeats again only after the interval (it heartbeats at
   once only while JOINING, ACKNOWLEDGING or LEAVING). The bound keeps the extra load on
   the coordinator to a handful of requests per join, also for members that stay
   unassigned (more members than partitions).
8. Every error backs off, so no answer can make the member hot-loop (an error answer
   carries no ``HeartbeatIntervalMs``: a broker that refuses every heartbeat must not get
   thousands a second). The delay grows with the run of consecutive errors and resets on
   a successful answer. Fencing and NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE are
   retried at once the first time in a run (a rejoin or a new coordinator usually
   succeeds), then back off like the rest. TOPIC_AUTHORIZATION_FAILED (the principal may
   not DESCRIBE a subscribed topic) leaves the member where it is, backs off, and is
   returned as the outcome's error: the consumer decides whether it stops (it does: see
   ``sharecon._consumer.heartbeat``); the member would recover once the ACL is granted.
"""

from __future__ import annotations

import base64
import math
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from sharecon._backoff import RETRY_BACKOFF, Backoff
from sharecon.errors import BrokerError, error_class_for_code, error_for_code
from sharecon.protocol import ShareGroupHeartbeatRequest
from sharecon.protocol.error_codes import ErrorCode
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from sharecon.protocol import ShareGroupHeartbeatResponse

__all__ = [
    "AssignmentChange",
    "HeartbeatOutcome",
    "HeartbeatPlan",
    "MemberState",
    "Membership",
    "new_member_id",
]

LEAVE_EPOCH = -1
JOIN_EPOCH = 0

# The coordinator no longer knows us as this member: rejoin with epoch 0.
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
# Ask FindCoordinator again, at once.
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
# Retrying cannot help: the member fails. (GROUP_ID_NOT_FOUND and any other
# non-retriable code too, see _on_error_code.)
_FATAL = frozenset(
    {
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
    }
)
_AT_ONCE = -math.inf

#: Rule 7: the delays between early heartbeats while a new member waits for partitions
#: (each is also capped by the coordinator's heartbeat interval).
EARLY_HEARTBEAT = Backoff(initial=0.05, maximum=5.0, multiplier=2.0, jitter=0.2)
#: Rule 7: at most this many early heartbeats per join or subscription change
#: (50+100+200+400+800+1600 ms: about 3 s, which covers a freshly started broker).
EARLY_TRIES = 6


def new_member_id(make_uuid: Callable[[], uuid.UUID] | None = None) -> str:
    """A fresh member id: a random UUID as 22 URL-safe base64 characters (rule 1).

    Ids starting with ``-`` are redrawn (as Kafka does) so they never look like a
    command-line option. ``make_uuid``: :func:`uuid.uuid4` by default, looked up when
    called (a seeded simulation replaces it for a run).
    """
    make = make_uuid if make_uuid is not None else uuid.uuid4
    while True:
        text = base64.urlsafe_b64encode(make().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


class MemberState(Enum):
    """Where the member stands in the share group."""

    #: Not in the group; the next heartbeat joins (epoch 0).
    UNJOINED = "unjoined"
    #: A join (epoch 0) is in flight or being retried.
    JOINING = "joining"
    #: In the group, heartbeating with the epoch the coordinator gave.
    STABLE = "stable"
    #: Fenced by the coordinator; the assignment is dropped, a rejoin is due at once.
    FENCED = "fenced"
    #: Leaving: the next (or pending) heartbeat carries epoch -1.
    LEAVING = "leaving"
    #: Left the group; :meth:`Membership.rejoin` starts over with the same member id.
    LEFT = "left"
    #: A fatal error; the consumer must stop.
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class HeartbeatPlan:
    """The fields of the next ShareGroupHeartbeat request (``None`` = send null)."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    """A new assignment, and how it differs from the previous one."""

    assigned: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition]
    removed: frozenset[TopicIdPartition]


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    """What a heartbeat answer means for the consumer.

    :ivar change: set when the assignment changed (including being dropped).
    :ivar error: an error to report (TOPIC_AUTHORIZATION_FAILED) or, with state FATAL,
        to raise.
    :ivar find_coordinator: look the group coordinator up again before the next heartbeat.
    """

    state: MemberState
    change: AssignmentChange | None = None
    error: BrokerError | None = None
    find_coordinator: bool = False


@dataclass(slots=True)
class _Sent:
    rack: bool = False
    topics: tuple[str, ...] | None = None


@dataclass(slots=True)
class _InFlight:
    epoch: int


class Membership:
    """One consumer's membership of a share group (rules 1-6).

    :param group_id: the share group.
    :param topics: topic names to subscribe to (non-empty).
    :param rack_id: the client rack (``client.rack``), if any.
    :param member_id: a fixed member id (tests); made with :func:`new_member_id` otherwise.
    :param backoff: retry policy for retriable errors.
    :param early: delays between early heartbeats while unassigned (rule 7).
    :param early_tries: at most this many early heartbeats per join or subscription
        change (0: none).
    """

    def __init__(
        self,
        group_id: str,
        topics: Iterable[str],
        *,
        rack_id: str | None = None,
        member_id: str | None = None,
        backoff: Backoff | None = None,
        early: Backoff = EARLY_HEARTBEAT,
        early_tries: int = EARLY_TRIES,
    ) -> None:
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        if rack_id == "":
            raise ValueError("rack_id must be None or a non-empty string")
        self.group_id = group_id
        self.rack_id = rack_id
        self.member_id = member_id if member_id is not None else new_member_id()
        if not 0 < len(self.member_id) <= 36:
            raise ValueError(f"member id must be 1..36 characters, got {self.member_id!r}")
        self._topics = self._check_topics(topics)
        self._backoff = backoff or RETRY_BACKOFF
        self._attempts = 0
        if early_tries < 0:
            raise ValueError(f"early_tries must be >= 0, got {early_tries}")
        self._early = early
        self._early_tries = early_tries
        # Early heartbeats made since the last join or subscription change (rule 7).
        self._early_used = 0
        self._state = MemberState.UNJOINED
        self._epoch = JOIN_EPOCH
        self._interval: float | None = None
        self._due = _AT_ONCE
        self._inflight: _InFlight | None = None
        self._sent = _Sent()
        self._assignment: frozenset[TopicIdPartition] = frozenset()

    @staticmethod
    def _check_topics(topics: Iterable[str]) -> tuple[str, ...]:
        out = tuple(sorted(set(topics)))
        if not out or any(not t for t in out):
            raise ValueError("subscribe to at least one non-empty topic name")
        return out

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        """The current state."""
        return self._state

    @property
    def member_epoch(self) -> int:
        """The epoch the next regular heartbeat carries (0 when not joined)."""
        return self._epoch

    @property
    def assignment(self) -> frozenset[TopicIdPartition]:
        """The partitions assigned to this member (topic ids; names unknown here)."""
        return self._assignment

    @property
    def topics(self) -> tuple[str, ...]:
        """The subscribed topic names (sorted; empty after :meth:`unsubscribe`)."""
        return self._topics

    @property
    def heartbeat_interval(self) -> float | None:
        """The coordinator's heartbeat interval in seconds, once known."""
        return self._interval

    @property
    def in_flight(self) -> bool:
        """Whether a heartbeat awaits its answer."""
        return self._inflight is not None

    def next_deadline(self) -> float | None:
        """When :meth:`build_heartbeat` will next produce a request (``-inf`` = at once).

        ``None`` while a heartbeat is in flight, and after LEFT or FATAL.
        """
        if self._inflight is not None or self._state in (MemberState.LEFT, MemberState.FATAL):
            return None
        if self._idle_unsubscribed():
            return None
        return self._due

    def _idle_unsubscribed(self) -> bool:
        # Out of the group with nothing subscribed: a join would be refused (the coordinator
        # answers INVALID_REQUEST to a join without topics), so none is sent until
        # subscribe().
        return not self._topics and self._state in (
            MemberState.UNJOINED,
            MemberState.FENCED,
            MemberState.JOINING,
        )

    # -- commands ----------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Change the subscription; the next heartbeat (due at once) carries it."""
        new = self._check_topics(topics)
        if new != self._topics:
            self._topics = new
            self._due = _AT_ONCE
            self._early_used = 0  # the coordinator may now assign: ask soon again (rule 7)

    def unsubscribe(self) -> None:
        """Subscribe to nothing: the next heartbeat (due at once) sends an empty
        subscription and the coordinator takes every partition away. The member stays in
        the group; out of it (fenced), it does not rejoin until :meth:`subscribe`."""
        if self._topics:
            self._topics = ()
            self._due = _AT_ONCE

    def leave(self) -> AssignmentChange | None:
        """Leave the group (rule 2: a heartbeat with epoch -1).

        :returns: the dropped assignment if the member left at once (it was not in the
            group, so there is nothing to send); otherwise it is reported by the answer to
            the leave heartbeat.
        """
        if self._state in (MemberState.LEFT, MemberState.FATAL, MemberState.LEAVING):
            return None
        if self._inflight is None and self._state in (MemberState.UNJOINED, MemberState.FENCED):
            self._state = MemberState.LEFT
            return self._set_assignment(frozenset())
        # In the group, or a join may have reached the coordinator: say goodbye.
        self._state = MemberState.LEAVING
        self._due = _AT_ONCE
        return None

    def rejoin(self) -> None:
        """Start over after LEFT (for example after max.poll.interval), same member id."""
        if self._state is not MemberState.LEFT:
            raise RuntimeError(f"rejoin() needs state LEFT, not {self._state.name}")
        self._state = MemberState.UNJOINED
        self._epoch = JOIN_EPOCH
        self._due = _AT_ONCE
        self._sent = _Sent()

    # -- requests and answers ----------------------------------------------------------

    def build_heartbeat(self, now: float) -> HeartbeatPlan | None:
        """The next heartbeat if one is due at ``now`` (and none is in flight)."""
        if self._inflight is not None or now < self._due:
            return None
        state = self._state
        if state in (MemberState.LEFT, MemberState.FATAL):
            return None
        if state is MemberState.LEAVING:
            self._inflight = _InFlight(LEAVE_EPOCH)
            return HeartbeatPlan(self.group_id, self.member_id, LEAVE_EPOCH, None, None)
        if self._idle_unsubscribed():
            self._state = MemberState.UNJOINED
            return None
        if state in (MemberState.UNJOINED, MemberState.FENCED, MemberState.JOINING):
            self._state = MemberState.JOINING
            self._epoch = JOIN_EPOCH
            self._sent = _Sent()
            self._early_used = 0
        joining = self._state is MemberState.JOINING
        rack = None
        if not self._sent.rack:
            rack = self.rack_id
            self._sent.rack = True
        topics = None
        if joining or self._sent.topics != self._topics:
            topics = self._topics
            self._sent.topics = topics
        self._inflight = _InFlight(self._epoch)
        return HeartbeatPlan(self.group_id, self.member_id, self._epoch, rack, topics)

    @staticmethod
    def request(plan: HeartbeatPlan) -> ShareGroupHeartbeatRequest:
        """The wire request for ``plan`` (the consumer's loop and the simulator send it)."""
        return ShareGroupHeartbeatRequest(
            group_id=plan.group_id,
            member_id=plan.member_id,
            member_epoch=plan.member_epoch,
            rack_id=plan.rack_id,
            subscribed_topic_names=plan.subscribed_topic_names,
        )

    def answered(self, now: float, resp: ShareGroupHeartbeatResponse) -> HeartbeatOutcome:
        """Apply the ShareGroupHeartbeat answer ``resp`` received at ``now``
        (:meth:`on_response` with its fields)."""
        assignment = None
        if resp.assignment is not None:
            assignment = {t.topic_id: t.partitions for t in resp.assignment.topic_partitions}
        return self.on_response(
            now,
            error_code=resp.error_code,
            member_epoch=resp.member_epoch,
            heartbeat_interval_ms=resp.heartbeat_interval_ms,
            assignment=assignment,
            error_message=resp.error_message,
        )

    def on_response(
        self,
        now: float,
        *,
        error_code: int,
        member_epoch: int = 0,
        heartbeat_interval_ms: int = 0,
        assignment: Mapping[uuid.UUID, Iterable[int]] | None = None,
        error_message: str | None = None,
    ) -> HeartbeatOutcome:
        """Apply a ShareGroupHeartbeat response received at ``now`` (rules 2-6)."""
        sent = self._inflight
        if sent is None:
            raise RuntimeError("heartbeat response without a heartbeat in flight")
        self._inflight = None
        if heartbeat_interval_ms > 0:
            self._interval = heartbeat_interval_ms / 1000.0

        if sent.epoch == LEAVE_EPOCH:
            # Whatever the answer (GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID...), we are out.
            self._state = MemberState.LEFT
            self._epoch = JOIN_EPOCH
            return HeartbeatOutcome(self._state, self._set_assignment(frozenset()))
        if self._state is MemberState.LEAVING:
            # leave() came while this heartbeat was in flight: send the leave now.
            self._due = _AT_ONCE
            return HeartbeatOutcome(self._state)

        if error_code == ErrorCode.NONE:
            self._attempts = 0
            self._epoch = member_epoch
            self._state = MemberState.STABLE
            change = None
            if assignment is not None:
                new = frozenset(
                    TopicIdPartition(tid, p) for tid, parts in assignment.items() for p in parts
                )
                change = self._set_assignment(new)
            self._due = _AT_ONCE if change is not None else now + self._next_delay()
            return HeartbeatOutcome(self._state, change)

        return self._on_error_code(now, error_code, error_message)

    def _next_delay(self) -> float:
        """Seconds from a successful answer to the next heartbeat (rules 4 and 7)."""
        interval = self._interval if self._interval is not None else 0.0
        if self._assignment:
            # Assigned: no early heartbeats until the next join or subscription change,
            # even if a rebalance later takes every partition away (nothing is pending then).
            self._early_used = self._early_tries
            return interval
        if not self._topics or self._early_used >= self._early_tries:
            return interval  # nothing to wait for, or the early heartbeats are spent
        delay = self._early.delay(self._early_used)
        self._early_used += 1
        return delay if self._interval is None else min(delay, interval)

    def _retry_delay(self, *, first_at_once: bool = False) -> float:
        """Rule 8: the delay before retrying after the current run of errors, which it
        lengthens."""
        attempts = self._attempts
        self._attempts += 1
        if first_at_once:
            return -math.inf if attempts == 0 else self._backoff.delay(attempts - 1)
        return self._backoff.delay(attempts)

    def _on_error_code(self, now: float, code: int, message: str | None) -> HeartbeatOutcome:
        self._sent = _Sent()  # the coordinator may not have seen what we sent
        if code in _FENCED:
            self._state = MemberState.FENCED
            self._epoch = JOIN_EPOCH
            self._due = now + self._retry_delay(first_at_once=True)
            return HeartbeatOutcome(self._state, self._set_assignment(frozenset()))
        if code in _COORDINATOR_MOVED:
            self._due = now + self._retry_delay(first_at_once=True)
            return HeartbeatOutcome(self._state, find_coordinator=True)
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            topics = ", ".join(self._topics)
            detail = (
                f"group {self.group_id!r}, subscribed topics {topics} (a share consumer "
                "needs DESCRIBE and READ on each)"
            )
            err = error_for_code(code, f"{detail}: {message}" if message else detail)
            # A member in the group keeps (at least) its interval, as it would have.
            self._due = now + max(self._retry_delay(), self._interval or 0.0)
            return HeartbeatOutcome(self._state, error=err)
        err = error_for_code(code, message)
        if (
            code in _FATAL
            or code == ErrorCode.GROUP_ID_NOT_FOUND
            or not error_class_for_code(code).retriable
        ):
            self._state = MemberState.FATAL
            return HeartbeatOutcome(self._state, self._set_assignment(frozenset()), error=err)
        # COORDINATOR_LOAD_IN_PROGRESS and any other retriable code: back off, retry.
        self._due = now + self._retry_delay()
        return HeartbeatOutcome(self._state)

    def on_error(self, now: float) -> HeartbeatOutcome:
        """The heartbeat failed in transport (disconnect, timeout) at ``now``.

        A leave counts as done (best effort); otherwise retry after a backoff, after
        looking the coordinator up again.
        """
        sent = self._inflight
        if sent is None:
            raise RuntimeError("heartbeat failure without a heartbeat in flight")
        self._inflight = None
        if sent.epoch == LEAVE_EPOCH:
            self._state = MemberState.LEFT
            self._epoch = JOIN_EPOCH
            return HeartbeatOutcome(self._state, self._set_assignment(frozenset()))
        self._sent = _Sent()
        self._due = _AT_ONCE if self._state is MemberState.LEAVING else now + self._retry_delay()
        return HeartbeatOutcome(self._state, find_coordinator=True)

    def _set_assignment(self, new: frozenset[TopicIdPartition]) -> AssignmentChange | None:
        old = self._assignment
        if new == old:
            return None
        self._assignment = new
        return AssignmentChange(new, new - old, old - new)
