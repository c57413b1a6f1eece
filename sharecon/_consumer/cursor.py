"""``async for record in consumer``: the per-record hand-out, in a module the compiled
build compiles.

Rules of this module:

1. :class:`Cursor` is what ``ShareConsumer.__aiter__`` returns, so ``async for`` calls
   :meth:`Cursor.__anext__` directly: no frame of the (never compiled) consumer module
   per record. Its state (the current record, whether it was answered, how many were
   served) lives here, and the consumer reads and writes it here too.
2. The rules are the consumer's, unchanged: implicit mode accepts the previous record
   when the next one is asked for; explicit mode refuses to go on while it is
   unanswered; a consumer failure stops the loop at once; every 256 records the loop
   yields once to the event loop (so fetches and heartbeats run during long bursts).
3. Compiled, ``__anext__`` is a native coroutine: asyncio and trio drive it through its
   ``am_send`` slot, so a buffered record costs one small object and no exception. (A
   pre-completed awaitable would have to raise ``StopIteration(record)`` per record:
   measured slower, ~500 ns against ~60 ns; again on 2026-12-05 in plain CPython 3.11,
   385 ns against 98 ns for a coroutine. Only a C type with an ``am_send`` slot could
   complete without both.) Anything that may wait (the buffer is
   empty, deserializers, ``keep_locks``, rejoining after idleness) is the consumer's
   own code, called from here.
4. The steps that decide (:meth:`Cursor.move_on`, :meth:`Cursor.take`,
   :meth:`Cursor.acknowledge`) are sans-I/O: ``__anext__`` awaits only around them, and
   the seeded simulation (:mod:`sharecon.testing.sim`) runs the same methods.
5. The clock is read once per record where the event loop's clock is
   :func:`time.monotonic` (asyncio's own loop): that one reading is the poll-gap
   metric's and the buffer's lock-deadline check's, taken after the previous record was
   answered, right before the check. Elsewhere (trio, other loops) the metric keeps its
   own :func:`time.monotonic` reading.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio.lowlevel

from sharecon import errors
from sharecon._consumer.handout import SessionOwner
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._consumer.core import ConsumerCore
    from sharecon._consumer.handout import Handout
    from sharecon._consumer.liveness import Liveness
    from sharecon._share.ledger import MarkResult
    from sharecon.record import Record

__all__ = ["CHECKPOINT_EVERY", "Cursor", "CursorOwner"]

#: Records handed out between two yields to the event loop (rule 2).
CHECKPOINT_EVERY: Final = 256

# Read once per record. Final, the compiled build takes them from C statics: an imported
# name is otherwise a lookup in the module's dict on every use.
_monotonic: Final = time.monotonic
_checkpoint: Final = anyio.lowlevel.checkpoint
_RENEW: Final = AckType.RENEW


class CursorOwner(Protocol):
    """What the cursor calls back into: the consumer's slow paths."""

    def _not_running(self) -> BaseException:
        """The error for ``async for`` on a consumer that never started."""

    def _rejoin_after_idle(self, core: ConsumerCore) -> None:
        """The application asks again after leaving for idleness: rejoin now."""

    async def _next_prepared(self, core: ConsumerCore) -> Record[Any, Any]:
        """The next record, deserialized and its lock kept."""

    async def _no_record(self, core: ConsumerCore) -> None:
        """The buffer is empty: raise, end the iteration, or wait for records."""


