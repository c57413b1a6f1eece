"""The package version, importable from every layer."""

from __future__ import annotations

__version__ = "0.1.0.dev0"
