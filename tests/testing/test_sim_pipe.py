"""The whole-client simulation's in-memory connections (sharecon.testing.sim.pipe): a byte
stream with a socket's semantics, one schedule point per call."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing

from sharecon.testing.sim.pipe import memory_pipe


def _run(fn: object) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))  # type: ignore[arg-type]


def test_bytes_arrive_in_order_up_to_max_bytes() -> None:
    async def main() -> None:
        a, b = memory_pipe()
        await a.send(b"abc")
        await a.send(b"def")
        await b.send(b"back")
        assert await b.receive(4) == b"abcd"  # what arrived, up to max_bytes
        assert await b.receive() == b"ef"
        assert await a.receive() == b"back"

    _run(main)


def test_a_waiting_receive_gets_the_next_send() -> None:
    async def main() -> None:
        a, b = memory_pipe()
        got: list[bytes] = []

        async def reader() -> None:
            got.append(await b.receive())

        async with trio.open_nursery() as n:
            n.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            await a.send(b"x")
        assert got == [b"x"]

    _run(main)


def test_close_ends_the_peers_receive_and_breaks_its_send() -> None:
    async def main() -> None:
        a, b = memory_pipe()
        await a.send(b"last")
        await a.aclose()
        assert await b.receive() == b"last"  # what was sent before the close arrives
        with pytest.raises(anyio.EndOfStream):
            await b.receive()
        with pytest.raises(anyio.BrokenResourceError):
            await b.send(b"late")
        with pytest.raises(anyio.BrokenResourceError):
            await a.send(b"after close")

    _run(main)


def test_closing_an_end_wakes_its_own_waiting_receive() -> None:
    async def main() -> None:
        a, _b = memory_pipe()
        ended: list[str] = []

        async def reader() -> None:
            try:
                await a.receive()
            except anyio.EndOfStream:
                ended.append("eof")

        async with trio.open_nursery() as n:
            n.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await a.aclose()
        assert ended == ["eof"]

    _run(main)


def test_a_waiting_receive_can_be_cancelled_and_the_bytes_stay() -> None:
    async def main() -> None:
        a, b = memory_pipe()
        with trio.move_on_after(1.0) as scope:
            await b.receive()
        assert scope.cancelled_caught
        await a.send(b"kept")
        assert await b.receive() == b"kept"

    _run(main)


def test_each_call_is_one_schedule_point() -> None:
    # As on trio's sockets: a send, and a receive that need not wait, yield once each.
    async def main() -> None:
        a, b = memory_pipe()
        steps = 0

        async def counter() -> None:
            nonlocal steps
            while True:
                steps += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as n:
            n.start_soon(counter)
            await trio.lowlevel.checkpoint()
            before = steps
            for _ in range(100):
                await a.send(b"x")
                await b.receive()
            # The other task runs once per batch; where the count starts and ends within
            # a batch (trio's run-queue order) moves it by one.
            assert abs(steps - before - 200) <= 1
            n.cancel_scope.cancel()

    _run(main)
