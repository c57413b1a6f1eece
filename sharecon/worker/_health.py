"""The worker's health, decided without I/O: what ``GET /healthz`` and ``GET /readyz`` answer.

Rules of this module:

1. **Live** (``/healthz``, a liveness probe: failing it restarts the container) while the
   supervisor's loop ticks (its last tick is at most ``STALL_AFTER`` seconds old) and no
   worker process is stuck: one that reported went silent for longer than
   ``silent_after``, or one that never reported is older than ``startup_after``. A
   process the supervisor is restarting (none running in its slot) is not stuck: the
   supervisor is doing its job.
2. **Ready** (``/readyz``, a readiness probe: failing it takes the pod out of service)
   while not draining and at least one running process's last report says its
   consumer's ``health()`` is ok and that report is fresh (not older than
   ``silent_after``).
3. Every answer has a one-line reason, for the probe's log and for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["STALL_AFTER", "ChildView", "Verdict", "liveness", "readiness"]

#: Seconds without a tick of the supervisor's loop before it is not live.
STALL_AFTER = 10.0


@dataclass(frozen=True, slots=True)
class ChildView:
    """One worker process as the supervisor last saw it (times on one monotonic clock).

    :param index: its slot.
    :param running: a process runs in the slot (not between a death and its restart).
    :param started: when the process started.
    :param last_report: when it last reported (``started`` until it has).
    :param reported: it has reported at least once.
    :param health_ok: its consumer's ``health().ok`` in its last report (``False`` before).
    :param health_reason: why not, from its last report.
    """

    index: int
    running: bool
    started: float
    last_report: float
    reported: bool
    health_ok: bool = False
    health_reason: str = "not reported yet"


@dataclass(frozen=True, slots=True)
class Verdict:
    """An answer: ``ok`` (HTTP 200) or not (503), and why."""

    ok: bool
    reason: str


def liveness(
    children: Sequence[ChildView],
    now: float,
    *,
    last_tick: float,
    silent_after: float,
    startup_after: float,
) -> Verdict:
    """Whether the worker is live (rule 1)."""
    stalled = now - last_tick
    if stalled > STALL_AFTER:
        return Verdict(False, f"the supervisor's loop has not run for {stalled:.1f} s")
    for child in children:
        if not child.running:
            continue
        if child.reported:
            silent = now - child.last_report
            if silent > silent_after:
                return Verdict(False, f"process {child.index} has not reported for {silent:.1f} s")
        elif now - child.started > startup_after:
            return Verdict(
                False,
                f"process {child.index} has not reported since it started "
                f"{now - child.started:.1f} s ago",
            )
    running = sum(1 for c in children if c.running)
    return Verdict(True, f"live: {running} of {len(children)} processes running")


def readiness(
    children: Sequence[ChildView],
    now: float,
    *,
    draining: bool,
    silent_after: float,
) -> Verdict:
    """Whether the worker is ready for work (rule 2)."""
    if draining:
        return Verdict(False, "draining")
    healthy = [
        c
        for c in children
        if c.running and c.reported and c.health_ok and now - c.last_report <= silent_after
    ]
    if healthy:
        return Verdict(True, f"ready: {len(healthy)} of {len(children)} consumers healthy")
    why = [f"process {c.index}: {_why_not(c, now, silent_after)}" for c in children]
    return Verdict(False, "no healthy consumer" + (f" ({'; '.join(why)})" if why else ""))


def _why_not(child: ChildView, now: float, silent_after: float) -> str:
    if not child.running:
        return "not running"
    if child.health_ok:
        return f"last report {now - child.last_report:.1f} s old"
    return child.health_reason
