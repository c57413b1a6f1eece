"""Acknowledgement batches: the wire shape of acknowledgements, and how to build them.

Rules of this module:

1. Encoding follows the reference client (``Acknowledgements.getAcknowledgementBatches``):
   sort by offset and split into contiguous ranges; inside a range, a run of MORE than
   :data:`MAX_MIXED_RUN` identical types becomes a batch of its own; the stretches between
   such runs are batches too. A batch whose types are all the same carries a one-element
   types tuple; any other batch carries one type per offset.
2. Batches come out sorted by offset and never overlap (the broker rejects anything else).
3. The working unit is a *run* ``(first, last, type)``, never a per-offset object, so the
   common case (hundreds of contiguous ACCEPTs) costs one run and one batch.
4. No I/O, no clock; pure functions over plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from sharecon.types import AckType, TopicIdPartition

__all__ = [
    "MAX_MIXED_RUN",
    "AckBatch",
    "Run",
    "batches_from_runs",
    "coalesce",
    "describe",
    "expand",
]

#: A run of identical types longer than this gets a batch of its own (the reference
#: client's MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE).
MAX_MIXED_RUN = 10

#: ``(first_offset, last_offset, ack type value)``, inclusive; the unit of work here.
Run = tuple[int, int, int]

# Index by wire value; AckType values are exactly 0..4.
_TYPES: tuple[AckType, ...] = tuple(AckType)
_ONE: tuple[tuple[AckType], ...] = tuple((t,) for t in AckType)


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One AcknowledgementBatch: offsets ``first_offset..last_offset`` (inclusive).

    ``types`` holds one element when every offset has the same type, else exactly one
    type per offset, in offset order.
    """

    first_offset: int
    last_offset: int
    types: tuple[AckType, ...]

    def __post_init__(self) -> None:
        n = self.last_offset - self.first_offset + 1
        if n < 1:
            raise ValueError(
                f"AckBatch last_offset {self.last_offset} < first_offset {self.first_offset}"
            )
        if len(self.types) != 1 and len(self.types) != n:
            raise ValueError(
                f"AckBatch {self.first_offset}..{self.last_offset} needs 1 or {n} types, "
                f"got {len(self.types)}"
            )

    @property
    def count(self) -> int:
        """How many offsets the batch covers."""
        return self.last_offset - self.first_offset + 1

    @property
    def uniform(self) -> bool:
        """Whether one type applies to every offset of the batch."""
        return len(self.types) == 1

    def type_at(self, offset: int) -> AckType:
        """The type acknowledged for ``offset`` (which must lie inside the batch)."""
        if not self.first_offset <= offset <= self.last_offset:
            raise ValueError(
                f"offset {offset} outside AckBatch {self.first_offset}..{self.last_offset}"
            )
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]

    def runs(self) -> Iterator[Run]:
        """The batch as runs of identical types, in offset order."""
        types = self.types
        if len(types) == 1:
            yield (self.first_offset, self.last_offset, int(types[0]))
            return
        start = 0
        for i in range(1, len(types) + 1):
            if i == len(types) or types[i] is not types[start]:
                yield (self.first_offset + start, self.first_offset + i - 1, int(types[start]))
                start = i


def expand(batches: Iterable[AckBatch]) -> Iterator[tuple[int, AckType]]:
    """Every ``(offset, type)`` the batches stand for, in order (for tests and reports)."""
    for b in batches:
        if len(b.types) == 1:
            t = b.types[0]
            for o in range(b.first_offset, b.last_offset + 1):
                yield o, t
        else:
            yield from zip(range(b.first_offset, b.last_offset + 1), b.types, strict=True)


def batches_from_runs(runs: Iterable[Run]) -> list[AckBatch]:
    """Encode runs sorted by offset (non-overlapping) into wire batches (rule 1).

    Adjacent runs of the same type are merged first, so callers may pass runs split at
    arbitrary points (for example one per delivery).

    :raises ValueError: if the runs are unsorted or overlap.
    """
    out: list[AckBatch] = []
    seg: list[Run] = []  # short runs forming the current mixed stretch (contiguous)

    def flush() -> None:
        if not seg:
            return
        if len(seg) == 1:
            f, lst, t = seg[0]
            out.append(AckBatch(f, lst, _ONE[t]))
        else:
            types: list[AckType] = []
            for f, lst, t in seg:
                types += _ONE[t] * (lst - f + 1)
            out.append(AckBatch(seg[0][0], seg[-1][1], tuple(types)))
        seg.clear()

    def emit(f: int, lst: int, t: int) -> None:
        if seg and seg[-1][1] + 1 != f:
            flush()
        if lst - f + 1 > MAX_MIXED_RUN:
            flush()
            out.append(AckBatch(f, lst, _ONE[t]))
        else:
            seg.append((f, lst, t))

    cur_f = cur_l = cur_t = -1
    have = False
    for f, lst, t in runs:
        if have:
            if f <= cur_l:
                raise ValueError(f"acknowledgement runs overlap or are unsorted at offset {f}")
            if f == cur_l + 1 and t == cur_t:
                cur_l = lst
                continue
            emit(cur_f, cur_l, cur_t)
        if lst < f:
            raise ValueError(f"acknowledgement run {f}..{lst} is inverted")
        if not 0 <= t < len(_TYPES):
            raise ValueError(f"acknowledge type {t} at offset {f} is not 0..{len(_TYPES) - 1}")
        cur_f, cur_l, cur_t, have = f, lst, t, True
    if have:
        emit(cur_f, cur_l, cur_t)
    flush()
    return out


def coalesce(acks: Mapping[int, AckType] | Iterable[tuple[int, AckType]]) -> list[AckBatch]:
    """Encode per-offset acknowledgements into wire batches (rule 1).

    :param acks: ``{offset: type}`` or ``(offset, type)`` pairs in any order; for a
        repeated offset the last pair wins.
    :returns: batches sorted by offset, non-overlapping, covering exactly the input.
    """
    items = acks.items() if isinstance(acks, Mapping) else dict(acks).items()
    runs: list[Run] = []
    cur_f = cur_l = cur_t = -1
    have = False
    for o, t in sorted(items):
        ti = int(t)
        if have and o == cur_l + 1 and ti == cur_t:
            cur_l = o
            continue
        if have:
            runs.append((cur_f, cur_l, cur_t))
        cur_f = cur_l = o
        cur_t = ti
        have = True
    if have:
        runs.append((cur_f, cur_l, cur_t))
    return batches_from_runs(runs)


def describe(
    acks: Mapping[TopicIdPartition, Iterable[AckBatch]],
    codes: Mapping[TopicIdPartition, int] | None = None,
) -> str:
    """A short text of ``acks`` per partition (``orders-1 5-9:ACCEPT``), with each
    partition's answer code when ``codes`` are given: for DEBUG logs, never per record."""
    parts = []
    for tp, batches in acks.items():
        ranges = ",".join(
            f"{b.first_offset}-{b.last_offset}:"
            + (b.types[0].name if len(b.types) == 1 else "MIXED")
            for b in batches
        )
        name = f"{tp.topic or tp.topic_id}-{tp.partition}"
        code = "" if codes is None else f" -> {codes.get(tp, 'missing')}"
        parts.append(f"{name} {ranges}{code}")
    return "; ".join(parts) or "none"
