"""The cursor's sans-I/O steps (``Cursor.move_on``, ``take``, ``acknowledge``): what
``async for`` awaits around and the seeded simulation runs, without an event loop of their
own (the core needs one to be built)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from sharecon._consumer.cursor import Cursor
from sharecon._consumer.liveness import Liveness
from sharecon._share.acks import AckBatch
from sharecon._share.ledger import AckFailure, MarkResult
from sharecon.errors import InvalidRecordStateError, UnacknowledgedRecordsError
from sharecon.types import AckType
from tests.consumer.test_core_unit import TAG, TP, _core, _push, _taken

pytestmark = pytest.mark.anyio


def _cursor(*, explicit: bool) -> Cursor:
    return Cursor(cast("Any", None), Liveness(None, 1.0), explicit=explicit)


def _clock() -> float:
    return 0.0


async def test_implicit_mode_accepts_the_record_left_unanswered() -> None:
    core = _core()
    _push(core, 0, 3)
    cursor = _cursor(explicit=False)
    first = cursor.take(core.buffer, _clock)
    assert first is not None and first.offset == 0 and cursor.current is first
    cursor.move_on(core.handout)  # asking for the next accepts offset 0
    assert cursor.current is None
    second = cursor.take(core.buffer, _clock)
    assert second is not None and second.offset == 1
    assert cursor.acknowledge(core.handout, second, AckType.REJECT) is MarkResult.OK
    cursor.move_on(core.handout)  # answered already: not accepted as well
    assert cursor.served == 2
    assert _taken(core) == {TP: [AckBatch(0, 1, (AckType.ACCEPT, AckType.REJECT))]}


async def test_explicit_mode_waits_for_an_answer_it_can_give() -> None:
    core = _core()
    _push(core, 0, 3)
    cursor = _cursor(explicit=True)
    rec = cursor.take(core.buffer, _clock)
    assert rec is not None
    with pytest.raises(UnacknowledgedRecordsError, match="t-0 offset 0"):
        cursor.move_on(core.handout)
    assert cursor.current is rec  # still in hand
    cursor.answered_elsewhere(rec)  # release(delay=) answered it
    cursor.move_on(core.handout)
    nxt = cursor.take(core.buffer, _clock)
    assert nxt is not None and nxt.offset == 1
    assert _taken(core) == {}  # nothing answered on the application's behalf


async def test_explicit_mode_goes_on_past_a_record_whose_loss_was_reported() -> None:
    # Found by the simulation (issue 30): the session of the record in hand ends, a renewal
    # reports its lock lost, and from then on every answer to it is refused. Asking for the
    # next record raised UnacknowledgedRecordsError for good; now the loop goes on.
    core = _core()
    _push(core, 0, 2)
    cursor = _cursor(explicit=True)
    rec = cursor.take(core.buffer, _clock)
    assert rec is not None
    core.ledger.invalidate(AckFailure.SESSION_RESET, 13, tag=TAG)
    delivery = rec._owner.delivery  # type: ignore[union-attr]
    assert core.machine.answer(TP, 0, AckType.RENEW, delivery) is MarkResult.DEAD
    core.apply_effects()  # the loss is reported
    with pytest.raises(InvalidRecordStateError, match="not held by this consumer"):
        cursor.acknowledge(core.handout, rec, AckType.ACCEPT)
    assert not cursor.answered
    cursor.move_on(core.handout)
    assert cursor.current is None


async def test_an_answer_through_the_cursor_marks_only_the_current_record() -> None:
    core = _core()
    _push(core, 0, 2)
    cursor = _cursor(explicit=True)
    rec = cursor.take(core.buffer, _clock)
    other = core.buffer.pop_one(_clock)  # handed out another way (process())
    assert rec is not None and other is not None
    cursor.acknowledge(core.handout, other, AckType.ACCEPT)
    assert not cursor.answered
    cursor.acknowledge(core.handout, rec, AckType.RELEASE)
    assert cursor.answered
    with pytest.raises(InvalidRecordStateError, match="already acknowledged"):
        cursor.acknowledge(core.handout, rec, AckType.ACCEPT)
