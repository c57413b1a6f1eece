"""event_loop_clock(): the clock anyio.current_time reads, looked up once, on both backends."""

from __future__ import annotations

import asyncio

import anyio
import pytest
import trio.testing

from sharecon._net.clock import event_loop_clock


def _agrees(clock: object) -> None:
    assert callable(clock)
    for _ in range(100):
        before = anyio.current_time()
        now = clock()
        after = anyio.current_time()
        assert before <= now <= after


@pytest.mark.anyio
async def test_the_clock_reads_what_anyio_current_time_reads() -> None:
    _agrees(event_loop_clock())
    await anyio.sleep(0.01)
    _agrees(event_loop_clock())


class _SkewedLoop(asyncio.SelectorEventLoop):
    """A loop whose clock is far from time.monotonic: the clock must be the loop's."""

    def time(self) -> float:
        return super().time() + 1e6


@pytest.mark.parametrize(
    "anyio_backend", [pytest.param(("asyncio", {"loop_factory": _SkewedLoop}), id="skewed")]
)
@pytest.mark.anyio
async def test_asyncio_the_running_loops_own_clock() -> None:
    clock = event_loop_clock()
    _agrees(clock)
    assert clock() > 1e6


@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}), id="mock")],
)
@pytest.mark.anyio
async def test_trio_a_mock_clock_still_rules() -> None:
    clock = event_loop_clock()
    start = clock()
    assert start == anyio.current_time()
    await anyio.sleep(3600)  # the mock clock jumps an hour at once
    assert clock() == anyio.current_time() >= start + 3600


def test_outside_an_event_loop_it_says_so() -> None:
    with pytest.raises(RuntimeError):
        event_loop_clock()
