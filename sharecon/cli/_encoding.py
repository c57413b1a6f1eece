"""Bytes <-> JSON and text for records: UTF-8 when valid, base64 otherwise (and say which).

The JSON shape written by ``consume --json`` and ``dlq inspect --json`` is also what
``produce --format json`` reads, so records can be piped from one cluster to another::

    {"topic": "t", "partition": 0, "offset": 7, "key": "k", "value": "aGk=",
     "value_encoding": "base64", "headers": [{"key": "h", "value": "v"}],
     "timestamp": 1700000000000, "delivery_count": 1}

``key_encoding`` / ``value_encoding`` (and a header's ``encoding``) appear only when the
bytes are not valid UTF-8; their value is then ``"base64"``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon.record import Record

__all__ = [
    "InputLineError",
    "decode_field",
    "encode_field",
    "headers_from_json",
    "headers_to_json",
    "record_to_json",
    "text_of",
]


class InputLineError(ValueError):
    """One input line cannot be turned into a record; the message says why."""


def encode_field(data: bytes | None) -> tuple[str | None, str | None]:
    """``(text, encoding)``: UTF-8 text and ``None``, or base64 text and ``"base64"``."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def decode_field(value: object, encoding: object, what: str) -> bytes | None:
    """The bytes a JSON field stands for.

    A string is UTF-8 text (or base64 when ``encoding`` is ``"base64"``); ``null`` is no
    bytes; any other JSON value (number, object, list, boolean) is stored as its compact
    JSON text, so ``{"value": {"amount": 3}}`` produces ``{"amount":3}``.

    :raises InputLineError: a wrong encoding name or invalid base64, naming the field.
    """
    if encoding not in (None, "utf-8", "utf8", "base64"):
        raise InputLineError(f"{what}_encoding must be 'base64' or 'utf-8', not {encoding!r}")
    if value is None:
        return None
    if encoding == "base64":
        if not isinstance(value, str):
            raise InputLineError(f"{what} must be a string when {what}_encoding is base64")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InputLineError(f"{what} is not valid base64") from None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def headers_to_json(headers: Sequence[tuple[str, bytes | None]]) -> list[dict[str, Any]]:
    """Headers as a JSON list of ``{"key", "value"[, "encoding"]}`` (order and duplicates kept)."""
    out: list[dict[str, Any]] = []
    for key, value in headers:
        text, encoding = encode_field(value)
        item: dict[str, Any] = {"key": key, "value": text}
        if encoding is not None:
            item["encoding"] = encoding
        out.append(item)
    return out


def headers_from_json(data: object) -> list[tuple[str, bytes | None]]:
    """Headers from JSON: a list of ``{"key", "value"[, "encoding"]}`` objects or
    ``[key, value]`` pairs, or an object ``{key: value}``.

    :raises InputLineError: for any other shape, naming what was wrong.
    """
    if data is None:
        return []
    if isinstance(data, dict):
        return [(str(k), decode_field(v, None, f"header {k!r}")) for k, v in data.items()]
    if not isinstance(data, list):
        raise InputLineError("headers must be a list or an object")
    out: list[tuple[str, bytes | None]] = []
    for i, item in enumerate(data):
        if isinstance(item, dict):
            key = item.get("key")
            if not isinstance(key, str):
                raise InputLineError(f"headers[{i}] needs a string 'key'")
            out.append((key, decode_field(item.get("value"), item.get("encoding"), "header")))
        elif isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            out.append((item[0], decode_field(item[1], None, f"header {item[0]!r}")))
        else:
            raise InputLineError(
                f"headers[{i}] must be {{'key': ..., 'value': ...}} or [key, value]"
            )
    return out


def record_to_json(record: Record, **extra: object) -> dict[str, Any]:
    """The JSON object ``consume --json`` prints for one record (``extra`` fields appended)."""
    key, key_encoding = encode_field(record.key)
    value, value_encoding = encode_field(record.value)
    out: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": key,
    }
    if key_encoding:
        out["key_encoding"] = key_encoding
    out["value"] = value
    if value_encoding:
        out["value_encoding"] = value_encoding
    out["headers"] = headers_to_json(record.headers)
    out["timestamp"] = record.timestamp
    out["delivery_count"] = record.delivery_count
    out.update(extra)
    return out


def text_of(data: bytes | None) -> str:
    """Bytes for a human, in one unambiguous token (the text output of ``consume`` and
    ``dlq``):

    * ``null``: no bytes at all (a missing key or value, a null header value);
    * the text itself, when it is printable UTF-8 that cannot be mistaken for another form;
    * a JSON string literal (``"null"``, ``"a\\tb"``) when the text is ``null``, starts with
      ``"`` or ``base64:``, or holds characters that are not printable (tabs, newlines,
      control and invisible characters, escaped as ``\\t``, ``\\n``, ``\\uXXXX``);
    * ``base64:...`` for bytes that are not UTF-8.
    """
    if data is None:
        return "null"
    text, encoding = encode_field(data)
    assert text is not None
    if encoding is not None:
        return "base64:" + text
    if text.isprintable() and text != "null" and not text.startswith(('"', "base64:")):
        return text
    return _quoted(text)


def _quoted(text: str) -> str:
    """``text`` as a JSON string literal with every non-printable character escaped
    (json.dumps leaves invisible ones such as U+200B as they are)."""
    literal = json.dumps(text, ensure_ascii=False)
    if literal.isprintable():
        return literal
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in literal)
