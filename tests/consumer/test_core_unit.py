"""The consumer core's wiring without a broker: which offsets poll() marks handed out,
answers by position through the buffer, and unsubscribing (the rules themselves are the
machine's: tests/share/test_machine.py and tests/share/test_answers.py)."""

from __future__ import annotations

import uuid
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sharecon._consumer.buffer import Chunk
from sharecon._consumer.config import ConsumerConfig
from sharecon._consumer.core import ConsumerCore
from sharecon._consumer.handout import SessionOwner
from sharecon._net.cluster import ClusterMetadata, PartitionInfo
from sharecon._share.acks import AckBatch, batches_from_runs
from sharecon._share.intake import take_partition
from sharecon._share.ledger import AckFailure, AckResult
from sharecon._share.session import SessionTag
from sharecon.errors import InvalidRecordStateError
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import Record, record_factory
from sharecon.types import AckType, TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 0, "t")
TAG = SessionTag(1, 0)


def rec(offset: int) -> Record:
    return Record("t", 0, TP, None, None, None, offset, 0, None, b"v", ())


def test_poll_marks_handed_out_only_what_it_handed_out() -> None:
    # Chunk 1 holds 0..9 and 50..59; another delivery of 10..49 is still buffered behind it.
    core = _core()
    ledger = core.ledger
    ledger.add(TP, TAG, [(0, 9), (50, 59)])
    ledger.add(TP, TAG, [(10, 49)])
    core.handout.handed_out([rec(o) for o in [*range(10), *range(50, 60)]])
    assert ledger.unacknowledged() == {TP: [*range(10), *range(50, 60)]}


@pytest.mark.anyio
async def test_poll_marks_owned_batches_handed_out_run_by_run() -> None:
    # Records of one delivery without a hole are one run; a batch spanning two deliveries
    # (offsets contiguous, owners not) or a delivery with a hole is noted piece by piece.
    core = _core()
    _push(core, 0, 6)
    _push(core, 6, 4)
    _push(core, 20, 3)
    take = core.buffer.pop_many
    first = take(4, lambda: 0.0)  # 0..3 of the first delivery: one run
    core.handout.handed_out(first)
    assert core.ledger.unacknowledged() == {TP: [0, 1, 2, 3]}
    both = take(4, lambda: 0.0)  # 4, 5 of the first delivery, 6, 7 of the second
    assert [r.offset for r in both] == [4, 5, 6, 7]
    core.handout.handed_out(both)
    assert core.ledger.unacknowledged() == {TP: [*range(8)]}
    rest = take(10, lambda: 0.0)  # 8, 9, then 20..22 of the third delivery
    assert [r.offset for r in rest] == [8, 9, 20, 21, 22]
    core.handout.handed_out(rest)
    assert core.ledger.unacknowledged() == {TP: [*range(10), 20, 21, 22]}


def test_partitions_for_follows_leader_moves_and_assignment_changes() -> None:
    # The routes are kept between fetches: a new metadata snapshot or assignment redoes them.
    tid = uuid.uuid4()
    tps = [TopicIdPartition(tid, p, "r") for p in range(4)]

    def snapshot(*leaders: int) -> ClusterMetadata:
        infos = tuple(PartitionInfo("r", tid, p, leader, 0) for p, leader in enumerate(leaders))
        return ClusterMetadata(
            topic_ids={"r": tid}, topic_names={tid: "r"}, partitions={"r": infos}
        )

    cluster = SimpleNamespace(metadata=snapshot(1, 2, 1, -1))
    core = ConsumerCore(
        cast("Any", cluster), ConsumerConfig(group_id="g", topics=("r",)), cast("Any", None)
    )
    assert core.partitions_for(1) == ()  # nothing assigned yet
    core.assignment = frozenset(tps)
    assert set(core.partitions_for(1)) == {tps[0], tps[2]}
    assert core.partitions_for(2) == (tps[1],)
    assert core.partitions_for(3) == ()  # partition 3 has no leader: no one fetches it
    assert core.partitions_for(1) == core.partitions_for(1)  # asked again: the same answer
    cluster.metadata = snapshot(2, 2, 1, 3)  # partition 0's leader moved; 3 got one
    assert core.partitions_for(1) == (tps[2],)
    assert set(core.partitions_for(2)) == {tps[0], tps[1]}
    assert core.partitions_for(3) == (tps[3],)
    core.assignment = frozenset(tps[1:3])  # a new assignment
    assert core.partitions_for(2) == (tps[1],)
    assert core.partitions_for(3) == ()
    core.unsubscribe()
    assert core.partitions_for(1) == () and core.partitions_for(2) == ()


