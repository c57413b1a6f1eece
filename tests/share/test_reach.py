"""Batch acquisition (issue 32, Kafka 4.1): buffered answers the application cannot reach
before their locks end are released at once, and nothing is fetched while the member
holds more than it handles within half the lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sharecon._share.effects import Reach, Wake
from sharecon._share.reach import unreachable
from tests.share.test_machine import NODE, TP, answer, machine, opened, send, take

if TYPE_CHECKING:
    from sharecon._share.fetch_policy import Turn
    from sharecon._share.machine import ShareMachine


def test_answers_whose_first_record_cannot_be_reached_in_time_are_released() -> None:
    # Issue 32's scenario: three answers of 330 records, 40 records/s, a 15 s lock.
    chunks = [(15.0, 330), (15.0, 330), (15.0, 330)]
    assert unreachable(0.0, None, chunks) == []  # not measured: nothing released
    # The second one's first record is reached at 8.25 s: kept; the third's at 16.5 s.
    assert unreachable(0.0, 40.0, chunks) == [2]
    # Later, with the first one handled: what is left of the second reaches the third.
    assert unreachable(9.0, 40.0, [(15.0, 300), (15.0, 330)]) == [1]
    assert unreachable(9.0, 40.0, [(15.0, 100), (15.0, 330)]) == []
    # Already out of reach, a first chunk goes too; empty ones and no deadline are kept.
    assert unreachable(15.0, 40.0, [(15.0, 10), (None, 5), (20.0, 0)]) == [0]


def measured(taken: int, answered: int) -> ShareMachine:
    """A member that took ``taken`` records in one answer (unmeasured: it fetched) and
    answered the first ``answered`` of them in a second, with a 10 s lock: a measured
    ``answered`` records a second, ``5 * answered`` handled within half the lock."""
    m = machine()
    opened(m)
    [d] = take(m, send(m, 1.0), answer((0, taken - 1, 1)), 1.0)
    assert d.deadline is not None
    m.leader(NODE).sizer.lock = 10.0
    m.handling_rate.sent(NODE, 1.0, 0, backlog=True)
    m.handling_rate.sent(NODE, 2.0, answered, backlog=True)
    for offset in range(answered):
        m.deliver(TP, offset, offset)
        m.accept(TP, offset, d.delivery)
    m.drain()
    return m


def past_the_hold() -> ShareMachine:
    """A member holding 100 records that answered 4 of them at a measured 4 records/s
    with a 10 s lock: 96 held, more than it handles within half the lock (20)."""
    return measured(100, 4)


def test_batch_acquisition_holds_no_more_than_half_a_lock_of_work() -> None:
    turn = past_the_hold().next_turn(NODE, [TP], room=True)  # answers only, no records
    assert turn.plan is None or not turn.plan.fetches


def test_batch_acquisition_fetches_while_it_holds_less_than_half_a_lock_of_work() -> None:
    """The hold has no ceiling but the rate and the lock: 110 records held at a measured
    40 records/s with a 10 s lock (200 in half of it) still fetch, however many that is
    (a ceiling of 62 survived the simulation, which judges no prefetch size)."""
    turn = measured(150, 40).next_turn(NODE, [TP], room=True, now=2.0)
    assert turn.plan is not None and turn.plan.fetches  # 110 held, under 200: it fetches
    assert turn.taken is not None and turn.taken.count == 40


def test_answers_past_the_hold_wait_their_linger_or_until_the_application_waits() -> None:
    """Past the hold no fetch is due: each answer went alone at once, a ShareAcknowledge
    per record for a handler of 10 ms (300 for 1,000 records on FakeKafka). Now they
    wait ``ack_linger`` as in a full buffer, and go at once when the application runs
    out of records."""
    m = past_the_hold()
    assert m.next_turn(NODE, [TP], room=True, now=2.0).plan is None  # they wait
    assert m.idle_timeout(NODE, 0.1, 2.05) == pytest.approx(0.05)
    m.idle_expired(NODE)
    turn = m.next_turn(NODE, [TP], room=True, now=2.1)
    assert turn.plan is not None and not turn.plan.fetches
    assert turn.taken is not None and turn.taken.count == 4
    m = past_the_hold()
    assert m.next_turn(NODE, [TP], room=True, now=2.0).plan is None
    m.records_wanted()
    assert m.drain() == [Wake(NODE)]
    turn = m.next_turn(NODE, [TP], room=True, now=2.01)
    assert turn.plan is not None and turn.taken is not None and turn.taken.count == 4


def test_a_request_carrying_answers_under_a_backlog_asks_the_driver_to_look() -> None:
    m = machine()
    opened(m)
    [d] = take(m, send(m, 1.0), answer((0, 9, 1)), 1.0)
    m.deliver(TP, 0, 0)
    m.accept(TP, 0, d.delivery)
    m.drain()
    turn = m.next_turn(NODE, [TP], room=True)
    assert turn.taken is not None and turn.taken.count == 1
    m.sent(NODE, turn, 2.0, backlog=True)
    assert Reach() in m.drain()
    # Record-limit acquisition never needs it: the budget keeps the hold.
    strict = machine(record_limit=10)
    opened(strict)
    [d2] = take(strict, send(strict, 1.0), answer((0, 9, 1)), 1.0)
    strict.deliver(TP, 0, 0)
    strict.accept(TP, 0, d2.delivery)
    strict.drain()
    turn = strict.next_turn(NODE, [TP], room=True)
    strict.sent(NODE, turn, 2.0, backlog=True)
    assert Reach() not in strict.drain()


def test_the_hold_never_drops_below_the_applications_handlers() -> None:
    """``process(concurrency=2)`` whose handlers wait for each other's records: at a rate
    that handles one record within half the lock, a member holding one record still
    fetches, up to one record per handler (else a handler waits for a record never
    fetched)."""

    def holding_one(handlers: int) -> Turn:
        m = machine()
        m.handlers = handlers
        opened(m)
        take(m, send(m, 1.0), answer((0, 0, 1)), 1.0)
        m.leader(NODE).sizer.lock = 10.0
        m.handling_rate.sent(NODE, 1.0, 0, backlog=True)
        m.handling_rate.sent(NODE, 11.0, 2, backlog=True)  # 0.2/s: 1 record in 5 s
        m.deliver(TP, 0, 0)  # handed out, unanswered: the handler waits for another
        assert m.ledger.outstanding_all() == 1
        return m.next_turn(NODE, [TP], room=True)

    assert holding_one(0).plan is None  # nothing to answer, no room to fetch: it waits
    fetch = holding_one(2)
    assert fetch.plan is not None and fetch.plan.fetches
