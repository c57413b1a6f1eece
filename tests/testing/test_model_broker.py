"""The model broker on its own (no broker): the rules the conformance scenarios cannot reach
on one real broker, and every scenario on every Kafka line it imitates."""

from __future__ import annotations

import random

import pytest

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.share_acknowledge import (
    AcknowledgementBatch as AckBatch,
)
from sharecon.protocol.messages.share_acknowledge import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from sharecon.protocol.messages.share_fetch import (
    AcknowledgementBatch as FetchAckBatch,
)
from sharecon.protocol.messages.share_fetch import (
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
    ShareFetchResponse,
)
from sharecon.protocol.records import decode_records
from sharecon.testing.conformance.model_runner import run_on_model
from sharecon.testing.conformance.scenarios import SCENARIOS
from sharecon.testing.model import Behaviour, ModelBroker, RecordState
from sharecon.testing.model.broker import PERSIST_DELAY

GROUP = "g"


def _broker(version: str, records: int = 3, **config: int) -> ModelBroker:
    broker = ModelBroker(version)
    broker.create_topic("t", 1)
    broker.configure_group(GROUP, earliest=True, **config)  # type: ignore[arg-type]
    broker.produce("t", 0, records)
    return broker


def _fetch(
    broker: ModelBroker, member: str, conn: str, now: float, epoch: int = 0
) -> ShareFetchResponse:
    tid = broker.topics["t"]
    return broker.share_fetch(
        ShareFetchRequest(
            group_id=GROUP,
            member_id=member,
            share_session_epoch=epoch,
            max_wait_ms=500,
            min_bytes=1,
            max_records=500,
            topics=(FetchTopic(topic_id=tid, partitions=(FetchPartition(partition_index=0),)),),
        ),
        conn,
        now,
    )


def _got(resp: ShareFetchResponse) -> list[tuple[int, int]]:
    return [
        (o, r.delivery_count)
        for t in resp.responses
        for p in t.partitions
        for r in p.acquired_records
        for o in range(r.first_offset, r.last_offset + 1)
    ]


