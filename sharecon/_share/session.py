"""One share session per leader broker: epochs, the session's partitions, request contents.

Rules of this module:

1. Every change to ShareSessionEpoch happens here. ``0`` opens (replacing any session the
   broker holds for this member) and must not carry acknowledgements; then 1, 2, ...,
   wrapping from 2**31-1 back to 1; ``-1`` closes.
2. :meth:`ShareSession.reset` clears the epoch AND the session partition set together, and
   starts a new *generation*: records acquired under an older generation can no longer be
   acknowledged (see :mod:`.ledger`).
3. At most one request is in flight. The epoch advances only on the answer to the request
   that is still current; a late answer (after a reset) is STALE and changes nothing.
4. SHARE_SESSION_NOT_FOUND (122), INVALID_SHARE_SESSION_EPOCH (123), SHARE_SESSION_LIMIT_REACHED
   (133, ShareFetch only) and transport errors reset; any other top-level error still
   advances the epoch (as the reference client does).
5. Requests are described, not encoded: a :class:`SharePlan` says which partitions to add,
   which to forget and which acknowledgements to carry; the consumer builds the message.
6. No I/O, no clock.
7. A fetch costs nothing per unchanged partition: given the same tuple of partitions as
   the last fetch (the consumer keeps one per leader until the metadata or the assignment
   changes), :meth:`ShareSession.build_fetch` compares nothing, so a session of 300
   partitions plans a fetch as fast as one of 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    import uuid
    from collections.abc import Iterable, Mapping, Sequence

    from sharecon.types import TopicIdPartition

    from .acks import AckBatch

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "MAX_EPOCH",
    "RESET_CODES",
    "RequestKind",
    "SessionEvent",
    "SessionOutcome",
    "SessionTag",
    "SharePlan",
    "ShareSession",
    "next_epoch",
]

#: Opens a share session (and must not carry acknowledgements).
INITIAL_EPOCH = 0
#: Closes a share session.
FINAL_EPOCH = -1
#: The largest epoch; the next one is 1 (0 would mean "open a new session").
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The ShareSessionEpoch after ``epoch``: -1 stays -1; 2**31-1 wraps to 1 (rule 1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class SessionTag:
    """Names one incarnation of a share session: the leader node and its reset count."""

    node_id: int
    generation: int


class RequestKind(Enum):
    """Which API a plan is for."""

    SHARE_FETCH = "ShareFetch"
    SHARE_ACKNOWLEDGE = "ShareAcknowledge"


class SessionEvent(Enum):
    """What an answer did to the session."""

    #: The epoch advanced; apply the response (its top-level code may still be an error).
    ADVANCED = "advanced"
    #: The session was reset to epoch 0: fail what was in flight, resend a full request.
    RESET = "reset"
    #: The FINAL (-1) request was answered; the session is gone (a new one may be opened).
    CLOSED = "closed"
    #: The answer is for a request that is no longer current; ignore it.
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class SharePlan:
    """What to put in the next ShareFetch / ShareAcknowledge of one session.

    ``added`` go in ``Topics`` without acknowledgements; ``acks`` go in ``Topics`` with
    their batches; ``forgotten`` go in ``ForgottenTopicsData`` (a partition may be in
    both ``acks`` and ``forgotten``: its acks are sent and it stays out of the session).

    When ``fetches`` is false (renew, final) the ShareFetch must not fetch: for renew the
    broker requires MaxWaitMs, MinBytes, MaxBytes and MaxRecords to be 0.
    """

    kind: RequestKind
    tag: SessionTag
    epoch: int
    added: tuple[TopicIdPartition, ...]
    forgotten: tuple[TopicIdPartition, ...]
    acks: Mapping[TopicIdPartition, Sequence[AckBatch]]
    is_renew: bool = False

    @property
    def node_id(self) -> int:
        """The leader broker this request goes to."""
        return self.tag.node_id

    @property
    def is_final(self) -> bool:
        """Whether this request closes the session (epoch -1)."""
        return self.epoch == FINAL_EPOCH

    @property
    def fetches(self) -> bool:
        """Whether the request may fetch (send real fetch parameters)."""
        return self.kind is RequestKind.SHARE_FETCH and not self.is_renew and not self.is_final

    def topics(self) -> dict[uuid.UUID, dict[int, Sequence[AckBatch]]]:
        """``Topics`` grouped by topic id: partition -> its acknowledgement batches."""
        out: dict[uuid.UUID, dict[int, Sequence[AckBatch]]] = {}
        for tp in self.added:
            out.setdefault(tp.topic_id, {})[tp.partition] = ()
        for tp, batches in self.acks.items():
            out.setdefault(tp.topic_id, {})[tp.partition] = batches
        return out

    def forgotten_topics(self) -> dict[uuid.UUID, list[int]]:
        """``ForgottenTopicsData`` grouped by topic id."""
        out: dict[uuid.UUID, list[int]] = {}
        for tp in self.forgotten:
            out.setdefault(tp.topic_id, []).append(tp.partition)
        return out


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    """The result of :meth:`ShareSession.on_response` / :meth:`ShareSession.on_transport_error`.

    ``tag`` is the incarnation the request belonged to: on RESET, invalidate the
    acknowledgement ledger for it; otherwise complete its in-flight acknowledgements.
    """

    event: SessionEvent
    tag: SessionTag
    error_code: int = 0


#: Top-level codes after which the broker holds no usable session for us (rule 4).
RESET_CODES = {
    RequestKind.SHARE_FETCH: frozenset(
        {
            ErrorCode.SHARE_SESSION_NOT_FOUND,
            ErrorCode.INVALID_SHARE_SESSION_EPOCH,
            ErrorCode.SHARE_SESSION_LIMIT_REACHED,
        }
    ),
    RequestKind.SHARE_ACKNOWLEDGE: frozenset(
        {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}
    ),
}


class ShareSession:
    """The client side of one share session with one leader broker (rules 1-6)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._epoch = INITIAL_EPOCH
        self._generation = 0
        # dict as an ordered set: requests list partitions in a stable order.
        self._partitions: dict[TopicIdPartition, None] = {}
        # The tuple of partitions last planned (rule 7): the same object again means the
        # same partitions.
        self._want: tuple[TopicIdPartition, ...] | None = None
        self._inflight: SharePlan | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next request will carry."""
        return self._epoch

    @property
    def generation(self) -> int:
        """How many times the session was reset or closed."""
        return self._generation

    @property
    def tag(self) -> SessionTag:
        """The current incarnation; records fetched now are acknowledged under it."""
        return SessionTag(self.node_id, self._generation)

    @property
    def is_new(self) -> bool:
        """Whether the next request opens the session (epoch 0, no acks possible)."""
        return self._epoch == INITIAL_EPOCH

    @property
    def in_flight(self) -> SharePlan | None:
        """The request awaiting its answer, if any."""
        return self._inflight

    @property
    def partitions(self) -> tuple[TopicIdPartition, ...]:
        """The partitions the broker holds in this session (as we last told it)."""
        return tuple(self._partitions)

    def holds(self, tp: TopicIdPartition) -> bool:
        """Whether ``tp`` is one of this session's partitions (as we last told the broker)."""
        return tp in self._partitions

    def reset(self) -> SessionTag:
        """Forget the session: epoch 0, no partitions, a new generation (rule 2).

        :returns: the tag of the incarnation that ended.
        """
        old = self.tag
        self._epoch = INITIAL_EPOCH
        self._partitions = {}
        self._want = None
        self._generation += 1
        self._inflight = None
        return old

    # -- building requests -------------------------------------------------------------

    def _check_idle(self) -> None:
        if self._inflight is not None:
            raise RuntimeError(
                f"share session with node {self.node_id} already has "
                f"{self._inflight.kind.value} epoch {self._inflight.epoch} in flight"
            )

    def _check_acks(self, acks: Mapping[TopicIdPartition, Sequence[AckBatch]]) -> None:
        if acks and self.is_new:
            raise ValueError(
                f"share session with node {self.node_id} is at epoch 0: "
                "a new session cannot carry acknowledgements"
            )

    def build_fetch(
        self,
        want: Iterable[TopicIdPartition],
        acks: Mapping[TopicIdPartition, Sequence[AckBatch]] | None = None,
        *,
        is_renew: bool = False,
    ) -> SharePlan | None:
        """Plan the next ShareFetch and mark it in flight.

        :param want: the partitions this node leads that we want to fetch from.
        :param acks: acknowledgements to piggyback (from :meth:`.AckLedger.take`); must be
            empty on a new session.
        :param is_renew: the acks contain RENEW: the request fetches nothing and changes no
            session partitions (``IsRenewAck=true``, zeroed fetch parameters).
        :returns: ``None`` when there is nothing to send: no partitions for a new session,
            or an incremental request with no change and no acks on an empty session.
        :raises RuntimeError: if a request is already in flight.
        :raises ValueError: for acks on a new session, or a renew without acks.
        """
        self._check_idle()
        acks = dict(acks or {})
        self._check_acks(acks)
        if is_renew:
            if not acks:
                raise ValueError("a renew ShareFetch needs acknowledgements")
            forgotten = tuple(tp for tp in acks if tp not in self._partitions)
            return self._send(RequestKind.SHARE_FETCH, (), forgotten, acks, is_renew=True)
        if want is self._want and not self.is_new:
            # The very tuple planned last time (rule 7): nothing added or removed, and
            # nothing per partition to do, however many the session holds.
            if not acks and not self._partitions:
                return None
            partitions = self._partitions
            forgotten = tuple(tp for tp in acks if tp not in partitions)
            return self._send(RequestKind.SHARE_FETCH, (), forgotten, acks)
        self._want = want if type(want) is tuple else None
        wanted = dict.fromkeys(want)
        if self.is_new:
            if not wanted:
                return None
            self._partitions = wanted
            return self._send(RequestKind.SHARE_FETCH, tuple(wanted), (), {})
        added = tuple(tp for tp in wanted if tp not in self._partitions)
        removed = [tp for tp in self._partitions if tp not in wanted]
        self._partitions = wanted
        # A partition present only for its acks must not join the session.
        forgotten = tuple(removed) + tuple(
            tp for tp in acks if tp not in wanted and tp not in removed
        )
        if not added and not forgotten and not acks and not self._partitions:
            return None
        return self._send(RequestKind.SHARE_FETCH, added, forgotten, acks)

    def build_acknowledge(
        self,
        acks: Mapping[TopicIdPartition, Sequence[AckBatch]],
        *,
        is_renew: bool = False,
    ) -> SharePlan | None:
        """Plan a ShareAcknowledge carrying ``acks`` and mark it in flight.

        :returns: ``None`` if ``acks`` is empty.
        :raises RuntimeError: if a request is already in flight.
        :raises ValueError: on a new session (ShareAcknowledge cannot open one).
        """
        self._check_idle()
        if not acks:
            return None
        self._check_acks(acks)
        return self._send(RequestKind.SHARE_ACKNOWLEDGE, (), (), dict(acks), is_renew=is_renew)

    def build_close(
        self,
        acks: Mapping[TopicIdPartition, Sequence[AckBatch]] | None = None,
        *,
        kind: RequestKind = RequestKind.SHARE_ACKNOWLEDGE,
        is_renew: bool = False,
    ) -> SharePlan | None:
        """Plan the FINAL (-1) request: carry the last acks, then the broker closes the
        session and releases every record still acquired by this member.

        :returns: ``None`` if no session is open (epoch 0: a FINAL request would only get
            SHARE_SESSION_NOT_FOUND).
        :raises RuntimeError: if a request is already in flight.
        """
        self._check_idle()
        if self.is_new:
            if acks:
                raise ValueError("acknowledgements for a share session that is not open")
            return None
        return self._send(kind, (), (), dict(acks or {}), is_renew=is_renew, final=True)

    def _send(
        self,
        kind: RequestKind,
        added: tuple[TopicIdPartition, ...],
        forgotten: tuple[TopicIdPartition, ...],
        acks: Mapping[TopicIdPartition, Sequence[AckBatch]],
        *,
        is_renew: bool = False,
        final: bool = False,
    ) -> SharePlan:
        plan = SharePlan(
            kind=kind,
            tag=self.tag,
            epoch=FINAL_EPOCH if final else self._epoch,
            added=added,
            forgotten=forgotten,
            acks=acks,
            is_renew=is_renew,
        )
        self._inflight = plan
        return plan

    # -- answers -----------------------------------------------------------------------

    def on_response(self, plan: SharePlan, error_code: int) -> SessionOutcome:
        """Apply the top-level ``ErrorCode`` of the answer to ``plan`` (rules 3 and 4)."""
        if plan is not self._inflight:
            return SessionOutcome(SessionEvent.STALE, plan.tag, error_code)
        self._inflight = None
        if plan.is_final:
            self.reset()
            return SessionOutcome(SessionEvent.CLOSED, plan.tag, error_code)
        if error_code in RESET_CODES[plan.kind]:
            self.reset()
            return SessionOutcome(SessionEvent.RESET, plan.tag, error_code)
        self._epoch = next_epoch(self._epoch)
        return SessionOutcome(SessionEvent.ADVANCED, plan.tag, error_code)

    def on_transport_error(self, plan: SharePlan) -> SessionOutcome:
        """The request failed in transport (disconnect, timeout): reset (rule 4).

        When the connection closed, the broker (Kafka 4.1+) drops the session and releases
        our records at once; after a timeout on a live connection they stay locked until
        their lock ends. Either way this generation's acquisitions are no longer ours to
        acknowledge.
        """
        if plan is not self._inflight:
            return SessionOutcome(SessionEvent.STALE, plan.tag, ErrorCode.NETWORK_EXCEPTION)
        self.reset()
        event = SessionEvent.CLOSED if plan.is_final else SessionEvent.RESET
        return SessionOutcome(event, plan.tag, ErrorCode.NETWORK_EXCEPTION)
