"""One pipelined connection to one Kafka broker.

Rules of this module:

1. One reader task per connection (:meth:`BrokerConnection.run`), started by the owner's task
   group. It only splits the byte stream into frames and routes each by correlation id. Bodies
   are decoded in the task that made the request, so a body that fails to decode fails that
   request alone and the connection stays usable.
2. One writer at a time. A request's frame goes into an outbox; the first task to find no
   write in progress writes the outbox, and keeps writing what other tasks queued meanwhile,
   one ``send`` for all of them. The others do not wait for the write: their answer (or the
   connection's death) resolves their request. Many requests in flight thus cost one write,
   not one write and one event-loop pass each. An interruption (cancellation, timeout,
   error) while frames are being written closes the connection: half a frame on the wire
   would desynchronise the stream.
3. A caller that gives up (cancelled, timed out) leaves its entry in ``_pending``; the reader
   drops the late response when it arrives. An id the reader does not know at all means the
   stream is out of step, and the connection is closed.
4. When the stream breaks, every pending request fails at once with
   :class:`~sharecon.errors.BrokerDisconnectedError` naming the broker and why, and the
   connection is dead for good; the cluster layer opens a new one.
5. anyio and OS exceptions never leave this module unmapped.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from sharecon import errors
from sharecon._net.clock import event_loop_clock
from sharecon.protocol import NEED_DATA, FrameDecoder, decode_response_for, encode_request
from sharecon.protocol.framing import identify_protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import ByteStream, TaskStatus

    from sharecon.protocol import Request, Response, VersionTable

R = TypeVar("R", bound="Response")

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "BrokerAddress", "BrokerConnection", "SentRequest"]

logger = logging.getLogger(__name__)

#: Largest response frame accepted by default (the Java client's default fetch.max.bytes is 50 MiB).
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
_RECEIVE_CHUNK = 256 * 1024
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where a broker listens. ``node_id`` is -1 for a bootstrap address not yet identified."""

    host: str
    port: int
    node_id: int = -1

    def __str__(self) -> str:
        where = f"{self.host}:{self.port}"
        return where if self.node_id < 0 else f"broker {self.node_id} ({where})"


