"""The producer's dispatch engine (sharecon._produce.engine) and the ordering rules the
producer simulation found missing: no broker, no event loop, a fake clock."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon._produce.engine import Engine, LeaderHint
from sharecon._produce.policy import Action, answer_action
from sharecon._produce.settings import check_settings
from sharecon.protocol import ProduceResponse
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from sharecon.protocol.records import read_batches
from sharecon.testing.model.produce import ProducePartition
from tests.producer.test_engine import BACKOFF, KNOWN, Leader, make, put

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

TID = uuid.UUID(int=7)


@dataclass
class Meta:
    partitions: Mapping[str, Sequence[Leader]] = field(default_factory=lambda: KNOWN)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: {"t": TID})
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: {TID: "t"})


def engine(**options: object) -> tuple[Engine, Meta]:
    acc, _, clock, _ = make(linger=0, **options)
    acc.restart_sequences(7, 0)
    settings = check_settings(
        acks="all",
        idempotent=True,
        compression=None,
        compression_level=None,
        linger=0.0,
        max_batch_bytes=4096,
        max_request_size=8192,
        max_buffer_bytes=16384,
        delivery_timeout=30.0,
        request_timeout=10.0,
        metadata_timeout=10.0,
        close_timeout=5.0,
        retry_backoff=BACKOFF,
    )
    return Engine(acc, settings), Meta()


def answer(partition: int, code: int = 0, offset: int = 0, **kw: object) -> ProduceResponse:
    part = PartitionProduceResponse(index=partition, error_code=code, base_offset=offset, **kw)  # type: ignore[arg-type]
    return ProduceResponse(responses=(TopicProduceResponse(name="t", partition_responses=(part,)),))


def no_hint(hint: LeaderHint) -> bool:
    raise AssertionError(f"no hint expected, got {hint}")


def test_a_round_builds_one_request_per_leader_and_counts_the_attempt() -> None:
    eng, meta = engine()
    b0 = put(eng.acc, partition=0)
    b1 = put(eng.acc, partition=1)
    decided = eng.poll(100.0, meta)
    assert not decided.reset and not decided.refresh and decided.wait == math.inf
    assert sorted(o.node for o in decided.sends) == [1, 2]
    for out in decided.sends:
        (batch,) = out.batches
        assert batch in (b0, b1) and batch.attempts == 1
        (topic,) = out.request.topic_data
        assert topic.topic_id == TID and topic.partition_data[0].index == batch.partition
        rb = read_batches(topic.partition_data[0].records or b"").batches[0]
        assert (rb.producer_id, rb.base_sequence) == (7, 0)
    assert eng.acc.in_flight == 2


def test_an_answer_finishes_its_batch_once_and_a_late_second_outcome_is_ignored() -> None:
    eng, meta = engine()
    batch = put(eng.acc, partition=0)
    (out,) = eng.poll(100.0, meta).sends
    assert not eng.answered(out, answer(0, offset=41), 100.1, meta, no_hint)
    assert batch.done and batch.base_offset == 41 and eng.acc.in_flight == 0
    # A timeout firing after the answer, or a cancellation, changes nothing.
    assert not eng.failed(out, errors.RequestTimeoutError("late"), 100.2)
    eng.abandoned(out)
    assert eng.acc.in_flight == 0 and batch.error is None


def test_not_leader_offers_the_hint_and_retries_at_once_when_it_was_news() -> None:
    eng, meta = engine()
    batch = put(eng.acc, partition=0)
    (out,) = eng.poll(100.0, meta).sends
    hints: list[LeaderHint] = []

    def take(hint: LeaderHint) -> bool:
        hints.append(hint)
        return True

    reply = answer(
        0,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        -1,
        current_leader=LeaderIdAndEpoch(leader_id=3, leader_epoch=4),
    )
    reply = ProduceResponse(
        responses=reply.responses, node_endpoints=(NodeEndpoint(node_id=3, host="h", port=1),)
    )
    assert eng.answered(out, reply, 100.1, meta, take)  # refresh the metadata
    (hint,) = hints
    assert (hint.partition, hint.leader_id, hint.leader_epoch) == (0, 3, 4)
    assert hint.endpoint is not None and hint.endpoint.host == "h"
    assert not batch.done
    assert [b for o in eng.poll(100.1, meta).sends for b in o.batches] == [batch]  # at once


def test_a_lost_connection_retries_as_ambiguous_and_a_refused_one_does_not() -> None:
    eng, meta = engine()
    batch = put(eng.acc, partition=0)
    (out,) = eng.poll(100.0, meta).sends
    assert eng.failed(out, errors.BrokerConnectError("refused"), 100.1)
    assert not batch.ambiguous and not batch.done
    (out,) = eng.poll(101.0, meta).sends
    assert eng.failed(out, errors.BrokerDisconnectedError("cut"), 101.1)
    assert batch.ambiguous and eng.acc.in_flight == 0


def test_a_reset_waits_for_the_requests_in_flight_then_is_said_once() -> None:
    eng, meta = engine()
    put(eng.acc, partition=0)
    (out,) = eng.poll(100.0, meta).sends
    put(eng.acc, partition=1)
    eng.acc.reset_wanted = True
    assert eng.poll(100.0, meta).sends == [] and not eng.poll(100.0, meta).reset
    eng.answered(out, answer(0), 100.1, meta, no_hint)
    assert eng.poll(100.1, meta).reset
    assert not eng.poll(100.1, meta).reset  # said once; no requests meanwhile
    eng.reset_done(8, 0)
    (out,) = eng.poll(100.2, meta).sends
    rb = read_batches(out.request.topic_data[0].partition_data[0].records or b"").batches[0]
    assert (rb.producer_id, rb.base_sequence) == (8, 0)


def test_a_reset_that_fails_fails_the_producer_and_every_batch() -> None:
    eng, meta = engine()
    batch = put(eng.acc, partition=0)
    eng.acc.reset_wanted = True
    assert eng.poll(100.0, meta).reset
    refused = errors.KafkaError("no producer id")
    eng.reset_failed(refused)
    assert eng.fatal is refused and batch.done and batch.error is refused


# -- rules the simulation found missing (seeds 63 and 176 of sharecon.testing.sim.produce) --


def test_until_a_first_batch_is_written_a_partition_has_one_batch_in_flight() -> None:
    """Kafka takes any sequence from a producer id it has no state for: a second batch
    sent while the first is refused (NOT_ENOUGH_REPLICAS, a moved leader) would be
    written first, out of order (simulation seed 63)."""
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    first = put(acc, partition=0)
    assert [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g] == [first]
    acc.requests([first], 1 << 20)
    second = put(acc, partition=0)
    assert acc.ready(clock.now, KNOWN)[0] == {}  # waits for the first's answer
    action = answer_action(ErrorCode.NONE, records=1, idempotent=True)
    acc.answered(first, action, None, base_offset=0, log_append_time=-1, now=clock.now)
    acc.request_done(1)
    assert [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g] == [second]
    # A new producer id starts over.
    acc.restart_sequences(8, 0)
    assert not acc.partitions[("t", 0)].confirmed


def test_no_batch_is_numbered_while_five_before_it_are_not_done() -> None:
    """A batch answered REQUEST_TIMED_OUT (written, maybe) is resent while new batches go
    behind it; were more than five numbered after it, its resend would fall out of the
    broker's memory of the last five and come back OUT_OF_ORDER, then be written twice
    under a new producer id (simulation seed 176 before the crash fault was added)."""
    acc, _, clock, _ = make(linger=0, delivery_timeout=1000.0)
    acc.restart_sequences(7, 0)
    broker = ProducePartition()
    first = put(acc, b"r0", partition=0)
    acc.partitions[("t", 0)].confirmed = True  # (the producer id wrote here before)
    timed_out = errors.error_for_code(ErrorCode.REQUEST_TIMED_OUT)
    ok = answer_action(ErrorCode.NONE, records=1, idempotent=True)
    resends = []
    numbered_behind = 0
    for i in range(1, 15):
        clock.now += 5  # past every backoff
        flying = []
        for r in range(6):  # rounds: the resend first, then new batches behind it
            if r == 1:
                put(acc, b"r%d" % i, partition=0)
            taken = [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g]
            for batch in taken:
                acc.requests([batch], 1 << 20)
                batch.attempts += 1
            flying += taken
        for batch in flying:
            code, offset = broker.append(batch.encoded or b"")
            if batch is first:
                resends.append((code, offset))
                # Appended (or recognised), not replicated in time, again.
                action = acc.answer_action(first, ErrorCode.REQUEST_TIMED_OUT)
                assert action is Action.RETRY_AMBIGUOUS
                acc.answered(
                    first, action, timed_out, base_offset=-1, log_append_time=-1, now=clock.now
                )
            else:
                assert code == ErrorCode.NONE
                numbered_behind += 1
                acc.answered(batch, ok, None, base_offset=offset, log_append_time=-1, now=clock.now)
            acc.request_done(1)
    assert first.ambiguous and not first.done and len(resends) > 3
    # Every resend was still one the broker recognised (its first offset, 0): never
    # OUT_OF_ORDER, which would have cost a new producer id and a second copy.
    assert set(resends) == {(ErrorCode.NONE, 0)}, resends
    assert numbered_behind == 4  # then the partition waits for the first


def test_a_batch_timed_out_on_the_broker_never_hands_its_sequence_back() -> None:
    """REQUEST_TIMED_OUT: the leader may have appended the batch; if it then expires, its
    sequence numbers must not go to other records (the broker would answer those as a
    duplicate of the first, and they would be lost): a new producer id instead."""
    acc, _, clock, _ = make(linger=0, delivery_timeout=1.0, request_timeout=0.5)
    acc.restart_sequences(7, 0)
    batch = put(acc, partition=0)
    (taken,) = [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g]
    acc.requests([taken], 1 << 20)
    taken.attempts += 1
    timed_out = errors.error_for_code(ErrorCode.REQUEST_TIMED_OUT)
    action = acc.answer_action(batch, ErrorCode.REQUEST_TIMED_OUT)
    acc.answered(batch, action, timed_out, base_offset=-1, log_append_time=-1, now=clock.now)
    acc.request_done(1)
    clock.now += 2  # past its delivery deadline
    acc.ready(clock.now, KNOWN)
    assert batch.done and isinstance(batch.error, errors.KafkaTimeoutError)
    assert acc.reset_wanted and acc.partitions[("t", 0)].next_seq == 1


def test_a_reset_fails_the_batches_whose_outcome_is_unknown_instead_of_writing_them_twice() -> None:
    """A batch answered REQUEST_TIMED_OUT (maybe in the log) still queued when the producer
    id is replaced: resent under the new id the broker would write it again (simulation
    seed 734). It fails with a timeout naming the unknown outcome; the others are resent."""
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    maybe = put(acc, b"a", partition=0)
    other = put(acc, b"b", partition=1)
    taken = [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g]
    acc.requests(taken, 1 << 20)
    for b in taken:
        b.attempts += 1
    timed_out = errors.error_for_code(ErrorCode.REQUEST_TIMED_OUT)
    moved = errors.NotLeaderOrFollowerError("moved")
    acc.answered(
        maybe, Action.RETRY_AMBIGUOUS, timed_out, base_offset=-1, log_append_time=-1, now=clock.now
    )
    acc.answered(other, Action.RETRY, moved, base_offset=-1, log_append_time=-1, now=clock.now)
    acc.request_done(2)
    acc.restart_sequences(8, 0)
    assert maybe.done and isinstance(maybe.error, errors.KafkaTimeoutError)
    assert "unknown outcome" in str(maybe.error)
    assert (
        not other.done and other.base_seq == -1 and list(acc.partitions[("t", 1)].queue) == [other]
    )