class Cursor:
    """One consumer's ``async for`` state and its per-record step (rules 1-3).

    :param liveness: the consumer's liveness counters (compiled too, so the counting per
        record reads and writes their fields directly).
    """

    def __init__(self, owner: CursorOwner, liveness: Liveness, *, explicit: bool) -> None:
        self.owner = owner
        self.liveness = liveness
        self.explicit = explicit
        #: Set when the consumer starts.
        self.core: ConsumerCore | None = None
        #: Deserializers or ``keep_locks``: each record needs the consumer's own step.
        self.prepare_each = False
        #: The record last handed out by ``async for``, and whether it was answered.
        self.current: Record[Any, Any] | None = None
        self.answered = False
        self.served = 0

    def __aiter__(self) -> Cursor:
        return self

    # -- the sans-I/O steps (the consumer's ``async for`` and the simulator run these) ----

    def move_on(self, handout: Handout) -> None:
        """The application asks for the next record: the current one is settled (rule 2).
        Implicit mode accepts it unless it was answered; explicit mode refuses to go on
        while it is unanswered and still this consumer's to answer.

        :raises UnacknowledgedRecordsError: explicit mode, the current record unanswered
            and still held.
        """
        cur = self.current
        if cur is None:
            return
        if not self.answered:
            if self.explicit:
                # Explicit mode waits for an answer only while one can be given: a record
                # whose lock was lost and reported refuses every answer, and must not
                # stop the loop for good.
                if handout.holds(cur):
                    raise errors.UnacknowledgedRecordsError(
                        "explicit ack mode: answer the previous record before asking for "
                        f"the next: {cur.topic}-{cur.partition} offset {cur.offset}"
                    )
            else:
                # Implicit mode's accept: this runs once per record.
                owner = cur._owner
                machine = handout.machine
                if isinstance(owner, SessionOwner):
                    # The delivery's two numbers passed apart: no tuple per record; the
                    # partition read from the owner, a native field (the record's own
                    # attributes are generic lookups from compiled code).
                    lo, hi = owner.delivery
                    # The record after the last one accepted: the ledger extends its run
                    # (its rule 7). A dry planner must hear of the answer (the machine's
                    # accept tells it), so that takes the whole path.
                    if machine.any_dry or not machine.ledger.accept_next(
                        owner.tp, cur.offset, lo, hi
                    ):
                        machine.accept_of(owner.tp, cur.offset, lo, hi)
                        if machine.effects:
                            handout.settle()
                else:
                    machine.accept(cur.topic_partition, cur.offset, None)
                    if machine.effects:
                        handout.settle()
        self.current = None

    def take(
        self, buffer: DeliveryBuffer, clock: Callable[[], float], now: float | None = None
    ) -> Record[Any, Any] | None:
        """The next buffered record, made the current one (``None``: the buffer is empty);
        ``now``: the caller's reading of ``clock``, if it has one (rule 5)."""
        rec = buffer.pop_one(clock, now)
        if rec is not None:
            self.current = rec
            self.answered = False
            self.served += 1
        return rec

    def acknowledge(self, handout: Handout, record: Record[Any, Any], ack: AckType) -> MarkResult:
        """The application's explicit answer to ``record`` (``consumer.acknowledge``); the
        current record, answered so (a renewal is no answer), is no longer accepted when
        the next one is asked for.

        :raises InvalidRecordStateError: as :meth:`Handout.acknowledge`.
        """
        result = handout.acknowledge(record, ack)
        if record is self.current and ack is not _RENEW:
            self.answered = True
        return result

    def answered_elsewhere(self, record: Record[Any, Any]) -> None:
        """``record`` was answered another way (``release(delay=)``): if it is the
        current record, asking for the next one leaves it be."""
        if record is self.current:
            self.answered = True

    # -- ``async for`` --------------------------------------------------------------------

    async def __anext__(self) -> Record[Any, Any]:
        core = self.core
        if core is None:
            raise self.owner._not_running()
        # The application asked: liveness counts it (and the poll-gap metric, below).
        live = self.liveness
        live.asks += 1
        if live.left_idle:
            self.owner._rejoin_after_idle(core)
        if self.current is not None:
            self.move_on(core.handout)
        fatal = core.fatal
        if fatal is not None:
            raise fatal  # stop at once, not after the buffered records
        if self.prepare_each:
            core.stats.on_poll(_monotonic())
            return await self.owner._next_prepared(core)
        buffer = core.buffer
        clock = core.clock
        if (self.served + 1) % CHECKPOINT_EVERY == 0:
            # Before taking the record: cancelled here, it stays buffered, not current
            # (which commit() or implicit mode would accept unseen). Once per record, not
            # per wait for one.
            await _checkpoint()
        # One clock read per record (rule 5): read after the previous record's answer and
        # just before the lock-deadline check it serves, which may use nothing older.
        now = clock()
        core.stats.on_poll(now if clock is _monotonic else _monotonic())
        while True:
            rec = self.take(buffer, clock, now)
            if rec is not None:
                return rec
            await self.owner._no_record(core)
            now = clock()
