"""The fetch loop's lifecycle, sans I/O (``sharecon/_consumer/fetch_loop.py``).

The loop is driven here as its two ports drive it (the consumer's ``NodeFetcher`` and the
simulator's member): pull an action, carry it out against the model broker, report what
happened. No event loop, no clock: time is a number passed in.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

import pytest

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._consumer.buffer import DeliveryBuffer
from sharecon._consumer.fetch_driver import FetchDriver
from sharecon._consumer.fetch_loop import (
    CLOSED,
    STOPPED,
    Apply,
    Await,
    Done,
    FetchLoop,
    Idle,
    Pause,
    Phase,
    Send,
)
from sharecon._share.effects import BackOff, Deliver, Report, SessionLost
from sharecon._share.ledger import AckFailure
from sharecon._share.machine import MIN_DRY_WAIT, ShareMachine
from sharecon._share.requests import FetchParams
from sharecon.protocol import ShareAcknowledgeRequest, ShareFetchRequest
from sharecon.testing.model import ModelBroker
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from sharecon._consumer.fetch_loop import Action
    from sharecon._share.effects import Effect

GROUP = "g"
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x7E57)
NAMES = {TOPIC_ID: TOPIC}
TP = TopicIdPartition(TOPIC_ID, 0, TOPIC)
NODE = 1
LINGER = 0.1
PARAMS = FetchParams(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, max_records=50, batch_size=50)


class Counts:
    def __init__(self) -> None:
        self.planned = 0
        self.ended = 0

    def fetch_planned(self, node_id: int) -> None:
        self.planned += 1

    def fetch_ended(self, node_id: int) -> None:
        self.ended += 1


class Rig:
    """One leader, one partition, the model broker, and a port that records effects."""

    def __init__(
        self,
        records: int = 3,
        driver: type[FetchDriver] = FetchDriver,
        record_limit: int | None = None,
    ) -> None:
        self.broker = ModelBroker("4.4", node_id=NODE)
        self.broker.create_topic(TOPIC, 1, TOPIC_ID)
        self.broker.configure_group(GROUP, lock_ms=30_000, earliest=True)
        if records:
            self.broker.produce(TOPIC, 0, records)
        self.machine = ShareMachine(GROUP, PARAMS, record_limit=record_limit)
        self.buffer = DeliveryBuffer(max_records=100, max_bytes=1 << 20)
        self.running = True
        self.counts = Counts()
        self.loop = FetchLoop(
            driver(self.machine, self.buffer, NODE, lambda: [TP], clock=lambda: self.now),
            "m1",
            running=lambda: self.running,
            closing=lambda: not self.running,
            backoff=Backoff(initial=0.1, maximum=1.0, jitter=0.0),
            timeout=30.0,
            ack_timeout=10.0,
            ack_linger=LINGER,
            counts=self.counts,
        )
        self.now = 0.0
        self.effects: list[Effect] = []
        self.body: Any = None

    def next(self) -> Action:
        return self.loop.next(self.now)

    def apply(self, a: Action) -> None:
        assert type(a) is Apply, a
        for e in a.effects:
            self.effects.append(e)
            if type(e) is Deliver:
                for r in e.intake.ranges:  # handed straight to the application
                    self.machine.deliver(e.tp, r.first_offset, r.last_offset, e.delivery)

    def send(self) -> Send:
        a = self.next()
        assert type(a) is Send, a
        self.body = a.body
        self.loop.sent(self.now)
        return a

    def answer(self) -> None:
        """The broker answers the request out; the port takes the answer in."""
        a = self.next()
        assert type(a) is Await, a
        body = self.body
        if isinstance(body, ShareFetchRequest):
            resp: Any = self.broker.share_fetch(body, "c1", self.now)
        else:
            resp = self.broker.share_acknowledge(body, "c1", self.now)
        self.loop.answered(resp, NAMES, self.now)

    def until_done(self) -> Done:
        """Take the outcome in: effects carried out, a pipelined send put on the wire."""
        while True:
            a = self.next()
            if type(a) is Apply:
                self.apply(a)
            elif type(a) is Send:
                self.body = a.body
                self.loop.sent(self.now)
            else:
                assert type(a) is Done, a
                return a

    def settle(self) -> Action:
        """Answer every request at once until the loop waits (idle, pause, stop)."""
        while True:
            a = self.next()
            if type(a) is Apply:
                self.apply(a)
            elif type(a) is Send:
                self.body = a.body
                self.loop.sent(self.now)
            elif type(a) is Await:
                self.answer()
            elif type(a) is not Done:
                return a

    def fetch_once(self) -> Done:
        """Send a fetch, have it answered, take the answer in."""
        self.send()
        self.answer()
        return self.until_done()

    def reported(self) -> list[Any]:
        return [r for e in self.effects if type(e) is Report for r in e.results]


def test_a_fetch_goes_out_is_answered_and_its_records_come_in() -> None:
    rig = Rig()
    send = rig.send()
    assert isinstance(send.body, ShareFetchRequest)
    assert send.body.share_session_epoch == 0
    assert rig.loop.phase is Phase.AWAITING
    assert rig.loop.inflight is not None
    assert rig.counts.planned == 1
    rig.answer()
    first = rig.next()
    assert type(first) is Apply and first.answer is not None and first.answer.acquired == 3
    rig.apply(first)
    # The next fetch goes out before the records come in (pipelining).
    pipelined = rig.next()
    assert type(pipelined) is Send and not pipelined.final
    rig.body = pipelined.body
    rig.loop.sent(rig.now)
    rig.apply(rig.next())
    assert [type(e) for e in rig.effects].count(Deliver) == 1
    done = rig.next()
    assert type(done) is Done and done.answered and done.ok and not done.final
    assert rig.loop.phase is Phase.AWAITING  # the pipelined fetch is out
    # It comes back empty; the member holds records: nothing more to ask, no acks yet,
    # until a long poll's time passed (the planner is dry).
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    assert rig.counts.planned == rig.counts.ended == 2


def test_a_fetch_that_came_back_empty_while_records_are_held_is_sent_again() -> None:
    """Dry (a no-wait fetch came back empty while the application holds records): the
    loop waits for an answer, but when none comes within its idle wait it fetches again.
    The application may answer only once it has seen more records (handlers that wait
    for each other): waiting for its answer alone stopped it for good."""
    rig = Rig()
    rig.fetch_once()
    # The member holds 3 records: a no-wait fetch comes back empty; nothing answered.
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    assert rig.machine.leader(NODE).planner.dry
    rig.broker.produce(TOPIC, 0, 2)  # written after that empty answer
    assert rig.settle() == Idle(MIN_DRY_WAIT)  # a wake-up with no answer: still dry
    rig.loop.idle_expired()
    again = rig.next()
    assert type(again) is Send and not again.final
    assert isinstance(again.body, ShareFetchRequest)
    assert again.body.max_wait_ms == 0  # records are still held: still no long poll
    rig.body = again.body
    rig.loop.sent(rig.now)
    rig.answer()
    rig.until_done()
    delivered = [r for e in rig.effects if type(e) is Deliver for r in e.intake.ranges]
    assert sum(r.last_offset - r.first_offset + 1 for r in delivered) == 5


def test_a_dry_planner_fetches_again_a_long_poll_after_the_empty_answer() -> None:
    """The dry wait is a deadline from the empty answer, not a fresh wait at each idle
    spell: wake-ups for other things meanwhile (each renewal a lock keeper sends) would
    otherwise restart it for ever (found by the simulation: a gathering application
    that keeps its locks)."""
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)  # dry since now
    rig.now += 0.06
    idle = rig.settle()  # woken for something else: what is left of the wait
    assert type(idle) is Idle and idle.timeout == pytest.approx(MIN_DRY_WAIT - 0.06)
    rig.now += 0.06
    assert rig.settle() == Idle(0.0)  # past the deadline: the wait ends at once
    rig.loop.idle_expired()
    again = rig.next()
    assert type(again) is Send and isinstance(again.body, ShareFetchRequest)


def test_only_a_timed_idle_wait_tells_the_driver_it_expired() -> None:
    """The port's idle wait ends without a wake-up: the driver is told only when the loop
    asked for a timed wait (acknowledgements lingering, a dry planner), not after the
    port's periodic wake-up from an untimed one (the simulator's copy of the loop told
    the planner its linger expired after every idle wait)."""
    rig = Rig(driver=Counting)
    driver = cast("Counting", rig.loop.driver)
    rig.fetch_once()
    driver.timeout = None
    assert rig.settle() == Idle(None)
    rig.loop.idle_expired()
    assert driver.expired == 0
    driver.timeout = LINGER
    assert rig.settle() == Idle(LINGER)
    rig.loop.idle_expired()
    assert driver.expired == 1


def test_an_expired_linger_sends_the_marked_acknowledgements_on_their_own() -> None:
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    rig.buffer.held = lambda: True  # no room: no fetch is due to carry the acknowledgements
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    rig.loop.idle_expired()
    assert rig.machine.leader(NODE).planner.linger_expired


class Counting(FetchDriver):
    """Idle waits as long as :attr:`timeout` says, counting the waits that expired."""

    __slots__ = ("expired", "timeout")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout: float | None = None
        self.expired = 0

    def idle_timeout(self, ack_linger: float, now: float | None = None) -> float | None:
        return self.timeout

    def idle_expired(self) -> None:
        self.expired += 1


def no_room_with_answers(rig: Rig, at: float = 0.0) -> None:
    """The rig's three records fetched and answered at ``at`` while the buffer has no room
    (no fetch is due to carry the answers)."""
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    rig.buffer.held = lambda: True
    rig.now = at
    rig.machine.answer_all_delivered(AckType.ACCEPT)


def test_answers_wait_their_linger_for_room_then_go_out_on_their_own() -> None:
    rig = Rig()
    no_room_with_answers(rig)
    assert rig.next() == Idle(LINGER)  # they wait for room to ride a fetch
    # A wake-up in the middle (another answer, a record taken) does not start it again.
    rig.now = 0.06
    idle = rig.next()
    assert type(idle) is Idle and idle.timeout == pytest.approx(LINGER - 0.06)
    rig.now = LINGER
    rig.loop.idle_expired()
    send = rig.next()
    assert type(send) is Send
    assert isinstance(send.body, ShareAcknowledgeRequest)
    assert send.taken is not None and send.taken.count == 3
    rig.body = send.body
    rig.loop.sent(rig.now)
    rig.answer()
    rig.until_done()
    assert [r.ok for r in rig.reported()] == [True]


def test_answers_waiting_for_room_ride_the_fetch_once_there_is_room() -> None:
    rig = Rig()
    no_room_with_answers(rig)
    # Rule 1 alone: the answers do not follow a dry fetch (they would gather, rule 2).
    rig.machine.leader(NODE).planner.gathering = False
    assert rig.next() == Idle(LINGER)
    rig.now = 0.05
    rig.buffer.held = lambda: False  # the application took the buffered records
    send = rig.next()
    assert type(send) is Send
    assert isinstance(send.body, ShareFetchRequest)
    assert send.taken is not None and send.taken.count == 3
    assert rig.machine.leader(NODE).planner.held_since is None
    # Later answers wait a whole linger again: counted from when they began to wait.
    rig.broker.produce(TOPIC, 0, 3)
    rig.loop.sent(rig.now)
    rig.body = send.body
    rig.answer()
    rig.until_done()  # three more records, and a fetch pipelined behind them
    rig.answer()
    rig.until_done()
    rig.buffer.held = lambda: True
    rig.now = 0.5
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    idle = rig.next()
    assert type(idle) is Idle and idle.timeout == pytest.approx(LINGER)


def test_answers_near_their_lock_end_do_not_wait_for_room() -> None:
    # The rig's lock is 30 s from the fetch at 0: a second before its end the answers go
    # at once, and a wait that began earlier ends a second before it.
    rig = Rig()
    no_room_with_answers(rig, at=29.5)
    send = rig.next()
    assert type(send) is Send and isinstance(send.body, ShareAcknowledgeRequest)
    rig = Rig()
    no_room_with_answers(rig, at=28.95)
    idle = rig.next()
    assert type(idle) is Idle and idle.timeout == pytest.approx(0.05)


def test_a_budget_of_held_records_sends_the_answers_at_once() -> None:
    # Under a strict record limit answered records count against the budget until the
    # broker has the answers: waiting for room would wait for themselves.
    rig = Rig(record_limit=3)
    rig.fetch_once()
    rig.buffer.held = lambda: True  # and the buffer is full
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    send = rig.next()
    assert type(send) is Send and isinstance(send.body, ShareAcknowledgeRequest)
    assert send.taken is not None and send.taken.count == 3


def test_a_transport_failure_pauses_longer_each_time_and_an_answer_resets_it() -> None:
    rig = Rig()
    rig.send()
    rig.loop.failed(rig.now)
    a = rig.next()
    assert type(a) is Apply  # the failure's effects: the session incarnation is over
    rig.apply(a)
    assert not any(type(e) is BackOff for e in rig.effects)  # the loop's own, never the port's
    done = rig.next()
    assert type(done) is Done and not done.answered and not done.ok
    assert rig.next() == Pause(0.1, refresh=True)
    assert rig.next() == Pause(0.1, refresh=False)  # refresh metadata once per back-off
    rig.now = 0.1
    rig.send()
    rig.loop.failed(rig.now)
    rig.until_done()
    pause = rig.next()  # the second in a row: twice as long
    assert type(pause) is Pause and pause.refresh
    assert pause.until == pytest.approx(0.1 + 0.2)
    rig.now = 0.31
    rig.fetch_once()  # answered: the next failure pauses 0.1 s again
    rig.loop.failed(rig.now)  # the pipelined fetch fails
    rig.until_done()
    pause = rig.next()
    assert type(pause) is Pause
    assert pause.until == pytest.approx(0.31 + 0.1)


def test_an_outcome_for_no_request_out_changes_nothing() -> None:
    rig = Rig()
    rig.loop.failed(0.0)
    rig.loop.answered(None, NAMES, 0.0)  # type: ignore[arg-type]
    assert rig.loop.phase is Phase.READY
    send = rig.next()
    assert type(send) is Send  # planned as if nothing happened
    assert rig.loop.pause_until == float("-inf")


def test_a_cut_with_no_request_out_ends_the_session_before_the_next_turn() -> None:
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    tag = rig.machine.leader(NODE).session.tag
    rig.loop.connection_closed()
    a = rig.next()
    assert type(a) is Apply
    assert [e.tag for e in a.effects if type(e) is SessionLost] == [tag]
    send = rig.next()
    assert type(send) is Send
    assert isinstance(send.body, ShareFetchRequest)
    assert send.body.share_session_epoch == 0  # a new session
    assert rig.loop.pause_until == float("-inf")  # no back-off: nothing failed


def test_a_cut_with_a_request_out_fails_that_request_and_the_session_only_once() -> None:
    rig = Rig()
    rig.fetch_once()  # the pipelined fetch is out
    assert rig.loop.phase is Phase.AWAITING
    rig.loop.connection_closed()  # the watcher saw it first
    rig.loop.failed(rig.now)  # then the request failed with it
    rig.until_done()
    assert len([e for e in rig.effects if type(e) is SessionLost]) == 1
    assert not rig.loop.conn_dead  # the failure ended that session: nothing more to end
    assert type(rig.next()) is Pause


def test_an_answer_that_cannot_be_taken_in_resets_the_session() -> None:
    rig = Rig()
    rig.send()
    assert rig.loop.answer_error(errors.RemoteProtocolError("garbled"), rig.now)
    done = rig.until_done()
    assert done.answered and not done.ok
    assert any(type(e) is SessionLost for e in rig.effects)
    assert type(rig.next()) is Pause
    assert rig.counts.planned == rig.counts.ended == 1
    # No answer is being taken in now: the port's error is its own to raise.
    assert not rig.loop.answer_error(errors.RemoteProtocolError("again"), rig.now)


def test_stopping_answers_the_request_out_then_closes_the_session_with_final() -> None:
    rig = Rig()
    rig.fetch_once()  # the pipelined fetch is out
    rig.running = False
    rig.answer()  # answered while stopping: no more pipelining
    rig.until_done()
    assert rig.loop.phase is Phase.READY
    assert rig.next() is STOPPED
    assert rig.next() is STOPPED  # until told to close
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    rig.loop.close()
    final = rig.next()
    assert type(final) is Send and final.final
    assert isinstance(final.body, ShareAcknowledgeRequest)
    assert final.body.share_session_epoch == -1
    assert final.taken is not None and final.taken.count == 3
    rig.body = final.body
    rig.loop.sent(rig.now)
    rig.answer()
    done = rig.until_done()
    assert done.final and done.answered and done.ok
    assert rig.next() is CLOSED
    assert [r.ok for r in rig.reported()] == [True]


@pytest.mark.parametrize(("limit", "awaited"), [(None, 10.0), (2.5, 2.5), (60.0, 10.0)])
def test_the_final_request_is_awaited_within_the_close_s_share(
    limit: float | None, awaited: float
) -> None:
    """The close gives the FINAL requests part of its time (``close(timeout)``): an
    answer that never comes must leave the rest for leaving the group. Never longer than
    any other answer is awaited (``ack_timeout``, 10 s here)."""
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    rig.running = False
    assert rig.next() is STOPPED
    rig.loop.close(limit)
    final = rig.next()
    assert type(final) is Send and final.final
    rig.loop.sent(rig.now)
    wait = rig.next()
    assert type(wait) is Await and wait.timeout == awaited


@pytest.mark.parametrize("how", ["cut", "send failed", "unreadable"])
def test_a_failure_of_the_final_request_closes_the_session_as_failed(how: str) -> None:
    """The case the simulator's copy of the loop got wrong (seed 590556105): the
    connection cut while the session's FINAL request is out. However the FINAL request
    fails, its acknowledgements are reported failed and the loop is closed, without a
    back-off, a retry or a new session."""
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    rig.running = False
    assert rig.next() is STOPPED
    rig.loop.close()
    final = rig.next()
    assert type(final) is Send and final.final and final.taken is not None
    if how == "send failed":
        rig.loop.send_failed(rig.now)
    else:
        assert rig.loop.sent(rig.now) is rig.loop.inflight
        assert type(rig.next()) is Await
        if how == "cut":
            rig.loop.connection_closed()
            rig.loop.failed(rig.now)
        else:
            assert rig.loop.answer_error(errors.RemoteProtocolError("garbled"), rig.now)
    a = rig.next()
    assert type(a) is Apply
    rig.apply(a)
    results = rig.reported()
    assert results and all(not r.ok and r.reason is AckFailure.SESSION_RESET for r in results)
    done = rig.next()
    assert type(done) is Done and done.final and not done.ok
    assert rig.next() is CLOSED
    assert rig.next() is CLOSED
    assert rig.loop.pause_until == float("-inf")  # no back-off
    assert rig.machine.leader(NODE).session.is_new  # that incarnation is over


def test_a_cut_while_idle_before_close_sends_no_final_request() -> None:
    rig = Rig()
    rig.fetch_once()
    assert rig.settle() == Idle(MIN_DRY_WAIT)
    rig.machine.answer_all_delivered(AckType.ACCEPT)
    rig.loop.connection_closed()
    rig.running = False
    assert rig.next() is STOPPED
    rig.loop.close()
    a = rig.next()
    assert type(a) is Apply  # the session ended with its connection
    rig.apply(a)
    assert any(type(e) is SessionLost for e in rig.effects)
    assert all(not r.ok for r in rig.reported())
    assert rig.next() is CLOSED


def test_a_pipelined_send_that_fails_keeps_the_answers_records_out() -> None:
    rig = Rig()
    rig.send()
    rig.answer()
    first = rig.next()
    assert type(first) is Apply and first.answer is not None and first.answer.acquired == 3
    rig.apply(first)
    pipelined = rig.next()
    assert type(pipelined) is Send
    rig.loop.send_failed(rig.now)
    rig.until_done()
    # The session the answer belonged to is over: its records are not taken in.
    assert not any(type(e) is Deliver for e in rig.effects)
    assert rig.counts.planned == rig.counts.ended == 2
    assert type(rig.next()) is Pause


def test_asking_again_before_reporting_the_send_is_a_port_bug() -> None:
    rig = Rig()
    assert type(rig.next()) is Send
    with pytest.raises(RuntimeError, match="report the send"):
        rig.next()
