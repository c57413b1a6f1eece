"""Hostile ShareFetch answers through the consumer's intake: the new lazy one vs the old one.

Generates N mutated partition answers (deterministic from ``--seed``) and feeds each to:

* **new**: :func:`sharecon._share.intake.take_partition`, then
  :meth:`~sharecon._share.intake.PartitionIntake.decode_next` until ``None``, with the
  ledger calls the consumer makes on the results (``add`` with the checked ranges and the
  gaps, ``mark_range`` for every GAP and RELEASE);
* **old**: a faithful copy of ``NodeFetcher._take_data`` from commit fa2e30e (decode every
  batch eagerly, ``filter_acquired``, the old ``_subtract``, ``AckLedger.add``), run
  against today's modules (:func:`old_intake`).

Answers are cheap to make: a pool of valid partition answers (several batches, every
codec, control batches, compacted offsets, batches compaction emptied, and a few batches
whose records carry forged offsets under a valid CRC) is built once; each answer takes
one and mutates its acquired ranges (inverted, negative, huge, overlapping, delivery
counts 0 or negative, shuffled, dropped) and its bytes (bit flips, byte sets,
truncation, inserts, splices from itself and other answers, batches dropped, duplicated
or moved, header fields set, bytes changed under a recomputed CRC).

The old path would allocate a byte per acquired offset in ``AckLedger.add`` (0..5e8
cost 4.3 GiB; 0..2**50 raised MemoryError): an answer naming more than 10**7 offsets
is stopped there and counted as "would allocate > 10 MB" instead of run.

For each path it counts answers that went through, typed :class:`KafkaError`\\ s
(by type), foreign exceptions (by type, with the first few answer indexes to replay), and
answers whose accounting is wrong: an acquired offset not exactly once in delivered
records, dead letters, GAPs or RELEASEs, or a record delivered outside the acquired
ranges. CPU seconds are summed per answer (``time.process_time``).

Run: ``.venv/bin/python benchmarks/fuzz_intake.py [--answers N] [--seed S] [--json PATH]``
(default ``benchmarks/results/fuzz_intake.json``). ``--replay I`` runs answer ``I`` alone
through both paths and prints what happened.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import subprocess
import sys
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import crc32c
from _common import environment, print_table, write_json

from sharecon._share.acquired import AcquiredRange, clip, filter_acquired
from sharecon._share.intake import take_partition
from sharecon._share.ledger import AckLedger
from sharecon._share.session import SessionTag
from sharecon.errors import CorruptRecordError, KafkaError
from sharecon.protocol.compression import Codec, compress
from sharecon.protocol.records import (
    ControlType,
    encode_batch,
    encode_control_batch,
    read_batches,
)
from sharecon.protocol.records import (
    Record as WireRecord,
)
from sharecon.record import Record
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence


Triple = tuple[int, int, int]
Span = tuple[int, int]

TOPIC = "fuzz"
TP = TopicIdPartition(uuid.UUID(int=0xF0221), 0, TOPIC)
TAG = SessionTag(1, 0)
POOL_SIZE = 600
#: The old path stops an answer naming more acquired offsets than this (a byte each).
OLD_ALLOCATION_LIMIT = 10**7
EXAMPLES_KEPT = 3

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1
_BASES = (0, 1, 1000, 2**31, 2**40, 2**62)
_WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"order", b"user", b"42", b"ok", b"\x00\x01"]


# -- the pool of valid answers -----------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def forge_batch(
    base_offset: int, deltas: Sequence[int], *, codec: Codec, last_offset_delta: int
) -> bytes:
    """A batch with a correct CRC whose records carry exactly ``deltas`` as offset deltas
    (any order, any value): a broken producer's or a hostile peer's batch."""
    section = bytearray()
    for d in deltas:
        body = b"\x00" + _zigzag(0) + _zigzag(d) + b"\x01" + _zigzag(1) + b"v\x00"
        section += _zigzag(len(body)) + body
    payload = compress(codec, bytes(section))
    after_crc = (
        struct.pack(">hiqqqhii", int(codec), last_offset_delta, 0, 0, -1, -1, -1, len(deltas))
        + payload
    )
    head = struct.pack(">qiib", base_offset, 49 + len(payload), -1, 2)
    return head + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


def _fix_crc(batch: bytearray) -> None:
    if len(batch) >= 21:
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


class PoolAnswer(NamedTuple):
    """A valid partition answer: its batches (in order) and acquired ranges."""

    parts: tuple[bytes, ...]
    triples: tuple[Triple, ...]


def _valid_ranges(rng: random.Random, first: int, last: int) -> list[Triple]:
    lo = max(0, first - rng.randint(0, 2))
    hi = last + rng.randint(0, 4)
    out: list[Triple] = []
    o = lo
    while o <= hi:
        n = rng.randint(1, 12)
        if rng.random() < 0.75:
            out.append((o, min(o + n - 1, hi), rng.choice((1, 1, 1, 2, 3, 6))))
        o += n
    if not out:
        out.append((lo, hi, 1))
    return out


def build_pool(rng: random.Random, size: int) -> list[PoolAnswer]:
    """``size`` valid answers of 1-6 batches each."""
    pool: list[PoolAnswer] = []
    for _ in range(size):
        base = rng.choice(_BASES)
        nxt = base
        parts: list[bytes] = []
        for _ in range(rng.randint(1, 6)):
            nxt += rng.choice((0, 0, 0, 1, 2))
            kind = rng.choices(("data", "control", "empty", "forged"), (6, 1, 1, 0.3))[0]
            codec = rng.choice(list(Codec))
            if kind == "control":
                ctype = rng.choice((ControlType.COMMIT, ControlType.ABORT))
                parts.append(
                    encode_control_batch(ctype, producer_id=9, producer_epoch=0, base_offset=nxt)
                )
                nxt += 1
            elif kind == "empty":
                lod = rng.randint(0, 4)
                parts.append(encode_batch([], base_offset=nxt, last_offset_delta=lod))
                nxt += lod + 1
            elif kind == "data":
                deltas = [rng.choice((0, 0, 0, 1))]
                for _ in range(rng.randint(0, 19)):
                    deltas.append(deltas[-1] + rng.choice((1, 1, 1, 1, 2, 3)))
                tail = rng.choice((0, 0, 0, 1, 3))
                records = [
                    WireRecord(
                        nxt + d,
                        1_750_000_000_000 + d,
                        b"k%d" % d if rng.random() < 0.5 else None,
                        b" ".join(rng.choices(_WORDS, k=rng.randint(0, 30))),
                        (("h", b"v"),) if rng.random() < 0.1 else (),
                    )
                    for d in deltas
                ]
                parts.append(
                    encode_batch(
                        records, codec=codec, base_offset=nxt, last_offset_delta=deltas[-1] + tail
                    )
                )
                nxt += deltas[-1] + tail + 1
            else:
                lod = rng.randint(0, 8)
                if rng.random() < 0.5:
                    deltas = [rng.randint(-3, lod + 3) for _ in range(rng.randint(1, lod + 1))]
                else:  # in order but repeating one
                    deltas = sorted(rng.randint(0, lod) for _ in range(rng.randint(1, lod + 1)))
                parts.append(forge_batch(nxt, deltas, codec=codec, last_offset_delta=lod))
                nxt += lod + 1
        pool.append(PoolAnswer(tuple(parts), tuple(_valid_ranges(rng, base, nxt - 1))))
    return pool


# -- mutations ---------------------------------------------------------------------------------

_RANGE_OPS = (
    ("invert", 3.0),
    ("negative", 2.0),
    ("huge", 2.0),
    ("big", 0.1),
    ("at_bound", 0.02),
    ("overlap", 3.0),
    ("duplicate", 2.0),
    ("delivery_count", 3.0),
    ("shuffle", 2.0),
    ("drop", 2.0),
    ("far", 2.0),
)
_BYTE_OPS = (
    ("flip", 4.0),
    ("set", 2.0),
    ("truncate", 2.0),
    ("insert", 1.0),
    ("copy", 1.0),
    ("cut", 1.0),
    ("splice", 1.0),
)
_PART_OPS = (("batches", 1.0), ("crc_fixed", 2.0), ("header", 2.0))


def _clamp(value: int, lo: int, hi: int) -> int:
    return min(max(value, lo), hi)


def mutate_ranges(rng: random.Random, triples: Sequence[Triple]) -> list[Triple]:
    """1-2 hostile changes to the acquired ranges (kept to int64/int16, as on the wire)."""
    out = list(triples)
    names = [n for n, _ in _RANGE_OPS]
    weights = [w for _, w in _RANGE_OPS]
    for how in rng.choices(names, weights, k=rng.randint(1, 2)):
        if not out:
            out.append((0, 0, 1))
        i = rng.randrange(len(out))
        f, last, dc = out[i]
        if how == "invert":
            out[i] = (f, f - rng.randint(1, 2**40), dc)
        elif how == "negative":
            out[i] = (rng.choice((-1, -(2**31), _I64_MIN)), last, dc)
        elif how == "huge":
            out[i] = (f, rng.choice((f + 5 * 10**8, f + 2**50, _I64_MAX)), dc)
        elif how == "big":
            out[i] = (f, f + rng.randint(10**4, 10**6), dc)
        elif how == "at_bound":
            out[i] = (f, f + (1 << 22) - 1 + rng.randint(0, 1), dc)
        elif how == "overlap":
            out.append((max(0, last - rng.randint(0, 3)), last + 2, dc))
        elif how == "duplicate":
            out.append(out[i])
        elif how == "delivery_count":
            out[i] = (f, last, rng.choice((0, -1, _I16_MIN, _I16_MAX)))
        elif how == "shuffle":
            rng.shuffle(out)
        elif how == "drop":
            del out[i]
        else:
            start = rng.choice((2**40, 2**62, _I64_MAX - 10))
            out.append((start, start + rng.randint(0, 10), dc))
    if not out:
        out.append((0, 0, 1))
    return [
        (
            _clamp(f, _I64_MIN, _I64_MAX),
            _clamp(last, _I64_MIN, _I64_MAX),
            _clamp(dc, _I16_MIN, _I16_MAX),
        )
        for f, last, dc in out
    ]


def _mutate_parts(rng: random.Random, parts: list[bytearray]) -> None:
    how = rng.choices([n for n, _ in _PART_OPS], [w for _, w in _PART_OPS])[0]
    p = parts[rng.randrange(len(parts))]
    if how == "batches" and len(parts) > 1:
        i = rng.randrange(len(parts))
        what = rng.randrange(3)
        if what == 0:
            del parts[i]
        elif what == 1:
            parts.insert(rng.randint(0, len(parts)), bytearray(parts[i]))
        else:
            parts.insert(rng.randrange(len(parts)), parts.pop(i))
    elif how == "crc_fixed":
        # Plausible but wrong: a byte after the header changed, CRC made to match.
        p[rng.randrange(21, len(p))] = rng.randrange(256)
        _fix_crc(p)
    else:
        # One header field set to an edge value (BaseOffset, BatchLength, Magic,
        # Attributes, LastOffsetDelta, RecordsCount), CRC fixed or not.
        at, fmt, values = rng.choice(
            (
                (0, ">q", (-1, 0, _I64_MAX, 2**62)),
                (8, ">i", (0, 48, 49, 2**31 - 1, -1)),
                (16, ">b", (0, 1, 3)),
                (21, ">h", (0x20, 0x07, 0x05, 0x40, -1)),
                (23, ">i", (-1, 0, 2**31 - 1, 1)),
                (57, ">i", (-1, 0, 2**31 - 1, 10**6)),
            )
        )
        struct.pack_into(fmt, p, at, rng.choice(values))
        if at >= 21 and rng.random() < 0.5:
            _fix_crc(p)


def mutate_bytes(rng: random.Random, data: bytearray, pool: Sequence[PoolAnswer]) -> bytes:
    """1-3 byte-level mutations: flips, sets, truncation, inserts, splices."""
    names = [n for n, _ in _BYTE_OPS]
    weights = [w for _, w in _BYTE_OPS]
    for how in rng.choices(names, weights, k=rng.randint(1, 3)):
        n = len(data)
        if how == "flip" and n:
            data[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif how == "set" and n:
            data[rng.randrange(n)] = rng.randrange(256)
        elif how == "truncate":
            del data[rng.randint(0, n) :]
        elif how == "insert":
            at = rng.randint(0, n)
            data[at:at] = rng.randbytes(rng.randint(1, 70))
        elif how == "copy" and n:
            lo = rng.randrange(n)
            hi = rng.randint(lo, n)
            at = rng.randint(0, n)
            data[at:at] = data[lo:hi]
        elif how == "cut" and n:
            lo = rng.randrange(n)
            del data[lo : rng.randint(lo, n)]
        elif how == "splice":
            other = b"".join(rng.choice(pool).parts)
            lo = rng.randrange(len(other))
            at = rng.randint(0, n)
            data[at:at] = other[lo : rng.randint(lo, len(other))]
    return bytes(data)


class Answer(NamedTuple):
    """One generated answer: acquired ranges, Records bytes, dead-letter limit."""

    triples: list[Triple]
    records: bytes
    dead_letter_limit: int | None


def generate(seed: int, n: int, pool: Sequence[PoolAnswer]) -> Iterator[Answer]:
    """``n`` mutated answers, the same ones for the same seed and pool."""
    rng = random.Random(seed)
    for _ in range(n):
        base = rng.choice(pool)
        triples = list(base.triples)
        if rng.random() < 0.25:
            triples = mutate_ranges(rng, triples)
        r = rng.random()
        if r < 0.12:
            data = b"".join(base.parts)  # intact bytes
        else:
            parts = [bytearray(p) for p in base.parts]
            if r < 0.45:
                _mutate_parts(rng, parts)
            buf = bytearray(b"".join(parts))
            data = mutate_bytes(rng, buf, pool) if r > 0.3 else bytes(buf)
        yield Answer(triples, data, rng.choice((None, None, 3)))


# -- the two paths -----------------------------------------------------------------------------


class Outcome(NamedTuple):
    """Where one answer's acquired offsets went."""

    acquired: list[Span]
    delivered: list[Record]
    gaps: list[Span]
    release: list[Span]


