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
