"""The one client runtime (sharecon._lifecycle): the task group, the cluster, a start that
fails or is cancelled, the bounded and shielded shutdown, and hosted clients. Under asyncio
and trio; the broker-free tests talk to real loopback sockets, the rest to the session broker.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from sharecon import errors
from sharecon._lifecycle import ClientRuntime, Hosting
from sharecon._net.cluster import Cluster
from sharecon._net.connect import ConnectionConfig

if TYPE_CHECKING:
    from anyio.abc import SocketStream, TaskGroup

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])]


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _maker(bootstrap: str, connect_timeout: float = 2.0) -> Any:
    config = ConnectionConfig(client_id="runtime-test", connect_timeout=connect_timeout)
    return lambda tg: Cluster(bootstrap, config, tg, bootstrap_timeout=connect_timeout)


async def test_a_failed_start_is_undone_and_raises_unwrapped(anyio_backend: str) -> None:
    closes: list[str] = []
    runtime = ClientRuntime("Thing", on_close=lambda: closes.append("closed"))
    with pytest.raises(errors.ClientNotStartedError, match="Thing is not started"):
        _ = runtime.cluster
    entered = False
    with pytest.raises(errors.BrokerConnectError):  # the error itself, no ExceptionGroup
        async with runtime.starting(_maker(_closed_port(), 0.5)):
            entered = True  # pragma: no cover - never reached
    assert not entered
    assert runtime.state == "closed" and not runtime.held
    assert closes == ["closed"]
    for view in ("cluster", "task_group"):
        with pytest.raises(errors.ClientClosedError, match="Thing is closed"):
            getattr(runtime, view)
    with pytest.raises(errors.ClientClosedError):
        await runtime.start(_maker(_closed_port()))
    assert not runtime.begin_close()  # closed already
    assert await runtime.shutdown() is False  # nothing held: nothing to do
    assert closes == ["closed"]


async def test_a_start_cancelled_from_outside_lets_go_of_everything(anyio_backend: str) -> None:
    """A broker that accepts and never answers: the caller's deadline cancels the start,
    and the runtime closes the connection it opened before the cancellation propagates."""
    accepted: list[SocketStream] = []
    peer_closed = anyio.Event()

    async def serve(stream: SocketStream) -> None:
        accepted.append(stream)
        async with stream:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while True:
                    await stream.receive()
        peer_closed.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    runtime = ClientRuntime("Thing")
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        with anyio.move_on_after(0.5) as scope:
            await runtime.start(_maker(f"127.0.0.1:{port}", connect_timeout=30.0))
        assert scope.cancelled_caught
        assert runtime.state == "closed" and not runtime.held
        assert accepted, "the runtime never reached the silent broker"
        with anyio.fail_after(5):
            await peer_closed.wait()
        tg.cancel_scope.cancel()
    await listener.aclose()


@pytest.mark.broker
async def test_the_body_error_propagates_and_the_group_is_cancelled(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    runtime = ClientRuntime("Thing")
    background_ended = anyio.Event()

    async def background() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            background_ended.set()

    with pytest.raises(ValueError, match="setup failed"):
        async with runtime.starting(_maker(kafka_bootstrap)) as (cluster, tg):
            assert runtime.cluster is cluster and runtime.task_group is tg
            assert cluster.versions is not None
            tg.start_soon(background)
            raise ValueError("setup failed")
    assert background_ended.is_set()
    assert runtime.state == "closed" and not runtime.held


@pytest.mark.broker
async def test_shutdown_is_bounded_and_shielded(anyio_backend: str, kafka_bootstrap: str) -> None:
    """A farewell that hangs is cut at the timeout; one started from a cancelled scope,
    after the client's own group was cancelled, still reaches the broker."""
    runtime = ClientRuntime("Thing")

    async def setup(cluster: Cluster, tg: TaskGroup) -> None:
        tg.start_soon(anyio.sleep_forever)

    await runtime.start(_maker(kafka_bootstrap), setup)
    assert runtime.state == "running"
    assert runtime.begin_close() and not runtime.begin_close()
    start = anyio.current_time()
    assert await runtime.shutdown(lambda c: anyio.sleep_forever(), timeout=0.3) is True
    assert anyio.current_time() - start < 3.0
    assert not runtime.held
    with pytest.raises(errors.ClientClosedError):
        _ = runtime.cluster

    said: list[int] = []

    async def farewell(cluster: Cluster) -> None:
        meta = await cluster.refresh_metadata([])
        said.append(len(meta.brokers))

    second = ClientRuntime("Other")
    with anyio.CancelScope() as outer:
        await second.start(_maker(kafka_bootstrap))
        try:
            outer.cancel()  # the enclosing scope ends the client's readers too
            await anyio.sleep_forever()
        finally:
            assert await second.shutdown(farewell, timeout=10.0) is False
    assert said and said[0] >= 1
    assert not second.held


class _Recorder:
    """An async context manager that logs its enter and exit (and can refuse to enter)."""

    def __init__(self, name: str, log: list[str], *, fail: bool = False) -> None:
        self.name, self.log, self.fail = name, log, fail

    async def __aenter__(self) -> str:
        if self.fail:
            raise errors.BrokerConnectError(f"{self.name} cannot connect")
        self.log.append(f"enter {self.name}")
        return self.name

    async def __aexit__(self, *exc: object) -> None:
        self.log.append(f"exit {self.name}")


async def test_hosting_enters_in_order_and_exits_in_reverse(anyio_backend: str) -> None:
    log: list[str] = []
    ready: list[Any] = []
    hosting = Hosting()
    async with anyio.create_task_group() as tg:
        await tg.start(hosting.run, [_Recorder("a", log), _Recorder("b", log)], ready.extend)
        assert hosting.started and ready == ["a", "b"]
        assert log == ["enter a", "enter b"]
        with anyio.fail_after(5):
            await hosting.stop()
        assert log == ["enter a", "enter b", "exit b", "exit a"]


async def test_hosting_that_fails_to_enter_exits_what_it_entered(anyio_backend: str) -> None:
    log: list[str] = []
    hosting = Hosting()
    with pytest.raises(errors.BrokerConnectError, match="b cannot connect"):
        await hosting.run([_Recorder("a", log), _Recorder("b", log, fail=True)], log.extend)
    assert log == ["enter a", "exit a"]
    assert not hosting.started
    with anyio.fail_after(1):
        await hosting.stop()  # never started: returns at once


@pytest.mark.broker
async def test_the_producers_close_timeout_bounds_its_closing(
    anyio_backend: str, kafka_bootstrap: str
) -> None:
    """``Producer(close_timeout=...)`` reaches the cluster's closing (it once was ignored)."""
    from sharecon import Producer

    async with Producer(kafka_bootstrap, close_timeout=0.7) as producer:
        cluster = producer._runtime.cluster
        assert cluster._close_timeout == 0.7
    with pytest.raises(errors.ClientClosedError):
        _ = producer._runtime.cluster
