"""murmur2 partitioning gives the partitions the Java producer gives.

The vectors in ``JAVA_HASHES`` and ``JAVA_PARTITIONS`` were computed once by running
``org.apache.kafka.common.utils.Utils.murmur2`` / ``Utils.toPositive`` from the
kafka-clients 4.4.0 jar (the same jar our test broker runs) over the UTF-8 bytes of each
key; the first group is also Kafka's own published UtilsTest vectors.
"""

from __future__ import annotations

import pytest

from sharecon.partitioner import murmur2, partition_for_key, to_positive

# Kafka's UtilsTest.testMurmur2 vectors (signed int32 results).
PUBLISHED = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# key -> Utils.murmur2(key) from the Java client.
JAVA_HASHES = {
    "": 275646681,
    "a": -1563381124,
    "ab": 316155434,
    "abc": 479470107,
    "abcd": -1323649548,
    "order-1": 1221710326,
    "order-42": 501153024,
    "user:1001": -1961883735,
    "Zürich": -1551140815,
    "été-2024": 767536434,
    "a-little-bit-longer-string": -1486304829,
    "0123456789abcdef0123": 203624608,
}

# key -> partition for 1, 3, 7, 12 and 100 partitions, from the Java client.
JAVA_PARTITIONS = {
    "": (0, 0, 2, 9, 81),
    "a": (0, 1, 5, 4, 24),
    "ab": (0, 2, 0, 2, 34),
    "abc": (0, 0, 4, 3, 7),
    "abcd": (0, 2, 5, 8, 0),
    "order-1": (0, 1, 4, 10, 26),
    "order-42": (0, 0, 1, 0, 24),
    "user:1001": (0, 2, 2, 5, 13),
    "Zürich": (0, 1, 2, 1, 33),
    "été-2024": (0, 0, 0, 6, 34),
    "a-little-bit-longer-string": (0, 2, 0, 11, 19),
    "0123456789abcdef0123": (0, 1, 5, 4, 8),
}
COUNTS = (1, 3, 7, 12, 100)

# bytes(range(n)) -> Utils.murmur2, covering every tail length and all byte values.
JAVA_BINARY = {
    1: 375494588,
    2: -2112343979,
    3: 51419311,
    5: -1916494074,
    255: 1542706800,
    256: -1948347274,
}


@pytest.mark.parametrize(
    ("key", "expected"), PUBLISHED.items(), ids=[k.decode() for k in PUBLISHED]
)
def test_published_kafka_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_HASHES.items())
def test_hash_matches_java(key: str, expected: int) -> None:
    assert murmur2(key.encode("utf-8")) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS.items())
def test_partition_matches_java(key: str, expected: tuple[int, ...]) -> None:
    got = tuple(partition_for_key(key.encode("utf-8"), n) for n in COUNTS)
    assert got == expected


@pytest.mark.parametrize(("length", "expected"), JAVA_BINARY.items())
def test_binary_keys_match_java(length: int, expected: int) -> None:
    assert murmur2(bytes(range(length))) == expected
    # bytearray and memoryview hash the same bytes the same way
    assert murmur2(bytearray(range(length))) == expected
    assert murmur2(memoryview(bytes(range(length)))) == expected


def test_to_positive_clears_only_the_sign_bit() -> None:
    """Java's toPositive is `n & 0x7fffffff`, not abs(): MIN_VALUE maps to 0."""
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5
    assert to_positive(-973932308) == 1173551340


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)
