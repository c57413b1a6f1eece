"""Progress bars on stderr (rich), only where a person is watching.

A bar is drawn when stderr is a terminal and ``--quiet`` was not given; otherwise the
same calls do nothing, so pipes and scripts see clean output.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = ["Progress"]


class Progress:
    """``with Progress("producing", total=n, enabled=...) as bar: bar.advance(k)``."""

    def __init__(self, description: str, *, total: float | None, enabled: bool = True) -> None:
        self._description = description
        self._total = total
        self._enabled = enabled and sys.stderr.isatty()
        self._progress: RichProgress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Progress:
        if self._enabled:
            # Imported here: rich costs import time that quiet runs need not pay.
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
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
