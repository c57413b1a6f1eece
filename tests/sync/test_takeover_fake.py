"""sharecon.sync.ShareConsumer when poll() or process() take over from a ``for`` loop that
ended early: the record in hand (and, for process(), the records of the chunk the loop
never reached) are released, never accepted unseen nor left to their locks. Against
FakeKafka (no JVM)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from sharecon.sync import Producer, ShareConsumer

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.fake import FakeKafka
    from sharecon.types import AckResult

#: A lock far longer than the test waits: only a release brings a record back in time.
GROUP = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000"}


def _records(fake: FakeKafka, n: int) -> None:
    fake.create_topic("t")
    fake.configure_group("g", GROUP)
    with Producer(fake.bootstrap) as producer:
        for i in range(n):
            producer.send("t", b"v%d" % i, partition=0).result(timeout=30)


class Answers:
    """What the broker was told, per offset, in order (``on_acknowledged``)."""

    def __init__(self) -> None:
        self.by_offset: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, results: list[AckResult]) -> None:
        with self._lock:
            for result in results:
                for batch in result.batches:
                    offsets = range(batch.first_offset, batch.last_offset + 1)
                    for i, offset in enumerate(offsets):
                        kind = batch.types[0 if len(batch.types) == 1 else i]
                        self.by_offset.setdefault(offset, []).append(kind.name)


def test_poll_after_a_break_releases_the_record_in_hand(fake_kafka: FakeKafka) -> None:
    _records(fake_kafka, 3)
    answers = Answers()
    seen: list[tuple[int, int]] = []
    with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], max_records=1, on_acknowledged=answers
    ) as consumer:
        for record in consumer:
            assert record.offset == 0
            break
        deadline = time.monotonic() + 20
        while (0, 2) not in seen and time.monotonic() < deadline:
            seen += [(r.offset, r.delivery_count) for r in consumer.poll(1)]
        consumer.commit()
    assert answers.by_offset[0][0] == "RELEASE"
    assert (0, 2) in seen
    assert sorted(o for o, d in seen if d == 1) == [1, 2]


def test_process_after_a_break_releases_the_rest_of_the_chunk(fake_kafka: FakeKafka) -> None:
    _records(fake_kafka, 8)
    answers = Answers()
    handled: list[tuple[int, int]] = []
    lock = threading.Lock()

    def handler(record: Record[Any, Any]) -> None:
        with lock:
            handled.append((record.offset, record.delivery_count))

    with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], on_acknowledged=answers
    ) as consumer:
        looped = []
        for record in consumer:
            looped.append(record.offset)
            if consumer._queue:  # the chunk holds records the loop has not reached
                break
        in_hand = looped[-1]
        unreached = [r.offset for r in consumer._queue]
        assert unreached
        deadline = time.monotonic() + 20
        while len({o for o, _ in handled}) < 8 - len(looped) + 1 and time.monotonic() < deadline:
            consumer.process(handler, timeout=0.5)
    # The loop's earlier records were moved past (accepted); the one in hand and the
    # unreached ones were released at once, so process() got them again (delivery 2)
    # long before their 60 s locks ended.
    for offset in looped[:-1]:
        assert answers.by_offset[offset][0] == "ACCEPT"
    for offset in [in_hand, *unreached]:
        assert answers.by_offset[offset][0] == "RELEASE"
        assert (offset, 2) in handled
    assert {o for o, _ in handled} == set(range(8)) - set(looped[:-1])


def test_commit_after_a_break_releases_the_records_not_reached(fake_kafka: FakeKafka) -> None:
    _records(fake_kafka, 8)
    answers = Answers()
    seen: list[tuple[int, int]] = []
    with ShareConsumer(
        fake_kafka.bootstrap, group_id="g", topics=["t"], on_acknowledged=answers
    ) as consumer:
        looped = []
        for record in consumer:
            looped.append(record.offset)
            if consumer._queue:  # the chunk holds records the loop has not reached
                break
        unreached = [r.offset for r in consumer._queue]
        assert unreached
        consumer.commit()
        # Released, not left to their 60 s locks: they come back at delivery 2 at once.
        deadline = time.monotonic() + 20
        while not all((o, 2) in seen for o in unreached) and time.monotonic() < deadline:
            seen += [(r.offset, r.delivery_count) for r in consumer.poll(1)]
    for offset in looped:  # moved past, and the one in hand: accepted by the commit
        assert answers.by_offset[offset][0] == "ACCEPT"
    for offset in unreached:
        assert answers.by_offset[offset][0] == "RELEASE"
        assert (offset, 2) in seen
