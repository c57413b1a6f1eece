"""sharecon: an asyncio (anyio) client for Apache Kafka share groups (KIP-932).

::

    from sharecon import ShareConsumer

    async with ShareConsumer("localhost:9092", group_id="billing", topics=["invoices"]) as c:
        async for record in c:
            await handle(record)
"""

from __future__ import annotations

import logging

from sharecon import errors
from sharecon._build import compiled_modules as _compiled_modules
from sharecon._net.health import BrokerHealth, ClusterHealth
from sharecon._share.acks import AckBatch
from sharecon._share.ledger import AckFailure, AckResult
from sharecon._version import __version__
from sharecon.admin import Admin
from sharecon.config import Backoff, ConnectionConfig, SaslConfig, TlsConfig
from sharecon.consumer import ConsumerHealth, ShareConsumer
from sharecon.dlq import DeadLetterInfo, DeadLetterPolicy
from sharecon.errors import KafkaError
from sharecon.metrics import ConsumerMetrics, PartitionMetrics, ProducerMetrics
from sharecon.producer import Producer, ProducerRecord, RecordFuture, RecordMetadata
from sharecon.record import Record, RecordedAcks, RetryLater, TimestampType
from sharecon.types import AckType, Header, TopicIdPartition, TopicPartition

__all__ = [
    "AckBatch",
    "AckFailure",
    "AckResult",
    "AckType",
    "Admin",
    "Backoff",
    "BrokerHealth",
    "ClusterHealth",
    "ConnectionConfig",
    "ConsumerHealth",
    "ConsumerMetrics",
    "DeadLetterInfo",
    "DeadLetterPolicy",
    "Header",
    "KafkaError",
    "Producer",
    "PartitionMetrics",
    "ProducerMetrics",
    "ProducerRecord",
    "Record",
    "RecordFuture",
    "RecordMetadata",
    "RecordedAcks",
    "RetryLater",
    "SaslConfig",
    "ShareConsumer",
    "TimestampType",
    "TlsConfig",
    "TopicIdPartition",
    "TopicPartition",
    "__version__",
    "COMPILED",
    "errors",
]

COMPILED: bool = bool(_compiled_modules())
"""True when the per-record modules are the compiled (mypyc) build, False in pure Python.

Install the compiled build with ``SHARECON_COMPILE=1 pip install .`` (a C compiler is
needed); both builds behave the same and pass the same tests. See the performance guide.
"""

# Library etiquette: we never configure logging; applications do.
logging.getLogger(__name__).addHandler(logging.NullHandler())
