"""Part of a zstd batch, decoded from a stream of its decompressed records
(``records._decode_spans_stream``): only a window is held, nothing after the last span is
decompressed, and a batch read again steps over what came before by the marks the first
read left."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from sharecon import COMPILED
from sharecon.protocol import records as rec_mod
from sharecon.protocol.records import BatchBuilder, Codec, Record, encode_batch, read_batches


def _empty_batch(n: int) -> bytes:
    b = BatchBuilder()
    for _ in range(n):
        b.append(1_700_000_000_000, None, b"")
    return b.build(codec=Codec.ZSTD)


def test_one_record_of_a_big_batch_holds_a_window_not_the_batch() -> None:
    data = _empty_batch(400_000)  # about 3.8 MB decompressed
    tracemalloc.start()
    try:
        batch = read_batches(data).batches[0]
        got = batch.records(spans=[(10, 10)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.offset for r in got] == [10]
    assert peak < 1_000_000, f"decoding one record held {peak} bytes"
    assert batch.decoded_size < 100  # the bytes of the one record decoded


def test_a_record_far_in_is_reached_and_the_next_read_jumps_by_the_marks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 300_000
    data = _empty_batch(n)
    rec_mod._SKIP_MARKS.clear()
    stepped: list[int] = []
    real = rec_mod._skip_fit

    def counting(buf: bytes, pos: int, end: int, i: int, stop: int) -> tuple[int, int]:
        out = real(buf, pos, end, i, stop)
        stepped.append(out[1] - i)
        return out

    # The compiled build calls _skip_fit directly, past the module attribute, so the steps
    # are counted in the pure build only; the marks left behind are checked in both.
    monkeypatch.setattr(rec_mod, "_skip_fit", counting)
    k = 250_000
    assert [r.offset for r in read_batches(data).batches[0].records(spans=[(k, k)])] == [k]
    assert len(rec_mod._SKIP_MARKS) == 1
    (marks,) = rec_mod._SKIP_MARKS.values()
    assert len(marks) >= k // rec_mod._MARK_EVERY
    if not COMPILED:
        assert sum(stepped) >= 250_000
    stepped.clear()
    # The same batch again (as strict mode's next fetch sends it), the next offset.
    assert [r.offset for r in read_batches(data).batches[0].records(spans=[(k + 1, k + 2)])] == [
        k + 1,
        k + 2,
    ]
    if not COMPILED:
        assert sum(stepped) < rec_mod._MARK_EVERY + 3


@pytest.mark.parametrize("seed", range(6))
def test_stream_decode_equals_full_decode_filtered(seed: int) -> None:
    """Records of many sizes (one- to three-byte length varints, headers), many small
    pieces (a small decompression bound feeds the decoder about 120 bytes of input at a time),
    random spans: the same records as decoding everything and keeping the spans."""
    rng = random.Random(seed)
    n = rng.randint(1, 2000)
    base = rng.randint(0, 10**6)
    records = [
        Record(
            offset=base + i,
            timestamp=1_700_000_000_000 + i,
            key=None if rng.random() < 0.5 else rng.randbytes(rng.randint(0, 30)),
            value=rng.randbytes(rng.choice((0, 1, 5, 70, 200, 1500))),
            headers=(("h", b"x"),) if rng.random() < 0.1 else (),
        )
        for i in range(n)
    ]
    data = encode_batch(records, base_offset=base, codec=Codec.ZSTD)
    full = read_batches(data).batches[0].records()
    spans = []
    o = base + rng.randint(0, 5)
    while o < base + n + 3:
        hi = o + rng.randint(0, 40)
        spans.append((o, hi))
        o = hi + 2 + rng.randint(0, 300)
    if rng.random() < 0.3:
        rec_mod._SKIP_MARKS.clear()
    for bound in (4_000_000, 64 * 1024 * 1024):
        got = read_batches(data).batches[0].records(spans=spans, max_uncompressed=bound)
        want = [r for r in full if any(lo <= r.offset <= hi for lo, hi in spans)]
        assert got == want
