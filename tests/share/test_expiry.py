"""When a member says that records' locks ended in its buffer (issue 32): counted always,
said at once the first time, then at most once a minute with the count since."""

from __future__ import annotations

from sharecon._share.expiry import EVERY, ExpiryNotice, ExpiryWarning


def test_the_first_expiry_is_said_then_at_most_once_a_minute_with_the_count_since() -> None:
    assert EVERY == 60.0
    notice = ExpiryNotice()
    assert notice.expired(10.0, 0) is None and notice.total == 0
    assert notice.expired(10.0, 330) == ExpiryWarning(count=330, total=330)
    assert notice.expired(30.0, 5) is None
    assert notice.expired(69.9, 6) is None
    assert notice.total == 341  # counted even when not said
    assert notice.expired(70.0, 1) == ExpiryWarning(count=12, total=342)
    assert notice.expired(200.0, 2) == ExpiryWarning(count=2, total=344)


def test_a_held_back_count_with_none_following_is_said_at_the_next_tick_past_the_minute() -> None:
    """Before, expiries within a minute of a warning were only counted: if none followed,
    that tail was never said."""
    notice = ExpiryNotice()
    assert notice.tick(0.0) is None  # nothing counted: nothing to say
    assert notice.expired(10.0, 3) == ExpiryWarning(count=3, total=3)
    assert notice.tick(11.0) is None  # nothing held back yet
    assert notice.expired(20.0, 4) is None  # held back (rule 2)
    assert notice.tick(69.9) is None  # the minute has not passed
    assert notice.tick(70.0) == ExpiryWarning(count=4, total=7)
    assert notice.tick(500.0) is None  # said once
    # The tick's warning counts as the last one: a minute from it again.
    assert notice.expired(100.0, 1) is None
    assert notice.expired(130.0, 1) == ExpiryWarning(count=2, total=9)


def test_what_is_unsaid_at_close_is_said_then() -> None:
    notice = ExpiryNotice()
    assert notice.flush() is None
    notice.expired(0.0, 5)
    assert notice.flush() is None  # said already
    assert notice.expired(1.0, 2) is None
    assert notice.flush() == ExpiryWarning(count=2, total=7)
    assert notice.flush() is None and notice.total == 7
    # A flush has no time of its own: the minute still runs from the warning at 0.
    assert notice.expired(30.0, 1) is None
    assert notice.expired(60.0, 1) == ExpiryWarning(count=2, total=9)
