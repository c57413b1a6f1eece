"""Which refused lock renewals are news: told once per record, not once per tick.

A record that must keep its lock (one waiting out a ``release(delay=...)``, or held by a
slow handler) is renewed on every tick of its keeper until its lock ends. When the broker
refuses those renewals (a group with ``share.renew.acknowledge.enable=false``, a lost
session), each tick fails again for the same records. The user should hear of each record
once; the repeats are DEBUG.

Rules of this module:

1. Sans-I/O: it sees the records of each refusal, nothing else.
2. The broker answers renewals per partition, so all renewing records of a refused
   partition are refused together: a partition's memory is replaced by its latest refusal.
   A record refused on one tick and again on the next is news once; one renewed in
   between, or new to the partition, is news again. Memory is bounded by the records of
   the partitions refused last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sharecon.types import TopicIdPartition

__all__ = ["RenewRefusals"]


class RenewRefusals:
    """Remembers, per partition, the records whose renewal was last refused."""

    __slots__ = ("_told",)

    def __init__(self) -> None:
        self._told: dict[TopicIdPartition, frozenset[int]] = {}

    def news(self, records: Iterable[tuple[TopicIdPartition, int]]) -> int:
        """Record a refusal of ``records`` ((partition, offset) pairs); return how many of
        them were not refused on the previous refusal of their partition."""
        refused: dict[TopicIdPartition, set[int]] = {}
        for tp, offset in records:
            refused.setdefault(tp, set()).add(offset)
        new = 0
        for tp, offsets in refused.items():
            new += len(offsets - self._told.get(tp, frozenset()))
            self._told[tp] = frozenset(offsets)
        return new
