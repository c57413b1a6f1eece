"""Shared helpers for the benchmark scripts: timing, tables, JSON results.

Benchmarks are measurements, not tests: nothing here asserts a timing.

Timing uses the process's CPU time (``time.process_time``) rather than wall time, and
keeps the best of several runs: other work on a shared machine then inflates a run
only through cache and frequency effects, not through time spent descheduled.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def best_time(fn: Callable[[], object], *, repeats: int = 7, min_time: float = 0.2) -> float:
    """Best CPU seconds for one call of ``fn``.

    Each of ``repeats`` runs calls ``fn`` in a loop for at least ``min_time`` CPU
    seconds and averages; the smallest average wins.
    """
    fn()  # warm up: imports, caches, lazily built tables
    best = float("inf")
    for _ in range(repeats):
        calls = 0
        start = time.process_time()
        elapsed = 0.0
        while elapsed < min_time or calls == 0:
            fn()
            calls += 1
            elapsed = time.process_time() - start
        best = min(best, elapsed / calls)
    return best


def fmt_rate(value: float) -> str:
    """A rate with thousands separators and no decimals (``1,234,567``)."""
    return f"{value:,.0f}"


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str = ""
) -> None:
    """Print rows as an aligned plain-text table (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(_looks_numeric(r[i]) for r in cells[1:]) if rows else False for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        )

    if title:
        print(title)
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    print()


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace(".", "").replace("x", "").replace("-", "")
    return stripped.isdigit() or text in ("", "n/a")


def environment(packages: Sequence[str] = ()) -> dict[str, Any]:
    """Python, platform and package versions, for the JSON results."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
        "timer": "time.process_time, best of repeated runs",
    }


def write_json(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``benchmarks/results/<name>.json`` (gitignored); return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path
