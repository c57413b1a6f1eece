"""Intake: one partition's part of a ShareFetch answer, checked, split, decoded lazily.

Rules of this module:

1. The acquired ranges are checked before anything is allocated for them: every range
   has ``0 <= first <= last``, a delivery count of at least 1, no two ranges overlap, and
   together they hold at most ``max_acquired`` offsets. An answer that breaks this is
   refused whole with :class:`InvalidAnswer`: nothing of it is delivered or
   acknowledged (we cannot trust which offsets it names), and the caller resets the
   share session; the broker gets the records back when their locks end.
2. The Records field is split by batch header only (no CRC, no decompression). If it
   cannot be split, or its batches are out of order, every acquired offset is RELEASED
   (redelivered later): nothing is lost and nothing is marked as a gap by mistake. A
   batch cut short by the broker's byte limit releases the acquired offsets after the
   last complete batch.
3. Acquired offsets that no complete batch covers are GAPs, acknowledged at once.
4. Batches are decoded one at a time, when the application needs records
   (:meth:`PartitionIntake.decode_next`), so memory follows what the application holds,
   not the decompressed size of the whole answer. Only a batch's acquired records are
   built: the others are skipped unbuilt and decoding stops after the last acquired
   offset, so one acquired record of a million-record batch costs about one record (a
   zstd batch is then decompressed as a stream, only as far as needed, keeping a window
   of it; a batch read again starts from record positions the last read marked). A
   batch that fails its CRC or will not decompress releases its acquired offsets;
   acquired offsets inside a batch with no record (compaction, control batches) are GAPs.
   Asked for ``limit`` records, :meth:`PartitionIntake.decode_next` builds a large batch
   a slice at a time (decompressed once, its records built as each slice is asked for),
   so a consumer holds a slice's records alive, not a whole batch's: the gaps and
   delivery counts of each slice are those of the offsets it covers, and the batch's
   acquired offsets are counted down slice by slice. A malformed record (a CRC-valid
   batch written wrong) found in a later slice releases the acquired offsets from that
   slice on: the slices before it were built whole and were delivered.
5. Each record gets its range's delivery count; records past the dead-letter limit are
   split off to be routed instead of delivered.
6. No I/O, no clock, no logging: errors are returned as data.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from sharecon.errors import CorruptRecordError, RemoteProtocolError
from sharecon.protocol.compression import DEFAULT_MAX_UNCOMPRESSED
from sharecon.protocol.records import read_batches

from .acquired import AcquiredRange, clip, filter_acquired

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sharecon.protocol.records import BatchReader, Headers, RecordBatch
    from sharecon.types import TopicIdPartition

__all__ = [
    "DEFAULT_MAX_ACQUIRED",
    "Decoded",
    "Deliverable",
    "InvalidAnswer",
    "PartitionIntake",
    "check_ranges",
    "take_partition",
]

#: The most acquired offsets one partition answer may name (the ledger keeps a byte per
#: offset, so this bounds what a hostile or broken answer can make us allocate: 4 MiB).
DEFAULT_MAX_ACQUIRED = 1 << 22


class Deliverable(Protocol):
    """What intake needs of a record: its offset, and a delivery count it can set."""

    offset: int
    delivery_count: int


R = TypeVar("R", bound=Deliverable)

Span = tuple[int, int]


class InvalidAnswer(RemoteProtocolError):
    """A partition answer whose acquired ranges cannot be trusted (rule 1)."""


# Plain classes, not dataclasses: a generic dataclass fails to import once compiled by
# mypyc (as :class:`.acquired.Filtered`).
class _Batch(Generic[R]):
    __slots__ = ("base_offset", "is_control", "last_offset", "records")

    def __init__(
        self, base_offset: int, last_offset: int, is_control: bool, records: Sequence[R]
    ) -> None:
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.is_control = is_control
        self.records = records


class Decoded(Generic[R]):
    """What decoding one batch gave (rule 4).

    :ivar records: records to deliver, in offset order, delivery counts set.
    :ivar dead: records past the dead-letter limit (rule 5).
    :ivar gaps: acquired offsets without a record, to acknowledge as GAP.
    :ivar release: acquired offsets of a corrupt batch, to RELEASE.
    :ivar error: why the batch was released, if it was.
    :ivar nbytes: bytes the decoded records section took (decompressed).
    :ivar wire: bytes the batch took in the answer.
    """

    __slots__ = ("dead", "error", "gaps", "nbytes", "records", "release", "wire")

    def __init__(
        self,
        records: list[R] | None = None,
        dead: list[R] | None = None,
        gaps: list[Span] | None = None,
        release: list[Span] | None = None,
        error: CorruptRecordError | None = None,
        nbytes: int = 0,
        wire: int = 0,
    ) -> None:
        self.records: list[R] = [] if records is None else records
        self.dead: list[R] = [] if dead is None else dead
        self.gaps: list[Span] = [] if gaps is None else gaps
        self.release: list[Span] = [] if release is None else release
        self.error = error
        self.nbytes = nbytes
        self.wire = wire

    def __repr__(self) -> str:
        return (
            f"Decoded(records={self.records!r}, dead={self.dead!r}, gaps={self.gaps!r}, "
            f"release={self.release!r}, error={self.error!r}, nbytes={self.nbytes}, "
            f"wire={self.wire})"
        )


def check_ranges(
    triples: Sequence[tuple[int, int, int]], *, max_acquired: int = DEFAULT_MAX_ACQUIRED
) -> list[AcquiredRange]:
    """The acquired ranges ``(first, last, delivery_count)``, sorted and checked (rule 1).

    :raises InvalidAnswer: naming the first bad range.
    """
    ranges = [AcquiredRange(f, last, dc) for f, last, dc in triples]
    for i in range(len(ranges) - 1):
        if ranges[i].first_offset > ranges[i + 1].first_offset:
            ranges.sort(key=_first_offset)
            break
    total = 0
    prev_last = -1
    for r in ranges:
        if r.first_offset < 0 or r.last_offset < r.first_offset:
            raise InvalidAnswer(f"acquired range {r.first_offset}..{r.last_offset} is invalid")
        if r.delivery_count < 1:
            raise InvalidAnswer(
                f"acquired range {r.first_offset}..{r.last_offset} has delivery count "
                f"{r.delivery_count}"
            )
        if r.first_offset <= prev_last:
            raise InvalidAnswer(
                f"acquired range {r.first_offset}..{r.last_offset} overlaps the one before it"
            )
        prev_last = r.last_offset
        total += r.last_offset - r.first_offset + 1
        if total > max_acquired:
            raise InvalidAnswer(
                f"the acquired ranges name more than {max_acquired} offsets (up to {r.last_offset})"
            )
    return ranges


def _first_offset(r: AcquiredRange) -> int:
    return r.first_offset


def _subtract(ranges: list[Span], cut: list[Span]) -> list[Span]:
    """``ranges`` minus the offsets in ``cut`` (both sorted and disjoint, inclusive)."""
    out: list[Span] = []
    j = 0
    for lo, hi in ranges:
        while j < len(cut) and cut[j][1] < lo:
            j += 1
        k = j
        while lo <= hi and k < len(cut) and cut[k][0] <= hi:
            c_lo, c_hi = cut[k]
            if c_lo > lo:
                out.append((lo, c_lo - 1))
            lo = max(lo, c_hi + 1)
            k += 1
        if lo <= hi:
            out.append((lo, hi))
    return out


def _merge(spans: list[Span]) -> list[Span]:
    spans.sort()
    out: list[Span] = []
    for lo, hi in spans:
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


class PartitionIntake:
    """The acquired part of one partition's answer, waiting to be decoded (rules 2-5).

    Made by :func:`take_partition`. ``gaps``, ``release`` and ``errors`` are what the
    split already found; :meth:`decode_next` decodes the next batch.
    """

    __slots__ = (
        "_batches",
        "_next",
        "_open",
        "_open_last",
        "_open_lo",
        "_open_sub",
        "_starts",
        "acquired",
        "errors",
        "gaps",
        "ranges",
        "release",
        "tp",
        "wire",
    )

    def __init__(
        self,
        tp: TopicIdPartition,
        ranges: list[AcquiredRange],
        batches: list[RecordBatch],
        gaps: list[Span],
        release: list[Span],
        errors: list[CorruptRecordError],
    ) -> None:
        self.tp = tp
        self.ranges = ranges
        self._starts = [r.first_offset for r in ranges]
        self._batches = batches
        self._next = 0
        #: The batch being decoded a slice at a time (rule 4): its reader, the acquired
        #: ranges inside it, its first offset not yet covered by a slice, its last offset.
        self._open: BatchReader[Any] | None = None
        self._open_sub: list[AcquiredRange] = []
        self._open_lo = 0
        self._open_last = 0
        self.gaps = gaps
        self.release = release
        self.errors = errors
        acquired = wire = 0
        for b in batches:
            acquired += self._acquired_in(b.base_offset, b.last_offset)
            wire += b.size
        #: Acquired offsets not yet decoded (an upper bound on the records to come).
        self.acquired = acquired
        #: Answer bytes of the batches not yet decoded.
        self.wire = wire

    @property
    def exhausted(self) -> bool:
        """Whether every batch has been decoded."""
        return self._next >= len(self._batches) and self._open is None

    def acquires(self, offset: int) -> bool:
        """Whether ``offset`` is in one of this answer's acquired ranges."""
        i = bisect_right(self._starts, offset) - 1
        return i >= 0 and offset <= self.ranges[i].last_offset

    def next_batch(self) -> RecordBatch | None:
        """The batch :meth:`decode_next` decodes next (``None`` when exhausted), so a
        caller can build that batch's record factory from its header first. While a batch
        is being decoded in slices, that batch (its reader keeps the factory it was given)."""
        if self._open is not None:
            return self._batches[self._next - 1]
        return None if self.exhausted else self._batches[self._next]

    def pending_span(self) -> Span | None:
        """The offsets not yet decoded: of the batch being decoded in slices from its next
        slice on, then of the batches after it (``None`` when exhausted)."""
        if self._open is not None:
            return self._open_lo, self._batches[-1].last_offset
        if self.exhausted:
            return None
        return self._batches[self._next].base_offset, self._batches[-1].last_offset

    def _clipped(self, first: int, last: int) -> list[AcquiredRange]:
        ranges = self.ranges
        if len(ranges) == 1:
            # The usual answer: one range per partition, often inside the batch.
            r = ranges[0]
            if first <= r.first_offset and r.last_offset <= last:
                return [r]
        i = max(bisect_right(self._starts, first) - 1, 0)
        out: list[AcquiredRange] = []
        while i < len(ranges) and ranges[i].first_offset <= last:
            r = ranges[i]
            lo, hi = max(first, r.first_offset), min(last, r.last_offset)
            if lo <= hi:
                out.append(
                    r
                    if (lo, hi) == (r.first_offset, r.last_offset)
                    else AcquiredRange(lo, hi, r.delivery_count)
                )
            i += 1
        return out

    def _acquired_in(self, first: int, last: int) -> int:
        n = 0
        for r in self._clipped(first, last):
            n += r.last_offset - r.first_offset + 1
        return n

    def decode_next(
        self,
        factory: Callable[[int, int, bytes | None, bytes | None, Headers], R],
        *,
        dead_letter_limit: int | None = None,
        max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
        limit: int | None = None,
    ) -> Decoded[R] | None:
        """Decode the next batch, or with ``limit`` at most ``limit`` records of it (a
        slice; the next call continues the same batch), rule 4; ``None`` once every batch
        is decoded. ``factory`` builds the records of a batch started here; a batch
        being decoded in slices keeps the one it was started with."""
        if self._open is not None:
            return self._slice(Decoded(), limit, dead_letter_limit)
        if self.exhausted:
            return None
        b = self._batches[self._next]
        self._next += 1
        first, last = b.base_offset, b.last_offset
        sub = self._clipped(first, last)
        self.wire -= b.size
        out: Decoded[R] = Decoded(wire=b.size)
        if b.is_control:
            self.acquired -= _count(sub)
            out.gaps = [(r.first_offset, r.last_offset) for r in sub]
            return out
        try:
            # The CRC was checked when the answer was split (take_partition). Only the
            # acquired records are built (rule 4): the rest of the batch is skipped.
            reader = b.reader(
                factory,
                max_uncompressed,
                False,
                [(r.first_offset, r.last_offset) for r in sub],
            )
        except CorruptRecordError as exc:
            self.acquired -= _count(sub)
            out.error = exc
            out.release = [(r.first_offset, r.last_offset) for r in sub]
            return out
        self._open = reader
        self._open_sub = sub
        self._open_lo = first
        self._open_last = last
        return self._slice(out, limit, dead_letter_limit)

    def _slice(
        self, out: Decoded[R], limit: int | None, dead_letter_limit: int | None
    ) -> Decoded[R]:
        """The open batch's next records (all that are left without ``limit``)."""
        reader = self._open
        assert reader is not None
        b = self._batches[self._next - 1]
        lo, last = self._open_lo, self._open_last
        try:
            recs: list[R] = reader.take(reader.count if limit is None else limit)
            if recs and recs[-1].offset > last:
                raise b._error(
                    f"record offset {recs[-1].offset} is past the batch's last offset {last}"
                )
        except CorruptRecordError as exc:
            part = _clip_ranges(self._open_sub, lo, last)
            self._close()
            self.acquired -= _count(part)
            out.error = exc
            out.release = [(r.first_offset, r.last_offset) for r in part]
            return out
        if reader.done:
            hi = last
            self._close()
        else:
            hi = recs[-1].offset
            self._open_lo = hi + 1
        part = (
            _clip_ranges(self._open_sub, lo, hi)
            if lo != b.base_offset or hi != last
            else self._open_sub
        )
        self.acquired -= _count(part)
        out.nbytes = reader.taken_bytes
        n = len(recs)
        if len(part) == 1 and n:
            # One range, and the records it got are contiguous (the usual batch): what
            # filter_acquired does with one range and one batch, without its walk.
            p = part[0]
            p_lo, p_hi = p.first_offset, p.last_offset
            o0, on = recs[0].offset, recs[n - 1].offset
            if o0 >= p_lo and on <= p_hi and on - o0 + 1 == n:
                if o0 > p_lo:
                    out.gaps.append((p_lo, o0 - 1))
                if on < p_hi:
                    out.gaps.append((on + 1, p_hi))
                dc = p.delivery_count
                if dc != 1:
                    for rec in recs:
                        rec.delivery_count = dc
                    if dead_letter_limit is not None and dc > dead_letter_limit:
                        out.dead = recs
                        return out
                out.records = recs
                return out
        filtered = filter_acquired(part, [_Batch(lo, hi, False, recs)])
        out.gaps = filtered.gaps
        records = filtered.records
        if any(r.delivery_count != 1 for r in part):
            for rec, dc in zip(records, filtered.delivery_counts, strict=True):
                rec.delivery_count = dc
            if dead_letter_limit is not None and any(
                r.delivery_count > dead_letter_limit for r in part
            ):
                keep: list[R] = []
                for rec, dc in zip(records, filtered.delivery_counts, strict=True):
                    (out.dead if dc > dead_letter_limit else keep).append(rec)
                records = keep
        out.records = records
        return out

    def _close(self) -> None:
        self._open = None


