"""Strict record limits (KIP-1206): a member never holds more than ``limit`` records.

In the broker's ``record_limit`` acquire mode (ShareFetch v2, Kafka 4.2+) a ShareFetch
acquires at most its ``MaxRecords`` records, instead of whole batches. That bounds one
request; the member as a whole stays within ``limit`` only if no request asks for more than
what is left: records still held (buffered, handed out, or answered but not yet confirmed)
and records that requests already in flight, to any leader, may bring. This module keeps
that count; the fetchers ask it before each fetch.
"""

from __future__ import annotations

__all__ = ["RecordBudget"]


class RecordBudget:
    """How many more records this member may acquire, shared by its fetch loops.

    :param limit: the most records the member may hold at once (``max_records``).
    """

    __slots__ = ("limit", "reserved")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.limit = limit
        #: Records that fetches in flight may still acquire.
        self.reserved = 0

    def grant(self, held: int) -> int:
        """Reserve what a fetch may acquire now, given ``held`` records not yet finished;
        0 means this fetch must not ask for records at all."""
        n = self.limit - held - self.reserved
        if n <= 0:
            return 0
        self.reserved += n
        return n

    def settle(self, granted: int) -> None:
        """The fetch that was granted ``granted`` was answered (its records are now held
        and counted by the caller), failed, or was never sent."""
        self.reserved = max(0, self.reserved - granted)
