"""When to rebootstrap: drop the learned brokers and start again from the bootstrap names.

Sans-I/O (time is passed in; nothing here touches a socket or a clock), as in the Java
client's ``metadata.recovery.strategy=rebootstrap`` (KIP-899, KIP-1102). Two triggers:

1. No known broker could be reached, and no metadata arrived, for ``trigger`` seconds
   (``metadata_recovery_rebootstrap_trigger_ms``): every broker may have moved to new
   addresses (pods rescheduled, managed-cluster maintenance), so the addresses learned
   from metadata are worthless and only the bootstrap names can lead to the cluster again.
2. A Metadata response carries ``REBOOTSTRAP_REQUIRED`` (error 129): the broker itself says
   the client's view is stale; rebootstrap at once.

With strategy ``"none"`` neither trigger fires: the learned brokers are kept for the life of
the client (the Java client's behaviour before KIP-899).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sharecon import errors
from sharecon.protocol.error_codes import ErrorCode

__all__ = [
    "DEFAULT_TRIGGER_MS",
    "STRATEGIES",
    "RebootstrapPolicy",
    "check_recovery_settings",
]

#: Java's ``metadata.recovery.rebootstrap.trigger.ms`` default: 5 minutes.
DEFAULT_TRIGGER_MS = 300_000
#: The values ``metadata_recovery_strategy`` takes (Java's, lower case).
STRATEGIES = ("rebootstrap", "none")


def check_recovery_settings(strategy: object, trigger_ms: object) -> None:
    """Check ``metadata_recovery_strategy`` and ``..._rebootstrap_trigger_ms``.

    :raises ConfigError: naming the setting and the value that is wrong.
    """
    if strategy not in STRATEGIES:
        raise errors.ConfigError(
            f"metadata_recovery_strategy must be one of {', '.join(map(repr, STRATEGIES))}, "
            f"got {strategy!r}"
        )
    # bool is an int, but True milliseconds is a mistake, not a setting.
    if isinstance(trigger_ms, bool) or not isinstance(trigger_ms, int) or trigger_ms < 0:
        raise errors.ConfigError(
            "metadata_recovery_rebootstrap_trigger_ms must be a whole number of milliseconds "
            f">= 0, got {trigger_ms!r}"
        )


@dataclass(slots=True)
class RebootstrapPolicy:
    """Decides when the cluster view must rebootstrap.

    The caller reports what happened (:meth:`reached`, :meth:`unreachable`) with the time
    it happened, and asks :meth:`due` before picking a broker for a request any broker can
    answer. :meth:`rebootstrapped` records that it did.

    :param strategy: ``"rebootstrap"`` or ``"none"``.
    :param trigger: seconds without any reachable known broker before rebootstrapping.
    """

    strategy: str = "rebootstrap"
    trigger: float = DEFAULT_TRIGGER_MS / 1000
    #: When the current run of failures to reach any known broker began (None: none now).
    unreachable_since: float | None = field(default=None, init=False)
    #: How many times the view rebootstrapped (for logs and health).
    count: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        check_recovery_settings(
            self.strategy, int(self.trigger * 1000) if math.isfinite(self.trigger) else -1
        )

    @property
    def enabled(self) -> bool:
        """Whether rebootstrapping is on at all."""
        return self.strategy == "rebootstrap"

    def reached(self) -> None:
        """A known broker answered (metadata arrived): the view is good again."""
        self.unreachable_since = None

    def unreachable(self, now: float) -> None:
        """No known broker could be reached just now (each was tried, or is backing off)."""
        if self.unreachable_since is None:
            self.unreachable_since = now

    def due(self, now: float) -> bool:
        """Whether to rebootstrap now: the known brokers have been unreachable too long."""
        return (
            self.enabled
            and self.unreachable_since is not None
            and now - self.unreachable_since >= self.trigger
        )

    def required_by(self, error_code: int) -> bool:
        """Whether a response's error code asks for a rebootstrap (and it is allowed)."""
        return self.enabled and error_code == ErrorCode.REBOOTSTRAP_REQUIRED

    def rebootstrapped(self) -> None:
        """The learned brokers were dropped; the next failure starts a new count."""
        self.count += 1
        self.unreachable_since = None
