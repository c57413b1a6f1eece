"""Liveness (``max_poll_interval``): a member whose application stops asking for records
leaves the group, releasing what it holds, and rejoins when the application asks again.

Rules of this module:

1. Asking for records counts (each ask, and every task waiting for records now); time
   spent waiting for records is never idleness.
2. After ``max_poll_interval`` seconds without an ask, the member does what close() does
   to records, without closing: it releases everything held and buffered, waits (bounded
   by the request timeout) until the leaders have the releases, then leaves the group.
   One WARNING says so.
3. The next ask rejoins as the same member (its member id is kept).
4. The watch ends when the consumer closes or fails; it never raises.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon._share.membership import MemberState

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.buffer import DeliveryBuffer
    from sharecon._consumer.signal import Signal
    from sharecon._share.membership import Membership

logger = logging.getLogger("sharecon.consumer")

__all__ = ["Liveness", "LivenessPort"]


class LivenessPort(Protocol):
    """What liveness uses of its consumer (``ConsumerCore`` has all of it): the member,
    the buffer it waits on, and the flush that hands the leaders the releases."""

    #: Fetch loops send marked answers at once while it is above 0.
    flush_requested: int

    @property
    def closing(self) -> bool:
        """Whether close() has begun."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer, if one did."""
        ...

    @property
    def member_id(self) -> str:
        """For the log lines."""
        ...

    @property
    def membership(self) -> Membership:
        """The member's state machine (leave, rejoin)."""
        ...

    @property
    def buffer(self) -> DeliveryBuffer:
        """Where records wait for the application."""
        ...

    @property
    def progress(self) -> Signal:
        """Set after every answered share request."""
        ...

    @property
    def heartbeat_wake(self) -> Signal:
        """Wakes the heartbeat loop."""
        ...

    def release_held(self) -> None:
        """Release every record handed out and unanswered, and every buffered one."""
        ...

    def pending_acks(self) -> bool:
        """Whether any answer is marked or in flight."""
        ...

    def records_wanted(self) -> None:
        """The application waits for records: answers held back to go together go now."""
        ...


class Liveness:
    """What liveness counts of one application, and the jobs it runs (rules 1-4).

    :param interval: ``max_poll_interval`` (``None``: never leave for idleness).
    :param request_timeout: the bound on waiting for the releases before leaving.
    """

    __slots__ = ("asks", "interval", "left_idle", "request_timeout", "waiting")

    def __init__(self, interval: float | None, request_timeout: float) -> None:
        self.interval = interval
        self.request_timeout = request_timeout
        #: Asks for records so far (the consumer counts them on its hot path).
        self.asks = 0
        #: The application's tasks waiting for records now.
        self.waiting = 0
        #: The member left for idleness and has not rejoined yet.
        self.left_idle = False

    async def wait_for_records(self, core: LivenessPort) -> None:
        """Wait for buffered records; a wait is an ask (rule 1)."""
        self.waiting += 1
        core.records_wanted()
        try:
            await core.buffer.data.wait()
        finally:
            self.waiting -= 1

    async def watch(self, core: LivenessPort, on_leave: Callable[[], None]) -> None:
        """Leave the group when the application stops asking (rule 2); ``on_leave`` is
        told first (the consumer gives up the record or batch it handed out)."""
        interval = self.interval
        assert interval is not None
        last_asks = self.asks
        last_seen = anyio.current_time()
        while not core.closing and core.fatal is None:
            await anyio.sleep(min(1.0, interval / 4))
            now = anyio.current_time()
            if self.waiting or self.asks != last_asks or self.left_idle:
                last_asks, last_seen = self.asks, now
                continue
            if now - last_seen < interval:
                continue
            logger.warning(
                "share consumer %s: the application took no record for %.0f s "
                "(max_poll_interval=%g s): leaving the group and releasing what it holds; "
                "it rejoins when the application asks for records again",
                core.member_id,
                now - last_seen,
                interval,
            )
            self.left_idle = True
            on_leave()
            await self.leave(core)

    async def leave(self, core: LivenessPort) -> None:
        """Release everything held and buffered, wait (bounded) until the leaders have
        the releases, then leave the group (rule 2)."""
        core.flush_requested += 1
        core.release_held()
        try:
            with anyio.move_on_after(self.request_timeout):
                while core.pending_acks() and core.fatal is None:
                    await core.progress.wait(timeout=0.5)
        finally:
            core.flush_requested -= 1
        core.membership.leave()
        core.heartbeat_wake.set()

    def rejoin(self, core: LivenessPort, restart_heartbeat: Callable[[], None]) -> None:
        """The application asks again after leaving: join as the same member (rule 3);
        ``restart_heartbeat`` starts the heartbeat loop again if it ended."""
        self.left_idle = False
        if core.membership.state is MemberState.LEFT:
            core.membership.rejoin()
        restart_heartbeat()
        core.heartbeat_wake.set()
        logger.info("share consumer %s: rejoining the group", core.member_id)
