"""Internals of :class:`sharecon.ShareConsumer` (layer 4): its engine behind the public
façade (``jobs``: start, the jobs in its task group, close; ``iteration``: the hand-out),
the loops it owns and their helpers (docs/architecture.md, "The consumer: a façade over an
engine")."""

from __future__ import annotations