class _Pending:
    """One request waiting for its response frame (or for the connection's death)."""

    __slots__ = ("api_key", "api_version", "error", "event", "frame")

    def __init__(self, api_key: int, api_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.event = anyio.Event()
        self.frame: bytes | None = None
        self.error: errors.KafkaConnectionError | None = None


class SentRequest(Generic[R]):
    """A request on the wire; :meth:`wait` returns its decoded response."""

    __slots__ = ("_body", "_conn", "_corr", "_pending", "_version")

    def __init__(
        self,
        body: Request[R],
        api_version: int,
        pending: _Pending,
        conn: BrokerConnection,
        corr: int,
    ) -> None:
        self._body = body
        self._version = api_version
        self._pending = pending
        self._conn = conn
        self._corr = corr

    @property
    def what(self) -> str:
        """``broker ... RequestClass vN corr=M``, for messages (built only when needed)."""
        return self._conn._what(self._body, self._version, self._corr)

    async def wait(self, timeout: float | None = None) -> R:
        """Wait for the response (``timeout`` seconds at most) and decode it.

        :raises BrokerDisconnectedError: the connection broke first.
        :raises RequestTimeoutError: no response in time (the connection stays usable).
        :raises RemoteProtocolError: the body could not be decoded.
        """
        pending = self._pending
        try:
            if pending.event.is_set():
                pass
            elif timeout is None:
                # No deadline of our own: the caller's scope bounds the wait (request() does),
                # and a cancel scope per response is a measurable part of a round trip.
                await pending.event.wait()
            else:
                # A plain cancel scope, as in BrokerConnection.request: anyio.fail_after is
                # two generator context managers deep, a measurable part of a round trip.
                with anyio.CancelScope(deadline=self._conn._clock() + timeout) as scope:
                    await pending.event.wait()
                if scope.cancelled_caught:
                    raise errors.RequestTimeoutError(
                        f"{self.what}: no response within {timeout:g} s"
                    )
        except BaseException:
            if not pending.event.is_set():
                self._conn._withdraw(self._corr, pending)
            raise
        if pending.error is not None:
            raise pending.error
        assert pending.frame is not None
        _, response = decode_response_for(self._body, self._version, pending.frame)
        return response


class BrokerConnection:
    """A pipelined request/response channel to one broker over an anyio byte stream.

    Construct it over a connected stream, start :meth:`run` in a task group, then call
    :meth:`request` from any number of tasks. Opening sockets, TLS, ApiVersions and SASL are
    done by :func:`sharecon._net.connect.open_connection`; this class is the part that
    is also exercised over in-memory streams in tests.

    :param stream: a connected byte stream (TCP, TLS, or an in-memory pair in tests).
    :param address: the broker, for error messages and logs.
    :param client_id: sent in every request header.
    :param max_frame_size: larger response frames are refused before any allocation.
    """

    def __init__(
        self,
        stream: ByteStream,
        address: BrokerAddress,
        *,
        client_id: str | None = "sharecon",
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self._stream = stream
        self._max_frame_size = max_frame_size
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        # Frames waiting to be written, and whether a task is writing (see rule 2).
        self._outbox: list[bytes] = []
        self._outbox_ids: list[int] = []
        self._writing = False
        self._failure: str | None = None
        self._failure_cause: BaseException | None = None
        self._reader_scope: anyio.CancelScope | None = None
        self._reader_done = anyio.Event()
        #: Negotiated versions; set by the ApiVersions handshake (None until then).
        self.versions: VersionTable | None = None
        self._reauth_at: float | None = None
        self._reauth: Callable[[], Awaitable[None]] | None = None
        self._reauth_task: int | None = None
        self._reauth_done: anyio.Event | None = None
        self._decoder: FrameDecoder | None = None
        # The event loop's clock, for request deadlines; bound to the loop when run() starts.
        self._clock: Callable[[], float] = anyio.current_time

    # -- state -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection has failed or been closed; it is never reused then."""
        return self._failure is not None

    @property
    def in_flight(self) -> int:
        """Requests sent (or being sent) whose response has not been routed yet."""
        return len(self._pending)

    @property
    def unframed_head(self) -> bytes:
        """The first bytes the peer sent (at most 8) while none formed a complete frame.

        Empty once a frame arrived, or while nothing came. Non-empty when the stream ends or
        stalls: the peer is likely not a Kafka broker (see :func:`identify_protocol`).
        """
        decoder = self._decoder
        if decoder is None or decoder.frames:
            return b""
        return decoder.head

    def __repr__(self) -> str:
        state = f"closed: {self._failure}" if self._failure else f"{len(self._pending)} in flight"
        return f"<BrokerConnection {self.address} {state}>"

    # -- reader ------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read frames until the connection ends; route each to its waiting request.

        Never raises for connection problems: it records them, fails the pending requests,
        and returns, so it cannot tear down the owner's task group.
        """
        decoder = self._decoder = FrameDecoder(max_frame_size=self._max_frame_size)
        self._clock = event_loop_clock()
        try:
            with anyio.CancelScope() as scope:
                self._reader_scope = scope
                task_status.started()
                if self._failure is not None:
                    return
                while True:
                    data = await self._stream.receive(_RECEIVE_CHUNK)
                    decoder.receive_data(data)
                    while True:
                        frame = decoder.next_frame()
                        if frame is NEED_DATA:
                            break
                        assert isinstance(frame, bytes)
                        self._route(frame)
        except anyio.EndOfStream:
            self._fail(self._foreign() or "the broker closed the connection")
        except (anyio.BrokenResourceError, OSError) as exc:
            reason = f"the connection broke ({str(exc) or type(exc).__name__})"
            self._fail(self._foreign() or reason, exc)
        except anyio.ClosedResourceError:
            self._fail("the connection was closed")
        except errors.RemoteProtocolError as exc:
            self._fail(self._foreign() or f"the broker sent a bad frame: {exc}", exc)
        finally:
            if self._failure is None:
                # Cancelled from outside (the owner's task group is ending).
                self._fail("the connection was closed")
            # The connection is dead for good: release the socket now, not at garbage collection.
            with anyio.CancelScope(shield=True):
                await self._close_stream()
            self._reader_done.set()

    def _foreign(self) -> str | None:
        # A TLS listener spoken to in plaintext answers with a TLS alert, an HTTP server with
        # a status line: name that, not the "bad frame size" those bytes make as a prefix.
        protocol = identify_protocol(self.unframed_head)
        return f"the peer does not speak Kafka (it answered with {protocol})" if protocol else None

    def _route(self, frame: bytes) -> None:
        if len(frame) < 4:
            raise errors.RemoteProtocolError(
                f"{self.address}: response frame of {len(frame)} bytes has no correlation id"
            )
        corr = int.from_bytes(frame[:4], "big", signed=True)
        pending = self._pending.pop(corr, None)
        if pending is None:
            raise errors.RemoteProtocolError(
                f"{self.address}: response with unknown correlation id {corr}"
            )
        pending.frame = frame
        pending.event.set()

    # -- requests ----------------------------------------------------------------------------

    def _allocate_id(self) -> int:
        # Correlation ids are int32; wrap to 0 and never reuse one still pending.
        for _ in range(len(self._pending) + 1):
            corr = self._next_id
            self._next_id = 0 if corr >= _INT32_MAX else corr + 1
            if corr not in self._pending:
                return corr
        raise AssertionError("unreachable: more pending requests than correlation ids")

    async def request(
        self,
        body: Request[R],
        *,
        api_version: int | None = None,
        timeout: float | None = None,
    ) -> R:
        """Send a request message and return the decoded response message.

        :param body: a request message instance (its class knows its API key).
        :param api_version: a version to use instead of the negotiated one.
        :param timeout: seconds until :class:`~sharecon.errors.RequestTimeoutError`;
            ``None`` waits for the response or the connection's end.
        :raises BrokerDisconnectedError: the connection broke or was closed.
        :raises RequestTimeoutError: no response in time (the connection stays usable).
        :raises IncompatibleBrokerError: the broker does not offer this API.
        :raises RemoteProtocolError: the response body could not be decoded.
        """
        sent: SentRequest[R] | None = None
        # A plain cancel scope, not anyio.fail_after: that is two generator context
        # managers deep, a measurable part of a round trip.
        deadline = math.inf if timeout is None else self._clock() + timeout
        with anyio.CancelScope(deadline=deadline) as scope:
            sent = await self.send(body, api_version=api_version)
            return await sent.wait()
        assert scope.cancelled_caught  # only a cancellation leaves the block without returning
        what = sent.what if sent is not None else f"{self.address} {type(body).__name__}"
        raise errors.RequestTimeoutError(f"{what}: no response within {timeout:g} s")

    async def send(self, body: Request[R], *, api_version: int | None = None) -> SentRequest[R]:
        """Write a request and return at once; :meth:`SentRequest.wait` gets the answer.

        For pipelining: the caller can do other work (decode the previous answer) while
        the broker handles this one. A handle that is never waited on is harmless: its
        response is dropped when it arrives. Errors as :meth:`request`.
        """
        self._raise_if_failed()
        if (
            self._reauth_at is not None or self._reauth_done is not None
        ) and self._reauth_task != anyio.get_current_task().id:
            # While one task re-authenticates (it has cleared _reauth_at), others must wait:
            # the broker closes a connection that sends other requests mid-re-authentication.
            await self._maybe_reauthenticate()
        api_key = body.api_key
        if api_version is None:
            if self.versions is None:
                raise errors.LocalProtocolError(
                    f"{self.address}: no negotiated versions yet; pass api_version"
                )
            api_version = self.versions.version(api_key)
        corr = self._allocate_id()
        frame = encode_request(api_key, api_version, corr, self.client_id, body)
        pending = _Pending(api_key, api_version)
        self._pending[corr] = pending
        await self._send(frame, corr, body, api_version)
        return SentRequest(body, api_version, pending, self, corr)

    def _what(self, body: Request[R], api_version: int, corr: int) -> str:
        return f"{self.address} {type(body).__name__} v{api_version} corr={corr}"

    def _withdraw(self, corr: int, pending: _Pending) -> None:
        # A caller gave up while its frame still waits in the outbox: take the frame out,
        # so the broker never sees a request nobody waits for.
        try:
            i = self._outbox_ids.index(corr)
        except ValueError:
            return  # written already (or being written)
        del self._outbox[i], self._outbox_ids[i]
        if self._pending.get(corr) is pending:
            del self._pending[corr]

    # -- re-authentication (KIP-368) ---------------------------------------------------------

    def set_reauthentication(
        self, at: float, reauthenticate: Callable[[], Awaitable[None]]
    ) -> None:
        """Run ``reauthenticate`` before the first request made at or after time ``at``."""
        self._reauth_at = at
        self._reauth = reauthenticate

    async def _maybe_reauthenticate(self) -> None:
        if self._reauth_done is not None:
            # Another task is re-authenticating: new requests wait for it to finish.
            await self._reauth_done.wait()
            return
        if (
            self._reauth_at is None
            or anyio.current_time() < self._reauth_at
            or self._reauth is None
        ):
            return
        reauthenticate, self._reauth, self._reauth_at = self._reauth, None, None
        self._reauth_task = anyio.get_current_task().id
        self._reauth_done = anyio.Event()
        try:
            logger.debug("%s: re-authenticating", self.address)
            await reauthenticate()
        except errors.KafkaError as exc:
            # Not re-authenticated (no token from the provider, or the broker refused it):
            # the broker ends this session at its expiry anyway, and an exchange cut short
            # leaves the wire in an unknown state. Drop the connection now; the next request
            # reconnects and logs in afresh through the cluster's reconnect backoff.
            self._fail(f"re-authentication failed: {exc}", exc)
            if exc.retriable:
                raise self._error() from exc
            raise
        finally:
            self._reauth_done.set()
            self._reauth_done = None
            self._reauth_task = None

    async def _send(
        self, frame: bytes, corr: int, body: Request[Response], api_version: int
    ) -> None:
        self._raise_if_failed()
        self._outbox.append(frame)
        self._outbox_ids.append(corr)
        if self._writing:
            # The task writing now takes this frame in its next write.
            return
        self._writing = True
        try:
            while self._outbox:
                frames, self._outbox, self._outbox_ids = self._outbox, [], []
                data = frames[0] if len(frames) == 1 else b"".join(frames)
                try:
                    await self._stream.send(data)
                except BaseException as exc:
                    what = self._what(body, api_version, corr)
                    reason = (
                        f"interrupted while writing {what}"
                        if isinstance(exc, anyio.get_cancelled_exc_class())
                        else f"writing {what} failed ({str(exc) or type(exc).__name__})"
                    )
                    self._fail(reason, exc)
                    with anyio.CancelScope(shield=True):
                        await self._close_stream()
                    if isinstance(
                        exc, (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
                    ):
                        raise self._error() from exc
                    raise
                self._raise_if_failed()
        finally:
            self._writing = False

    # -- failure and close -------------------------------------------------------------------

    def _error(self) -> errors.BrokerDisconnectedError:
        # A fresh instance per raiser: one exception object must not collect many tracebacks.
        err = errors.BrokerDisconnectedError(f"{self.address}: {self._failure}")
        err.__cause__ = self._failure_cause
        return err

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._error()

    def _fail(self, reason: str, cause: BaseException | None = None) -> None:
        if self._failure is not None:
            return
        self._failure = reason
        self._failure_cause = cause
        if self._pending:
            logger.info(
                "%s: failing %d pending requests: %s", self.address, len(self._pending), reason
            )
        else:
            logger.debug("%s: %s", self.address, reason)
        pending, self._pending = self._pending, {}
        self._outbox, self._outbox_ids = [], []
        for entry in pending.values():
            entry.error = self._error()
            entry.event.set()
        if self._reader_scope is not None:
            self._reader_scope.cancel()

    async def _close_stream(self) -> None:
        with anyio.move_on_after(1.0):
            try:
                await self._stream.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    async def wait_closed(self) -> None:
        """Return once the connection has failed or been closed (and its reader ended)."""
        await self._reader_done.wait()

    async def aclose(self, timeout: float = 5.0) -> None:
        """Close the connection: pending requests fail, the reader ends. Shielded and bounded."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
            self._fail("the connection was closed by the client")
            await self._close_stream()
            if self._reader_scope is not None:
                await self._reader_done.wait()
