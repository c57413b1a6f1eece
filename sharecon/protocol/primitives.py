"""Kafka wire primitives: a bounds-checked :class:`Reader` and an appending :class:`Writer`.

Rules for this module:

* The reader never allocates more than the bytes actually present: every length read
  from the wire is checked against what is left *before* anything is sliced or built.
* The reader raises only :class:`DecodeError` (a :class:`~sharecon.errors.RemoteProtocolError`)
  and records the byte offset where it failed; message decoders add the field path.
* The writer raises only :class:`~sharecon.errors.LocalProtocolError`, for values the
  wire cannot hold (out-of-range ints, ``None`` where null is not allowed, ...).

Encodings (all big-endian): classic strings carry an int16 length (-1 = null), classic
bytes and arrays an int32 length (-1 = null); compact forms carry ``uvarint(len + 1)``
(0 = null). A tagged-field section is ``uvarint(count)`` then, per field, ``uvarint(tag)``,
``uvarint(size)`` and ``size`` bytes, in ascending tag order.
"""

from __future__ import annotations

import struct
import uuid
from typing import TYPE_CHECKING, Final

from sharecon.errors import LocalProtocolError, RemoteProtocolError

if TYPE_CHECKING:
    import builtins

__all__ = [
    "DecodeError",
    "Reader",
    "UnknownTags",
    "Writer",
    "uvarint_size",
    "zigzag_decode",
    "zigzag_encode",
]

#: Tagged fields a decoder did not know, kept as ``(tag, raw bytes)`` in wire order
#: so that re-encoding is lossless.
UnknownTags = tuple[tuple[int, bytes], ...]

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_F64: Final = struct.Struct(">d")

_i8 = _I8.unpack_from
_i16 = _I16.unpack_from
_i32 = _I32.unpack_from
_i64 = _I64.unpack_from
_u16 = _U16.unpack_from
_u32 = _U32.unpack_from
_f64 = _F64.unpack_from

_INT_RANGES: Final = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


class DecodeError(RemoteProtocolError):
    """Bytes that cannot be decoded; carries the byte ``offset`` and the field ``path``.

    Message decoders append ``(struct name, field name)`` pairs to ``path`` (innermost
    first) as the error passes up, so the final message can say exactly where it broke.
    """

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} at byte {offset}")
        self.reason = reason
        self.offset = offset
        self.path: list[str] = []

    def where(self) -> str:
        """The field path, outermost first (``"Outer.topics.Inner.partition_index"``)."""
        return ".".join(reversed(self.path))


