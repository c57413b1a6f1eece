"""FaultProxy on a real Toxiproxy, in front of a small threaded TCP echo server (no Kafka).

Toxiproxy is provisioned like in real use (cache, else ``go install``): if that fails, every
test here fails with the reason. Nothing is skipped.

Timing: only lower bounds, and only where the injected fault guarantees them (latency,
bandwidth, a timed stall). "Nothing arrives" is checked over ``QUIET`` seconds, a long time
for loopback, where a working proxy answers in well under a millisecond.
"""

from __future__ import annotations

import os
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import pytest

from sharecon.testing import BrokerStartError, FaultProxy, FaultProxyError, ToxiproxyServer
from sharecon.testing._toxiproxy import TOXIPROXY_VERSION, toxiproxy_cache_dir, toxiproxy_server
from sharecon.testing._toxiproxy import main as toxiproxy_main

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

QUIET = 0.3  # seconds in which a stalled proxy must forward nothing
WAIT = 5.0  # bound on anything that should happen promptly


# -- upstreams ------------------------------------------------------------------------


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            while data := sock.recv(65536):
                sock.sendall(data)
        except OSError:
            pass  # the proxy cut us: that is the point of these tests


class _Recorder(socketserver.BaseRequestHandler):
    """Keeps every byte it receives, per connection, and notes when the peer closed."""

    server: _RecordingServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        received = bytearray()
        self.server.received.append(received)
        try:
            while data := sock.recv(65536):
                received += data
        except OSError:
            pass
        self.server.closed.release()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _RecordingServer(_Server):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.received: list[bytearray] = []
        self.closed = threading.Semaphore(0)


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    """``127.0.0.1:PORT`` of an echo server."""
    server = _Server(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(WAIT)


@pytest.fixture
def recorder() -> Iterator[_RecordingServer]:
    server = _RecordingServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(WAIT)


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer() as server:
        yield server


@pytest.fixture
def proxy(
    toxiproxy: ToxiproxyServer, echo: str, request: pytest.FixtureRequest
) -> Iterator[FaultProxy]:
    with toxiproxy.proxy(_name(request), upstream=echo) as p:
        yield p


def _name(request: pytest.FixtureRequest) -> str:
    return "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]


# -- helpers --------------------------------------------------------------------------


def _connect(p: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", p.listen_port), timeout=WAIT)


class _Closed(AssertionError):
    """The proxy closed a connection that was expected to echo or stay silent."""


def _echoes(sock: socket.socket, data: bytes = b"ping", timeout: float = WAIT) -> bool:
    """Send ``data``; whether it all comes back within ``timeout`` (False on timeout).

    :raises _Closed: the connection was closed instead.
    """
    sock.settimeout(timeout)
    sock.sendall(data)
    got = b""
    try:
        while len(got) < len(data):
            chunk = sock.recv(65536)
            if not chunk:
                raise _Closed(f"connection closed after {got!r}")
            got += chunk
    except TimeoutError:
        return False
    assert got == data
    return True


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the peer closed: EOF or a reset within WAIT (not data, not silence)."""
    sock.settimeout(WAIT)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _round_trip(sock: socket.socket) -> float:
    started = time.monotonic()
    assert _echoes(sock)
    return time.monotonic() - started


def _transfer(p: FaultProxy, size: int) -> float:
    """Seconds to send ``size`` bytes through the proxy and read their echo back."""
    payload = os.urandom(size)
    with _connect(p) as sock:
        started = time.monotonic()
        # Send from a thread: with both directions limited, sending everything before
        # reading could fill every buffer on the way and stall both ends.
        sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        sender.start()
        got = bytearray()
        while len(got) < size:
            chunk = sock.recv(65536)
            assert chunk, f"closed after {len(got)} bytes"
            got += chunk
        elapsed = time.monotonic() - started
        sender.join(WAIT)
    assert got == payload
    return elapsed


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# -- the proxy ------------------------------------------------------------------------


def test_bytes_pass_through(proxy: FaultProxy, echo: str) -> None:
    assert proxy.upstream == echo
    assert proxy.address == f"127.0.0.1:{proxy.listen_port}"
    assert proxy.listen_port not in (0, int(echo.rpartition(":")[2]))
    with _connect(proxy) as sock:
        assert _echoes(sock, os.urandom(100_000))
        assert _echoes(sock, b"and again")


def test_cut_closes_open_connections_and_new_ones_work_right_after(proxy: FaultProxy) -> None:
    with _connect(proxy) as first, _connect(proxy) as second:
        assert _echoes(first) and _echoes(second)
        proxy.cut()
        assert _closed_by_peer(first)
        assert _closed_by_peer(second)
    with _connect(proxy) as after:
        assert _echoes(after)
        assert _echoes(after)  # a connection made after the cut is not affected by it


def test_cut_closes_the_upstream_side_too(
    toxiproxy: ToxiproxyServer, recorder: _RecordingServer
) -> None:
    upstream = f"127.0.0.1:{recorder.server_address[1]}"
    with toxiproxy.proxy("cut_upstream", upstream=upstream) as p, _connect(p) as sock:
        sock.sendall(b"hello")
        assert _wait_until(lambda: recorder.received == [bytearray(b"hello")])
        p.cut()
        assert recorder.closed.acquire(timeout=WAIT), "upstream connection still open"
        assert recorder.received == [bytearray(b"hello")]


def test_stall_forwards_nothing_but_accepts_connections(proxy: FaultProxy) -> None:
    with _connect(proxy) as held:
        assert _echoes(held)
        proxy.stall()
        assert not _echoes(held, timeout=QUIET)
        with _connect(proxy) as new:  # accepted while stalled...
            assert not _echoes(new, timeout=QUIET)  # ...but nothing passes
            proxy.heal()
            # Toxiproxy closes the connections a timeout toxic held when it is removed.
            assert _closed_by_peer(held)
            assert _closed_by_peer(new)
    with _connect(proxy) as after:
        assert _echoes(after)


def test_stall_drops_bytes_and_heal_closes_upstream(
    toxiproxy: ToxiproxyServer, recorder: _RecordingServer
) -> None:
    """Pins Toxiproxy's behaviour: bytes sent during a stall are discarded, not delivered later."""
    upstream = f"127.0.0.1:{recorder.server_address[1]}"
    with toxiproxy.proxy("stall_drops", upstream=upstream) as p, _connect(p) as sock:
        sock.sendall(b"before")
        assert _wait_until(lambda: recorder.received == [bytearray(b"before")])
        p.stall()
        sock.sendall(b"during")
        time.sleep(QUIET)
        p.heal()
        assert recorder.closed.acquire(timeout=WAIT), "upstream connection still open"
        assert recorder.received == [bytearray(b"before")]


def test_stall_with_seconds_heals_itself(proxy: FaultProxy) -> None:
    started = time.monotonic()
    proxy.stall(seconds=0.5)
    with _connect(proxy) as during:
        assert not _echoes(during, timeout=0.2)

    def passes() -> bool:
        with _connect(proxy) as sock:
            try:
                return _echoes(sock, timeout=0.2)
            except (_Closed, ConnectionResetError):
                return False  # made during the stall, so closed when it ended

    assert _wait_until(passes), "the stall did not end by itself"
    assert time.monotonic() - started >= 0.45
    assert proxy.toxics() == []


def test_timed_stall_only_ends_the_stall(proxy: FaultProxy) -> None:
    proxy.latency(1)
    proxy.stall(seconds=0.2)
    assert _wait_until(lambda: len(proxy.toxics()) == 2)
    assert {t["type"] for t in proxy.toxics()} == {"latency"}


def test_heal_cancels_a_stall_timer(proxy: FaultProxy) -> None:
    proxy.stall(seconds=0.2)
    proxy.heal()
    proxy.stall()  # open-ended: the first stall's timer must not end this one
    with _connect(proxy) as sock:
        # Past the first timer's 0.2 s: had it ended this stall, the connection would have
        # been closed (_echoes raises) or would echo.
        assert not _echoes(sock, timeout=0.2 + QUIET)
    proxy.heal()
    with _connect(proxy) as sock:
        assert _echoes(sock)


def test_latency_delays_both_directions_of_open_connections(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        assert _echoes(sock)
        proxy.latency(150)
        # 150 ms each way: a round trip takes at least 300 ms.
        assert _round_trip(sock) >= 0.25
        proxy.latency(150, jitter_ms=10)  # set again: replaced, not a second toxic
        assert len(proxy.toxics()) == 2
        proxy.heal()
        assert proxy.toxics() == []
        assert _echoes(sock)  # latency leaves connections open


def test_bandwidth_slows_a_transfer(proxy: FaultProxy) -> None:
    size = 200 * 1024
    unlimited = _transfer(proxy, size)
    proxy.bandwidth(500)
    limited = _transfer(proxy, size)
    # 200 KiB at ~500 KiB/s takes ~0.4 s; unlimited, loopback takes milliseconds.
    assert limited >= 0.3, f"limited {limited:.3f} s, unlimited {unlimited:.3f} s"
    proxy.heal()


def test_bad_arguments_are_refused_before_any_call(
    proxy: FaultProxy, toxiproxy: ToxiproxyServer
) -> None:
    with pytest.raises(ValueError, match="stall seconds"):
        proxy.stall(seconds=0)
    with pytest.raises(ValueError, match="latency"):
        proxy.latency(-1)
    with pytest.raises(ValueError, match="bandwidth"):
        proxy.bandwidth(0)
    with pytest.raises(ValueError, match="proxy name"):
        toxiproxy.proxy("a/b", upstream="127.0.0.1:1")


def test_api_errors_are_typed(proxy: FaultProxy, toxiproxy: ToxiproxyServer) -> None:
    with pytest.raises(FaultProxyError, match="HTTP 409") as info:
        toxiproxy.proxy(proxy.name, upstream=proxy.upstream)
    err = info.value
    assert isinstance(err, BrokerStartError)
    assert err.call == "POST /proxies"
    assert err.status == 409
    assert "proxy already exists" in err.body
    assert "proxy already exists" in str(err)


def test_a_closed_proxy_frees_its_port_and_refuses_calls(
    toxiproxy: ToxiproxyServer, echo: str
) -> None:
    p = toxiproxy.proxy("closing", upstream=echo)
    with _connect(p) as sock:
        assert _echoes(sock)
        p.close()
        assert _closed_by_peer(sock)
    p.close()  # idempotent
    assert p.closed
    with pytest.raises(ConnectionRefusedError):
        _connect(p).close()
    with pytest.raises(FaultProxyError, match="closed"):
        p.cut()
    toxiproxy.proxy("closing", upstream=echo).close()  # the name is free again


def test_fixed_listen_port(toxiproxy: ToxiproxyServer, echo: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with toxiproxy.proxy("fixed_port", upstream=echo, listen_port=port) as p:
        assert p.listen_port == port
        with _connect(p) as sock:
            assert _echoes(sock)
        p.cut()  # re-enabled on the same port
        with _connect(p) as sock:
            assert _echoes(sock)


def test_start_gives_a_proxy_with_its_own_server(echo: str) -> None:
    with FaultProxy.start(upstream=echo) as p:
        server = p.server
        assert server.running
        assert server.version == TOXIPROXY_VERSION
        with _connect(p) as sock:
            assert _echoes(sock)
    assert not server.running
    assert p.closed


def test_stopping_the_server_closes_its_proxies(echo: str) -> None:
    server = ToxiproxyServer().start()
    try:
        p = server.proxy("p", upstream=echo)
        p.stall(seconds=0.1)  # its timer must not call a dead server
        log_path = server.log_path
        assert log_path.is_file()
    finally:
        server.stop()
    assert p.closed
    assert not log_path.exists()
    with pytest.raises(FaultProxyError, match="closed"):
        p.heal()
    time.sleep(0.2)  # the cancelled timer would have fired by now
    server.stop()  # idempotent


def test_toxiproxy_dies_with_a_killed_python_process() -> None:
    """The watchdog ends toxiproxy-server even when its Python parent gets SIGKILL."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from sharecon.testing import ToxiproxyServer\n"
            "s = ToxiproxyServer().start()\n"
            "print(s.port, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        assert _port_open(port)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=WAIT)

    assert _wait_until(lambda: not _port_open(port), 10), "toxiproxy-server outlived its parent"


# -- provisioning ---------------------------------------------------------------------


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def cold_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache and no SHARECON_TOXIPROXY: provisioning must build."""
    monkeypatch.setenv("SHARECON_KAFKA_CACHE", str(tmp_path / "cache" / "kafka"))
    monkeypatch.delenv("SHARECON_TOXIPROXY", raising=False)
    assert toxiproxy_cache_dir() == tmp_path / "cache" / "toxiproxy" / TOXIPROXY_VERSION
    return toxiproxy_cache_dir()


def test_env_binary_that_does_not_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-toxiproxy-here"
    monkeypatch.setenv("SHARECON_TOXIPROXY", str(missing))
    with pytest.raises(BrokerStartError, match=f"SHARECON_TOXIPROXY='{missing}'"):
        toxiproxy_server()
    with pytest.raises(BrokerStartError, match="is not an executable file"):
        ToxiproxyServer().start()


def test_env_binary_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = toxiproxy_server()
    monkeypatch.setenv("SHARECON_TOXIPROXY", str(real))
    assert toxiproxy_server() == real


def test_no_go_on_path(cold_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BrokerStartError, match=r"Go \('go'\) not found on PATH") as info:
        toxiproxy_server()
    assert "SHARECON_TOXIPROXY" in str(info.value)
    assert not (cold_cache / "toxiproxy-server").exists()


def test_failed_build_shows_go_output(
    cold_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(
        tmp_path / "bin" / "go", "echo 'go: module lookup disabled by GOPROXY=off' >&2\nexit 1\n"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(BrokerStartError, match="module lookup disabled by GOPROXY=off") as info:
        toxiproxy_server()
    assert "SHARECON_TOXIPROXY" in str(info.value)
    assert list(cold_cache.iterdir()) == []  # no binary, no staging leftovers


def test_build_installs_once_into_the_cache(
    cold_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    # A stand-in for `go install` that writes a "server" printing the pinned version.
    _script(
        tmp_path / "bin" / "go",
        f"""echo "$@" >> {calls}
/bin/sleep 0.3
printf '#!/bin/sh\\necho "toxiproxy-server version {TOXIPROXY_VERSION}"\\n' > "$GOBIN/server"
/bin/chmod +x "$GOBIN/server"
""",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(toxiproxy_server())) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 4)
    target = cold_cache / "toxiproxy-server"
    assert results == [target] * 3
    assert sorted(p.name for p in cold_cache.iterdir()) == ["toxiproxy-server"]
    args = calls.read_text().splitlines()
    assert len(args) == 1, "go ran more than once"
    assert f"github.com/Shopify/toxiproxy/v2/cmd/server@v{TOXIPROXY_VERSION}" in args[0]
    assert f"Version={TOXIPROXY_VERSION}" in args[0]


def test_a_build_of_the_wrong_version_is_refused(
    cold_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(
        tmp_path / "bin" / "go",
        """printf '#!/bin/sh\\necho "toxiproxy-server version git"\\n' > "$GOBIN/server"
/bin/chmod +x "$GOBIN/server"
""",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(BrokerStartError, match="is not toxiproxy-server"):
        toxiproxy_server()
    assert list(cold_cache.iterdir()) == []


def test_cli_prints_the_binary() -> None:
    real = toxiproxy_server()
    done = subprocess.run(
        [sys.executable, "-m", "sharecon.testing._toxiproxy"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, SHARECON_TOXIPROXY=str(real)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(real)


def test_cli_reports_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SHARECON_TOXIPROXY", str(tmp_path / "nothing"))
    assert toxiproxy_main([]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: SHARECON_TOXIPROXY=")
