"""The decisions of one leader's fetch loop: what to send next, and what each answer means.

Rules of this module:

1. One request in flight per session. Each turn picks: a renew (IsRenewAck, no
   fetching) if any RENEW is marked, else a fetch carrying the pending acknowledgements
   when the buffer has room, else a ShareAcknowledge when acknowledgements waited
   ``ack_linger`` for room (counted from when they began to wait, whatever wakes the
   loop meanwhile) or a commit asked for them; a member holding more than it handles
   within half the lock has no room either, and its acks wait the same way (sent one by
   one, each freeing one place, they cost a request per record). Should the application
   run out of records meanwhile, they go at once (:meth:`FetchPlanner.records_wanted`).
   They wait only while every lock they answer has :data:`ACK_HOLD_MARGIN` left (and a
   lock of unknown end never waits). A
   loop that waits with nothing marked and no timeout (no room, say) is woken by the
   application's next answer to its session
   (:attr:`FetchPlanner.awaits_answer`), so that answer too waits ``ack_linger`` at most.
   A new session (epoch 0) cannot carry acknowledgements: it opens by fetching.
2. While this member holds acquired records of the session, a fetch does not wait at
   the broker (MaxWaitMs 0): a long poll would sit in front of the acknowledgements that
   free the broker's per-partition record locks. If such a fetch comes back empty the
   planner is *dry*: it waits for the application to answer something before fetching
   again, but no longer than a long poll would have waited (MaxWaitMs; the loop's idle
   wait, :meth:`.ShareMachine.idle_timeout`). An application may answer only once it has
   seen more records (handlers that wait for each other, a batch being gathered): waiting
   for its answer alone would stop it for good (found on a real broker, where a no-wait
   fetch can come back empty while records wait). Records *parked* (waiting out a delay: ``release(delay=)``, ``RetryLater``)
   do not count as held here: the application has answered them, their RELEASE is due
   only when the delay ends, so waiting for it would starve every other record. With
   nothing else held a fetch may wait at the broker, but no longer than the caller's
   ``wait_ms`` (until the next renew or release of a parked record falls due), so a
   long poll never sits in front of them either. After one empty answer the first
   answer goes at once: the broker's per-partition lock limit, under which that answer
   frees a place, may be what emptied it, and the refill then arrives while the
   application still works. From the second empty answer in a row the answers that end
   a dry spell *gather*: they wait ``ack_linger`` (from the first, as in rule 1, and
   never within :data:`ACK_HOLD_MARGIN` of a lock's end) to ride one fetch, and the loop
   wakes at once when the application runs out and waits for records
   (:meth:`FetchPlanner.records_wanted`). Woken by every answer, a slow handler working
   through records it holds cost one no-wait fetch per record, each coming back empty
   (about 1,000 requests for 2,000 records at 1 ms a record); gathering from the first
   empty answer cost a full-speed reader up to half its rate (the refill waited for the
   application to run out).
3. Error policy, per partition: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH mean the
   leader moved (use the answer's hint, else refresh metadata); UNKNOWN_TOPIC_OR_PARTITION
   and UNKNOWN_TOPIC_ID mean refresh metadata; either way the old leader's locks are gone.
   TOPIC_AUTHORIZATION_FAILED stops the consumer; any other code is noted and fetching
   goes on.
4. Error policy, top level: the session codes reset the session (see :mod:`.session`);
   authorization failures and UNSUPPORTED_VERSION stop the consumer; anything else fails
   the request's acknowledgements and backs off (refreshing metadata for unknown topics).
5. A transport failure or a session reset fails the acknowledgements of that session
   incarnation (reported, never re-sent), and its records in the buffer are dropped.
6. No I/O, no clock: time is the caller's ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final

from sharecon.protocol.error_codes import ErrorCode

from .ledger import AckFailure
from .session import RESET_CODES, RequestKind, SessionEvent

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping

    from sharecon.types import TopicIdPartition

    from .ledger import AckLedger, AckResult, Taken
    from .session import SessionTag, SharePlan, ShareSession

__all__ = [
    "ACK_HOLD_MARGIN",
    "Action",
    "AnswerVerdict",
    "FetchPlanner",
    "Turn",
    "answer_verdict",
    "connection_lost",
    "partition_action",
    "renewed",
    "top_level_action",
    "transport_failed",
]


class Action(Enum):
    """What the fetch loop does about an error code (rules 3 and 4)."""

    #: No error.
    OK = "ok"
    #: The partition's leader moved: drop the old leader's locks, re-route by the hint.
    LEADER_MOVED = "leader moved"
    #: The topic or partition is unknown here: drop the locks, refresh metadata.
    REFRESH_METADATA = "refresh metadata"
    #: The share session is gone: fail its acks, drop its buffered records, reopen.
    RESET_SESSION = "reset session"
    #: Stop the consumer: the application's next wait raises the error.
    FATAL = "fatal"
    #: Fail this request's acknowledgements and back off before the next request.
    BACK_OFF = "back off"
    #: Remember the error (``recent_errors``) and go on.
    NOTE = "note"


_PARTITION_ACTIONS: dict[int, Action] = {
    ErrorCode.NONE: Action.OK,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: Action.LEADER_MOVED,
    ErrorCode.FENCED_LEADER_EPOCH: Action.LEADER_MOVED,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Action.REFRESH_METADATA,
    ErrorCode.UNKNOWN_TOPIC_ID: Action.REFRESH_METADATA,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: Action.FATAL,
}

_FATAL_TOP = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
_UNKNOWN_TOPIC = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


def partition_action(code: int) -> Action:
    """The action for a partition-level ``ErrorCode`` of a ShareFetch/ShareAcknowledge
    answer (rule 3)."""
    return _PARTITION_ACTIONS.get(code, Action.NOTE)


def top_level_action(kind: RequestKind, code: int) -> Action:
    """The action for the top-level ``ErrorCode`` of an answer (rule 4)."""
    if code == ErrorCode.NONE:
        return Action.OK
    if code in RESET_CODES[kind]:
        return Action.RESET_SESSION
    if code in _FATAL_TOP:
        return Action.FATAL
    if code in _UNKNOWN_TOPIC:
        return Action.REFRESH_METADATA
    return Action.BACK_OFF


# -- planning ------------------------------------------------------------------------------

#: Acks wait for room in the buffer (rule 1) only while every lock they answer has at least
#: this many seconds left: an answer must reach the broker before its lock ends.
ACK_HOLD_MARGIN: Final = 1.0


@dataclass(frozen=True, slots=True)
class Turn:
    """The next request of a session, or ``plan=None`` to wait.

    ``taken`` are the acknowledgements it carries (now SENT in the ledger); ``may_wait``
    says whether a fetch may wait at the broker (rule 2), and ``wait_ms``, when not
    ``None``, how long at most; ``granted`` is how many records a fetch may acquire under
    a strict record limit (0: no limit, or not a fetch).
    """

    plan: SharePlan | None
    taken: Taken | None = None
    may_wait: bool = True
    granted: int = 0
    wait_ms: int | None = None


class FetchPlanner:
    """Picks each request of one share session (rules 1 and 2)."""

    __slots__ = (
        "awaits_answer",
        "dry",
        "empty_streak",
        "gathering",
        "held_since",
        "linger_expired",
        "session",
        "wanted",
    )

    def __init__(self, session: ShareSession) -> None:
        self.session = session
        #: A no-wait fetch found nothing acquirable: wait for answers before the next one.
        self.dry = False
        #: Acks waited ``ack_linger`` with no request to carry them: send them on their own.
        self.linger_expired = False
        #: Since when acks have waited for room in the buffer to ride a fetch (rule 1);
        #: ``None`` while none wait so.
        self.held_since: float | None = None
        #: The loop waits for a wake-up with nothing to send and no timeout (no room, no
        #: acks marked): the application's next answer must wake it, so the answer waits
        #: ``ack_linger`` at most (rule 1), not until something else wakes the loop.
        self.awaits_answer = False
        #: Answers came after a dry fetch: they gather to ride one fetch (rule 2).
        self.gathering = False
        #: No-wait fetches answered empty in a row: answers gather from the second on.
        self.empty_streak = 0
        #: The application ran out and waits for records: acks wait no more (rules 1, 2).
        self.wanted = False

    def next(
        self,
        ledger: AckLedger,
        want: Iterable[TopicIdPartition],
        *,
        room: bool,
        urgent: bool = False,
        extra_records: int = 0,
        parked: Mapping[TopicIdPartition, Container[int]] | None = None,
        wait_ms: int | None = None,
        buffer_full: bool = False,
        now: float | None = None,
    ) -> Turn:
        """Plan the next request.

        :param want: the assigned partitions this node leads.
        :param room: whether the buffer can take another answer.
        :param urgent: a ``commit()`` is waiting for the acknowledgements.
        :param extra_records: records received but not buffered yet (pipelining).
        :param parked: offsets waiting out a delay, per partition: not held (rule 2).
        :param wait_ms: while any are parked, the longest a fetch may wait at the broker.
        :param buffer_full: there is no room because the member holds enough: its buffer
            is full, or it holds more than it handles within half the lock (not because
            of a strict budget, sized to what it may hold): acks may wait for room
            (rule 1).
        :param now: the time; without it acks never wait for room or gather.
        """
        session = self.session
        self.awaits_answer = False  # the loop is planning: awake
        if session.is_new:
            return Turn(session.build_fetch(want) if room else None)
        tag = session.tag
        # Answers that must go now go on their own unless a fetch carries them anyway: a
        # commit's, and those whose linger ended, except gathered ones (rule 2: the
        # fetch is what they waited for).
        alone = urgent or (self.linger_expired and not self.gathering)
        urgent = urgent or self.linger_expired
        marked = ledger.has_marked(tag)
        if not marked:
            self.held_since = None
        if parked:
            holding = extra_records > 0 or ledger.has_outstanding_besides(tag, parked)
        else:
            holding = extra_records > 0 or ledger.has_outstanding(tag)
            wait_ms = None
        if self.dry and not marked and not urgent and holding:
            return Turn(None, None, not holding)  # rule 2: wait for answers
        if (
            marked
            and not urgent
            and not self.wanted
            and now is not None
            and (
                (buffer_full and not room)
                or ((self.gathering or self.dry) and room and self.empty_streak > 1)
            )
            and ledger.marked_deadline(tag) - ACK_HOLD_MARGIN > now
        ):
            # Rule 1: the acks wait (ack_linger at most) for room to ride the next fetch.
            # Sent alone now, they would hold the session's one request slot for a round
            # trip just as the buffer frees up, and the fetch would wait behind them.
            # Rule 2: after a dry fetch they wait as long for company (those given before
            # its empty answer came too): a fetch now would most likely come back as
            # empty as the last one. Should the application run out of records
            # meanwhile, records_wanted() ends either wait.
            if self.held_since is None:
                self.held_since = now
            return Turn(None, None, not holding)
        taken = ledger.take(tag) if marked else None
        self.linger_expired = False
        self.held_since = None
        self.gathering = self.wanted = False
        plan: SharePlan | None
        if taken is not None and taken.is_renew:
            plan = session.build_acknowledge(taken.acks, is_renew=True)
        elif taken is not None and (alone or not room):
            plan = session.build_acknowledge(taken.acks)
        elif room:
            plan = session.build_fetch(want, taken.acks if taken else None)
        else:
            plan = None
        if plan is None and taken is not None:
            # Cannot happen with acks in hand; never strand them in SENT state.
            raise AssertionError(f"{tag}: acknowledgements taken but no request built")
        return Turn(plan, taken, not holding, wait_ms=None if holding else wait_ms)

    def fetched(self, plan: SharePlan, *, may_wait: bool, acquired: int) -> None:
        """A fetch was answered with ``acquired`` records: dry if a no-wait fetch got none."""
        self.dry = dry = not may_wait and acquired == 0 and bool(plan.fetches)
        self.empty_streak = self.empty_streak + 1 if dry else 0

    def answered(self) -> bool:
        """The application answered records; True if the planner was dry (wake the loop:
        the answers begin to gather, rule 2)."""
        was = self.dry
        if was:
            self.dry = False
            self.gathering = True
        return was

    def records_wanted(self) -> bool:
        """The application waits for records: acks waiting for room or gathering go at
        once (rules 1 and 2). True if some waited (wake the loop)."""
        if self.held_since is None or self.wanted:
            return False
        self.wanted = True
        return True


# -- answers ------------------------------------------------------------------------------


@dataclass(slots=True)
class AnswerVerdict:
    """What the top level of an answer means for the session and its acknowledgements.

    ``proceed``: apply the answer's body (acks per partition, records). ``results``: ack
    outcomes to report now. ``lost``: the session incarnation whose records are gone
    (drop them from the buffer), if any.
    """

    action: Action
    proceed: bool
    results: list[AckResult] = field(default_factory=list)
    lost: SessionTag | None = None


def answer_verdict(
    session: ShareSession, ledger: AckLedger, plan: SharePlan, code: int
) -> AnswerVerdict:
    """Apply an answer's top-level ``code`` to the session and the ledger (rules 4, 5)."""
    outcome = session.on_response(plan, code)
    if outcome.event is SessionEvent.STALE:
        return AnswerVerdict(Action.OK, proceed=False)
    if outcome.event is SessionEvent.RESET:
        results = ledger.invalidate(AckFailure.SESSION_RESET, code, tag=outcome.tag)
        return AnswerVerdict(Action.RESET_SESSION, False, results, lost=outcome.tag)
    if outcome.event is SessionEvent.CLOSED:
        results = ledger.complete_all(plan.tag, code) if code else []
        return AnswerVerdict(top_level_action(plan.kind, code), code == 0, results)
    if code:
        action = top_level_action(plan.kind, code)
        return AnswerVerdict(action, False, ledger.complete_all(plan.tag, code))
    return AnswerVerdict(Action.OK, proceed=True)


