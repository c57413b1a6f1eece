"""sharecon._consumer.holdback: what a cancelled hand-out took, served first, in order,
decoded ones marked so; a record whose lock ended or that is no longer held is dropped."""

from __future__ import annotations

from typing import Any

from sharecon._consumer.holdback import Holdback
from sharecon.record import Record


def _rec(offset: int, lock_deadline: float | None = 100.0) -> Record[Any, Any]:
    return Record.build("t", b"v", offset=offset, lock_deadline=lock_deadline)


def test_kept_records_come_back_first_in_the_order_taken() -> None:
    held = Holdback(lambda r: None, lambda r: True)
    a, b, c, d = (_rec(i) for i in range(4))
    held.keep([c], d)  # a later cancel...
    held.keep([a], b)  # ...then an earlier one served from what was kept: ahead of it
    got = []
    while (kept := held.take(lambda: 0.0)) is not None:
        got.append((kept[0].offset, kept[1]))
    assert got == [(0, True), (1, False), (2, True), (3, False)]
    assert not held.items


def test_a_record_whose_lock_ended_or_that_is_lost_is_not_handed_out() -> None:
    expired: list[int] = []
    lost = {2}
    held = Holdback(lambda r: expired.append(r.offset), lambda r: r.offset not in lost)
    held.keep([_rec(0, lock_deadline=5.0), _rec(1, lock_deadline=None), _rec(2)], _rec(3))
    first = held.take(lambda: 10.0)
    assert first is not None and first[0].offset == 1  # no deadline: kept
    second = held.take(lambda: 10.0)
    assert second is not None and (second[0].offset, second[1]) == (3, False)
    assert expired == [0]  # the lost one (2) is dropped without counting as expired
    assert held.take(lambda: 10.0) is None
