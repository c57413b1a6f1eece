"""The application's side of the share machine without a broker: which answers are refused
and how, and where acknowledgement outcomes go (sharecon._share.answers)."""

from __future__ import annotations

import uuid

import pytest

from sharecon._share.acks import batches_from_runs
from sharecon._share.answers import (
    LOST_KEPT,
    Outcomes,
    closed,
    position,
    refusal,
    renew_refusal,
)
from sharecon._share.ledger import AckFailure, AckResult, MarkResult
from sharecon.errors import InvalidRecordStateError, UnsupportedVersionError
from sharecon.types import AckType, TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 3, "orders")


def result(offset: int, *, ok: bool = True) -> AckResult:
    batches = tuple(batches_from_runs([(offset, offset, 1)]))
    if ok:
        return AckResult(TP, batches, 0)
    return AckResult(TP, batches, 121, AckFailure.LOCK_LOST)


def test_refusals_name_the_record_and_only_application_faults_raise() -> None:
    where = position(TP, 7)
    assert where == "orders-3 offset 7"
    twice = refusal(MarkResult.ALREADY_ACKNOWLEDGED, where, AckType.REJECT)
    assert isinstance(twice, InvalidRecordStateError)
    assert str(twice).endswith("orders-3 offset 7 was already acknowledged; cannot reject it again")
    unknown = refusal(MarkResult.UNKNOWN, where, AckType.ACCEPT)
    assert isinstance(unknown, InvalidRecordStateError)
    assert "is not held by this consumer" in str(unknown)
    # A lost lock is reported by the machine, never raised; OK is no refusal.
    assert refusal(MarkResult.DEAD, where, AckType.ACCEPT) is None
    assert refusal(MarkResult.OK, where, AckType.ACCEPT) is None
    assert "the consumer is closed" in str(closed(where))
    nameless = TopicIdPartition(TP.topic_id, 0, None)
    assert position(nameless, 1) == f"{TP.topic_id}-0 offset 1"


@pytest.mark.parametrize(
    ("version", "offered"), [(None, "none"), (0, "v0"), (1, "v1"), (2, None), (3, None)]
)
def test_renew_needs_share_acknowledge_v2(version: int | None, offered: str | None) -> None:
    err = renew_refusal(version)
    if offered is None:
        assert err is None
    else:
        assert isinstance(err, UnsupportedVersionError)
        assert str(err).endswith(f"the broker offers {offered}")


def test_outcomes_reach_commits_then_listeners_then_the_callback_in_order() -> None:
    order: list[str] = []
    out = Outcomes(lambda rs: order.append(f"callback {len(rs)}"))
    out.listeners.append(lambda rs: order.append(f"listener {len(rs)}"))
    out.on_failed = lambda rs: order.append(f"failed {len(rs)}")
    collected = out.collect()
    out.report([result(1), result(2)])
    assert collected == [result(1), result(2)]
    assert order == ["listener 2", "callback 2"]  # nothing failed: on_failed not told
    order.clear()
    out.report([result(3), result(4, ok=False)])
    assert order == ["failed 2", "listener 2", "callback 2"]
    out.stop(collected)
    out.report([result(5)])
    assert len(collected) == 4  # a finished commit collects nothing more
    order.clear()
    out.report([])
    assert order == []


def test_a_raising_listener_or_callback_stops_none_of_the_others() -> None:
    raised: list[tuple[str, str]] = []
    seen: list[int] = []

    def boom(results: list[AckResult]) -> None:
        raise RuntimeError("listener bug")

    def callback(results: list[AckResult]) -> None:
        seen.append(len(results))
        raise ValueError("callback bug")

    out = Outcomes(callback)
    out.listeners.extend([boom, lambda rs: seen.append(-len(rs))])
    out.on_raised = lambda who, exc: raised.append((who, str(exc)))
    out.report([result(1)])
    assert seen == [-1, 1]
    assert raised == [("listener", "listener bug"), ("callback", "callback bug")]
    # Without a hook the errors are still contained.
    out.on_raised = None
    out.report([result(2)])
    assert seen == [-1, 1, -1, 1]


def test_lock_lost_answers_reach_one_commit_only_and_are_bounded() -> None:
    seen: list[AckResult] = []
    out = Outcomes(seen.extend)
    # No commit collecting: kept for the next one, and told to the callback now.
    out.report_lost([result(1, ok=False)])
    assert out.lost == [result(1, ok=False)] and seen == [result(1, ok=False)]
    # The next commit starts with it; it is then no longer kept.
    collected = out.collect()
    assert collected == [result(1, ok=False)] and out.lost == []
    out.report_lost([result(2, ok=False)])
    assert collected == [result(1, ok=False), result(2, ok=False)] and out.lost == []
    out.stop(collected)
    assert out.collect() == []
    out.collectors.clear()
    # Only the newest are kept: a consumer that never commits does not grow without end.
    out.report_lost([result(o, ok=False) for o in range(LOST_KEPT + 5)])
    assert len(out.lost) == LOST_KEPT and out.lost[0] == result(5, ok=False)
    out.report_lost([])
    assert len(out.lost) == LOST_KEPT
