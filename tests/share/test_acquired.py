"""Filtering fetched batches down to the acquired records, and finding the gaps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharecon._share.acquired import AcquiredRange, clip, filter_acquired, lock_deadline

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Rec:
    offset: int


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    is_control: bool = False
    records: Sequence[Rec] = field(default_factory=tuple)


def data(
    first: int, last: int, *, missing: Sequence[int] = (), last_offset: int | None = None
) -> Batch:
    """A data batch covering first..last (or ..last_offset), minus compacted offsets."""
    recs = tuple(Rec(o) for o in range(first, last + 1) if o not in missing)
    return Batch(first, last if last_offset is None else last_offset, False, recs)


def control(offset: int) -> Batch:
    return Batch(offset, offset, True, (Rec(offset),))


def rng(first: int, last: int, dc: int = 1) -> AcquiredRange:
    return AcquiredRange(first, last, dc)


CASES = [
    ("batch inside range", [rng(0, 9)], [data(0, 9)], list(range(10)), [1] * 10, []),
    ("range spans batches", [rng(0, 9)], [data(0, 4), data(5, 9)], list(range(10)), [1] * 10, []),
    (
        "batch spans ranges with own delivery counts",
        [rng(0, 2, 1), rng(5, 6, 3)],
        [data(0, 9)],
        [0, 1, 2, 5, 6],
        [1, 1, 1, 3, 3],
        [],
    ),
    ("records outside ranges skipped", [rng(3, 4)], [data(0, 9)], [3, 4], [1, 1], []),
    (
        "batches outside ranges skipped",
        [rng(10, 11)],
        [data(0, 4), data(10, 11), data(20, 29)],
        [10, 11],
        [1, 1],
        [],
    ),
    (
        "control batch is a gap",
        [rng(0, 5)],
        [data(0, 2), control(3), data(4, 5)],
        [0, 1, 2, 4, 5],
        [1] * 5,
        [(3, 3)],
    ),
    (
        "compacted holes are gaps",
        [rng(0, 9)],
        [data(0, 9, missing=[2, 3, 7])],
        [0, 1, 4, 5, 6, 8, 9],
        [1] * 7,
        [(2, 3), (7, 7)],
    ),
    (
        "compacted tail is a gap",
        [rng(0, 9)],
        [data(0, 6, last_offset=9)],
        list(range(7)),
        [1] * 7,
        [(7, 9)],
    ),
    (
        "offsets beyond the data are gaps",
        [rng(0, 9)],
        [data(0, 4)],
        list(range(5)),
        [1] * 5,
        [(5, 9)],
    ),
    ("no data at all", [rng(0, 2), rng(8, 8)], [], [], [], [(0, 2), (8, 8)]),
    ("leading hole", [rng(0, 9)], [data(5, 9)], list(range(5, 10)), [1] * 5, [(0, 4)]),
    ("unsorted ranges", [rng(5, 6, 2), rng(0, 1)], [data(0, 9)], [0, 1, 5, 6], [1, 1, 2, 2], []),
    (
        "overlapping ranges clipped",
        [rng(0, 5), rng(3, 7, 2)],
        [data(0, 9)],
        list(range(8)),
        [1] * 6 + [2] * 2,
        [],
    ),
    ("no ranges", [], [data(0, 9)], [], [], []),
]


@pytest.mark.parametrize(
    ("name", "ranges", "batches", "offsets", "counts", "gaps"), CASES, ids=[c[0] for c in CASES]
)
def test_filter_table(
    name: str,
    ranges: list[AcquiredRange],
    batches: list[Batch],
    offsets: list[int],
    counts: list[int],
    gaps: list[tuple[int, int]],
) -> None:
    out = filter_acquired(ranges, batches)
    assert [r.offset for r in out.records] == offsets
    assert out.delivery_counts == counts
    assert out.gaps == gaps
    assert out.gap_count == sum(b - a + 1 for a, b in gaps)


def test_whole_batches_are_passed_through() -> None:
    """The fast path keeps the decoder's record objects (no copies)."""
    batch = data(0, 499)
    out = filter_acquired([rng(0, 499)], [batch])
    assert all(a is b for a, b in zip(out.records, batch.records, strict=True))


@given(
    st.sets(st.integers(0, 60), max_size=60),  # offsets that have data records
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8), st.integers(1, 5)), max_size=6),
    st.integers(1, 7),  # batch size
)
def test_filter_matches_per_offset_definition(
    present: set[int], raw_ranges: list[tuple[int, int, int]], size: int
) -> None:
    """Every acquired offset is delivered (if it has a record) or a gap, exactly once."""
    ranges = [rng(a, a + n, dc) for a, n, dc in raw_ranges]
    batches = [
        Batch(s, s + size - 1, False, tuple(Rec(o) for o in range(s, s + size) if o in present))
        for s in range(0, 61, size)
    ]
    out = filter_acquired(ranges, batches)
    owner: dict[int, int] = {}  # offset -> delivery count of the first range covering it
    for r in sorted(ranges, key=lambda r: r.first_offset):
        for o in range(r.first_offset, r.last_offset + 1):
            owner.setdefault(o, r.delivery_count)
    want = sorted(o for o in owner if o in present)
    assert [r.offset for r in out.records] == want
    assert out.delivery_counts == [owner[o] for o in want]
    gap_offsets = [o for a, b in out.gaps for o in range(a, b + 1)]
    assert sorted(gap_offsets) == sorted(o for o in owner if o not in present)


def test_inverted_range_rejected() -> None:
    with pytest.raises(ValueError):
        filter_acquired([rng(5, 4)], [])


def test_clip() -> None:
    ranges = [rng(0, 3), rng(6, 9), rng(20, 21)]
    assert clip(ranges, 2, 7) == [(2, 3), (6, 7)]
    assert clip(ranges, 10, 19) == []


@pytest.mark.parametrize(("timeout_ms", "want"), [(30000, 130.0), (0, None), (-1, None)])
def test_lock_deadline(timeout_ms: int, want: float | None) -> None:
    assert lock_deadline(100.0, timeout_ms) == want
