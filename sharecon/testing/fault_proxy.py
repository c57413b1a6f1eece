"""Network faults between a client under test and its server: :class:`FaultProxy`, on Toxiproxy.

::

    with FaultProxy.start(upstream=broker.bootstrap) as proxy:
        client = connect(proxy.address)   # "127.0.0.1:PORT", forwarded to the broker
        proxy.cut()                       # every open connection is closed
        proxy.stall(seconds=2.0)          # connections open, nothing passes, for 2 s

The forwarding runs in Toxiproxy (Shopify's TCP proxy, Go), a separate process: it shares
neither the event loop nor the GIL of the client under test, so a fault or a delay is what
the client sees on the wire and does not depend on how busy the test's own loop is. The
binary is provisioned by :func:`sharecon.testing._toxiproxy.toxiproxy_server` (built once
with Go, cached). The server is driven over its REST API with blocking, stdlib-only calls,
each bounded by a timeout; every method here returns once Toxiproxy has applied the change.

One :class:`ToxiproxyServer` can carry many proxies (one per broker of a cluster, say)::

    with ToxiproxyServer() as toxiproxy:
        a = toxiproxy.proxy("broker-1", upstream="127.0.0.1:9092")
        b = toxiproxy.proxy("broker-2", upstream="127.0.0.1:9093")
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharecon.testing._jvm import WATCHDOG as _WATCHDOG
from sharecon.testing._jvm import free_ports as _free_ports
from sharecon.testing._managed import Managed, Server
from sharecon.testing._provision import BrokerStartError, tail
from sharecon.testing._toxiproxy import TOXIPROXY_VERSION, toxiproxy_server

if TYPE_CHECKING:
    from collections.abc import Mapping

    from typing_extensions import Self

__all__ = ["TOXIPROXY_VERSION", "FaultProxy", "FaultProxyError", "ToxiproxyServer"]

log = logging.getLogger("sharecon.testing")

_HOST = "127.0.0.1"
_DEFAULT_START_TIMEOUT = 30.0  # the Go binary is up in ~20 ms; this is for a machine under load
_DEFAULT_API_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0
_START_ATTEMPTS = 3  # the free API port we picked may be taken before Toxiproxy binds it
_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")  # lands in URL paths: keep it to one safe segment

# Toxic names, so that each fault can be set again (updated in place) and removed on its own.
_STALL = ("sharecon_stall_up", "sharecon_stall_down")
_LATENCY = ("sharecon_latency_up", "sharecon_latency_down")
_BANDWIDTH = ("sharecon_bandwidth_up", "sharecon_bandwidth_down")
_STREAMS = ("upstream", "downstream")  # client -> upstream, upstream -> client


class FaultProxyError(BrokerStartError):
    """Toxiproxy could not be started, or an API call failed or went unanswered.

    A :class:`~sharecon.testing.BrokerStartError` (so a :class:`sharecon.errors.KafkaError`):
    provisioning the binary raises the parent class, everything after that this one.

    :ivar call: the request, e.g. ``"POST /proxies/kafka/toxics"`` (empty for a failed start).
    :ivar status: its HTTP status, or None when there was no HTTP answer.
    :ivar body: the response body (Toxiproxy's ``{"error": ..., "status": ...}``), or the
        connection error.
    """

    def __init__(
        self, message: str, *, call: str = "", status: int | None = None, body: str = ""
    ) -> None:
        super().__init__(message)
        self.call = call
        self.status = status
        self.body = body


class ToxiproxyServer(Server):
    """A ``toxiproxy-server`` process whose API listens on a free port of 127.0.0.1.

    :param start_timeout: seconds to wait for the API to answer ``GET /version``.
    :param api_timeout: seconds each API call may take.

    The process runs in its own process group and is killed however the Python process ends:
    :meth:`stop`, the context manager, interpreter exit, or (if Python is SIGKILLed) a small
    watchdog process. Toxiproxy's log (a JSON line per connection) is kept in a temporary
    file, :attr:`log_path`, while it runs; start failures quote its end.
    """

    def __init__(
        self,
        *,
        start_timeout: float = _DEFAULT_START_TIMEOUT,
        api_timeout: float = _DEFAULT_API_TIMEOUT,
    ) -> None:
        self.start_timeout = start_timeout
        self.api_timeout = api_timeout
        self.version = ""  #: what ``GET /version`` answered, e.g. ``"2.5.0"``
        self._port = 0
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, self._res.cleanup)
        self._proxies: dict[str, FaultProxy] = {}
        self._lock = threading.Lock()  # guards _proxies: proxies may be closed from any thread
        # No ProxyHandler entries: an http_proxy in the environment must not intercept calls
        # to 127.0.0.1 (urllib's default opener would honour it).
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # -- public surface -------------------------------------------------------

    @property
    def port(self) -> int:
        """The API's port on 127.0.0.1."""
        self._require_started()
        return self._port

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:PORT``, the REST API."""
        return f"http://{_HOST}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the toxiproxy-server process is alive."""
        return self._res.proc is not None and self._res.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id while it runs."""
        return self._res.proc.pid if self.running and self._res.proc else None

    @property
    def log_path(self) -> Path:
        """Toxiproxy's log file (removed by :meth:`stop`)."""
        if self._res.log is None:
            raise FaultProxyError("the Toxiproxy server has not been started")
        return self._res.log

    def __repr__(self) -> str:
        state = f"running on {self.api_url}" if self.running else "stopped"
        return f"<ToxiproxyServer {state}>"

    def start(self) -> Self:
        """Provision the binary, start it and wait until its API answers. Idempotent while running.

        :raises BrokerStartError: the binary could not be provisioned (see ``_toxiproxy``).
        :raises FaultProxyError: the process exited or did not answer within ``start_timeout``.
        """
        if self.running:
            return self
        binary = toxiproxy_server()
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._launch(binary, _free_ports(1)[0])
                return self
            except _PortTaken as exc:
                self._res.cleanup()
                self._port = 0
                if attempt == _START_ATTEMPTS:
                    raise FaultProxyError(str(exc)) from None
                log.info("Toxiproxy API port taken on start (%s), retrying", exc)
            except BaseException:
                self._res.cleanup()
                self._port = 0
                raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Kill the server (SIGTERM, SIGKILL after 5 s); its proxies and their connections go with it.

        Proxies made by this server stop their timers and become closed. Idempotent.
        """
        with self._lock:
            proxies, self._proxies = list(self._proxies.values()), {}
        for proxy in proxies:
            proxy._forget()
        self._res.cleanup()
        self._port = 0

    def proxy(
        self, name: str, upstream: str = "127.0.0.1:9092", listen_port: int = 0
    ) -> FaultProxy:
        """Create a proxy that listens on 127.0.0.1 and forwards every connection to ``upstream``.

        :param name: unique on this server; letters, digits, ``.``, ``_``, ``-``.
        :param upstream: ``host:port`` the proxy connects to for each accepted connection.
            Toxiproxy dials it when a client connects: if it is down, the client's
            connection is accepted and then closed at once.
        :param listen_port: the port to listen on; 0 lets the system pick a free one.
        :raises FaultProxyError: e.g. the name is taken (HTTP 409) or the port is in use.
        """
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"proxy name {name!r}: use letters, digits, '.', '_' and '-'")
        if not 0 <= listen_port <= 65535:
            raise ValueError(f"listen_port {listen_port} is outside 0..65535")
        created = self._json(
            "POST",
            "/proxies",
            {
                "name": name,
                "listen": f"{_HOST}:{listen_port}",
                "upstream": upstream,
                "enabled": True,
            },
        )
        # Toxiproxy reports the address it bound, so a port picked by the system is known
        # without a probe (and without the race of choosing a "free" port ourselves).
        port = int(str(created["listen"]).rpartition(":")[2])
        proxy = FaultProxy(self, name, upstream, port)
        with self._lock:
            self._proxies[name] = proxy
        return proxy

    # -- REST API -------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
    ) -> bytes:
        """One API request; its response body. Every failure is a :class:`FaultProxyError`."""
        call = f"{method} {path}"
        if not self.running:
            raise FaultProxyError(
                f"toxiproxy {call}: the Toxiproxy server is not running", call=call
            )
        request = urllib.request.Request(
            f"http://{_HOST}:{self._port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        limit = self.api_timeout if timeout is None else timeout
        try:
            with self._opener.open(request, timeout=limit) as response:
                data: bytes = response.read()
                return data
        except urllib.error.HTTPError as exc:
            text = _error_body(exc)
            raise FaultProxyError(
                f"toxiproxy {call} answered HTTP {exc.code}: {text}",
                call=call,
                status=exc.code,
                body=text,
            ) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise FaultProxyError(
                f"toxiproxy {call} got no answer ({reason}; timeout {limit:g} s)",
                call=call,
                body=str(reason),
            ) from exc

    def _json(self, method: str, path: str, body: Mapping[str, object] | None = None) -> Any:
        """:meth:`_call`, decoding the JSON answer."""
        raw = self._call(method, path, body)
        try:
            return json.loads(raw)
        except ValueError:
            raise FaultProxyError(
                f"toxiproxy {method} {path} answered something that is not JSON: {raw[:200]!r}",
                call=f"{method} {path}",
                body=raw.decode(errors="replace"),
            ) from None

    # -- internals ------------------------------------------------------------

    def _require_started(self) -> None:
        if self._port == 0:
            raise FaultProxyError("the Toxiproxy server has not been started")

    def _drop(self, name: str) -> None:
        with self._lock:
            self._proxies.pop(name, None)

    def _launch(self, binary: Path, port: int) -> None:
        fd, log_name = tempfile.mkstemp(prefix="sharecon-toxiproxy-", suffix=".log")
        self._res.log = Path(log_name)
        started = time.monotonic()
        with os.fdopen(fd, "wb") as out:
            try:
                self._res.proc = subprocess.Popen(
                    [str(binary), "-host", _HOST, "-port", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,  # a file, not a pipe: nobody drains a pipe, and it would fill
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: killpg reaches only Toxiproxy
                )
            except OSError as exc:
                raise FaultProxyError(f"could not run {binary}: {exc}") from exc
        self._res.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self._res.proc.pid)],
            # Not the caller's stdout: a pipe reader would wait for the watchdog to exit too.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._port = port
        self._wait_ready(binary, started)
        log.info(
            "Toxiproxy %s up on %s in %.2f s (pid %d)",
            self.version,
            self.api_url,
            time.monotonic() - started,
            self._res.proc.pid,
        )

    def _wait_ready(self, binary: Path, started: float) -> None:
        proc, log_file = self._res.proc, self._res.log
        assert proc is not None and log_file is not None
        deadline = started + self.start_timeout
        while True:
            code = proc.poll()
            if code is not None:
                text = log_file.read_text(errors="replace")
                if "address already in use" in text:
                    raise _PortTaken(f"port {self._port} was taken:\n{tail(text)}")
                raise FaultProxyError(
                    f"{binary} exited with code {code} during start:\n{tail(text)}"
                )
            try:
                self.version = self._call("GET", "/version", timeout=1.0).decode().strip()
                return
            except FaultProxyError as exc:
                if exc.status is not None:  # it answers, but not as Toxiproxy would
                    raise
            if time.monotonic() > deadline:
                raise FaultProxyError(
                    f"{binary} did not answer GET /version on port {self._port} within "
                    f"{self.start_timeout:.0f} s:\n{tail(log_file.read_text(errors='replace'))}"
                )
            time.sleep(0.02)


class FaultProxy(Managed):
    """One proxied upstream: clients connect to :attr:`address` instead of :attr:`upstream`.

    Made by :meth:`ToxiproxyServer.proxy`, or by :meth:`FaultProxy.start` with a server of
    its own. Faults apply to open connections and to new ones alike, in both directions,
    until :meth:`heal`. Every method is synchronous and returns once Toxiproxy has applied
    the change (a few milliseconds); a proxy may be driven from any thread.
    """

    def __init__(self, server: ToxiproxyServer, name: str, upstream: str, listen_port: int) -> None:
        self.server = server  #: the Toxiproxy process carrying this proxy
        self.name = name  #: the proxy's name in Toxiproxy
        self.upstream = upstream  #: ``host:port`` every connection is forwarded to
        self.listen_port = listen_port  #: the port clients connect to, on 127.0.0.1
        self._path = f"/proxies/{urllib.parse.quote(name, safe='')}"
        self._lock = threading.Lock()  # one change at a time: a stall timer is another thread
        self._timer: threading.Timer | None = None
        self._stall_generation = 0  # lets a late timer see that its stall was replaced
        self._closed = False
        self._owned_server: ToxiproxyServer | None = None

    @classmethod
    def start(
        cls,
        upstream: str = "127.0.0.1:9092",
        *,
        name: str = "sharecon",
        listen_port: int = 0,
    ) -> FaultProxy:
        """Start a :class:`ToxiproxyServer` of its own with one proxy; :meth:`close` stops both.

        ::

            with FaultProxy.start(upstream="127.0.0.1:9092") as proxy:
                ...

        :raises BrokerStartError: Toxiproxy could not be provisioned.
        :raises FaultProxyError: it could not be started or the proxy created.
        """
        server = ToxiproxyServer().start()
        try:
            proxy = server.proxy(name, upstream, listen_port)
        except BaseException:
            server.stop()
            raise
        proxy._owned_server = server
        return proxy

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``: where clients connect to reach :attr:`upstream` through the proxy."""
        return f"{_HOST}:{self.listen_port}"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the server stopped)."""
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.address} -> {self.upstream}"
        return f"<FaultProxy {self.name} {state}>"

    def cut(self) -> None:
        """Close every open connection through the proxy, at both ends; new ones work at once.

        The client side of each connection is closed (the client reads EOF, or gets a reset
        if Toxiproxy had unread bytes from it), and so is the upstream side. Done by disabling
        the proxy, which closes its listener and every connection it tracks, and enabling it
        again on the same port: a connect made *during* this call may be refused, one made
        after it returns is proxied normally. Faults in place (stall, latency, bandwidth)
        stay in place.
        """
        with self._lock:
            self._check_open()
            self._update(enabled=False)
            self._update(enabled=True)

    def stall(self, seconds: float | None = None) -> None:
        """Let nothing through, either way, while keeping connections open and accepting new ones.

        Open connections stay open and new ones are accepted (and connected upstream), but
        no byte is forwarded in either direction: what the client sees when a peer hangs or
        packets vanish without a reset. Bytes sent meanwhile are **discarded**, not held
        back (Toxiproxy's ``timeout`` toxic with ``timeout=0`` on both streams).

        Ending the stall **closes every connection it held** (open ones and those made
        during it): Toxiproxy closes a timeout toxic's connections when the toxic is
        removed. So a stalled connection never resumes with bytes missing from its stream;
        connections made after the stall ends work normally.

        :param seconds: end the stall by itself after this long (a daemon timer, cancelled by
            :meth:`heal`, :meth:`close` or another ``stall``). The timer ends only the stall;
            latency or bandwidth limits stay. None: until :meth:`heal`.
        """
        if seconds is not None and not seconds > 0:
            raise ValueError(f"stall seconds must be > 0, got {seconds}")
        with self._lock:
            self._check_open()
            self._cancel_timer()
            for toxic, stream in zip(_STALL, _STREAMS, strict=True):
                self._set_toxic(toxic, "timeout", stream, {"timeout": 0})
            if seconds is not None:
                timer = threading.Timer(seconds, self._end_stall, args=(self._stall_generation,))
                timer.daemon = True  # never keeps a finished test process alive
                timer.name = f"sharecon-fault-proxy-{self.name}-stall"
                self._timer = timer
                timer.start()

    def latency(self, ms: int, jitter_ms: int = 0) -> None:
        """Delay every byte by ``ms`` (± ``jitter_ms``) milliseconds, in each direction.

        Both directions are delayed, so a request/response round trip takes at least
        ``2 * ms`` longer. Data is held back, never dropped; connections stay open. Calling
        it again replaces the values.
        """
        if ms < 0 or jitter_ms < 0:
            raise ValueError(f"latency needs ms >= 0 and jitter_ms >= 0, got {ms}, {jitter_ms}")
        with self._lock:
            self._check_open()
            for toxic, stream in zip(_LATENCY, _STREAMS, strict=True):
                self._set_toxic(
                    toxic, "latency", stream, {"latency": int(ms), "jitter": int(jitter_ms)}
                )

    def bandwidth(self, kib_per_s: float) -> None:
        """Limit each direction to about ``kib_per_s`` KiB/s. Calling it again replaces the limit.

        Toxiproxy counts whole kB/s (1000 bytes), so the rate is rounded to the nearest
        1000 bytes/s (at least 1). Data is held back, never dropped.
        """
        if not kib_per_s > 0:
            raise ValueError(f"bandwidth must be > 0 KiB/s, got {kib_per_s}")
        rate = max(1, round(kib_per_s * 1024 / 1000))
        with self._lock:
            self._check_open()
            for toxic, stream in zip(_BANDWIDTH, _STREAMS, strict=True):
                self._set_toxic(toxic, "bandwidth", stream, {"rate": rate})

    def repoint(self, upstream: str) -> None:
        """Forward connections accepted from now on to ``upstream`` (``host:port``), as a
        DNS name or a load balancer does when it is pointed at a moved server. Open
        connections are closed (Toxiproxy restarts the proxy to apply it)."""
        self._check_open()
        self.server._call("POST", self._path, {"upstream": upstream})
        self.upstream = upstream

    def heal(self) -> None:
        """Remove every fault (toxic) and make sure the proxy is enabled; cancels a stall timer.

        Connections held by a stall are closed by this (see :meth:`stall`); connections
        under latency or bandwidth limits continue at full speed, with the bytes they had in
        flight delivered.
        """
        with self._lock:
            self._check_open()
            self._cancel_timer()
            self._update(enabled=True)
            for toxic in self._toxic_names():
                self._delete_toxic(toxic)

    def toxics(self) -> list[dict[str, Any]]:
        """The toxics Toxiproxy currently applies on this proxy, as its API lists them."""
        with self._lock:
            self._check_open()
            listed: list[dict[str, Any]] = self.server._json("GET", f"{self._path}/toxics")
            return listed

    def close(self) -> None:
        """Delete the proxy (closing its connections and its port); idempotent.

        A proxy made by :meth:`start` also stops its own server.
        """
        with self._lock:
            was_open = not self._closed
            self._closed = True
            self._cancel_timer()
            if was_open and self.server.running:
                try:
                    self.server._call("DELETE", self._path)
                except FaultProxyError as exc:
                    # Cleanup must not fail a test that already has a result; 404 (deleted
                    # already) is fine, anything else is worth a line in the log.
                    if exc.status != 404:
                        log.warning("fault proxy %r: could not delete it: %s", self.name, exc)
        self.server._drop(self.name)
        owned, self._owned_server = self._owned_server, None
        if owned is not None:
            owned.stop()

    def _exit(self) -> None:
        self.close()

    # -- internals ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise FaultProxyError(f"fault proxy {self.name!r} is closed")

    def _forget(self) -> None:
        """The server is going away: stop the timer and refuse further calls."""
        with self._lock:
            self._closed = True
            self._cancel_timer()

    def _cancel_timer(self) -> None:
        # The generation moves on even if the timer already fired and waits for the lock.
        self._stall_generation += 1
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _update(self, *, enabled: bool) -> None:
        self.server._call("POST", self._path, {"enabled": enabled})

    def _set_toxic(
        self, name: str, kind: str, stream: str, attributes: Mapping[str, object]
    ) -> None:
        """Add the toxic, or update it in place if it is there (set twice = new values)."""
        try:
            self.server._call(
                "POST",
                f"{self._path}/toxics",
                {
                    "name": name,
                    "type": kind,
                    "stream": stream,
                    "toxicity": 1.0,
                    "attributes": attributes,
                },
            )
        except FaultProxyError as exc:
            if exc.status != 409:  # 409: a toxic of that name exists
                raise
            self.server._call(
                "POST",
                f"{self._path}/toxics/{name}",
                {"toxicity": 1.0, "attributes": attributes},
            )

    def _delete_toxic(self, name: str) -> None:
        try:
            self.server._call("DELETE", f"{self._path}/toxics/{urllib.parse.quote(name, safe='')}")
        except FaultProxyError as exc:
            if exc.status != 404:  # 404: removed meanwhile, which is what we wanted
                raise

    def _toxic_names(self) -> list[str]:
        listed = self.server._json("GET", f"{self._path}/toxics")
        return [str(t["name"]) for t in listed]

    def _end_stall(self, generation: int) -> None:
        """The stall timer: end that stall unless it was healed or replaced meanwhile."""
        with self._lock:
            if self._closed or generation != self._stall_generation:
                return
            self._timer = None
            try:
                for toxic in _STALL:
                    self._delete_toxic(toxic)
            except FaultProxyError as exc:
                # A timer thread has no caller to raise to; an unhandled error would only
                # be printed (or fail an unrelated test under pytest).
                log.warning("fault proxy %r: could not end the stall: %s", self.name, exc)


class _PortTaken(Exception):
    pass


class _Resources:
    """The process, its watchdog and its log file: what must go however the server object ends."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None

    def cleanup(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)  # Toxiproxy exits at once on SIGTERM
                try:
                    proc.wait(timeout=_STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=_STOP_TIMEOUT)
            else:
                proc.wait()
        dog, self.watchdog = self.watchdog, None
        if dog is not None:
            dog.kill()
            dog.wait()
        log_file, self.log = self.log, None
        if log_file is not None:
            log_file.unlink(missing_ok=True)


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(4096).decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        exc.close()
