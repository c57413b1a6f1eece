"""Key partitioning compatible with the Java producer: murmur2 of the key bytes.

A keyed record goes to ``to_positive(murmur2(key)) % num_partitions``, over *all* of the
topic's partitions (available or not), exactly as Kafka's Java client and librdkafka's
``murmur2_random`` partitioner do, so records with the same key land on the same partition
whichever of these clients wrote them.

Pure functions; no I/O.
"""

from __future__ import annotations

__all__ = ["MURMUR2_SEED", "murmur2", "partition_for_key", "to_positive"]

#: The seed Kafka's ``Utils.murmur2`` uses.
MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 (32-bit) of ``data`` as Kafka computes it, as a signed int32.

    The result equals ``org.apache.kafka.common.utils.Utils.murmur2(data)``: Java's int
    arithmetic wraps at 32 bits and its ``>>>`` is an unsigned shift, which is what the
    masking below reproduces.
    """
    buf = bytes(data)
    length = len(buf)
    h = (MURMUR2_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(buf[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        # The Java switch falls through from 3 to 2 to 1 before the final multiply.
        if tail == 3:
            h ^= buf[whole + 2] << 16
        if tail >= 2:
            h ^= buf[whole + 1] << 8
        h ^= buf[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which fails on MIN_VALUE)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for ``key``.

    :raises ValueError: if ``num_partitions`` is not positive.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
