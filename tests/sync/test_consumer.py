"""sharecon.sync.ShareConsumer against a real broker: the async consumer's core scenarios,
through the blocking API (answers given in the calling thread and in handler threads)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon.dlq import DeadLetterPolicy, dead_letter_info
from sharecon.sync import Admin, Producer, ShareConsumer
from tests.sync.conftest import produce, take

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import BrokerFactory, ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.broker]


def read_rest(bootstrap: str, group: str, topic: str, n: int, deadline: float = 60) -> list[Record]:
    """Up to ``n`` records another member of ``group`` gets (accepting them)."""
    with ShareConsumer(bootstrap, group_id=group, topics=[topic]) as other:
        got = take(other, n, deadline)
        other.commit()
    return got


def test_for_loop_implicit_accepts_each_record_once(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    values = [b"v%d" % i for i in range(300)]
    produce(kafka_bootstrap, topic, values)
    seen: list[bytes] = []
    with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
        for record in consumer:
            assert record.delivery_count == 1
            seen.append(record.value or b"")
            if len(seen) == len(values):
                break
        verdicts = consumer.commit()  # accepts the record in hand too
        assert verdicts and all(v is None for v in verdicts.values())
    assert sorted(seen) == sorted(values)
    # All accepted: nothing comes back to the group, and a new record still flows.
    produce(kafka_bootstrap, topic, [b"marker"])
    again = read_rest(kafka_bootstrap, share_group, topic, 1)
    assert [r.value for r in again] == [b"marker"]


def test_break_releases_the_record_in_hand_and_serves_the_rest_next_loop(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produce(kafka_bootstrap, topic, [b"a", b"b", b"c", b"d"])
    with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
        first = next(iter(consumer))  # as a loop that breaks at once
        # The next loop releases the record in hand (not moved past) and goes on.
        rest: list[Record] = []
        for record in consumer:
            rest.append(record)
            if record.delivery_count == 2 or len(rest) == 4:
                break
        consumer.commit()
    values = [r.value for r in rest]
    assert first.value == b"a"
    # b, c, d were never given back: each is seen once, with delivery 1; a comes back as 2.
    assert [r.value for r in rest if r.delivery_count == 1] == [b"b", b"c", b"d"][: len(rest)]
    redelivered = [r for r in rest if r.value == b"a"]
    if redelivered:
        assert redelivered[0].delivery_count == 2
    else:
        assert values == [b"b", b"c", b"d"]  # released: another poll brings it back
        [back] = read_rest(kafka_bootstrap, share_group, topic, 1)
        assert (back.value, back.delivery_count) == (b"a", 2)


def test_explicit_release_redelivers_reject_archives_and_unanswered_is_refused(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produce(kafka_bootstrap, topic, [b"retry", b"poison", b"fine"])
    log: list[tuple[bytes | None, int]] = []
    with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        it = iter(consumer)
        first = next(it)
        with pytest.raises(errors.UnacknowledgedRecordsError, match=f"offset {first.offset}"):
            next(it)
        first.release()
        for record in it:  # three more deliveries: poison, fine, and retry again
            log.append((record.value, record.delivery_count))
            if record.value == b"poison":
                record.reject()
            else:
                record.accept()
            if len(log) == 3:
                break
        consumer.commit()
    assert (first.value, first.delivery_count) == (b"retry", 1)
    assert sorted(log) == [(b"fine", 1), (b"poison", 1), (b"retry", 2)]
    # Everything answered for good: the group gets only what is produced next.
    produce(kafka_bootstrap, topic, [b"marker"])
    assert [r.value for r in read_rest(kafka_bootstrap, share_group, topic, 1)] == [b"marker"]


def test_close_releases_held_records_to_another_member(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    # A lock longer than the wait below: only the release at close brings them back.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(1)
    produce(kafka_bootstrap, topic, [b"x", b"y", b"z"])
    with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as consumer:
        held = take(consumer, 3)  # polled, never moved past
        assert len(held) == 3
    back = read_rest(kafka_bootstrap, group, topic, 3, deadline=40)
    assert sorted((r.value, r.delivery_count) for r in back) == [(b"x", 2), (b"y", 2), (b"z", 2)]


def test_process_runs_handlers_in_threads_and_dead_letters_failures(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topic, [b"ok-1", b"bad", b"ok-2", b"self-answered"])
    handled: list[tuple[bytes | None, int]] = []
    threads: set[int] = set()
    lock = threading.Lock()

    def handler(record: Record) -> None:
        with lock:
            handled.append((record.value, record.delivery_count))
            threads.add(threading.get_ident())
        if record.value == b"bad":
            raise ValueError("cannot bill this")
        if record.value == b"self-answered":
            record.accept()  # an answer from a handler thread, carried to the loop

    with ShareConsumer(
        kafka_bootstrap,
        group_id=share_group,
        topics=[topic],
        dead_letter=DeadLetterPolicy(max_deliveries=2, topic=dlq),
    ) as consumer:
        stop = threading.Timer(60, consumer.close)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ((b"bad", 2) in handled and len(handled) >= 5):
            consumer.process(handler, concurrency=2, timeout=1.0)
        stop.cancel()
    assert threading.get_ident() not in threads
    assert sorted(handled) == [
        (b"bad", 1),
        (b"bad", 2),
        (b"ok-1", 1),
        (b"ok-2", 1),
        (b"self-answered", 1),
    ]
    # The second failure went to the dead-letter topic; nothing comes back to the group.
    with Admin(kafka_bootstrap) as admin:
        admin.alter_group_config(f"r-{dlq}", {"share.auto.offset.reset": "earliest"})
    [copy] = read_rest(kafka_bootstrap, f"r-{dlq}", dlq, 1)
    info = dead_letter_info(copy.headers)
    assert copy.value == b"bad" and info is not None and info.delivery_count == 2
    assert "cannot bill this" in info.reason


def test_errors_cross_threads_with_their_own_types(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    produce(kafka_bootstrap, topic, [b"not json", b"{}"])

    def decode(data: bytes) -> object:
        import json

        return json.loads(data)

    with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], value_deserializer=decode
    ) as consumer:
        with pytest.raises(errors.ConfigError, match="max_records"):
            consumer.poll(max_records=0)
        with pytest.raises(errors.DeserializationError) as caught:
            for _ in consumer:
                pass
        assert caught.value.offset == 0 and isinstance(caught.value.__cause__, ValueError)
        record = next(iter(consumer))
        assert record.value == {}
        record.accept()
        with pytest.raises(errors.InvalidRecordStateError):
            record.accept()  # answered twice: refused in this thread, as in async code
    with pytest.raises(errors.ClientClosedError):
        consumer.poll(timeout=0)
    with Admin(kafka_bootstrap) as admin, pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.describe_topics([f"missing-{uuid.uuid4().hex[:8]}"])


def test_consumer_goes_on_after_a_broker_restart(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory(shared=False)
    topic, group = "sync-restart", "sync-restart-g"
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([topic], num_partitions=1)
        admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, [b"before"])
    with ShareConsumer(
        broker.bootstrap, group_id=group, topics=[topic], request_timeout=5.0, close_timeout=10.0
    ) as consumer:
        [first] = take(consumer, 1)
        assert first.value == b"before"
        consumer.commit()
        broker.restart()
        produce(broker.bootstrap, topic, [b"after"])
        got = take(consumer, 1, deadline=120)
        assert [r.value for r in got] == [b"after"]
        consumer.commit(timeout=60)


def test_the_trio_backend_consumes_the_same(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    values = [b"t%d" % i for i in range(20)]
    produce(kafka_bootstrap, topic, values)
    seen: list[bytes] = []
    with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], backend="trio"
    ) as consumer:
        for record in consumer:
            seen.append(record.value or b"")
            if len(seen) == len(values):
                break
        assert all(v is None for v in consumer.commit().values())
    assert sorted(seen) == sorted(values)


# Python 3.12+ warns when a process with threads forks: exactly the case refused here.
@pytest.mark.filterwarnings("ignore:.*use of fork\\(\\) may lead to deadlocks:DeprecationWarning")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_started_client_is_refused_in_a_forked_child_and_works_on_in_the_parent(
    kafka_bootstrap: str, topic: str
) -> None:
    with Producer(kafka_bootstrap) as producer:
        producer.send(topic, b"before").result(timeout=60)
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                producer.send(topic, b"from the child")
            except errors.ForkedClientError:
                code = 0
            except BaseException:
                code = 2
            producer.close()  # nothing in the child: the parent's client is not touched
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        meta = producer.send(topic, b"after").result(timeout=60)
        assert meta.topic == topic


def test_close_from_another_thread_ends_the_loop(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    produce(kafka_bootstrap, topic, [b"only"])
    seen: list[bytes] = []
    consumer = ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic])
    with consumer:
        safety = threading.Timer(120, consumer.close)  # a bound, should the record not come
        safety.start()
        for record in consumer:  # waits for more after the first, until closed
            seen.append(record.value or b"")
            threading.Timer(1.0, consumer.close).start()
        safety.cancel()
    assert seen == [b"only"]
    with pytest.raises(errors.ClientClosedError):
        iter(consumer)
