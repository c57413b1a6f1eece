"""Filtering fetched data down to what this member acquired.

Rules of this module:

1. Only offsets inside an ``AcquiredRecords`` range ``[first, last]`` are delivered, each
   with that range's delivery count. Records outside every range belong to others.
2. Control batches are never delivered.
3. An acquired offset with no deliverable record (compacted away, a control record, beyond
   the returned data) is a GAP: the consumer acknowledges it at once with type GAP (0).
4. Ranges and batches are both sorted by offset: one merge walk, skipping whole batches
   outside the ranges; a batch lying inside one range is taken without per-record checks.
5. No I/O; the clock is the caller's ``now`` (monotonic seconds).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "AcquiredRange",
    "BatchLike",
    "Filtered",
    "RecordLike",
    "clip",
    "filter_acquired",
    "lock_deadline",
]


class RecordLike(Protocol):
    """What filtering needs of a decoded record."""

    @property
    def offset(self) -> int:
        """The record's absolute offset."""
        ...


R = TypeVar("R", bound=RecordLike)
R_co = TypeVar("R_co", bound=RecordLike, covariant=True)


class BatchLike(Protocol[R_co]):
    """What filtering needs of a decoded record batch (records sorted by offset)."""

    @property
    def base_offset(self) -> int:
        """The first offset the batch covers."""
        ...

    @property
    def last_offset(self) -> int:
        """The last offset the batch covers (base + lastOffsetDelta)."""
        ...

    @property
    def is_control(self) -> bool:
        """Whether this is a control (transaction marker) batch."""
        ...

    @property
    def records(self) -> Sequence[R_co]:
        """The records, in offset order."""
        ...


_offset = attrgetter("offset")


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """One ``AcquiredRecords`` entry: offsets ``first_offset..last_offset`` (inclusive)."""

    first_offset: int
    last_offset: int
    delivery_count: int


# A plain class, not a dataclass: a generic dataclass fails to import once compiled by
# mypyc (the dataclass machinery tries to set a native class's ``__dict__``).
class Filtered(Generic[R]):
    """The deliverable part of one partition's fetch data.

    ``records[i]`` was delivered ``delivery_counts[i]`` times (1 on the first delivery).
    ``gaps`` are inclusive ``(first, last)`` offset ranges to acknowledge as GAP.
    """

    __slots__ = ("delivery_counts", "gaps", "records")

    def __init__(self) -> None:
        self.records: list[R] = []
        self.delivery_counts: list[int] = []
        self.gaps: list[tuple[int, int]] = []

    def __repr__(self) -> str:
        return (
            f"Filtered(records={self.records!r}, delivery_counts={self.delivery_counts!r}, "
            f"gaps={self.gaps!r})"
        )

    @property
    def gap_count(self) -> int:
        """How many offsets the gaps cover."""
        return sum(last - first + 1 for first, last in self.gaps)


def _sorted_ranges(ranges: Sequence[AcquiredRange]) -> list[AcquiredRange]:
    out = list(ranges)
    if any(out[i].first_offset > out[i + 1].first_offset for i in range(len(out) - 1)):
        out.sort(key=lambda r: r.first_offset)
    for r in out:
        if r.last_offset < r.first_offset:
            raise ValueError(f"acquired range {r.first_offset}..{r.last_offset} is inverted")
    return out


def filter_acquired(
    ranges: Sequence[AcquiredRange], batches: Sequence[BatchLike[R]]
) -> Filtered[R]:
    """Keep the records inside the acquired ranges and list the GAP offsets (rules 1-4).

    :param ranges: the partition's ``AcquiredRecords``; overlapping ranges are clipped so
        no offset is delivered twice.
    :param batches: the decoded record batches, sorted by base offset.
    """
    out: Filtered[R] = Filtered()
    records, counts, gaps = out.records, out.delivery_counts, out.gaps
    nb = len(batches)
    bi = 0
    floor = None  # first offset not yet covered by an earlier range
    for r in _sorted_ranges(ranges):
        first, last, dc = r.first_offset, r.last_offset, r.delivery_count
        if floor is not None and first < floor:
            first = floor
            if first > last:
                continue
        floor = last + 1
        expected = first  # next acquired offset not yet delivered or declared a gap
        while bi < nb and batches[bi].last_offset < first:
            bi += 1
        j = bi
        while j < nb and batches[j].base_offset <= last:
            b = batches[j]
            j += 1
            if b.is_control:
                continue
            recs = b.records
            n = len(recs)
            if not n:
                continue
            o0, on = recs[0].offset, recs[n - 1].offset
            if o0 >= expected and on <= last and on - o0 + 1 == n:
                # Contiguous and inside the range: take the batch whole.
                if o0 > expected:
                    gaps.append((expected, o0 - 1))
                records.extend(recs)
                counts.extend([dc] * n)
                expected = on + 1
                continue
            # A batch spanning several ranges: start at the first record we still need.
            start = 0 if o0 >= expected else bisect_left(recs, expected, key=_offset)
            for k in range(start, n):
                rec = recs[k]
                o = rec.offset
                if o < expected:
                    continue
                if o > last:
                    break
                if o > expected:
                    gaps.append((expected, o - 1))
                records.append(rec)
                counts.append(dc)
                expected = o + 1
        if expected <= last:
            gaps.append((expected, last))
    return out


def clip(ranges: Iterable[AcquiredRange], first: int, last: int) -> list[tuple[int, int]]:
    """The acquired offsets inside ``first..last``, as inclusive ranges.

    For a batch that failed its CRC: these are the offsets to REJECT (or RELEASE).
    """
    out = []
    for r in ranges:
        lo, hi = max(first, r.first_offset), min(last, r.last_offset)
        if lo <= hi:
            out.append((lo, hi))
    out.sort()
    return out


def lock_deadline(now: float, acquisition_lock_timeout_ms: int) -> float | None:
    """When the acquisition lock on records fetched at ``now`` ends (None if not given).

    The broker sends ``AcquisitionLockTimeoutMs`` in ShareFetch v1+ (and ShareAcknowledge
    v2+); a value <= 0 means unknown, as in the reference client.
    """
    if acquisition_lock_timeout_ms <= 0:
        return None
    return now + acquisition_lock_timeout_ms / 1000.0
