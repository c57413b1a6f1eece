"""The autoscaling rule of ``sharecon worker --autoscale MIN:MAX``: sans-I/O, time passed in.

The supervisor feeds :meth:`Autoscaler.observe` one :class:`Sample` at a time (the group's
backlog, how busy the processes' handlers were, how many processes run) and carries out
the :class:`Decision` it returns, if any. Rules:

1. **Up** when the handlers are busy (``busy >= busy_high``) and the backlog is above
   ``backlog_high`` and has not fallen since the condition began, for ``up_after``
   seconds in a row. An unknown backlog (the broker does not report lag) does not block
   scaling up: busy handlers alone then decide.
   **Up** also when the handlers are not busy (``busy < busy_high``) but the backlog is
   above ``backlog_high`` and *growing*: no sample below the one before, and higher at
   the end than at the start, over ``up_after`` seconds. The processes then cannot take
   records as fast as they come (each holds few, with a small ``--max-records``), so
   another process adds fetching. This needs a known backlog.
2. **Down** when the handlers are idle (``busy <= busy_low``) and the backlog is at most
   ``backlog_low`` (or unknown), for ``down_after`` seconds in a row.
3. Hysteresis: ``busy_low < busy_high`` and ``backlog_low <= backlog_high``, so a load
   between the two moves nothing; each condition must hold for its whole window, and any
   sample that breaks it starts the window again.
4. Cool-down: after a change, no other change for ``cooldown`` seconds (the new process
   has to join and take its partitions, the removed one to drain, before their effect
   shows in the samples).
5. One process at a time, always within ``[minimum, maximum]``; a count outside the
   range is brought back at once, cool-down or not.
6. Every decision carries its reason, for the log line the supervisor writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharecon import errors

__all__ = ["AutoscalePolicy", "Autoscaler", "Decision", "Sample", "parse_range"]


@dataclass(frozen=True, slots=True)
class AutoscalePolicy:
    """The thresholds and windows of the rule (see the module rules).

    :param minimum: fewest processes (at least 1).
    :param maximum: most processes (at least ``minimum``).
    :param busy_high: handler busyness (0..1, the share of handler slots in use, averaged
        over the processes) at or above which the processes count as busy.
    :param busy_low: busyness at or below which they count as idle.
    :param backlog_high: records of backlog above which adding a process can help.
    :param backlog_low: records of backlog at or below which a process may go.
    :param up_after: seconds the up condition must hold.
    :param down_after: seconds the down condition must hold.
    :param cooldown: seconds after a change before the next one.
    :raises ConfigError: for an inconsistent policy, naming what is wrong.
    """

    minimum: int
    maximum: int
    busy_high: float = 0.75
    busy_low: float = 0.25
    backlog_high: int = 0
    backlog_low: int = 0
    up_after: float = 5.0
    down_after: float = 30.0
    cooldown: float = 30.0

    def __post_init__(self) -> None:
        if self.minimum < 1:
            raise errors.ConfigError(f"autoscale minimum must be at least 1, not {self.minimum}")
        if self.maximum < self.minimum:
            raise errors.ConfigError(
                f"autoscale maximum ({self.maximum}) is below its minimum ({self.minimum})"
            )
        if not 0.0 <= self.busy_low < self.busy_high <= 1.0:
            raise errors.ConfigError(
                "autoscale busyness thresholds need 0 <= busy_low < busy_high <= 1, not "
                f"{self.busy_low} and {self.busy_high}"
            )
        if not 0 <= self.backlog_low <= self.backlog_high:
            raise errors.ConfigError(
                "autoscale backlog thresholds need 0 <= backlog_low <= backlog_high, not "
                f"{self.backlog_low} and {self.backlog_high}"
            )
        for name in ("up_after", "down_after", "cooldown"):
            if not getattr(self, name) >= 0:
                raise errors.ConfigError(
                    f"autoscale {name} must not be negative, not {getattr(self, name)}"
                )


@dataclass(frozen=True, slots=True)
class Sample:
    """What the supervisor sees at ``now``.

    :param now: a monotonic time in seconds.
    :param processes: processes running (not counting those draining).
    :param busy: handler busyness, 0..1, over the last reports of those processes.
    :param backlog: records in the group's backlog (share-group lag), ``None`` if unknown.
    """

    now: float
    processes: int
    busy: float
    backlog: int | None


@dataclass(frozen=True, slots=True)
class Decision:
    """Run ``target`` processes instead of ``current``, because of ``reason``."""

    current: int
    target: int
    reason: str


def parse_range(text: str) -> tuple[int, int]:
    """``"MIN:MAX"`` as two ints.

    :raises ConfigError: not two positive ints with ``MIN <= MAX``.
    """
    low, sep, high = text.partition(":")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        lo = hi = 0
    if not sep or lo < 1 or hi < lo:
        raise errors.ConfigError(
            f"autoscale must be MIN:MAX with 1 <= MIN <= MAX (e.g. 1:4), not {text!r}"
        )
    return lo, hi


class Autoscaler:
    """The rule's state: when each condition began, and when the last change was."""

    def __init__(self, policy: AutoscalePolicy) -> None:
        self.policy = policy
        #: (time, backlog) when the up condition began holding; None while it does not.
        self._up_since: tuple[float, int | None] | None = None
        self._down_since: float | None = None
        #: (time, backlog) when the backlog began growing with idle handlers (rule 1).
        self._grow_since: tuple[float, int] | None = None
        #: The backlog of the last sample of that window.
        self._grow_last = 0
        self._last_change: float | None = None

    def _changed(self, now: float, current: int, target: int, reason: str) -> Decision:
        self._last_change = now
        self._up_since = None
        self._down_since = None
        self._grow_since = None
        return Decision(current, target, reason)

    def observe(self, sample: Sample) -> Decision | None:
        """Take one sample; returns the change to make now, if any."""
        p = self.policy
        now, n = sample.now, sample.processes
        if n < p.minimum:
            return self._changed(now, n, p.minimum, f"below the minimum of {p.minimum}")
        if n > p.maximum:
            return self._changed(now, n, p.maximum, f"above the maximum of {p.maximum}")
        backlog = sample.backlog
        shown = "unknown" if backlog is None else f"{backlog:,}"

        up = sample.busy >= p.busy_high and (backlog is None or backlog > p.backlog_high)
        if up:
            if self._up_since is None:
                self._up_since = (now, backlog)
        else:
            self._up_since = None
        if backlog is not None and backlog > p.backlog_high and sample.busy < p.busy_high:
            if self._grow_since is None or backlog < self._grow_last:
                self._grow_since = (now, backlog)  # (re)starts: not growing since
            self._grow_last = backlog
        else:
            self._grow_since = None
        down = sample.busy <= p.busy_low and (backlog is None or backlog <= p.backlog_low)
        if down:
            if self._down_since is None:
                self._down_since = now
        else:
            self._down_since = None

        if self._last_change is not None and now - self._last_change < p.cooldown:
            return None
        if self._up_since is not None and n < p.maximum:
            since, first = self._up_since
            if backlog is not None and first is not None and backlog < first:
                # Falling: the processes there are catching up; start the window again.
                self._up_since = (now, backlog)
            elif now - since >= p.up_after:
                return self._changed(
                    now,
                    n,
                    n + 1,
                    f"handlers {sample.busy:.0%} busy and backlog {shown} not falling "
                    f"for {now - since:.1f} s",
                )
        if self._grow_since is not None and backlog is not None and n < p.maximum:
            since, first = self._grow_since
            if now - since >= p.up_after and backlog > first:
                return self._changed(
                    now,
                    n,
                    n + 1,
                    f"backlog growing from {first:,} to {backlog:,} in {now - since:.1f} s "
                    f"with handlers only {sample.busy:.0%} busy (more fetching needed)",
                )
        if self._down_since is not None and n > p.minimum:
            since = self._down_since
            if now - since >= p.down_after:
                return self._changed(
                    now,
                    n,
                    n - 1,
                    f"handlers {sample.busy:.0%} busy and backlog {shown} for {now - since:.1f} s",
                )
        return None
