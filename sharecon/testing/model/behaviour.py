"""What differs between the Kafka lines the model broker imitates (4.1 to 4.4).

Each flag names one rule of Kafka's share-partition code and the line that introduced it;
:meth:`Behaviour.for_version` picks them for a version string such as ``"4.1.2"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Behaviour"]

_VERSION_RE = re.compile(r"^4\.(\d+)")


@dataclass(frozen=True, slots=True)
class Behaviour:
    """The version-dependent rules of one Kafka line.

    :ivar version: the line, ``"4.1"`` .. ``"4.4"``.
    :ivar session_release_decrements: records a closing share session still holds go back
        with their delivery count *lowered* by one (Kafka 4.1: the acquisition was not taken
        as a delivery). From 4.2 (KAFKA-19972) they keep the count they were acquired with.
    :ivar renew: the RENEW acknowledgement type and ``IsRenewAck`` (ShareFetch and
        ShareAcknowledge v2, KIP-1222): 4.2 and later.
    :ivar record_limit: ``ShareAcquireMode`` record_limit (ShareFetch v2): 4.2 and later.
    :ivar throttle_last_delivery: a record about to get its last delivery attempt is handed
        out alone (KAFKA-17541 part 2): 4.2 and later.
    :ivar renew_config: the group config ``share.renew.acknowledge.enable`` (KIP-1240):
        4.3 and later; before that renewing is always allowed where it exists.
    :ivar wakes_on_persist: a waiting ShareFetch is completed when records it could take
        finish being persisted (released by acknowledgements that rode on that same fetch,
        or by a final ShareFetch just before). Kafka 4.1 does not: such a fetch ends empty
        at its ``max_wait_ms``. Seen on 4.2, 4.3 and 4.4 by the conformance scenarios.
    :ivar fetch_version: the ShareFetch/ShareAcknowledge version the line serves at most.
    :ivar old_connection_ends_session: the close of a connection that once opened the
        member's share session ends the member's *current* session, even one a later
        epoch-0 request opened on another connection (and releases what the member holds).
        Kafka 4.1: its connection-to-session map is keyed by member; 4.2 (KAFKA-19950)
        marks a replaced session's old connection stale and ignores its close.
    """

    version: str
    session_release_decrements: bool
    renew: bool
    record_limit: bool
    throttle_last_delivery: bool
    renew_config: bool
    wakes_on_persist: bool
    fetch_version: int
    old_connection_ends_session: bool

    @classmethod
    def for_version(cls, version: str) -> Behaviour:
        """The rules of the Kafka line ``version`` (``"4.1"``, ``"4.4.0"``, ...).

        :raises ValueError: not a 4.1 to 4.4 version.
        """
        m = _VERSION_RE.match(version)
        if m is None or not 1 <= int(m.group(1)) <= 4:
            raise ValueError(f"the model broker knows Kafka 4.1 to 4.4, not {version!r}")
        minor = int(m.group(1))
        return cls(
            version=f"4.{minor}",
            session_release_decrements=minor == 1,
            renew=minor >= 2,
            record_limit=minor >= 2,
            throttle_last_delivery=minor >= 2,
            renew_config=minor >= 3,
            wakes_on_persist=minor >= 2,
            fetch_version=1 if minor == 1 else 2,
            old_connection_ends_session=minor == 1,
        )