def lost(offset: int) -> AckResult:
    return AckResult(TP, tuple(batches_from_runs([(offset, offset, 1)])), 121, AckFailure.LOCK_LOST)


def _core() -> ConsumerCore:
    return ConsumerCore(
        cast("Any", None), ConsumerConfig(group_id="g", topics=("t",)), cast("Any", None)
    )


def _push(core: ConsumerCore, first: int, n: int) -> None:
    """A fetched answer of ``n`` records from ``first``, as the fetcher buffers it."""
    data = encode_batch(
        [WireRecord(first + i, 0, None, b"v", ()) for i in range(n)], base_offset=first
    )
    intake = take_partition(TP, [(first, first + n - 1, 1)], data)
    before = core.ledger.sequence
    core.ledger.add(TP, TAG, [(first, first + n - 1)])
    delivery = (before + 1, core.ledger.sequence)
    owner = SessionOwner(cast("Any", None), TAG, delivery, TP)
    factory = partial(record_factory, "t", 0, TP, owner, None)
    core.buffer.push(Chunk(intake, TAG, None, factory, delivery))


def _taken(core: ConsumerCore) -> dict[TopicIdPartition, list[AckBatch]]:
    taken = core.ledger.take(TAG)
    return {} if taken is None else taken.acks


@pytest.mark.anyio
async def test_acknowledge_offset_answers_only_records_handed_out() -> None:
    core = _core()
    _push(core, 0, 6)
    held = [core.buffer.pop_one(lambda: 0.0) for _ in range(2)]
    assert [r.offset for r in held if r is not None] == [0, 1]
    core.handout.acknowledge_offset("t", 0, 1, AckType.REJECT)
    with pytest.raises(InvalidRecordStateError, match="t-0 offset 1 was already acknowledged"):
        core.handout.acknowledge_offset("t", 0, 1, AckType.ACCEPT)
    with pytest.raises(InvalidRecordStateError, match="t-0 offset 3 was fetched but not handed"):
        core.handout.acknowledge_offset("t", 0, 3, AckType.ACCEPT)
    for topic, partition, offset in [("t", 1, 0), ("u", 0, 0), ("t", 0, 6)]:
        with pytest.raises(InvalidRecordStateError, match="is not held by this consumer"):
            core.handout.acknowledge_offset(topic, partition, offset, AckType.ACCEPT)
    assert _taken(core) == {TP: [AckBatch(1, 1, (AckType.REJECT,))]}
    # Once the lock is lost the answer is reported, never raised (as for a Record).
    core.ledger.invalidate(AckFailure.SESSION_RESET, 13, tag=TAG)
    core.handout.acknowledge_offset("t", 0, 0, AckType.ACCEPT)
    assert core.outcomes.lost == [lost(0)]
    core.closing = True
    with pytest.raises(InvalidRecordStateError, match="the consumer is closed"):
        core.handout.acknowledge_offset("t", 0, 2, AckType.ACCEPT)


@pytest.mark.anyio
async def test_unsubscribe_releases_what_was_not_handed_out_and_fetches_nothing() -> None:
    core = _core()
    _push(core, 0, 4)
    _push(core, 10, 3)
    held = core.buffer.pop_one(lambda: 0.0)
    assert held is not None and held.offset == 0
    assert core.unsubscribe() == 6
    assert core.membership.topics == () and core.buffer.records == 0
    assert core.buffer.pop_one(lambda: 0.0) is None
    assert core.partitions_for(1) == ()
    # An answer fetched before the unsubscribe reached the broker is released, not buffered.
    _push(core, 20, 2)
    assert core.buffer.pop_one(lambda: 0.0) is None
    # The record in hand is still the application's to answer.
    core.handout.acknowledge(held, AckType.ACCEPT)
    assert _taken(core) == {
        TP: [
            AckBatch(0, 3, (AckType.ACCEPT, AckType.RELEASE, AckType.RELEASE, AckType.RELEASE)),
            AckBatch(10, 12, (AckType.RELEASE,)),
            AckBatch(20, 21, (AckType.RELEASE,)),
        ]
    }
    core.subscribe(("t",))
    _push(core, 30, 1)
    again = core.buffer.pop_one(lambda: 0.0)
    assert again is not None and again.offset == 30
