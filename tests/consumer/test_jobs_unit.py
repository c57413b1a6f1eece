"""The consumer's background jobs and per-record work without a broker: deserializers,
the lock keeper's pass, liveness (leave when idle, rejoin on the next ask), the dead-letter
routing job and process()'s workers (sharecon._consumer.{deserialize, lock_keeping,
liveness, dead_letters, process})."""

from __future__ import annotations

import uuid
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from sharecon import errors
from sharecon._consumer.buffer import Chunk
from sharecon._consumer.config import ConsumerConfig
from sharecon._consumer.core import ConsumerCore
from sharecon._consumer.dead_letters import route_dead_letters
from sharecon._consumer.deserialize import Deserializers
from sharecon._consumer.handout import SessionOwner
from sharecon._consumer.liveness import Liveness
from sharecon._consumer.lock_keeping import renew_due
from sharecon._consumer.process import Host, run_workers
from sharecon._share.intake import take_partition
from sharecon._share.lock_keeper import LockKeeper
from sharecon._share.membership import MemberState
from sharecon._share.session import SessionTag
from sharecon.protocol import ShareAcknowledgeRequest
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import Record, RetryLater, record_factory
from sharecon.types import AckType, TopicIdPartition

TP = TopicIdPartition(uuid.uuid4(), 0, "t")
TAG = SessionTag(1, 0)


def rec(offset: int, key: bytes | None = b"k", value: bytes | None = b"v") -> Record[Any, Any]:
    return Record("t", 0, TP, None, None, None, offset, 0, key, value, ())


# -- deserializers ---------------------------------------------------------------------------


def test_deserializers_replace_key_and_value_together_or_not_at_all() -> None:
    d = Deserializers(bytes.decode, lambda b: int(b))
    assert d.active and not Deserializers(None, None).active
    ok: Record[Any, Any] = rec(1, b"id", b"42")
    d.apply(ok)
    assert (ok.key, ok.value) == ("id", 42)
    assert (ok.serialized_key, ok.serialized_value) == (b"id", b"42")
    tombstone = rec(2, None, None)
    d.apply(tombstone)
    assert (tombstone.key, tombstone.value) == (None, None)
    bad = rec(3, b"id", b"not a number")
    with pytest.raises(errors.DeserializationError) as caught:
        d.apply(bad)
    err = caught.value
    assert (bad.key, bad.value) == (b"id", b"not a number")  # unchanged, key included
    assert (err.field, err.offset, err.data) == ("value", 3, b"not a number")
    assert "t-0 offset 3 (delivery 1): the value_deserializer failed on 12 bytes" in str(err)
    assert "not a number" not in str(err).split("ValueError")[0]  # the bytes are not shown


# -- the core, as the fetch loops leave it -----------------------------------------------------


def _core(share_acknowledge: int = 2) -> ConsumerCore:
    cluster = SimpleNamespace(versions={ShareAcknowledgeRequest: share_acknowledge})
    core = ConsumerCore(
        cast("Any", cluster), ConsumerConfig(group_id="g", topics=("t",)), cast("Any", None)
    )
    core.clock = lambda: 100.0
    return core


def _hand_out(core: ConsumerCore, n: int) -> list[Record[Any, Any]]:
    """``n`` records fetched (locked until t=130) and handed to the application."""
    data = encode_batch([WireRecord(i, 0, None, b"v", ()) for i in range(n)], base_offset=0)
    before = core.ledger.sequence
    core.ledger.add(TP, TAG, [(0, n - 1)])
    delivery = (before + 1, core.ledger.sequence)
    owner = SessionOwner(cast("Any", None), TAG, delivery, TP)
    intake = take_partition(TP, [(0, n - 1, 1)], data)
    core.buffer.push(
        Chunk(intake, TAG, 130.0, partial(record_factory, "t", 0, TP, owner, 130.0), delivery)
    )
    out = [core.buffer.pop_one(core.clock) for _ in range(n)]
    core.machine.deliver(TP, 0, n - 1, delivery)
    return [r for r in out if r is not None]


@pytest.mark.anyio
async def test_the_keeper_renews_what_nears_its_lock_and_drops_what_was_answered() -> None:
    core = _core()
    a, b, c = _hand_out(core, 3)
    keeper: LockKeeper[Record[Any, Any]] = LockKeeper(max_hold=60.0)
    for r in (a, b, c):
        keeper.hold(r, 100.0, r.lock_deadline)  # margin: a third of the 30 s left
    core.handout.answer(c, AckType.ACCEPT)
    assert renew_due(core, keeper, 60.0) == 0  # 30 s left: not due; c dropped
    assert set(keeper.keys()) == {a, b}
    core.clock = lambda: 121.0  # 9 s left, under the 10 s margin
    assert renew_due(core, keeper, 60.0) == 2
    assert set(core.machine.renewing) == {(TP, 0), (TP, 1)} and core.machine.renewals_sent == 2
    # A renew on its way is not sent again.
    assert renew_due(core, keeper, 60.0) == 0 and set(keeper.keys()) == {a, b}
    core.clock = lambda: 161.0  # held past max_hold: given up
    renew_due(core, keeper, 60.0)
    assert keeper.keys() == []