def transport_failed(session: ShareSession, ledger: AckLedger, plan: SharePlan) -> AnswerVerdict:
    """The request for ``plan`` failed in transport: the session incarnation is gone (rule 5)."""
    outcome = session.on_transport_error(plan)
    if outcome.event is SessionEvent.STALE:
        return AnswerVerdict(Action.OK, proceed=False)
    results = ledger.invalidate(
        AckFailure.SESSION_RESET, ErrorCode.NETWORK_EXCEPTION, tag=outcome.tag
    )
    return AnswerVerdict(Action.RESET_SESSION, False, results, lost=outcome.tag)


def connection_lost(session: ShareSession, ledger: AckLedger) -> AnswerVerdict:
    """The connection the session lived on is gone, with no request out: the broker ends a
    share session with its connection and releases the member's records (Kafka 4.1+), so
    this incarnation is over (rule 5)."""
    if session.is_new:
        return AnswerVerdict(Action.OK, proceed=False)
    old = session.reset()
    results = ledger.invalidate(AckFailure.SESSION_RESET, ErrorCode.NETWORK_EXCEPTION, tag=old)
    return AnswerVerdict(Action.RESET_SESSION, False, results, lost=old)


def renewed(
    plan: SharePlan, *, ok: bool, codes: Mapping[TopicIdPartition, int] | None = None
) -> tuple[set[TopicIdPartition], set[TopicIdPartition]]:
    """Which partitions of a renew ``plan`` had their locks extended, and which did not.

    ``ok`` is false when the whole request failed; ``codes`` are the per-partition
    answers (a partition the answer omits counts as renewed only when ``codes`` is None,
    as ShareFetch's renew answers carry no per-partition acknowledgement for it).
    """
    good: set[TopicIdPartition] = set()
    bad: set[TopicIdPartition] = set()
    if not plan.is_renew:
        return good, bad
    for tp in plan.acks:
        if ok and (codes is None or codes.get(tp, ErrorCode.NONE) == ErrorCode.NONE):
            good.add(tp)
        else:
            bad.add(tp)
    return good, bad
