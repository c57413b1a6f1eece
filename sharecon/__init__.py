"""sharecon: an asyncio (anyio) client for Apache Kafka share groups (KIP-932).

The public surface is re-exported here as the layers that provide it land.
"""

from __future__ import annotations

import logging

from sharecon import errors
from sharecon._version import __version__
from sharecon.errors import KafkaError

__all__ = ["KafkaError", "__version__", "errors"]

# Library etiquette: we never configure logging; applications do.
logging.getLogger(__name__).addHandler(logging.NullHandler())
