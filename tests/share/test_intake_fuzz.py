"""Hypothesis: ShareFetch partition answers through intake, valid, hostile and mutated.

Answers are built like a broker's: several record batches (every codec, control batches,
compacted offsets, batches emptied by compaction) and acquired ranges over them. Then the
ranges are made hostile (inverted, negative, huge, overlapping, bad delivery counts) and
the bytes mutated (bit flips, truncation, splices, batches dropped or reordered, bytes
changed under a recomputed CRC). Invariants:

* :func:`take_partition` raises :class:`InvalidAnswer` exactly when the ranges break
  rule 1, and nothing else; :meth:`PartitionIntake.decode_next` never raises (errors are
  data). Nothing but :class:`KafkaError` ever escapes.
* An accepted answer names at most ``max_acquired`` offsets (the ledger's byte per
  offset is bounded), and intake itself allocates per range and per batch, never per
  acquired offset.
* Every acquired offset ends up exactly once in delivered records, dead letters, GAPs
  or RELEASEs; records lie inside the acquired ranges and carry their range's delivery
  count; dead letters are exactly the records past the limit.
* The same holds for a whole ShareFetchResponse frame, mutated: it decodes or raises
  RemoteProtocolError, and each partition then goes through intake as above.

Record offsets inside a batch are covered by its CRC, so only a broken producer or a
hostile peer sends them out of order; those answers are checked for the first invariant
always, and for the accounting in their own test.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from bisect import bisect_right
from typing import NamedTuple

import crc32c
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from sharecon._share.intake import (
    DEFAULT_MAX_ACQUIRED,
    Decoded,
    InvalidAnswer,
    PartitionIntake,
    take_partition,
)
from sharecon.errors import KafkaError, RemoteProtocolError
from sharecon.protocol import ShareFetchResponse, decode_response, encode_response
from sharecon.protocol.compression import Codec, compress
from sharecon.protocol.messages.share_fetch import (
    AcquiredRecords,
    PartitionData,
    ShareFetchableTopicResponse,
)
from sharecon.protocol.records import (
    ControlType,
    Headers,
    Record,
    encode_batch,
    encode_control_batch,
    read_batches,
)
from sharecon.types import TopicIdPartition

FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TP = TopicIdPartition(uuid.UUID(int=0x5EED), 0, "fuzz")

Triple = tuple[int, int, int]
Span = tuple[int, int]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1


class Rec:
    """The smallest record intake can deliver: an offset and a delivery count."""

    __slots__ = ("delivery_count", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.delivery_count = 1


def factory(offset: int, _ts: int, _key: bytes | None, _value: bytes | None, _h: Headers) -> Rec:
    """Record factory for :meth:`PartitionIntake.decode_next`."""
    return Rec(offset)


# -- building answers --------------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    """A zig-zag varint, as record fields are written."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def forge_batch(
    base_offset: int, deltas: list[int], *, codec: Codec, last_offset_delta: int
) -> bytes:
    """A batch with a correct CRC whose records carry exactly ``deltas`` as offset deltas,
    in any order and of any value: what a broken producer or a hostile peer can send (the
    CRC says the bytes arrived as sent, not that they make sense)."""
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


def fix_crc(batch: bytearray) -> None:
    """Recompute a batch's CRC-32C in place (its header must be intact)."""
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


class Built(NamedTuple):
    """A valid records field, by batch, and the offsets it spans."""

    parts: list[bytes]
    first: int
    last: int
    #: Whether some batch carries forged record offsets (see :func:`forge_batch`).
    forged: bool


