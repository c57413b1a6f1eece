"""The whole-client simulation's in-memory connections (sharecon.testing.sim.pipe): a byte
stream with a socket's semantics, one schedule point per call."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing

from sharecon.testing.sim.client_net import NetFaults, NetPlan, SlowLink, Stall
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


def _net(plan: NetPlan) -> NetFaults:
    return NetFaults(plan, lambda tid, p: p, 15.0)


def test_a_slow_link_carries_the_brokers_bytes_at_its_rate() -> None:
    """Transport faults (sim.client_net): 8 KiB over a 4 KiB/s link arrive in 2 s, in
    segments, while the client's bytes to the broker are not slowed."""

    async def main() -> None:
        net = _net(NetPlan(slow=SlowLink(0.0, 60.0, 4096, 1, 1.0)))
        down, up = net.pipe_shapers()
        client, server = memory_pipe(down=down, up=up)
        await server.send(b"x" * 8192)
        got = b""
        while len(got) < 8192:
            got += await client.receive()
        assert trio.current_time() == pytest.approx(2.0)
        await client.send(b"request")
        assert await server.receive() == b"request"
        assert trio.current_time() == pytest.approx(2.0)

    _run(main)


def test_a_stall_holds_the_bytes_then_delivers_them_all() -> None:
    async def main() -> None:
        net = _net(NetPlan(stalls=(Stall(1.0, 5.0, True, False),)))
        down, up = net.pipe_shapers()
        client, server = memory_pipe(down=down, up=up)
        await trio.sleep(2.0)
        await server.send(b"answer")
        await client.send(b"request")  # not both ways: the client's bytes go through
        assert await server.receive() == b"request"
        assert await client.receive() == b"answer"
        assert trio.current_time() == pytest.approx(6.0)  # the stall's end
        assert net.stalled == 1

    _run(main)


def test_an_answer_the_client_gave_up_on_counts_as_spent_a_cut_does_not() -> None:
    async def main() -> None:
        net = _net(NetPlan())
        for client_first in (True, False):
            down, up = net.pipe_shapers()
            client, server = memory_pipe(down=down, up=up)
            down.mark(6, 99.0, [(0, 7)], "m")
            await server.send(b"answer")
            if client_first:
                await client.aclose()
            else:
                await server.aclose()
                await client.aclose()
        assert dict(net.spent) == {("m", (0, 7)): 1}

    _run(main)
