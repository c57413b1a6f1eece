"""Differential scenarios: what sharecon's clients observe on FakeKafka and on a real broker.

Each :class:`ClientScenario` drives the public clients (:class:`~sharecon.Producer`,
:class:`~sharecon.ShareConsumer`, :class:`~sharecon.Admin`) on a topic and group of its own
and returns an observation built only from what a client sees: records with their keys,
values, headers and delivery counts; error types of admin answers; what a fresh member
gets; start offsets and lag. :func:`compare` plays every scenario on two clusters at once
(scenarios run concurrently) and pairs the observations; they must be equal.

The wire-level conformance scenarios (:mod:`sharecon.testing.conformance`) are played on
both clusters by :func:`compare_wire`.
"""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from sharecon import errors
from sharecon.admin import Admin
from sharecon.consumer import ShareConsumer
from sharecon.dlq import DeadLetterPolicy
from sharecon.producer import Producer, ProducerRecord
from sharecon.testing.conformance.broker_runner import BrokerTarget, run_on_broker
from sharecon.testing.conformance.scenarios import scenarios_for
from sharecon.types import AckType, TopicPartition

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = [
    "CLIENT_SCENARIOS",
    "ClientScenario",
    "Env",
    "Outcome",
    "compare",
    "compare_wire",
]

#: Seconds each client scenario took on the last cluster it ran on (for tuning).
TIMES: dict[str, float] = {}
#: How long a fresh member polls before "it got nothing" is taken as its answer.
FRESH_WAIT = 1.5
EARLIEST = {"share.auto.offset.reset": "earliest"}


