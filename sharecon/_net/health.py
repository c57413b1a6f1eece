"""Reachability of the cluster's brokers: one WARNING per outage, and a status to read.

Rules of this module:

1. A broker is unreachable from the first failed attempt to open a connection to it until the
   next successful one. Connection attempts are the only evidence: a connection that broke
   is not an outage until reconnecting fails too (brokers close idle connections routinely).
2. An outage is logged once, as a WARNING, when it has lasted longer than ``warn_after``
   seconds (the request timeout: shorter blips are retried silently), naming the address and
   the last cause; its end is logged at INFO only if its start was. Checks happen on each
   failed attempt, and callers retry with a capped backoff, so the warning is never late by
   more than one backoff step.
3. :meth:`HealthTracker.snapshot` returns frozen data (:class:`ClusterHealth`) that a health
   check may read from any task; nothing here does I/O or holds a secret (error texts name
   addresses and causes, never credentials).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

__all__ = ["BrokerHealth", "ClusterHealth", "HealthTracker"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerHealth:
    """What the client last saw of one broker (or of a bootstrap address, ``node_id`` -1).

    :param reachable: the last attempt to connect succeeded.
    :param unreachable_since: Unix time of the first failed attempt of the current outage.
    :param unreachable_for: seconds the current outage has lasted when the snapshot was taken.
    :param last_error: the last connection failure (kept after recovery, for the record).
    """

    node_id: int
    address: str
    reachable: bool
    unreachable_since: float | None
    unreachable_for: float
    last_error: str | None


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """A read-only status for health checks.

    :param ok: connected, not closed, some broker reachable, and no broker unreachable for
        longer than the request timeout while attempts to reach it go on (one not tried
        again for a request timeout after its latest failure no longer counts).
    :param connected: the bootstrap succeeded and the client is not closed.
    :param brokers: every broker or bootstrap address a connection was attempted to.
    :param unreachable_since: Unix time since when no broker at all could be reached, if so.
    :param last_error: the last failure to reach any broker, if the cluster is unreachable.
    """

    ok: bool
    connected: bool
    brokers: tuple[BrokerHealth, ...]
    unreachable_since: float | None
    last_error: str | None


class _State:
    __slots__ = ("address", "last", "last_error", "node_id", "since", "wall_since", "warned")

    def __init__(self, node_id: int, address: str) -> None:
        self.node_id = node_id
        self.address = address
        self.since: float | None = None  # clock time of the outage's first failure
        self.last = 0.0  # clock time of its latest failure
        self.wall_since: float | None = None
        self.last_error: str | None = None
        self.warned = False


class HealthTracker:
    """Records connection attempts per broker and for the cluster as a whole.

    :param warn_after: seconds an outage lasts before it is logged as a WARNING.
    :param clock: monotonic seconds (the event loop's clock by default).
    :param wall_clock: Unix time, for the ``unreachable_since`` fields.
    """

    _CLUSTER = "any broker"

    def __init__(
        self,
        warn_after: float,
        *,
        clock: Callable[[], float] = anyio.current_time,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._warn_after = warn_after
        self._clock = clock
        self._wall = wall_clock
        self._brokers: dict[int | str, _State] = {}
        self._cluster = _State(-1, self._CLUSTER)

    def _state(self, node_id: int, address: str) -> _State:
        # Known brokers by id (their address may change); bootstrap addresses by address.
        key: int | str = node_id if node_id >= 0 else address
        state = self._brokers.get(key)
        if state is None or state.address != address:
            state = self._brokers[key] = _State(node_id, address)
        return state

    def failed(self, node_id: int, address: str, error: BaseException) -> None:
        """An attempt to connect to ``address`` failed with ``error``."""
        self._fail(self._state(node_id, address), str(error))

    def reached(self, node_id: int, address: str) -> None:
        """A connection to ``address`` was opened: the broker and the cluster are reachable."""
        self._recover(self._state(node_id, address))
        self._recover(self._cluster)
        if node_id >= 0:
            # Bootstrap addresses only lead to the cluster, and once the cluster is found
            # nobody dials them again: a broker reached by id ends their outage too.
            for state in self._brokers.values():
                if state.node_id < 0:
                    self._recover(state)

    def cluster_failed(self, addresses: str, error: BaseException) -> None:
        """No broker at all could be reached: ``addresses`` were tried, ``error`` was last."""
        self._cluster.address = addresses
        self._fail(self._cluster, str(error))

    def _fail(self, state: _State, error: str) -> None:
        now = self._clock()
        state.last_error = error
        state.last = now
        if state.since is None:
            state.since = now
            state.wall_since = self._wall()
            return
        lasted = now - state.since
        if not state.warned and lasted > self._warn_after:
            state.warned = True
            if state is self._cluster:
                logger.warning(
                    "no broker reachable for %.1f s (tried %s); last error: %s",
                    lasted,
                    state.address,
                    error,
                )
            else:
                # Errors start with the address already: keep the log line short.
                cause = error.removeprefix(state.address).lstrip(": ")
                logger.warning(
                    "%s unreachable for %.1f s; last error: %s", state.address, lasted, cause
                )

    def _recover(self, state: _State) -> None:
        if state.since is None:
            return
        if state.warned:
            lasted = self._clock() - state.since
            what = "the cluster is" if state is self._cluster else f"{state.address} is"
            logger.info("%s reachable again after %.1f s", what, lasted)
        state.since = state.wall_since = None
        state.warned = False

    def snapshot(self, *, connected: bool) -> ClusterHealth:
        """The current status (``connected``: bootstrapped and not closed)."""
        now = self._clock()
        brokers = tuple(
            BrokerHealth(
                node_id=s.node_id,
                address=s.address,
                reachable=s.since is None,
                unreachable_since=s.wall_since,
                unreachable_for=0.0 if s.since is None else now - s.since,
                last_error=s.last_error,
            )
            for s in sorted(self._brokers.values(), key=lambda s: (s.node_id < 0, s.node_id))
        )
        down = self._cluster.since is not None
        # A broker counts against ``ok`` while the attempts to reach it keep failing: for
        # longer than warn_after, the latest within warn_after. One nobody dials any more
        # (its partitions led elsewhere now, say) is not held against the client for ever
        # on the strength of an old failure: it may long be back.
        long_down = any(
            s.since is not None and now - s.since > self._warn_after >= now - s.last
            for s in self._brokers.values()
        )
        return ClusterHealth(
            ok=connected and not down and not long_down,
            connected=connected,
            brokers=brokers,
            unreachable_since=self._cluster.wall_since,
            last_error=self._cluster.last_error if down else None,
        )

    def keep_only(self, node_ids: Collection[int]) -> None:
        """Stop reporting brokers that left the cluster (ids not in ``node_ids``)."""
        gone = [k for k, s in self._brokers.items() if s.node_id >= 0 and s.node_id not in node_ids]
        for key in gone:
            del self._brokers[key]