class WouldAllocate(Exception):
    """The old path was about to allocate a byte per offset for more than the limit."""


def new_intake(factory: Any, answer: Answer) -> Outcome:
    """Today's consumer: take_partition, the ledger calls, decode_next until None."""
    ledger = AckLedger()
    intake = take_partition(TP, answer.triples, answer.records)
    spans = [(r.first_offset, r.last_offset) for r in intake.ranges]
    ledger.add(TP, TAG, spans, intake.gaps)
    for lo, hi in intake.release:
        ledger.mark_range(TP, lo, hi, AckType.RELEASE)
    delivered: list[Record] = []
    gaps = list(intake.gaps)
    release = list(intake.release)
    limit = answer.dead_letter_limit
    while (d := intake.decode_next(factory, dead_letter_limit=limit)) is not None:
        for lo, hi in d.gaps:
            ledger.mark_range(TP, lo, hi, AckType.GAP)
        for lo, hi in d.release:
            ledger.mark_range(TP, lo, hi, AckType.RELEASE)
        delivered += d.records
        delivered += d.dead
        gaps += d.gaps
        release += d.release
    return Outcome(spans, delivered, gaps, release)


class _Decoded(NamedTuple):
    base_offset: int
    last_offset: int
    is_control: bool
    records: Sequence[Record]


