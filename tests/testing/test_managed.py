"""The test kit's one context-manager base (sharecon.testing._managed): ``with`` and
``async with`` start and stop a server alike, and a start that fails or is cancelled
leaves nothing running. Real loopback servers: a listening socket, and the OIDC issuer."""

from __future__ import annotations

import socket
import threading
import urllib.request
from typing import TYPE_CHECKING

import anyio
import pytest

from sharecon.testing._managed import Server
from sharecon.testing.broker import KafkaBroker
from sharecon.testing.cluster import KafkaCluster
from sharecon.testing.fault_proxy import FaultProxy, ToxiproxyServer
from sharecon.testing.kdc import KdcStartError, KerberosKdc, kdc_programs
from sharecon.testing.oidc import OidcIssuer

if TYPE_CHECKING:
    from typing_extensions import Self


class _Listener(Server):
    """A loopback listener; with ``fail_after_bind`` its start fails once it holds the port,
    and with ``block`` it waits (holding the port) until released."""

    def __init__(self, *, fail_after_bind: bool = False, block: bool = False) -> None:
        self.sock: socket.socket | None = None
        self.port = 0
        self.fail_after_bind = fail_after_bind
        self.block = block
        self.release = threading.Event()
        self.stops = 0

    def start(self) -> Self:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        if self.fail_after_bind:
            raise OSError("the server would not come up")
        if self.block:
            self.release.wait(10)
        return self

    def stop(self) -> None:
        self.stops += 1
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_every_server_of_the_kit_has_the_one_base() -> None:
    for cls in (KafkaBroker, KafkaCluster, ToxiproxyServer, KerberosKdc, OidcIssuer):
        assert issubclass(cls, Server), cls
        for name in ("__enter__", "__exit__", "__aenter__", "__aexit__"):
            assert name not in vars(cls), f"{cls.__name__} defines {name} again"
    assert "__enter__" not in vars(FaultProxy) and "__aexit__" not in vars(FaultProxy)


def test_with_starts_and_stops_a_real_issuer() -> None:
    with OidcIssuer({"app": "s3cret"}) as issuer:
        with urllib.request.urlopen(issuer.url + "/.well-known/openid-configuration", timeout=5):
            pass
        port = int(issuer.url.rsplit(":", 1)[1].split("/")[0])
        assert _listening(port)
    assert not _listening(port)


def test_a_failed_start_is_stopped_by_with_never() -> None:
    """``with`` keeps the plain semantics: a failed ``__enter__`` runs no ``__exit__``
    (each server's own start cleans up after itself), as before the base existed."""
    server = _Listener(fail_after_bind=True)
    with pytest.raises(OSError, match="would not come up"), server:
        pass  # pragma: no cover - never reached
    assert server.stops == 0
    server.stop()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_with_starts_and_stops_in_a_thread(anyio_backend: str) -> None:
    async with OidcIssuer({"app": "s3cret"}) as issuer:
        port = int(issuer.url.rsplit(":", 1)[1].split("/")[0])
        assert _listening(port)
    assert not _listening(port)

    server = _Listener(fail_after_bind=True)
    with pytest.raises(OSError, match="would not come up"):
        async with server:
            pass  # pragma: no cover - never reached
    assert server.stops == 1 and server.sock is None  # the half-started server was stopped


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_cancelled_async_start_or_body_still_stops(anyio_backend: str) -> None:
    server = _Listener(block=True)
    # The start blocks in its worker thread (not cancellable) until this timer frees it.
    timer = threading.Timer(0.6, server.release.set)
    timer.start()
    with anyio.move_on_after(0.2) as scope:
        async with server:
            # Entered on a backend that lets the thread's start finish first: the pending
            # cancellation lands at the first checkpoint.
            await anyio.sleep(5)
    timer.join()
    assert scope.cancelled_caught
    assert server.stops == 1 and server.sock is None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_async_with_runs_a_real_kdc(anyio_backend: str) -> None:
    """The KDC (a ``with`` server until the base) now has ``async with`` as well."""
    try:
        kdc_programs()
    except KdcStartError as exc:
        pytest.skip(str(exc))
    # Past this point a KDC that does not start is an error, never a skip.
    async with KerberosKdc() as kdc:
        assert kdc.running and _listening(kdc.port)
        folder, port = kdc.dir, kdc.port
    assert "stopped" in repr(kdc) and not _listening(port) and not folder.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_with_runs_toxiproxy_and_closes_its_proxy(anyio_backend: str) -> None:
    """ToxiproxyServer and FaultProxy (``with`` only until the base) take ``async with``."""
    upstream = _Listener().start()
    try:
        async with ToxiproxyServer() as server:
            async with server.proxy("managed", f"127.0.0.1:{upstream.port}") as proxy:
                assert _listening(proxy.listen_port)
            assert proxy.closed and not _listening(proxy.listen_port)
        assert not server.running
    finally:
        upstream.stop()