def _count(ranges: list[AcquiredRange]) -> int:
    return sum(r.last_offset - r.first_offset + 1 for r in ranges)


def _clip_ranges(ranges: list[AcquiredRange], first: int, last: int) -> list[AcquiredRange]:
    """``ranges`` (sorted, disjoint) cut to ``first .. last``."""
    out: list[AcquiredRange] = []
    for r in ranges:
        if r.last_offset < first or r.first_offset > last:
            continue
        lo, hi = max(first, r.first_offset), min(last, r.last_offset)
        out.append(
            r
            if (lo, hi) == (r.first_offset, r.last_offset)
            else AcquiredRange(lo, hi, r.delivery_count)
        )
    return out


def take_partition(
    tp: TopicIdPartition,
    acquired: Sequence[tuple[int, int, int]],
    records: bytes | bytearray | memoryview | None,
    *,
    max_acquired: int = DEFAULT_MAX_ACQUIRED,
) -> PartitionIntake:
    """Check and split one partition's answer (rules 1-3); nothing is decoded yet.

    :param acquired: the AcquiredRecords entries as ``(first, last, delivery_count)``.
    :param records: the partition's Records field.
    :raises InvalidAnswer: the acquired ranges cannot be trusted (rule 1).
    """
    ranges = check_ranges(acquired, max_acquired=max_acquired)
    if not ranges:
        return PartitionIntake(tp, ranges, [], [], [], [])
    lo, hi = ranges[0].first_offset, ranges[-1].last_offset
    spans = [(r.first_offset, r.last_offset) for r in ranges]
    errors: list[CorruptRecordError] = []
    try:
        split = read_batches(records or b"")
    except CorruptRecordError as exc:
        errors.append(exc)
        return PartitionIntake(tp, ranges, [], [], spans, errors)
    batches = split.batches
    good: list[RecordBatch] = []
    zones: list[Span] = []  # offsets CRC-failed batches may have held (rule 2)
    bad_run = False
    for b in batches:
        try:
            # Checked here, not at decoding: a header that fails its CRC cannot be trusted
            # to say which offsets the batch covers, and a wrong span would turn acquired
            # records into gaps.
            b.verify_crc()
        except CorruptRecordError as exc:
            errors.append(exc)
            bad_run = True
            continue
        if (good and b.base_offset <= good[-1].last_offset) or b.last_offset < b.base_offset:
            errors.append(
                CorruptRecordError(
                    f"record batch at base offset {b.base_offset} (last {b.last_offset}) is out "
                    "of order or inverted",
                    base_offset=b.base_offset,
                )
            )
            return PartitionIntake(tp, ranges, [], [], spans, errors)
        if bad_run:
            # A run of bad batches held, at most, what lies between the good ones around it.
            z_lo = good[-1].last_offset + 1 if good else lo
            if z_lo <= b.base_offset - 1:
                zones.append((z_lo, b.base_offset - 1))
            bad_run = False
        good.append(b)
    if bad_run:
        zones.append((good[-1].last_offset + 1 if good else lo, hi))
    if split.truncated and not bad_run:  # (after a bad run, its zone already reaches hi)
        end = good[-1].last_offset if good else lo - 1
        if end < hi:
            zones.append((end + 1, hi))
    release = _merge([s for z_lo, z_hi in zones for s in clip(ranges, z_lo, z_hi)])
    kept = [b for b in good if b.last_offset >= lo and b.base_offset <= hi]
    covered = _merge([(b.base_offset, b.last_offset) for b in kept] + release)
    gaps = _subtract(spans, covered)
    return PartitionIntake(tp, ranges, kept, gaps, release, errors)