@dataclass(slots=True)
class Env:
    """One cluster as a scenario sees it."""

    bootstrap: str
    version: str
    admin: Admin
    suffix: str

    @property
    def minor(self) -> int:
        """The Kafka 4.x minor version."""
        return int(self.version.split(".")[1])

    async def setup(
        self, tag: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> tuple[str, str]:
        """A fresh topic and group for ``tag``; the group's configs set (earliest unless
        ``config`` says otherwise)."""
        topic = f"diff-{tag}-{self.suffix}"
        group = f"diff-{tag}-{self.suffix}"
        await self.admin.create_topics([topic], num_partitions=partitions)
        settings: dict[str, str | None] = {**EARLIEST, **(config or {})}
        await self.admin.alter_group_config(group, settings)
        return topic, group

    async def produce(self, topic: str, n: int, *, start: int = 0, **kw: Any) -> list[int]:
        """``n`` keyed records with a header each; their offsets."""
        async with Producer(self.bootstrap, **kw) as producer:
            meta = await producer.send_batch(
                [
                    ProducerRecord(
                        topic,
                        f"v{i}".encode(),
                        key=f"k{i}".encode(),
                        headers=[("h", f"{i}".encode())],
                        partition=0,
                    )
                    for i in range(start, start + n)
                ]
            )
        return [m.offset for m in meta]

    def consumer(self, group: str, topic: str, **kw: Any) -> ShareConsumer[bytes, bytes]:
        """An explicit-mode consumer of ``topic`` in ``group``."""
        kw.setdefault("ack_mode", "explicit")
        kw.setdefault("max_wait_ms", 200)
        return ShareConsumer(self.bootstrap, group_id=group, topics=[topic], **kw)

    async def consume(
        self,
        group: str,
        topic: str,
        n: int,
        answer: Callable[[int], AckType] = lambda i: AckType.ACCEPT,
        *,
        timeout: float = 15.0,
        **kw: Any,
    ) -> list[tuple[Any, ...]]:
        """Poll until ``n`` records came (or ``timeout``), answer each with
        ``answer(index)``, commit, close; what was seen, in arrival order."""
        seen: list[tuple[Any, ...]] = []
        async with self.consumer(group, topic, **kw) as c:
            with anyio.move_on_after(timeout):
                while len(seen) < n:
                    for r in await c.poll(0.5):
                        seen.append(_seen(r))
                        c.acknowledge(r, answer(len(seen) - 1))
            await c.commit()
        return seen

    async def fresh(
        self, group: str, topic: str, *, wait: float = FRESH_WAIT
    ) -> list[tuple[Any, ...]]:
        """What a fresh member gets within ``wait`` seconds of its assignment (accepted as
        it comes); a busy broker may take a while to assign."""
        seen: list[tuple[Any, ...]] = []
        async with self.consumer(group, topic) as c:
            await _assigned(c, seen)
            with anyio.move_on_after(wait):
                while True:
                    for r in await c.poll(0.5):
                        seen.append(_seen(r))
                        c.acknowledge(r, AckType.ACCEPT)
            await c.commit()
        return seen

    async def offsets(self, group: str, topic: str) -> list[tuple[int, int, int]]:
        """``(partition, start offset, lag)`` per partition the group has state for."""
        got = await self.admin.describe_share_group_offsets(group, [topic])
        return sorted((tp.partition, o.start_offset, o.lag) for tp, o in got.items())


async def _assigned(c: ShareConsumer[bytes, bytes], seen: list[tuple[Any, ...]]) -> None:
    """Poll until ``c`` has an assignment (at most 15 s), accepting what comes."""
    with anyio.move_on_after(15):
        while not c.assignment:
            for r in await c.poll(0.2):
                seen.append(_seen(r))
                c.acknowledge(r, AckType.ACCEPT)


def _seen(r: Any) -> tuple[Any, ...]:
    return (r.partition, r.offset, r.key, r.value, tuple(r.headers), r.delivery_count)


async def _raises(call: Awaitable[Any]) -> str:
    """The error class a call raised (``"ok"`` if none)."""
    try:
        await call
    except errors.KafkaError as exc:
        return type(exc).__name__
    return "ok"


@dataclass(frozen=True, slots=True)
class ClientScenario:
    """A named client-level scenario and the oldest Kafka line it applies to."""

    name: str
    run: Callable[[Env], Awaitable[object]]
    min_minor: int = 1


# -- the scenarios -----------------------------------------------------------------------------


async def _roundtrip(env: Env) -> object:
    topic, group = await env.setup("roundtrip")
    await env.produce(topic, 20)
    return await env.consume(group, topic, 20)


async def _release_redelivers(env: Env) -> object:
    topic, group = await env.setup("release")
    await env.produce(topic, 5)
    first = await env.consume(group, topic, 5, lambda i: AckType.RELEASE)
    return first, await env.consume(group, topic, 5)


async def _reject_is_final(env: Env) -> object:
    topic, group = await env.setup("reject")
    await env.produce(topic, 5)
    got = await env.consume(group, topic, 5, lambda i: AckType.REJECT)
    return got, await env.fresh(group, topic), await env.offsets(group, topic)


async def _mixed_answers(env: Env) -> object:
    topic, group = await env.setup("mixed")
    await env.produce(topic, 3)
    kinds = [AckType.ACCEPT, AckType.RELEASE, AckType.REJECT]
    got = await env.consume(group, topic, 3, lambda i: kinds[i])
    return got, await env.fresh(group, topic)


async def _fresh_after_accept(env: Env) -> object:
    topic, group = await env.setup("fresh")
    await env.produce(topic, 5)
    got = await env.consume(group, topic, 5)
    await env.produce(topic, 3, start=5)
    return got, await env.fresh(group, topic), await env.offsets(group, topic)


async def _multi_partition(env: Env) -> object:
    topic, group = await env.setup("multi", partitions=3)
    async with Producer(env.bootstrap) as producer:
        await producer.send_batch(
            [ProducerRecord(topic, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(30)]
        )
    got = await env.consume(group, topic, 30)
    return sorted(got)


async def _delivery_limit(env: Env) -> object:
    topic, group = await env.setup("limit")
    limit = await _raises(env.admin.alter_group_config(group, {"share.delivery.count.limit": "2"}))
    if limit != "ok":
        return limit  # a group config from Kafka 4.3 on
    await env.produce(topic, 2)
    first = await env.consume(group, topic, 2, lambda i: AckType.RELEASE)
    # Released at the limit's last attempt (the consumer may have taken them once more
    # before it closed): archived, nothing left for anyone.
    return limit, first, await env.fresh(group, topic), await env.offsets(group, topic)


async def _topic_errors(env: Env) -> object:
    topic, _ = await env.setup("topicerr")
    a = env.admin
    return (
        await _raises(a.create_topics([topic])),
        [c.created for c in await a.create_topics([topic], exist_ok=True)],
        await _raises(a.create_topics([f"rf3-{env.suffix}"], replication_factor=3)),
        await _raises(a.delete_topics([f"missing-{env.suffix}"])),
        await _raises(a.delete_topics([f"missing-{env.suffix}"], missing_ok=True)),
        await _raises(a.describe_topics([f"missing-{env.suffix}"])),
        [len(d.partitions) for d in (await a.describe_topics([topic])).values()],
    )


async def _delete_topic(env: Env) -> object:
    topic, _ = await env.setup("deltopic")
    await env.admin.delete_topics([topic])
    await anyio.sleep(0.5)
    return await _raises(env.admin.describe_topics([topic])), topic in await env.admin.list_topics()


async def _config_errors(env: Env) -> object:
    _, group = await env.setup("configerr")
    a = env.admin
    return (
        await _raises(a.alter_group_config(group, {"share.record.lock.duration.ms": "500"})),
        await _raises(a.alter_group_config(group, {"share.no.such.config": "1"})),
        await _raises(a.alter_group_config(group, {"share.auto.offset.reset": "sideways"})),
        await _raises(a.alter_group_config(group, {"share.record.lock.duration.ms": "5000"})),
    )


async def _describe_config(env: Env) -> object:
    _, group = await env.setup("describeconfig", config={"share.record.lock.duration.ms": "7000"})
    keys = ("share.auto.offset.reset", "share.record.lock.duration.ms")
    # A broker applies group configs through its metadata log: a describe right after
    # the change may still show the old values for a moment.
    want: list[tuple[str, str | None]] = [(keys[0], "earliest"), (keys[1], "7000")]
    seen: list[tuple[str, str | None]] = []
    with anyio.move_on_after(5):
        while seen != want:
            got = await env.admin.describe_group_config(group)
            seen = [(k, got[k].value if k in got else None) for k in keys]
            await anyio.sleep(0.2)
    return seen


async def _list_offsets(env: Env) -> object:
    topic, _ = await env.setup("listoffsets", partitions=2)
    await env.produce(topic, 7)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    return (
        [(await env.admin.list_offsets(tps, "earliest"))[tp] for tp in tps],
        [(await env.admin.list_offsets(tps, "latest"))[tp] for tp in tps],
        await _raises(env.admin.list_offsets([TopicPartition(f"nope-{env.suffix}", 0)], "latest")),
    )


async def _idempotent(env: Env) -> object:
    topic, group = await env.setup("idempotent")
    offsets = await env.produce(topic, 10, idempotent=True)
    more = await env.produce(topic, 5, start=10, idempotent=True)
    return offsets, more, [r[1] for r in await env.consume(group, topic, 15)]


async def _describe_group(env: Env) -> object:
    topic, group = await env.setup("describegroup", partitions=2)
    async with env.consumer(group, topic) as c:
        with anyio.move_on_after(10):
            while not c.assignment:
                await c.poll(0.2)
        d = await env.admin.describe_share_group(group)
        listed = [g for g in await env.admin.list_share_groups() if g.group_id == group]
        during = (
            d.state,
            len(d.members),
            sorted(tp.partition for m in d.members for tp in m.assignment),
            [m.subscribed_topics for m in d.members],
            [m.client_id for m in d.members],
            [(g.group_id == group, g.state) for g in listed],
        )
    await anyio.sleep(0.3)
    after = await env.admin.describe_share_group(group)
    return during, (after.state, len(after.members))


async def _group_not_found(env: Env) -> object:
    missing = f"nogroup-{env.suffix}"
    res = await env.admin.delete_share_groups([missing])
    return (
        await _raises(env.admin.describe_share_group(missing)),
        {k: type(v).__name__ for k, v in res.items()},
    )


async def _non_empty_group(env: Env) -> object:
    topic, group = await env.setup("nonempty")
    await env.produce(topic, 1)
    async with env.consumer(group, topic) as c:
        with anyio.move_on_after(10):
            while not c.assignment:
                await c.poll(0.2)
        res = await env.admin.delete_share_groups([group])
        alter = await _raises(
            env.admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})
        )
        delete = await _raises(env.admin.delete_share_group_offsets(group, [topic]))
    return {k: type(v).__name__ for k, v in res.items()}.get(group), alter, delete


