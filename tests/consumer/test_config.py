"""ConsumerConfig refuses every bad value at construction, naming the parameter (no broker)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from sharecon._consumer.config import (
    INT32_MAX,
    MAX_RECORDS_LIMIT,
    MAX_SECONDS,
    ConsumerConfig,
    check_max_records,
    topics_tuple,
)
from sharecon.errors import ConfigError

GOOD: dict[str, Any] = {"group_id": "g", "topics": ("t",)}

NAN = math.nan
INF = math.inf

# (field, bad value). Each row is a defect class from issue 9: a value that used to pass
# construction and then failed later (on the wire) or never (a deadline that never passes).
BAD: list[tuple[str, object]] = [
    # group_id
    ("group_id", ""),
    ("group_id", None),
    ("group_id", 7),
    ("group_id", b"g"),
    ("group_id", "g" * 32768),
    ("group_id", "\ud800"),
    # topics
    ("topics", ()),
    ("topics", "abc"),
    ("topics", ["t"]),
    ("topics", ("",)),
    ("topics", ("bad topic!",)),
    ("topics", (".",)),
    ("topics", ("..",)),
    ("topics", ("a" * 250,)),
    ("topics", ("a" * 300,)),
    ("topics", ("a/b",)),
    ("topics", ("a\0b",)),
    ("topics", ("t\n",)),
    ("topics", ("caf\u00e9",)),
    ("topics", (None,)),
    ("topics", (b"t",)),
    ("topics", ("t", 3)),
    # ack_mode
    ("ack_mode", "auto"),
    ("ack_mode", None),
    ("ack_mode", "IMPLICIT"),
    # max_records: int32 on the wire, a list in memory
    ("max_records", 0),
    ("max_records", -1),
    ("max_records", 1.5),
    ("max_records", 500.0),
    ("max_records", True),
    ("max_records", "500"),
    ("max_records", None),
    ("max_records", 10**12),
    ("max_records", MAX_RECORDS_LIMIT + 1),
    ("max_records", INT32_MAX + 1),
    # max_wait_ms: int32
    ("max_wait_ms", -1),
    ("max_wait_ms", 0.5),
    ("max_wait_ms", 500.0),
    ("max_wait_ms", NAN),
    ("max_wait_ms", False),
    ("max_wait_ms", INT32_MAX + 1),
    ("max_wait_ms", "500"),
    # min_bytes: int32
    ("min_bytes", -1),
    ("min_bytes", INT32_MAX + 1),
    ("min_bytes", 1.0),
    ("min_bytes", True),
    ("min_bytes", None),
    # fetch_max_bytes: int32
    ("fetch_max_bytes", 0),
    ("fetch_max_bytes", -1),
    ("fetch_max_bytes", 2**40),
    ("fetch_max_bytes", INT32_MAX + 1),
    ("fetch_max_bytes", 1e6),
    ("fetch_max_bytes", True),
    # buffer bounds
    ("max_buffered_records", -1),
    ("max_buffered_records", 1.5),
    ("max_buffered_records", True),
    ("max_buffered_records", None),
    ("max_buffered_records", 2 * MAX_RECORDS_LIMIT + 1),
    ("max_buffered_bytes", -1),
    ("max_buffered_bytes", 2**40),
    ("max_buffered_bytes", 1e9),
    ("max_buffered_bytes", False),
    # seconds: finite, positive, bounded
    *[
        (name, bad)
        for name in ("ack_linger", "request_timeout", "close_timeout", "max_hold")
        for bad in (NAN, -NAN, INF, -INF, 0, 0.0, -1, True, None, "1", MAX_SECONDS * 2, 1e300)
    ],
    # max_poll_interval: the same, except that None turns it off
    *[("max_poll_interval", bad) for bad in (NAN, INF, 0, -1, True, "1", MAX_SECONDS * 2)],
    ("acquire_mode", "strict"),
    ("acquire_mode", None),
    ("keep_locks", 1),
    ("keep_locks", None),
    # rack_id
    ("rack_id", ""),
    ("rack_id", 3),
    ("rack_id", b"r"),
    ("rack_id", "r" * 32768),
]


def _id(row: tuple[str, object]) -> str:
    name, value = row
    shown = repr(value)
    return f"{name}={shown[:20]}"


@pytest.mark.parametrize(("field", "value"), BAD, ids=[_id(r) for r in BAD])
def test_bad_value_is_refused_naming_the_parameter(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        ConsumerConfig(**{**GOOD, field: value})


def test_every_field_has_a_bad_value() -> None:
    """A new field must come with rows in BAD, so it cannot slip past validation."""
    fields = {f.name for f in dataclasses.fields(ConsumerConfig)}
    assert fields == {name for name, _ in BAD}


GOOD_VALUES: list[tuple[str, object]] = [
    ("group_id", "any chars: ünïcödé / spaces !"),
    ("group_id", "g" * 32767),
    ("topics", ("a" * 249,)),
    ("topics", ("a.b-c_D9", "...", "_", "-")),
    ("ack_mode", "explicit"),
    ("max_records", 1),
    ("max_records", MAX_RECORDS_LIMIT),
    ("max_wait_ms", 0),
    ("max_wait_ms", INT32_MAX),
    ("min_bytes", 0),
    ("min_bytes", INT32_MAX),
    ("fetch_max_bytes", 1),
    ("fetch_max_bytes", INT32_MAX),
    ("max_buffered_records", 0),
    ("max_buffered_records", 1),
    ("max_buffered_bytes", 0),
    ("max_buffered_bytes", INT32_MAX),
    ("ack_linger", 1),
    ("ack_linger", 0.001),
    ("request_timeout", MAX_SECONDS),
    ("close_timeout", 5),
    ("rack_id", None),
    ("rack_id", "rack-1"),
]


@pytest.mark.parametrize(("field", "value"), GOOD_VALUES, ids=[_id(r) for r in GOOD_VALUES])
def test_good_value_is_accepted(field: str, value: object) -> None:
    config = ConsumerConfig(**{**GOOD, field: value})
    assert getattr(config, field) == value


def test_message_names_the_bad_topic_and_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"topics: invalid topic name 'bad topic!'.*' ', '!'"):
        ConsumerConfig(group_id="g", topics=("ok", "bad topic!"))


def test_defaults_are_valid() -> None:
    config = ConsumerConfig(**GOOD)
    assert config.buffer_records == 2 * config.max_records
    assert config.buffer_bytes == config.fetch_max_bytes


@pytest.mark.parametrize("value", [0, -1, -500, 1.5, 10.0, True, False, "5", MAX_RECORDS_LIMIT + 1])
def test_check_max_records_refuses(value: object) -> None:
    with pytest.raises(ConfigError, match="max_records"):
        check_max_records(value, 500)  # type: ignore[arg-type]


def test_check_max_records_none_means_default() -> None:
    assert check_max_records(None, 500) == 500
    assert check_max_records(1, 500) == 1
    assert check_max_records(MAX_RECORDS_LIMIT, 500) == MAX_RECORDS_LIMIT


@pytest.mark.parametrize("topics", ["abc", b"abc", 5, None])
def test_topics_tuple_refuses_a_single_name_or_a_non_iterable(topics: object) -> None:
    with pytest.raises(ConfigError, match="topics"):
        topics_tuple(topics)


def test_topics_tuple_accepts_any_iterable() -> None:
    assert topics_tuple(["a", "b"]) == ("a", "b")
    assert topics_tuple(t for t in ("a",)) == ("a",)
