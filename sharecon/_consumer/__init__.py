"""Internals of :class:`sharecon.ShareConsumer` (layer 4): the loops it owns and their helpers."""

from __future__ import annotations
