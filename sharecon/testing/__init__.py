"""Test support for sharecon and for applications built on it: a real Kafka broker.

* :class:`KafkaBroker`: start a Kafka 4.x broker (KRaft, share groups on) from Python.
* :class:`KafkaTools`: Kafka's Java tools (topics, group configs, producing) for arranging tests.
* ``sharecon.testing.pytest_plugin``: pytest fixtures built on both.

See ``docs/testing.md``.
"""

from __future__ import annotations

from sharecon.testing._provision import (
    DEFAULT_KAFKA_VERSION,
    LATEST_PATCH,
    BrokerStartError,
    provision,
)
from sharecon.testing.broker import KafkaBroker, SaslSetup, TlsSetup
from sharecon.testing.tools import FeatureLevel, KafkaToolError, KafkaTools, ProduceResult

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "LATEST_PATCH",
    "BrokerStartError",
    "FeatureLevel",
    "KafkaBroker",
    "KafkaToolError",
    "KafkaTools",
    "ProduceResult",
    "SaslSetup",
    "TlsSetup",
    "provision",
]
