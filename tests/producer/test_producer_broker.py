"""Producer against a real Kafka 4.4 broker.

Every record is read back by an independent client (librdkafka via confluent-kafka) or
by our own ShareConsumer, and the offsets the producer reported must be the offsets the
reader sees: keys, values, headers, ordering, exactly once.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import pytest
from confluent_kafka import Producer as RdProducer

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.partitioner import partition_for_key
from sharecon.producer import Producer, ProducerRecord, RecordMetadata
from sharecon.protocol import FetchRequest, ProduceRequest
from sharecon.protocol.compression import Codec
from sharecon.protocol.messages.fetch import FetchPartition, FetchTopic
from sharecon.protocol.records import read_batches
from sharecon.types import Header
from tests.producer.conftest import read_back

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]


def by_position(reads: list) -> dict[tuple[int, int], object]:  # type: ignore[type-arg]
    return {(r.partition, r.offset): r for r in reads}


async def test_send_returns_the_offset_a_consumer_reads(kafka_bootstrap: str, topic: str) -> None:
    """Each send's (partition, offset) is where librdkafka finds exactly that record."""
    async with Producer(kafka_bootstrap) as producer:
        sent: list[tuple[RecordMetadata, bytes, bytes | None]] = []
        for i in range(20):
            key = f"key-{i % 5}".encode()
            meta = await producer.send_and_wait(topic, f"value-{i}".encode(), key=key)
            assert meta.topic == topic
            sent.append((meta, f"value-{i}".encode(), key))
    reads = by_position(await read_back(kafka_bootstrap, topic, 3, len(sent)))
    assert len(reads) == len(sent)
    for meta, value, key in sent:
        got = reads[(meta.partition, meta.offset)]
        assert (got.value, got.key) == (value, key)  # type: ignore[attr-defined]
        assert meta.partition == partition_for_key(key, 3)


async def test_send_batch_offsets_order_and_return_exceptions(
    kafka_bootstrap: str, topic: str
) -> None:
    """send_batch reports one offset per record, in input order; per partition the log order
    is the input order; offsets are contiguous within a partition."""
    records = [ProducerRecord(topic, f"v{i}".encode(), partition=i % 3) for i in range(3000)]
    async with Producer(kafka_bootstrap, linger=0.02) as producer:
        metas = await producer.send_batch(records)
        more = await producer.send_batch(
            [ProducerRecord(topic, b"tail", partition=0)], return_exceptions=True
        )
    assert isinstance(more[0], RecordMetadata)
    assert [m.partition for m in metas] == [i % 3 for i in range(3000)]
    for p in range(3):
        offsets = [m.offset for m in metas if m.partition == p]
        assert offsets == list(range(offsets[0], offsets[0] + 1000))
    reads = by_position(await read_back(kafka_bootstrap, topic, 3, 3001))
    assert len(reads) == 3001
    for rec, meta in zip(records, metas, strict=True):
        assert reads[(meta.partition, meta.offset)].value == rec.value  # type: ignore[attr-defined]


