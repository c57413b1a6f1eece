"""The consumer's delayed releases: ``record.release(delay=...)`` carried out.

The decisions (renew which record now, release which now) are
:class:`~sharecon._share.delayed.DelayedReleases`'; :class:`DelayedReleaser` checks an
application's request and turns each tick's decisions into RENEW and RELEASE answers. It
does no I/O and reads no clock: it runs over a :class:`DelayedPort` (the consumer's
:class:`~sharecon._consumer.core.ConsumerCore`; the simulated member in
:mod:`sharecon.testing.sim`), and whoever drives it calls :meth:`DelayedReleaser.step`
every :data:`TICK` while records wait (:func:`run_ticks` in the consumer, with anyio; the
simulation's event queue in virtual time), so both run this code.
A clean close releases what is still waiting at once (the consumer's close releases
every held record); a member that dies leaves the records to come back at lock expiry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from sharecon import errors
from sharecon._share.delayed import DelayedReleases, park, tick
from sharecon.types import AckType

if TYPE_CHECKING:
    from sharecon._consumer.handout import Handout
    from sharecon._share.ledger import MarkResult
    from sharecon._share.machine import ShareMachine
    from sharecon.record import Record
    from sharecon.types import TopicIdPartition

__all__ = ["TICK", "DelayedPort", "DelayedReleaser", "Stepped", "TickPort", "run_ticks"]

logger = logging.getLogger("sharecon.consumer")

#: How often the loop looks at the delayed records: the release's precision.
TICK = 0.1


class DelayedPort(Protocol):
    """What the delayed releases use of their consumer (``ConsumerCore`` has all of it)."""

    machine: ShareMachine
    handout: Handout

    def clock(self) -> float:
        """The time lock deadlines are on."""
        ...

    def check_renew(self) -> None:
        """Raise ``UnsupportedVersionError`` if the brokers cannot renew locks."""
        ...

    def apply_effects(self) -> None:
        """Carry out the machine's effects."""
        ...

    def note_error(self, exc: errors.KafkaError) -> None:
        """Keep an error for ``recent_errors`` (it is not raised)."""
        ...

    def wake_leader(self, tp: TopicIdPartition) -> None:
        """Wake the fetch loop of ``tp``'s leader (an answer to send)."""
        ...


@dataclass(slots=True)
class Stepped:
    """What one :meth:`DelayedReleaser.step` did (the simulation's invariants read it).

    :param lost: records no longer waiting because this member no longer holds them
        (answered otherwise, their lock lost, or their renew refused): they come back
        when their lock ends, early, not lost.
    :param released: records whose delay was over, each with the ledger's word on its
        RELEASE answer.
    """

    lost: list[Record[Any, Any]] = field(default_factory=list)
    released: list[tuple[Record[Any, Any], MarkResult]] = field(default_factory=list)


class DelayedReleaser:
    """The records a consumer releases later: checked in, kept (renewed) and released
    (sans-I/O over ``port``; see the module's docstring for who ticks it)."""

    __slots__ = ("_port", "pending", "ticking")

    def __init__(self, port: DelayedPort) -> None:
        self._port = port
        self.pending: DelayedReleases[Record[Any, Any]] = DelayedReleases()
        #: Whether a driver calls :meth:`step` (set by :meth:`add` when it returns True;
        #: the driver clears it when it stops).
        self.ticking = False

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

    def add(self, record: Record[Any, Any], delay: float) -> bool:
        """Release ``record`` ``delay`` seconds from now (checked: a finite delay > 0).
        Returns True when the caller must start ticking (:meth:`step` every :data:`TICK`
        until nothing waits or the consumer closes; :attr:`ticking` is then set).

        :raises UnsupportedVersionError: the brokers cannot renew locks (Kafka 4.1).
        :raises InvalidRecordStateError: the record is not this consumer's to answer, or
            is already waiting for a delayed release.
        """
        port = self._port
        where = f"{record.topic}-{record.partition} offset {record.offset}"
        port.check_renew()
        if record in self.pending:
            raise errors.InvalidRecordStateError(
                f"{where} was already released with a delay; cannot release it again"
            )
        if not port.handout.holds(record):
            raise errors.InvalidRecordStateError(
                f"{where} is not held by this consumer: it was already answered, or its "
                "lock was lost, or another consumer delivered it"
            )
        pending = self.pending
        pending.add(record, port.clock(), delay, record.lock_deadline)
        # Answered, if not yet sent: fetching goes on during the delay (rule 4 there).
        park(pending, port.machine, record, _where(record), record.lock_deadline)
        port.apply_effects()
        if self.ticking:
            return False
        self.ticking = True
        return True

    def step(self, now: float) -> Stepped:
        """One tick: forget records answered otherwise or lost, renew those whose lock
        ends before their release, release those whose delay is over (the decisions are
        :func:`sharecon._share.delayed.tick`'s)."""
        port = self._port
        handout = port.handout
        due = tick(
            self.pending,
            port.machine,
            now,
            where=_where,
            held=handout.holds,
            deadline=_deadline,
        )
        out = Stepped(due.lost)
        for rec in due.renew:
            try:
                handout.answer(rec, AckType.RENEW)
            except errors.KafkaError as exc:
                self.pending.drop(rec)  # it comes back when its lock ends: early, not lost
                port.machine.unpark(rec.topic_partition, rec.offset)
                port.note_error(exc)
                out.lost.append(rec)
        for rec in due.release:
            # May overwrite a renew still on its way.
            out.released.append((rec, handout.answer(rec, AckType.RELEASE)))
            port.wake_leader(rec.topic_partition)
        return out


class TickPort(Protocol):
    """What :func:`run_ticks` uses of its consumer (``ConsumerCore`` has all of it)."""

    @property
    def closing(self) -> bool:
        """Whether close() has begun (the job ends)."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer (the job ends)."""
        ...

    def clock(self) -> float:
        """The time lock deadlines are on."""
        ...


async def run_ticks(core: TickPort, releaser: DelayedReleaser) -> None:
    """The consumer's driver of ``releaser``: a :meth:`~DelayedReleaser.step` every
    :data:`TICK` until nothing waits, or the consumer closes or fails."""
    try:
        while not core.closing and core.fatal is None:
            await anyio.sleep(TICK)
            releaser.step(core.clock())
            if not len(releaser.pending):
                break
    finally:
        releaser.ticking = False


def _where(record: Record[Any, Any]) -> tuple[TopicIdPartition, int]:
    return record.topic_partition, record.offset


def _deadline(record: Record[Any, Any]) -> float | None:
    return record.lock_deadline
