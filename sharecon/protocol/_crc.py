"""CRC-32C (Castagnoli), the record batch checksum: the ``crc32c`` package's C function.

Why not a plain ``import crc32c``: the package's ``__init__`` asks ``importlib.metadata``
for its own version and imports its command line (``argparse``), some 30 ms of CPU at
the start of every process, more than all of a share consumer's protocol messages
(docs/performance.md, "The import counts too"). The function lives in the package's C
extension module, ``crc32c._crc32c``, which needs neither: it is loaded by itself where
the package is laid out so (crc32c 2.5 and later), and put in ``sys.modules`` under its
own name, so that a later ``import crc32c`` uses the same module. Anything else (another
layout, a loader that refuses) falls back to the plain import: the same function, only
slower to import.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from importlib.util import find_spec, module_from_spec, spec_from_file_location
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

__all__ = ["crc32c"]

_EXTENSION = "crc32c._crc32c"


def _extension() -> ModuleType | None:
    """``crc32c._crc32c`` loaded without its package's ``__init__``, or None."""
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    package = find_spec("crc32c")  # finds the package; does not import it
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.isfile(path):
                continue
            loader = ExtensionFileLoader(_EXTENSION, path)
            spec = spec_from_file_location(_EXTENSION, path, loader=loader)
            if spec is None:
                return None
            module = module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[_EXTENSION] = module
            return module
    return None


def _load() -> Callable[[bytes | memoryview], int]:
    try:
        module = _extension()
    except (ImportError, OSError):
        module = None
    function: object = getattr(module, "crc32c", None)
    if callable(function):
        return function
    import crc32c

    return crc32c.crc32c


#: ``crc32c(data) -> int``: the CRC-32C of ``data`` (bytes or a memoryview).
crc32c: Callable[[bytes | memoryview], int] = _load()