async def _alter_offsets(env: Env) -> object:
    topic, group = await env.setup("alteroffsets")
    await env.produce(topic, 5)
    await env.consume(group, topic, 5)
    before = await env.offsets(group, topic)
    await env.admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 2})
    after = await env.offsets(group, topic)
    return before, after, await env.fresh(group, topic)


async def _delete_offsets(env: Env) -> object:
    topic, group = await env.setup("deleteoffsets")
    await env.produce(topic, 4)
    await env.consume(group, topic, 4)
    await env.admin.delete_share_group_offsets(group, [topic])
    return await env.offsets(group, topic), await env.fresh(group, topic)


async def _delete_group(env: Env) -> object:
    topic, group = await env.setup("deletegroup")
    await env.produce(topic, 2)
    await env.consume(group, topic, 2)
    res = await env.admin.delete_share_groups([group])
    return (
        dict(res),
        await _raises(env.admin.describe_share_group(group)),
    )


async def _lag(env: Env) -> object:
    topic, group = await env.setup("lag")
    await env.produce(topic, 10)
    await env.consume(group, topic, 10)
    done = await env.offsets(group, topic)
    await env.produce(topic, 5, start=10)
    return done, await env.offsets(group, topic)


async def _latest_reset(env: Env) -> object:
    topic, group = await env.setup("latest", config={"share.auto.offset.reset": "latest"})
    await env.produce(topic, 5)
    seen: list[tuple[Any, ...]] = []
    async with env.consumer(group, topic) as c:
        await _assigned(c, seen)
        # Kafka initialises the group's state of a partition when it assigns it; wait for
        # that before producing what the member should get.
        with anyio.move_on_after(10):
            while True:
                if any(start >= 0 for _, start, _ in await env.offsets(group, topic)):
                    break
                await anyio.sleep(0.2)
        await env.produce(topic, 3, start=5)
        with anyio.move_on_after(5):
            while len(seen) < 3:
                for r in await c.poll(0.5):
                    seen.append(_seen(r))
                    c.acknowledge(r, AckType.ACCEPT)
        await c.commit()
    return seen


