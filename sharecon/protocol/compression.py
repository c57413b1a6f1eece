"""Record-batch codecs: gzip, snappy (raw and xerial-framed), lz4 frame and zstd.

Sans-I/O and stateless. :func:`decompress` (and :func:`decompress_chunks`, for a
reader that keeps only a window of the output) is *bounded*: output is produced
incrementally and a payload that would inflate past ``max_size`` bytes raises
:class:`~sharecon.errors.CorruptRecordError` before the memory is spent, so a
decompression bomb is just bad input. Every failure of the underlying libraries
(``zlib.error``, lz4 ``RuntimeError``, ``ZstdError``, snappy's errors,
``MemoryError``) is turned into :class:`~sharecon.errors.CorruptRecordError`.

:mod:`sharecon.protocol.records` adds the batch's base offset to these errors.

The snappy, lz4 and zstd libraries are imported where their codec is first used (an
``import`` of a loaded module is a dictionary lookup, once per batch), so a client whose
topics are uncompressed or gzip never loads them (docs/performance.md).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING

from sharecon.errors import CorruptRecordError, LocalProtocolError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "DEFAULT_MAX_UNCOMPRESSED",
    "XERIAL_MAGIC",
    "Codec",
    "compress",
    "decompress",
    "decompress_chunks",
]

#: Default cap on one batch's decompressed size (64 MiB). Kafka's own limits on a
#: batch (``max.message.bytes``, 1 MiB by default) are far below this.
DEFAULT_MAX_UNCOMPRESSED = 64 * 1024 * 1024

#: The first 8 bytes of the xerial snappy framing that Java producers emit.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Magic, then int32 version and int32 minimum compatible version.
_XERIAL_HEADER_LEN = 16
_XERIAL_VERSION = 1
_XERIAL_COMPAT = 1
# Java's xerial SnappyOutputStream default block size.
_XERIAL_BLOCK = 32 * 1024

_INT32 = struct.Struct(">i")
_GZIP_MAGIC = b"\x1f\x8b"

# zstd's densest encoding (an RLE block) turns 4 input bytes into 128 KiB of output,
# so feeding n input bytes can yield at most n * 32768 bytes. Input is fed in slices
# sized so that one call cannot overshoot the remaining budget by more than ~2 MiB.
_ZSTD_MAX_RATIO = 32768
_ZSTD_MIN_FEED = 64


class Codec(IntEnum):
    """Compression codec, the low 3 bits of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def decompress(codec: int, data: bytes | bytearray | memoryview, *, max_size: int) -> bytes:
    """Decompress one batch's records section.

    :param codec: a :class:`Codec` value (``NONE`` returns the data as bytes).
    :param data: the compressed bytes.
    :param max_size: the most bytes the output may have.
    :raises CorruptRecordError: unknown codec, malformed or truncated input, or output
        that would exceed ``max_size``.
    """
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    try:
        if codec == Codec.GZIP:
            return _gunzip(data, max_size)
        if codec == Codec.SNAPPY:
            return _unsnappy(data, max_size)
        if codec == Codec.LZ4:
            return _unlz4(data, max_size)
        if codec == Codec.ZSTD:
            return _unzstd(data, max_size)
        if codec == Codec.NONE:
            if len(data) > max_size:
                raise _too_big("none", max_size)
            return bytes(data)
    except CorruptRecordError:
        raise
    except Exception as exc:
        # The codec libraries raise assorted types (zlib.error, RuntimeError, ZstdError,
        # snappy.UncompressError, ValueError, MemoryError); all mean "bad input" here.
        name = _name(codec)
        raise CorruptRecordError(
            f"{name} decompression failed: {type(exc).__name__}: {exc}"
        ) from exc
    raise CorruptRecordError(f"unknown compression codec {codec} (attributes bits 0-2)")


def compress(
    codec: int, data: bytes | bytearray | memoryview, *, level: int | None = None
) -> bytes:
    """Compress a batch's records section the way Kafka's Java producer does.

    gzip writes one gzip member; snappy writes xerial framing (32 KiB blocks); lz4
    writes one frame with independent 64 KiB blocks and no content size; zstd writes
    one frame with its content size.

    :param codec: a :class:`Codec` value (``NONE`` returns the data as bytes).
    :param level: codec-specific compression level; ``None`` uses the library default.
    :raises LocalProtocolError: for an unknown codec.
    """
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == Codec.SNAPPY:
        return compress_snappy_xerial(data)
    if codec == Codec.LZ4:
        import lz4.frame

        out: bytes = lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return out
    if codec == Codec.ZSTD:
        import zstandard

        zc = zstandard.ZstdCompressor(level=3 if level is None else level)
        zout: bytes = zc.compress(data)
        return zout
    raise LocalProtocolError(f"unknown compression codec {codec}")


def compress_snappy_xerial(
    data: bytes | bytearray | memoryview, *, block_size: int = _XERIAL_BLOCK
) -> bytes:
    """Snappy with the xerial framing Java producers emit (header, then length-prefixed blocks)."""
    import snappy

    view = memoryview(data)
    parts = [XERIAL_MAGIC, _INT32.pack(_XERIAL_VERSION), _INT32.pack(_XERIAL_COMPAT)]
    for start in range(0, len(view), block_size):
        chunk: bytes = snappy.compress(bytes(view[start : start + block_size]))
        parts.append(_INT32.pack(len(chunk)))
        parts.append(chunk)
    return b"".join(parts)


