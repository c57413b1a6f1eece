"""One leader's fetch loop without its I/O: the order of the share machine's calls, once.

The consumer's :class:`~sharecon._consumer.fetcher.NodeFetcher` (anyio, sockets) and the
simulator's member (:mod:`sharecon.testing.sim`: the model broker, a virtual clock) both
run this code; each is only a port that sends, waits and carries out effects. What is
decided here would otherwise be written in both, and the simulator would test a copy.

Rules of this module:

1. It does no I/O and reads no clock: time is passed in, effects are handed out.
2. Room for another answer is decided here, once: the buffer's bounds, or one answer
   ahead of the application when both can be handled within the lock (rule 7 of
   :mod:`sharecon._share.fetch_size`).
3. A ShareFetch answer is taken in by :meth:`FetchDriver.fetch_answer`, a generator of
   steps the port carries out in order: :class:`Apply` the session part's effects; then,
   when the machine says so, :class:`Send` the pipelined next request (the port sends
   it, or tells the machine it could not, before resuming); then the records go into
   the machine and their effects come out as the last :class:`Apply`. An exception
   while taking the records in comes out of the generator (the port hands it to the
   machine as a failed answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharecon._share.fetch_policy import Turn

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Generator, Iterable, Mapping

    from sharecon import errors
    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._share.effects import Effect
    from sharecon._share.machine import FetchAnswer, InFlight, ShareMachine
    from sharecon.protocol import (
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchRequest,
        ShareFetchResponse,
    )
    from sharecon.types import TopicIdPartition

__all__ = ["Apply", "FetchDriver", "Send", "Step"]


@dataclass(frozen=True, slots=True)
class Apply:
    """Carry out these effects, in order, before resuming (rule 3). The first step of an
    answer also carries what its session part said (for the port's counters)."""

    effects: list[Effect]
    answer: FetchAnswer | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``turn``'s request now (with :meth:`FetchDriver.request` and
    :meth:`FetchDriver.sent`, or :meth:`FetchDriver.send_failed`), then resume (rule 3)."""

    turn: Turn


Step = Apply | Send


class FetchDriver:
    """The decisions of one leader's fetch loop, in the order the machine wants them.

    :param want: the assigned partitions the node leads (read when a request is planned).
    :param urgent: whether a ``commit()`` waits for the acknowledgements.
    :param clock: the caller's clock (the event loop's, or the simulation's virtual one):
        a fetch planned while only records waiting out a delay are held may wait at the
        broker until the next of them is due (rule 2 of :mod:`sharecon._share.fetch_policy`).
    """

    __slots__ = ("buffer", "clock", "machine", "node_id", "urgent", "want")

    def __init__(
        self,
        machine: ShareMachine,
        buffer: DeliveryBuffer,
        node_id: int,
        want: Callable[[], Iterable[TopicIdPartition]],
        urgent: Callable[[], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.machine = machine
        self.clock = clock
        self.buffer = buffer
        self.node_id = node_id
        self.want = want
        self.urgent = urgent
        machine.leader(node_id)

    # -- planning ---------------------------------------------------------------------------

    def turn(self, extra_records: int = 0, extra_bytes: int = 0) -> Turn:
        """The next request to send (``plan=None``: nothing now), counting an answer of
        ``extra_records`` and ``extra_bytes`` not in the buffer yet (rule 2)."""
        buffer = self.buffer
        machine = self.machine
        room = buffer.has_room(extra_records, extra_bytes) or (
            buffer.single_chunk(extra_records)
            and buffer.nbytes + extra_bytes < buffer.max_bytes
            and machine.leader(self.node_id).sizer.overlap_fits(buffer.records + extra_records)
        )
        urgent = self.urgent
        clock = self.clock
        return machine.next_turn(
            self.node_id,
            self.want(),
            room=room,
            urgent=urgent is not None and urgent(),
            extra_records=extra_records,
            now=None if clock is None else clock(),
        )

    def fetch_timeout(self, f: InFlight, default: float) -> float:
        """How long to await the answer to fetch ``f`` (``default``: the usual deadline);
        a probe of a partition whose batch did not arrive in time is awaited longer
        (:mod:`sharecon._share.oversize`)."""
        return self.machine.fetch_timeout(f, default)

    def idle_timeout(self, ack_linger: float, now: float | None = None) -> float | None:
        """How long the loop may wait for a wake-up with nothing to send from ``now``
        (``None``: until woken); when that wait ends unwoken, call :meth:`idle_expired`."""
        return self.machine.idle_timeout(self.node_id, ack_linger, now)

    def idle_expired(self) -> None:
        """The idle wait ended unwoken: acknowledgements that waited their linger go out
        even without a fetch; a planner waiting for answers fetches again."""
        self.machine.idle_expired(self.node_id)

    def connection_lost(self) -> list[Effect]:
        """The session's connection closed with no request out."""
        self.machine.connection_lost(self.node_id)
        return self.machine.drain()

    # -- sending ----------------------------------------------------------------------------

    def request(self, turn: Turn, member_id: str) -> ShareFetchRequest | ShareAcknowledgeRequest:
        """The wire request for ``turn``."""
        return self.machine.request(turn, member_id)

    def sent(self, turn: Turn, now: float) -> InFlight:
        """``turn``'s request went on the wire at ``now``; whether records waited for the
        application then is read from the buffer (:meth:`.ShareMachine.sent`)."""
        return self.machine.sent(self.node_id, turn, now, backlog=self.buffer.records > 0)

    def send_failed(self, turn: Turn) -> list[Effect]:
        """``turn``'s request could not be sent: the session incarnation is over."""
        self.machine.send_failed(self.node_id, turn)
        return self.machine.drain()

    # -- answers ----------------------------------------------------------------------------

    def fetch_answer(
        self,
        f: InFlight,
        resp: ShareFetchResponse,
        names: Mapping[uuid.UUID, str],
        now: float,
        *,
        pipeline: bool,
        closing: Callable[[], bool],
    ) -> Generator[Step, None, None]:
        """Take the ShareFetch answer ``resp`` to ``f`` in, at ``now`` (rule 3).

        :param pipeline: the loop goes on after this answer (not closing, not failed):
            the next request may go out before the records are taken in.
        :param closing: whether the member is closing (read when the records are taken
            in: they are then released at once).
        """
        machine = self.machine
        answer = machine.fetch_answered(f, resp, names, now, pipeline=pipeline)
        yield Apply(machine.drain(), answer)
        if not answer.proceed:
            return
        if answer.pipeline:
            # The machine has ended our earlier hold of what this answer re-acquired; the
            # next request goes out before the records come in.
            turn = self.turn(answer.acquired, answer.size)
            if turn.plan is not None:
                yield Send(turn)
        # If that send failed, the session it belonged to is over: the machine sees the
        # answer's tag is no longer current and takes none of its records.
        machine.fetch_records(f, resp, names, closing=closing())
        yield Apply(machine.drain())

    def acknowledge_answer(
        self,
        f: InFlight,
        resp: ShareAcknowledgeResponse,
        names: Mapping[uuid.UUID, str],
        now: float,
    ) -> list[Effect]:
        """The ShareAcknowledge answer ``resp`` to ``f`` arrived at ``now``."""
        self.machine.acknowledge_answered(f, resp, names, now)
        return self.machine.drain()

    def request_failed(self, f: InFlight, *, timed_out: bool = False) -> list[Effect]:
        """``f`` failed in transport, or (``timed_out``) got no answer in time."""
        self.machine.request_failed(f, timed_out=timed_out)
        return self.machine.drain()

    def abandon(self, f: InFlight) -> None:
        """``f`` went out pipelined, but the answer before it could not be taken in: its
        own answer will not be read, and what it reserved is freed."""
        self.machine.abandoned(f)

    def answer_failed(self, error: errors.KafkaError, f: InFlight) -> list[Effect]:
        """The answer to ``f`` could not be taken in: the session is reset."""
        self.machine.answer_failed(self.node_id, error, f)
        return self.machine.drain()

    # -- closing ----------------------------------------------------------------------------

    def close_session(
        self, now: float, member_id: str
    ) -> tuple[InFlight, ShareFetchRequest | ShareAcknowledgeRequest] | None:
        """The FINAL (-1) request that closes the session, with the last acknowledgements,
        sent at ``now`` (``None``: no session is open)."""
        machine = self.machine
        f = machine.close_session(self.node_id, now)
        if f is None:
            return None
        return f, machine.request(Turn(f.plan), member_id)

    def close_answered(
        self, f: InFlight, resp: ShareAcknowledgeResponse, names: Mapping[uuid.UUID, str]
    ) -> list[Effect]:
        """The FINAL request ``f`` was answered: the session is closed."""
        self.machine.close_answered(f, resp, names)
        return self.machine.drain()

    def close_failed(self, f: InFlight) -> list[Effect]:
        """The FINAL request ``f`` failed in transport (closing: no back-off)."""
        self.machine.transport_failed(self.node_id, f.plan, back_off=False)
        return self.machine.drain()
