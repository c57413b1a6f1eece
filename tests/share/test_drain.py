"""The rule of when a member that stopped fetching has no fetch left (``_share.drain``)."""

from __future__ import annotations

from sharecon._share.drain import FetchDrain


def test_not_drained_before_stop_even_with_nothing_outstanding() -> None:
    d = FetchDrain()
    assert not d.drained
    d.planned(1)
    assert not d.ended(1)  # nothing out, but fetching did not stop


def test_stop_with_nothing_outstanding_is_drained_at_once() -> None:
    assert FetchDrain().stop()


def test_drained_only_when_every_leaders_fetches_are_over() -> None:
    d = FetchDrain()
    d.planned(1)
    d.planned(1)  # pipelined: the next one planned before the first's records are in
    d.planned(2)
    assert not d.stop()
    assert not d.ended(1)
    assert not d.ended(2)  # node 1 still has one out
    assert d.ended(1)
    assert d.out == {}


def test_a_loop_that_ends_forgets_its_fetches() -> None:
    d = FetchDrain()
    d.planned(1)
    d.planned(1)
    d.planned(3)
    d.stop()
    assert not d.loop_ended(1)
    assert d.loop_ended(3)


def test_a_fetch_planned_after_stop_counts_again() -> None:
    d = FetchDrain()
    assert d.stop()
    d.planned(1)  # never planned by the loop once stopped; if it were, it counts
    assert not d.drained
    assert d.ended(1)


def test_an_extra_end_never_goes_negative() -> None:
    d = FetchDrain()
    d.stop()
    assert d.ended(5)
    d.planned(5)
    assert not d.drained
    assert d.ended(5)
