"""Whole numbers written in text from outside (ports, HTTP lengths, property values)."""

from __future__ import annotations

__all__ = ["ascii_int"]


def ascii_int(text: str) -> int | None:
    """``text`` as a whole number >= 0 written in ASCII digits only; None otherwise.

    ``str.isdigit`` alone is not enough: it takes "²", which ``int()`` refuses; and
    ``int()`` refuses more digits than ``sys.get_int_max_str_digits()`` (a hostile HTTP
    length), which is no number here either.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:
        return None
