"""How records reach the application: ``async for``'s slow paths, ``poll()``'s batches
and ``process()``'s workers, with deserializers, held-back records and liveness.

Rules of this module:

1. The per-record step of a plain ``async for`` is the compiled
   :class:`~sharecon._consumer.cursor.Cursor`'s; :class:`Iteration` is its owner, called
   only where a record needs more (deserializers, ``keep_locks``), the buffer is empty,
   or the member rejoins after idleness. Nothing here adds a call per record to the
   plain loop.
2. The rules are the consumer's (module docs of :mod:`sharecon.consumer`): implicit mode
   accepts the previous record or batch when the next is asked for, explicit mode
   refuses to go on while one is unanswered; a record the deserializers fail for is
   disposed of (released, or routed on its last allowed delivery under a dead-letter
   policy) and its error raised once the records before it were handed out; a cancelled
   hand-out keeps what it took for the next one (:mod:`sharecon._consumer.holdback`).
3. Every ask for records (each ``async for`` step, ``poll()``, each worker's) counts for
   liveness (:mod:`sharecon._consumer.liveness`); after leaving for idleness it rejoins.
"""

from __future__ import annotations

import math
from functools import partial
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from sharecon import errors
from sharecon._consumer.cursor import CHECKPOINT_EVERY, Cursor
from sharecon._consumer.handout import owner_of
from sharecon._consumer.holdback import Holdback
from sharecon._consumer.lock_keeping import renewals_allowed
from sharecon._consumer.process import Host, run_workers
from sharecon._share.lock_keeper import LockKeeper
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from sharecon._consumer.core import ConsumerCore
    from sharecon._consumer.deserialize import Deserializers
    from sharecon._consumer.jobs import DeadLetterSettings, Jobs
    from sharecon._consumer.liveness import Liveness
    from sharecon._share.breaker import DeadLetterBreaker
    from sharecon.record import Record
    from sharecon.types import TopicIdPartition

__all__ = ["Iteration"]


