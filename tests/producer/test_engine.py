"""The producer's engine (sharecon._produce) on its own: no broker, no event loop, a fake clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._produce.accumulator import Accumulator
from sharecon._produce.inputs import BATCH_OVERHEAD, RECORD_OVERHEAD, record_size
from sharecon._produce.policy import Action, answer_action, transport_action
from sharecon._produce.settings import check_settings
from sharecon.partitioner import partition_for_key
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.records import read_batches
from sharecon.types import Header

if TYPE_CHECKING:
    from sharecon._produce.batch import Batch

NOW_MS = 1_700_000_000_000
BACKOFF = Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.0)


@dataclass
class Leader:
    leader_id: int


class Hooks:
    """Records what the engine tells the I/O layer."""

    def __init__(self) -> None:
        self.wakes = 0
        self.done: list[Batch] = []
        self.retried: list[tuple[Batch, errors.KafkaError]] = []
        self.logs: list[str] = []

    def wake(self) -> None:
        self.wakes += 1

    def batch_done(self, batch: Batch) -> None:
        self.done.append(batch)

    def retrying(self, batch: Batch, error: errors.KafkaError) -> None:
        self.retried.append((batch, error))

    def log(self, level: int, message: str, *args: object) -> None:
        self.logs.append(message % args)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(**options: Any) -> tuple[Accumulator, Hooks, Clock, list[int]]:
    """An accumulator with a fake clock and a scripted random choice (``picks``)."""
    args: dict[str, Any] = {
        "acks": "all",
        "idempotent": True,
        "compression": None,
        "compression_level": None,
        "linger": 0.005,
        "max_batch_bytes": 4096,
        "max_request_size": 8192,
        "max_buffer_bytes": 16384,
        "delivery_timeout": 30.0,
        "request_timeout": 10.0,
        "metadata_timeout": 10.0,
        "close_timeout": 5.0,
        "retry_backoff": BACKOFF,
    }
    args.update(options)
    hooks, clock, picks = Hooks(), Clock(), [0]

    def randrange(n: int) -> int:
        return picks.pop(0) % n if picks else 0

    acc = Accumulator(
        check_settings(**args),
        hooks,
        clock=clock,
        wall_ns=lambda: (NOW_MS + 1) * 1_000_000,
        randrange=randrange,
    )
    return acc, hooks, clock, picks


KNOWN = {"t": [Leader(1), Leader(2), Leader(3)]}


def put(acc: Accumulator, value: object = b"v", **kw: Any) -> Batch:
    batch = acc.place(
        kw.pop("topic", "t"),
        value,
        kw.pop("key", None),
        kw.pop("headers", None),
        kw.pop("partition", None),
        kw.pop("timestamp", None),
        NOW_MS,
        kw.pop("known", KNOWN),
    )
    assert batch is not None
    return batch


# -- argument checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"topic": ""}, "topic must be a non-empty str"),
        ({"topic": 5}, "topic must be a non-empty str"),
        ({"value": 3.5}, "value must be bytes, str or None, not float"),
        ({"key": 7}, "key must be bytes, str or None, not int"),
        ({"timestamp": -1}, "timestamp must be milliseconds"),
        ({"timestamp": 1.5}, "timestamp must be milliseconds"),
        ({"partition": -1}, "partition must be an int >= 0"),
        ({"partition": "0"}, "partition must be an int >= 0"),
        ({"headers": [("k", 5)]}, "header 'k' value must be bytes"),
        ({"headers": [(1, b"v")]}, "header key must be str"),
        ({"headers": 17}, "headers must be a mapping or"),
    ],
)
def test_wrong_arguments_raise_config_error_and_queue_nothing(
    kw: dict[str, Any], match: str
) -> None:
    acc, _, _, _ = make()
    value = kw.pop("value", b"v")
    with pytest.raises(errors.ConfigError, match=match):
        acc.place(
            kw.get("topic", "t"),
            value,
            kw.get("key"),
            kw.get("headers"),
            kw.get("partition"),
            kw.get("timestamp"),
            NOW_MS,
            KNOWN,
        )
    assert acc.buffered == 0
    assert not acc.partitions


def test_values_keys_and_headers_are_normalised_into_the_batch() -> None:
    acc, _, _, _ = make()
    headers = {"a": "x", "b": None}
    batch = put(acc, "text", key=bytearray(b"k"), headers=headers, partition=1, timestamp=5)
    assert batch.partition == 1 and batch.timestamps == [5]
    put(acc, memoryview(b"m"), partition=1, headers=[Header("h", b"1")])
    assert batch.builder is not None
    records = batch.builder.records()
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (b"k", b"text", (("a", b"x"), ("b", None)), 5),
        (None, b"m", (("h", b"1"),), NOW_MS),
    ]
    # The buffer counts each record's bound, headers exactly.
    assert acc.buffered == record_size(b"k", b"text", [("a", b"x"), ("b", None)]) + record_size(
        None, b"m", [("h", b"1")]
    )


def test_a_record_larger_than_a_request_is_refused_before_queueing() -> None:
    acc, _, _, _ = make()
    with pytest.raises(errors.MessageTooLargeError, match="more than max_request_size=8192"):
        put(acc, b"x" * 9000, partition=0)
    assert acc.buffered == 0


def test_unknown_topic_or_partition_and_a_full_buffer_hand_the_record_back() -> None:
    acc, _, _, _ = make()
    assert acc.place("other", b"v", None, None, None, None, NOW_MS, KNOWN) is None
    assert acc.place("t", b"v", None, None, 3, None, NOW_MS, KNOWN) is None
    # Fill the buffer (16 KiB) with records of about 1 KiB on partition 0.
    while acc.has_room(1000 + RECORD_OVERHEAD):
        put(acc, b"x" * 1000, partition=0)
    assert acc.place("t", b"x" * 1000, None, None, 0, None, NOW_MS, KNOWN) is None
    assert acc.place("t", b"x" * 1000, None, None, None, None, NOW_MS, KNOWN) is None
    # The slow path's pieces: prepare, choose, append.
    record = acc.prepare("other", "v", None, None, None, NOW_MS)
    assert (record.value, record.timestamp, record.size) == (b"v", NOW_MS, RECORD_OVERHEAD + 1)
    # Without a create time from the caller (-1), the wall clock given is read.
    assert acc.prepare("other", b"v", None, None, None, -1).timestamp == NOW_MS + 1
    batch = acc.place("t", b"v", None, None, 1, None, -1, KNOWN)
    assert batch is not None and batch.timestamps == [NOW_MS + 1]
    assert acc.choose_partition("other", b"key", None, 5, record.size) == partition_for_key(
        b"key", 5
    )


# -- partition choice ------------------------------------------------------------------------


def test_keys_pick_partitions_with_murmur2() -> None:
    acc, _, _, _ = make()
    for key in (b"a", b"customer-7", b"zz"):
        assert put(acc, key=key).partition == partition_for_key(key, 3)


def test_keyless_records_stick_to_one_partition_until_its_batch_is_full() -> None:
    acc, hooks, _, picks = make()
    picks[:] = [1, 0]  # first partition 1; then index 0 of the two others (partition 0)
    first = put(acc, b"x" * 500)
    assert first.partition == 1
    same = [put(acc, b"x" * 500) for _ in range(6)]
    assert all(b is first for b in same)  # 7 x 521 B fit in 4 KiB
    moved = put(acc, b"x" * 500)  # the 8th does not: another partition
    assert moved.partition == 0 and moved is not first
    assert hooks.wakes >= 2  # each new batch wakes the dispatcher
    # A keyed record in between does not move the keyless ones.
    put(acc, key=b"k")
    assert put(acc, b"y").partition == 0


# -- sending ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "in_flight"),
    [({}, 5), ({"max_in_flight": 2}, 2), ({"idempotent": False, "acks": 1}, 1)],
)
def test_ready_honours_linger_flush_and_the_batches_in_flight_per_partition(
    options: dict[str, Any], in_flight: int
) -> None:
    acc, _, clock, _ = make(**options)
    b0 = put(acc, partition=0)
    confirm(acc)
    ready, wait, want = acc.ready(clock.now, KNOWN)
    assert ready == {} and wait == pytest.approx(0.005) and not want
    acc.flushing = 1  # a flush does not linger
    ready, _, _ = acc.ready(clock.now, KNOWN)
    assert ready == {1: [b0]} and b0.sealed and acc.in_flight == 1
    acc.flushing = 0
    (group,) = acc.requests([b0], 1 << 20)
    assert group == [b0] and b0.encoded is not None
    batch = read_batches(b0.encoded).batches[0]
    assert (batch.producer_id, batch.base_sequence) == (-1, 0 if in_flight > 1 else -1)
    # One more batch per round, each due after linger, until max_in_flight are out.
    taken = [b0]
    for _ in range(6):
        nxt = put(acc, partition=0)
        assert nxt not in taken
        clock.now += 1
        ready, _, _ = acc.ready(clock.now, KNOWN)
        if len(taken) < in_flight:
            assert ready == {1: [nxt]}
            acc.requests([nxt], 1 << 20)
            taken.append(nxt)
        else:
            assert ready == {}  # the partition has max_in_flight batches out
    assert acc.in_flight == in_flight
    if options.get("idempotent", True):
        assert [b.base_seq for b in taken] == list(range(in_flight))  # numbered when sent


def test_a_partition_without_leader_asks_for_metadata_and_backs_off() -> None:
    acc, _, clock, _ = make(linger=0)
    put(acc, partition=2)
    ready, wait, want = acc.ready(clock.now, {"t": [Leader(1), Leader(1), Leader(-1)]})
    assert ready == {} and want and wait == pytest.approx(0.1)


def test_requests_are_split_at_the_request_size() -> None:
    acc, _, clock, _ = make(linger=0)
    for p in range(3):
        put(acc, b"x" * 3000, partition=p)
    ready, _, _ = acc.ready(clock.now, {"t": [Leader(1)] * 3})
    groups = acc.requests(ready[1], 7000)
    assert [len(g) for g in groups] == [2, 1]


# -- outcomes --------------------------------------------------------------------------------


def is_done(batch: Batch) -> bool:
    return batch.done  # (a call: mypy does not narrow it for the asserts after it)


def encoded(batch: Batch) -> bytes | None:
    return batch.encoded


def confirm(acc: Accumulator, partition: int = 0) -> None:
    """As if a first batch of the producer id had been written on ``partition`` (until
    then it has one batch in flight at a time)."""
    acc.partitions[("t", partition)].confirmed = True


def send_one(acc: Accumulator, clock: Clock, **kw: Any) -> Batch:
    """Place one record, take its batch as the dispatcher does, and encode it."""
    batch = put(acc, **kw)
    ready, _, _ = acc.ready(clock.now + 1, KNOWN)
    (taken,) = [b for group in ready.values() for b in group]
    assert taken is batch
    acc.requests([taken], 1 << 20)
    taken.attempts += 1
    return taken


def test_written_sets_offsets_and_advances_the_sequence() -> None:
    acc, hooks, clock, _ = make()
    acc.restart_sequences(42, 3)
    batch = send_one(acc, clock, partition=0)
    put(acc, partition=0)
    action = answer_action(ErrorCode.NONE, records=1, idempotent=True)
    acc.answered(batch, action, None, base_offset=10, log_append_time=-1, now=clock.now)
    assert hooks.done == [batch] and batch.done and batch.outcome(0).offset == 10  # type: ignore[union-attr]
    assert acc.partitions[("t", 0)].next_seq == 1
    assert acc.buffered == RECORD_OVERHEAD + 1  # the second record's
    nxt = send_one(acc, clock, partition=0)
    assert nxt.encoded is not None
    header = read_batches(nxt.encoded).batches[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 1)


def test_too_large_splits_a_batch_and_fails_a_lone_record() -> None:
    acc, hooks, clock, _ = make(linger=0)
    batch = put(acc, partition=0, timestamp=1)
    put(acc, b"w", partition=0, timestamp=2)
    put(acc, b"u", partition=0, timestamp=3)
    ready, _, _ = acc.ready(clock.now, KNOWN)
    acc.requests(ready[1], 1 << 20)
    err = errors.MessageTooLargeError("too big")
    action = answer_action(ErrorCode.MESSAGE_TOO_LARGE, records=3, idempotent=True)
    assert action is Action.SPLIT
    acc.answered(batch, action, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert batch.children is not None
    assert not is_done(batch)
    first, second = batch.children
    assert (first.timestamps, second.timestamps) == ([1], [2, 3])
    assert "splitting it into 1 + 2 records" in hooks.logs[0]
    ready, _, _ = acc.ready(clock.now, KNOWN)
    assert ready == {1: [first]}  # the halves in order, one at a time
    lone = answer_action(ErrorCode.MESSAGE_TOO_LARGE, records=1, idempotent=True)
    assert lone is Action.TOO_LARGE
    acc.answered(first, lone, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert isinstance(first.error, errors.MessageTooLargeError)
    assert "topic 't' partition 0: a record of about" in str(first.error)
    ready, _, _ = acc.ready(clock.now, KNOWN)
    assert ready == {1: [second]}
    acc.requests([second], 1 << 20)
    acc.answered(second, Action.WRITTEN, None, base_offset=7, log_append_time=-1, now=clock.now)
    assert batch.done  # both halves done: the callers' batch is done
    outcomes = batch.outcomes(0, 3)
    assert isinstance(outcomes[0], errors.MessageTooLargeError)
    assert [(o.offset, o.timestamp) for o in outcomes[1:]] == [(7, 2), (8, 3)]  # type: ignore[union-attr]
    assert acc.buffered == 0


def test_retry_backs_off_and_an_answer_with_a_leader_hint_retries_at_once() -> None:
    acc, hooks, clock, _ = make()
    batch = send_one(acc, clock, partition=0)
    err = errors.NotLeaderOrFollowerError("moved")
    action = answer_action(ErrorCode.NOT_LEADER_OR_FOLLOWER, records=1, idempotent=True)
    assert action is Action.RETRY
    acc.answered(batch, action, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert hooks.retried == [(batch, err)]
    state = acc.partitions[("t", 0)]
    assert state.queue[0] is batch and state.retry_at == pytest.approx(clock.now + 0.1)
    assert acc.ready(clock.now, KNOWN)[0] == {}
    again, _, _ = acc.ready(clock.now + 0.1, KNOWN)
    assert again == {1: [batch]}
    acc.answered(batch, action, err, base_offset=-1, log_append_time=-1, now=clock.now, hinted=True)
    assert state.retry_at == clock.now


def test_unknown_producer_id_asks_for_a_new_one_and_sequences_restart() -> None:
    acc, _, clock, _ = make()
    acc.restart_sequences(1, 0)
    batch = send_one(acc, clock, partition=0)
    action = answer_action(ErrorCode.UNKNOWN_PRODUCER_ID, records=1, idempotent=True)
    assert action is Action.NEW_PRODUCER_ID
    err = errors.error_for_code(ErrorCode.UNKNOWN_PRODUCER_ID)
    assert err is not None
    acc.answered(batch, action, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert acc.reset_wanted and encoded(batch) is not None
    acc.restart_sequences(2, 0)
    assert encoded(batch) is None and acc.partitions[("t", 0)].next_seq == 0
    # Without idempotence the same code is an ordinary error.
    assert answer_action(ErrorCode.UNKNOWN_PRODUCER_ID, records=1, idempotent=False) in {
        Action.RETRY,
        Action.FAIL,
    }


def test_an_ambiguous_failure_asks_for_a_new_producer_id() -> None:
    acc, _, clock, _ = make()
    batch = send_one(acc, clock, partition=0)
    lost = errors.BrokerDisconnectedError("gone")
    action = transport_action(lost)
    assert action is Action.RETRY_AMBIGUOUS
    acc.transport_failed([batch], lost, action, clock.now)
    assert batch.ambiguous and not batch.done and not acc.reset_wanted
    acc.finish(batch, errors.KafkaError("given up"))
    assert acc.reset_wanted


def test_expired_batches_fail_with_a_timeout_naming_the_last_error() -> None:
    acc, hooks, clock, _ = make()
    batch = send_one(acc, clock, partition=0)
    refused = errors.BrokerConnectError("refused")
    assert transport_action(refused) is Action.RETRY  # never written: not ambiguous
    acc.transport_failed([batch], refused, Action.RETRY, clock.now)
    assert not batch.ambiguous
    acc.ready(clock.now + 31, KNOWN)
    assert batch.done and isinstance(batch.error, errors.KafkaTimeoutError)
    assert "1 records not delivered within delivery_timeout=30 s after 1 attempts" in str(
        batch.error
    )
    assert "last error: refused" in str(batch.error)
    assert hooks.done == [batch] and acc.buffered == 0


def test_retry_while_closing_expires_and_fail_all_empties_every_queue() -> None:
    acc, _, clock, _ = make()
    batch = send_one(acc, clock, partition=0)
    queued = put(acc, partition=1)
    acc.closing = True
    acc.retry(batch, errors.RequestTimeoutError("slow"), clock.now)
    assert isinstance(batch.error, errors.KafkaTimeoutError)
    acc.fail_all(errors.KafkaError("closed"))
    assert queued.done and str(queued.error) == "closed"
    assert acc.pending() == [] and acc.buffered == 0
    acc.finish(queued)  # finishing twice does nothing
    assert str(queued.error) == "closed"


def test_policy_table() -> None:
    assert answer_action(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, records=5, idempotent=True) is (
        Action.WRITTEN
    )
    assert answer_action(ErrorCode.RECORD_LIST_TOO_LARGE, records=2, idempotent=False) is (
        Action.SPLIT
    )
    assert answer_action(ErrorCode.NOT_ENOUGH_REPLICAS, records=1, idempotent=True) is (
        Action.RETRY
    )
    assert answer_action(ErrorCode.TOPIC_AUTHORIZATION_FAILED, records=1, idempotent=True) is (
        Action.FAIL
    )
    assert answer_action(9999, records=1, idempotent=True) is Action.FAIL  # unknown code
    assert transport_action(errors.RequestTimeoutError("t")) is Action.RETRY_AMBIGUOUS
    assert transport_action(errors.UnsupportedVersionError("v")) is Action.FAIL


def test_batch_overhead_matches_the_encoder() -> None:
    """The size bound the buffer counts holds for what the encoder writes."""
    acc, _, clock, _ = make(linger=0)
    batch = put(acc, b"x" * 100, key=b"k", headers={"h": b"1"}, partition=0)
    acc.ready(clock.now, KNOWN)
    (encoded,) = [b.encoded for b in acc.requests([batch], 1 << 20)[0]]
    assert encoded is not None and len(encoded) <= batch.size
    assert batch.size - BATCH_OVERHEAD == record_size(b"k", b"x" * 100, [("h", b"1")])


# -- several batches in flight per partition (idempotence) -----------------------------------


def test_an_out_of_order_answer_behind_a_pending_batch_is_resent_after_it() -> None:
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    first = send_one(acc, clock, partition=0)
    confirm(acc)
    second = send_one(acc, clock, partition=0)
    assert (first.base_seq, second.base_seq) == (0, 1) and acc.in_flight == 2
    moved = errors.NotLeaderOrFollowerError("moved")
    acc.answered(first, Action.RETRY, moved, base_offset=-1, log_append_time=-1, now=clock.now)
    gap = errors.error_for_code(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert gap is not None
    action = acc.answer_action(second, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert action is Action.RESEND  # the gap is first's, still pending
    acc.answered(second, action, gap, base_offset=-1, log_append_time=-1, now=clock.now)
    state = acc.partitions[("t", 0)]
    assert list(state.queue) == [first, second] and not acc.reset_wanted
    third = put(acc, partition=0)
    # The resends go one at a time, in order, before the new batch; same bytes each time.
    before = first.encoded
    taken = [b for g in acc.ready(clock.now + 1, KNOWN)[0].values() for b in g]
    assert taken == [first] and acc.requests(taken, 1 << 20) and first.encoded is before
    assert acc.ready(clock.now + 1, KNOWN)[0] == {}  # second waits for first's answer
    # The first expected batch refused as out of order: the broker lost our state.
    assert acc.answer_action(first, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER) is (
        Action.NEW_PRODUCER_ID
    )
    acc.answered(first, Action.WRITTEN, None, base_offset=0, log_append_time=-1, now=clock.now)
    taken = [b for g in acc.ready(clock.now + 1, KNOWN)[0].values() for b in g]
    assert taken == [second]
    acc.requests(taken, 1 << 20)
    taken = [b for g in acc.ready(clock.now + 1, KNOWN)[0].values() for b in g]
    assert taken == [third]  # a new batch may follow a resend in flight
    acc.requests(taken, 1 << 20)
    assert third.base_seq == 2


def test_a_batch_failing_for_good_hands_back_its_sequence_or_asks_for_a_new_producer_id() -> None:
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    last = send_one(acc, clock, partition=0)
    acc.finish(last, errors.KafkaError("refused"))
    assert acc.partitions[("t", 0)].next_seq == 0 and not acc.reset_wanted  # nothing after it
    first = send_one(acc, clock, partition=0)
    confirm(acc)
    send_one(acc, clock, partition=0)
    acc.finish(first, errors.KafkaError("refused"))
    assert acc.reset_wanted  # the second's sequence would never be accepted


def test_a_split_keeps_the_sequence_range_when_batches_were_numbered_after_it() -> None:
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    big = put(acc, partition=0)
    put(acc, b"w", partition=0)
    confirm(acc)
    taken = [b for g in acc.ready(clock.now, KNOWN)[0].values() for b in g]
    acc.requests(taken, 1 << 20)
    after = send_one(acc, clock, partition=0)
    assert (big.base_seq, after.base_seq) == (0, 2)
    err = errors.MessageTooLargeError("too big")
    acc.answered(big, Action.SPLIT, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert big.children is not None
    assert [b.base_seq for b in big.children] == [0, 1]
    assert list(acc.partitions[("t", 0)].queue) == list(big.children)


class _ModelPartition:
    """A partition as an idempotent broker keeps it: the next sequence it expects per
    producer, the last five batches (a resent one is answered with its first offset),
    and the log."""

    def __init__(self) -> None:
        self.expected: dict[int, int] = {}
        self.recent: dict[int, list[tuple[int, int]]] = {}
        self.log: list[bytes] = []

    def produce(self, encoded: bytes) -> tuple[int, int]:
        (rb,) = read_batches(encoded).batches
        pid, seq = rb.producer_id, rb.base_sequence
        for base_seq, offset in self.recent.get(pid, []):
            if base_seq == seq:
                return ErrorCode.NONE, offset  # a duplicate: its first offset
        if seq != self.expected.get(pid, 0):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        offset = len(self.log)
        self.log += [r.value or b"" for r in rb.records()]
        self.expected[pid] = seq + rb.records_count
        self.recent.setdefault(pid, []).append((seq, offset))
        del self.recent[pid][:-5]
        return ErrorCode.NONE, offset


@pytest.mark.parametrize("seed", range(16))
def test_seeded_faults_with_several_batches_in_flight_keep_order_without_duplicates(
    seed: int,
) -> None:
    """Requests lost before or after the broker wrote them, NOT_LEADER answers and slow
    answers, at random, with up to five batches of a partition in flight: each partition's
    log holds every record once, in the order queued, and no producer id is replaced."""
    import random

    rng = random.Random(seed)
    acc, _, clock, _ = make(linger=0.0, max_batch_bytes=1024, max_buffer_bytes=1 << 20)
    acc.restart_sequences(1, 0)
    parts = {p: _ModelPartition() for p in range(2)}
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    batches: list[Batch] = []
    transit: list[list[Batch]] = []  # requests on the one connection, answered in order
    most_in_flight = 0
    counter = 0
    for step in range(600):
        clock.now += 0.01
        roll = rng.random()
        if roll < 0.4 and step < 450:
            for _ in range(rng.randint(1, 40)):
                p = rng.randrange(2)
                value = b"%d-%06d" % (p, counter)
                counter += 1
                sent[p].append(value)
                batches.append(put(acc, value, partition=p))
        elif roll < 0.7:
            ready, _, _ = acc.ready(clock.now, KNOWN)
            for group in ready.values():
                for request in acc.requests(group, 4096):
                    for b in request:
                        b.attempts += 1
                    transit.append(request)
            most_in_flight = max(
                [most_in_flight, *(len(s.flight) for s in acc.partitions.values())]
            )
        elif transit:
            request = transit.pop(0)
            fault = rng.random()
            if fault < 0.12 or fault < 0.24:  # lost: before, or after, the broker wrote it
                if fault >= 0.12:
                    for b in request:
                        parts[b.partition].produce(b.encoded or b"")
                # The connection dropped: every request still on it is lost too.
                for lost in [request, *transit]:
                    acc.transport_failed(
                        lost,
                        errors.BrokerDisconnectedError("lost"),
                        Action.RETRY_AMBIGUOUS,
                        clock.now,
                    )
                    acc.request_done(len(lost))
                transit.clear()
                continue
            for b in request:
                if fault < 0.32 and rng.random() < 0.5:
                    code, offset = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
                else:
                    code, offset = parts[b.partition].produce(b.encoded or b"")
                action = acc.answer_action(b, code)
                err = None if action is Action.WRITTEN else errors.error_for_code(code)
                acc.answered(b, action, err, base_offset=offset, log_append_time=-1, now=clock.now)
            acc.request_done(len(request))
        assert not acc.reset_wanted
    # Drain: every batch is answered in the end.
    for _ in range(10_000):
        if not acc.pending() and not transit:
            break
        clock.now += 0.2
        ready, _, _ = acc.ready(clock.now, KNOWN)
        for group in ready.values():
            for request in acc.requests(group, 4096):
                for b in request:
                    b.attempts += 1
                transit.append(request)
        if transit:
            request = transit.pop(0)
            for b in request:
                code, offset = parts[b.partition].produce(b.encoded or b"")
                action = acc.answer_action(b, code)
                err = None if action is Action.WRITTEN else errors.error_for_code(code)
                acc.answered(b, action, err, base_offset=offset, log_append_time=-1, now=clock.now)
            acc.request_done(len(request))
    assert not acc.reset_wanted
    assert all(b.done and b.error is None for b in batches)
    assert most_in_flight > 1
    for p, model in parts.items():
        assert model.log == sent[p]  # each record once, in order
    # Each record's offset is where the log holds it.
    for b in batches:
        for meta in b.outcomes(0, len(b.timestamps)):
            assert not isinstance(meta, errors.KafkaError)
            assert parts[b.partition].log[meta.offset].startswith(b"%d-" % b.partition)


def test_enqueue_is_the_short_path_only_while_a_view_is_set() -> None:
    acc, _, _, _ = make()

    class Future:
        __slots__ = ("_batch", "_claimed", "_index")

    class View:
        class metadata:  # the cluster view's attribute
            partitions = KNOWN

    acc.future_type = Future
    assert acc.enqueue("t", b"v", None, None, 0, None, NOW_MS) is None  # no view: the long path
    assert acc.place("t", b"v", None, None, 0, None, NOW_MS) is None and acc.buffered == 0
    acc.view = View()
    future = acc.enqueue("t", b"v", None, None, 0, None, NOW_MS)
    again = acc.enqueue("t", b"w", None, None, 0, None, NOW_MS)
    assert type(future) is Future and future._batch is again._batch
    assert (future._index, again._index, future._claimed) == (0, 1, False)
    assert future._batch.unclaimed == 2
    assert acc.enqueue("u", b"v", None, None, None, None, NOW_MS) is None  # an unknown topic


def test_place_records_fills_runs_until_a_record_must_take_the_long_way() -> None:
    from sharecon._produce.batch import add_to_runs, outcomes_of

    @dataclass(frozen=True)
    class Rec:
        topic: str
        value: bytes
        key: bytes | None = None
        headers: object = None
        partition: int | None = None
        timestamp: int | None = None

    class View:
        class metadata:  # the cluster view's attribute
            partitions = KNOWN

    acc, _, clock, _ = make(linger=0)
    acc.view = View()
    runs: list[list[Any]] = []
    items = iter([Rec("t", b"a", partition=0), Rec("t", b"b", partition=0), Rec("u", b"c")])
    waiting = acc.place_records(items, NOW_MS, runs, Rec)
    assert waiting == Rec("u", b"c")  # an unknown topic: the caller's to place
    (run,) = runs
    assert run[1:] == [0, 2]
    add_to_runs(runs, put(acc, b"d", partition=1))  # placed the long way
    assert acc.place_records(iter([Rec("t", b"e", partition=0)]), NOW_MS, runs, Rec) is None
    assert [r[1:] for r in runs] == [[0, 2], [0, 1], [2, 3]]
    with pytest.raises(errors.ConfigError, match="send_batch takes Rec items, not int"):
        acc.place_records(iter([1]), NOW_MS, runs, Rec)
    first, second = runs[0][0], runs[1][0]
    acc.finish(first)
    acc.finish(second, errors.KafkaError("refused"))
    got = outcomes_of(runs, raise_first=False)
    assert [getattr(o, "offset", str(o)) for o in got] == [-1, -1, "refused", -1]
    with pytest.raises(errors.KafkaError, match="refused"):
        outcomes_of(runs, raise_first=True)


# -- a new producer id, splits in the window, no idempotence -----------------------------------


def test_a_new_producer_id_fails_the_unknown_batches_and_keeps_the_rest_in_order() -> None:
    acc, hooks, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    batches = []
    for i in range(6):
        b = put(acc, b"v%d" % i, partition=0)
        b.sealed = True  # one record a batch
        batches.append(b)
    unknown = {1, 3, 4}
    for i, b in enumerate(batches):
        b.base_seq, b.encoded = i, b"sent before"
        b.ambiguous = i in unknown
    acc.restart_sequences(8, 0)
    state = acc.partitions[("t", 0)]
    assert list(state.queue) == [batches[0], batches[2], batches[5]]  # the rest, in order
    assert all(b.base_seq == -1 and b.encoded is None for b in state.queue)
    for i in unknown:
        b = batches[i]
        assert b.done and not b.ambiguous and isinstance(b.error, errors.KafkaTimeoutError)
        assert "unknown outcome" in str(b.error)
    assert hooks.done == [batches[i] for i in sorted(unknown)]
    assert (acc.producer_id, state.next_seq, state.confirmed) == (8, 0, False)


def test_a_split_with_batches_numbered_after_it_keeps_its_range_in_the_window() -> None:
    acc, _, clock, _ = make(linger=0)
    acc.restart_sequences(7, 0)
    first = put(acc, b"a", partition=0)
    confirm(acc)
    put(acc, b"b", partition=0)
    put(acc, b"c", partition=0)
    ready, _, _ = acc.ready(clock.now, KNOWN)
    acc.requests(ready[1], 1 << 20)
    second = send_one(acc, clock, partition=0)
    assert (first.base_seq, second.base_seq) == (0, 3)
    action = answer_action(ErrorCode.MESSAGE_TOO_LARGE, records=3, idempotent=True)
    err = errors.MessageTooLargeError("too big")
    acc.answered(first, action, err, base_offset=-1, log_append_time=-1, now=clock.now)
    assert first.children is not None
    half0, half1 = first.children
    assert (half0.base_seq, half1.base_seq) == (0, 1)
    # The halves hold the range where the batch stood, ahead of the one numbered after.
    assert list(acc.partitions[("t", 0)].window) == [first, half0, half1, second]


def test_without_idempotence_a_written_batch_confirms_nothing() -> None:
    acc, hooks, clock, _ = make(idempotent=False)
    batch = send_one(acc, clock, partition=0)
    action = answer_action(ErrorCode.NONE, records=1, idempotent=False)
    acc.answered(batch, action, None, base_offset=5, log_append_time=-1, now=clock.now)
    assert hooks.done == [batch] and batch.outcome(0).offset == 5  # type: ignore[union-attr]
    assert not acc.partitions[("t", 0)].confirmed  # read by idempotence only
