"""Every Kafka broker error code, by name, for the protocol layer and those above it.

``ErrorCode`` is generated into :mod:`sharecon.errors` by tools/gen_errors.py from the one
table in tools/spec/errors/; it is re-exported here so the layers say
``ErrorCode.NOT_COORDINATOR`` instead of a bare 16. Its members are ints, so
``response.error_code == ErrorCode.NOT_COORDINATOR`` and ``code in {ErrorCode.X, ...}``
work on the raw int16 a decoder returns.
"""

from __future__ import annotations

from sharecon.errors import ErrorCode

__all__ = ["ErrorCode"]
