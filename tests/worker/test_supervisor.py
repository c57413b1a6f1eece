"""The supervisor's restarts, watchdog, drain and exit codes, with stand-in worker
processes (``fake_child.py``) instead of Kafka consumers."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from sharecon.worker import WorkerConfig
from sharecon.worker import _supervisor as supervisor_module
from sharecon.worker._supervisor import Supervisor

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = pytest.mark.anyio

FAKE = str(Path(__file__).with_name("fake_child.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, **kw: Any
) -> tuple[Supervisor, io.StringIO]:
    monkeypatch.setenv("FAKE_CHILD_MODE", mode)
    monkeypatch.setenv("FAKE_CHILD_DIR", str(tmp_path))
    # Fast restarts: the backoff's shape is Backoff's own (tested in tests/net).
    monkeypatch.setattr(supervisor_module, "RESTART_BACKOFF", supervisor_module.Backoff(0.05, 0.1))
    settings: dict[str, Any] = {"interval": None, "grace": 5.0, **kw}
    config = WorkerConfig(handler="m:f", group="g", topics=("t",), **settings)
    out = io.StringIO()
    return Supervisor(config, out, command=[sys.executable, FAKE]), out


async def _run_until(sup: Supervisor, ready: Callable[[], bool], *, stop: bool = True) -> int:
    codes: list[int] = []

    async def run() -> None:
        codes.append(await sup.run())

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await _until(ready)
            if stop:
                sup.stop()
    return codes[0]


async def _until(check: Callable[[], bool]) -> None:
    while True:
        if check():
            return
        await anyio.sleep(0.02)


def _handled(sup: Supervisor, index: int) -> int:
    return sup.slots[index].total("handled")


async def test_crashed_processes_are_restarted_then_drained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, out = _make(tmp_path, monkeypatch, "crash_first", processes=2)
    code = await _run_until(sup, lambda: _handled(sup, 0) > 2 and _handled(sup, 1) > 2)
    assert code == 0, out.getvalue()
    assert [s.restarts for s in sup.slots] == [1, 1]
    assert out.getvalue().count("exited with code 1; restarting in") == 2
    drained = sorted([p.name.split("-")[1] async for p in anyio.Path(tmp_path).glob("drained-*")])
    assert drained == ["0", "1"]
    assert "drained: handled" in out.getvalue()


async def test_a_hung_handler_gets_its_process_killed_and_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, out = _make(tmp_path, monkeypatch, "hang_first", handler_timeout=0.5)
    code = await _run_until(sup, lambda: sup.slots[0].restarts == 1 and _handled(sup, 0) > 2)
    assert code == 0, out.getvalue()
    text = out.getvalue()
    assert "a record has been in its handler for" in text
    assert "(handler timeout 0.5 s): killing it" in text
    assert "was killed by SIGKILL; restarting" in text
    assert sup.slots[0].killed_hung == 1


async def test_a_process_with_bad_settings_stops_the_worker_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, out = _make(tmp_path, monkeypatch, "usage", processes=2)
    code = await _run_until(sup, lambda: sup.slots[0].done, stop=False)
    assert code == 2, out.getvalue()
    assert "exited with code 2: stopping" in out.getvalue()
    assert all(s.restarts == 0 for s in sup.slots)


async def test_a_process_that_does_not_drain_is_killed_and_the_exit_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor_module, "CLOSE_ALLOWANCE", 0.2)
    sup, out = _make(tmp_path, monkeypatch, "stubborn", grace=0.2)
    code = await _run_until(sup, lambda: _handled(sup, 0) > 0)
    assert code == 1, out.getvalue()
    assert "did not drain within 0.4 s: killing it" in out.getvalue()


async def test_first_signal_drains_second_kills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, out = _make(tmp_path, monkeypatch, "stubborn", grace=60.0)
    codes: list[int] = []

    async def run() -> None:
        codes.append(await sup.run())

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await _until(lambda: _handled(sup, 0) > 0)
            os.kill(os.getpid(), signal.SIGTERM)
            await _until(lambda: "SIGTERM: draining" in out.getvalue())
            os.kill(os.getpid(), signal.SIGINT)
    assert codes == [130], out.getvalue()
    assert "SIGINT again: killing the worker processes" in out.getvalue()
    assert "killed: handled" in out.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_lines_are_styled_on_a_terminal_and_plain_elsewhere() -> None:
    config = WorkerConfig(handler="m:f", group="g", topics=("t",))
    tty = _Terminal()
    Supervisor(config, tty).say("2 processes started")
    assert "\x1b[" in tty.getvalue() and "2 processes started" in tty.getvalue()
    plain = io.StringIO()
    Supervisor(config, plain).say("2 processes started")
    assert plain.getvalue() == "sharecon worker: 2 processes started\n"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
async def test_worker_processes_do_not_inherit_secrets_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config (password included) reaches a worker process on stdin; its environment,
    readable in /proc/PID/environ, carries no SHARECON_* secret."""
    secrets = {
        "SHARECON_SASL_PASSWORD": "pw-env-7f3a",
        "SHARECON_OAUTH_CLIENT_SECRET": "cs-env-91bd",
        "SHARECON_TLS_KEY_PASSWORD": "kp-env-22c4",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SHARECON_SASL_USERNAME", "alice")  # not a secret: kept
    sup, out = _make(tmp_path, monkeypatch, "normal")
    environ: list[bytes] = []

    def read_environ() -> bool:
        pid = sup.slots[0].pid
        if pid is None or _handled(sup, 0) < 1:
            return False
        environ.append(Path(f"/proc/{pid}/environ").read_bytes())
        return True

    code = await _run_until(sup, read_environ)
    assert code == 0, out.getvalue()
    variables = dict(v.split(b"=", 1) for v in environ[0].split(b"\0") if b"=" in v)
    assert variables[b"SHARECON_SASL_USERNAME"] == b"alice"
    assert variables[b"FAKE_CHILD_MODE"] == b"normal"  # the rest is passed on
    for name, value in secrets.items():
        assert name.encode() not in variables
        assert value.encode() not in environ[0]


async def test_autoscale_adds_busy_processes_and_drains_idle_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on port 1: the backlog is unknown and busyness alone decides.
    sup, out = _make(
        tmp_path,
        monkeypatch,
        "normal",
        autoscale="1:3",
        bootstrap="127.0.0.1:1",
        timeout=1.0,
        scale_up_after=0.2,
        scale_down_after=0.2,
        scale_cooldown=0.3,
    )
    busy = tmp_path / "busy"
    busy.write_text("1.0")
    counts: list[int] = []

    def follow(expected: int) -> Callable[[], bool]:
        def check() -> bool:
            n = len(sup._active())
            if not counts or counts[-1] != n:
                counts.append(n)
            return n == expected and all(s.ready for s in sup._active())

        return check

    async def scenario() -> None:
        await _until(follow(3))
        busy.write_text("0.0")
        await _until(follow(1))

    done = anyio.Event()

    async def run_scenario() -> None:
        await scenario()
        done.set()

    code = -1
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_scenario)
            code = await _run_until(sup, done.is_set)
    assert code == 0, out.getvalue()
    assert counts == [1, 2, 3, 2, 1]
    assert [(d.current, d.target) for _, d in sup.scale_changes] == [(1, 2), (2, 3), (3, 2), (2, 1)]
    lines = [line for line in out.getvalue().splitlines() if "autoscale:" in line]
    assert len(lines) == 4 and "autoscale: 1 -> 2 processes (handlers 100% busy" in lines[0]
    # The two processes scaled down drained (the newest first) and were not restarted.
    drained = sorted([p.name.split("-")[1] async for p in anyio.Path(tmp_path).glob("drained-*")])
    assert drained == ["0", "1", "2"]  # 2 and 1 scaled down, 0 at the stop
    assert all(s.restarts == 0 for s in sup.slots)


