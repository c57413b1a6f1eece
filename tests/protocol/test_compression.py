"""Codecs: round trips, data made by the codec libraries directly, and bad input.

The invariant: :func:`decompress` returns the original bytes or raises
CorruptRecordError, never a library exception, and never inflates past ``max_size``.
"""

from __future__ import annotations

import gzip
import random
import struct
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from sharecon.errors import CorruptRecordError, LocalProtocolError
from sharecon.protocol.compression import XERIAL_MAGIC, Codec, compress, decompress

# Compressible but not trivial: repeated random blocks.
DATA = random.Random(7).randbytes(1500) * 200 + b"tail"
ALL = list(Codec)
COMPRESSED = [c for c in Codec if c != Codec.NONE]


def xerial(data: bytes, block: int = 8192) -> bytes:
    """Xerial framing assembled by hand, as Java's SnappyOutputStream writes it."""
    out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), block):
        chunk = snappy.compress(data[i : i + block])
        out += [struct.pack(">i", len(chunk)), chunk]
    return b"".join(out)


@pytest.mark.parametrize("codec", ALL, ids=lambda c: c.name)
def test_round_trip(codec: Codec) -> None:
    packed = compress(codec, DATA)
    if codec != Codec.NONE:
        assert len(packed) < len(DATA) // 10
    assert decompress(codec, packed, max_size=len(DATA)) == DATA
    assert decompress(codec, memoryview(packed), max_size=len(DATA)) == DATA
    assert decompress(codec, compress(codec, b""), max_size=0) == b""


def test_snappy_encoding_is_xerial_framed() -> None:
    packed = compress(Codec.SNAPPY, DATA)
    assert packed.startswith(XERIAL_MAGIC)
    (first_len,) = struct.unpack_from(">i", packed, 16)
    # The first chunk is a plain raw-snappy block of one 32 KiB slice.
    assert snappy.decompress(packed[20 : 20 + first_len]) == DATA[: 32 * 1024]


def test_lz4_encoding_uses_kafka_frame_settings() -> None:
    info = lz4.frame.get_frame_info(compress(Codec.LZ4, DATA))
    assert info["block_linked"] is False
    assert info["content_size"] == 0
    assert info["block_size"] == 64 * 1024


FOREIGN = {
    "gzip": (Codec.GZIP, lambda d: gzip.compress(d)),
    "gzip-two-members": (Codec.GZIP, lambda d: gzip.compress(d[:1000]) + gzip.compress(d[1000:])),
    "snappy-raw": (Codec.SNAPPY, lambda d: snappy.compress(d)),
    "snappy-xerial": (Codec.SNAPPY, xerial),
    "lz4-frame-default": (Codec.LZ4, lambda d: lz4.frame.compress(d)),
    "lz4-linked-no-size": (
        Codec.LZ4,
        lambda d: lz4.frame.compress(d, store_size=False, content_checksum=True),
    ),
    "zstd-with-size": (Codec.ZSTD, lambda d: zstandard.ZstdCompressor().compress(d)),
    "zstd-without-size": (
        Codec.ZSTD,
        lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d),
    ),
    "zstd-streamed": (
        Codec.ZSTD,
        lambda d: (lambda c: c.compress(d) + c.flush())(zstandard.ZstdCompressor().compressobj()),
    ),
    "zstd-two-frames": (
        Codec.ZSTD,
        lambda d: (
            zstandard.ZstdCompressor().compress(d[:1000])
            + zstandard.ZstdCompressor(write_content_size=False).compress(d[1000:])
        ),
    ),
}


@pytest.mark.parametrize("name", list(FOREIGN))
def test_decompresses_what_the_libraries_produce(name: str) -> None:
    codec, make = FOREIGN[name]
    packed = make(DATA)
    if name == "zstd-without-size":
        # The reason for streaming decompression: the one-shot API refuses this frame.
        with pytest.raises(zstandard.ZstdError):
            zstandard.ZstdDecompressor().decompress(packed)
    assert decompress(codec, packed, max_size=len(DATA)) == DATA


@pytest.mark.parametrize("name", list(FOREIGN))
def test_limit_is_exact(name: str) -> None:
    codec, make = FOREIGN[name]
    packed = make(DATA)
    assert decompress(codec, packed, max_size=len(DATA)) == DATA
    with pytest.raises(CorruptRecordError, match="inflates past the"):
        decompress(codec, packed, max_size=len(DATA) - 1)