def _name(codec: int) -> str:
    try:
        return Codec(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


def _too_big(name: str, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{name} data inflates past the {max_size}-byte limit on a decompressed batch"
    )


def _gunzip(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    parts: list[bytes] = []
    total = 0
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        # zlib grows its output buffer as it goes, so max_length caps memory, not just output.
        out = d.decompress(view, max_size - total + 1)
        total += len(out)
        if total > max_size:
            raise _too_big("gzip", max_size)
        parts.append(out)
        if not d.eof:
            raise CorruptRecordError("gzip data is truncated (no end-of-stream marker)")
        rest = d.unused_data
        if not rest:
            break
        # Several gzip members in a row decode as their concatenation (as Java's
        # GZIPInputStream does); anything else after the stream is garbage.
        if rest[:2] != _GZIP_MAGIC:
            raise CorruptRecordError(f"{len(rest)} unexpected bytes after the gzip stream")
        view = memoryview(rest)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_declared_length(block: memoryview, where: str) -> int:
    """The uncompressed length a raw snappy block declares in its uvarint preamble."""
    value = 0
    shift = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7
    raise CorruptRecordError(f"snappy {where}: bad uncompressed-length preamble")


def _snappy_block(block: memoryview, budget: int, max_size: int, where: str) -> bytes:
    import snappy

    declared = _snappy_declared_length(block, where)
    if declared > budget:
        raise _too_big("snappy", max_size)
    out: bytes = snappy.decompress(bytes(block))
    if len(out) != declared:
        raise CorruptRecordError(
            f"snappy {where}: declared {declared} bytes but decompressed to {len(out)}"
        )
    return out


def _unsnappy(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return _snappy_block(view, max_size, max_size, "block")
    if len(view) < _XERIAL_HEADER_LEN:
        raise CorruptRecordError(f"xerial snappy header truncated ({len(view)} bytes)")
    pos = _XERIAL_HEADER_LEN
    end = len(view)
    parts: list[bytes] = []
    total = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError(f"xerial snappy chunk length truncated at byte {pos}")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(
                f"xerial snappy chunk at byte {pos - 4} has length {n}, "
                f"but {end - pos} bytes remain"
            )
        out = _snappy_block(view[pos : pos + n], max_size - total, max_size, f"chunk at byte {pos}")
        total += len(out)
        parts.append(out)
        pos += n
    return b"".join(parts)


def _unlz4(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    import lz4.frame

    parts: list[bytes] = []
    total = 0
    pending: bytes | bytearray | memoryview = data
    # LZ4FrameDecompressor allocates max_length up front, so ask for output in growing
    # steps rather than handing it the whole budget at once.
    step = max(65536, 4 * len(data))
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        feed: bytes | bytearray | memoryview = pending
        while True:
            out: bytes = d.decompress(feed, max_length=min(step, max_size - total + 1))
            feed = b""
            total += len(out)
            if total > max_size:
                raise _too_big("lz4", max_size)
            parts.append(out)
            if d.eof:
                break
            if d.needs_input:
                raise CorruptRecordError("lz4 frame is truncated (no end mark)")
            step *= 2
        rest = d.unused_data
        if not rest:
            break
        pending = rest
    return parts[0] if len(parts) == 1 else b"".join(parts)


def decompress_chunks(
    codec: int, data: bytes | bytearray | memoryview, *, max_size: int
) -> Iterator[bytes]:
    """Decompress one batch's records section piece by piece, for a reader that stops
    early or keeps only a window: zstd yields what each slice of input gives (bounded as
    in :func:`decompress`); the other codecs yield the whole output at once.

    :raises CorruptRecordError: as :func:`decompress`, when the bad part is reached.
    """
    if codec != Codec.ZSTD:
        yield decompress(codec, data, max_size=max_size)
        return
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    try:
        yield from _unzstd_chunks(data, max_size)
    except CorruptRecordError:
        raise
    except Exception as exc:  # as in decompress(): the library's errors mean bad input
        raise CorruptRecordError(f"zstd decompression failed: {type(exc).__name__}: {exc}") from exc


def _unzstd(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    parts = list(_unzstd_chunks(data, max_size))
    if len(parts) == 1:
        return parts[0]
    out = b"".join(parts)
    return out


def _unzstd_chunks(data: bytes | bytearray | memoryview, max_size: int) -> Iterator[bytes]:
    # decompressobj() rather than ZstdDecompressor().decompress(): the latter needs the
    # content size in the frame header, which librdkafka and Java streams omit. Unlike
    # stream_reader(), decompressobj() reports a truncated frame (eof stays False).
    import zstandard

    view = memoryview(data)
    total = 0
    dctx = zstandard.ZstdDecompressor()
    while True:
        d = dctx.decompressobj()
        pos = 0
        end = len(view)
        while pos < end and not d.eof:
            feed = max(_ZSTD_MIN_FEED, (max_size - total) // _ZSTD_MAX_RATIO)
            out: bytes = d.decompress(view[pos : pos + feed])
            pos += feed
            total += len(out)
            if total > max_size:
                raise _too_big("zstd", max_size)
            if out:
                yield out
        if not d.eof:
            raise CorruptRecordError("zstd frame is truncated (no end of frame)")
        rest = d.unused_data
        # unused_data only covers the last slice fed; the rest of the view was never fed.
        remaining = len(rest) + max(0, end - pos)
        if not remaining:
            break
        view = memoryview(bytes(rest) + bytes(view[pos:]))