@st.composite
def records_fields(draw: st.DrawFn, *, forge: bool = False) -> Built:
    """Several batches in offset order: data (every codec, compacted offsets, compacted
    tails), control markers, batches compaction emptied, and with ``forge`` also
    batches whose records carry out-of-order or out-of-batch offsets."""
    base = draw(st.sampled_from([0, 1, 1000, 2**31, 2**40, 2**62]))
    kinds = ["data", "data", "data", "control", "empty"] + (["forged"] * 3 if forge else [])
    parts: list[bytes] = []
    forged = False
    nxt = base
    for _ in range(draw(st.integers(1, 5))):
        nxt += draw(st.integers(0, 2))  # offsets absent from the answer entirely
        kind = draw(st.sampled_from(kinds))
        codec = draw(st.sampled_from(list(Codec)))
        if kind == "control":
            parts.append(
                encode_control_batch(
                    draw(st.sampled_from([ControlType.COMMIT, ControlType.ABORT])),
                    producer_id=9,
                    producer_epoch=0,
                    base_offset=nxt,
                )
            )
            nxt += 1
        elif kind == "empty":
            lod = draw(st.integers(0, 4))
            parts.append(encode_batch([], base_offset=nxt, last_offset_delta=lod))
            nxt += lod + 1
        elif kind == "data":
            start = draw(st.integers(0, 2))  # leading records compacted away
            steps = draw(st.lists(st.integers(1, 3), max_size=7))
            deltas = [start]
            for s in steps:
                deltas.append(deltas[-1] + s)
            tail = draw(st.integers(0, 3))  # trailing records compacted away
            value = draw(st.none() | st.binary(max_size=30))
            records = [Record(nxt + d, 1_700_000_000_000 + d, None, value) for d in deltas]
            parts.append(
                encode_batch(
                    records, codec=codec, base_offset=nxt, last_offset_delta=deltas[-1] + tail
                )
            )
            nxt += deltas[-1] + tail + 1
        else:
            lod = draw(st.integers(0, 6))
            deltas = draw(st.lists(st.integers(-3, lod + 3), min_size=1, max_size=lod + 1))
            parts.append(forge_batch(nxt, deltas, codec=codec, last_offset_delta=lod))
            forged = True
            nxt += lod + 1
    return Built(parts, base, nxt - 1, forged)


@st.composite
def valid_ranges(draw: st.DrawFn, first: int, last: int) -> list[Triple]:
    """Disjoint acquired ranges around ``first..last`` (a bit before and past the data)."""
    lo = max(0, first - draw(st.integers(0, 2)))
    hi = last + draw(st.integers(0, 4))
    out: list[Triple] = []
    o = lo
    while o <= hi:
        n = draw(st.integers(1, 8))
        if draw(st.integers(0, 3)):
            out.append((o, min(o + n - 1, hi), draw(st.integers(1, 6))))
        o += n
    return out


@st.composite
def hostile(draw: st.DrawFn, triples: list[Triple]) -> list[Triple]:
    """``triples`` with a few hostile changes, all of them representable on the wire."""
    out = list(triples)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(
            st.sampled_from(
                [
                    "invert",
                    "negative",
                    "huge",
                    "at_bound",
                    "overlap",
                    "duplicate",
                    "delivery_count",
                    "shuffle",
                    "drop",
                    "far",
                ]
            )
        )
        if not out:
            out.append((0, 0, 1))
        i = draw(st.integers(0, len(out) - 1))
        f, last, dc = out[i]
        if how == "invert":
            out[i] = (f, f - draw(st.integers(1, 2**40)), dc)
        elif how == "negative":
            out[i] = (draw(st.sampled_from([-1, -(2**31), -(2**63)])), last, dc)
        elif how == "huge":
            out[i] = (f, draw(st.sampled_from([f + 5 * 10**8, f + 2**50, _I64_MAX])), dc)
        elif how == "at_bound":
            # Exactly DEFAULT_MAX_ACQUIRED offsets in this range (one more if drawn).
            extra = draw(st.integers(0, 1))
            out[i] = (f, f + DEFAULT_MAX_ACQUIRED - 1 + extra, dc)
        elif how == "overlap":
            out.append((max(0, last - draw(st.integers(0, 3))), last + 2, dc))
        elif how == "duplicate":
            out.append(out[i])
        elif how == "delivery_count":
            out[i] = (f, last, draw(st.sampled_from([0, -1, _I16_MIN, _I16_MAX])))
        elif how == "shuffle":
            out = draw(st.permutations(out))
        elif how == "drop":
            del out[i]
        else:
            start = draw(st.sampled_from([2**40, 2**62, _I64_MAX - 10]))
            out.append((start, start + draw(st.integers(0, 10)), dc))
    # Whatever the changes did, the fields stay int64 and int16, as on the wire.
    return [
        (
            _clamp(f, _I64_MIN, _I64_MAX),
            _clamp(last, _I64_MIN, _I64_MAX),
            _clamp(dc, _I16_MIN, _I16_MAX),
        )
        for f, last, dc in out
    ]


