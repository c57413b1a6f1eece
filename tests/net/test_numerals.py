"""Whole numbers read from text: ASCII digits only."""

from __future__ import annotations

import sys

import pytest

from sharecon._net.numerals import ascii_int


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("9092", 9092), ("007", 7), ("", None), ("-1", None), (" 1", None)],
)
def test_ascii_digits_are_read(text: str, expected: int | None) -> None:
    assert ascii_int(text) == expected


@pytest.mark.parametrize("text", ["\u00b2", "\u0663", "1\u00b2"])  # digits to str.isdigit
def test_other_digits_are_not(text: str) -> None:
    assert text.isdigit() and ascii_int(text) is None


@pytest.mark.skipif(
    not hasattr(sys, "get_int_max_str_digits"), reason="no digit limit before 3.10.7"
)
def test_more_digits_than_int_reads_are_no_number() -> None:
    assert ascii_int("9" * (sys.get_int_max_str_digits() + 1)) is None
