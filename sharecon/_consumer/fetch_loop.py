"""One leader's fetch loop as a sans-I/O state machine: its whole request lifecycle, once.

The consumer's :class:`~sharecon._consumer.fetcher.NodeFetcher` (anyio: sockets, timers,
a wake-up signal) and the simulator's member (:mod:`sharecon.testing.sim`: the model
broker, a virtual clock) both run this machine; each is only a port that carries out
the actions it asks for and tells it what happened. The shape is h11's: the port pulls
the next :data:`Action` with :meth:`FetchLoop.next`, carries it out, and reports the
outcome with an event method (:meth:`~FetchLoop.sent`, :meth:`~FetchLoop.answered`,
:meth:`~FetchLoop.failed`, ...). What is decided here, the port must not decide again:
before this machine the simulator copied the loop, and a cut while the session's FINAL
request was out went right in the consumer and wrong in the copy.

The lifecycle: plan a turn (or wait idle, or pause for a back-off), send, await the
answer, take it in (with the pipelined next request sent in between, by the
:class:`~sharecon._consumer.fetch_driver.FetchDriver`), and around again; a transport
failure, a timeout or a connection cut (idle, or with a request out) ends the session
incarnation; when the loop stops (closing, or the consumer failed) the request still out
is answered first; then :meth:`FetchLoop.close` sends the FINAL (-1) request, whose
answer, failure or cut closes the session.

Rules of this module:

1. No I/O, no clock, no randomness of its own: time is passed in with every call, the
   back-off's random source is the caller's.
2. One request in flight per session. The port reports the outcome of every
   :class:`Send` (:meth:`~FetchLoop.sent` or :meth:`~FetchLoop.send_failed`) and of every
   request on the wire (:meth:`~FetchLoop.answered`, :meth:`~FetchLoop.failed`,
   :meth:`~FetchLoop.answer_error`) before it asks for the next action; an outcome
   reported for a request that is not the one out changes nothing.
3. Effects come out in the order the share machine emitted them, as :class:`Apply`
   actions, and the port carries each out before it asks again. The machine's
   ``BackOff`` effects are the loop's own: they become a :class:`Pause` before the next
   turn (jittered, growing with each failure in a row, reset by any answer), never an
   effect for the port.
4. A failure of the FINAL request, however it comes (a failed send, a transport error, a
   cut, an answer that cannot be read), closes the session as failed
   (``ShareMachine.transport_failed`` without back-off): the leader is done with.
5. The connection the session lived on closed with no request out: the session
   incarnation is over before the next turn, and before the FINAL request (which then
   has no session to close).
6. A request's outcome ends with :class:`Done`: the port may then tell waiters (a
   ``commit()``) that an answer was taken in.
7. A :class:`~sharecon.errors.KafkaError` raised while an answer's records are taken in
   resets the session here (:meth:`FetchLoop.answer_error`). Any other exception comes
   out of :meth:`FetchLoop.next`: the consumer's port types it and hands it back with
   :meth:`FetchLoop.answer_error`; the simulator lets it crash the schedule (a bug).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol, cast

from sharecon import errors
from sharecon._consumer.fetch_driver import Apply as _DriverApply
from sharecon._share.effects import BackOff
from sharecon._share.session import RequestKind

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Generator, Mapping

    from sharecon._backoff import Backoff
    from sharecon._consumer.fetch_driver import FetchDriver, Step
    from sharecon._consumer.fetch_driver import Send as _DriverSend
    from sharecon._share.effects import Effect
    from sharecon._share.fetch_policy import Turn
    from sharecon._share.ledger import Taken
    from sharecon._share.machine import FetchAnswer, InFlight
    from sharecon.protocol import (
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchRequest,
        ShareFetchResponse,
    )

__all__ = [
    "CLOSED",
    "STOPPED",
    "Action",
    "Apply",
    "Await",
    "Closed",
    "Done",
    "FetchCounts",
    "FetchLoop",
    "Idle",
    "Pause",
    "Phase",
    "Send",
    "Stopped",
]


class Phase(IntEnum):
    """Where the loop is."""

    READY = 0  #: nothing out: the next action plans a turn (or idles, pauses, stops)
    SENDING = 1  #: a request was handed to the port to send
    AWAITING = 2  #: a request is on the wire
    ANSWERING = 3  #: the outcome of a request is being taken in
    STOPPED = 4  #: the loop is over (closing, or the consumer failed); the session stays
    FINISHING = 5  #: :meth:`FetchLoop.close` was called: the FINAL request comes next
    CLOSING = 6  #: the FINAL request is being sent, or is out
    CLOSED = 7  #: the session is closed (or there was none): nothing more to do


@dataclass(frozen=True, slots=True)
class Apply:
    """Carry out these effects, in order, then ask again (rule 3). The first step of a
    ShareFetch answer also carries what its session part said (for the port's counters)."""

    effects: list[Effect]
    answer: FetchAnswer | None = None
    f: InFlight | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """Put ``body`` on the wire; then report :meth:`FetchLoop.sent` or
    :meth:`FetchLoop.send_failed` (rule 2)."""

    body: ShareFetchRequest | ShareAcknowledgeRequest
    #: The acknowledgements it carries (for the port's counters).
    taken: Taken | None
    #: The session's FINAL (-1) request: the loop is over, nothing to watch.
    final: bool = False


@dataclass(frozen=True, slots=True)
class Await:
    """Wait for the answer to ``f``, at most ``timeout`` seconds; then report
    :meth:`FetchLoop.answered`, :meth:`FetchLoop.failed` or :meth:`FetchLoop.answer_error`."""

    f: InFlight
    timeout: float


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing to send: wait for a wake-up. ``timeout`` (when not ``None``): report
    :meth:`FetchLoop.idle_expired` if no wake-up came within it (acknowledgements wait
    their linger, or a fetch came back empty while records are held)."""

    timeout: float | None


@dataclass(frozen=True, slots=True)
class Pause:
    """Back off until ``until``: wake-ups do not end the pause, the loop stopping does.
    ``refresh``: find the leaders again (metadata) first."""

    until: float
    refresh: bool


@dataclass(frozen=True, slots=True)
class Done:
    """The outcome of request ``f`` is taken in (rule 6)."""

    f: InFlight | None
    #: An answer came (not a failure in transport).
    answered: bool
    #: ... and was taken in without an error.
    ok: bool
    #: It was the FINAL request.
    final: bool


@dataclass(frozen=True, slots=True)
class Stopped:
    """The loop is over; the session stays open until :meth:`FetchLoop.close`."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The session is closed (or there was none): nothing more to do."""


STOPPED = Stopped()
CLOSED = Closed()

Action = Apply | Send | Await | Idle | Pause | Done | Stopped | Closed


class FetchCounts(Protocol):
    """Who counts the fetches that could still bring records (``stop_fetching()``,
    :mod:`sharecon._share.drain`)."""

    def fetch_planned(self, node_id: int) -> None:
        """A fetch was planned (before it is sent)."""

    def fetch_ended(self, node_id: int) -> None:
        """A fetch is over: its records are in, or it failed."""


class FetchLoop:
    """One leader's request lifecycle (rules 1-7).

    :param driver: the loop's decisions and the order of the share machine's calls.
    :param member_id: the member's id, for the requests.
    :param running: whether the loop goes on (false once closing, or the consumer
        failed); read before each turn, and when an answer comes (it may pipeline only
        while running).
    :param closing: whether the member is closing (records that come then are released).
    :param backoff: the pauses after failures (its random source is the caller's).
    :param timeout: how long to await a ShareFetch answer (a probe may be awaited longer).
    :param ack_timeout: how long to await any other answer.
    :param ack_linger: how long acknowledgements may wait for a fetch to carry them.
    :param counts: told of each fetch planned and ended (``None``: nobody counts).
    """

    __slots__ = (
        "_conn_dead",
        "_f",
        "_failures",
        "_final",
        "_timed",
        "_next",
        "_ok",
        "_out",
        "_pause_until",
        "_refresh",
        "_steps",
        "_turn",
        "_answered",
        "_close_timeout",
        "ack_linger",
        "ack_timeout",
        "backoff",
        "closing",
        "counts",
        "driver",
        "member_id",
        "node_id",
        "phase",
        "running",
        "timeout",
    )

    def __init__(
        self,
        driver: FetchDriver,
        member_id: str,
        *,
        running: Callable[[], bool],
        closing: Callable[[], bool],
        backoff: Backoff,
        timeout: float,
        ack_timeout: float,
        ack_linger: float,
        counts: FetchCounts | None = None,
    ) -> None:
        self.driver = driver
        self.node_id = driver.node_id
        self.member_id = member_id
        self.running = running
        self.closing = closing
        self.backoff = backoff
        self.timeout = timeout
        self.ack_timeout = ack_timeout
        self.ack_linger = ack_linger
        self.counts = counts
        self.phase = Phase.READY
        #: How long the FINAL request's answer is awaited, if less than ``ack_timeout``.
        self._close_timeout: float | None = None
        #: Effects to hand out before anything else (rule 3).
        self._out: list[Effect] = []
        #: The turn being sent (SENDING, or a pipelined send while ANSWERING).
        self._turn: Turn | None = None
        #: The request out (AWAITING, CLOSING), or whose outcome is taken in (ANSWERING).
        self._f: InFlight | None = None
        #: The pipelined next request, sent while an answer is taken in.
        self._next: InFlight | None = None
        #: The driver's steps for the ShareFetch answer being taken in.
        self._steps: Generator[Step, None, None] | None = None
        self._answered = False  #: the outcome being taken in is an answer
        self._ok = False  #: ... taken in without an error so far
        self._final = False  #: ... of the FINAL request
        self._conn_dead = False
        self._pause_until = float("-inf")
        self._refresh = False
        self._failures = 0
        self._timed = False  #: the last Idle had a timeout

    # -- what the port reads ------------------------------------------------------------------

    @property
    def inflight(self) -> InFlight | None:
        """The request on the wire (``None``: none is)."""
        phase = self.phase
        return self._f if phase is Phase.AWAITING or phase is Phase.CLOSING else None

    @property
    def answering(self) -> bool:
        """Whether the outcome of a request is being taken in."""
        return self.phase is Phase.ANSWERING

    @property
    def conn_dead(self) -> bool:
        """Whether the session's connection closed and the loop has not noticed yet."""
        return self._conn_dead

    @property
    def pause_until(self) -> float:
        """When the current back-off ends (in the past: none)."""
        return self._pause_until

    # -- the next action -------------------------------------------------------------------

    def next(self, now: float) -> Action:
        """What the port should do now (rules 2 and 3)."""
        out = self._out
        if out:
            self._out = []
            return Apply(out)
        phase = self.phase
        if phase is Phase.ANSWERING:
            return self._answering(now)
        if phase is Phase.READY:
            return self._ready(now)
        if phase is Phase.AWAITING:
            f = self._f
            assert f is not None
            if f.plan.kind is RequestKind.SHARE_FETCH:
                return Await(f, self.driver.fetch_timeout(f, self.timeout))
            return Await(f, self.ack_timeout)
        if phase is Phase.STOPPED:
            return STOPPED
        if phase is Phase.FINISHING:
            return self._finishing(now)
        if phase is Phase.CLOSING:
            f = self._f
            assert f is not None
            limit = self._close_timeout
            return Await(f, self.ack_timeout if limit is None else min(self.ack_timeout, limit))
        if phase is Phase.CLOSED:
            return CLOSED
        raise RuntimeError(f"node {self.node_id}: report the send before asking again")

    def _ready(self, now: float) -> Action:
        if not self.running():
            self.phase = Phase.STOPPED
            return STOPPED
        if now < self._pause_until:
            refresh = self._refresh
            self._refresh = False
            return Pause(self._pause_until, refresh)
        driver = self.driver
        if self._conn_dead:  # rule 5
            self._conn_dead = False
            effects = driver.connection_lost()
            if effects:
                return Apply(effects)
        turn = driver.turn()
        plan = turn.plan
        if plan is None:
            timeout = driver.idle_timeout(self.ack_linger, now)
            self._timed = timeout is not None
            return Idle(timeout)
        return self._send(turn)

    def _send(self, turn: Turn) -> Send:
        plan = turn.plan
        assert plan is not None
        if plan.fetches and self.counts is not None:
            # Counted before the send (rule 1 of _share.drain).
            self.counts.fetch_planned(self.node_id)
        self._turn = turn
        if self.phase is not Phase.ANSWERING:
            self.phase = Phase.SENDING
        return Send(self.driver.request(turn, self.member_id), turn.taken)

    def _answering(self, now: float) -> Action:
        steps = self._steps
        while steps is not None:
            if self._turn is not None:
                raise RuntimeError(f"node {self.node_id}: report the send before asking again")
            try:
                step = next(steps)
            except StopIteration:
                break
            except errors.KafkaError as exc:  # rule 7
                self.answer_error(exc, now)
                return self.next(now)
            if type(step) is _DriverApply:
                effects = self._effects(step.effects, now)
                if effects or step.answer is not None:
                    return Apply(effects, step.answer, self._f)
                continue
            # The pipelined next request goes out before the records come in.
            return self._send(cast("_DriverSend", step).turn)
        self._steps = None
        return self._done()

    def _done(self) -> Done:
        f = self._f
        final = self._final
        if f is not None and f.plan.fetches and self.counts is not None:
            self.counts.fetch_ended(self.node_id)  # its records are in the buffer, or it failed
        if self._answered and self._ok:
            self._failures = 0
        nxt = self._next
        self._next = None
        if final:
            self.phase = Phase.CLOSED
            self._f = None
        elif nxt is not None:
            self.phase = Phase.AWAITING
            self._f = nxt
        else:
            self.phase = Phase.READY
            self._f = None
        return Done(f, self._answered, self._ok, final)

    def _finishing(self, now: float) -> Action:
        driver = self.driver
        if self._conn_dead:  # rule 5: no session left to close
            self._conn_dead = False
            effects = driver.connection_lost()
            if effects:
                return Apply(effects)
        final = driver.close_session(now, self.member_id)
        if final is None:
            self.phase = Phase.CLOSED
            return CLOSED
        f, body = final
        self._f = f
        self._turn = None
        self.phase = Phase.CLOSING
        self._final = True
        return Send(body, f.taken, final=True)

    def _effects(self, effects: list[Effect], now: float) -> list[Effect]:
        """``effects`` without this loop's back-offs, which become its pause (rule 3)."""
        for e in effects:
            if type(e) is BackOff and e.node_id == self.node_id:
                break
        else:
            return effects
        out: list[Effect] = []
        for e in effects:
            if type(e) is BackOff and e.node_id == self.node_id:
                if not self._final:
                    delay = self.backoff.delay(self._failures)
                    self._failures += 1
                    self._pause_until = max(self._pause_until, now) + delay
                    self._refresh = self._refresh or e.refresh
            else:
                out.append(e)
        return out

    def _take(self, effects: list[Effect], now: float) -> None:
        if effects:
            self._out.extend(self._effects(effects, now))

    # -- events ---------------------------------------------------------------------------

    def sent(self, now: float) -> InFlight:
        """The :class:`Send` went on the wire at ``now``; returns the request now out."""
        if self.phase is Phase.CLOSING:
            f = self._f
            assert f is not None
            return f
        turn = self._turn
        if turn is None:
            raise RuntimeError(f"node {self.node_id}: no send was asked for")
        self._turn = None
        f = self.driver.sent(turn, now)
        if self.phase is Phase.ANSWERING:
            self._next = f
        else:
            self._f = f
            self.phase = Phase.AWAITING
        return f

    def send_failed(self, now: float) -> None:
        """The :class:`Send` could not go out (no connection): the session incarnation is
        over, or (the FINAL request) the session is closed as failed (rule 4)."""
        if self.phase is Phase.CLOSING:
            self.failed(now)
            return
        turn = self._turn
        if turn is None:
            return
        self._turn = None
        self._conn_dead = False  # the session is over anyway
        if turn.plan is not None and turn.plan.fetches and self.counts is not None:
            self.counts.fetch_ended(self.node_id)
        self._take(self.driver.send_failed(turn), now)
        if self.phase is Phase.SENDING:
            self.phase = Phase.READY

    def answered(
        self,
        resp: ShareFetchResponse | ShareAcknowledgeResponse,
        names: Mapping[uuid.UUID, str],
        now: float,
    ) -> None:
        """The answer to the request out arrived at ``now`` (``names``: topic id to name)."""
        f = self.inflight
        if f is None:
            return
        driver = self.driver
        self.phase = Phase.ANSWERING
        self._answered = True
        self._ok = True
        if self._final:
            self._take(driver.close_answered(f, resp, names), now)  # type: ignore[arg-type]
        elif f.plan.kind is RequestKind.SHARE_FETCH:
            self._steps = driver.fetch_answer(
                f,
                resp,  # type: ignore[arg-type]
                names,
                now,
                pipeline=self.running(),
                closing=self.closing,
            )
        else:
            self._take(driver.acknowledge_answer(f, resp, names, now), now)  # type: ignore[arg-type]

    def failed(self, now: float, *, timed_out: bool = False) -> None:
        """The request out failed in transport (its connection broke, or was cut), or
        (``timed_out``) got no answer in time."""
        f = self._f
        phase = self.phase
        if f is None or (phase is not Phase.AWAITING and phase is not Phase.CLOSING):
            return  # rule 2: not the request out
        self._conn_dead = False  # the failure ends the session it lived on
        self.phase = Phase.ANSWERING
        self._answered = False
        self._ok = False
        if self._final:
            self._take(self.driver.close_failed(f), now)  # rule 4
        else:
            self._take(self.driver.request_failed(f, timed_out=timed_out), now)

    def answer_error(self, error: errors.KafkaError, now: float) -> bool:
        """The answer to the request out could not be taken in (``error``; the port's own
        failure to carry out its effects included): the session is reset. Returns
        ``False`` if no answer was being taken in (the port should raise the error)."""
        phase = self.phase
        f = self._f
        if f is None:
            return False
        if phase is Phase.ANSWERING:
            if not self._ok:
                return False  # the failure's own effects failed: nothing more to reset
        elif phase is Phase.AWAITING or phase is Phase.CLOSING:
            self._answered = True  # an answer came, and could not be read
        else:
            return False
        steps = self._steps
        self._steps = None
        if steps is not None:
            steps.close()
        nxt = self._next
        if nxt is not None:
            # The pipelined request is abandoned: its answer is stale after the reset, and
            # what it reserved in a strict record budget is freed (seed 100044878).
            self._next = None
            self.driver.abandon(nxt)
            if nxt.plan.fetches and self.counts is not None:
                self.counts.fetch_ended(self.node_id)
        if self._turn is not None and phase is Phase.ANSWERING:
            turn = self._turn
            self._turn = None
            if turn.plan is not None and turn.plan.fetches and self.counts is not None:
                self.counts.fetch_ended(self.node_id)
        self.phase = Phase.ANSWERING
        self._ok = False
        if self._final:
            self._take(self.driver.close_failed(f), now)  # rule 4
        else:
            self._take(self.driver.answer_failed(error, f), now)
        return True

    def connection_closed(self) -> None:
        """The connection the session lives on closed. With a request out on it, the port
        also reports that request :meth:`failed`; with none, the session incarnation ends
        before the next turn (rule 5)."""
        self._conn_dead = True

    def idle_expired(self) -> None:
        """The :class:`Idle` wait ended with no wake-up: acknowledgements that waited
        their linger go out even without a fetch, and a planner that waited for answers
        after an empty fetch fetches again."""
        if self._timed and self.phase is Phase.READY:
            self._timed = False
            self.driver.idle_expired()

    def close(self, timeout: float | None = None) -> None:
        """Close the session: the next actions send the FINAL (-1) request with the last
        acknowledgements (nothing, if no session is open or a request is still out), and
        await its answer ``timeout`` seconds at most (``None``: ``ack_timeout``)."""
        self._close_timeout = timeout
        if self.phase >= Phase.FINISHING:
            return
        steps = self._steps
        self._steps = None
        if steps is not None:
            steps.close()
        self._turn = None
        self._next = None
        self.phase = Phase.FINISHING
