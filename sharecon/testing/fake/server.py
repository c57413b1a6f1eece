"""FakeKafka: an in-process Kafka broker on loopback, for tests of share-group code.

The server runs its own event loop in a background thread (an anyio blocking portal), so
it serves synchronous tests, asyncio and trio tests alike; the clients under test connect
to it over TCP exactly as they would to a real broker. Requests are decoded and answers
encoded with sharecon's own protocol layer; :class:`~.cluster.FakeCluster` decides.

Time: the fake's clock is the monotonic clock plus whatever :meth:`FakeKafka.advance`
added, so locks end on their own as on a broker, and a test can jump past them at once.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread

from sharecon.protocol.api import decode_request, encode_response
from sharecon.protocol.framing import NEED_DATA, FrameDecoder
from sharecon.protocol.messages import REQUESTS
from sharecon.protocol.messages.fetch import FetchRequest
from sharecon.protocol.messages.share_fetch import ShareFetchRequest
from sharecon.testing._managed import Server
from sharecon.testing.fake.cluster import FAILABLE, QUIET_APIS, Failure, FakeCluster

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import ByteStream, TaskGroup, TaskStatus
    from typing_extensions import Self

    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response

__all__ = ["FakeKafka"]

logger = logging.getLogger("sharecon.testing.fake")

#: How far past a lock end (or persisted release) a waiting fetch wakes: enough that the
#: clock, re-read, is surely past it despite rounding (else it could wake again at once).
_PAST = 1e-6


@dataclass(slots=True)
class _Conn:
    name: str
    stream: ByteStream
    scope: anyio.CancelScope
    #: closed by a fault hook without the broker-side release (a crash, or a restart that released first)
    silent: bool = False


class FakeKafka(Server):
    """A fake Kafka broker imitating one Kafka line (4.1 to 4.4), in this process.

    Use it as a context manager (``with FakeKafka() as fake`` or ``async with``), or
    call :meth:`start` and :meth:`stop`. Point any sharecon client at :attr:`bootstrap`.

    :param version: the Kafka line to imitate (``"4.1"`` .. ``"4.4"``, patch ignored).
    :param host: the loopback address to listen on.
    :param port: 0 for any free port.
    :param session_timeout_ms: how long a share-group member may stay silent.
    :param heartbeat_interval_ms: the interval members are told to heartbeat at.
    """

    #: Longest a waiting fetch sleeps before it looks again (``None``: no limit). It needs
    #: none: it wakes when a request is served or a fault acts, and when the next lock
    #: ends or release is persisted (:meth:`FakeCluster.next_change`); a limit only adds
    #: wake-ups.
    poll_interval: float | None = None

    def __init__(
        self,
        version: str = "4.4",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 1000,
    ) -> None:
        self.version = version
        self._host = host
        self._port = port
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._cluster: FakeCluster | None = None
        self._portal_cm: Any = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._tg: TaskGroup | None = None
        self._offset = 0.0
        self._origin = 0.0
        self._conns: dict[str, _Conn] = {}
        self._ids = itertools.count(1)
        self._changed: anyio.Event | None = None
        self._stopped = threading.Event()
        self.requests_served = 0
        #: what went wrong inside the fake (a request it could not read or answer)
        self.errors: list[Exception] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start listening (in a background thread); returns self."""
        if self._portal is not None:
            raise RuntimeError("this FakeKafka is already running")
        self._portal_cm = anyio.from_thread.start_blocking_portal("asyncio")
        self._portal = self._portal_cm.__enter__()
        try:
            self._portal.start_task(self._serve)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            self._portal = self._portal_cm = None
            raise
        return self

    def stop(self) -> None:
        """Close every connection and stop listening. Stopping twice does nothing."""
        portal, cm = self._portal, self._portal_cm
        if portal is None:
            return
        self._portal = self._portal_cm = None
        with contextlib.suppress(Exception):
            portal.call(self._close)
        cm.__exit__(None, None, None)

    @property
    def bootstrap(self) -> str:
        """``host:port`` to give clients."""
        return f"{self._host}:{self._port}"

    @property
    def cluster(self) -> FakeCluster:
        """The broker state (read it only through :meth:`call`, from the test's thread)."""
        if self._cluster is None:
            raise RuntimeError("FakeKafka is not running")
        return self._cluster

    def call(self, fn: Callable[[FakeCluster], Any]) -> Any:
        """Run ``fn(cluster)`` on the server's thread (where the state lives); its result."""
        portal = self._require()
        cluster = self.cluster

        async def run() -> Any:
            out = fn(cluster)
            self._notify()
            return out

        return portal.call(run)

    def now(self) -> float:
        """The fake's clock (seconds)."""
        return self._wall() - self._origin + self._offset

    def _wall(self) -> float:
        # The clock a waiting fetch's MaxWaitMs runs on (the simulation's is virtual).
        return time.monotonic()

    # -- test controls -----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the fake's clock forward: locks and member sessions that end by then end."""
        if seconds < 0:
            raise ValueError("the clock only goes forward")

        def go(c: FakeCluster) -> None:
            self._offset += seconds
            c.tick(self.now())

        self.call(go)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (without an admin client)."""
        self.call(lambda c: c.create_topic(name, partitions))

    def configure_group(self, group: str, configs: dict[str, str]) -> None:
        """Set share-group configs (``{"share.auto.offset.reset": "earliest"}``)."""

        def go(c: FakeCluster) -> None:
            c.group_configs.setdefault(group, {}).update(configs)
            c._apply_group_configs(group)

        self.call(go)

    def fail_next(self, api: int | str, count: int, error_code: int) -> None:
        """Answer the next ``count`` requests of ``api`` (key or name, e.g.
        ``"ShareFetch"``) with ``error_code``, without acting on them.

        :raises ValueError: an API the fake cannot fail (it has no error code to set)."""
        key = _api_key(api)
        if key not in FAILABLE:
            raise ValueError(f"FakeKafka cannot fail {api!r} requests with an error code")
        self.call(lambda c: c.failures.append(Failure(key, count, int(error_code))))

    def cut(self, member_id: str) -> int:
        """Close every connection a share-group member's requests came on (the broker
        sees them close, and releases what the member's sessions hold). Returns how many."""
        names = self.call(lambda c: [n for n, m in c.connection_members.items() if m == member_id])
        return self._close_conns(names, silent=False)

    def cut_all(self) -> int:
        """Close every client connection. Returns how many."""
        return self._close_conns(list(self._conns), silent=False)

    def move_leader(self, topic: str, partition: int) -> None:
        """The partition's leadership moves (to a new incarnation of this node): its
        leader epoch goes up and every group's share partition is rebuilt from the
        persisted state, forgetting acquisitions."""
        self.call(lambda c: c.model.move_leader(topic, partition, self.now()))

    def withdraw_leader(self, topic: str, partition: int) -> None:
        """The partition loses its leader, as while the broker that led it shuts down and
        no other can take over: Metadata names no leader for it (LEADER_NOT_AVAILABLE),
        fetches and acknowledgements of it are answered NOT_LEADER_OR_FOLLOWER with no
        leader named, and its share partitions are rebuilt from the persisted state
        (acquisitions forgotten), until :meth:`restore_leader`."""
        self.call(lambda c: c.model.withdraw_leader(topic, partition, self.now()))

    def restore_leader(self, topic: str, partition: int) -> None:
        """A leader is elected for the partition again (this node, a new leader epoch)."""
        self.call(lambda c: c.model.restore_leader(topic, partition, self.now()))

    def restart(self) -> None:
        """A clean restart, as a broker that is shut down and started again: every share
        session is closed first, so the records its members held are released (back to
        available, their delivery counts as a closing session leaves them), then
        connections drop and in-memory share partitions are rebuilt from the persisted
        state; records and persisted state stay. For a crash, see :meth:`crash`."""
        names = list(self._conns)

        def go(c: FakeCluster) -> None:
            now = self.now()
            c.model.disconnect_many(names, now, concurrent=False)
            c.connection_members.clear()
            c.model.restart(now)

        self.call(go)
        # Already released above: the closes must not release again.
        self._close_conns(names, silent=True)

    def crash(self) -> None:
        """The broker dies and comes back: connections drop, share sessions and in-memory
        share partitions are lost with nothing released (what members held comes back
        only as the rebuilt share partitions forget the acquisitions), persisted state and
        records stay. For a clean restart, see :meth:`restart`."""

        def go(c: FakeCluster) -> None:
            c.model.restart(self.now())

        self.call(go)
        self._close_conns(list(self._conns), silent=True)

    # -- server ------------------------------------------------------------------------------

    def _require(self) -> anyio.from_thread.BlockingPortal:
        if self._portal is None:
            raise RuntimeError("FakeKafka is not running")
        return self._portal

    def _notify(self) -> None:
        ev = self._changed
        if ev is not None:
            self._changed = anyio.Event()
            ev.set()

    async def _serve(self, *, task_status: TaskStatus[None]) -> None:
        self._changed = anyio.Event()
        listener = await anyio.create_tcp_listener(local_host=self._host, local_port=self._port)
        self._port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._origin = time.monotonic()
        self._cluster = FakeCluster(
            self.version,
            self._host,
            self._port,
            session_timeout_ms=self._session_timeout_ms,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
        )
        async with listener, anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(listener.serve, self._serve_conn)
            task_status.started()
            await anyio.sleep_forever()

    async def _close(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def _close_conns(self, names: list[str], *, silent: bool) -> int:
        async def close() -> int:
            n = 0
            for name in names:
                c = self._conns.get(name)
                if c is None:
                    continue
                c.silent = silent
                c.scope.cancel()
                n += 1
            return n

        out: int = self._require().call(close)
        return out

    def _cluster_of(self, name: str) -> FakeCluster:
        """The broker state serving connection ``name`` (one here; a several-node fake
        picks the node the connection reached)."""
        del name
        return self.cluster

    async def _serve_conn(self, stream: ByteStream, prefix: str = "c") -> None:
        name = f"{prefix}{next(self._ids)}"
        scope = anyio.CancelScope()
        conn = _Conn(name, stream, scope)
        self._conns[name] = conn
        try:
            with scope:
                decoder = FrameDecoder()
                while True:
                    try:
                        data = await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        break
                    decoder.receive_data(data)
                    # One request at a time per connection, in order, as a Kafka broker
                    # handles them (a waiting fetch holds up what comes after it).
                    while (frame := decoder.next_frame()) is not NEED_DATA:
                        assert isinstance(frame, bytes)
                        header, body = decode_request(frame, trailing_ok=True)
                        if isinstance(body, (ShareFetchRequest, FetchRequest)):
                            await self._answer_later(conn, header, body)
                        else:
                            await self._answer(conn, header, body)
        except Exception as exc:
            # A request the fake cannot read or answer: the connection closes (as a broker
            # closes it on a malformed request) and the test can see why in ``errors``.
            logger.exception("fake broker: connection %s failed", name)
            self.errors.append(exc)
        finally:
            self._conns.pop(name, None)
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await stream.aclose()
                if not conn.silent and self._cluster is not None:
                    self._cluster_of(name).disconnect(name, self.now())
                    self._notify()

    async def _answer_later(
        self, conn: _Conn, header: RequestHeader, body: Request[Response]
    ) -> None:
        cluster = self._cluster_of(conn.name)
        arrived = self.now()
        wait_ms = getattr(body, "max_wait_ms", 0)
        deadline = self._wall() + max(wait_ms, 0) / 1000.0
        while True:
            now = self.now()
            share = isinstance(body, ShareFetchRequest)
            if isinstance(body, ShareFetchRequest):
                ready = cluster.share_fetch_ready(body, arrived, now)
            else:
                assert isinstance(body, FetchRequest)
                ready = body.max_wait_ms <= 0 or cluster.fetch_ready(body, header.api_version)
            left = deadline - self._wall()
            if ready or left <= 0:
                break
            # Sleep until something can change: a request served or a fault (``_changed``
            # is set), or, for a ShareFetch, the next lock end or persisted release.
            if share and (change := cluster.next_change(now)) is not None:
                left = min(left, max(change - now, 0.0) + _PAST)
            if self.poll_interval is not None:
                left = min(left, self.poll_interval)
            changed = self._changed
            assert changed is not None
            with anyio.move_on_after(left):
                await changed.wait()
        await self._answer(conn, header, body)

    async def _answer(self, conn: _Conn, header: RequestHeader, body: Request[Response]) -> None:
        cluster = self._cluster_of(conn.name)
        response = cluster.handle(
            header.api_key, header.api_version, body, conn.name, self.now(), header.client_id
        )
        self.requests_served += 1
        if header.api_key not in QUIET_APIS:
            self._notify()  # waiting fetches look again
        if response is None:
            return
        frame = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        try:
            await conn.stream.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            conn.scope.cancel()


def _api_key(api: int | str) -> int:
    if isinstance(api, int):
        return api
    for key, cls in REQUESTS.items():
        if cls.api_name.lower() == api.lower():
            return key
    raise ValueError(f"unknown API {api!r}")