async def _record_limit(env: Env) -> object:
    topic, group = await env.setup("recordlimit")
    await env.produce(topic, 10)
    got: list[Any] = []
    try:
        async with env.consumer(group, topic, acquire_mode="record_limit", max_records=3) as c:
            with anyio.move_on_after(10):
                while not got:
                    got = await c.poll(0.5)
            for r in got:
                c.acknowledge(r, AckType.ACCEPT)
            await c.commit()
    except errors.KafkaError as exc:  # a line without record limits (4.1) says so
        return type(exc).__name__
    return [r.offset for r in got]


async def _implicit_mode(env: Env) -> object:
    topic, group = await env.setup("implicit")
    await env.produce(topic, 6)
    seen: list[int] = []
    async with ShareConsumer(env.bootstrap, group_id=group, topics=[topic], max_wait_ms=200) as c:
        with anyio.move_on_after(10):
            while len(seen) < 6:
                seen.extend(r.offset for r in await c.poll(0.5))
        await c.commit()
    return sorted(seen), await env.fresh(group, topic), await env.offsets(group, topic)


async def _values_and_nulls(env: Env) -> object:
    topic, group = await env.setup("nulls")
    async with Producer(env.bootstrap) as producer:
        await producer.send_batch(
            [
                ProducerRecord(topic, None, key=b"tombstone", partition=0),
                ProducerRecord(topic, b"", key=None, partition=0),
                ProducerRecord(topic, b"x" * 5000, key=b"big", headers={"a": None}, partition=0),
            ]
        )
    return await env.consume(group, topic, 3)


async def _renew(env: Env) -> object:
    # A 4 s lock, renewed half-way: the margins either side (2 s before the first lock
    # ends, 1.5 s before the renewed one does) hold on a loaded machine, where a 2 s lock
    # renewed at 1.2 s sometimes ended before the renewal reached the broker.
    topic, group = await env.setup("renew", config={"share.record.lock.duration.ms": "4000"})
    await env.produce(topic, 1)
    async with env.consumer(group, topic) as c:
        got: list[Any] = []
        with anyio.move_on_after(15):
            while not got:
                got = await c.poll(0.5)
        taken = anyio.current_time()  # the first lock ends before taken + 4
        await anyio.sleep(2.0)
        try:
            c.acknowledge(got[0], AckType.RENEW)  # Kafka 4.2 and later
        except errors.KafkaError as exc:
            return type(exc).__name__
        renewed = await c.commit()
        # Past the first lock's end, within the renewed one.
        await anyio.sleep(max(taken + 4.5 - anyio.current_time(), 0.0))
        c.acknowledge(got[0], AckType.ACCEPT)
        accepted = await c.commit()
    return (
        [type(e).__name__ for e in renewed.values() if e is not None],
        [type(e).__name__ for e in accepted.values() if e is not None],
        await env.fresh(group, topic),
    )


# -- more client scenarios (issue 25: 40 or more) ----------------------------------------------


async def _poll_until(
    c: ShareConsumer[bytes, bytes], n: int, timeout: float = 10.0, **kw: Any
) -> list[Any]:
    """Records ``c`` polled until ``n`` came (or ``timeout``), unanswered."""
    got: list[Any] = []
    with anyio.move_on_after(timeout):
        while len(got) < n:
            got.extend(await c.poll(0.5, **kw))
    return got


async def _timestamps(env: Env) -> object:
    topic, group = await env.setup("timestamps")
    base = 1_700_000_000_000
    async with Producer(env.bootstrap) as producer:
        for i in range(4):
            await producer.send(topic, f"v{i}".encode(), partition=0, timestamp=base + 1000 * i)
    seen: list[tuple[Any, ...]] = []
    async with env.consumer(group, topic) as c:
        for r in await _poll_until(c, 4):
            seen.append((r.offset, r.timestamp, int(r.timestamp_type)))
            c.acknowledge(r, AckType.ACCEPT)
        await c.commit()
    return seen


async def _two_members(env: Env) -> object:
    topic, group = await env.setup("twomembers")
    await env.produce(topic, 40)
    seen: list[tuple[int, int]] = []

    async def member() -> None:
        async with env.consumer(group, topic) as c:
            with anyio.move_on_after(10):
                while len(seen) < 40:
                    for r in await c.poll(0.3):
                        seen.append((r.offset, r.delivery_count))
                        c.acknowledge(r, AckType.ACCEPT)
            await c.commit()

    async with anyio.create_task_group() as tg:
        tg.start_soon(member)
        tg.start_soon(member)
    # Which member got what is the broker's choice; the union, each record once, is not.
    # (Nor the start offset: answers from two members make a number of state writes that
    # depends on timing, and Kafka reports it one write behind.)
    return sorted(seen), await env.fresh(group, topic)