async def _get(port: int, path: str) -> tuple[int, str]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(f"GET {path} HTTP/1.1\r\n\r\n".encode())
        data = b""
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


async def _health_until(sup: Supervisor, path: str, want: int) -> str:
    """Ask ``path`` until it answers ``want``; its body."""
    while True:
        if sup.health_address is not None:
            status, body = await _get(sup.health_address[1], path)
            if status == want:
                return body
        await anyio.sleep(0.05)


async def test_health_endpoints_follow_reports_and_the_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, out = _make(tmp_path, monkeypatch, "normal", processes=2, health_port=0)
    answers: dict[str, str] = {}

    async def run() -> None:
        answers["code"] = str(await sup.run())

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await _until(lambda: all(s.reported for s in sup.slots))
            answers["ready"] = await _health_until(sup, "/readyz", 200)
            answers["live"] = await _health_until(sup, "/healthz", 200)
            assert sup.health_address is not None
            assert (await _get(sup.health_address[1], "/other"))[0] == 404
            sup.stop()
            answers["draining"] = await _health_until(sup, "/readyz", 503)
    assert answers["ready"] == "ready: 2 of 2 consumers healthy\n"
    assert answers["live"] == "live: 2 of 2 processes running\n"
    assert answers["draining"] == "draining\n"
    assert answers["code"] == "0"
    assert "health on http://127.0.0.1:" in out.getvalue()