def _clamp(value: int, lo: int, hi: int) -> int:
    return min(max(value, lo), hi)


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, *, max_ops: int = 4) -> bytes:
    """``data`` after a few byte-level mutations: flips, truncation, splices."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, max_ops))):
        how = draw(st.sampled_from(["flip", "flip", "set", "truncate", "insert", "copy", "cut"]))
        n = len(buf)
        if how in ("flip", "set") and n:
            i = draw(st.integers(0, n - 1))
            if how == "flip":
                buf[i] ^= 1 << draw(st.integers(0, 7))
            else:
                buf[i] = draw(st.integers(0, 255))
        elif how == "truncate":
            del buf[draw(st.integers(0, n)) :]
        elif how == "insert":
            i = draw(st.integers(0, n))
            buf[i:i] = draw(st.binary(min_size=1, max_size=70))
        elif how == "copy" and n:
            lo = draw(st.integers(0, n - 1))
            hi = draw(st.integers(lo, n))
            at = draw(st.integers(0, n))
            buf[at:at] = buf[lo:hi]
        elif how == "cut" and n:
            lo = draw(st.integers(0, n - 1))
            del buf[lo : draw(st.integers(lo, n))]
    return bytes(buf)


class Answer(NamedTuple):
    """One partition's answer as intake receives it, and how it was made."""

    triples: list[Triple]
    records: bytes | None
    #: Record offsets inside each batch are as a producer writes them (in order, inside
    #: the batch); false once a batch is forged or changed under a recomputed CRC.
    trusted_offsets: bool
    max_acquired: int
    dead_letter_limit: int | None


@st.composite
def answers(
    draw: st.DrawFn,
    *,
    forge: bool = False,
    crc_fixed: bool = False,
    hostile_ranges: bool = True,
    mutate: bool = True,
) -> Answer:
    """A partition answer: valid batches and ranges, then (maybe) made hostile."""
    built = draw(records_fields(forge=forge))
    triples = draw(valid_ranges(built.first, built.last))
    if hostile_ranges and draw(st.integers(0, 2)) == 0:
        triples = draw(hostile(triples))
    parts = [bytearray(p) for p in built.parts]
    trusted = not built.forged
    if crc_fixed and draw(st.booleans()):
        # Plausible but wrong: bytes changed after the header, CRC made to match.
        for _ in range(draw(st.integers(1, 3))):
            p = parts[draw(st.integers(0, len(parts) - 1))]
            p[draw(st.integers(21, len(p) - 1))] = draw(st.integers(0, 255))
            fix_crc(p)
        trusted = False
    if mutate and len(parts) > 1 and draw(st.integers(0, 3)) == 0:
        # Batch-level changes: one dropped, duplicated or moved.
        i = draw(st.integers(0, len(parts) - 1))
        how = draw(st.sampled_from(["drop", "duplicate", "move"]))
        if how == "drop":
            del parts[i]
        elif how == "duplicate":
            parts.insert(draw(st.integers(0, len(parts))), parts[i])
        else:
            parts.insert(draw(st.integers(0, len(parts) - 1)), parts.pop(i))
    data = b"".join(parts)
    if mutate and draw(st.booleans()):
        data = draw(mutated_bytes(data))
    records: bytes | None = data if data or draw(st.booleans()) else None
    return Answer(
        triples,
        records,
        trusted,
        draw(st.sampled_from([DEFAULT_MAX_ACQUIRED, DEFAULT_MAX_ACQUIRED, 64])),
        draw(st.none() | st.integers(1, 5)),
    )


