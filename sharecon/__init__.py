"""sharecon: an asyncio (anyio) client for Apache Kafka share groups (KIP-932).

::

    from sharecon import ShareConsumer

    async with ShareConsumer("localhost:9092", group_id="billing", topics=["invoices"]) as c:
        async for record in c:
            await handle(record)
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon._version import __version__
from sharecon.errors import KafkaError

if TYPE_CHECKING:
    from sharecon._net.health import BrokerHealth, ClusterHealth
    from sharecon._share.acks import AckBatch
    from sharecon._share.ledger import AckFailure, AckResult
    from sharecon.admin import Admin
    from sharecon.config import Backoff, ConnectionConfig, SaslConfig, TlsConfig
    from sharecon.consumer import ConsumerHealth, ShareConsumer
    from sharecon.dlq import DeadLetterInfo, DeadLetterPolicy
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

COMPILED: bool
"""True when the per-record modules are the compiled (mypyc) build, False in pure Python.

Install the compiled build with ``SHARECON_COMPILE=1 pip install .`` (a C compiler is
needed); both builds behave the same and pass the same tests. See the performance guide.
Worked out on first use: finding out imports every compiled module, the producer's too.
"""

#: Public name -> the module that defines it. Each is imported the first time its name
#: is asked for (PEP 562), so ``from sharecon import ShareConsumer`` imports the
#: consumer and what it needs, never the admin client, the producer or the command line.
_HOME = {
    "AckBatch": "sharecon._share.acks",
    "AckFailure": "sharecon._share.ledger",
    "AckResult": "sharecon._share.ledger",
    "AckType": "sharecon.types",
    "Admin": "sharecon.admin",
    "Backoff": "sharecon.config",
    "BrokerHealth": "sharecon._net.health",
    "ClusterHealth": "sharecon._net.health",
    "ConnectionConfig": "sharecon.config",
    "ConsumerHealth": "sharecon.consumer",
    "ConsumerMetrics": "sharecon.metrics",
    "DeadLetterInfo": "sharecon.dlq",
    "DeadLetterPolicy": "sharecon.dlq",
    "Header": "sharecon.types",
    "PartitionMetrics": "sharecon.metrics",
    "Producer": "sharecon.producer",
    "ProducerMetrics": "sharecon.metrics",
    "ProducerRecord": "sharecon.producer",
    "Record": "sharecon.record",
    "RecordFuture": "sharecon.producer",
    "RecordMetadata": "sharecon.producer",
    "RecordedAcks": "sharecon.record",
    "RetryLater": "sharecon.record",
    "SaslConfig": "sharecon.config",
    "ShareConsumer": "sharecon.consumer",
    "TimestampType": "sharecon.record",
    "TlsConfig": "sharecon.config",
    "TopicIdPartition": "sharecon.types",
    "TopicPartition": "sharecon.types",
}


def __getattr__(name: str) -> object:
    value: object
    home = _HOME.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
    elif name == "COMPILED":
        from sharecon._build import compiled_modules

        value = bool(compiled_modules())
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# Library etiquette: we never configure logging; applications do.
logging.getLogger(__name__).addHandler(logging.NullHandler())
