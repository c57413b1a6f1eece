"""Which build of sharecon is running: pure Python, or with its per-record modules
compiled by mypyc (``SHARECON_COMPILE=1 pip install .``; see docs/performance.md).

``hatch_build.py`` reads :data:`MODULES` from this file without importing sharecon, so
this module imports nothing of sharecon at its top.
"""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

__all__ = ["MODULES", "compiled_modules"]

#: The modules the compiled build compiles: those a record passes through. Decoding and
#: the producer's batch encoder (records), the buffer between fetch loops and the
#: iterator, the acknowledgement ranges and ledger, the consumer's per-record answers
#: (core), the records' owners and factories (handout), ``async for``'s step and the
#: liveness counters it updates per record (cursor, liveness), the share machine they go
#: through (machine, effects, answers), the counters behind ``metrics()``; the producer's
#: engine (record inputs, batches, accumulator); the ShareFetch answer's decoder
#: (``_share_fetch_codec``, used in place of the generated one only when compiled).
#:
#: To compile another module, add its dotted name here, nothing else: ``hatch_build.py``,
#: ``scripts/release`` (every compiled wheel), ``scripts/test-compiled`` and
#: ``tests/test_build.py`` all read this tuple. A package's modules are listed one by one
#: (``"sharecon._produce.batch"``, ...). Its imports must type-check under
#: ``mypy --strict``, as mypyc checks them in the wheel's build.
MODULES = (
    "sharecon.protocol.records",
    "sharecon.protocol._share_fetch_codec",
    "sharecon._produce.inputs",
    "sharecon._produce.batch",
    "sharecon._produce.accumulator",
    "sharecon._consumer.buffer",
    "sharecon._consumer.core",
    "sharecon._consumer.handout",
    "sharecon._consumer.cursor",
    "sharecon._consumer.liveness",
    "sharecon._share.acks",
    "sharecon._share.acquired",
    "sharecon._share.intake",
    "sharecon._share.partition_ids",
    "sharecon._share.requests",
    "sharecon._share.ledger",
    "sharecon._share.effects",
    "sharecon._share.machine",
    "sharecon._share.answers",
    "sharecon._stats",
)


def compiled_modules() -> list[str]:
    """The names in :data:`MODULES` that were imported from an extension module."""
    suffixes = tuple(EXTENSION_SUFFIXES)
    out = []
    for name in MODULES:
        path = getattr(importlib.import_module(name), "__file__", None) or ""
        if path.endswith(suffixes):
            out.append(name)
    return out