def _old_subtract(ranges: list[Span], cut: list[Span]) -> list[Span]:
    """fa2e30e's ``_subtract``: ``ranges`` minus the offsets in ``cut``."""
    out: list[Span] = []
    for lo, hi in ranges:
        for c_lo, c_hi in cut:
            if c_hi < lo or c_lo > hi:
                continue
            if c_lo > lo:
                out.append((lo, c_lo - 1))
            lo = c_hi + 1
            if lo > hi:
                break
        if lo <= hi:
            out.append((lo, hi))
    return out


def old_intake(factory: Any, answer: Answer) -> Outcome:
    """fa2e30e's ``NodeFetcher._take_data``, line for line, minus the consumer plumbing
    (``core.note_error`` collects, ``core.report`` discards, the buffer push keeps)."""
    ranges = [AcquiredRange(f, last, dc) for f, last, dc in answer.triples]
    lo = min(r.first_offset for r in ranges)
    hi = max(r.last_offset for r in ranges)
    release: list[Span] = []
    decoded: list[_Decoded] = []
    noted: list[CorruptRecordError] = []
    raw = answer.records or b""
    try:
        split = read_batches(raw)
    except CorruptRecordError as exc:
        noted.append(CorruptRecordError(f"fuzz-0: {exc}"))
        split = None
    if split is None:
        release = clip(ranges, lo, hi)
    else:
        for b in split.batches:
            b_last = b.base_offset + b.last_offset_delta
            if b_last < lo or b.base_offset > hi:
                continue
            if b.is_control:
                decoded.append(_Decoded(b.base_offset, b_last, True, ()))
                continue
            try:
                recs = b.records(factory)
            except CorruptRecordError as exc:
                noted.append(
                    CorruptRecordError(
                        f"fuzz-0: {exc}", base_offset=b.base_offset, last_offset=b_last
                    )
                )
                release.extend(clip(ranges, b.base_offset, b_last))
                continue
            decoded.append(_Decoded(b.base_offset, b_last, False, recs))
        if split.truncated:
            end = (
                split.batches[-1].base_offset + split.batches[-1].last_offset_delta
                if split.batches
                else lo - 1
            )
            if end < hi:
                release.extend(clip(ranges, end + 1, hi))
    release.sort()
    filtered = filter_acquired(ranges, decoded)
    gaps = _old_subtract(filtered.gaps, release) if release else filtered.gaps
    spans = [(r.first_offset, r.last_offset) for r in ranges]
    if sum(max(0, b - a + 1) for a, b in spans) > OLD_ALLOCATION_LIMIT:
        raise WouldAllocate
    ledger = AckLedger()
    ledger.add(TP, TAG, spans, gaps)
    for r_lo, r_hi in release:
        ledger.mark_range(TP, r_lo, r_hi, AckType.RELEASE)
    records = filtered.records
    if any(r.delivery_count != 1 for r in ranges):
        for rec, dc in zip(records, filtered.delivery_counts, strict=True):
            rec.delivery_count = dc
    limit = answer.dead_letter_limit
    dead: list[Record] = []
    if limit is not None and records and any(r.delivery_count > limit for r in ranges):
        keep: list[Record] = []
        for rec in records:
            (dead if rec.delivery_count > limit else keep).append(rec)
        records = keep
    return Outcome(spans, records + dead, gaps, release)


