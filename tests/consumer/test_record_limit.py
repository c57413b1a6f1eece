"""Strict record limits (KIP-1206): a member holds at most ``max_records`` records."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon import errors
from sharecon._share.record_limit import (
    HOLD_SHARE,
    INITIAL_HOLD,
    WINDOW,
    HandlingRate,
    RecordBudget,
    hold_limit,
)
from sharecon.consumer import ShareConsumer
from tests.consumer.conftest import produce

if TYPE_CHECKING:
    from sharecon.testing.pytest_plugin import BrokerFactory, TopicFactory

pytestmark = pytest.mark.anyio


def test_the_budget_counts_held_records_and_fetches_in_flight() -> None:
    budget = RecordBudget(10)
    assert budget.grant(held=4) == 6  # one fetch may bring the rest
    assert budget.grant(held=4) == 0  # a second leader's fetch must not ask meanwhile
    budget.settle(6)
    assert budget.grant(held=7) == 3  # the first brought 3; they are held now
    budget.settle(3)
    budget.settle(3)  # settling twice never goes below zero
    assert budget.reserved == 0
    assert budget.grant(held=10) == 0
    with pytest.raises(ValueError, match="at least 1"):
        RecordBudget(0)


def test_the_hold_is_what_the_measured_rate_handles_within_half_the_lock() -> None:
    assert HOLD_SHARE == 0.5
    assert hold_limit(500, None, 15.0) == INITIAL_HOLD == 16  # not measured yet
    assert hold_limit(3, None, 15.0) == 3  # never past max_records
    assert hold_limit(500, 40.0, 15.0) == 300  # 25 ms a record, 15 s lock
    assert hold_limit(200, 40.0, 15.0) == 200
    assert hold_limit(500, 0.01, 15.0) == 1  # never below one record
    budget = RecordBudget(500)
    assert budget.fit(40.0, 15.0) == 300 and budget.grant(held=290) == 10
    assert budget.ceiling == 500


def test_the_handling_rate_is_answers_over_the_time_between_requests() -> None:
    rate = HandlingRate()
    assert rate.rate() is None
    rate.sent(1, 10.0, 0, backlog=False)
    rate.sent(1, 11.0, 0, backlog=False)  # idle: nothing learnt
    assert rate.rate() is None
    rate.sent(1, 12.0, 40, backlog=True)  # 40 answers in 1 s
    assert rate.rate() == 40.0
    rate.sent(1, 13.0, 20, backlog=True)  # busy the whole second: smoothed down
    assert rate.rate() == 30.0
    rate.sent(1, 14.0, 10, backlog=False)  # no backlog: 10/s only bounds it below
    assert rate.rate() == 30.0
    rate.sent(1, 14.5, 45, backlog=False)  # 90/s was possible: raised
    assert rate.rate() == 60.0
    rate.sent(2, 0.0, 0, backlog=True)
    rate.sent(2, 1.0, 5, backlog=True)  # another leader: added
    assert rate.rate() == 65.0
    # Answers held back behind a long poll come with the request after it: spread over
    # the whole interval, never over the moment the answer arrived.
    rate.sent(3, 0.0, 0, backlog=False)
    rate.sent(3, 0.5, 50, backlog=False)
    assert rate.rate() == 165.0
    # A burst of answers made earlier (delayed releases) within less than WINDOW is
    # gathered with what follows, not taken for a rate of thousands per second.
    assert WINDOW == 0.5
    rate.sent(4, 0.0, 0, backlog=False)
    rate.sent(4, 0.001, 15, backlog=False)
    assert rate.rate() == 165.0
    rate.sent(4, 1.0, 5, backlog=False)  # 20 answers in 1 s
    assert rate.rate() == 185.0


def test_a_forgotten_leader_no_longer_counts_and_is_measured_afresh() -> None:
    rate = HandlingRate()
    rate.sent(1, 0.0, 0, backlog=True)
    rate.sent(1, 1.0, 30, backlog=True)
    rate.sent(2, 0.0, 0, backlog=True)
    rate.sent(2, 1.0, 10, backlog=True)
    assert rate.rate() == 40.0
    rate.forget(1)
    assert rate.rate() == 10.0
    rate.forget(2)
    rate.forget(2)  # twice, or a leader never measured: nothing
    assert rate.rate() is None
    rate.sent(1, 5.0, 7, backlog=True)  # a new window starts: its answers are not a rate
    assert rate.rate() is None
    rate.sent(1, 6.0, 5, backlog=True)
    assert rate.rate() == 5.0


@pytest.mark.broker
async def test_a_member_never_holds_more_than_max_records(
    kafka_bootstrap: str, topic_factory: TopicFactory, share_group: str
) -> None:
    topic = topic_factory(1)
    # One producer call: the records share a few large batches, which batch mode would
    # acquire whole.
    await produce(kafka_bootstrap, topic, [b"r%d" % i for i in range(40)])
    async with (
        ShareConsumer(
            kafka_bootstrap,
            group_id=share_group,
            topics=[topic],
            ack_mode="explicit",
            acquire_mode="record_limit",
            max_records=3,
        ) as holder,
        ShareConsumer(
            kafka_bootstrap, group_id=share_group, topics=[topic], ack_mode="explicit"
        ) as other,
    ):
        with anyio.fail_after(60):
            held = await holder.poll(30, max_records=100)
            assert 1 <= len(held) <= 3
            await anyio.sleep(1.5)  # the holder's fetch loop keeps running meanwhile
            core = holder._core
            assert core is not None
            assert core.ledger.outstanding_all() == 3  # held, plus what it buffered since
            # Everything the holder did not acquire is free for the other member.
            got: list[int] = []
            while len(got) < 40 - 3:
                for r in await other.poll(10, max_records=100):
                    got.append(r.offset)
                    r.accept()
            await other.commit()
        assert len(got) == 37 and not {r.offset for r in held} & set(got)
        for r in held:
            r.accept()
        await holder.commit()


@pytest.mark.broker
async def test_record_limit_on_kafka_41_is_refused_at_start(
    kafka_broker_factory: BrokerFactory,
) -> None:
    broker = kafka_broker_factory("4.1")
    topic = f"rl-{uuid.uuid4().hex[:8]}"
    broker.tools.create_topic(topic, 1)
    consumer = ShareConsumer(
        broker.bootstrap, group_id="g-rl", topics=[topic], acquire_mode="record_limit"
    )
    with pytest.raises(errors.UnsupportedVersionError, match="Kafka 4.2"):
        await consumer.start()


def test_an_unknown_acquire_mode_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="acquire_mode"):
        ShareConsumer("localhost:9092", group_id="g", topics=["t"], acquire_mode="strict")  # type: ignore[arg-type]


@pytest.mark.broker
async def test_auto_acquires_by_record_limit_on_42_and_by_batch_on_41(
    kafka_broker_factory: BrokerFactory,
) -> None:
    for version, mode in (("4.1", "batch"), ("4.2", "record_limit")):
        broker = kafka_broker_factory(version)
        topic = f"rl-{uuid.uuid4().hex[:8]}"
        broker.tools.create_topic(topic, 1)
        async with ShareConsumer(
            broker.bootstrap, group_id="g-auto", topics=[topic], acquire_mode="auto"
        ) as consumer:
            core = consumer._core
            assert core is not None
            assert (core.machine.budget is not None) == (mode == "record_limit"), version


def test_the_hold_is_never_below_the_applications_handlers_within_the_ceiling() -> None:
    """``process(concurrency=N)``: one record per handler whatever the rate (handlers may
    wait for each other's records), but never past ``max_records``."""
    assert RecordBudget(500).fit(0.01, 15.0) == 1
    assert RecordBudget(500).fit(0.01, 15.0, floor=4) == 4
    assert RecordBudget(500).fit(40.0, 15.0, floor=4) == 300
    assert RecordBudget(2).fit(0.01, 15.0, floor=4) == 2