async def _close_releases(env: Env) -> object:
    topic, group = await env.setup("closereleases")
    await env.produce(topic, 3)
    async with env.consumer(group, topic) as c:
        first = [_seen(r) for r in await _poll_until(c, 3)]
        # Left unanswered: close releases them (on 4.1 a release lowers the count again).
    return first, await env.fresh(group, topic), await env.offsets(group, topic)


async def _answer_errors(env: Env) -> object:
    topic, group = await env.setup("answererrors")
    await env.produce(topic, 2)
    async with env.consumer(group, topic) as c:
        got = await _poll_until(c, 2)
        c.acknowledge(got[0], AckType.ACCEPT)
        try:
            c.acknowledge(got[0], AckType.REJECT)
            twice = "ok"
        except errors.KafkaError as exc:
            twice = type(exc).__name__
        try:
            await c.poll(0.1)
            early = "ok"
        except errors.KafkaError as exc:  # the batch is not fully answered
            early = type(exc).__name__
        c.acknowledge(got[1], AckType.ACCEPT)
        committed = await c.commit()
    try:
        c.acknowledge(got[1], AckType.RELEASE)
        after = "ok"
    except errors.KafkaError as exc:
        after = type(exc).__name__
    return (
        len(got),
        twice,
        early,
        [type(e).__name__ for e in committed.values() if e is not None],
        after,
        await env.fresh(group, topic),
    )


async def _max_records(env: Env) -> object:
    topic, group = await env.setup("maxrecords")
    await env.produce(topic, 7)
    sizes: list[int] = []
    offsets: list[int] = []
    async with env.consumer(group, topic) as c:
        with anyio.move_on_after(10):
            while len(offsets) < 7:
                batch = await c.poll(0.5, max_records=2)
                if batch:
                    sizes.append(len(batch))
                for r in batch:
                    offsets.append(r.offset)
                    c.acknowledge(r, AckType.ACCEPT)
        await c.commit()
    # Answers go with each fetch: the start offset (one state write behind) is timing.
    return max(sizes), sorted(offsets), await env.fresh(group, topic)


async def _empty_topic(env: Env) -> object:
    topic, group = await env.setup("empty")
    async with env.consumer(group, topic) as c:
        seen: list[tuple[Any, ...]] = []
        await _assigned(c, seen)
        start = anyio.current_time()
        polled = await c.poll(0.5)
        waited = anyio.current_time() - start
    # A poll with nothing to give returns empty at its timeout, not before nor much after.
    return seen, polled, 0.4 <= waited < 3.0


async def _produce_missing(env: Env) -> object:
    missing = f"diff-missing-{env.suffix}"
    async with Producer(env.bootstrap, metadata_timeout=2) as producer:
        sent = await _raises(producer.send_and_wait(missing, b"x"))
    return sent, missing in await env.admin.list_topics()


async def _multi_topic(env: Env) -> object:
    a, group = await env.setup("multitopic")
    b = f"diff-multitopic2-{env.suffix}"
    await env.admin.create_topics([b])
    await env.produce(a, 3)
    await env.produce(b, 2, start=3)
    seen: list[tuple[Any, ...]] = []
    async with ShareConsumer(
        env.bootstrap, group_id=group, topics=[a, b], ack_mode="explicit", max_wait_ms=200
    ) as c:
        with anyio.move_on_after(10):
            while len(seen) < 5:
                for r in await c.poll(0.5):
                    seen.append((r.topic == a, *_seen(r)))
                    c.acknowledge(r, AckType.ACCEPT)
        await c.commit()
        assignment = sorted((tp.topic == a, tp.partition) for tp in c.assignment)
    return sorted(seen), assignment, await env.offsets(group, b)


async def _partial_accept(env: Env) -> object:
    topic, group = await env.setup("partial")
    await env.produce(topic, 10)
    # The first four accepted, the rest released: the start offset stops at the first
    # record still to deliver, and the lag counts the six left.
    got = await env.consume(
        group, topic, 10, lambda i: AckType.ACCEPT if i < 4 else AckType.RELEASE
    )
    return [r[1] for r in got], await env.offsets(group, topic)


async def _rewind(env: Env) -> object:
    topic, group = await env.setup("rewind")
    await env.produce(topic, 4)
    await env.consume(group, topic, 4)
    earliest = await env.admin.list_offsets([TopicPartition(topic, 0)], "earliest")
    await env.admin.alter_share_group_offsets(group, dict(earliest))
    return await env.offsets(group, topic), await env.fresh(group, topic)