async def test_readyz_says_why_no_consumer_is_healthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, _ = _make(tmp_path, monkeypatch, "unhealthy", health_port=0)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run)
            await _until(lambda: sup.slots[0].reported)
            body = await _health_until(sup, "/readyz", 503)
            assert body == "no healthy consumer (process 0: group membership joining)\n"
            assert (await _health_until(sup, "/healthz", 200)).startswith("live")
            sup.stop()


async def test_healthz_fails_when_a_process_goes_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor_module, "LIVE_SILENCE", 1.0)
    monkeypatch.setattr(supervisor_module, "READY_FRESH", 1.0)
    sup, _ = _make(tmp_path, monkeypatch, "silent", health_port=0)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run)
            await _until(lambda: sup.slots[0].reported)
            body = await _health_until(sup, "/healthz", 503)
            assert body.startswith("process 0 has not reported for ")
            # Its one report went stale too: not ready either.
            assert (await _health_until(sup, "/readyz", 503)).startswith("no healthy consumer")
            sup.stop()


async def test_a_health_port_in_use_stops_the_worker_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as taken:
        port = taken.extra(anyio.abc.SocketAttribute.local_port)
        sup, out = _make(tmp_path, monkeypatch, "normal", health_port=port)
        with anyio.fail_after(30):
            code = await sup.run()
    assert code == 1
    assert f"cannot serve health on 127.0.0.1:{port}" in out.getvalue()


def test_health_counts_leave_out_slots_autoscaling_retired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, _ = _make(tmp_path, monkeypatch, "normal", processes=2)
    for slot in sup.slots:  # two processes running and reporting healthy at t=100
        slot.proc = SimpleNamespace(returncode=None)  # type: ignore[assignment]
        slot.reported, slot.health_ok, slot.last_report = True, True, 100.0
    sup._last_tick = 100.0
    assert sup.readiness(100.0).reason == "ready: 2 of 2 consumers healthy"
    gone = sup.slots[1]  # scaled down: drained, exited, retired
    gone.proc, gone.done, gone.retired = None, True, True
    assert sup.readiness(100.0).reason == "ready: 1 of 1 consumers healthy"
    assert sup.liveness(100.0).reason == "live: 1 of 1 processes running"
    gone.retired = False  # a process that died and waits for its restart still counts
    assert sup.readiness(100.0).reason == "ready: 1 of 2 consumers healthy"