async def test_headers_null_keys_and_values(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Headers keep order and null values; a None key and a None value (tombstone) survive."""
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap) as producer:
        a = await producer.send_and_wait(
            topic, None, key=b"k", headers=[("h1", b"x"), ("h2", None), ("h1", b"y")]
        )
        b = await producer.send_and_wait(topic, "text é", headers={"trace": "id-1"})
        c = await producer.send_and_wait(
            topic, b"", key=b"", headers=[Header("z", b"")], timestamp=1234
        )
    reads = by_position(await read_back(kafka_bootstrap, topic, 1, 3))
    ra, rb, rc = reads[(0, a.offset)], reads[(0, b.offset)], reads[(0, c.offset)]
    assert (ra.key, ra.value, ra.headers) == (
        b"k",
        None,
        (("h1", b"x"), ("h2", None), ("h1", b"y")),
    )  # type: ignore[attr-defined]
    assert (rb.key, rb.value, rb.headers) == (None, "text é".encode(), (("trace", b"id-1"),))  # type: ignore[attr-defined]
    assert (rc.key, rc.value, rc.headers, rc.timestamp) == (b"", b"", (("z", b""),), 1234)  # type: ignore[attr-defined]
    assert c.timestamp == 1234


async def _batch_codecs(producer: Producer, topic: str, partition: int) -> set[int]:
    """Fetch partition ``partition`` from offset 0 with our client and list the batches' codecs."""
    cluster = producer._open_cluster
    meta = await cluster.refresh_metadata([topic])
    leader = meta.partitions[topic][partition].leader_id
    response = await cluster.request(
        leader,
        FetchRequest(
            max_wait_ms=100,
            min_bytes=1,
            topics=(
                FetchTopic(
                    topic=topic,
                    topic_id=meta.topic_ids[topic],
                    partitions=(
                        FetchPartition(
                            partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
        ),
    )
    data = response.responses[0].partitions[0].records
    assert data
    return {batch.codec for batch in read_batches(data).batches}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_every_codec(kafka_bootstrap: str, topic_factory: TopicFactory, codec: str) -> None:
    """Batches are written with the chosen codec (checked on the fetched bytes) and read back
    intact by librdkafka."""
    topic = topic_factory(1)
    values = [(f"record {i} " * (i % 7 + 1)).encode() for i in range(500)]
    async with Producer(kafka_bootstrap, compression=codec, linger=0.05) as producer:
        metas = await producer.send_batch(
            ProducerRecord(topic, v, key=str(i).encode(), headers={"i": str(i)})
            for i, v in enumerate(values)
        )
        assert await _batch_codecs(producer, topic, 0) == {Codec[codec.upper()]}
    reads = by_position(await read_back(kafka_bootstrap, topic, 1, len(values)))
    assert len(reads) == len(values)
    for i, (meta, value) in enumerate(zip(metas, values, strict=True)):
        got = reads[(0, meta.offset)]
        assert (got.value, got.key, got.headers) == (
            value,
            str(i).encode(),
            (("i", str(i).encode()),),
        )  # type: ignore[attr-defined]


async def test_keys_land_where_librdkafka_murmur2_puts_them(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Keyed records go to the same partitions as librdkafka's murmur2_random partitioner
    (the Java client's default for keyed records)."""
    topic = topic_factory(7)
    keys = [f"customer-{i}".encode() for i in range(60)] + [b"", b"\x00\xff", "ключ".encode()]

    def rdkafka_partitions() -> dict[bytes, int]:
        producer = RdProducer(
            {"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
        )
        out: dict[bytes, int] = {}

        def report(err: object, msg: object) -> None:
            assert err is None, err
            out[msg.key()] = msg.partition()  # type: ignore[attr-defined]

        for key in keys:
            producer.produce(topic, value=b"rd", key=key, on_delivery=report)
        assert producer.flush(30) == 0
        return out

    theirs = await anyio.to_thread.run_sync(rdkafka_partitions)
    async with Producer(kafka_bootstrap) as producer:
        ours = {k: (await producer.send_and_wait(topic, b"ours", key=k)).partition for k in keys}
    assert ours == theirs
    assert len(set(ours.values())) == 7  # the keys really spread over the partitions


async def test_keyless_records_stick_to_a_partition_per_batch(
    kafka_bootstrap: str, topic: str
) -> None:
    """Without a key, a send_batch call's records fill one partition's batch at a time and
    still use more than one partition over several batches."""
    async with Producer(kafka_bootstrap, max_batch_bytes=4096, linger=0.01) as producer:
        metas = await producer.send_batch(ProducerRecord(topic, b"x" * 100) for _ in range(400))
    runs = 1 + sum(1 for a, b in zip(metas, metas[1:], strict=False) if a.partition != b.partition)
    assert len({m.partition for m in metas}) > 1
    assert runs < 400 // 10  # sticky, not round-robin


async def test_record_too_large_for_topic_is_a_typed_error(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """One record above the topic's max.message.bytes fails with MessageTooLargeError naming
    topic, partition and size; the records around it are written."""
    topic = topic_factory(1, config={"max.message.bytes": "2000"})
    async with Producer(kafka_bootstrap) as producer:
        before = await producer.send_and_wait(topic, b"small")
        with pytest.raises(errors.MessageTooLargeError) as info:
            await producer.send_and_wait(topic, b"x" * 5000)
        after = await producer.send_and_wait(topic, b"small again")
    text = str(info.value)
    assert topic in text and "partition 0" in text and "5" in text and "bytes" in text
    assert after.offset == before.offset + 1  # nothing else written; the sequence did not skip
    reads = await read_back(kafka_bootstrap, topic, 1, 2)
    assert [r.value for r in reads] == [b"small", b"small again"]


async def test_batch_too_large_for_topic_is_split_not_dropped(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Records that fit one by one but not as one batch are split and all written, in order."""
    topic = topic_factory(1, config={"max.message.bytes": "3000"})
    values = [f"{i:04d}".encode() * 100 for i in range(40)]  # 400 bytes each, 16 KB together
    async with Producer(kafka_bootstrap, linger=0.2) as producer:
        metas = await producer.send_batch(ProducerRecord(topic, v, partition=0) for v in values)
    assert [m.offset for m in metas] == list(range(metas[0].offset, metas[0].offset + 40))
    reads = await read_back(kafka_bootstrap, topic, 1, 40)
    assert [r.value for r in reads] == values


async def test_record_over_max_request_size_fails_before_sending(
    kafka_bootstrap: str, topic: str
) -> None:
    async with Producer(kafka_bootstrap, max_request_size=4096, max_batch_bytes=2048) as producer:
        with pytest.raises(errors.MessageTooLargeError, match="max_request_size=4096"):
            await producer.send_and_wait(topic, b"x" * 5000, partition=1)


async def test_unknown_topic_is_a_clear_error_after_bounded_retries(kafka_bootstrap: str) -> None:
    async with Producer(kafka_bootstrap, metadata_timeout=1.0) as producer:
        # Bounded: it gives up (a deadline, not a measured timing), after retrying.
        with anyio.fail_after(10), pytest.raises(errors.UnknownTopicOrPartitionError) as info:
            await producer.send_and_wait("no-such-topic-anywhere", b"v")
    assert "no-such-topic-anywhere" in str(info.value)
    match = re.search(r"after (\d+) lookups", str(info.value))
    assert match is not None and int(match.group(1)) > 1, str(info.value)


async def test_partition_out_of_range_is_a_config_error(kafka_bootstrap: str, topic: str) -> None:
    async with Producer(kafka_bootstrap) as producer:
        with pytest.raises(errors.ConfigError, match="partition 3 of topic"):
            await producer.send_and_wait(topic, b"v", partition=3)
        with pytest.raises(errors.ConfigError, match="value must be bytes"):
            await producer.send_and_wait(topic, 42)  # type: ignore[arg-type]
        with pytest.raises(errors.ConfigError, match="header key must be str"):
            await producer.send_and_wait(topic, b"v", headers=[(b"k", b"v")])  # type: ignore[list-item]


async def test_share_consumer_reads_what_we_produce(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    """Round trip through our own consumer: every record delivered once with its offset."""
    async with Producer(kafka_bootstrap, compression="lz4") as producer:
        metas = await producer.send_batch(
            ProducerRecord(topic, f"m{i}".encode(), key=f"k{i}".encode()) for i in range(200)
        )
    expected = {(m.partition, m.offset): f"m{i}".encode() for i, m in enumerate(metas)}
    got: dict[tuple[int, int], bytes | None] = {}
    with anyio.fail_after(60):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
            async for record in consumer:
                got[(record.partition, record.offset)] = record.value
                if len(got) == len(expected):
                    break
    assert got == expected


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_send_under_trio(kafka_bootstrap: str, topic: str) -> None:
    async with Producer(kafka_bootstrap) as producer:
        meta = await producer.send_and_wait(topic, b"from trio", key=b"t")
        metas = await producer.send_batch([ProducerRecord(topic, b"b", partition=0)] * 3)
    assert meta.partition == partition_for_key(b"t", 3)
    assert [m.offset for m in metas] == [metas[0].offset + i for i in range(3)]
    reads = by_position(await read_back(kafka_bootstrap, topic, 3, 4))
    assert reads[(meta.partition, meta.offset)].value == b"from trio"  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [9, 10, 12, 13])
async def test_every_produce_version(
    kafka_bootstrap: str, topic_factory: TopicFactory, version: int
) -> None:
    """Produce v13 names topics by id, v9-v12 by name: each version writes and reports the
    right offsets (forced on the connection; the broker offers 9-13)."""
    topic = topic_factory(2)
    async with Producer(kafka_bootstrap, delivery_timeout=10.0) as producer:
        await producer.partitions_for(topic)
        for node in producer._open_cluster.metadata.brokers:
            conn = await producer._open_cluster.connection(node)
            assert conn.versions is not None
            assert conn.versions.broker_ranges[ProduceRequest.api_key][1] >= 13
            conn.versions = dataclasses.replace(
                conn.versions,
                versions={**conn.versions.versions, ProduceRequest.api_key: version},
            )
        metas = await producer.send_batch(
            ProducerRecord(topic, f"v{version}-{i}".encode(), partition=i % 2) for i in range(10)
        )
    reads = by_position(await read_back(kafka_bootstrap, topic, 2, 10))
    for i, meta in enumerate(metas):
        assert reads[(meta.partition, meta.offset)].value == f"v{version}-{i}".encode()  # type: ignore[attr-defined]


async def test_mixed_records_share_batches_and_round_trip(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Records encoded as they are queued (fast path and general path mixed in the same
    batches: headers, null and empty keys and values, explicit timestamps before and far
    after the first, values past 8 KiB) come back exactly, at the reported offsets."""
    topic = topic_factory(1)
    t0 = 1_700_000_000_000
    shapes: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]] = [
        (None, b"plain", (), t0),
        (b"", b"", (), t0 + 1),
        (b"k", None, (), t0 + 63),
        (None, None, (("h", None),), t0 + 64),
        (b"key" * 30, b"v" * 9000, (), t0 + 10_000),
        (None, b"x" * 100, (("a", b"1"), ("b", b"")), t0 - 5),
        (b"k2", b"y" * 70, (), t0 + 10**9),
    ]
    records = [
        ProducerRecord(topic, v, key=k, headers=h or None, timestamp=ts, partition=0)
        for i in range(300)
        for k, v, h, ts in [shapes[i % len(shapes)]]
    ]
    async with Producer(kafka_bootstrap, linger=0.05) as producer:
        metas = await producer.send_batch(records)
        futures = [
            await producer.send(topic, r.value, key=r.key, headers=r.headers, timestamp=r.timestamp)
            for r in records[:50]
        ]
        await producer.flush()
        metas += [f.result() for f in futures]
    sent = records + records[:50]
    reads = by_position(await read_back(kafka_bootstrap, topic, 1, len(sent)))
    assert len(reads) == len(sent)
    for rec, meta in zip(sent, metas, strict=True):
        got = reads[(meta.partition, meta.offset)]
        assert (got.key, got.value, got.headers, got.timestamp) == (  # type: ignore[attr-defined]
            rec.key,
            rec.value,
            tuple(rec.headers or ()),
            rec.timestamp,
        )
        assert meta.timestamp == rec.timestamp


async def test_a_tight_send_loop_lets_other_tasks_run(kafka_bootstrap: str, topic: str) -> None:
    """send() does not pass through the event loop on every call, but often enough that a
    loop of sends (which never waits for the broker) does not starve other tasks."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with Producer(kafka_bootstrap) as producer, anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        before = ticks
        for _ in range(2000):
            await producer.send(topic, b"x")
        assert ticks - before >= 2000 // 64
        await producer.flush()
        tg.cancel_scope.cancel()


async def test_a_record_with_200k_small_headers_is_sized_as_it_is_encoded(
    kafka_bootstrap: str, topic: str, share_group: str
) -> None:
    """200,000 headers of 3 encoded bytes each (a 1-byte key, an empty value) make a
    600 KB record: within the default 1 MiB max_request_size. It used to be estimated at
    11 bytes a header ("about 2.2 MB") and refused before sending."""
    headers = [("h", b"")] * 200_000
    async with Producer(kafka_bootstrap) as producer:
        meta = await producer.send_and_wait(topic, b"v", headers=headers, partition=0)
        # A really too large one is still refused before sending, with its true size.
        with pytest.raises(errors.MessageTooLargeError, match=r"about 120002\d bytes"):
            await producer.send_and_wait(topic, b"v", headers=[("h", b"")] * 400_000)
    # Read back by our own consumer (librdkafka hands such a record over without headers).
    with anyio.fail_after(60):
        async with ShareConsumer(kafka_bootstrap, group_id=share_group, topics=[topic]) as consumer:
            record = await anext(aiter(consumer))
    assert (record.partition, record.offset) == (0, meta.offset)
    assert len(record.headers) == 200_000 and record.headers[-1] == ("h", b"")


@pytest.mark.parametrize("key", ["bad\ud800key", "\udcff"])
async def test_a_header_key_that_is_not_text_is_a_config_error_naming_it(
    kafka_bootstrap: str, topic: str, key: str
) -> None:
    """A lone surrogate cannot be UTF-8: ConfigError naming the header, raised by send()
    (it used to be a LocalProtocolError from deep in the encoder)."""
    async with Producer(kafka_bootstrap) as producer:
        with pytest.raises(errors.ConfigError, match="header key") as info:
            await producer.send_and_wait(topic, b"v", headers=[("ok", b"1"), (key, b"2")])
        assert repr(key) in str(info.value)
        # The producer is fine afterwards.
        assert (await producer.send_and_wait(topic, b"after", partition=0)).offset >= 0
