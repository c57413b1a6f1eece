"""The consumer's delayed releases: ``record.release(delay=...)`` carried out.

The decisions (renew which record now, release which now) are
:class:`~sharecon._share.delayed.DelayedReleases`'; this module checks an application's
request, and runs the loop that turns the decisions into RENEW and RELEASE answers.
A clean close releases what is still waiting at once (the consumer's close releases
every held record); a member that dies leaves the records to come back at lock expiry.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from sharecon import errors
from sharecon._share.delayed import DelayedReleases, park, tick
from sharecon.types import AckType

if TYPE_CHECKING:
    from sharecon._consumer.core import ConsumerCore
    from sharecon.record import Record
    from sharecon.types import TopicIdPartition

__all__ = ["DelayedReleaser"]

logger = logging.getLogger("sharecon.consumer")

#: How often the loop looks at the delayed records: the release's precision.
TICK = 0.1


class DelayedReleaser:
    """The records a consumer releases later, and the task that keeps and releases them."""

    __slots__ = ("_core", "_running", "pending")

    def __init__(self, core: ConsumerCore) -> None:
        self._core = core
        self.pending: DelayedReleases[Record[Any, Any]] = DelayedReleases()
        self._running = False

    def __contains__(self, record: object) -> bool:
        return record in self.pending

    def not_waiting(
        self, missing: dict[TopicIdPartition, list[int]]
    ) -> dict[TopicIdPartition, list[int]]:
        """``missing`` (unanswered offsets) without the records waiting here: a record
        released with a delay is answered, though the ledger holds it until the release."""
        waiting = {(r.topic_partition, r.offset) for r in self.pending.keys()}
        if not waiting:
            return missing
        out: dict[TopicIdPartition, list[int]] = {}
        for tp, offsets in missing.items():
            left = [o for o in offsets if (tp, o) not in waiting]
            if left:
                out[tp] = left
        return out

    def add(self, record: Record[Any, Any], delay: float) -> None:
        """Release ``record`` ``delay`` seconds from now (checked: a finite delay > 0).

        :raises UnsupportedVersionError: the brokers cannot renew locks (Kafka 4.1).
        :raises InvalidRecordStateError: the record is not this consumer's to answer, or
            is already waiting for a delayed release.
        """
        core = self._core
        where = f"{record.topic}-{record.partition} offset {record.offset}"
        core.check_renew()
        if record in self.pending:
            raise errors.InvalidRecordStateError(
                f"{where} was already released with a delay; cannot release it again"
            )
        if not core.handout.holds(record):
            raise errors.InvalidRecordStateError(
                f"{where} is not held by this consumer: it was already answered, or its "
                "lock was lost, or another consumer delivered it"
            )
        pending = self.pending
        pending.add(record, core.clock(), delay, record.lock_deadline)
        # Answered, if not yet sent: fetching goes on during the delay (rule 4 there).
        self._park(record)
        core.apply_effects()
        if not self._running:
            self._running = True
            core.tg.start_soon(self._run, name="sharecon delayed releases")

    def _park(self, record: Record[Any, Any]) -> None:
        park(
            self.pending,
            self._core.machine,
            record,
            (record.topic_partition, record.offset),
            record.lock_deadline,
        )

    async def _run(self) -> None:
        core = self._core
        try:
            while not core.closing and core.fatal is None:
                await anyio.sleep(TICK)
                self.step(core.clock())
        finally:
            self._running = False

    def step(self, now: float) -> None:
        """One tick: forget records answered otherwise or lost, renew those whose lock
        ends before their release, release those whose delay is over (the decisions are
        :func:`sharecon._share.delayed.tick`'s, which the simulation runs too)."""
        core = self._core
        handout = core.handout
        due = tick(
            self.pending,
            core.machine,
            now,
            where=_where,
            held=handout.holds,
            deadline=_deadline,
        )
        for rec in due.renew:
            try:
                handout.answer(rec, AckType.RENEW)
            except errors.KafkaError as exc:
                self.pending.drop(rec)  # it comes back when its lock ends: early, not lost
                core.machine.unpark(rec.topic_partition, rec.offset)
                core.note_error(exc)
        for rec in due.release:
            handout.answer(rec, AckType.RELEASE)  # may overwrite a renew still on its way
            core.wake_leader(rec.topic_partition)


def _where(record: Record[Any, Any]) -> tuple[TopicIdPartition, int]:
    return record.topic_partition, record.offset


def _deadline(record: Record[Any, Any]) -> float | None:
    return record.lock_deadline
