"""sharecon.sync.Producer and Admin against a real broker: futures, flush, typed errors in
the caller's thread, sends from several threads, admin calls."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon.sync import Admin, Producer, SendFuture, ShareConsumer
from tests.sync.conftest import take

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.broker]


def test_send_futures_flush_and_typed_errors(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    done: list[int] = []
    with Producer(kafka_bootstrap, max_request_size=10_000, max_batch_bytes=8_000) as producer:
        futures = [producer.send(topic, b"r%d" % i, key=b"k") for i in range(10)]
        assert all(isinstance(f, SendFuture) for f in futures)
        futures[0].add_done_callback(lambda f: done.append(f.result().offset))
        producer.flush(timeout=60)
        assert all(f.done() for f in futures)  # flush returns once every future is done
        offsets = [f.result(timeout=0).offset for f in futures]
        assert offsets == sorted(offsets) and len(set(offsets)) == 10
        with pytest.raises(errors.MessageTooLargeError):
            producer.send(topic, b"x" * 20_000)
        # Sends from several threads at once.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            sent = list(pool.map(lambda i: producer.send(topic, b"t%d" % i), range(40)))
        assert len({f.result(timeout=60).offset for f in sent}) == 40
        assert producer.partitions_for(topic, timeout=30) == 1
        assert producer.metrics() is not None
    assert done == [offsets[0]]
    with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
        assert len(take(consumer, 50)) == 50


def test_admin_calls_without_await(kafka_bootstrap: str) -> None:
    name = f"sync-admin-{threading.get_ident()}"
    with Admin(kafka_bootstrap) as admin:
        created = admin.create_topics([name], num_partitions=2, exist_ok=True)
        assert [t.name for t in created] == [name]
        assert name in admin.list_topics()
        assert admin.describe_cluster().brokers
        admin.alter_group_config(f"g-{name}", {"share.auto.offset.reset": "earliest"})
        entries = admin.describe_group_config(f"g-{name}", ["share.auto.offset.reset"])
        assert "share.auto.offset.reset" in entries
        admin.delete_topics([name])
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics([name])