def accounting_error(out: Outcome) -> str | None:
    """Why ``out`` does not put every acquired offset in exactly one place (None if it does)."""
    acquired: list[Span] = []
    for lo, hi in sorted(out.acquired):
        if acquired and lo <= acquired[-1][1] + 1:
            acquired[-1] = (acquired[-1][0], max(acquired[-1][1], hi))
        else:
            acquired.append((lo, hi))
    spans = sorted(out.gaps + out.release + [(r.offset, r.offset) for r in out.delivered])
    merged: list[Span] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            return "an offset in two places"
        if merged and lo == merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    if merged != acquired:
        return "an acquired offset missing, or one not acquired delivered"
    return None


# -- running -----------------------------------------------------------------------------------


def revision() -> str | None:
    """The commit the checkout is at (the code under test moves; results should say)."""
    proc = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None


@dataclass
class Tally:
    """What one path did with the answers."""

    answers: int = 0
    ok: int = 0
    typed: Counter[str] = field(default_factory=Counter)
    foreign: Counter[str] = field(default_factory=Counter)
    would_allocate: int = 0
    bad_accounting: Counter[str] = field(default_factory=Counter)
    records: int = 0
    seconds: float = 0.0
    examples: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The tally as plain JSON data."""
        return {
            "answers": self.answers,
            "ok": self.ok,
            "typed_errors": sum(self.typed.values()),
            "typed_by_type": dict(self.typed),
            "foreign_exceptions": sum(self.foreign.values()),
            "foreign_by_type": dict(self.foreign),
            "would_allocate_over_10mb": self.would_allocate,
            "bad_accounting": sum(self.bad_accounting.values()),
            "bad_accounting_by_reason": dict(self.bad_accounting),
            "records_delivered": self.records,
            "cpu_seconds": self.seconds,
            "us_per_answer": self.seconds / self.answers * 1e6 if self.answers else 0.0,
            "example_answers": self.examples,
        }


def feed(
    tally: Tally, path: Callable[[Any, Answer], Outcome], factory: Any, answer: Answer, i: int
) -> None:
    """Run ``answer`` (number ``i``) through ``path`` and count what happened."""
    tally.answers += 1
    clock = time.process_time
    start = clock()
    try:
        out = path(factory, answer)
    except WouldAllocate:
        tally.seconds += clock() - start
        tally.would_allocate += 1
        return
    except KafkaError as exc:
        tally.seconds += clock() - start
        tally.typed[type(exc).__name__] += 1
        return
    except Exception as exc:
        tally.seconds += clock() - start
        name = type(exc).__name__
        tally.foreign[name] += 1
        kept = tally.examples.setdefault(name, [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(i)
        return
    tally.seconds += clock() - start
    tally.ok += 1
    tally.records += len(out.delivered)
    why = accounting_error(out)
    if why is not None:
        tally.bad_accounting[why] += 1
        kept = tally.examples.setdefault(f"accounting: {why}", [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(i)


PATHS: dict[str, Callable[[Any, Answer], Outcome]] = {"new": new_intake, "old": old_intake}


def replay(seed: int, index: int, pool: Sequence[PoolAnswer], factory: Any) -> None:
    """Print answer ``index`` and what each path made of it."""
    for i, answer in enumerate(generate(seed, index + 1, pool)):
        if i < index:
            continue
        print(f"answer {index}: triples={answer.triples} dlq={answer.dead_letter_limit}")
        print(f"records ({len(answer.records)} bytes): {answer.records.hex()}")
        for name, path in PATHS.items():
            try:
                out = path(factory, answer)
            except Exception:
                print(f"{name}: raised\n{traceback.format_exc()}")
                continue
            print(
                f"{name}: delivered={sorted(r.offset for r in out.delivered)} gaps={out.gaps} "
                f"release={out.release} accounting={accounting_error(out) or 'ok'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=1_000_000, help="answers to generate")
    parser.add_argument("--seed", type=int, default=932, help="seed for the pool and mutations")
    parser.add_argument("--json", type=Path, default=None, help="where to write the results")
    parser.add_argument("--replay", type=int, default=None, help="show one answer and stop")
    args = parser.parse_args()

    pool = build_pool(random.Random(args.seed), POOL_SIZE)
    factory = partial(Record, TOPIC, TP.partition, TP, None, None)
    if args.replay is not None:
        replay(args.seed, args.replay, pool, factory)
        return
    tallies = {name: Tally() for name in PATHS}
    wall = time.perf_counter()
    step = max(args.answers // 10, 1)
    for i, answer in enumerate(generate(args.seed, args.answers, pool)):
        for name, path in PATHS.items():
            feed(tallies[name], path, factory, answer, i)
        if (i + 1) % step == 0:
            print(
                f"  {i + 1:,} answers, {time.perf_counter() - wall:.0f} s; foreign: "
                + ", ".join(f"{n} {sum(t.foreign.values())}" for n, t in tallies.items()),
                file=sys.stderr,
            )
    wall = time.perf_counter() - wall

    rows = []
    for name, t in tallies.items():
        rows.append(
            [
                name,
                f"{t.answers:,}",
                f"{t.ok:,}",
                f"{sum(t.typed.values()):,}",
                f"{sum(t.foreign.values()):,}",
                f"{t.would_allocate:,}" if name == "old" else "n/a",
                f"{sum(t.bad_accounting.values()):,}",
                f"{t.seconds:.1f}",
                f"{t.seconds / max(t.answers, 1) * 1e6:.1f}",
            ]
        )
    print()
    print_table(
        [
            "intake",
            "answers",
            "ok",
            "typed",
            "foreign",
            "would alloc >10MB",
            "bad accounting",
            "CPU s",
            "us/answer",
        ],
        rows,
        title=f"Mutated ShareFetch partition answers (seed {args.seed}, pool {POOL_SIZE})",
    )
    detail = []
    for name, t in tallies.items():
        for kind, counter in (
            ("typed", t.typed),
            ("foreign", t.foreign),
            ("accounting", t.bad_accounting),
        ):
            for what, count in counter.most_common():
                replay_at = t.examples.get(what if kind != "accounting" else f"accounting: {what}")
                detail.append([name, kind, what, f"{count:,}", str(replay_at or "")])
    if detail:
        print_table(["intake", "kind", "type", "count", "replay with --replay"], detail)
    print(f"wall time {wall:.0f} s")

    payload = {
        "benchmark": "fuzz_intake",
        "environment": {
            **environment(["zstandard", "lz4", "python-snappy", "crc32c"]),
            "timer": "time.process_time, summed per answer",
        },
        "commit": revision(),
        "answers": args.answers,
        "seed": args.seed,
        "pool_size": POOL_SIZE,
        "old_allocation_limit_offsets": OLD_ALLOCATION_LIMIT,
        "wall_seconds": wall,
        "paths": {name: t.to_json() for name, t in tallies.items()},
    }
    if args.json is None:
        out = write_json("fuzz_intake", payload)
    else:
        out = args.json
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
