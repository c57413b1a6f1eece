"""The worker's health decision (sans-I/O) and the HTTP responder that serves it."""

from __future__ import annotations

import anyio
import pytest

from sharecon._net.http_serve import Response, serve_http
from sharecon.worker._health import STALL_AFTER, ChildView, liveness, readiness


def _child(
    index: int = 0,
    *,
    running: bool = True,
    started: float = 0.0,
    last_report: float = 99.0,
    reported: bool = True,
    ok: bool = True,
    reason: str = "ok",
) -> ChildView:
    return ChildView(index, running, started, last_report, reported, ok, reason)


def _live(
    children: list[ChildView], now: float = 100.0, *, tick: float = 100.0
) -> tuple[bool, str]:
    verdict = liveness(children, now, last_tick=tick, silent_after=30.0, startup_after=20.0)
    return verdict.ok, verdict.reason


def _ready(
    children: list[ChildView], now: float = 100.0, *, draining: bool = False
) -> tuple[bool, str]:
    verdict = readiness(children, now, draining=draining, silent_after=5.0)
    return verdict.ok, verdict.reason


def test_live_while_the_loop_ticks_and_every_process_reports() -> None:
    ok, reason = _live([_child(0), _child(1, ok=False, reason="group membership joining")])
    assert ok, reason
    assert "2 of 2" in reason


def test_a_stalled_supervisor_loop_is_not_live() -> None:
    ok, reason = _live([_child()], tick=100.0 - STALL_AFTER - 1)
    assert not ok
    assert "supervisor" in reason


def test_a_silent_process_is_not_live_only_past_the_limit() -> None:
    assert _live([_child(last_report=70.5)])[0]
    ok, reason = _live([_child(3, last_report=69.0)])
    assert not ok
    assert "process 3 has not reported for 31.0 s" in reason


def test_a_process_that_never_reported_gets_the_startup_allowance() -> None:
    assert _live([_child(reported=False, started=85.0, last_report=85.0)])[0]
    ok, reason = _live([_child(reported=False, started=75.0, last_report=75.0)])
    assert not ok
    assert "since it started" in reason


def test_a_process_being_restarted_is_not_stuck() -> None:
    # Dead and waiting for its restart: the supervisor handles it, no reason to kill the pod.
    assert _live([_child(running=False, last_report=0.0)])[0]


def test_ready_with_one_healthy_consumer_among_unhealthy_ones() -> None:
    ok, reason = _ready([_child(0, ok=False, reason="group membership joining"), _child(1)])
    assert ok
    assert "1 of 2" in reason


def test_not_ready_while_draining_even_when_healthy() -> None:
    assert _ready([_child()], draining=True) == (False, "draining")


def test_not_ready_without_a_healthy_consumer_says_why() -> None:
    ok, reason = _ready(
        [
            _child(0, ok=False, reason="brokers unreachable: refused"),
            _child(1, running=False),
            _child(2, reported=False, ok=False, reason="not reported yet"),
        ]
    )
    assert not ok
    assert "process 0: brokers unreachable: refused" in reason
    assert "process 1: not running" in reason
    assert "process 2: not reported yet" in reason


def test_a_stale_healthy_report_does_not_make_ready() -> None:
    ok, reason = _ready([_child(last_report=94.0)])
    assert not ok
    assert "last report 6.0 s old" in reason
    assert _ready([_child(last_report=95.5)])[0]


def test_no_processes_is_not_ready() -> None:
    assert _ready([]) == (False, "no healthy consumer")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_http_responder_answers_routes_404_405_and_head(anyio_backend: str) -> None:
    del anyio_backend

    async def route(path: str) -> Response | None:
        if path == "/readyz":
            return Response(503, "draining\n")
        return None

    async def ask(port: int, request: bytes) -> bytes:
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request)
            data = b""
            try:
                while True:
                    data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return data

    bound: list[int] = []
    listening = anyio.Event()

    def on_listening(_host: str, port: int) -> None:
        bound.append(port)
        listening.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve_http("127.0.0.1", 0, route, on_listening=on_listening))
            await listening.wait()
            port = bound[0]
            got = await ask(port, b"GET /readyz?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
            assert got.endswith(b"\r\n\r\ndraining\n")
            assert b"Content-Length: 9\r\n" in got
            head = await ask(port, b"HEAD /readyz HTTP/1.1\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and head.endswith(b"\r\n\r\n")
            assert (await ask(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
            assert (await ask(port, b"POST /readyz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
            tg.cancel_scope.cancel()
