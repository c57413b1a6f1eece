"""Intake of one partition's ShareFetch answer: range checks, split, lazy decoding, and
where every acquired offset ends up (delivered, GAP, RELEASE)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from sharecon._share.intake import (
    DEFAULT_MAX_ACQUIRED,
    Decoded,
    InvalidAnswer,
    PartitionIntake,
    check_ranges,
    take_partition,
)
from sharecon.errors import KafkaError, RemoteProtocolError
from sharecon.protocol.compression import Codec
from sharecon.protocol.records import ControlType, Headers, encode_batch, encode_control_batch
from sharecon.protocol.records import Record as WireRecord
from sharecon.types import TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 3, "orders")


@dataclass
class Rec:
    offset: int
    value: bytes | None
    delivery_count: int = 1


def factory(offset: int, _ts: int, _key: bytes | None, value: bytes | None, _h: Headers) -> Rec:
    return Rec(offset, value)


def batch(first: int, n: int, *, codec: Codec = Codec.NONE, skip: tuple[int, ...] = ()) -> bytes:
    """A batch covering ``first..first+n-1``; offsets in ``skip`` compacted away."""
    recs = [
        WireRecord(first + i, 0, None, b"v%d" % (first + i), ())
        for i in range(n)
        if first + i not in skip
    ]
    return encode_batch(recs, base_offset=first, codec=codec, last_offset_delta=n - 1)


def drain(intake: PartitionIntake, dlq: int | None = None) -> list[Decoded[Rec]]:
    out = []
    while (d := intake.decode_next(factory, dead_letter_limit=dlq)) is not None:
        out.append(d)
    return out


def offsets(spans: list[tuple[int, int]]) -> list[int]:
    return [o for lo, hi in spans for o in range(lo, hi + 1)]


def account(intake: PartitionIntake, steps: list[Decoded[Rec]]) -> dict[str, list[int]]:
    """Where each acquired offset went; every one must be in exactly one place."""
    delivered = [r.offset for d in steps for r in d.records]
    dead = [r.offset for d in steps for r in d.dead]
    gaps = offsets(intake.gaps) + [o for d in steps for o in offsets(d.gaps)]
    release = offsets(intake.release) + [o for d in steps for o in offsets(d.release)]
    acquired = offsets([(r.first_offset, r.last_offset) for r in intake.ranges])
    places = sorted(delivered + dead + gaps + release)
    assert places == sorted(acquired), "every acquired offset ends up exactly once"
    return {"delivered": delivered, "dead": dead, "gaps": sorted(gaps), "release": release}


# -- ranges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("triples", "why"),
    [
        ([(5, 4, 1)], "invalid"),
        ([(-1, 4, 1)], "invalid"),
        ([(0, 4, 0)], "delivery count 0"),
        ([(0, 4, -3)], "delivery count -3"),
        ([(0, 4, 1), (4, 9, 1)], "overlaps"),
        ([(0, 2**50, 1)], "more than"),
        ([(0, 500_000_000, 1)], "more than"),
        (
            [(0, DEFAULT_MAX_ACQUIRED // 2, 1), (2**40, 2**40 + DEFAULT_MAX_ACQUIRED, 1)],
            "more than",
        ),
    ],
)
def test_untrustworthy_ranges_are_refused_with_a_typed_error(
    triples: list[tuple[int, int, int]], why: str
) -> None:
    with pytest.raises(InvalidAnswer, match=why) as info:
        take_partition(TP, triples, batch(0, 5))
    assert isinstance(info.value, RemoteProtocolError) and isinstance(info.value, KafkaError)


def test_ranges_are_sorted_and_the_bound_is_inclusive() -> None:
    got = check_ranges([(10, 19, 2), (0, 4, 1)], max_acquired=15)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [
        (0, 4, 1),
        (10, 19, 2),
    ]
    with pytest.raises(InvalidAnswer):
        check_ranges([(10, 19, 2), (0, 4, 1)], max_acquired=14)


def test_no_ranges_means_nothing_to_do() -> None:
    intake = take_partition(TP, [], batch(0, 5))
    assert intake.exhausted and intake.acquired == 0 and drain(intake) == []


# -- delivering ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_every_acquired_record_is_delivered_once_in_order(codec: Codec) -> None:
    data = batch(0, 5, codec=codec) + batch(5, 5, codec=codec)
    intake = take_partition(TP, [(0, 9, 1)], data)
    assert intake.acquired == 10 and intake.wire == len(data)
    steps = drain(intake)
    assert len(steps) == 2  # one decode per batch, lazily
    where = account(intake, steps)
    assert where["delivered"] == list(range(10)) and not where["gaps"]
    assert [r.value for d in steps for r in d.records][:2] == [b"v0", b"v1"]
    assert intake.acquired == 0 and intake.wire == 0


def test_records_outside_the_ranges_belong_to_others() -> None:
    intake = take_partition(TP, [(2, 3, 1), (7, 7, 1)], batch(0, 10))
    where = account(intake, drain(intake))
    assert where["delivered"] == [2, 3, 7]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD], ids=lambda c: c.name)
def test_only_the_acquired_records_of_a_batch_are_built(codec: Codec) -> None:
    # Strict record limit: one offset of a big batch acquired per answer. Only that
    # record is built; the others are neither delivered, nor gaps, nor released.
    built: list[int] = []

    def counting(offset: int, ts: int, key: bytes | None, value: bytes | None, h: Headers) -> Rec:
        built.append(offset)
        return factory(offset, ts, key, value, h)

    data = batch(100, 5_000, codec=codec, skip=(102, 4_000))
    for ranges, want, gaps in [
        ([(100, 100, 1)], [100], []),
        ([(101, 103, 2)], [101, 103], [102]),
        ([(2_600, 2_600, 1), (4_000, 4_001, 1)], [2_600, 4_001], [4_000]),
        ([(5_099, 5_099, 1)], [5_099], []),
    ]:
        built.clear()
        intake = take_partition(TP, ranges, data)
        steps = []
        while (d := intake.decode_next(counting)) is not None:
            steps.append(d)
        where = account(intake, steps)
        assert where["delivered"] == want == built
        assert where["gaps"] == gaps and not where["release"]
        assert all(r.delivery_count == ranges[0][2] for d in steps for r in d.records)


def test_batches_outside_every_range_are_never_decoded() -> None:
    data = batch(0, 5) + batch(5, 5) + batch(10, 5)
    intake = take_partition(TP, [(6, 8, 1)], data)
    assert intake.pending_span() == (5, 9)
    steps = drain(intake)
    assert len(steps) == 1 and account(intake, steps)["delivered"] == [6, 7, 8]


def test_acquired_offsets_without_records_are_gaps() -> None:
    # Compacted offsets inside a batch, and acquired offsets beyond every batch.
    data = batch(0, 6, skip=(2, 3))
    intake = take_partition(TP, [(0, 9, 1)], data)
    where = account(intake, drain(intake))
    assert where["delivered"] == [0, 1, 4, 5]
    assert where["gaps"] == [2, 3, 6, 7, 8, 9]
    assert offsets(intake.gaps) == [6, 7, 8, 9]  # known from the headers alone


def test_control_batches_are_gaps() -> None:
    data = (
        batch(0, 2)
        + encode_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0, base_offset=2)
        + batch(3, 2)
    )
    intake = take_partition(TP, [(0, 4, 1)], data)
    where = account(intake, drain(intake))
    assert where["delivered"] == [0, 1, 3, 4] and where["gaps"] == [2]


def test_redelivered_ranges_carry_their_delivery_counts() -> None:
    intake = take_partition(TP, [(0, 1, 1), (2, 4, 3)], batch(0, 5))
    steps = drain(intake)
    assert [(r.offset, r.delivery_count) for d in steps for r in d.records] == [
        (0, 1),
        (1, 1),
        (2, 3),
        (3, 3),
        (4, 3),
    ]


def test_records_past_the_dead_letter_limit_are_split_off() -> None:
    intake = take_partition(TP, [(0, 1, 2), (2, 4, 3)], batch(0, 5))
    steps = drain(intake, dlq=2)
    where = account(intake, steps)
    assert where["delivered"] == [0, 1] and where["dead"] == [2, 3, 4]
    assert all(r.delivery_count == 3 for d in steps for r in d.dead)


# -- corrupt and cut-off data ------------------------------------------------------------------


def corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def test_a_batch_failing_its_crc_is_released_and_the_rest_delivered() -> None:
    good, bad = batch(0, 3), batch(3, 3)
    intake = take_partition(TP, [(0, 8, 1)], good + corrupt(bad, len(bad) - 2) + batch(6, 3))
    steps = drain(intake)
    where = account(intake, steps)
    assert where["delivered"] == [0, 1, 2, 6, 7, 8]
    assert where["release"] == [3, 4, 5]
    # The CRC is checked when the answer is split: a header failing it is not trusted to
    # say which offsets the batch covers, so nothing next to it is taken for a gap.
    assert len(intake.errors) == 1 and intake.errors[0].base_offset == 3
    assert "CRC" in str(intake.errors[0])


def test_a_crc_failure_in_the_header_span_never_makes_gaps() -> None:
    # Corrupt LastOffsetDelta (bytes 23..26): the header would claim a shorter batch.
    bad = bytearray(batch(3, 3))
    bad[26] = 0
    intake = take_partition(TP, [(0, 8, 1)], batch(0, 3) + bytes(bad) + batch(6, 3))
    where = account(intake, drain(intake))
    assert where["release"] == [3, 4, 5] and not where["gaps"]


def test_a_bad_batch_next_to_a_good_one_releases_nothing_the_good_one_holds() -> None:
    bad = batch(0, 5)
    intake = take_partition(TP, [(7, 9, 1)], corrupt(bad, len(bad) - 1) + batch(5, 5))
    where = account(intake, drain(intake))
    assert where["delivered"] == [7, 8, 9] and not where["release"]


def test_a_run_of_bad_batches_is_bounded_by_the_good_ones() -> None:
    # The second bad batch's BaseOffset (not covered by its CRC) claims 100.
    bad1 = batch(0, 5)
    bad2 = bytearray(batch(5, 3))
    bad2[0:8] = (100).to_bytes(8, "big")
    data = corrupt(bad1, len(bad1) - 1) + corrupt(bytes(bad2), len(bad2) - 1) + batch(8, 2)
    intake = take_partition(TP, [(0, 9, 1)], data)
    where = account(intake, drain(intake))
    assert where["release"] == list(range(8)) and where["delivered"] == [8, 9]


def test_a_truncated_tail_releases_what_it_would_have_held() -> None:
    data = batch(0, 3) + batch(3, 3)
    intake = take_partition(TP, [(0, 5, 1)], data[: len(data) - 7])
    where = account(intake, drain(intake))
    assert where["delivered"] == [0, 1, 2] and where["release"] == [3, 4, 5]
    assert not where["gaps"]


def test_unsplittable_data_releases_everything() -> None:
    data = bytearray(batch(0, 3))
    data[16] = 1  # magic byte: not RecordBatch v2
    intake = take_partition(TP, [(0, 2, 1)], bytes(data))
    assert intake.exhausted and offsets(intake.release) == [0, 1, 2]
    assert intake.errors and "magic" in str(intake.errors[0])


def test_batches_out_of_order_release_everything() -> None:
    intake = take_partition(TP, [(0, 5, 1)], batch(3, 3) + batch(0, 3))
    assert intake.exhausted and offsets(intake.release) == list(range(6))
    assert "out of order" in str(intake.errors[0])


def test_empty_records_with_ranges_are_all_gaps() -> None:
    intake = take_partition(TP, [(0, 2, 1)], None)
    assert intake.exhausted and offsets(intake.gaps) == [0, 1, 2]
