"""Sans-I/O Kafka wire protocol: primitives, headers, messages, record batches, codecs.

Rules for everything under this package: no sockets, no anyio/asyncio, no clocks, no
logging. Decoders return a value or raise :class:`sharecon.errors.RemoteProtocolError`
(or its subclass :class:`~sharecon.errors.CorruptRecordError`); encoders return bytes
or raise :class:`sharecon.errors.LocalProtocolError`. Any other exception is a bug.
"""

from __future__ import annotations
