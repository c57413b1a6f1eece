"""Snapshots of a client's metrics: what ``consumer.metrics()``, ``producer.metrics()`` and
``admin.metrics()`` return.

Names and meanings follow the Java clients (``KafkaShareConsumer``'s
``consumer-share-fetch-manager-metrics``, ``consumer-share-metrics`` and
``consumer-share-coordinator-metrics`` groups; ``KafkaProducer``'s ``producer-metrics``;
the Java ``Admin``'s ``admin-client-metrics``):
each field's Java name is the field name with ``-`` for ``_`` (:meth:`ConsumerMetrics.as_dict`).
Fields without a Java counterpart are marked *sharecon* in :data:`CONSUMER_METRICS`.

Rates are per second over a 30-60 s sampled window (two 30 s samples, as Java); averages
and maxima cover the same window and are NaN when nothing happened in it; ``*_total``
fields count since the client started. Latencies and poll gaps are in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ADMIN_METRICS",
    "CONSUMER_METRICS",
    "PARTITION_METRICS",
    "PRODUCER_METRICS",
    "AdminMetrics",
    "ConsumerMetrics",
    "MetricInfo",
    "PartitionMetrics",
    "ProducerMetrics",
]


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """What one metric means.

    :ivar name: the Java-style name (``records-consumed-rate``).
    :ivar field: the snapshot's attribute (``records_consumed_rate``).
    :ivar kind: ``"counter"`` (only grows: a ``*-total``) or ``"gauge"`` (anything else).
    :ivar unit: ``"1"``, ``"1/s"``, ``"ms"``, ``"s"``, ``"By"``, ``"By/s"`` or ``"1/h"``.
    :ivar group: the Java metric group, or ``"sharecon"`` for ours.
    :ivar description: one sentence.
    """

    name: str
    field: str
    kind: Literal["counter", "gauge"]
    unit: str
    group: str
    description: str


_FETCH = "consumer-share-fetch-manager-metrics"
_SHARE = "consumer-share-metrics"
_COORD = "consumer-share-coordinator-metrics"
_OURS = "sharecon"
_PRODUCER = "producer-metrics"
_ADMIN = "admin-client-metrics"


def _table(rows: list[tuple[str, str, str, str]]) -> tuple[MetricInfo, ...]:
    # The Java name is the field name with dashes; a ``*_total`` only grows.
    return tuple(
        MetricInfo(
            field.replace("_", "-"),
            field,
            "counter" if field.endswith("_total") else "gauge",
            unit,
            group,
            description,
        )
        for field, unit, group, description in rows
    )


#: Every consumer metric, in :class:`ConsumerMetrics` field order.
CONSUMER_METRICS: tuple[MetricInfo, ...] = _table(
    [
        ("records_consumed_rate", "1/s", _FETCH, "Records acquired by share fetches per second."),
        ("records_consumed_total", "1", _FETCH, "Records acquired by share fetches."),
        ("bytes_consumed_rate", "By/s", _FETCH, "Record-batch bytes received per second."),
        ("bytes_consumed_total", "By", _FETCH, "Record-batch bytes received."),
        ("records_per_request_avg", "1", _FETCH, "Average records acquired per ShareFetch."),
        ("records_per_request_max", "1", _FETCH, "Most records acquired by one ShareFetch."),
        ("fetch_size_avg", "By", _FETCH, "Average record-batch bytes per ShareFetch."),
        ("fetch_size_max", "By", _FETCH, "Most record-batch bytes in one ShareFetch."),
        (
            "fetch_latency_avg",
            "ms",
            _FETCH,
            "Average ShareFetch round trip (includes the broker's wait for records).",
        ),
        ("fetch_latency_max", "ms", _FETCH, "Longest ShareFetch round trip."),
        ("fetch_rate", "1/s", _FETCH, "ShareFetch requests answered per second."),
        ("fetch_total", "1", _FETCH, "ShareFetch requests answered."),
        (
            "fetch_throttle_time_avg",
            "ms",
            _FETCH,
            "Average time the broker said it throttled ShareFetch answers (quotas).",
        ),
        (
            "fetch_throttle_time_max",
            "ms",
            _FETCH,
            "Longest ShareFetch throttle time the broker reported.",
        ),
        ("acknowledgements_send_rate", "1/s", _FETCH, "Record acknowledgements sent per second."),
        ("acknowledgements_send_total", "1", _FETCH, "Record acknowledgements sent."),
        (
            "acknowledgements_error_rate",
            "1/s",
            _FETCH,
            "Record acknowledgements that failed per second.",
        ),
        (
            "acknowledgements_error_total",
            "1",
            _FETCH,
            "Record acknowledgements that failed (broker error, or lock lost).",
        ),
        (
            "last_poll_seconds_ago",
            "s",
            _SHARE,
            "Seconds since the application last asked for records (-1: never).",
        ),
        (
            "time_between_poll_avg",
            "ms",
            _SHARE,
            "Average time between the application's asks for records.",
        ),
        (
            "time_between_poll_max",
            "ms",
            _SHARE,
            "Longest time between the application's asks for records.",
        ),
        ("heartbeat_rate", "1/s", _COORD, "Heartbeats answered per second."),
        ("heartbeat_total", "1", _COORD, "Heartbeats answered."),
        ("heartbeat_response_time_max", "ms", _COORD, "Longest heartbeat round trip."),
        (
            "last_heartbeat_seconds_ago",
            "s",
            _COORD,
            "Seconds since the last heartbeat answer (-1: none yet).",
        ),
        ("rebalance_total", "1", _COORD, "Assignment changes received from the coordinator."),
        ("rebalance_rate_per_hour", "1/h", _COORD, "Assignment changes per hour."),
        ("assigned_partitions", "1", _COORD, "Partitions assigned to this member."),
        ("buffered_records", "1", _OURS, "Records fetched and waiting for the application."),
        ("buffered_bytes", "By", _OURS, "Bytes of fetched records waiting for the application."),
        (
            "held_records",
            "1",
            _OURS,
            "Records handed to the application whose answers the broker has not confirmed yet.",
        ),
        (
            "lock_expired_records_total",
            "1",
            _OURS,
            "Records dropped before being handed out because their acquisition lock had ended.",
        ),
        (
            "released_unseen_records_total",
            "1",
            _OURS,
            "Records released without being handed out (at a close, a leave or an "
            "unsubscribe): each spent a delivery attempt nobody saw.",
        ),
        (
            "lost_unseen_records_total",
            "1",
            _OURS,
            "Records dropped without being handed out because their session ended or their "
            "partition's leader changed: their locks were gone.",
        ),
        (
            "fetches_late_total",
            "1",
            _OURS,
            "ShareFetch answers that took longer than the acquisition lock, or never came.",
        ),
        ("renewals_sent_total", "1", _OURS, "Lock renewals (RENEW) asked for."),
        ("renewals_failed_total", "1", _OURS, "Lock renewals the broker did not apply."),
        ("dlq_records_total", "1", _OURS, "Records written to a dead-letter topic."),
        (
            "dlq_errors_total",
            "1",
            _OURS,
            "Dead-letter writes that failed (the record was released instead).",
        ),
        (
            "dlq_values_dropped_total",
            "1",
            _OURS,
            "Dead-letter copies written without their value (too large for the topic).",
        ),
    ],
)

#: Every per-partition consumer metric, in :class:`PartitionMetrics` field order (after
#: ``topic`` and ``partition``). ``records-lag`` is the Java consumer's per-partition name
#: (``consumer-fetch-manager-metrics``); for a share group it is the broker's share-partition
#: lag (KIP-1226).
PARTITION_METRICS: tuple[MetricInfo, ...] = _table(
    [
        (
            "records_lag",
            "1",
            _FETCH,
            "Records of the share-partition not yet delivery-complete, as the broker last "
            "reported (-1: not reported).",
        ),
        (
            "buffered_records",
            "1",
            _OURS,
            "Records of the partition fetched and waiting for the application.",
        ),
        (
            "held_records",
            "1",
            _OURS,
            "Records of the partition handed to the application and not answered yet, or "
            "answered and not sent.",
        ),
        (
            "in_flight_records",
            "1",
            _OURS,
            "Records of the partition whose answers were sent and not confirmed yet.",
        ),
        (
            "lock_expired_records_total",
            "1",
            _OURS,
            "Records of the partition dropped before being handed out because their lock ended.",
        ),
    ],
)

#: Every producer metric, in :class:`ProducerMetrics` field order.
PRODUCER_METRICS: tuple[MetricInfo, ...] = _table(
    [
        ("record_send_rate", "1/s", _PRODUCER, "Records written per second."),
        ("record_send_total", "1", _PRODUCER, "Records written."),
        ("record_error_rate", "1/s", _PRODUCER, "Records that failed per second."),
        ("record_error_total", "1", _PRODUCER, "Records that failed (given up on)."),
        ("record_retry_rate", "1/s", _PRODUCER, "Records sent again per second."),
        ("record_retry_total", "1", _PRODUCER, "Records sent again."),
        ("request_rate", "1/s", _PRODUCER, "Produce requests answered per second."),
        ("request_total", "1", _PRODUCER, "Produce requests answered."),
        ("request_latency_avg", "ms", _PRODUCER, "Average Produce round trip."),
        ("request_latency_max", "ms", _PRODUCER, "Longest Produce round trip."),
        ("records_per_request_avg", "1", _PRODUCER, "Average records per Produce request."),
        (
            "produce_throttle_time_avg",
            "ms",
            _PRODUCER,
            "Average time the broker said it throttled Produce answers (quotas).",
        ),
        (
            "produce_throttle_time_max",
            "ms",
            _PRODUCER,
            "Longest Produce throttle time the broker reported.",
        ),
        ("batch_size_avg", "By", _PRODUCER, "Average encoded record-batch size."),
        ("batch_size_max", "By", _PRODUCER, "Largest encoded record batch."),
        (
            "buffer_total_bytes",
            "By",
            _PRODUCER,
            "The most bytes of records the producer buffers (max_buffer_bytes).",
        ),
        ("buffer_available_bytes", "By", _PRODUCER, "Buffer bytes not in use."),
        ("batches_in_flight", "1", _OURS, "Batches sent and not answered yet."),
    ],
)


#: Every admin-client metric, in :class:`AdminMetrics` field order (Java keeps the
#: latencies per broker, in ``admin-client-node-metrics``; here they cover every broker).
ADMIN_METRICS: tuple[MetricInfo, ...] = _table(
    [
        ("request_rate", "1/s", _ADMIN, "Requests answered per second."),
        ("request_total", "1", _ADMIN, "Requests answered (with or without an error)."),
        ("request_latency_avg", "ms", _ADMIN, "Average request round trip."),
        ("request_latency_max", "ms", _ADMIN, "Longest request round trip."),
    ],
)


@dataclass(frozen=True, slots=True)
class ConsumerMetrics:
    """A share consumer's metrics at one moment (see :data:`CONSUMER_METRICS` for each
    field's meaning and unit; ``as_dict()`` keys them by their Java names).

    :ivar client_id: the consumer's ``client_id``.
    :ivar group_id: its share group.
    """

    client_id: str
    group_id: str
    records_consumed_rate: float
    records_consumed_total: float
    bytes_consumed_rate: float
    bytes_consumed_total: float
    records_per_request_avg: float
    records_per_request_max: float
    fetch_size_avg: float
    fetch_size_max: float
    fetch_latency_avg: float
    fetch_latency_max: float
    fetch_rate: float
    fetch_total: float
    fetch_throttle_time_avg: float
    fetch_throttle_time_max: float
    acknowledgements_send_rate: float
    acknowledgements_send_total: float
    acknowledgements_error_rate: float
    acknowledgements_error_total: float
    last_poll_seconds_ago: float
    time_between_poll_avg: float
    time_between_poll_max: float
    heartbeat_rate: float
    heartbeat_total: float
    heartbeat_response_time_max: float
    last_heartbeat_seconds_ago: float
    rebalance_total: float
    rebalance_rate_per_hour: float
    assigned_partitions: float
    buffered_records: float
    buffered_bytes: float
    held_records: float
    lock_expired_records_total: float
    released_unseen_records_total: float
    lost_unseen_records_total: float
    fetches_late_total: float
    renewals_sent_total: float
    renewals_failed_total: float
    dlq_records_total: float
    dlq_errors_total: float
    dlq_values_dropped_total: float

    def as_dict(self) -> dict[str, float]:
        """Every metric keyed by its Java-style name (``records-consumed-rate``)."""
        return {m.name: getattr(self, m.field) for m in CONSUMER_METRICS}


@dataclass(frozen=True, slots=True)
class PartitionMetrics:
    """One assigned partition's backlog as a share consumer sees it (see
    :data:`PARTITION_METRICS`): what ``consumer.partition_metrics()`` returns, one per
    partition assigned or still holding records.

    ``records_lag`` comes from the broker (DescribeShareGroupOffsets, Kafka 4.2+), fetched
    at most every 10 s per group and shared by every member of the group in the process;
    it is ``-1`` until the broker reported it. The other fields are this member's own.

    :ivar topic: the topic.
    :ivar partition: the partition.
    """

    topic: str
    partition: int
    records_lag: float
    buffered_records: float
    held_records: float
    in_flight_records: float
    lock_expired_records_total: float

    def as_dict(self) -> dict[str, float]:
        """Every metric keyed by its Java-style name (``records-lag``)."""
        return {m.name: getattr(self, m.field) for m in PARTITION_METRICS}


@dataclass(frozen=True, slots=True)
class ProducerMetrics:
    """A producer's metrics at one moment (see :data:`PRODUCER_METRICS`; ``as_dict()``
    keys them by their Java names).

    :ivar client_id: the producer's ``client_id``.
    """

    client_id: str
    record_send_rate: float
    record_send_total: float
    record_error_rate: float
    record_error_total: float
    record_retry_rate: float
    record_retry_total: float
    request_rate: float
    request_total: float
    request_latency_avg: float
    request_latency_max: float
    records_per_request_avg: float
    produce_throttle_time_avg: float
    produce_throttle_time_max: float
    batch_size_avg: float
    batch_size_max: float
    buffer_total_bytes: float
    buffer_available_bytes: float
    batches_in_flight: float

    def as_dict(self) -> dict[str, float]:
        """Every metric keyed by its Java-style name (``record-send-rate``)."""
        return {m.name: getattr(self, m.field) for m in PRODUCER_METRICS}


@dataclass(frozen=True, slots=True)
class AdminMetrics:
    """An admin client's metrics at one moment (see :data:`ADMIN_METRICS`; ``as_dict()``
    keys them by their Java names).

    :ivar client_id: the admin client's ``client_id``.
    """

    client_id: str
    request_rate: float
    request_total: float
    request_latency_avg: float
    request_latency_max: float

    def as_dict(self) -> dict[str, float]:
        """Every metric keyed by its Java-style name (``request-total``)."""
        return {m.name: getattr(self, m.field) for m in ADMIN_METRICS}
