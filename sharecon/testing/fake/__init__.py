"""``FakeKafka``: an in-process Kafka broker for fast tests of share-group code.

It speaks Kafka's wire protocol on loopback, so :class:`~sharecon.ShareConsumer`,
:class:`~sharecon.Producer`, :class:`~sharecon.Admin`, the CLI and the worker run against
it unchanged; its share-partition semantics are the model broker's
(:mod:`sharecon.testing.model`), which the conformance suite holds true against real
Kafka 4.1 and 4.4. See "FakeKafka" in ``docs/testing.md`` for when to use it and its limits.
"""

from __future__ import annotations

from sharecon.testing.fake.server import FakeKafka

__all__ = ["FakeKafka"]
