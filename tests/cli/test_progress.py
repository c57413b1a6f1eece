"""Progress bars say what they count: records, or bytes in byte units."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sharecon.cli._progress import Progress


def _render(unit: str, total: int, done: int) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with Progress("producing to t", total=total, unit=unit, console=console) as bar:  # type: ignore[arg-type]
        bar.advance(done)
    return out.getvalue()


def test_bytes_are_shown_in_byte_units() -> None:
    text = _render("bytes", 4_000_000, 1_000_000)
    assert "1.0/4.0 MB" in text
    assert "records" not in text and "1000000/4000000" not in text


def test_records_are_counted_as_records() -> None:
    text = _render("records", 5000, 1200)
    assert "1200/5000 records" in text


def test_no_bar_without_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with Progress("x", total=10, console=console) as bar:
        bar.advance(5)
    assert out.getvalue() == ""


def test_unknown_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="unit"):
        Progress("x", total=1, unit="lines")  # type: ignore[arg-type]
