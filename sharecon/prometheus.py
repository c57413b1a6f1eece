"""A Prometheus collector for sharecon's clients (the ``sharecon[prometheus]`` extra).

::

    from prometheus_client import REGISTRY, start_http_server
    from sharecon.prometheus import ShareconCollector

    collector = ShareconCollector()
    REGISTRY.register(collector)
    collector.add(consumer)          # after start(); and any producers
    start_http_server(9100)

Every field of ``consumer.metrics()`` / ``producer.metrics()`` becomes one family named
``sharecon_consumer_<field>`` / ``sharecon_producer_<field>``: ``*_total`` fields are
counters, the rest gauges. Following Prometheus' naming rules, times in milliseconds are
exported in seconds with a ``_seconds`` suffix (``fetch_latency_avg`` ->
``sharecon_consumer_fetch_latency_avg_seconds``), and byte sizes get ``_bytes``
(``fetch_size_avg`` -> ``sharecon_consumer_fetch_size_avg_bytes``). Consumer samples carry
the labels ``client_id``, ``group`` and ``member_id``; producer samples ``client_id``
(give producers distinct ``client_id`` values, or their samples collide). Each field of
``consumer.partition_metrics()`` becomes ``sharecon_consumer_partition_<field>`` with the
consumer's labels plus ``topic`` and ``partition`` (``records_lag``: the share-partition lag
the broker reports).

Values are read when Prometheus scrapes: nothing runs between scrapes. Clients are held
weakly: a client that is garbage-collected drops out of the output.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sharecon.consumer import ShareConsumer
from sharecon.metrics import CONSUMER_METRICS, PARTITION_METRICS, PRODUCER_METRICS, MetricInfo
from sharecon.producer import Producer

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = ["ShareconCollector", "metric_name"]

_CONSUMER_LABELS = ("client_id", "group", "member_id")
_PARTITION_LABELS = (*_CONSUMER_LABELS, "topic", "partition")
_PRODUCER_LABELS = ("client_id",)


def metric_name(prefix: str, info: MetricInfo) -> tuple[str, float]:
    """The Prometheus name of ``info`` (without a counter's ``_total``) and the factor its
    values are multiplied by (milliseconds become seconds)."""
    base = info.field.removesuffix("_total") if info.kind == "counter" else info.field
    scale = 1.0
    if info.unit == "ms":
        base, scale = f"{base}_seconds", 0.001
    elif info.unit == "By" and "bytes" not in base:
        base = f"{base}_bytes"
    return f"{prefix}_{base}", scale


def _family(
    name: str, info: MetricInfo, labels: Sequence[str]
) -> CounterMetricFamily | GaugeMetricFamily:
    if info.kind == "counter":
        return CounterMetricFamily(name, info.description, labels=labels)
    return GaugeMetricFamily(name, info.description, labels=labels)


class ShareconCollector(Collector):
    """Exposes the metrics of the consumers and producers given to :meth:`add`.

    :param clients: clients to expose from the start (started consumers, opened producers).
    :param namespace: the first part of every metric name.
    """

    def __init__(self, *clients: ShareConsumer | Producer, namespace: str = "sharecon") -> None:
        self._namespace = namespace
        self._consumers: weakref.WeakSet[ShareConsumer] = weakref.WeakSet()
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        for client in clients:
            self.add(client)

    def add(self, client: ShareConsumer | Producer) -> None:
        """Expose ``client``'s metrics (a consumer or producer not started yet is skipped
        until it is).

        :raises TypeError: ``client`` is neither a ShareConsumer nor a Producer.
        """
        if isinstance(client, ShareConsumer):
            self._consumers.add(client)
        elif isinstance(client, Producer):
            self._producers.add(client)
        else:
            raise TypeError(f"expected a ShareConsumer or Producer, not {type(client).__name__}")

    def remove(self, client: ShareConsumer | Producer) -> None:
        """Stop exposing ``client``."""
        self._consumers.discard(client)  # type: ignore[arg-type]
        self._producers.discard(client)  # type: ignore[arg-type]

    def describe(self) -> Iterable[Metric]:
        """The families this collector yields (without samples), for the registry's
        duplicate-name check."""
        return list(self._families(with_samples=False))

    def collect(self) -> Iterable[Metric]:
        """Read every client's metrics now."""
        return list(self._families(with_samples=True))

    def _families(self, *, with_samples: bool) -> Iterator[Metric]:
        consumers = []
        partitions: list[tuple[tuple[str, ...], object]] = []
        producers = []
        if with_samples:
            for consumer in list(self._consumers):
                try:
                    m = consumer.metrics()
                    per_partition = consumer.partition_metrics()
                except RuntimeError:
                    continue  # not started yet
                labels = (m.client_id, m.group_id, consumer.member_id)
                consumers.append((labels, m))
                partitions.extend(((*labels, p.topic, str(p.partition)), p) for p in per_partition)
            for producer in list(self._producers):
                try:
                    pm = producer.metrics()
                except Exception:
                    continue
                producers.append(((pm.client_id,), pm))
        yield from self._build(
            f"{self._namespace}_consumer", CONSUMER_METRICS, _CONSUMER_LABELS, consumers
        )
        yield from self._build(
            f"{self._namespace}_consumer_partition",
            PARTITION_METRICS,
            _PARTITION_LABELS,
            partitions,
        )
        yield from self._build(
            f"{self._namespace}_producer", PRODUCER_METRICS, _PRODUCER_LABELS, producers
        )

    @staticmethod
    def _build(
        prefix: str,
        table: Sequence[MetricInfo],
        labels: Sequence[str],
        snapshots: Sequence[tuple[tuple[str, ...], object]],
    ) -> Iterator[Metric]:
        for info in table:
            name, scale = metric_name(prefix, info)
            family = _family(name, info, labels)
            for label_values, snapshot in snapshots:
                value = getattr(snapshot, info.field)
                family.add_metric(list(label_values), value * scale)
            yield family