async def _interleaved(env: Env) -> object:
    topic, group = await env.setup("interleaved")
    await env.produce(topic, 6)
    first = await env.consume(
        group, topic, 6, lambda i: AckType.RELEASE if i % 2 else AckType.ACCEPT
    )
    # Only the released (odd) offsets come back, in order, delivered a second time.
    return [r[1] for r in first], await env.fresh(group, topic), await env.offsets(group, topic)


async def _acknowledge_offset(env: Env) -> object:
    topic, group = await env.setup("ackoffset")
    await env.produce(topic, 3)
    async with env.consumer(group, topic) as c:
        got = await _poll_until(c, 3)
        try:
            c.acknowledge_offset(topic, 0, 99, AckType.ACCEPT)
            unknown = "ok"
        except errors.KafkaError as exc:
            unknown = type(exc).__name__
        for r in got:
            c.acknowledge_offset(
                topic, 0, r.offset, AckType.REJECT if r.offset == 1 else AckType.ACCEPT
            )
        await c.commit()
    return len(got), unknown, await env.fresh(group, topic), await env.offsets(group, topic)


async def _dead_letter(env: Env) -> object:
    topic, group = await env.setup("deadletter")
    dlq = f"diff-deadletter-dlq-{env.suffix}"
    await env.admin.create_topics([dlq])
    await env.produce(topic, 2)
    async with env.consumer(group, topic) as c:
        got = await _poll_until(c, 2)
        meta = await c.reject_to_dlq(got[0], reason="bad", topic=dlq)
        c.acknowledge(got[1], AckType.ACCEPT)
        await c.commit()
    await env.admin.alter_group_config(f"{group}-reader", EARLIEST)
    copies = await env.fresh(f"{group}-reader", dlq)
    return (
        None if meta is None else (meta.partition, meta.offset),
        await env.fresh(group, topic),
        # The copy's own time header differs from run to run.
        [(r[2], r[3], [h for h in r[4] if h[0] != "sharecon.dlq.time"], r[5]) for r in copies],
    )


async def _send_batch(env: Env) -> object:
    topic, _ = await env.setup("sendbatch", partitions=2)
    async with Producer(env.bootstrap) as producer:
        first = await producer.send_batch(
            [ProducerRecord(topic, f"a{i}".encode(), partition=i % 2) for i in range(5)]
        )
        one = await producer.send_and_wait(topic, b"b", partition=1)
        second = await producer.send_batch(
            [ProducerRecord(topic, f"c{i}".encode(), partition=0) for i in range(3)]
        )
        count = await producer.partitions_for(topic)
    return (
        [(m.partition, m.offset) for m in first],
        (one.partition, one.offset),
        [(m.partition, m.offset) for m in second],
        count,
    )


async def _describe_topics(env: Env) -> object:
    names = [f"diff-desc{n}-{env.suffix}" for n in (1, 3, 5)]
    for name, n in zip(names, (1, 3, 5), strict=True):
        await env.admin.create_topics([name], num_partitions=n)
    got = await env.admin.describe_topics(names)
    listed = await env.admin.list_topics()
    return (
        [
            (
                name,
                sorted(p.partition for p in got[name].partitions),
                [len(p.replicas) for p in got[name].partitions],
            )
            for name in names
        ],
        [name in listed for name in names],
    )


async def _compacted_keys(env: Env) -> object:
    topic, group = f"diff-compacted-{env.suffix}", f"diff-compacted-{env.suffix}"
    await env.admin.create_topics([topic], configs={"cleanup.policy": "compact"})
    await env.admin.alter_group_config(group, EARLIEST)
    async with Producer(env.bootstrap) as producer:
        await producer.send_batch(
            [ProducerRecord(topic, f"v{i}".encode(), key=b"same", partition=0) for i in range(3)]
            + [ProducerRecord(topic, None, key=b"same", partition=0)]
        )
    # No cleaning within a scenario's time: every version of the key is delivered.
    return await env.consume(group, topic, 4)


async def _large_values(env: Env) -> object:
    topic, group = await env.setup("large")
    sizes = [300_000, 1, 700_000, 50_000]
    async with Producer(env.bootstrap) as producer:
        await producer.send_batch(
            [
                ProducerRecord(topic, bytes([i]) * n, key=f"k{i}".encode(), partition=0)
                for i, n in enumerate(sizes)
            ]
        )
        too_big = await _raises(producer.send_and_wait(topic, b"x" * 2_000_000, partition=0))
    got: list[tuple[int, int, int]] = []
    async with env.consumer(group, topic) as c:
        # A broker splits these over fetches by size; how it splits is not compared.
        with anyio.move_on_after(10):
            while len(got) < 4:
                for r in await c.poll(0.5):
                    got.append((r.offset, len(r.value or b""), (r.value or b"-")[0]))
                    c.acknowledge(r, AckType.ACCEPT)
        await c.commit()
    return sorted(got), too_big


