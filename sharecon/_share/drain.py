"""When a member that stopped fetching has no fetch left that could bring it records.

``ShareConsumer.stop_fetching()`` stops fetching for good, but a ShareFetch already
planned or on the wire may still come back with records, which the member then holds.
A drain that leaves before that answer is in releases those records unhandled (one
delivery attempt each). This module says when no such fetch is left.

Rules of this module:

1. A fetch counts from the moment its loop plans it (before it is sent: fetching may stop
   while the send waits for a connection) until the records of its answer are in the
   buffer, or it failed, or its loop ended. Renewals, acknowledgements and the final
   request of a session do not count: they acquire nothing.
2. Drained means: fetching stopped and no fetch counts, on any leader.
3. Once drained, the member stays drained: with fetching stopped no fetch is planned
   again. A fetch planned anyway counts (and :attr:`FetchDrain.drained` is false again):
   the rule never claims more than it knows.
4. No I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FetchDrain"]


@dataclass(slots=True)
class FetchDrain:
    """The fetches outstanding per leader, and whether fetching stopped (rules 1-3)."""

    #: ``stop_fetching()`` was called.
    stopped: bool = False
    #: Leader node id -> fetches planned or on the wire whose records are not in yet.
    out: dict[int, int] = field(default_factory=dict)

    @property
    def drained(self) -> bool:
        """Fetching stopped and no fetch can bring more records (rule 2)."""
        return self.stopped and not self.out

    def stop(self) -> bool:
        """Fetching stopped; returns :attr:`drained`."""
        self.stopped = True
        return self.drained

    def planned(self, node_id: int) -> None:
        """``node_id``'s loop planned a fetch (rule 1)."""
        self.out[node_id] = self.out.get(node_id, 0) + 1

    def ended(self, node_id: int) -> bool:
        """One of ``node_id``'s fetches is over: its records are in, or it failed.
        Returns :attr:`drained`."""
        left = self.out.get(node_id, 0) - 1
        if left > 0:
            self.out[node_id] = left
        else:
            self.out.pop(node_id, None)
        return self.drained

    def loop_ended(self, node_id: int) -> bool:
        """``node_id``'s loop ended: nothing of it is outstanding any more. Returns
        :attr:`drained`."""
        self.out.pop(node_id, None)
        return self.drained
