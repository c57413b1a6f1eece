"""Signal: every waiter woken by one set() learns it was set; lone set()s are remembered once."""

from __future__ import annotations

import anyio
import pytest

from sharecon._consumer.signal import Signal

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])]


async def test_every_concurrent_waiter_gets_true() -> None:
    signal = Signal()
    results: list[bool] = []

    async def waiter() -> None:
        results.append(await signal.wait(5))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            signal.set()
    assert results == [True] * 5


async def test_set_while_nobody_waits_is_remembered_once() -> None:
    signal = Signal()
    signal.set()
    signal.set()
    assert await signal.wait(0.01) is True
    assert await signal.wait(0.01) is False


async def test_waiters_after_a_set_wait_for_the_next_one() -> None:
    signal = Signal()
    first: list[bool] = []

    async def waiter() -> None:
        first.append(await signal.wait(5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        signal.set()
        # The woken waiter has not run yet; a new wait must not see that set().
        assert await signal.wait(0.01) is False
    assert first == [True]


async def test_sets_before_a_woken_waiter_runs_are_folded_into_its_wake_up() -> None:
    signal = Signal()
    woke = anyio.Event()

    async def waiter() -> None:
        assert await signal.wait(5)
        woke.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        signal.set()
        signal.set()  # before the waiter resumed: it will see this change anyway
        await woke.wait()
    assert await signal.wait(0.01) is False


async def test_single_waiter_loop_loses_no_wake_up_while_busy() -> None:
    signal = Signal()
    busy = anyio.Event()
    turns = 0

    async def loop() -> None:
        nonlocal turns
        while await signal.wait(5):
            turns += 1
            if turns == 2:
                return
            await busy.wait()  # the loop is working, not waiting, when set() comes

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop)
            await anyio.wait_all_tasks_blocked()
            signal.set()
            await anyio.wait_all_tasks_blocked()
            signal.set()  # nobody waits: remembered for the loop's next wait
            busy.set()
    assert turns == 2


async def test_timeout_and_cancel_leave_the_signal_usable() -> None:
    signal = Signal()
    assert await signal.wait(0.01) is False
    with anyio.move_on_after(0.01):
        await signal.wait()
    # Neither the timed-out nor the cancelled wait is still counted as a waiter,
    # so a set() now is remembered for the next wait.
    signal.set()
    assert await signal.wait(0.01) is True