async def _headers(env: Env) -> object:
    topic, group = await env.setup("headers")
    async with Producer(env.bootstrap) as producer:
        await producer.send_batch(
            [
                ProducerRecord(
                    topic,
                    b"v",
                    headers=[("dup", b"1"), ("dup", b"2"), ("empty", b""), ("none", None)],
                    partition=0,
                ),
                ProducerRecord(topic, b"w", headers=[("ünï", "ü".encode())], partition=0),
                ProducerRecord(topic, b"x", headers={}, partition=0),
            ]
        )
    return await env.consume(group, topic, 3)


async def _dead_letter_policy(env: Env) -> object:
    topic, group = await env.setup("dlqpolicy")
    dlq = f"diff-dlqpolicy-dlq-{env.suffix}"
    await env.produce(topic, 2)
    first = await env.consume(group, topic, 2, lambda i: AckType.RELEASE)
    # Delivered again past max_deliveries=1: routed to the dead-letter topic (created on
    # first use) by the consumer, never handed to the application (route_unseen: another
    # member released them, so this one never saw them fail).
    handed: list[Any] = []
    policy = DeadLetterPolicy(topic=dlq, max_deliveries=1, route_unseen=True)
    async with env.consumer(group, topic, dead_letter=policy) as c:
        # Until both copies are written (or 10 s): a close while a copy is being written
        # would release that record, and when it lands is timing, not the broker's rules.
        with anyio.move_on_after(10):
            while c.metrics().dlq_records_total < 2:
                handed.extend(await c.poll(0.5))
        handed.extend(await c.poll(0.5))
    await env.admin.alter_group_config(f"{group}-reader", EARLIEST)
    copies = await env.fresh(f"{group}-reader", dlq)
    return (
        [r[5] for r in first],
        [r.offset for r in handed],
        await env.fresh(group, topic),
        # Past the limit: how far past depends on whether the releasing consumer took
        # them once more before it closed, which is timing.
        sorted((r[2], r[3], int(dict(r[4])["sharecon.dlq.delivery.count"]) > 1) for r in copies),
    )


async def _cli(env: Env) -> object:
    topic, group = await env.setup("cli")
    sharecon = [sys.executable, "-m", "sharecon"]
    produced = await anyio.run_process(
        [*sharecon, "produce", "-b", env.bootstrap, "--key-separator", ":", "-p", "0", topic],
        input=b"k1:one\nk2:two\n:three\n",
        check=False,
    )
    consumed = await anyio.run_process(
        [*sharecon, "consume", "-b", env.bootstrap, "-g", group, "--json", "-n", "3"]
        + ["--idle", "10", topic],
        check=False,
    )
    lines = [json.loads(line) for line in consumed.stdout.decode().splitlines() if line]
    keep = ("partition", "offset", "key", "value", "delivery_count")
    return (
        produced.returncode,
        consumed.returncode,
        [{k: line.get(k) for k in keep} for line in lines],
        # The start offset is not compared here: the CLI answers record by record, and
        # Kafka reports it one state write behind, so it depends on how answers batched.
        await env.fresh(group, topic),
    )


async def _lock_expiry(env: Env) -> object:
    topic, group = await env.setup("lockexpiry")
    short = await _raises(
        env.admin.alter_group_config(group, {"share.record.lock.duration.ms": "2000"})
    )
    if short != "ok":
        return short
    await env.produce(topic, 1)
    async with env.consumer(group, topic) as c:
        got = await _poll_until(c, 1)
        await anyio.sleep(2.6)  # past the lock: the record is the group's again
        try:
            c.acknowledge(got[0], AckType.ACCEPT)
            late = "ok"
        except errors.KafkaError as exc:
            late = type(exc).__name__
        committed = await c.commit()
    return (
        [r.delivery_count for r in got],
        late,
        [type(e).__name__ for e in committed.values() if e is not None],
        [r[5] > 1 for r in await env.fresh(group, topic)],
    )


