"""A protobuf wire reader for tests: reads the OTLP metrics sharecon pushes (KIP-714)
without sharecon's encoder or any protobuf package, so a test checks the bytes against the
OTLP field numbers independently."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of one message."""
    out = []
    i = 0

    def varint() -> int:
        nonlocal i
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, wire, varint()))
        elif wire == 1:
            out.append((field, wire, buf[i : i + 8]))
            i += 8
        elif wire == 2:
            n = varint()
            out.append((field, wire, buf[i : i + n]))
            i += n
        elif wire == 5:
            out.append((field, wire, buf[i : i + 4]))
            i += 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def one(msg: bytes, field: int) -> Any:
    """The only value of ``field`` in ``msg``."""
    values = every(msg, field)
    assert len(values) == 1, (field, values)
    return values[0]


def every(msg: bytes, field: int) -> list[Any]:
    """Every value of ``field`` in ``msg``."""
    return [v for f, _, v in fields(msg) if f == field]


@dataclass(frozen=True)
class Metric:
    """One metric of a MetricsData message (its first data point)."""

    name: str
    kind: str  # "gauge" or "sum"
    value: float
    temporality: int | None


def read_metrics_data(data: bytes) -> tuple[dict[str, str], dict[str, Metric]]:
    """(resource attributes, metrics by name) of an OTLP ``MetricsData`` message."""
    resource: dict[str, str] = {}
    metrics: dict[str, Metric] = {}
    for rm in every(data, 1):
        for res in every(rm, 1):
            for kv in every(res, 1):
                resource[one(kv, 1).decode()] = one(one(kv, 2), 1).decode()
        for sm in every(rm, 2):
            for m in every(sm, 2):
                name = one(m, 1).decode()
                gauge, total = every(m, 5), every(m, 7)
                body = (gauge or total)[0]
                point = every(body, 1)[0]
                value = struct.unpack("<d", one(point, 4))[0]
                temporality = one(total[0], 2) if total else None
                metrics[name] = Metric(name, "gauge" if gauge else "sum", value, temporality)
    return resource, metrics
