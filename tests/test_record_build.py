"""Record.build and RecordedAcks: records for users' unit tests, answered like a
consumer's; and the guide's example of them runs as printed."""

from __future__ import annotations

import copy
import pickle
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sharecon import AckType, Record, RecordedAcks, TimestampType, errors
from sharecon.record import BatchInfo, record_factory
from sharecon.serde import json_deserializer
from sharecon.types import TopicIdPartition

ROOT = Path(__file__).resolve().parents[1]


def test_a_built_record_has_the_fields_given() -> None:
    record = Record.build(
        "orders",
        b"v",
        key=b"k",
        partition=2,
        offset=41,
        headers=[("trace", b"abc"), ("empty", None)],
        delivery_count=3,
        timestamp=1_700_000_000_000,
        lock_deadline=12.5,
    )
    assert (record.topic, record.partition, record.offset) == ("orders", 2, 41)
    assert (record.key, record.value, record.delivery_count) == (b"k", b"v", 3)
    assert record.headers == (("trace", b"abc"), ("empty", None))
    assert record.header("trace") == b"abc" and record.header("missing") is None
    assert (record.timestamp, record.timestamp_type) == (
        1_700_000_000_000,
        TimestampType.CREATE_TIME,
    )
    assert record.lock_deadline == 12.5 and record.lock_expires_at is None
    assert record.leader_epoch is None
    assert (record.serialized_key, record.serialized_value) == (b"k", b"v")
    assert (record.serialized_key_size, record.serialized_value_size) == (1, 1)
    assert record.topic_partition.topic == "orders" and record.topic_partition.partition == 2


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_record_copies_and_pickles_with_every_field(clone: object) -> None:
    info = BatchInfo(7, TimestampType.LOG_APPEND_TIME, 100.0)
    original: Record[str, str] = Record(
        "t", 3, Record.build("t", None, partition=3).topic_partition, RecordedAcks(), 12.5,
        info, 41, 1_700_000_000_000, "k", "v", (("h", b"x"),),
    )  # fmt: skip
    original.delivery_count = 2
    original._serialized = (b"k", b"v")
    other = clone(original)  # type: ignore[operator]
    assert type(other) is Record and other is not original
    for name in ("topic", "partition", "offset", "timestamp", "key", "value", "headers",
                 "delivery_count", "lock_deadline", "serialized_key", "serialized_value",
                 "timestamp_type", "leader_epoch", "lock_expires_at"):  # fmt: skip
        assert getattr(other, name) == getattr(original, name), name
    assert other.topic_partition == original.topic_partition
    # Its answers go to (a copy of) its acknowledger, checked as before.
    other.accept()
    with pytest.raises(errors.InvalidRecordStateError, match="already answered with ACCEPT"):
        other.reject()
    plain = clone(Record.build("t", b"v"))  # type: ignore[operator]
    assert (plain.serialized_value, plain.timestamp_type) == (b"v", TimestampType.CREATE_TIME)


def test_defaults_and_deserialized_values() -> None:
    record = Record.build("orders", {"id": 7})
    assert (record.key, record.partition, record.offset, record.delivery_count) == (None, 0, 0, 1)
    assert record.timestamp == -1 and record.headers == ()
    # Not bytes: there are no serialized bytes to show.
    assert record.serialized_value is None and record.serialized_value_size == -1
    assert record.value == json_deserializer()(b'{"id": 7}')


def test_answers_are_recorded_and_checked_like_a_consumer_does() -> None:
    acks = RecordedAcks()
    first = Record.build("t", b"1", acks=acks)
    second = Record.build("t", b"2", offset=1, acks=acks)
    first.renew()
    first.renew()
    first.accept()
    second.release()
    assert acks.answer(first) is AckType.ACCEPT and acks.answer(second) is AckType.RELEASE
    assert acks.renewals(first) == 2 and acks.renewals(second) == 0
    assert [(r.offset, a) for r, a in acks] == [
        (0, AckType.RENEW),
        (0, AckType.RENEW),
        (0, AckType.ACCEPT),
        (1, AckType.RELEASE),
    ]
    assert len(acks) == 4
    with pytest.raises(errors.InvalidRecordStateError, match="already answered with ACCEPT"):
        first.reject()
    with pytest.raises(errors.InvalidRecordStateError, match="already answered"):
        second.renew()
    assert len(acks) == 4  # a refused answer is not recorded


def test_answering_a_record_built_without_acks_says_so() -> None:
    record = Record.build("t", b"v", offset=5)
    with pytest.raises(errors.InvalidRecordStateError, match=r"t-0 offset 5 was built without"):
        record.accept()


@pytest.mark.parametrize(
    ("field", "value"),
    [("partition", -1), ("offset", -2), ("delivery_count", 0), ("offset", True)],
)
def test_bad_positions_are_refused(field: str, value: object) -> None:
    with pytest.raises(errors.ConfigError, match=field):
        Record.build("t", b"v", **{field: value})  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="topic"):
        Record.build("", b"v")


def test_the_guide_example_runs_as_printed() -> None:
    guide = (ROOT / "docs" / "consumer.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", guide, flags=re.S | re.M)
    [example] = [b for b in blocks if "Record.build(" in b]
    proc = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[(0, 'ACCEPT'), (1, 'REJECT')]\n"


def test_the_consumers_record_factory_makes_what_the_constructor_makes() -> None:
    """``record_factory`` (the consumer's per-record path) skips ``__init__``: what it
    makes must be the same record, field for field, copies and pickles included."""
    tp = TopicIdPartition(uuid.uuid4(), 3, "orders")
    acks = RecordedAcks()
    info = BatchInfo(7, TimestampType.LOG_APPEND_TIME, 1.5)
    args = ("orders", 3, tp, acks, 99.0, info, 41, 1_700_000_000_000, b"k", b"v", (("h", b"x"),))
    made = record_factory(*args[:6])(*args[6:])
    built = Record(*args)
    assert type(made) is Record
    fields = [name for name in Record.__slots__ if name != "_serialized"]
    assert [getattr(made, f) for f in fields] == [getattr(built, f) for f in fields]
    assert not hasattr(made, "_serialized") and not hasattr(built, "_serialized")
    assert repr(made) == repr(built)
    assert (made.leader_epoch, made.timestamp_type, made.serialized_value_size) == (
        7,
        TimestampType.LOG_APPEND_TIME,
        1,
    )
    copied = copy.copy(made)
    assert (copied.offset, copied.key, copied.delivery_count) == (41, b"k", 1)
    made.accept()
    assert acks.answers == [(made, AckType.ACCEPT)]