CLIENT_SCENARIOS: tuple[ClientScenario, ...] = (
    ClientScenario("roundtrip", _roundtrip),
    ClientScenario("release-redelivers", _release_redelivers),
    ClientScenario("reject-is-final", _reject_is_final),
    ClientScenario("mixed-answers", _mixed_answers),
    ClientScenario("fresh-after-accept", _fresh_after_accept),
    ClientScenario("multi-partition", _multi_partition),
    ClientScenario("delivery-limit", _delivery_limit),
    ClientScenario("topic-errors", _topic_errors),
    ClientScenario("delete-topic", _delete_topic),
    ClientScenario("config-errors", _config_errors),
    ClientScenario("describe-config", _describe_config),
    ClientScenario("list-offsets", _list_offsets),
    ClientScenario("idempotent-produce", _idempotent),
    ClientScenario("describe-group", _describe_group),
    ClientScenario("group-not-found", _group_not_found),
    ClientScenario("non-empty-group", _non_empty_group),
    ClientScenario("alter-offsets", _alter_offsets),
    ClientScenario("delete-offsets", _delete_offsets),
    ClientScenario("delete-group", _delete_group),
    ClientScenario("lag", _lag),
    ClientScenario("latest-reset", _latest_reset),
    ClientScenario("record-limit", _record_limit),
    ClientScenario("implicit-mode", _implicit_mode),
    ClientScenario("values-and-nulls", _values_and_nulls),
    ClientScenario("renew-keeps-the-lock", _renew),
    ClientScenario("timestamps", _timestamps),
    ClientScenario("two-members-one-partition", _two_members),
    ClientScenario("close-releases-unanswered", _close_releases),
    ClientScenario("answer-errors", _answer_errors),
    ClientScenario("max-records-per-poll", _max_records),
    ClientScenario("empty-topic", _empty_topic),
    ClientScenario("produce-missing-topic", _produce_missing),
    ClientScenario("multi-topic", _multi_topic),
    ClientScenario("partial-accept-lag", _partial_accept),
    ClientScenario("rewind-to-earliest", _rewind),
    ClientScenario("interleaved-release", _interleaved),
    ClientScenario("acknowledge-offset", _acknowledge_offset),
    ClientScenario("dead-letter", _dead_letter),
    ClientScenario("send-batch", _send_batch),
    ClientScenario("describe-topics", _describe_topics),
    ClientScenario("compacted-keys", _compacted_keys),
    ClientScenario("large-values", _large_values),
    ClientScenario("headers", _headers),
    ClientScenario("dead-letter-policy", _dead_letter_policy),
    ClientScenario("cli-produce-consume", _cli),
    ClientScenario("lock-expiry", _lock_expiry),
)


# -- running -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario on both clusters."""

    scenario: str
    fake: object
    real: object

    @property
    def agrees(self) -> bool:
        """Whether both observed the same."""
        return self.fake == self.real

    def explain(self) -> str:
        """Both observations, for a failure message."""
        return f"{self.scenario}:\n  fake {self.fake!r}\n  real {self.real!r}"


async def _play(bootstrap: str, version: str, chosen: list[ClientScenario]) -> dict[str, object]:
    out: dict[str, object] = {}
    async with Admin(bootstrap, client_id="differential") as admin:

        async def one(s: ClientScenario) -> None:
            env = Env(bootstrap, version, admin, uuid.uuid4().hex[:8])
            started = anyio.current_time()
            try:
                seen = repr(await s.run(env))
            except Exception as exc:  # the observation is the failure itself
                seen = f"failed: {type(exc).__name__}: {exc}"
            # Topic and group names are the scenario's own on each cluster.
            out[s.name] = seen.replace(env.suffix, "*")
            TIMES[s.name] = anyio.current_time() - started

        async with anyio.create_task_group() as tg:
            for s in chosen:
                tg.start_soon(one, s)
    return out


async def compare(
    fake: str, real: str, version: str, scenarios: tuple[ClientScenario, ...] = CLIENT_SCENARIOS
) -> list[Outcome]:
    """Play the client scenarios meant for ``version`` on the fake at ``fake`` and the
    real broker at ``real``, all at once; one outcome per scenario."""
    minor = int(version.split(".")[1])
    chosen = [s for s in scenarios if s.min_minor <= minor]
    results: dict[str, dict[str, object]] = {}

    async def side(name: str, bootstrap: str) -> None:
        results[name] = await _play(bootstrap, version, chosen)

    async with anyio.create_task_group() as tg:
        tg.start_soon(side, "fake", fake)
        tg.start_soon(side, "real", real)
    return [Outcome(s.name, results["fake"][s.name], results["real"][s.name]) for s in chosen]


async def compare_wire(
    fake: str, real: str, version: str, *, concurrency: int = 12
) -> list[Outcome]:
    """Play the conformance scenarios meant for ``version`` request by request on both
    clusters, ``concurrency`` at a time on each (a loaded broker persists releases late,
    and some scenarios time what follows a release); one outcome per scenario."""
    chosen = scenarios_for(version)
    results: dict[str, dict[str, object]] = {"fake": {}, "real": {}}

    async def side(name: str, bootstrap: str) -> None:
        async with Admin(bootstrap, client_id="conformance-admin") as admin:
            async with anyio.create_task_group() as connections:
                target = BrokerTarget(bootstrap, version, admin, connections)

                limiter = anyio.CapacityLimiter(concurrency)

                async def one(index: int) -> None:
                    scenario = chosen[index]
                    async with limiter:
                        seen = tuple(await run_on_broker(target, scenario))
                    results[name][scenario.name] = seen

                async with anyio.create_task_group() as tg:
                    for i in range(len(chosen)):
                        tg.start_soon(one, i)
                connections.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(side, "fake", fake)
        tg.start_soon(side, "real", real)
    return [Outcome(s.name, results["fake"][s.name], results["real"][s.name]) for s in chosen]
