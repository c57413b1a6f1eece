"""The compiled build's C helpers (``sharecon/_speedups.c``), where they are built.

:data:`speedups` is the module ``sharecon._speedups`` in the compiled build (built by
``hatch_build.py`` beside the mypyc-compiled modules), ``None`` in the pure build, which
has no C. ``SHARECON_SPEEDUPS=0`` in the environment leaves them out of a compiled build
too (read at import): the Python paths they stand in for are then the ones run, which is
how ``benchmarks/handout.py --without-c`` compares the two.

Every user of a helper keeps the Python twin it stands in for, and runs that when
:data:`speedups` is ``None``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from sharecon._speedups import RecordLayout, RecordMaker

__all__ = ["RecordLayoutType", "RecordMakerType", "speedups"]


def _load() -> ModuleType | None:
    if os.environ.get("SHARECON_SPEEDUPS", "").strip() == "0":
        return None
    try:
        import sharecon._speedups as module
    except ImportError:  # the pure build
        return None
    return module


#: ``sharecon._speedups``, or ``None`` (the pure build, or ``SHARECON_SPEEDUPS=0``).
speedups: ModuleType | None = _load()

#: The helpers, each ``None`` where :data:`speedups` is.
RecordLayoutType: type[RecordLayout] | None = None
RecordMakerType: type[RecordMaker] | None = None
if speedups is not None:
    RecordLayoutType = speedups.RecordLayout
    RecordMakerType = speedups.RecordMaker
