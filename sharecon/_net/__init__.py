"""Network layer (anyio): broker connections and the cluster view.

Knows frames, correlation ids and versions; knows nothing of share-group semantics.
Every anyio/OS exception is mapped to :mod:`sharecon.errors` here, once.
"""

from __future__ import annotations
