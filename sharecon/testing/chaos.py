"""Run sharecon share consumers through a fault and count every record.

::

    tally = DeliveryTally(same_count_redelivery=...)
    await produce_ids(cluster.bootstrap, topic, [f"a{i}" for i in range(3000)], tally)
    async with anyio.create_task_group() as tg:
        members = Members(cluster.bootstrap, group, [topic], tally, count=3)
        tg.start_soon(members.run)
        ...  # inject the fault, produce more
        await members.wait_done(timeout=120)
    await check_group_drained(cluster.plaintext_bootstrap, group, tally)
    report = tally.report()
    assert report.ok, report.summary()

The members accept every record explicitly and feed each delivery and each acknowledgement
outcome into the :class:`~sharecon.testing.tally.DeliveryTally`. Used by the fault suite
(``tests/cluster``) and ``benchmarks/chaos.py``.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import anyio

from sharecon.consumer import ShareConsumer
from sharecon.errors import ErrorCode
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing._sync import with_admin
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon._share.effects import SessionLost
    from sharecon._share.ledger import AckResult
    from sharecon.testing.tally import DeliveryTally

__all__ = [
    "Members",
    "check_group_drained",
    "decode_id",
    "encode_id",
    "produce_ids",
    "tally_acceptances",
]

log = logging.getLogger("sharecon.testing")

_PAD = b"." * 100


def encode_id(record_id: str, size: int = 100) -> bytes:
    """A record value of ``size`` bytes that starts with ``record_id`` and a ``|``."""
    head = record_id.encode() + b"|"
    return head + _PAD[: max(0, size - len(head))]


def decode_id(value: bytes | None) -> str:
    """The id :func:`encode_id` put in ``value`` (``"?"`` when there is none)."""
    if not value:
        return "?"
    head, sep, _ = bytes(value).partition(b"|")
    return head.decode(errors="replace") if sep else "?"


async def produce_ids(
    target: str | Producer,
    topic: str,
    ids: Sequence[str],
    tally: DeliveryTally,
    *,
    partitions: int = 3,
    record_size: int = 100,
    batch_records: int = 150,
) -> None:
    """Write one record per id (spread round-robin over ``partitions``), idempotently with
    ``acks=all``, and tell ``tally`` where each was written. ``target`` is a bootstrap
    string (a producer is opened for the call) or an open :class:`~sharecon.producer.Producer`."""
    if isinstance(target, str):
        async with Producer(target, linger=0.0) as producer:
            await produce_ids(
                producer, topic, ids, tally, partitions=partitions,
                record_size=record_size, batch_records=batch_records,
            )  # fmt: skip
        return
    # Small sends make small batches: the broker acquires whole batches, and one batch
    # of thousands of records would outlive its lock in a slow test member.
    for start in range(0, len(ids), batch_records):
        chunk = ids[start : start + batch_records]
        records = [
            ProducerRecord(topic, encode_id(rid, record_size), partition=i % partitions)
            for i, rid in enumerate(chunk, start)
        ]
        written = await target.send_batch(records)
        now = time.monotonic()
        for rid, meta in zip(chunk, written, strict=True):
            tally.produced(rid, meta.topic, meta.partition, meta.offset, now)


class Members:
    """``count`` sharecon share consumers in one group, accepting every record.

    :param work: seconds each member spends per record (``anyio.sleep``), so that a run
        lasts long enough for its faults.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        tally: DeliveryTally,
        *,
        count: int = 3,
        work: float = 0.0,
        max_records: int = 100,
    ) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.tally = tally
        self.count = count
        self.work = work
        self.max_records = max_records
        self.consumers: list[ShareConsumer] = []
        self._stop = anyio.Event()

    async def run(self) -> None:
        """Run the members until :meth:`stop`; then close them (committing what is pending)."""
        self.tally.started(time.monotonic())
        async with anyio.create_task_group() as tg:
            for i in range(self.count):
                tg.start_soon(self._member, f"m{i}")

    def stop(self) -> None:
        """Ask every member to finish: stop taking records, commit, leave."""
        self._stop.set()

    async def wait_done(self, timeout: float, *, settle: float = 20.0) -> bool:
        """Wait until every produced record was delivered and its acceptance confirmed (or
        failed ``settle`` seconds ago with no redelivery since: see :meth:`DeliveryTally.done`)."""
        for _ in range(int(timeout / 0.2) + 1):
            if self.tally.done(time.monotonic(), settle=settle):
                return True
            await anyio.sleep(0.2)
        return False

    def _session_lost(self, e: SessionLost) -> None:
        if e.code == ErrorCode.SHARE_SESSION_NOT_FOUND:
            self.tally.session_ended_by_broker(time.monotonic())

    async def _member(self, name: str) -> None:
        tally = self.tally

        def answered(results: list[AckResult]) -> None:
            tally_acceptances(tally, results, time.monotonic(), member=name)

        consumer = ShareConsumer(
            self.bootstrap,
            group_id=self.group,
            topics=self.topics,
            ack_mode="explicit",
            max_records=self.max_records,
            on_acknowledged=answered,
            client_id=f"chaos-{name}",
        )
        self.consumers.append(consumer)
        async with consumer:
            core = consumer._core
            if core is not None:
                core.session_listeners.append(self._session_lost)
            async with anyio.create_task_group() as tg:

                async def stop_when_asked() -> None:
                    await self._stop.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_when_asked)
                async for record in consumer:
                    tally.delivered(
                        decode_id(record.value),
                        record.topic,
                        record.partition,
                        record.offset,
                        record.delivery_count,
                        name,
                        time.monotonic(),
                        _leader_epoch(consumer, record.topic, record.partition),
                    )
                    if self.work:
                        await anyio.sleep(self.work)
                    record.accept()
            with anyio.move_on_after(30):
                await consumer.commit()