@pytest.mark.anyio
async def test_the_keeper_drops_a_record_it_cannot_renew_and_keeps_the_error() -> None:
    core = _core(share_acknowledge=1)  # Kafka 4.1: no RENEW
    [a] = _hand_out(core, 1)
    keeper: LockKeeper[Record[Any, Any]] = LockKeeper(max_hold=60.0)
    keeper.hold(a, 100.0, a.lock_deadline)
    core.clock = lambda: 125.0
    assert renew_due(core, keeper, 60.0) == 0
    assert keeper.keys() == [] and core.machine.renewing == {}
    assert isinstance(core.errors[-1], errors.UnsupportedVersionError)


def _state(core: ConsumerCore) -> MemberState:
    return core.membership.state


def _left(live: Liveness) -> bool:
    return live.left_idle


# -- liveness ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_idle_application_leaves_and_its_next_ask_rejoins() -> None:
    core = _core()
    core.membership.leave()  # never joined: it leaves at once, as after a leave heartbeat
    core.membership.rejoin()
    live = Liveness(0.2, request_timeout=1.0)
    left: list[bool] = []
    gone = anyio.Event()

    def on_leave() -> None:
        left.append(True)
        gone.set()

    [held] = _hand_out(core, 1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.watch, core, on_leave)
        # Waiting for records is asking: no leave while a task waits.
        with anyio.move_on_after(0.5):
            await live.wait_for_records(core)
        assert not left and live.waiting == 0
        with anyio.fail_after(3.0):
            await gone.wait()
        await anyio.sleep(0.05)  # leave() runs on after on_leave
        assert _left(live) and left == [True]
        # What it held was released, and the member left.
        taken = core.ledger.take(TAG)
        assert taken is not None and taken.acks[TP][0].types == (AckType.RELEASE,)
        assert _state(core) is MemberState.LEFT
        assert not core.handout.holds(held)
        restarted: list[bool] = []
        live.rejoin(core, lambda: restarted.append(True))
        assert not _left(live) and restarted == [True]
        assert _state(core) is MemberState.UNJOINED
        core.closing = True
        tg.cancel_scope.cancel()


# -- dead letters --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_dead_letters_are_routed_and_released_once_the_consumer_fails() -> None:
    core = _core()
    core.machine.dead_letter_limit = 5
    routed: list[tuple[int, str]] = []
    released: list[int] = []
    # How many records the machine counts in the router's hands, at each routing: the
    # invariant 7 of the whole-client simulation subtracts them from the ledger's.
    holding: list[int] = []
    two_routed, one_released = anyio.Event(), anyio.Event()

    async def route(record: Record[Any, Any], reason: str) -> object:
        holding.append(core.machine.dead_letters_routing)
        if record.offset == 2:
            raise errors.DeadLetterError("the dead-letter topic is not writable")
        routed.append((record.offset, reason))
        if len(routed) == 2:
            two_routed.set()
        return None

    def release(record: Record[Any, Any]) -> None:
        holding.append(core.machine.dead_letters_routing)
        released.append(record.offset)
        one_released.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(route_dead_letters, core, route, release)
        # Record 1 failed here before: its reason says on which delivery.
        core.machine.note_failed(rec(1).topic_partition, 1, 4)
        core.machine.dead_letters.extend([rec(1), rec(2), rec(3)])
        core.dead_letter_signal.set()
        with anyio.fail_after(3.0):
            await two_routed.wait()
        reason = "delivered 1 times (max_deliveries=5); "
        assert routed == [
            (1, reason + "it failed here on delivery 4"),
            (3, reason + "never failed here (route_unseen=True)"),
        ]
        assert released == []
        assert isinstance(core.errors[-1], errors.DeadLetterError)
        # Each of the three taken was counted until settled, the failed copy too.
        assert holding == [3, 2, 1]
        await anyio.wait_all_tasks_blocked()
        assert core.machine.dead_letters_routing == 0 and not core.machine.dead_letters
        # Failed: what is queued now is released, not routed.
        core.fatal = errors.KafkaError("stopped")
        core.machine.dead_letters.append(rec(4))
        core.dead_letter_signal.set()
        with anyio.fail_after(3.0):
            await one_released.wait()
        assert released == [4] and len(routed) == 2
        await anyio.wait_all_tasks_blocked()
        assert holding == [3, 2, 1, 1] and core.machine.dead_letters_routing == 0
        core.closing = True
        tg.cancel_scope.cancel()


