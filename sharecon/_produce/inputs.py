"""One record's inputs, normalised and sized: the argument checks of the per-record path.

Every wrong argument raises :class:`~sharecon.errors.ConfigError` naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon.types import Header

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "BATCH_OVERHEAD",
    "MAX_TIMESTAMP",
    "NO_HEADERS",
    "RECORD_OVERHEAD",
    "as_bytes",
    "normalise_headers",
    "record_size",
    "varint_size",
]

# Per-record overhead of the v2 record format beyond key, value and headers (varints,
# attributes, deltas), an upper bound; and the fixed batch header.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61
MAX_TIMESTAMP = 2**63 - 1  # the record format's int64
NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


def as_bytes(data: object, what: str) -> bytes | None:
    """``data`` as ``bytes`` (``str`` as UTF-8; ``None`` stays ``None``).

    :raises ConfigError: anything else, naming ``what``.
    """
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise errors.ConfigError(f"{what} must be bytes, str or None, not {type(data).__name__}")


def normalise_headers(headers: object) -> tuple[tuple[str, bytes | None], ...]:
    """A mapping, ``(key, value)`` pairs or :class:`~sharecon.types.Header` objects as a
    tuple of ``(str, bytes | None)`` pairs.

    :raises ConfigError: a key that is not ``str``, a value that is not bytes-like, ``str``
        or ``None``, or something that is neither a mapping nor pairs.
    """
    if not headers:
        return NO_HEADERS
    items: Iterable[object] = (
        headers.items() if isinstance(headers, Mapping) else headers  # type: ignore[assignment]
    )
    out: list[tuple[str, bytes | None]] = []
    # Declared as object: the compiled build checks each assignment against the type.
    hkey: object
    hvalue: object
    try:
        for item in items:
            if isinstance(item, Header):
                hkey, hvalue = item.key, item.value
            else:
                hkey, hvalue = item  # type: ignore[misc]
            if not isinstance(hkey, str):
                raise errors.ConfigError(f"header key must be str, not {type(hkey).__name__}")
            out.append((hkey, as_bytes(hvalue, f"header {hkey!r} value")))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, errors.ConfigError):
            raise
        raise errors.ConfigError(
            f"headers must be a mapping or (key, value) pairs, not {headers!r}"
        ) from None
    return tuple(out)


def varint_size(n: int) -> int:
    """Bytes of the zigzag varint of a length ``n >= 0`` (as the v2 record format writes it)."""
    return 1 if n < 64 else 2 if n < 8192 else 3 if n < 1048576 else 4 if n < 134217728 else 5


def record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """The record's encoded size: exact for the headers (each is key length, key, value
    length, value, the lengths as varints: 3 bytes for a 1-byte key and an empty value),
    an upper bound for the rest.

    :raises ConfigError: a header key that is not encodable as UTF-8 (a lone surrogate).
    """
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers:
        if hkey.isascii():
            n = len(hkey)
        else:
            try:
                n = len(hkey.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise errors.ConfigError(
                    f"header key {hkey!r} is not valid text: {exc.reason} at index {exc.start}"
                ) from None
        size += n + varint_size(n)
        if hvalue is None:
            size += 1  # length -1
        else:
            m = len(hvalue)
            size += m + varint_size(m)
    # The header count is a varint too (1 byte up to 63 headers, counted in the overhead).
    return size + varint_size(len(headers)) - 1
