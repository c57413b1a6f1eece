"""Dead-letter headers read back without a broker: sharecon's and Kafka 4.4's own."""

from __future__ import annotations

from sharecon.dlq import (
    BROKER_DLQ_HEADERS,
    DeadLetterInfo,
    any_dead_letter_info,
    broker_dead_letter_info,
    dead_letter_info,
    original_headers,
)

# Exactly what a Kafka 4.4.0 broker wrote on a record its group had rejected (captured
# from a real broker; names and order as in its ShareGroupDLQStateManager).
BROKER_WRITTEN: list[tuple[str, bytes | None]] = [
    ("__dlq.errors.topic", b"invoices"),
    ("__dlq.errors.partition", b"2"),
    ("__dlq.errors.offset", b"17"),
    ("__dlq.errors.group", b"billing"),
    ("__dlq.errors.delivery.count", b"5"),
    ("__dlq.errors.message", b"Offset delivery count exceeded the threshold."),
]
SHARECON_WRITTEN: list[tuple[str, bytes | None]] = [
    ("trace", b"t1"),
    ("sharecon.dlq.topic", b"orders"),
    ("sharecon.dlq.partition", b"0"),
    ("sharecon.dlq.offset", b"3"),
    ("sharecon.dlq.delivery.count", b"2"),
    ("sharecon.dlq.group", b"g"),
    ("sharecon.dlq.reason", b"bad"),
    ("sharecon.dlq.time", b"1700000000000"),
]


def test_broker_headers_are_decoded() -> None:
    assert [k for k, _ in BROKER_WRITTEN] == list(BROKER_DLQ_HEADERS)
    info = broker_dead_letter_info(BROKER_WRITTEN, 1_800_000_000_000)
    assert info == DeadLetterInfo(
        topic="invoices",
        partition=2,
        offset=17,
        delivery_count=5,
        group="billing",
        reason="Offset delivery count exceeded the threshold.",
        time_ms=1_800_000_000_000,
        written_by="broker",
    )
    assert dead_letter_info(BROKER_WRITTEN) is None  # not sharecon's headers


def test_broker_headers_without_delivery_count_or_message() -> None:
    """The broker leaves out the count and the message when it has none."""
    info = broker_dead_letter_info(BROKER_WRITTEN[:4])
    assert info is not None
    assert (info.delivery_count, info.reason, info.time_ms) == (-1, "", -1)
    assert broker_dead_letter_info([("trace", b"x")]) is None


def test_any_dead_letter_info_reads_either() -> None:
    mine = any_dead_letter_info(SHARECON_WRITTEN, 5)
    assert mine is not None and mine.written_by == "sharecon" and mine.time_ms == 1700000000000
    theirs = any_dead_letter_info(BROKER_WRITTEN, 5)
    assert theirs is not None and theirs.written_by == "broker" and theirs.topic == "invoices"
    assert any_dead_letter_info([("trace", b"x"), ("nil", None)]) is None


def test_original_headers_drop_both_kinds() -> None:
    assert original_headers(SHARECON_WRITTEN) == [("trace", b"t1")]
    assert original_headers([("a", None), *BROKER_WRITTEN, ("__other", b"1")]) == [
        ("a", None),
        ("__other", b"1"),
    ]
