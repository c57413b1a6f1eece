"""The lock keeper: renews the locks of records a slow handler still holds
(``keep_locks``), as the sans-I/O :class:`~sharecon._share.lock_keeper.LockKeeper` says.

Rules of this module:

1. One pass (:func:`renew_due`) drops what is no longer held (answered, or its lock lost),
   then sends a RENEW for each held record near its lock's end that has none on its way,
   and says once per pass which records it stopped renewing after ``max_hold``.
2. A RENEW the consumer refuses (the lock was lost meanwhile, or the brokers cannot
   renew) drops that record and keeps the error for ``recent_errors``; the job goes on.
3. Before keeping locks, the group is asked whether it takes renewals
   (:func:`renewals_allowed`): where it does not (``share.renew.acknowledge.enable`` false,
   Kafka 4.3+), locks are not kept (one WARNING), or, when ``keep_locks=True`` was asked
   for, :class:`~sharecon.errors.IncompatibleBrokerError` is raised.
4. The job ends when the consumer closes or fails; it never raises.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from sharecon import errors
from sharecon._consumer.group_config import GROUP_RENEW_ENABLE, renewals_enabled
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.handout import Handout
    from sharecon._net.cluster import Cluster
    from sharecon._share.lock_keeper import LockKeeper
    from sharecon._share.machine import ShareMachine
    from sharecon.record import Record

logger = logging.getLogger("sharecon.consumer")

__all__ = ["KEEP_TICK", "KeeperPort", "keep_locks", "renew_due", "renewals_allowed"]


class KeeperPort(Protocol):
    """What the lock keeper uses of its consumer (``ConsumerCore`` has all of it)."""

    @property
    def machine(self) -> ShareMachine:
        """Which records have a RENEW on its way."""
        ...

    @property
    def handout(self) -> Handout:
        """Whether a record is still held; where the RENEWs go."""
        ...

    @property
    def member_id(self) -> str:
        """For the log lines."""
        ...

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

    def note_error(self, exc: errors.KafkaError) -> None:
        """Keep an error for ``recent_errors`` (it is not raised)."""
        ...


#: Seconds between the keeper's passes.
KEEP_TICK = 0.5


def renew_due(
    core: KeeperPort,
    keeper: LockKeeper[Record[Any, Any]],
    max_hold: float,
    kept_elsewhere: Callable[[Record[Any, Any]], bool] | None = None,
) -> int:
    """One pass of the keeper (rules 1-2); returns how many RENEWs it gave the machine.

    :param kept_elsewhere: whether another job keeps a record's lock now (a delayed
        release): the keeper drops it.
    """
    renewing = core.machine.renewing
    handout = core.handout
    for rec in keeper.keys():
        if (rec.topic_partition, rec.offset) not in renewing and not handout.holds(rec):
            keeper.drop(rec)  # answered, or its lock was lost
        elif kept_elsewhere is not None and kept_elsewhere(rec):
            keeper.drop(rec)  # released with a delay: the delayed releases keep it
    held = keeper.keys()
    renew, given_up = keeper.due(core.clock(), {r: r.lock_deadline for r in held})
    sent = 0
    for rec in renew:
        if (rec.topic_partition, rec.offset) in renewing:
            continue  # a renew of it is on its way
        try:
            handout.answer(rec, AckType.RENEW)
        except errors.KafkaError as exc:
            keeper.drop(rec)
            core.note_error(exc)
        else:
            sent += 1
    if given_up:
        first = given_up[0]
        logger.warning(
            "share consumer %s: stopped renewing %d records held over max_hold=%g s "
            "(first: %s-%d offset %d); the broker redelivers them when their locks end",
            *(core.member_id, len(given_up), max_hold, first.topic, first.partition),
            first.offset,
        )
    return sent


async def keep_locks(
    core: KeeperPort,
    keeper: LockKeeper[Record[Any, Any]],
    max_hold: float,
    kept_elsewhere: Callable[[Record[Any, Any]], bool] | None = None,
) -> None:
    """Renew held records' locks as they near their end, until the consumer closes or
    fails (rule 4)."""
    while not core.closing and core.fatal is None:
        await anyio.sleep(KEEP_TICK)
        renew_due(core, keeper, max_hold, kept_elsewhere)


async def renewals_allowed(
    cluster: Cluster, group: str, *, timeout: float, member_id: str, explicit: bool
) -> bool:
    """Whether ``group`` takes lock renewals (rule 3); ``timeout``: per request,
    ``member_id``: for the WARNING.

    :returns: False when the group refuses them and ``keep_locks`` was the default.
    :raises IncompatibleBrokerError: the group refuses them and ``explicit``.
    """
    enabled = await renewals_enabled(cluster, group, timeout=timeout)
    if enabled is not False:
        return True  # enabled, or cannot be told (older broker, no DESCRIBE_CONFIGS)
    what = f"group {group!r} has {GROUP_RENEW_ENABLE}=false: the broker refuses lock renewals"
    if explicit:
        raise errors.IncompatibleBrokerError(
            f"{what}, so keep_locks cannot keep locks (set {GROUP_RENEW_ENABLE}=true on "
            "the group, or keep_locks=False)"
        )
    logger.warning(
        "share consumer %s: %s; process() does not keep locks: a handler that runs past "
        "the lock duration loses its record to another delivery",
        member_id,
        what,
    )
    return False
