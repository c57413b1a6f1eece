"""The small part of OpenTelemetry's OTLP metrics protobuf that KIP-714 pushes need, encoded
by hand (sans-I/O; no protobuf dependency).

PushTelemetry carries an ``opentelemetry.proto.metrics.v1.MetricsData`` message. We write
one ``ResourceMetrics`` (resource attributes), one ``ScopeMetrics`` (scope ``sharecon``)
and, per metric, a ``Gauge`` or a monotonic ``Sum`` (delta or cumulative) with one
``NumberDataPoint`` holding a double. Field numbers are those of the OTLP v1 ``.proto``
files: MetricsData.resource_metrics 1; ResourceMetrics.resource 1, scope_metrics 2;
Resource.attributes 1; KeyValue.key 1, value 2; AnyValue.string_value 1;
ScopeMetrics.scope 1, metrics 2; InstrumentationScope.name 1, version 2; Metric.name 1,
description 2, unit 3, gauge 5, sum 7; Gauge.data_points 1; Sum.data_points 1,
aggregation_temporality 2, is_monotonic 3; NumberDataPoint.start_time_unix_nano 2
(fixed64), time_unix_nano 3 (fixed64), as_double 4 (double), attributes 7.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["CUMULATIVE", "DELTA", "MetricPoint", "encode_metrics_data"]

#: AggregationTemporality values.
DELTA = 1
CUMULATIVE = 2

_VARINT, _I64, _LEN = 0, 1, 2


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One metric's value at one time.

    :param name: the OTLP metric name (dotted, e.g. ``org.apache.kafka.consumer...``).
    :param value: its value.
    :param monotonic: a counter (a ``Sum``), else a ``Gauge``.
    :param attributes: the data point's attributes.
    :param description: a short description.
    :param unit: the unit (UCUM, e.g. ``s``, ``By``, ``{records}``).
    """

    name: str
    value: float
    monotonic: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    description: str = ""
    unit: str = ""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, _LEN) + _varint(len(data)) + data


def _str_field(field: int, text: str) -> bytes:
    return _bytes_field(field, text.encode()) if text else b""


def _key_value(key: str, value: str) -> bytes:
    any_value = _str_field(1, value)
    return _str_field(1, key) + _bytes_field(2, any_value)


def _data_point(point: MetricPoint, start_ns: int, time_ns: int) -> bytes:
    out = bytearray()
    out += _key(2, _I64) + struct.pack("<Q", start_ns)
    out += _key(3, _I64) + struct.pack("<Q", time_ns)
    out += _key(4, _I64) + struct.pack("<d", point.value)
    for k, v in point.attributes:
        out += _bytes_field(7, _key_value(k, v))
    return bytes(out)


def _metric(point: MetricPoint, start_ns: int, time_ns: int, temporality: int) -> bytes:
    dp = _bytes_field(1, _data_point(point, start_ns, time_ns))
    out = _str_field(1, point.name) + _str_field(2, point.description) + _str_field(3, point.unit)
    if point.monotonic:
        body = dp + _key(2, _VARINT) + _varint(temporality) + _key(3, _VARINT) + _varint(1)
        return out + _bytes_field(7, body)
    return out + _bytes_field(5, dp)


def encode_metrics_data(
    points: Iterable[MetricPoint],
    *,
    resource: Mapping[str, str],
    scope: str,
    scope_version: str,
    start_ns: int,
    time_ns: int,
    temporality: int = CUMULATIVE,
) -> bytes:
    """One ``MetricsData`` message holding ``points``.

    :param resource: the resource's attributes (client id, software name and version...).
    :param start_ns: start of the counters' period (Unix nanoseconds): the previous push
        for delta temporality, the client's start for cumulative.
    :param time_ns: when the values were read (Unix nanoseconds).
    """
    metrics = b"".join(_bytes_field(2, _metric(p, start_ns, time_ns, temporality)) for p in points)
    scope_msg = _str_field(1, scope) + _str_field(2, scope_version)
    scope_metrics = _bytes_field(1, scope_msg) + metrics
    res = b"".join(_bytes_field(1, _key_value(k, v)) for k, v in resource.items())
    resource_metrics = _bytes_field(1, res) + _bytes_field(2, scope_metrics)
    return _bytes_field(1, resource_metrics)