# -- process() workers ---------------------------------------------------------------------------


def _buffer(core: ConsumerCore, n: int, delivery_count: int = 1) -> None:
    """``n`` records fetched and buffered, not handed out yet."""
    data = encode_batch([WireRecord(i, 0, None, b"%d" % i, ()) for i in range(n)], base_offset=0)
    before = core.ledger.sequence
    core.ledger.add(TP, TAG, [(0, n - 1)])
    delivery = (before + 1, core.ledger.sequence)
    owner = SessionOwner(cast("Any", None), TAG, delivery, TP)
    intake = take_partition(TP, [(0, n - 1, delivery_count)], data)
    core.buffer.push(
        Chunk(intake, TAG, 130.0, partial(record_factory, "t", 0, TP, owner, 130.0), delivery)
    )


@pytest.mark.anyio
@pytest.mark.parametrize("concurrency", [1, 3])
async def test_workers_answer_for_the_handler_and_never_hand_over_what_fails_to_deserialize(
    concurrency: int,
) -> None:
    core = _core()
    _buffer(core, 6, delivery_count=3)
    answers: dict[int, AckType] = {}
    dead: list[tuple[int, str]] = []
    disposed: list[int] = []
    asks: list[int] = []
    handled: list[int] = []

    def deserialize(record: Record[Any, Any]) -> None:
        if record.offset == 4:
            raise errors.DeserializationError(
                "bad", topic="t", partition=0, offset=4, field="value", data=b"4", delivery_count=3
            )
        record.value = int(cast("bytes", record.value))

    async def dispose(
        core: ConsumerCore, record: Record[Any, Any], exc: errors.DeserializationError
    ) -> None:
        disposed.append(record.offset)

    async def to_dead_letters(core: ConsumerCore, record: Record[Any, Any], reason: str) -> object:
        dead.append((record.offset, reason))
        return None

    async def handler(record: Record[Any, Any]) -> None:
        handled.append(cast("int", record.value))
        if record.offset == 1:
            raise ValueError("handler bug")

    async def never(core: ConsumerCore) -> None:
        raise AssertionError("the workers wait for records only while open")

    async def no_keeper(core: ConsumerCore, keeper: LockKeeper[Record[Any, Any]]) -> None:
        raise AssertionError("no keeper of its own")

    host = Host(
        asked=lambda core: asks.append(1),
        wait_for_records=never,
        closed=lambda: True,  # drain what is buffered, then end
        deserialize=deserialize,
        dispose=dispose,
        to_dead_letters=to_dead_letters,
        answer=lambda record, ack: answers.__setitem__(record.offset, ack),
        release_later=lambda record, delay: answers.__setitem__(record.offset, AckType.RENEW),
        keep_locks=no_keeper,
    )
    with anyio.fail_after(5.0):
        await run_workers(
            core,
            host,
            handler,
            concurrency=concurrency,
            keeper=None,
            own_keeper=False,
            dead_letter_limit=3,
        )
    assert sorted(handled) == [0, 1, 2, 3, 5]  # deserialized; 4 never reached the handler
    assert answers == dict.fromkeys([0, 2, 3, 5], AckType.ACCEPT)
    assert dead == [(1, "ValueError: handler bug")]  # its last allowed delivery
    assert disposed == [4] and isinstance(core.errors[-1], errors.DeserializationError)
    assert len(asks) >= 6


@pytest.mark.anyio
async def test_a_failed_handler_below_the_limit_releases_and_a_failed_consumer_ends_it() -> None:
    core = _core()
    _buffer(core, 3)
    answers: dict[int, AckType] = {}
    later: list[tuple[int, float]] = []

    async def handler(record: Record[Any, Any]) -> object:
        if record.offset == 0:
            return RetryLater(2.0)  # returned: released after its delay
        if record.offset == 1:
            core.fatal = errors.KafkaError("stopped")
            raise ValueError("and the handler failed")
        return None

    async def never(*args: Any) -> Any:
        raise AssertionError("not called")

    host = Host(
        asked=lambda core: None,
        wait_for_records=never,
        closed=lambda: False,
        deserialize=None,
        dispose=never,
        to_dead_letters=never,
        answer=lambda record, ack: answers.__setitem__(record.offset, ack),
        release_later=lambda record, delay: later.append((record.offset, delay)),
        keep_locks=never,
    )
    with anyio.fail_after(5.0):
        await run_workers(
            core,
            host,
            handler,
            concurrency=1,
            keeper=None,
            own_keeper=False,
            dead_letter_limit=3,
        )
    # Offset 1 is below the limit: released. Offset 2 is never taken: the consumer failed.
    assert answers == {1: AckType.RELEASE} and later == [(0, 2.0)]
