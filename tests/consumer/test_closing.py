"""The close's order (``sharecon._consumer.closing``), which ``ShareConsumer.close`` and
the seeded simulation both run."""

from __future__ import annotations

import pytest

from sharecon._consumer.closing import CloseStep, close_steps
from sharecon.errors import InvalidRecordStateError
from sharecon.types import AckType
from tests.consumer.test_core_unit import TP, _core, _push, _taken

pytestmark = pytest.mark.anyio


async def test_the_close_refuses_answers_then_releases_then_leaves() -> None:
    core = _core()
    _push(core, 0, 2)
    _push(core, 5, 2)
    held = core.buffer.pop_one(lambda: 0.0)
    assert held is not None
    steps = close_steps(core.machine, core.buffer, core.apply_effects)
    assert next(steps) is CloseStep.STOP_DEAD_LETTERS
    # Rule 1: answers are refused from the first step on; nothing is released yet (a
    # dead-letter copy being written keeps its record's lock).
    with pytest.raises(InvalidRecordStateError, match="closed"):
        core.handout.acknowledge(held, AckType.ACCEPT)
    assert len(core.buffer) == 2 and _taken(core) == {}
    assert next(steps) is CloseStep.CLOSE_FETCHERS
    # Rule 3: the record in hand and every buffered one released, the buffer empty.
    assert len(core.buffer) == 0 and core.buffer.records == 0
    taken = _taken(core)[TP]
    released = [o for b in taken for o in range(b.first_offset, b.last_offset + 1)]
    assert released == [0, 1, 5, 6]
    assert {t for b in taken for t in b.types} == {AckType.RELEASE}
    assert next(steps) is CloseStep.LEAVE_GROUP
    assert next(steps, None) is None