BOMB_SIZE = 256 * 1024 * 1024
BOMBS = {
    "gzip": (Codec.GZIP, lambda: gzip.compress(bytes(BOMB_SIZE), compresslevel=9)),
    "snappy-raw": (Codec.SNAPPY, lambda: snappy.compress(bytes(BOMB_SIZE // 8))),
    "snappy-xerial": (Codec.SNAPPY, lambda: xerial(bytes(BOMB_SIZE // 8), block=1 << 20)),
    "lz4": (Codec.LZ4, lambda: lz4.frame.compress(bytes(BOMB_SIZE))),
    "zstd-without-size": (
        Codec.ZSTD,
        lambda: zstandard.ZstdCompressor(write_content_size=False).compress(bytes(BOMB_SIZE)),
    ),
    "zstd-with-size": (Codec.ZSTD, lambda: zstandard.ZstdCompressor().compress(bytes(BOMB_SIZE))),
}


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[Codec, bytes]]:
    return {name: (codec, make()) for name, (codec, make) in BOMBS.items()}


@pytest.mark.parametrize("name", list(BOMBS))
def test_bomb_is_refused_without_inflating(
    name: str, bombs: dict[str, tuple[Codec, bytes]]
) -> None:
    """A small payload that inflates far past the limit fails fast and stays small in memory."""
    codec, packed = bombs[name]
    assert len(packed) < 2 * 1024 * 1024
    limit = 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="inflates past the 1048576-byte limit"):
            decompress(codec, packed, max_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * limit


def test_snappy_declared_length_checked_before_decompressing() -> None:
    # A raw block claiming 4 GiB - 1 of output, with no body: refused from the preamble.
    claim = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="inflates past"):
        decompress(Codec.SNAPPY, claim, max_size=1 << 20)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_truncated_input_is_corrupt(codec: Codec) -> None:
    packed = compress(codec, DATA)
    for cut in (1, 5, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut], max_size=len(DATA))


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_garbage_is_corrupt(codec: Codec) -> None:
    cases = [b"", b"not compressed at all", random.Random(8).randbytes(200), b"\xff" * 64]
    if codec != Codec.SNAPPY:
        cases.append(b"\x00")  # for raw snappy, a valid empty block
    for garbage in cases:
        with pytest.raises(CorruptRecordError, match=codec.name.lower()):
            decompress(codec, garbage, max_size=1 << 20)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD], ids=lambda c: c.name)
def test_trailing_garbage_is_corrupt(codec: Codec) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, DATA) + b"junk", max_size=len(DATA))


def test_xerial_bad_chunk_lengths() -> None:
    good = xerial(DATA)
    with pytest.raises(CorruptRecordError, match="header truncated"):
        decompress(Codec.SNAPPY, good[:12], max_size=len(DATA))
    negative = good[:16] + struct.pack(">i", -5) + good[20:]
    with pytest.raises(CorruptRecordError, match="length -5"):
        decompress(Codec.SNAPPY, negative, max_size=len(DATA))
    with pytest.raises(CorruptRecordError, match="chunk length truncated"):
        decompress(Codec.SNAPPY, good[:18], max_size=len(DATA))


def test_unknown_codec() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        decompress(5, b"abc", max_size=100)
    with pytest.raises(LocalProtocolError, match="unknown compression codec 7"):
        compress(7, b"abc")


def test_uncompressed_limit() -> None:
    assert decompress(Codec.NONE, b"abc", max_size=3) == b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(Codec.NONE, b"abcd", max_size=3)


@settings(deadline=None)
@given(codec=st.integers(0, 7), data=st.binary(max_size=300), max_size=st.integers(0, 1 << 20))
def test_any_bytes_decompress_or_raise_corrupt(codec: int, data: bytes, max_size: int) -> None:
    try:
        out = decompress(codec, data, max_size=max_size)
    except CorruptRecordError:
        return
    assert len(out) <= max_size


@settings(deadline=None)
@given(
    codec=st.sampled_from(COMPRESSED),
    data=st.binary(max_size=2000),
    cut=st.integers(0, 10_000),
    flip=st.integers(0, 10_000),
    mask=st.integers(1, 255),
)
def test_damaged_compressed_data_decompresses_or_raises_corrupt(
    codec: Codec, data: bytes, cut: int, flip: int, mask: int
) -> None:
    packed = bytearray(compress(codec, data))
    packed[flip % len(packed)] ^= mask
    try:
        decompress(codec, bytes(packed[: cut % (len(packed) + 1)]), max_size=len(data) + 10)
    except CorruptRecordError:
        pass