def _ack(
    broker: ModelBroker, member: str, first: int, last: int, kind: int, epoch: int, now: float
) -> int:
    tid = broker.topics["t"]
    resp = broker.share_acknowledge(
        ShareAcknowledgeRequest(
            group_id=GROUP,
            member_id=member,
            share_session_epoch=epoch,
            topics=(
                AcknowledgeTopic(
                    topic_id=tid,
                    partitions=(
                        AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=(
                                AckBatch(
                                    first_offset=first, last_offset=last, acknowledge_types=(kind,)
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        "any",
        now,
    )
    return resp.error_code or resp.responses[0].partitions[0].error_code


@pytest.mark.parametrize("version", ["4.1", "4.2", "4.3", "4.4"])
def test_every_scenario_plays_on_every_line(version: str) -> None:
    for scenario in SCENARIOS:
        if scenario.applies_to(version):
            assert run_on_model(scenario, version), scenario.name


def test_versions_outside_4_1_to_4_4_are_refused() -> None:
    for bad in ("4.0", "5.0", "3.9.1", "x"):
        with pytest.raises(ValueError, match="4.1 to 4.4"):
            Behaviour.for_version(bad)
    assert Behaviour.for_version("4.4.0").renew_config


@pytest.mark.parametrize(("version", "count"), [("4.1", 1), ("4.4", 2)])
def test_a_closed_connection_releases_lowering_the_count_only_on_4_1(
    version: str, count: int
) -> None:
    broker = _broker(version)
    assert _got(_fetch(broker, "a", "c1", 0.0)) == [(0, 1), (1, 1), (2, 1)]
    broker.disconnect("c1", 1.0)
    assert _got(_fetch(broker, "b", "c2", 1.1)) == [(0, count), (1, count), (2, count)]


@pytest.mark.parametrize("version", ["4.1", "4.4"])
def test_sessions_ending_together_lose_acquisitions_and_redeliver_with_the_same_count(
    version: str,
) -> None:
    broker = _broker(version, records=1)
    broker.produce("t", 0, 1)
    broker.produce("t", 0, 1)
    # Three members, one record each (one log batch of one record each).
    for i, member in enumerate("abc"):
        resp = broker.share_fetch(
            ShareFetchRequest(
                group_id=GROUP,
                member_id=member,
                share_session_epoch=0,
                max_wait_ms=500,
                min_bytes=1,
                max_records=1,
                topics=(
                    FetchTopic(
                        topic_id=broker.topics["t"], partitions=(FetchPartition(partition_index=0),)
                    ),
                ),
            ),
            f"c-{member}",
            0.1 * i,
        )
        assert _got(resp) == [(i, 1)]
    # A stall ends: the proxy closes every connection at once.
    broker.disconnect_many(["c-a", "c-b", "c-c"], 5.0, concurrent=True)
    log = [e.what for e in broker.events]
    assert "Share partition removed from cache (group empty)" in log
    assert log.count("No share partition found while releasing acquired topic partitions") == 3
    assert _got(_fetch(broker, "d", "c-d", 5.5)) == [(0, 1), (1, 1), (2, 1)]
    assert broker.events[-1].what == "Initialized share partition with persister read state"


def test_sessions_ending_one_by_one_release_first() -> None:
    broker = _broker("4.4")
    _fetch(broker, "a", "c-a", 0.0)
    broker.disconnect_many(["c-a"], 1.0, concurrent=False)
    assert "No share partition found while releasing acquired topic partitions" not in [
        e.what for e in broker.events
    ]
    assert _got(_fetch(broker, "b", "c-b", 1.5)) == [(0, 2), (1, 2), (2, 2)]


def test_a_leader_change_reloads_persisted_state_and_forgets_acquisitions() -> None:
    broker = _broker("4.4")
    _fetch(broker, "a", "c-a", 0.0)
    assert _ack(broker, "a", 0, 0, 1, 1, 0.1) == ErrorCode.NONE  # accepted: persisted
    broker.move_leader("t", 0, 0.2)
    resp = _fetch(broker, "b", "c-b", 0.3)
    assert _got(resp) == [(1, 1), (2, 1)]  # same count: the acquisition was never persisted
    assert resp.responses[0].partitions[0].current_leader.leader_epoch == 1
    # The old holder's answer reaches a leader that never saw its acquisition.
    assert _ack(broker, "a", 1, 1, 1, 2, 0.4) == ErrorCode.INVALID_RECORD_STATE


@pytest.mark.parametrize(("version", "count"), [("4.1", 1), ("4.4", 2)])
def test_a_leaderless_partition_is_refused_until_a_leader_is_elected(
    version: str, count: int
) -> None:
    broker = _broker(version)
    assert _got(_fetch(broker, "a", "c-a", 0.0)) == [(0, 1), (1, 1), (2, 1)]
    broker.withdraw_leader("t", 0, 0.1)
    part = _fetch(broker, "b", "c-b", 0.2).responses[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not part.acquired_records
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)
    assert _ack(broker, "a", 0, 0, 1, 1, 0.3) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    broker.restore_leader("t", 0, 0.4)
    resp = _fetch(broker, "c", "c-c", 0.5)
    # The leader shut down cleanly: its closing sessions released what they held, as any
    # closing session does (4.1 lowers the count again; later lines keep it), so the next
    # delivery counts from there (the conformance scenario leaderless-then-back).
    assert _got(resp) == [(0, count), (1, count), (2, count)]
    assert resp.responses[0].partitions[0].current_leader.leader_epoch == 2  # two elections


def test_an_evicted_session_keeps_its_locks_until_they_end() -> None:
    broker = _broker("4.4", lock_ms=1000)
    _fetch(broker, "a", "c-a", 0.0)
    assert broker.next_wakeup() == pytest.approx(1.0)
    broker.evict_session(GROUP, "a", 0.5)
    assert _fetch(broker, "a", "c-a", 0.5, epoch=1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert _got(_fetch(broker, "b", "c-b", 0.6)) == []
    assert _got(_fetch(broker, "c", "c-c", 1.0)) == [(0, 2), (1, 2), (2, 2)]


def test_next_change_is_the_next_lock_end_or_persisted_release() -> None:
    # What FakeKafka sleeps until while it holds a fetch: nothing changes on its own
    # before then.
    broker = _broker("4.4", lock_ms=1000)
    assert broker.next_change(0.0) is None  # nothing acquired, nothing being persisted
    _fetch(broker, "a", "c-a", 0.0)
    assert broker.next_change(0.0) == pytest.approx(1.0)  # the locks end
    # Offset 0 released on the next fetch: acquirable once persisted.
    tid = broker.topics["t"]
    release = FetchPartition(
        partition_index=0,
        acknowledgement_batches=(
            FetchAckBatch(first_offset=0, last_offset=0, acknowledge_types=(2,)),
        ),
    )
    broker.share_fetch(
        ShareFetchRequest(
            group_id=GROUP,
            member_id="a",
            share_session_epoch=1,
            max_wait_ms=0,
            min_bytes=1,
            max_records=0,
            topics=(FetchTopic(topic_id=tid, partitions=(release,)),),
        ),
        "c-a",
        0.5,
    )
    assert broker.next_change(0.5) == pytest.approx(0.5 + PERSIST_DELAY)
    assert broker.next_change(0.5 + PERSIST_DELAY) == pytest.approx(1.0)  # then the locks
    broker.advance(1.0)
    assert broker.next_change(1.0) is None  # every lock ended, every release persisted


def test_the_delivery_limit_archives_on_lock_expiry() -> None:
    broker = _broker("4.4", records=1, lock_ms=1000, delivery_limit=2)
    assert _got(_fetch(broker, "a", "c-a", 0.0)) == [(0, 1)]
    assert _got(_fetch(broker, "a", "c-a2", 1.0)) == [(0, 2)]
    broker.advance(2.0)
    sp = broker.share_partition(GROUP, "t", 0)
    assert sp is not None and sp.state_of(0).state is RecordState.ARCHIVED
    assert broker.next_wakeup() is None


def test_an_answer_carries_the_whole_log_batches_of_what_it_acquired() -> None:
    broker = ModelBroker("4.4")
    broker.create_topic("t", 1)
    broker.configure_group(GROUP, earliest=True)
    broker.produce("t", 0, [b"a", b"b"])
    broker.produce("t", 0, [b"c"])
    resp = broker.share_fetch(
        ShareFetchRequest(
            group_id=GROUP,
            member_id="m",
            share_session_epoch=0,
            max_wait_ms=500,
            min_bytes=1,
            max_records=2,
            share_acquire_mode=1,  # record limit: offsets 0 and 1 only
            topics=(
                FetchTopic(
                    topic_id=broker.topics["t"], partitions=(FetchPartition(partition_index=0),)
                ),
            ),
        ),
        "c",
        0.0,
    )
    part = resp.responses[0].partitions[0]
    assert _got(resp) == [(0, 1), (1, 1)]
    assert part.records is not None
    assert [(r.offset, r.value) for r in decode_records(part.records)] == [(0, b"a"), (1, b"b")]


def _walk(seed: int, version: str, steps: int = 300) -> list[str]:
    """A seeded random schedule of fetches, answers and faults; checks the model's own
    invariants on the way and returns a trace (for determinism)."""
    rng = random.Random(seed)
    broker = ModelBroker(version)
    broker.create_topic("t", 1)
    broker.configure_group(GROUP, earliest=True, lock_ms=1000, delivery_limit=3)
    for _ in range(8):
        broker.produce("t", 0, rng.randint(1, 4))
    end = broker.logs[(broker.topics["t"], 0)].end
    held: dict[str, set[int]] = {}
    sessions: dict[str, tuple[str, int]] = {}  # member -> (connection, next epoch)
    accepted: set[int] = set()
    trace: list[str] = []
    now = 0.0
    conns = 0
    for _ in range(steps):
        now += rng.uniform(0.0, 0.4)
        op = rng.choice(("fetch", "fetch", "ack", "ack", "close", "stall", "leader", "evict"))
        member = rng.choice("abc")
        if op == "fetch":
            conn, epoch = sessions.get(member, ("", 0))
            if not conn:
                conns += 1
                conn = f"c{conns}"
            resp = _fetch(broker, member, conn, now, epoch)
            if resp.error_code:
                sessions.pop(member, None)  # start again with epoch 0
                trace.append(f"{member} fetch error {resp.error_code}")
                continue
            sessions[member] = (conn, epoch + 1)
            for offset, count in _got(resp):
                assert offset not in accepted, f"seed {seed}: accepted offset {offset} redelivered"
                assert 1 <= count <= 3, f"seed {seed}: count {count}"
                held.setdefault(member, set()).add(offset)
            trace.append(f"{member} got {_got(resp)}")
        elif op == "ack" and held.get(member) and member in sessions:
            offset = rng.choice(sorted(held[member]))
            kind = rng.choice((1, 1, 2, 3))
            conn, epoch = sessions[member]
            err = _ack(broker, member, offset, offset, kind, epoch, now)
            held[member].discard(offset)
            if err in (ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.SHARE_SESSION_NOT_FOUND):
                sessions.pop(member, None)
            else:
                sessions[member] = (conn, epoch + 1)
            if err == ErrorCode.NONE and kind == 1:
                accepted.add(offset)
            trace.append(f"{member} ack {offset} {kind} -> {err}")
        elif op == "close" and member in sessions:
            broker.disconnect(sessions.pop(member)[0], now)
            held.pop(member, None)
        elif op == "stall":
            broker.disconnect_many([c for c, _ in sessions.values()], now, concurrent=True)
            sessions.clear()
            held.clear()
        elif op == "leader":
            broker.move_leader("t", 0, now)
        elif op == "evict":
            broker.evict_session(GROUP, member, now)
    # Drain: a fresh member accepts whatever comes until nothing does.
    for i in range(50):
        now += 2.0
        resp = _fetch(broker, "drain", f"drain-{i}", now)
        got = _got(resp)
        for offset, _ in got:
            assert offset not in accepted, f"seed {seed}: accepted offset {offset} redelivered"
        if got:
            assert _ack(broker, "drain", got[0][0], got[-1][0], 1, 1, now) == ErrorCode.NONE
            accepted.update(o for o, _ in got)
        broker.disconnect(f"drain-{i}", now)
    # The drain's last close emptied the group: what is left is the persisted state.
    start, saved = broker.persister[(GROUP, (broker.topics["t"], 0))]
    for offset in range(end):
        state = RecordState.ARCHIVED if offset < start else saved.get(offset, (None, 0))[0]
        assert offset in accepted or state in (RecordState.ARCHIVED, RecordState.ACKNOWLEDGED), (
            f"seed {seed}: offset {offset} neither accepted nor archived ({state})"
        )
    return trace + [e.what for e in broker.events]


@pytest.mark.parametrize("version", ["4.1", "4.4"])
def test_seeded_schedules_are_deterministic_and_lose_nothing(version: str) -> None:
    for seed in range(20):
        assert _walk(seed, version) == _walk(seed, version)


def _fetch_bytes(broker: ModelBroker, max_bytes: int, partitions: int = 1) -> ShareFetchResponse:
    tid = broker.topics["t"]
    return broker.share_fetch(
        ShareFetchRequest(
            group_id=GROUP,
            member_id="m",
            share_session_epoch=0,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=max_bytes,
            max_records=500,
            topics=(
                FetchTopic(
                    topic_id=tid,
                    partitions=tuple(FetchPartition(partition_index=p) for p in range(partitions)),
                ),
            ),
        ),
        "c",
        0.0,
    )


def test_max_bytes_is_honoured_when_the_batches_sizes_are_known() -> None:
    """With ``batch_bytes`` (FakeKafka's whole-client simulation sets it) a ShareFetch
    stops before the batch that would pass ``MaxBytes``, after at least one batch."""
    broker = ModelBroker("4.4")
    broker.create_topic("t", 1)
    broker.configure_group(GROUP, earliest=True)
    for value in (b"a", b"b", b"c"):
        broker.produce("t", 0, [value])  # three batches of one record
    assert _got(_fetch_bytes(broker, 1500)) == [(0, 1), (1, 1), (2, 1)]  # sizes unknown
    broker = ModelBroker("4.4")
    broker.create_topic("t", 1)
    broker.configure_group(GROUP, earliest=True)
    for value in (b"a", b"b", b"c"):
        broker.produce("t", 0, [value])
    broker.batch_bytes = lambda tp, first: 1000
    assert _got(_fetch_bytes(broker, 2500)) == [(0, 1), (1, 1)]
    assert _got(_fetch_bytes(broker, 10)) == [(2, 1)]  # one batch however small the ask


def test_max_bytes_is_split_evenly_over_the_sessions_partitions() -> None:
    broker = ModelBroker("4.4")
    broker.create_topic("t", 2)
    broker.configure_group(GROUP, earliest=True)
    for p in (0, 1):
        for value in (b"a", b"b"):
            broker.produce("t", p, [value])
    broker.batch_bytes = lambda tp, first: 1000
    resp = _fetch_bytes(broker, 3000, partitions=2)  # 1500 a partition: one batch each
    got = {p.partition_index: len(p.acquired_records) for t in resp.responses for p in t.partitions}
    assert got == {0: 1, 1: 1}


def test_only_the_first_partition_giving_records_may_pass_max_bytes() -> None:
    """Kafka reads the log with at least one batch for the first partition that has data
    only: the next partitions keep within what is left, so a fetch of many partitions of
    large batches is not the sum of their first batches."""
    broker = ModelBroker("4.4")
    broker.create_topic("t", 3)
    broker.configure_group(GROUP, earliest=True)
    for p in (0, 1, 2):
        broker.produce("t", p, [b"a"])
    broker.batch_bytes = lambda tp, first: 40_000
    resp = _fetch_bytes(broker, 36_000, partitions=3)
    got = {p.partition_index for t in resp.responses for p in t.partitions if p.acquired_records}
    assert got == {0}


def _compacted(version: str = "4.4") -> ModelBroker:
    """Batches 0-9, 10-19, 20-29 and 30, the second removed whole by the log cleaner."""
    broker = _broker(version, records=10)
    for n in (10, 10, 1):
        broker.produce("t", 0, n)
    broker.logs[(broker.topics["t"], 0)].compact(set(range(10, 20)))
    return broker


def test_compaction_that_empties_a_batch_removes_it_but_never_the_last() -> None:
    broker = _compacted()
    log = broker.logs[(broker.topics["t"], 0)]
    assert log.batches == [(0, 9), (20, 29), (30, 30)]
    assert log.holes == set() and log.end == 31
    with pytest.raises(ValueError, match="last batch 30-30"):
        log.compact({30})
    with pytest.raises(ValueError, match=r"\[15\] are in no batch"):
        log.compact({15})


def test_a_read_across_a_removed_batch_acquires_its_offsets_with_no_records() -> None:
    resp = _fetch(_compacted(), "a", "c-a", 0.0)
    assert _got(resp) == [(o, 1) for o in range(31)]
    part = resp.responses[0].partitions[0]
    assert part.records is not None
    assert [r.offset for r in decode_records(part.records)] == [*range(10), *range(20, 31)]


def test_the_start_passes_a_skipped_removed_batch_only_behind_finished_records() -> None:
    broker = _compacted()
    tid = broker.topics["t"]
    req = ShareFetchRequest(
        group_id=GROUP,
        member_id="a",
        share_session_epoch=0,
        max_wait_ms=500,
        min_bytes=1,
        max_records=5,  # a soft limit: batch 0-9 whole
        batch_size=5,
        topics=(FetchTopic(topic_id=tid, partitions=(FetchPartition(partition_index=0),)),),
    )
    assert _got(broker.share_fetch(req, "c-a", 0.0)) == [(o, 1) for o in range(10)]
    # b's read begins in the removed batch (past what a holds): it skips it.
    assert _got(_fetch(broker, "b", "c-b", 0.1)) == [(o, 1) for o in range(20, 31)]
    sp = broker.share_partition(GROUP, "t", 0)
    assert sp is not None and sp.start == 0
    assert _ack(broker, "a", 0, 9, 1, 1, 0.2) == ErrorCode.NONE
    assert sp.start == 10  # not onto b's in-flight records
    assert _ack(broker, "b", 20, 30, 1, 1, 0.3) == ErrorCode.NONE
    assert sp.start == 31


def test_a_read_into_an_empty_window_moves_the_start_past_a_removed_batch() -> None:
    broker = _compacted()
    log = broker.logs[(broker.topics["t"], 0)]
    log.compact(set(range(10)) - {9})  # batch 0-9 keeps offset 9 only
    assert _got(_fetch(broker, "a", "c-a", 0.0)) == [(o, 1) for o in range(31)]
    assert _ack(broker, "a", 0, 30, 1, 1, 0.1) == ErrorCode.NONE
    sp = broker.share_partition(GROUP, "t", 0)
    assert sp is not None and sp.start == 31
    broker.produce("t", 0, 2)  # 31-32
    broker.produce("t", 0, 1)  # 33
    log.compact({31, 32})
    assert _got(_fetch(broker, "a", "c-a", 0.2, epoch=2)) == [(33, 1)]
    assert sp.start == 33
