"""Delayed releases, a visibility timeout (sans-I/O, time passed in).

``record.release(delay=30.0)`` keeps the record locked to this member for the delay and
then releases it, so the broker delivers it again no sooner (to this member or another).
The lock keeps running only through RENEW answers (Kafka 4.2+), so this module says, at
each tick, which delayed records to renew (their lock ends within a margin, before the
release is due) and which to release now (the delay is over).

Rules:

1. A record whose lock already outlasts its release time is not renewed: a renew would
   only hold it longer than asked.
2. Nothing here spends a delivery attempt: a renew keeps the one delivery, and the final
   release counts as that delivery's answer, as an immediate release does.
3. If the member dies, nothing is renewed any more and the broker delivers the record
   again when its lock ends; the caller releases what is delayed at once on a clean close.
4. A record waiting here never holds up other records: the caller parks it in the share
   machine (:meth:`~sharecon._share.machine.ShareMachine.park`) until :meth:`wake_at`, so
   fetching goes on during the delay.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.types import TopicIdPartition

    from .machine import ShareMachine

__all__ = ["DelayedReleases", "DelayedTick", "park", "tick"]

K = TypeVar("K", bound=Hashable)


class DelayedReleases(Generic[K]):
    """Records (any hashable key) to release later, and which of them to renew meanwhile.

    :param min_margin: renew at least this long before a lock ends.
    """

    __slots__ = ("_due", "min_margin")

    def __init__(self, *, min_margin: float = 1.0) -> None:
        self.min_margin = min_margin
        # key -> (release at, renew margin)
        self._due: dict[K, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    def add(self, key: K, now: float, delay: float, deadline: float | None) -> None:
        """Release ``key`` ``delay`` seconds after ``now``; its lock ends at ``deadline``
        (``None``: unknown, renewed only by the margin)."""
        remaining = (deadline - now) if deadline is not None else 0.0
        self._due[key] = (now + delay, max(self.min_margin, remaining / 3))

    def drop(self, key: K) -> None:
        """``key`` is no longer to be released later (answered otherwise, or its lock lost)."""
        self._due.pop(key, None)

    def keys(self) -> list[K]:
        """Every record waiting for its release."""
        return list(self._due)

    def release_at(self, key: K) -> float | None:
        """When ``key`` is to be released, or ``None`` if it is not waiting."""
        entry = self._due.get(key)
        return None if entry is None else entry[0]

    def wake_at(self, key: K, deadline: float | None) -> float | None:
        """When :meth:`due` will next name ``key`` (to renew, given its lock ends at
        ``deadline``, or to release); ``None`` if it is not waiting."""
        entry = self._due.get(key)
        if entry is None:
            return None
        at, margin = entry
        if deadline is not None and deadline < at:
            return min(at, deadline - margin)
        return at

    def due(self, now: float, deadlines: dict[K, float | None]) -> tuple[list[K], list[K]]:
        """Which records to renew now, and which to release now (those are dropped).

        :param deadlines: each record's current lock deadline (``None``: unknown).
        """
        renew: list[K] = []
        release: list[K] = []
        for key, (at, margin) in list(self._due.items()):
            if now >= at:
                release.append(key)
                del self._due[key]
                continue
            deadline = deadlines.get(key)
            if deadline is None:
                continue  # the broker did not say: nothing to go by (rule 3 still holds)
            if deadline < at and deadline - now <= margin:  # rule 1
                renew.append(key)
        return renew, release


@dataclass(slots=True)
class DelayedTick(Generic[K]):
    """What one tick of the delayed releases asks of the caller.

    :param lost: records dropped because this member no longer holds them (answered
        otherwise, or their lock was lost: they come back early, not lost).
    :param renew: records to answer RENEW now (none already being renewed).
    :param release: records whose delay is over: answer RELEASE now.
    """

    lost: list[K]
    renew: list[K]
    release: list[K]


def park(
    pending: DelayedReleases[K],
    machine: ShareMachine,
    key: K,
    where: tuple[TopicIdPartition, int],
    deadline: float | None,
) -> None:
    """Park ``key`` (at ``where``: partition and offset) in ``machine`` until its next renew
    or release is due, so it holds up no fetch meanwhile (rule 4)."""
    wake_at = pending.wake_at(key, deadline)
    if wake_at is not None:
        machine.park(where[0], where[1], wake_at)


def tick(
    pending: DelayedReleases[K],
    machine: ShareMachine,
    now: float,
    *,
    where: Callable[[K], tuple[TopicIdPartition, int]],
    held: Callable[[K], bool],
    deadline: Callable[[K], float | None],
) -> DelayedTick[K]:
    """One tick of the delayed releases at ``now``, the same for the consumer and the
    simulation: forget records this member no longer holds, say which to renew and which
    to release, and keep ``machine``'s parked set in step (rule 4).

    :param where: a record's partition and offset.
    :param held: whether this member still holds the record.
    :param deadline: the record's current lock deadline (``None``: unknown).
    """
    renewing = machine.renewing
    lost: list[K] = []
    for key in pending.keys():
        at = where(key)
        if at not in renewing and not held(key):
            pending.drop(key)
            machine.unpark(*at)
            lost.append(key)
    renew, release = pending.due(now, {k: deadline(k) for k in pending.keys()})
    for key in release:
        machine.unpark(*where(key))
    for key in pending.keys():
        park(pending, machine, key, where(key), deadline(key))  # its next renew moved
    return DelayedTick(lost, [k for k in renew if where(k) not in renewing], release)
