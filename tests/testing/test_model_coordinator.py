"""The model group coordinator (``sharecon.testing.model.ModelCoordinator``): joining,
fencing, leaving, session timeouts, and losing the coordinator; and the real
:class:`~sharecon._share.membership.Membership` against it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sharecon._share.membership import Membership, MemberState
from sharecon.protocol import ShareGroupHeartbeatRequest
from sharecon.protocol.error_codes import ErrorCode
from sharecon.testing.model import ModelCoordinator

if TYPE_CHECKING:
    from sharecon._share.membership import HeartbeatOutcome
    from sharecon.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse

TID = uuid.UUID(int=7)


def _coord(**kw: object) -> ModelCoordinator:
    return ModelCoordinator("g", {"t": (TID, 4)}, node_id=1, **kw)  # type: ignore[arg-type]


def _hb(
    c: ModelCoordinator, member: str, epoch: int, now: float, node: int = 1
) -> ShareGroupHeartbeatResponse:
    topics = ("t",) if epoch == 0 else None
    req = ShareGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics
    )
    return c.heartbeat(req, node, now)


def _parts(resp: ShareGroupHeartbeatResponse) -> set[int] | None:
    if resp.assignment is None:
        return None
    return {p for t in resp.assignment.topic_partitions for p in t.partitions}


def test_a_join_is_answered_empty_then_assigned() -> None:
    c = _coord()
    first = _hb(c, "a", 0, 0.0)
    assert first.error_code == ErrorCode.NONE
    assert first.member_epoch > 0
    assert _parts(first) == set()  # the share-partition state is initialised first
    second = _hb(c, "a", first.member_epoch, 0.1)
    assert _parts(second) == {0, 1, 2, 3}
    third = _hb(c, "a", second.member_epoch, 0.2)
    assert third.assignment is None  # unchanged: not sent again


def test_partitions_are_spread_over_members_and_return_when_one_leaves() -> None:
    c = _coord()
    a = _hb(c, "a", 0, 0.0)
    a = _hb(c, "a", a.member_epoch, 0.1)
    b = _hb(c, "b", 0, 0.2)
    b = _hb(c, "b", b.member_epoch, 0.3)
    a = _hb(c, "a", a.member_epoch, 0.4)
    pa, pb = _parts(a), _parts(b)
    assert pa is not None and pb is not None
    assert pa | pb == {0, 1, 2, 3} and not pa & pb and len(pa) == 2
    left = _hb(c, "b", -1, 0.5)
    assert left.member_epoch == -1
    assert _parts(_hb(c, "a", a.member_epoch, 0.6)) == {0, 1, 2, 3}


def test_wrong_epoch_is_fenced_and_unknown_member_refused() -> None:
    c = _coord()
    a = _hb(c, "a", 0, 0.0)
    assert _hb(c, "a", a.member_epoch + 5, 0.1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert _hb(c, "x", 3, 0.1).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_silent_member_times_out() -> None:
    c = _coord(session_timeout=3.0)
    a = _hb(c, "a", 0, 0.0)
    assert _hb(c, "a", a.member_epoch, 2.9).error_code == ErrorCode.NONE
    assert _hb(c, "a", a.member_epoch, 6.0).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert any(e.what == "member session timed out" for e in c.events)


def test_an_unavailable_coordinator_and_its_reload() -> None:
    c = _coord(session_timeout=3.0)
    a = _hb(c, "a", 0, 0.0)
    c.unavailable(1.0, 5.0)
    assert c.find(2.0) is None
    assert _hb(c, "a", a.member_epoch, 2.0).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert c.find(5.0) == 1
    # The group was loaded again at 5.0: the member's timer started over then.
    assert _hb(c, "a", a.member_epoch, 7.5).error_code == ErrorCode.NONE


def test_a_moved_coordinator() -> None:
    c = _coord()
    a = _hb(c, "a", 0, 0.0)
    c.move(1.0, 2, 1.5)
    assert c.find(1.1) == 2
    assert _hb(c, "a", a.member_epoch, 1.1, node=1).error_code == ErrorCode.NOT_COORDINATOR
    late = _hb(c, "a", a.member_epoch, 1.2, node=2)
    assert late.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    # Loaded: the member keeps its epoch.
    assert _hb(c, "a", a.member_epoch, 1.6, node=2).error_code == ErrorCode.NONE


def _step(ms: Membership, c: ModelCoordinator, node: int, now: float) -> HeartbeatOutcome:
    plan = ms.build_heartbeat(now)
    assert plan is not None
    req = ShareGroupHeartbeatRequest(
        group_id=plan.group_id,
        member_id=plan.member_id,
        member_epoch=plan.member_epoch,
        subscribed_topic_names=plan.subscribed_topic_names,
    )
    resp = c.heartbeat(req, node, now)
    assignment = None
    if resp.assignment is not None:
        assignment = {t.topic_id: t.partitions for t in resp.assignment.topic_partitions}
    return ms.on_response(
        now,
        error_code=resp.error_code,
        member_epoch=resp.member_epoch,
        heartbeat_interval_ms=resp.heartbeat_interval_ms,
        assignment=assignment,
    )


def test_the_real_membership_is_fenced_by_a_timeout_and_rejoins() -> None:
    c = _coord(session_timeout=3.0, heartbeat_interval_ms=1000)
    ms = Membership("g", ["t"], member_id="m")
    _step(ms, c, 1, 0.0)
    _step(ms, c, 1, 0.1)
    assert len(ms.assignment) == 4
    # Silent past the session timeout (its heartbeats were lost): fenced, assignment gone.
    fenced = _step(ms, c, 1, 10.0)
    assert fenced.state is MemberState.FENCED
    assert fenced.change is not None and fenced.change.removed
    assert ms.assignment == frozenset()
    _step(ms, c, 1, 10.0)  # rejoins at once
    back = _step(ms, c, 1, 10.1)
    assert back.state is MemberState.STABLE
    assert len(ms.assignment) == 4
