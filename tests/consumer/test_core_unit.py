"""The consumer core's bookkeeping without a broker: which offsets poll() marks handed out,
and lock-lost answers reported once."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

from sharecon._consumer.config import ConsumerConfig
from sharecon._consumer.core import ConsumerCore, SessionOwner
from sharecon._share.acks import batches_from_runs
from sharecon._share.ledger import AckFailure, AckLedger, AckResult
from sharecon._share.session import SessionTag
from sharecon.consumer import _deliver
from sharecon.record import Record
from sharecon.types import TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 0, "t")
TAG = SessionTag(1, 0)


def rec(offset: int) -> Record:
    return Record("t", 0, TP, None, None, None, offset, 0, None, b"v", ())


def test_poll_marks_handed_out_only_what_it_handed_out() -> None:
    # Chunk 1 holds 0..9 and 50..59; another delivery of 10..49 is still buffered behind it.
    ledger = AckLedger()
    ledger.add(TP, TAG, [(0, 9), (50, 59)])
    ledger.add(TP, TAG, [(10, 49)])
    core = cast("Any", SimpleNamespace(ledger=ledger))
    _deliver(core, [rec(o) for o in [*range(10), *range(50, 60)]])
    assert ledger.unacknowledged() == {TP: [*range(10), *range(50, 60)]}


def lost(offset: int) -> AckResult:
    return AckResult(TP, tuple(batches_from_runs([(offset, offset, 1)])), 121, AckFailure.LOCK_LOST)


def test_lock_lost_answers_reach_one_commit_only() -> None:
    core = ConsumerCore(
        cast("Any", None), ConsumerConfig(group_id="g", topics=("t",)), cast("Any", None)
    )
    seen: list[AckResult] = []
    core.on_acknowledged = seen.extend
    # No commit running: kept for the next one (and told to the callback now).
    core.report_lost([lost(1)])
    assert core.lost == [lost(1)] and seen == [lost(1)]
    # A commit collecting right now gets it; it is not kept for the commit after.
    collected: list[AckResult] = core.lost
    core.lost = []
    core.collectors.append(collected)
    core.report_lost([lost(2)])
    assert collected == [lost(1), lost(2)] and core.lost == []


def test_a_lost_session_forgets_its_pending_renews() -> None:
    core = ConsumerCore(
        cast("Any", None), ConsumerConfig(group_id="g", topics=("t",)), cast("Any", None)
    )
    other = SessionTag(2, 0)
    mine = Record(
        "t", 0, TP, SessionOwner(cast("Any", None), TAG, (1, 1)), None, None, 5, 0, None, b"", ()
    )
    theirs = Record(
        "t", 0, TP, SessionOwner(cast("Any", None), other, (2, 2)), None, None, 6, 0, None, b"", ()
    )
    core.renewing = {(TP, 5): mine, (TP, 6): theirs}
    core.session_lost(TAG)
    assert core.renewing == {(TP, 6): theirs}
    core.partition_lost(TP, 2, 6)
    assert core.renewing == {}
