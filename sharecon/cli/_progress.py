"""Progress bars on stderr (rich), only where a person is watching.

A bar is drawn when stderr is a terminal and ``--quiet`` was not given; otherwise the
same calls do nothing, so pipes and scripts see clean output.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = ["Progress"]


class Progress:
    """``with Progress("producing", total=n, unit="records", enabled=...) as bar: bar.advance(k)``.

    ``unit`` says what is counted, and the bar shows it: ``"records"`` as ``1,200/5,000
    records``, ``"bytes"`` as ``1.2/5.0 MB`` with a transfer rate. ``console`` replaces the
    stderr console (tests); the bar is drawn only when that console is a terminal.
    """

    def __init__(
        self,
        description: str,
        *,
        total: float | None,
        unit: Literal["records", "bytes"] = "records",
        enabled: bool = True,
        console: Console | None = None,
    ) -> None:
        if unit not in ("records", "bytes"):
            raise ValueError(f"unit must be 'records' or 'bytes', not {unit!r}")
        self._description = description
        self._total = total
        self._unit = unit
        self._console = console
        terminal = console.is_terminal if console is not None else sys.stderr.isatty()
        self._enabled = enabled and terminal
        self._progress: RichProgress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Progress:
        if self._enabled:
            # Imported here: rich costs import time that quiet runs need not pay.
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                MofNCompleteColumn,
                ProgressColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )
            from rich.progress import Progress as RichProgress

            counted: list[ProgressColumn]
            if self._unit == "bytes":
                counted = [DownloadColumn(), TransferSpeedColumn()]
            else:
                counted = [MofNCompleteColumn(), TextColumn("records")]
            self._progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                *counted,
                TaskProgressColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self._console or Console(stderr=True),
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self._description, total=self._total)
        return self

    def advance(self, amount: float = 1) -> None:
        """Count ``amount`` more units done."""
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        """Change the total or the description."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, description=description)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)
            self._progress = None