# -- checking ----------------------------------------------------------------------------------


def ranges_valid(triples: list[Triple], max_acquired: int) -> bool:
    """Rule 1 of intake, independently: may these ranges be trusted?"""
    total = 0
    prev_last = -1
    for first, last, dc in sorted(triples, key=lambda t: t[0]):
        if first < 0 or last < first or dc < 1 or first <= prev_last:
            return False
        prev_last = last
        total += last - first + 1
        if total > max_acquired:
            return False
    return True


def _merged(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


class Outcome(NamedTuple):
    """What intake made of one answer (``intake`` is None when it was refused)."""

    intake: PartitionIntake | None
    steps: list[Decoded[Rec]]


#: Whole batches, or slices of a few records (``async for`` asks for slices, rule 4).
SLICES = st.sampled_from([None, 1, 2, 3, 7])


def run(answer: Answer, limit: int | None = None) -> Outcome:
    """Intake and decode ``answer`` the way the consumer does; only typed errors escape.
    With ``limit``, a batch is decoded in slices of at most that many records, as
    ``async for`` takes them (rule 4).

    :raises InvalidAnswer: exactly when the ranges break rule 1.
    """
    valid = ranges_valid(answer.triples, answer.max_acquired)
    try:
        intake = take_partition(
            TP, answer.triples, answer.records, max_acquired=answer.max_acquired
        )
    except InvalidAnswer:
        assert not valid, "valid ranges refused"
        event("refused: InvalidAnswer")
        return Outcome(None, [])
    except KafkaError as exc:
        pytest.fail(f"take_partition raised {exc!r}; only InvalidAnswer is documented")
    assert valid, "untrustworthy ranges accepted"
    # Rule 1's bound: the ledger keeps a byte per acquired offset.
    assert sum(r.last_offset - r.first_offset + 1 for r in intake.ranges) <= answer.max_acquired
    steps: list[Decoded[Rec]] = []
    while True:
        try:
            d = intake.decode_next(factory, dead_letter_limit=answer.dead_letter_limit, limit=limit)
        except KafkaError as exc:
            pytest.fail(f"decode_next raised {exc!r}; errors are data (rule 6)")
        if d is None:
            break
        if limit is not None:
            assert len(d.records) + len(d.dead) <= limit
        steps.append(d)
    assert intake.exhausted
    assert intake.acquired == 0
    assert intake.wire == 0
    event("split: " + ("refused the records" if intake.errors else "ok"))
    event(f"batches decoded: {min(len(steps), 3)}{'+' if len(steps) >= 3 else ''}")
    if any(d.error is not None for d in steps):
        event("a batch released on decode")
    if any(d.records for d in steps):
        event("records delivered")
    return Outcome(intake, steps)


def check_accounting(out: Outcome, dead_letter_limit: int | None) -> None:
    """Every acquired offset exactly once in records, dead, gaps or release; records in
    their range, with its delivery count; dead letters exactly those past the limit."""
    intake = out.intake
    assert intake is not None
    ranges = intake.ranges
    starts = [r.first_offset for r in ranges]
    spans: list[Span] = list(intake.gaps) + list(intake.release)
    for d in out.steps:
        spans += d.gaps + d.release
        for rec, dead in [(r, False) for r in d.records] + [(r, True) for r in d.dead]:
            i = bisect_right(starts, rec.offset) - 1
            assert i >= 0, f"record {rec.offset} before every acquired range"
            r = ranges[i]
            assert r.first_offset <= rec.offset <= r.last_offset, (
                f"record {rec.offset} outside the acquired ranges"
            )
            assert rec.delivery_count == r.delivery_count, f"record {rec.offset}"
            if dead_letter_limit is not None:
                assert dead == (rec.delivery_count > dead_letter_limit), f"record {rec.offset}"
            else:
                assert not dead
            spans.append((rec.offset, rec.offset))
    spans.sort()
    for (_, a_hi), (b_lo, _) in zip(spans, spans[1:], strict=False):
        assert b_lo > a_hi, f"offset {b_lo} accounted for twice"
    acquired = [(r.first_offset, r.last_offset) for r in ranges]
    assert _merged(spans) == _merged(acquired), "an acquired offset was not accounted for"


# -- the properties ----------------------------------------------------------------------------


@settings(FUZZ, max_examples=400)
@given(answer=answers(forge=True, crc_fixed=True), limit=SLICES)
def test_any_answer_gives_typed_errors_only(answer: Answer, limit: int | None) -> None:
    """Hostile ranges, mutated bytes, forged records: InvalidAnswer or a result."""
    out = run(answer, limit)
    if out.intake is not None and answer.trusted_offsets:
        check_accounting(out, answer.dead_letter_limit)


@settings(FUZZ, max_examples=300)
@given(answer=answers(), limit=SLICES)
def test_every_acquired_offset_is_accounted_for_exactly_once(
    answer: Answer, limit: int | None
) -> None:
    """Batches as a producer writes them, then damaged in transit (anything a CRC catches,
    plus the base offsets it does not cover): the accounting holds."""
    out = run(answer, limit)
    if out.intake is not None:
        check_accounting(out, answer.dead_letter_limit)


@settings(FUZZ, max_examples=150)
@given(answer=answers(hostile_ranges=False, mutate=False), limit=SLICES)
def test_intact_answers_deliver_every_record_they_hold(answer: Answer, limit: int | None) -> None:
    """Without damage, what is delivered is exactly the records of the acquired offsets."""
    out = run(answer, limit)
    assert out.intake is not None or answer.max_acquired < DEFAULT_MAX_ACQUIRED
    if out.intake is None:
        return
    check_accounting(out, answer.dead_letter_limit)
    assert not out.intake.release and not out.intake.errors
    assert all(not d.release and d.error is None for d in out.steps)
    held = {
        r.offset
        for b in read_batches(answer.records or b"").batches
        if not b.is_control
        for r in b.records(factory)
    }
    ranges = out.intake.ranges
    wanted = sorted(o for o in held if any(r.first_offset <= o <= r.last_offset for r in ranges))
    got = sorted(r.offset for d in out.steps for r in d.records + d.dead)
    assert got == wanted


@settings(FUZZ, max_examples=200)
@example(
    answer=Answer(
        [(0, 2, 1)],
        forge_batch(0, [0, 0, 2], codec=Codec.NONE, last_offset_delta=2),
        False,
        DEFAULT_MAX_ACQUIRED,
        None,
    ),
    limit=None,
)
@given(answer=answers(forge=True, crc_fixed=True, hostile_ranges=False, mutate=False), limit=SLICES)
def test_forged_record_offsets_are_accounted_for_exactly_once(
    answer: Answer, limit: int | None
) -> None:
    """Records whose offsets are out of order, repeated or outside their batch: the
    accounting (and "only acquired offsets are delivered") must still hold."""
    out = run(answer, limit)
    if out.intake is not None:
        check_accounting(out, answer.dead_letter_limit)


@settings(FUZZ, max_examples=100)
@example(codec=Codec.NONE, n=10, bit=3)
@given(codec=st.sampled_from(list(Codec)), n=st.integers(2, 12), bit=st.integers(0, 30))
def test_a_corrupt_last_offset_delta_gaps_nothing(codec: Codec, n: int, bit: int) -> None:
    """A batch whose LastOffsetDelta was damaged: none of the offsets its records hold
    (in the intact answer) may be acknowledged as GAP."""
    first = encode_batch([Record(o, 0, None, b"x") for o in range(n)], codec=codec)
    second = encode_batch([Record(n + o, 0, None, b"y") for o in range(3)], base_offset=n)
    bad = bytearray(first)
    lod = struct.unpack_from(">i", bad, 23)[0]
    struct.pack_into(">i", bad, 23, lod ^ (1 << bit))
    intake = take_partition(TP, [(0, n + 2, 1)], bytes(bad) + second)
    steps = []
    while (d := intake.decode_next(factory)) is not None:
        steps.append(d)
    gapped = {o for lo, hi in intake.gaps for o in range(lo, hi + 1)}
    gapped |= {o for d in steps for lo, hi in d.gaps for o in range(lo, hi + 1)}
    assert not gapped & set(range(n + 3))


# -- bounded allocation ------------------------------------------------------------------------


@settings(FUZZ, max_examples=60)
@given(
    first=st.sampled_from([0, 7, 2**40, 2**62]),
    shape=st.sampled_from(["one", "split", "hostile"]),
    huge=st.sampled_from([DEFAULT_MAX_ACQUIRED, DEFAULT_MAX_ACQUIRED + 1, 5 * 10**8, 2**50]),
    built=records_fields(),
)
def test_intake_allocates_per_range_not_per_offset(
    first: int, shape: str, huge: int, built: Built
) -> None:
    """Ranges naming up to (and past) DEFAULT_MAX_ACQUIRED offsets, at any offset: intake
    itself stays within a fixed budget, and refuses what the ledger could not bound."""
    if shape == "one":
        triples = [(first, first + huge - 1, 1)]
    elif shape == "split":
        half = huge // 2
        triples = [
            (first, first + half - 1, 2),
            (first + 2**41, first + 2**41 + huge - half - 1, 1),
        ]
    else:
        triples = [(first, first + huge - 1, 1), (first + huge - 2, first + huge, 1)]
    data = b"".join(built.parts)
    tracemalloc.start()
    try:
        try:
            intake = take_partition(TP, triples, data)
        except InvalidAnswer:
            assert huge > DEFAULT_MAX_ACQUIRED or shape == "hostile"
        else:
            assert huge <= DEFAULT_MAX_ACQUIRED
            while intake.decode_next(factory) is not None:
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024 + 4 * len(data), f"peak {peak} bytes"


# -- the whole ShareFetchResponse --------------------------------------------------------------


@st.composite
def share_fetch_frames(draw: st.DrawFn) -> tuple[int, bytes]:
    """A ShareFetchResponse frame (after the size prefix) at some version, mutated."""
    version = draw(st.integers(ShareFetchResponse.min_version, ShareFetchResponse.max_version))
    topics = []
    for t in range(draw(st.integers(1, 2))):
        partitions = []
        for p in range(draw(st.integers(1, 3))):
            a = draw(answers(forge=True, mutate=False))
            records = a.records
            if records is None and version > 0:
                records = b""  # nullable only at v0
            partitions.append(
                PartitionData(
                    partition_index=p,
                    records=records,
                    acquired_records=tuple(
                        AcquiredRecords(first_offset=f, last_offset=last, delivery_count=dc)
                        for f, last, dc in a.triples
                    ),
                )
            )
        topics.append(
            ShareFetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=tuple(partitions))
        )
    body = ShareFetchResponse(
        acquisition_lock_timeout_ms=30_000 if version >= 1 else 0, responses=tuple(topics)
    )
    frame = encode_response(ShareFetchResponse.api_key, version, 7, body)[4:]
    return version, draw(mutated_bytes(frame, max_ops=3))


@settings(FUZZ, max_examples=200)
@given(share_fetch_frames())
def test_mutated_share_fetch_responses_give_typed_errors_only(frame: tuple[int, bytes]) -> None:
    """Decode a mutated frame (RemoteProtocolError or a body), then every partition goes
    through intake: InvalidAnswer or a result, nothing else."""
    version, raw = frame
    try:
        _, body = decode_response(ShareFetchResponse.api_key, version, raw)
    except RemoteProtocolError:
        return
    assert isinstance(body, ShareFetchResponse)
    for t in body.responses:
        for p in t.partitions:
            triples = [
                (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
            ]
            records = bytes(p.records) if p.records is not None else None
            # run() lets nothing out: InvalidAnswer is checked against the ranges there.
            run(Answer(triples, records, False, DEFAULT_MAX_ACQUIRED, 3))
