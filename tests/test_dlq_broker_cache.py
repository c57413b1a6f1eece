"""When the dead-letter router asks the broker's dead-letter config again (sans-I/O)."""

from __future__ import annotations

from sharecon.dlq import BrokerDlqCache


def test_a_value_is_trusted_for_the_ttl_then_asked_again() -> None:
    cache = BrokerDlqCache(ttl=30.0, retry=1.0)
    assert cache.needs_lookup(0.0)
    cache.on_value(0.0, "dlq.g")
    assert cache.topic == "dlq.g"
    assert not cache.needs_lookup(29.9)
    # The group config changed meanwhile: the next lookup after the TTL sees it.
    assert cache.needs_lookup(30.0)
    cache.on_value(30.0, "")
    assert cache.topic is None


def test_a_transient_failure_is_retried_soon_and_copies_meanwhile() -> None:
    cache = BrokerDlqCache(ttl=30.0, retry=1.0)
    cache.on_value(0.0, "dlq.g")
    cache.on_error(40.0, retriable=True)
    assert cache.topic is None  # the client copies until it knows better
    assert not cache.needs_lookup(40.5)
    assert cache.needs_lookup(41.0)
    cache.on_value(41.0, "dlq.g")
    assert cache.topic == "dlq.g"


def test_a_refused_lookup_waits_for_the_ttl() -> None:
    cache = BrokerDlqCache(ttl=30.0, retry=1.0)
    cache.on_error(0.0, retriable=False)  # e.g. no DESCRIBE_CONFIGS on the group
    assert cache.topic is None
    assert not cache.needs_lookup(29.0)
    assert cache.needs_lookup(30.0)
