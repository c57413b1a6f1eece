"""Records taken from the buffer for a hand-out that was cancelled before it could give
them to the application (a ``poll()`` timeout or a cancel scope while an async
deserializer was awaited).

Rules of this module:

1. Nothing taken is lost: what a cancelled hand-out (``poll()``, ``async for``,
   ``process()``) took from the buffer and had not handed out is kept here, and the next
   hand-out serves it first, in the order taken, before the buffer. The broker counted
   the delivery attempt when it acquired the records; handing them out now spends nothing
   more (releasing them would spend one each).
2. A record the deserializers finished is kept decoded (never deserialized twice); one
   whose deserialization was cut short is kept raw (the deserializers assign key and value
   only once both are done, so nothing of it changed).
3. A record whose lock ended while it was kept is not handed out: it is passed to
   ``expired`` (which forgets its delivery, as the buffer does for its own), since the
   broker is delivering it again. Nor is one this consumer no longer holds (its share
   session was lost, as the buffer drops such chunks): ``holds`` says which.
4. Closing releases what is kept with the buffered records: the ledger holds them as
   acquired and never handed out, as it does the buffer's.
5. Only hand-outs with deserializers can be cancelled between taking a record and handing
   it out, so only they look here: a consumer without deserializers pays nothing.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from sharecon.record import Record

__all__ = ["Holdback"]


class Holdback:
    """The records of rule 1, oldest first, each with whether it is deserialized.

    :param expired: called with a kept record whose lock ended (rule 3).
    :param holds: whether a kept record is still this consumer's to answer (rule 3).
    :ivar items: the kept records (test its truth to know whether any are kept: no call).
    """

    __slots__ = ("expired", "holds", "items")

    def __init__(
        self,
        expired: Callable[[Record[Any, Any]], None],
        holds: Callable[[Record[Any, Any]], bool],
    ) -> None:
        self.expired = expired
        self.holds = holds
        self.items: deque[tuple[Record[Any, Any], bool]] = deque()

    def keep(self, decoded: Iterable[Record[Any, Any]], raw: Record[Any, Any] | None) -> None:
        """Keep, ahead of what is kept already, ``decoded`` records then ``raw`` (rule 2)."""
        front = [(rec, True) for rec in decoded]
        if raw is not None:
            front.append((raw, False))
        self.items.extendleft(reversed(front))

    def take(self, clock: Callable[[], float]) -> tuple[Record[Any, Any], bool] | None:
        """The oldest kept record still held, whose lock has not ended, and whether it
        is decoded (rule 3)."""
        items = self.items
        while items:
            rec, decoded = items.popleft()
            deadline = rec.lock_deadline
            if deadline is not None and clock() >= deadline:
                self.expired(rec)
                continue
            if not self.holds(rec):
                continue
            return rec, decoded
        return None
