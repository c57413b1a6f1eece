"""KIP-714 client telemetry decisions: sans-I/O, time passed in.

The loop in :mod:`sharecon._telemetry` asks :meth:`TelemetryPlan.next` what to do and
when, sends it, and reports the answer back. Rules (after KIP-714 and the Java client):

1. First GetTelemetrySubscriptions with a zero client instance id; the broker assigns one,
   kept for the client's life.
2. A subscription with no requested metric means nothing to push: ask again after its
   push interval. ``[""]`` means every metric; otherwise a metric is pushed when its name
   starts with one of the requested prefixes.
3. The first push comes after a random 0.5 to 1.5 push intervals (so clients started
   together do not push together), then one every push interval.
4. A push answered UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE: ask for the
   subscription again at once. TELEMETRY_TOO_LARGE: skip this push, go on. Any other
   error, or a payload over the broker's limit: stop pushing (logged by the loop).
   THROTTLING_QUOTA_EXCEEDED (a push sooner than the interval): go on at the next one.
   A subscription request that fails: ask again after a back-off, then stop after 5.
   UNSUPPORTED_VERSION to it (a broker without a telemetry receiver plugin): stop, quietly.
5. When the client closes, one last push with ``terminating`` set, if it was subscribed
   to any metric; then nothing more.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Subscription", "TelemetryAction", "TelemetryPlan"]

#: Seconds before asking again after a failed GetTelemetrySubscriptions.
RETRY_AFTER = 5.0
#: Failed GetTelemetrySubscriptions in a row before giving up.
MAX_FAILURES = 5
ZERO = uuid.UUID(int=0)
#: Push answers after which pushing goes on at the next interval.
_GO_ON = frozenset(
    {ErrorCode.NONE, ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED}
)


class TelemetryAction(Enum):
    """What to send next."""

    SUBSCRIBE = "subscribe"
    PUSH = "push"


@dataclass(frozen=True, slots=True)
class Subscription:
    """What the broker asked for (GetTelemetrySubscriptions' answer)."""

    subscription_id: int
    push_interval: float
    max_bytes: int
    delta: bool
    prefixes: tuple[str, ...]
    compressions: tuple[int, ...] = ()

    def wants(self, name: str) -> bool:
        """Whether metric ``name`` is requested."""
        return any(name.startswith(p) for p in self.prefixes)


class TelemetryPlan:
    """The client's telemetry state; see the module rules."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self.instance_id = ZERO
        self.subscription: Subscription | None = None
        #: When the next action is due (monotonic seconds); None: now.
        self._due: float | None = None
        self._action: TelemetryAction | None = TelemetryAction.SUBSCRIBE
        self._failures = 0
        self.disabled_reason: str | None = None
        #: The stop was expected (the broker takes no telemetry): logged at DEBUG only.
        self.quiet = False
        self.terminated = False
        #: Monotonic time of the last push sent (start of the next delta period).
        self.last_push: float | None = None

    def next(self, now: float) -> tuple[TelemetryAction | None, float | None]:
        """``(action, due)``: the action to send once ``now >= due`` (``due`` ``None``: now);
        ``(None, None)`` once disabled or terminated."""
        if self.disabled_reason is not None or self.terminated:
            return None, None
        return self._action, self._due

    def disable(self, reason: str, *, quiet: bool = False) -> None:
        """Push nothing more (rule 4); ``quiet``: an expected stop, not worth a warning."""
        self.disabled_reason = reason
        self.quiet = quiet
        self._action = None

    def selected(self, names: Iterable[str]) -> list[str]:
        """The metric names to push, of ``names``."""
        sub = self.subscription
        return [] if sub is None else [n for n in names if sub.wants(n)]

    # -- answers ---------------------------------------------------------------------------

    def on_subscription(
        self,
        now: float,
        *,
        error_code: int,
        instance_id: uuid.UUID,
        subscription_id: int,
        push_interval_ms: int,
        max_bytes: int,
        delta: bool,
        requested: Iterable[str],
        compressions: Iterable[int] = (),
    ) -> None:
        """GetTelemetrySubscriptions answered (or failed: ``error_code`` non-zero)."""
        if error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The broker has no telemetry receiver (no ClientTelemetry plugin): nothing
            # will ever be asked for; stop without a fuss.
            self.disable("the broker takes no client telemetry", quiet=True)
            return
        if error_code != ErrorCode.NONE:
            self.on_subscription_failed(now, f"error code {error_code}")
            return
        self._failures = 0
        if self.instance_id == ZERO and instance_id != ZERO:
            self.instance_id = instance_id
        interval = max(push_interval_ms, 100) / 1000
        sub = Subscription(
            subscription_id, interval, max_bytes, delta, tuple(requested), tuple(compressions)
        )
        first = self.subscription is None or not self.subscription.prefixes
        self.subscription = sub
        if not sub.prefixes:
            self._action, self._due = TelemetryAction.SUBSCRIBE, now + interval
        elif first:
            self._action = TelemetryAction.PUSH
            self._due = now + interval * self._rng.uniform(0.5, 1.5)
        else:
            self._action, self._due = TelemetryAction.PUSH, now + interval

    def on_subscription_failed(self, now: float, why: str) -> None:
        """GetTelemetrySubscriptions could not be sent or answered."""
        self._failures += 1
        if self._failures >= MAX_FAILURES:
            self.disable(f"GetTelemetrySubscriptions failed {self._failures} times: {why}")
            return
        self._action, self._due = TelemetryAction.SUBSCRIBE, now + RETRY_AFTER

    def on_pushed(self, now: float, error_code: int) -> None:
        """PushTelemetry answered."""
        self.last_push = now
        sub = self.subscription
        if error_code in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ):
            self._action, self._due = TelemetryAction.SUBSCRIBE, None
        elif error_code in _GO_ON and sub is not None:
            self._action, self._due = TelemetryAction.PUSH, now + sub.push_interval
        else:
            self.disable(f"PushTelemetry answered error code {error_code}")

    def terminate(self) -> bool:
        """The client closes: whether to send one last push, with ``terminating`` set."""
        push = (
            not self.terminated
            and self.disabled_reason is None
            and self.subscription is not None
            and bool(self.subscription.prefixes)
        )
        self.terminated = True
        return push
