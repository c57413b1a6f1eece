"""How the CLI shows bytes in text mode: every form tells null, text and binary apart."""

from __future__ import annotations

import json

import pytest

from sharecon.cli._encoding import text_of


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        (None, "null"),
        (b"null", '"null"'),
        (b"", ""),
        (b"plain text", "plain text"),
        (b"\xc3\xa9t\xc3\xa9", "été"),
        (b'{"amount": 3}', '{"amount": 3}'),
        (b'"quoted"', '"\\"quoted\\""'),
        (b"base64:aGk=", '"base64:aGk="'),
        (b"a\tb\nc", '"a\\tb\\nc"'),
        (b"zero\xe2\x80\x8bwidth", '"zero\\u200bwidth"'),
        (b"\xff\x00", "base64:/wA="),
        (b"NULL", "NULL"),
    ],
)
def test_text_of(data: bytes | None, shown: str) -> None:
    assert text_of(data) == shown


@pytest.mark.parametrize(
    "data", [b"null", b'"null"', b"base64:x", b"a\tb", b"\x7f", b"x\xe2\x80\x8by", b'"']
)
def test_quoted_forms_read_back_as_the_same_text(data: bytes) -> None:
    """A quoted form is a JSON string: json.loads gives the original text back."""
    shown = text_of(data)
    assert shown.startswith('"') and shown.isprintable()
    assert json.loads(shown) == data.decode()


def test_no_two_inputs_look_alike() -> None:
    inputs = [None, b"null", b'"null"', b"", b'""', b"base64:/wA=", b"\xff\x00", b"x", b'"x"']
    shown = [text_of(d) for d in inputs]
    assert len(set(shown)) == len(shown), shown