class Iteration:
    """One consumer's hand-out to the application (rules 1-3); the cursor's owner.

    :param not_running: the error for using the consumer now (never started, closed).
    :param closed: whether the consumer was closed.
    :param release_later: the consumer's own ``release_later`` (``process()``'s
        ``RetryLater`` and backoff go through its checks).
    """

    def __init__(
        self,
        jobs: Jobs,
        not_running: Callable[[], BaseException],
        liveness: Liveness,
        deserializers: Deserializers,
        *,
        explicit: bool,
        closed: Callable[[], bool],
        release_later: Callable[[Record[Any, Any], float], None],
        dead_letter: DeadLetterSettings | None,
        breaker: DeadLetterBreaker | None,
    ) -> None:
        self._jobs = jobs
        self._not_running_error = not_running
        self._liveness = liveness
        self._closed = closed
        self._release_later = release_later
        self._dead_letter = dead_letter
        self._breaker = breaker
        self.explicit = explicit
        # The kind of each deserializer is read once, here (sharecon.serde rule 4).
        self._deserialize = deserializers.apply_sync
        #: With an async deserializer: the step hand-out awaits instead of _deserialize.
        self._deserialize_async = deserializers.apply_async if deserializers.awaits else None
        self._deserializing = deserializers.active
        #: Per-record work at hand-out beyond popping (deserializers, lock keeping): one
        #: test per record decides it, so a consumer with neither pays nothing more.
        self.prepare_each = self._deserializing
        #: A DeserializationError for a record met while a poll() filled its batch:
        #: raised by the next call, after the records before it were handed out.
        self._pending_error: errors.DeserializationError | None = None
        #: Records a cancelled hand-out took from the buffer: the next one serves them
        #: first (sharecon._consumer.holdback).
        self._held = Holdback(self._held_expired, self._held_holds)
        #: Set when the consumer starts.
        self.core: ConsumerCore | None = None
        #: A poll() or batches() batch was handed out and not yet settled.
        self.batch_out = False
        #: process() calls running (a delayed release in implicit mode needs one).
        self.processing = 0
        #: ``async for``: the current record and the per-record step (compiled).
        self.cursor = Cursor(self, liveness, explicit=explicit)
        self.cursor.prepare_each = self.prepare_each

    # -- the cursor's slow paths (CursorOwner) -------------------------------------------

    def _not_running(self) -> BaseException:
        return self._not_running_error()

    def _rejoin_after_idle(self, core: ConsumerCore) -> None:
        self._liveness.rejoin(core, partial(self._jobs.restart_heartbeat, core))

    async def _next_prepared(self, core: ConsumerCore) -> Record[Any, Any]:
        """``__anext__`` with per-record work (deserializers, ``keep_locks``): a loop of
        its own, so the plain loop of the cursor does nothing per record it does not need."""
        if self._pending_error is not None:
            self._raise_pending()
        buffer = core.buffer
        cursor = self.cursor
        held = self._held
        if (cursor.served + 1) % CHECKPOINT_EVERY == 0:
            # Before taking the record (as the cursor does): cancelled here, it stays
            # buffered, not current.
            await anyio.lowlevel.checkpoint()
        while True:
            kept = held.take(core.clock) if held.items else None
            if kept is not None:
                rec, decoded = kept
            else:
                popped = buffer.pop_one(core.clock)
                if popped is None:
                    await self._no_record(core)
                    continue
                rec, decoded = popped, False
            await self._prepare(core, rec, decoded)
            cursor.current = rec
            cursor.answered = False
            cursor.served += 1
            return rec

    async def _no_record(self, core: ConsumerCore) -> None:
        """The buffer is empty: raise the consumer's failure, end the iteration when it
        closes, else wait for records."""
        if core.fatal is not None:
            raise core.fatal
        if self._closed() or core.closing:
            raise StopAsyncIteration
        await self.wait_for_records(core)

    # -- deserializers -------------------------------------------------------------------

    async def _prepare(self, core: ConsumerCore, record: Record[Any, Any], decoded: bool) -> None:
        """What hand-out does per record beyond popping it, when there is anything to do:
        deserialize (raising for a record that fails, once it is disposed of; not when
        ``decoded`` already) and keep its lock. Cancelled while deserializing, the record
        is kept for the next hand-out (sharecon._consumer.holdback)."""
        if self._deserializing and not decoded:
            try:
                if self._deserialize_async is None:
                    self._deserialize(record)
                else:
                    await self._deserialize_async(record)
            except errors.DeserializationError as exc:
                await self.dispose_undeserializable(core, record, exc)
                raise
            except BaseException:
                self._held.keep((), record)
                raise
        keeper = self._jobs.keeper
        if keeper is not None:
            keeper.hold(record, core.clock(), record.lock_deadline)

    async def dispose_undeserializable(
        self, core: ConsumerCore, record: Record[Any, Any], exc: errors.DeserializationError
    ) -> None:
        """Never lose a record the application could not be given: route it to the
        dead-letter topic on its last allowed delivery under the policy, else release it."""
        policy = self._dead_letter
        if policy is not None and record.delivery_count >= policy.max_deliveries:
            try:
                await self._jobs.reject_to_dlq(core, record, f"DeserializationError: {exc}", None)
            except errors.DeadLetterError as dlq_exc:
                # reject_to_dlq released it instead (and, for a DeadLetterTopicError,
                # stopped the consumer: the next wait raises it)
                core.note_error(dlq_exc)
            else:
                exc.dead_lettered = True
            return
        core.handout.answer(record, AckType.RELEASE)
        core.wake_leader(record.topic_partition)

    async def _pop_deserialized(self, core: ConsumerCore, limit: int) -> list[Record[Any, Any]]:
        """poll() with deserializers: up to ``limit`` records, ending before one the
        deserializers fail for (whose error the next call raises, or this one if it is the
        first)."""
        out: list[Record[Any, Any]] = []
        pop = core.buffer.pop_one
        clock = core.clock
        deserialize, deserialize_async = self._deserialize, self._deserialize_async
        held = self._held
        record: Record[Any, Any] | None = None
        try:
            while len(out) < limit:
                kept = held.take(clock) if held.items else None
                if kept is not None:
                    record, decoded = kept
                    if decoded:
                        out.append(record)
                        record = None
                        continue
                else:
                    record = pop(clock)
                    if record is None:
                        break
                try:
                    if deserialize_async is None:
                        deserialize(record)
                    else:
                        await deserialize_async(record)
                except errors.DeserializationError as exc:
                    failed, record = record, None
                    await self.dispose_undeserializable(core, failed, exc)
                    if not out:
                        raise
                    self._pending_error = exc
                    break
                out.append(record)
                record = None
        except BaseException:
            # Cancelled (a poll() timeout, a cancel scope) while deserializing: what was
            # taken stays this consumer's, and the next hand-out serves it first.
            if out or record is not None:
                held.keep(out, record)
            raise
        return out

    def _held_expired(self, record: Record[Any, Any]) -> None:
        # A record kept for the next hand-out whose lock ended meanwhile: dropped as the
        # buffer drops its own (delivery forgotten, counted as expired in the buffer).
        core = self.core
        if core is None:
            return
        owner = owner_of(record)
        tp = record.topic_partition
        if owner is not None:
            core.machine.forget(tp, owner.delivery, record.offset, record.offset)
        core.buffer.count_expired(tp, 1)

    def _held_holds(self, record: Record[Any, Any]) -> bool:
        core = self.core
        return core is not None and core.handout.holds(record)

    def _raise_pending(self) -> None:
        exc, self._pending_error = self._pending_error, None
        assert exc is not None
        raise exc

    # -- liveness (rule 3) ---------------------------------------------------------------

    async def wait_for_records(self, core: ConsumerCore) -> None:
        """Wait for buffered records (a wait counts as an ask)."""
        await self._liveness.wait_for_records(core)

    async def watch_liveness(self, core: ConsumerCore) -> None:
        """Leave the group when the application stops asking for records (``max_poll_interval``)."""
        await self._liveness.watch(core, self._give_up_current)

    def _give_up_current(self) -> None:
        # Leaving for idleness releases what was handed out: the current record or batch
        # is no longer the application's to answer.
        if self.cursor.current is not None:
            self.cursor.answered = True
        self.batch_out = False

    def asked(self, core: ConsumerCore) -> None:
        """The application asks for records: liveness counts it, and after leaving for
        idleness the member rejoins now."""
        live = self._liveness
        live.asks += 1
        core.stats.on_poll(_monotonic())  # per record: see sharecon._stats rule 3
        if live.left_idle:
            live.rejoin(core, partial(self._jobs.restart_heartbeat, core))

    # -- the current record --------------------------------------------------------------

    def accept_current(self) -> None:
        """Implicit mode: accept ``async for``'s current record unless it was answered."""
        cursor = self.cursor
        cur = cursor.current
        if cur is not None and not cursor.answered:
            cursor.answered = True
            assert self.core is not None
            self.core.handout.answer(cur, AckType.ACCEPT)

    def accept_delivered(self) -> None:
        """Implicit mode's ``commit()``: accept the current record and every record
        delivered and not answered so far."""
        self.accept_current()
        assert self.core is not None
        self.core.answer_all_delivered(AckType.ACCEPT)

    def give_back_current(self) -> None:
        """Release the record in hand of an ``async for`` that ended early (``break``, an
        exception), when a new loop, ``poll()``, ``batches()`` or ``process()`` takes
        over: it was never moved past, so it is released, never accepted (a later
        implicit accept of every delivered record would otherwise take it too)."""
        cursor = self.cursor
        cur = cursor.current
        core = self.core
        if cur is not None and not cursor.answered and core is not None:
            cursor.answered = True
            core.handout.answer(cur, AckType.RELEASE)
            core.wake_leader(cur.topic_partition)

    # -- poll() --------------------------------------------------------------------------

    async def poll(
        self, core: ConsumerCore, limit: int, timeout: float | None
    ) -> list[Record[Any, Any]]:
        """``poll()`` once its arguments were checked: settle the previous batch, then
        wait up to ``timeout`` for up to ``limit`` records (rule 2)."""
        self.asked(core)
        self.give_back_current()
        if self.batch_out:
            if self.explicit:
                missing = core.ledger.unacknowledged()
                if missing and self._jobs.delayed is not None:
                    missing = self._jobs.delayed.not_waiting(missing)
                if missing:
                    raise errors.UnacknowledgedRecordsError(_describe_unacked(missing))
            else:
                core.answer_all_delivered(AckType.ACCEPT)
            self.batch_out = False
        if core.fatal is not None:
            raise core.fatal  # stop at once, not after the buffered records
        if self._pending_error is not None:
            self._raise_pending()
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            while True:
                records: list[Record[Any, Any]]
                if self._deserializing:
                    records = await self._pop_deserialized(core, limit)
                else:
                    records = core.buffer.pop_many(limit, core.clock)
                if records:
                    core.handout.handed_out(records)
                    self.batch_out = True
                    keeper = self._jobs.keeper
                    if keeper is not None:
                        now = core.clock()
                        for rec in records:
                            keeper.hold(rec, now, rec.lock_deadline)
                    return records
                if core.fatal is not None:
                    raise core.fatal
                if self._closed() or core.closing:
                    return []
                await self.wait_for_records(core)
        return []

    # -- process() -----------------------------------------------------------------------

    async def process(
        self,
        core: ConsumerCore,
        handler: Callable[[Record[Any, Any]], Awaitable[object]],
        *,
        concurrency: int,
        keep_locks: bool | None,
        max_hold: float,
    ) -> None:
        """``process()`` once its arguments were checked: run the workers
        (:mod:`sharecon._consumer.process`) until the consumer closes or fails."""
        self.give_back_current()
        policy = self._dead_letter
        limit = policy.max_deliveries if policy is not None else None
        backoff = policy.retry_backoff if policy is not None else None
        if backoff is not None:
            core.check_renew()  # delayed releases renew locks: Kafka 4.2+
        jobs = self._jobs
        keeper = jobs.keeper
        if keeper is None and keep_locks is not False:
            if keep_locks or core.can_renew():
                core.check_renew()
                config = core.config
                if await renewals_allowed(
                    core.cluster,
                    config.group_id,
                    timeout=config.request_timeout,
                    member_id=core.member_id,
                    explicit=bool(keep_locks),
                ):
                    keeper = LockKeeper(max_hold)
        host = Host(
            asked=self.asked,
            wait_for_records=self.wait_for_records,
            closed=self._closed,
            deserialize=(
                self._deserialize
                if self._deserializing and self._deserialize_async is None
                else None
            ),
            deserialize_async=self._deserialize_async,
            held=self._held,
            dispose=self.dispose_undeserializable,
            to_dead_letters=partial(jobs.reject_to_dlq, topic=None),
            answer=self._answer_if_open,
            release_later=self._release_later_if_open,
            keep_locks=jobs.keep_locks,
        )
        self.processing += 1
        # The handlers may wait for each other's records: the member may always hold one
        # record per handler, whatever the handling rate (rule 1 of _share.record_limit).
        core.machine.handlers += concurrency
        try:
            await run_workers(
                core,
                host,
                handler,
                concurrency=concurrency,
                keeper=keeper,
                own_keeper=keeper is not jobs.keeper,
                dead_letter_limit=limit,
                retry_backoff=backoff,
                breaker=self._breaker,
            )
        finally:
            self.processing -= 1
            core.machine.handlers -= concurrency
        if core.fatal is not None:
            raise core.fatal

    def _answer_if_open(self, record: Record[Any, Any], ack: AckType) -> None:
        # process(): the handler may have answered the record itself; that answer stands,
        # a delayed release included.
        assert self.core is not None
        if self._jobs.delayed_has(record):
            return
        self.core.handout.answer(record, ack)

    def _release_later_if_open(self, record: Record[Any, Any], delay: float) -> None:
        # process(): a RetryLater (or the policy's backoff) for a record the handler did
        # not answer itself; a record it answered, or whose lock was lost, keeps that.
        core = self.core
        assert core is not None
        if self._jobs.delayed_has(record) or not core.handout.holds(record):
            return
        if core.closing:
            core.handout.answer(record, AckType.RELEASE)
            return
        self._release_later(record, delay)


def _describe_unacked(missing: Mapping[TopicIdPartition, list[int]]) -> str:
    parts = []
    for tp, offsets in list(missing.items())[:5]:
        shown = ", ".join(map(str, offsets[:10])) + (" ..." if len(offsets) > 10 else "")
        parts.append(f"{tp.topic or tp.topic_id}-{tp.partition} offsets {shown}")
    return "explicit ack mode: answer every record of the previous batch first: " + "; ".join(parts)
