"""Delayed retry, a visibility timeout, against a real broker (Kafka 4.2+, renew):
``record.release(delay=...)`` holds the record for the delay and releases it then, so
it comes back after the delay and not before; a member killed meanwhile loses nothing."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from sharecon import Backoff, DeadLetterPolicy, RetryLater
from sharecon.consumer import ShareConsumer
from sharecon.dlq import dead_letter_info
from tests.consumer.conftest import produce
from tests.consumer.test_dlq import read_all

if TYPE_CHECKING:
    from sharecon.record import Record
    from sharecon.testing.pytest_plugin import ShareGroupFactory, TopicFactory

pytestmark = [pytest.mark.anyio, pytest.mark.broker]

LOCK_MS = 2000  # the group's lock: a delay of several locks needs renewals to hold


async def test_a_delayed_record_comes_back_after_the_delay_not_before(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"later"])
    delay = 2.5 * LOCK_MS / 1000  # without renewals the lock would end 3 s early
    back: list[tuple[float, str, int]] = []
    async with (
        ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit") as a,
        ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit") as b,
    ):

        async def read(name: str, consumer: ShareConsumer, tg: anyio.abc.TaskGroup) -> None:
            async for record in consumer:
                if record.delivery_count == 1:
                    released_at = anyio.current_time()
                    record.release(delay=delay)
                    first.append(released_at)
                    continue
                back.append((anyio.current_time(), name, record.delivery_count))
                record.accept()
                await consumer.commit()
                tg.cancel_scope.cancel()

        first: list[float] = []
        with anyio.fail_after(40):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read, "a", a, tg)
                tg.start_soon(read, "b", b, tg)
    assert len(first) == 1 and len(back) == 1, (first, back)
    at, member, count = back[0]
    assert at - first[0] >= delay, f"back after {at - first[0]:.2f} s, before the {delay} s delay"
    assert at - first[0] < delay + 10
    assert count == 2, "the delayed release is one delivery"
    assert member in ("a", "b")


async def test_process_retry_later_and_policy_backoff_space_the_deliveries(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"flaky"])
    seen: list[tuple[float, int]] = []
    policy = DeadLetterPolicy(
        max_deliveries=4, retry_backoff=Backoff(initial=1.5, maximum=3.0, jitter=0)
    )
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], dead_letter=policy
    ) as consumer:

        async def handler(record: Record) -> object:
            seen.append((anyio.current_time(), record.delivery_count))
            if record.delivery_count == 1:
                return RetryLater(2.5)  # returned: released 2.5 s later
            if record.delivery_count == 2:
                raise ValueError("flaky")  # the policy: backoff.delay(1) = 3 s
            done.set()
            return None

        done = anyio.Event()
        with anyio.fail_after(40):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.process, handler)
                await done.wait()
                await anyio.sleep(0.2)  # the handler returns: its record is accepted
                tg.cancel_scope.cancel()
            verdict = await consumer.commit()
    assert all(err is None for err in verdict.values()), verdict
    assert [count for _, count in seen] == [1, 2, 3]
    gaps = [later - earlier for (earlier, _), (later, _) in zip(seen, seen[1:], strict=False)]
    assert gaps[0] >= 2.5 and gaps[1] >= 3.0, gaps
    assert gaps[0] < 12 and gaps[1] < 12, gaps


_VICTIM = textwrap.dedent(
    """
    import anyio, json, sys
    from sharecon import ShareConsumer

    async def main(bootstrap, group, topic):
        async with ShareConsumer(bootstrap, group_id=group, topics=[topic], ack_mode="explicit") as c:
            async for record in c:
                record.release(delay=600.0)   # a long visibility timeout: killed during it
                print(json.dumps([record.offset, record.delivery_count]), flush=True)
                await anyio.sleep(3600)

    anyio.run(main, *sys.argv[1:4])
    """
)


async def test_a_member_killed_during_the_delay_loses_nothing(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    """SIGKILL during the delay: nothing renews the lock any more, so the record comes back
    when it ends (long before the 600 s delay), as one more delivery; nothing is lost."""
    topic = topic_factory(1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    await produce(kafka_bootstrap, topic, [b"held"])
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [sys.executable, "-c", _VICTIM, kafka_bootstrap, group, topic]
    async with await anyio.open_process(cmd, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            with anyio.fail_after(40):
                line = await BufferedByteReceiveStream(proc.stdout).receive_until(b"\n", 1 << 16)
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            await proc.wait()
            err = await proc.stderr.receive()
            pytest.fail(f"the victim consumer failed: {err.decode(errors='replace')}")
        offset, count = json.loads(line)
        assert count == 1
        # Past one lock duration: the victim renewed it at least once before it dies.
        await anyio.sleep(1.5 * LOCK_MS / 1000)
        killed_at = anyio.current_time()
        proc.send_signal(signal.SIGKILL)  # no close(): the process just dies
        await proc.wait()
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as other:
        with anyio.fail_after(30):
            record = await other.__anext__()
        back_after = anyio.current_time() - killed_at
        await other.commit()
    assert (record.offset, record.delivery_count) == (offset, 2)
    assert back_after < 20, back_after


async def test_a_clean_close_releases_delayed_records_at_once(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group_factory: ShareGroupFactory
) -> None:
    topic = topic_factory(1)
    # A long lock: the record can come back this soon only by the close's release.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    await produce(kafka_bootstrap, topic, [b"closing"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=group, topics=[topic], ack_mode="explicit"
    ) as a:
        with anyio.fail_after(30):
            record = await a.__anext__()
        record.release(delay=600.0)
    closed_at = anyio.current_time()
    async with ShareConsumer(kafka_bootstrap, group_id=group, topics=[topic]) as b:
        with anyio.fail_after(30):
            back = await b.__anext__()
        back_after = anyio.current_time() - closed_at
        await b.commit()
    assert (back.offset, back.delivery_count) == (record.offset, 2)
    assert back_after < 20, back_after  # neither the 600 s delay nor the 60 s lock


async def test_poll_in_explicit_mode_goes_on_after_a_delayed_release(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """A record released with a delay is answered: the next poll() does not ask for it."""
    topic = topic_factory(1)
    await produce(kafka_bootstrap, topic, [b"later"])
    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
    ) as consumer:
        with anyio.fail_after(30):
            batch: list[Record] = []
            while not batch:
                batch = await consumer.poll(5.0)
            released_at = anyio.current_time()
            batch[0].release(delay=1.0)
            back: list[Record] = []
            while not back:
                back = await consumer.poll(5.0)  # raised UnacknowledgedRecordsError before
            back_after = anyio.current_time() - released_at
            back[0].accept()
            await consumer.commit()
    assert (back[0].offset, back[0].delivery_count) == (batch[0].offset, 2)
    assert back_after >= 1.0


async def test_with_retry_backoff_the_last_allowed_delivery_still_goes_to_the_dlq(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    """docs/consumer.md: the backoff spaces the deliveries before the last; a failure on the
    last allowed delivery is routed to the dead-letter topic, not released again."""
    topic = topic_factory(1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [b"poison"])
    seen: list[tuple[float, int]] = []
    policy = DeadLetterPolicy(
        topic=dlq, max_deliveries=2, retry_backoff=Backoff(initial=1.5, maximum=1.5, jitter=0)
    )

    more = anyio.Event()

    async def handler(record: Record) -> None:
        seen.append((anyio.current_time(), record.delivery_count))
        if len(seen) > 2:
            more.set()
        raise ValueError("cannot parse")

    async with ShareConsumer(
        kafka_bootstrap, group_id=share_group, topics=[topic], dead_letter=policy
    ) as consumer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.process, handler)
            [copy] = await read_all(kafka_bootstrap, dlq, 1)
            with anyio.move_on_after(1.0):  # nothing more is delivered
                await more.wait()
            tg.cancel_scope.cancel()
    assert [count for _, count in seen] == [1, 2]
    assert seen[1][0] - seen[0][0] >= 1.5  # the backoff before the last delivery
    # Routed on delivery 2, the last allowed, not released for another backoff.
    info = dead_letter_info(copy.headers)
    assert info is not None and info.delivery_count == 2, info
    assert info.reason == "ValueError: cannot parse"
