"""Batch acquisition (Kafka 4.1's only mode): which buffered answers a member cannot reach
before their locks end, so it releases them at once.

Under batch acquisition the broker hands out whole producer batches, whatever
``max_records`` says; one answer can hold more than the application handles within the
lock. A record it cannot reach in time would wait in the buffer until its lock ends,
spending one delivery attempt unseen and keeping it from every other member meanwhile.
Released at once, it costs the same one attempt (the broker counted it at acquisition),
and another member can have it now.

Rules of this module:

1. At the measured handling rate, the buffered records are reached in order: the first
   record of a chunk (one partition's records of one answer) ``waiting / rate`` seconds
   from now, ``waiting`` being the records before it. A chunk whose first record would be
   reached only at or after its lock's end is released whole, at once (:func:`unreachable`).
   A chunk whose first record can be reached is kept whole: the records it can reach are
   worth more than the attempt its tail may spend.
2. Nothing is released while the rate is unmeasured.
3. No fetch while the member holds more than it handles within half the lock
   (:func:`~.record_limit.hold_limit`, :meth:`ShareMachine.next_turn`): a released answer
   is fetched again only when it can be reached, never in a loop of acquire and release.
   The limit is never below the application's handlers (``ShareMachine.handlers``).
4. No I/O, no clock: time is the caller's ``now``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["unreachable"]


def unreachable(
    now: float, rate: float | None, chunks: Sequence[tuple[float | None, int]]
) -> list[int]:
    """The indices of ``chunks`` (``(lock deadline, records still to hand out)`` each,
    oldest first) to release now (rules 1, 2)."""
    if rate is None or rate <= 0:
        return []
    out: list[int] = []
    waiting = 0
    for i, (deadline, n) in enumerate(chunks):
        if n <= 0:
            continue
        if deadline is not None and now + waiting / rate >= deadline:
            out.append(i)
            continue
        waiting += n
    return out