def tally_acceptances(
    tally: DeliveryTally, results: list[AckResult], now: float, *, member: str = ""
) -> None:
    """Feed the acceptances among acknowledgement ``results`` into ``tally``, offset by offset
    where a range mixes types (accepts around a release must not make the release look
    accepted)."""
    for r in results:
        topic = r.partition.topic or str(r.partition.topic_id)
        for b in r.batches:
            if b.uniform:
                if b.types[0] is AckType.ACCEPT:
                    tally.answered(
                        topic, r.partition.partition, b.first_offset, b.last_offset,
                        ok=r.ok, at=now, member=member,
                    )  # fmt: skip
                continue
            for offset, kind in enumerate(b.types, b.first_offset):
                if kind is AckType.ACCEPT:
                    tally.answered(
                        topic, r.partition.partition, offset, offset, ok=r.ok, at=now,
                        member=member,
                    )  # fmt: skip


def _leader_epoch(consumer: ShareConsumer, topic: str, partition: int) -> int:
    # What the member knew when it handed the record out: the leader it fetched from.
    core = consumer._core
    if core is None:
        return -1
    parts = core.cluster.metadata.partitions.get(topic, ())
    return parts[partition].leader_epoch if partition < len(parts) else -1


def check_group_drained(
    bootstrap: str, group: str, tally: DeliveryTally, *, probe_for: float = 3.0
) -> list[str]:
    """Ask the broker whether the group still holds records of this test; one line per
    problem (empty: every record was acknowledged).

    Two checks: the lag the broker reports per partition (DescribeShareGroupOffsets v1,
    Kafka 4.2+; -1 and skipped on older brokers), and a fresh member of the group that
    must receive nothing for ``probe_for`` seconds. The share-partition start offset is
    not used: the broker persists it lazily, a few records behind the acknowledged end.
    """
    topics = sorted({t for t, _, _ in tally.positions()})
    offsets = with_admin(bootstrap, lambda a: a.describe_share_group_offsets(group, topics))
    problems = [
        f"{tp.topic}-{tp.partition}: the broker reports lag {s.lag}"
        for tp, s in sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
        if s.lag > 0
    ]

    async def probe() -> list[str]:
        found: list[str] = []
        async with ShareConsumer(bootstrap, group_id=group, topics=topics) as consumer:
            with anyio.move_on_after(probe_for):
                async for record in consumer:
                    found.append(
                        f"{record.topic}-{record.partition}@{record.offset} "
                        f"({decode_id(record.value)}, delivery {record.delivery_count}) "
                        "was still available"
                    )
                    record.release()
        return found

    with ThreadPoolExecutor(1, thread_name_prefix="sharecon-probe") as pool:
        problems += pool.submit(anyio.run, probe).result(timeout=probe_for + 60)
    return problems


async def feed(
    bootstrap: str,
    topic: str,
    tally: DeliveryTally,
    stop: anyio.Event,
    *,
    prefix: str = "f",
    per_tick: int = 150,
    tick: float = 0.5,
    partitions: int = 3,
) -> int:
    """Produce ``per_tick`` records every ``tick`` seconds until ``stop`` is set; return
    how many. Ids are ``{prefix}{n}``. A send that fails is an error: the producer is
    expected to ride out the fault (it retries with idempotence until its deadline)."""
    sent = 0
    # One producer for the whole run: riding out the fault is part of what is tested.
    async with Producer(bootstrap, linger=0.0) as producer:
        while not stop.is_set():
            ids = [f"{prefix}{i}" for i in range(sent, sent + per_tick)]
            await produce_ids(producer, topic, ids, tally, partitions=partitions)
            sent += per_tick
            with anyio.move_on_after(tick):
                await stop.wait()
    return sent


async def _hold(bootstrap: str, group: str, topic: str) -> None:
    # A member that takes one batch of records and never answers them, printing each as
    # a JSON line and then {"held": n}: the test SIGKILLs it while it holds them.
    import json
    import sys

    async with ShareConsumer(
        bootstrap, group_id=group, topics=[topic], ack_mode="explicit", max_records=100
    ) as consumer:
        await anyio.sleep(3)  # joined, assigned, and the buffer filled: hold a lot at once
        records = await consumer.poll(30, max_records=1000)
        for record in records:
            line = {
                "id": decode_id(record.value),
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "delivery_count": record.delivery_count,
                "leader_epoch": _leader_epoch(consumer, record.topic, record.partition),
            }
            sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.write(json.dumps({"held": len(records)}) + "\n")
        sys.stdout.flush()
        await anyio.sleep_forever()


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 5 or sys.argv[1] != "hold":
        sys.exit("usage: python -m sharecon.testing.chaos hold BOOTSTRAP GROUP TOPIC")
    anyio.run(_hold, sys.argv[2], sys.argv[3], sys.argv[4])