def zigzag_encode(value: int, bits: int) -> int:
    """Map a signed int to the unsigned zig-zag form used by varint/varlong."""
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(value: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def uvarint_size(value: int) -> int:
    """Number of bytes ``value`` takes as an unsigned varint."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


class Reader:
    """A cursor over a read-only buffer. Slices of bytes/records fields are zero-copy.

    :param data: the bytes to read; kept alive by the memoryview slices handed out.
    :param pos: where to start.
    :param end: where to stop (default: end of ``data``); reads past it fail.
    """

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        self.buf = mv
        self.pos = pos
        self.end = len(mv) if end is None else end

    # -- helpers ---------------------------------------------------------------------

    def remaining(self) -> int:
        """Bytes left before ``end``."""
        return self.end - self.pos

    def _short(self, need: int, what: str) -> DecodeError:
        return DecodeError(
            f"truncated {what}: need {need} bytes, {self.end - self.pos} left", self.pos
        )

    def _take(self, n: int, what: str) -> int:
        pos = self.pos
        if n > self.end - pos:
            raise self._short(n, what)
        self.pos = pos + n
        return pos

    def finish(self) -> None:
        """Fail if bytes are left over (a decoder read less than the whole buffer)."""
        if self.pos != self.end:
            raise DecodeError(f"{self.end - self.pos} unexpected trailing bytes", self.pos)

    # -- fixed-size ------------------------------------------------------------------

    def int8(self) -> int:
        """Read a signed 8-bit int."""
        pos = self.pos
        if pos + 1 > self.end:
            raise self._short(1, "int8")
        self.pos = pos + 1
        value: int = _i8(self.buf, pos)[0]
        return value

    def int16(self) -> int:
        """Read a signed big-endian 16-bit int."""
        pos = self.pos
        if pos + 2 > self.end:
            raise self._short(2, "int16")
        self.pos = pos + 2
        value: int = _i16(self.buf, pos)[0]
        return value

    def int32(self) -> int:
        """Read a signed big-endian 32-bit int."""
        pos = self.pos
        if pos + 4 > self.end:
            raise self._short(4, "int32")
        self.pos = pos + 4
        value: int = _i32(self.buf, pos)[0]
        return value

    def int64(self) -> int:
        """Read a signed big-endian 64-bit int."""
        pos = self.pos
        if pos + 8 > self.end:
            raise self._short(8, "int64")
        self.pos = pos + 8
        value: int = _i64(self.buf, pos)[0]
        return value

    def uint16(self) -> int:
        """Read an unsigned big-endian 16-bit int."""
        pos = self.pos
        if pos + 2 > self.end:
            raise self._short(2, "uint16")
        self.pos = pos + 2
        value: int = _u16(self.buf, pos)[0]
        return value

    def uint32(self) -> int:
        """Read an unsigned big-endian 32-bit int."""
        pos = self.pos
        if pos + 4 > self.end:
            raise self._short(4, "uint32")
        self.pos = pos + 4
        value: int = _u32(self.buf, pos)[0]
        return value

    def float64(self) -> float:
        """Read an IEEE-754 double."""
        return float(_f64(self.buf, self._take(8, "float64"))[0])

    def bool(self) -> bool:
        """Read a boolean (any non-zero byte is true, as the broker reads it)."""
        return self.buf[self._take(1, "bool")] != 0

    def uuid(self) -> uuid.UUID:
        """Read a 16-byte UUID."""
        pos = self._take(16, "uuid")
        return uuid.UUID(bytes=bytes(self.buf[pos : pos + 16]))

    # -- varints ---------------------------------------------------------------------

    def uvarint(self, max_bytes: int = 5) -> int:
        """Read an unsigned varint of at most ``max_bytes`` bytes (5 for 32-bit values)."""
        # Fast path: lengths and tag counts are almost always a single byte.
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
        return self._uvarint_slow(max_bytes)

    def _uvarint_slow(self, max_bytes: int) -> int:
        buf = self.buf
        pos = self.pos
        end = self.end
        result = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise DecodeError("truncated varint", pos)
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                if max_bytes == 5 and result > 0xFFFFFFFF:
                    raise DecodeError("varint does not fit in 32 bits", self.pos)
                return result
            shift += 7
        raise DecodeError(f"varint longer than {max_bytes} bytes", self.pos)

    def varint(self) -> int:
        """Read a zig-zag signed 32-bit varint."""
        return zigzag_decode(self.uvarint(5))

    def varlong(self) -> int:
        """Read a zig-zag signed 64-bit varint."""
        return zigzag_decode(self.uvarint(10) & 0xFFFFFFFFFFFFFFFF)

    # -- lengths ---------------------------------------------------------------------

    def _length(self, n: int, unit: int, what: str) -> int:
        # A declared length must fit in what is left before anything is allocated;
        # `unit` is the minimum bytes one element takes on the wire.
        if n * unit > self.end - self.pos:
            raise DecodeError(
                f"{what} length {n} exceeds the {self.end - self.pos} bytes left", self.pos
            )
        return n

    def array_len(self, unit: int = 1) -> int:
        """Read a classic int32 array length; -1 means null."""
        n = self.int32()
        if n < -1:
            raise DecodeError(f"negative array length {n}", self.pos - 4)
        return n if n < 0 else self._length(n, unit, "array")

    def compact_array_len(self, unit: int = 1) -> int:
        """Read a compact array length (``uvarint(n + 1)``); -1 means null."""
        n = self.uvarint() - 1
        return n if n < 0 else self._length(n, unit, "array")

    # -- strings and bytes -----------------------------------------------------------

    def _str(self, n: int) -> str:
        pos = self._take(n, "string")
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in string ({exc.reason})", pos + exc.start) from None

    def string(self) -> str | None:
        """Read a classic string (int16 length, -1 = null)."""
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative string length {n}", self.pos - 2)
        return self._str(n)

    def compact_string(self) -> str | None:
        """Read a compact string (``uvarint(len + 1)``, 0 = null)."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._str(n)

    def _view(self, n: int, what: str) -> memoryview:
        pos = self._take(n, what)
        return self.buf[pos : pos + n]

    def bytes_view(self) -> memoryview | None:
        """Read classic bytes (int32 length, -1 = null) as a zero-copy view."""
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative bytes length {n}", self.pos - 4)
        return self._view(n, "bytes")

    def compact_bytes_view(self) -> memoryview | None:
        """Read compact bytes (``uvarint(len + 1)``, 0 = null) as a zero-copy view."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._view(n, "bytes")

    def raw(self, n: int) -> memoryview:
        """Read exactly ``n`` raw bytes as a zero-copy view."""
        return self._view(n, "bytes")

    # -- tagged fields ---------------------------------------------------------------

    def unknown_tags(self) -> UnknownTags:
        """Read a whole tagged-field section, keeping every field as raw bytes."""
        count = self.uvarint()
        if not count:
            return ()
        out: list[tuple[int, bytes]] = []
        for _ in range(count):
            tag = self.uvarint()
            size = self.uvarint()
            out.append((tag, bytes(self._view(size, "tagged field"))))
        return tuple(out)


class Writer:
    """Appends wire encodings to a growing ``bytearray`` (``self.buf``)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> builtins.bytes:
        """The bytes written so far."""
        return bytes(self.buf)

    # -- fixed-size ------------------------------------------------------------------

    def _pack(self, s: struct.Struct, kind: str, value: int) -> None:
        try:
            self.buf += s.pack(value)
        except struct.error:
            lo, hi = _INT_RANGES[kind]
            raise LocalProtocolError(f"{kind} value {value!r} outside {lo}..{hi}") from None

    def int8(self, value: int) -> None:
        """Write a signed 8-bit int."""
        self._pack(_I8, "int8", value)

    def int16(self, value: int) -> None:
        """Write a signed 16-bit int."""
        self._pack(_I16, "int16", value)

    def int32(self, value: int) -> None:
        """Write a signed 32-bit int."""
        self._pack(_I32, "int32", value)

    def int64(self, value: int) -> None:
        """Write a signed 64-bit int."""
        self._pack(_I64, "int64", value)

    def uint16(self, value: int) -> None:
        """Write an unsigned 16-bit int."""
        self._pack(_U16, "uint16", value)

    def uint32(self, value: int) -> None:
        """Write an unsigned 32-bit int."""
        self._pack(_U32, "uint32", value)

    def float64(self, value: float) -> None:
        """Write an IEEE-754 double."""
        try:
            self.buf += _F64.pack(value)
        except struct.error:
            raise LocalProtocolError(f"float64 value {value!r} is not a float") from None

    def bool(self, value: bool) -> None:
        """Write a boolean as one byte (0 or 1)."""
        if value is not True and value is not False:
            raise LocalProtocolError(f"bool value {value!r} is not a bool")
        self.buf.append(1 if value else 0)

    def uuid(self, value: uuid.UUID) -> None:
        """Write a 16-byte UUID."""
        if not isinstance(value, uuid.UUID):
            raise LocalProtocolError(f"uuid value {value!r} is not a uuid.UUID")
        self.buf += value.bytes

    # -- varints ---------------------------------------------------------------------

    def uvarint(self, value: int) -> None:
        """Write an unsigned varint (values up to 2**64 - 1)."""
        if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
            raise LocalProtocolError(f"unsigned varint value {value!r} out of range")
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def varint(self, value: int) -> None:
        """Write a zig-zag signed 32-bit varint."""
        if not -(2**31) <= value <= 2**31 - 1:
            raise LocalProtocolError(f"varint value {value!r} outside int32 range")
        self.uvarint(zigzag_encode(value, 32))

    def varlong(self, value: int) -> None:
        """Write a zig-zag signed 64-bit varint."""
        if not -(2**63) <= value <= 2**63 - 1:
            raise LocalProtocolError(f"varlong value {value!r} outside int64 range")
        self.uvarint(zigzag_encode(value, 64))

    # -- lengths, strings, bytes -----------------------------------------------------

    def array_len(self, n: int | None) -> None:
        """Write a classic int32 array length (``None`` = null)."""
        self.int32(-1 if n is None else n)

    def compact_array_len(self, n: int | None) -> None:
        """Write a compact array length (``None`` = null)."""
        self.uvarint(0 if n is None else n + 1)

    @staticmethod
    def _utf8(value: str) -> builtins.bytes:
        if not isinstance(value, str):
            raise LocalProtocolError(f"string value {value!r} is not a str")
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"string is not encodable as UTF-8: {exc.reason}") from None

    def string(self, value: str | None) -> None:
        """Write a classic string (int16 length; ``None`` = null)."""
        if value is None:
            self.buf += b"\xff\xff"
            return
        data = self._utf8(value)
        if len(data) > 0x7FFF:
            raise LocalProtocolError(f"string of {len(data)} bytes exceeds the int16 length")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def compact_string(self, value: str | None) -> None:
        """Write a compact string (``None`` = null)."""
        if value is None:
            self.buf.append(0)
            return
        data = self._utf8(value)
        if len(data) > 0x7FFFFFFF:
            raise LocalProtocolError(f"string of {len(data)} bytes is too long")
        self.uvarint(len(data) + 1)
        self.buf += data

    @staticmethod
    def _check_bytes(value: object) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            # The type only, not the value: bytes fields may carry credentials (SASL tokens).
            raise LocalProtocolError(
                f"bytes value of type {type(value).__name__} is not bytes-like"
            )

    def bytes(self, value: builtins.bytes | bytearray | memoryview | None) -> None:
        """Write classic bytes (int32 length; ``None`` = null)."""
        if value is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        self._check_bytes(value)
        self.int32(len(value))
        self.buf += value

    def compact_bytes(self, value: builtins.bytes | bytearray | memoryview | None) -> None:
        """Write compact bytes (``None`` = null)."""
        if value is None:
            self.buf.append(0)
            return
        self._check_bytes(value)
        self.uvarint(len(value) + 1)
        self.buf += value

    def raw(self, value: builtins.bytes | bytearray | memoryview) -> None:
        """Append raw bytes."""
        self.buf += value

    # -- tagged fields ---------------------------------------------------------------

    def tagged_section(self, fields: list[tuple[int, builtins.bytes]] | UnknownTags) -> None:
        """Write a tagged-field section from ``(tag, payload)`` pairs, sorted by tag.

        :raises LocalProtocolError: if a tag appears twice or is negative.
        """
        if not fields:
            self.buf.append(0)
            return
        ordered = sorted(fields, key=lambda f: f[0])
        prev = -1
        for tag, _ in ordered:
            if tag <= prev:
                raise LocalProtocolError(f"tagged field {tag} appears twice or is negative")
            prev = tag
        self.uvarint(len(ordered))
        for tag, payload in ordered:
            self.uvarint(tag)
            self.uvarint(len(payload))
            self.buf += payload
