"""The close's order (``sharecon._consumer.closing``), which ``ShareConsumer.close`` and
the seeded simulation both run."""

from __future__ import annotations

import pytest

from sharecon._consumer.closing import CloseStep, close_steps, spares_buffered
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
    assert core.machine.released_unseen == 3  # 1, 5 and 6 were never handed out


async def test_on_kafka_4_1_the_close_leaves_the_buffered_records_to_the_sessions_end() -> None:
    """Rule 5: 4.1 lowers the delivery count of what a session's end gives back, not of a
    release. The record in hand (seen) is still released by an answer; the buffered ones
    are forgotten, for the FINAL request's session close to give back."""
    core = _core()
    _push(core, 0, 2)
    _push(core, 5, 2)
    held = core.buffer.pop_one(lambda: 0.0)
    assert held is not None and held.offset == 0
    steps = close_steps(core.machine, core.buffer, core.apply_effects, spare_buffered=True)
    assert next(steps) is CloseStep.STOP_DEAD_LETTERS
    assert next(steps) is CloseStep.CLOSE_FETCHERS
    assert len(core.buffer) == 0
    taken = _taken(core)[TP]
    assert [(b.first_offset, b.last_offset, set(b.types)) for b in taken] == [
        (0, 0, {AckType.RELEASE})
    ]
    assert core.machine.released_unseen == 0
    assert core.ledger.outstanding_all() == 1  # the release in flight; 1, 5, 6 finished


def test_only_a_broker_without_share_fetch_v2_spares_the_buffered_records() -> None:
    """Rule 5's predicate, which the consumer (from the bootstrap broker's versions) and
    the simulation (from its model's line) both ask."""
    assert spares_buffered(1) and spares_buffered(0)
    assert not spares_buffered(2) and not spares_buffered(3)
    assert not spares_buffered(None)  # not connected: nothing was fetched
