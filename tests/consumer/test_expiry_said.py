"""Records whose locks ended in the buffer are never left unsaid (rule 3 of
sharecon._share.expiry), at the consumer's level against FakeKafka: a count held back by
the once-a-minute rule is said by the running consumer once the minute passed, with no
expiry following, and what is still held back at close() is said then."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.consumer import ShareConsumer

if TYPE_CHECKING:
    from sharecon.testing.fake import FakeKafka

pytestmark = pytest.mark.anyio

SAID = re.compile(r"locks of (\d+) records \((\d+) in all\)")


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int]]:
    found = (SAID.search(r.getMessage()) for r in caplog.records)
    return [(int(m[1]), int(m[2])) for m in found if m]


async def test_a_held_back_count_is_said_after_the_minute_and_at_close(
    fake_kafka: FakeKafka, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kafka.create_topic("t")
    with caplog.at_level(logging.WARNING, logger="sharecon.consumer"):
        async with ShareConsumer(fake_kafka.bootstrap, group_id="g", topics=["t"]) as consumer:
            core = consumer._core
            assert core is not None
            # The consumer's clock, moved on at will (nothing is fetched: no lock to keep).
            real, skew = core.clock, [0.0]
            core.clock = lambda: real() + skew[0]
            core._expired_in_buffer(3)  # the first: said at once
            core._expired_in_buffer(4)  # within the minute: held back
            assert _said(caplog) == [(3, 3)]
            skew[0] = 61.0  # the minute passes, no expiry follows
            with anyio.fail_after(30):  # before the fix: never said
                while len(_said(caplog)) < 2:  # noqa: ASYNC110 - polled log
                    await anyio.sleep(0.05)
            assert _said(caplog) == [(3, 3), (4, 7)]
            core._expired_in_buffer(2)  # held back again, and the consumer closes
            assert consumer.health().expired_in_buffer == 9
    assert _said(caplog) == [(3, 3), (4, 7), (2, 9)]
