"""The one lifecycle and runtime of sharecon's clients (ShareConsumer, Producer, Admin,
and the dead-letter router's pair of them), and the errors of misuse.

Rules of this module:

1. A client is ``new`` until :meth:`ClientRuntime.start` (or ``async with``), ``running``
   from then, and ``closed`` once closed, or once a start failed: it never starts twice.
2. Using a client that is not running raises :class:`~sharecon.errors.ClientNotStartedError`
   (before start) or :class:`~sharecon.errors.ClientClosedError` (after close); a second
   start raises :class:`~sharecon.errors.ClientStateError`; closing is idempotent.
3. A running client owns an exit stack holding one anyio task group, and one
   :class:`~sharecon._net.cluster.Cluster` whose connection readers run in that group. A
   start that fails (or is cancelled) undoes all of it before the error propagates, so the
   caller gets the error itself, never an ``ExceptionGroup`` around it.
4. Shutdown is shielded from cancellation and bounded: an optional farewell (last requests
   to the cluster) runs in a task group of the closing task, so it can reconnect if a
   connection is gone; then the cluster closes, the group is cancelled and exited. The
   farewell and the closing together never take longer than the timeout given; the group
   is exited in the scope it was entered in (anyio requires it).
5. A client whose ``enable_metrics_push`` is on hands its metrics to :meth:`ClientRuntime.push_metrics`
   once started: the KIP-714 pusher (:mod:`sharecon._telemetry`) runs in the client's task
   group, and shutdown sends its terminating push first, inside the bounded farewell.
6. Clients that another task hosts (the dead-letter router's producer and admin, run in a
   task of the consumer's group) are entered and exited by :class:`Hosting`, which
   started/stopped handshake the host and its owner share.
7. ``start()`` and the close run in one task (the client's task group is entered by the one
   and exited by the other, and anyio allows that only in the task that entered it). A
   ``start()`` that is a task of its own (``tg.start_soon(client.start)``), whose task ends
   holding the group, is refused before anything is entered; a close from another task
   than the start's is refused too, and the client keeps running, to be closed from the
   task that started it. Both raise :class:`~sharecon.errors.ClientStateError` naming the
   rule; both were anyio's "cancel scope that isn't the current task's" before.
8. The client's background tasks (fetch loops, heartbeats, connection readers) run in a
   group shielded from the cancellation of the scopes around the client: only the
   client's shutdown cancels them. An application whose own scope is cancelled (a
   timeout, a task group cancelled at SIGTERM) leaves ``async with`` while they still
   run, so the close's farewell goes out through them: a consumer's pending answers reach
   the broker. (Unshielded, that cancellation ended the connections first, and with them
   the share sessions: every record handled since the last answers went out came back.)
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Literal

import anyio

from sharecon import errors
from sharecon._telemetry import TelemetryPusher

if TYPE_CHECKING:
    import logging
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
    from types import FrameType

    from anyio.abc import TaskGroup, TaskStatus

    from sharecon._net.cluster import Cluster
    from sharecon.protocol.otlp import MetricPoint

__all__ = ["ClientRuntime", "Hosting", "Lifecycle"]

State = Literal["new", "running", "closed"]


class Lifecycle:
    """The state of one client, and the errors its misuse gets (rules 1-2)."""

    __slots__ = ("name", "state")

    def __init__(self, name: str) -> None:
        #: The client's class name, for messages.
        self.name = name
        self.state: State = "new"

    def begin_start(self) -> None:
        """Mark the client running at the start of ``start()``.

        :raises ClientClosedError: it was closed (or a start failed).
        :raises ClientStateError: it was started already.
        """
        if self.state == "closed":
            raise self.error()
        if self.state == "running":
            raise errors.ClientStateError(
                f"{self.name}.start() was already called (or it was entered with `async with`); "
                "start a client once"
            )
        self.state = "running"

    def begin_close(self) -> bool:
        """Mark the client closed; ``False`` if it already was (close again does nothing)."""
        if self.state == "closed":
            return False
        self.state = "closed"
        return True

    def error(self) -> errors.ClientStateError:
        """The error for using the client now that it is not running."""
        if self.state == "new":
            return errors.ClientNotStartedError(
                f"the {self.name} is not started: use `async with {self.name}(...)` or "
                f"`await {self.name.lower()}.start()` first"
            )
        if self.state == "closed":
            return errors.ClientClosedError(
                f"the {self.name} is closed; make a new {self.name} to use it again"
            )
        return errors.ClientStateError(f"the {self.name} is {self.state}")  # pragma: no cover


class ClientRuntime:
    """What one client owns while it runs: exit stack, task group, cluster (rules 1-4).

    ::

        runtime = ClientRuntime("Admin")
        await runtime.start(lambda tg: Cluster(bootstrap, config, tg))
        await runtime.cluster.request_any(...)
        if runtime.begin_close():
            await runtime.shutdown()
    """

    __slots__ = ("life", "_stack", "_tg", "current", "_on_close", "telemetry", "_owner")

    def __init__(self, name: str, *, on_close: Callable[[], None] | None = None) -> None:
        """:param name: the client's class name, for error messages.
        :param on_close: called first thing in every shutdown, before the farewell (the
            producer fails what it still holds there); it must not raise."""
        self.life = Lifecycle(name)
        self._stack: contextlib.AsyncExitStack | None = None
        self._tg: TaskGroup | None = None
        #: The cluster while held, else ``None``: for a hot path that checks it per call
        #: (:attr:`cluster` raises the state error instead).
        self.current: Cluster | None = None
        self._on_close = on_close
        #: The KIP-714 pusher once :meth:`push_metrics` started it (rule 5).
        self.telemetry: TelemetryPusher | None = None
        # The id of the task that started the client: the only one that can close it (rule 7).
        self._owner: int | None = None

    @property
    def state(self) -> State:
        """``new``, ``running`` or ``closed`` (rule 1)."""
        return self.life.state

    @property
    def held(self) -> bool:
        """Whether the task group and cluster are still held (until :meth:`shutdown`)."""
        return self._stack is not None

    @property
    def cluster(self) -> Cluster:
        """The cluster, from the start of :meth:`start` until :meth:`shutdown`.

        :raises ClientNotStartedError: before :meth:`start`.
        :raises ClientClosedError: after shutdown.
        """
        cluster = self.current
        if cluster is None:
            raise self.life.error()
        return cluster

    @property
    def task_group(self) -> TaskGroup:
        """The client's task group, for its background tasks (errors as :attr:`cluster`)."""
        if self._tg is None:
            raise self.life.error()
        return self._tg

    def error(self) -> errors.ClientStateError:
        """The error for using the client now that it is not running (rule 2)."""
        return self.life.error()

    @contextlib.asynccontextmanager
    async def starting(
        self, make_cluster: Callable[[TaskGroup], Cluster]
    ) -> AsyncIterator[tuple[Cluster, TaskGroup]]:
        """Enter the task group, make the cluster and connect it; the body sets the client up.

        Any error in either (a cancellation too) shuts down what was entered, marks the
        client closed and propagates unwrapped (rule 3).

        :raises ClientStateError: started already, or ``start()`` runs as a task of its own
            (rule 7); :class:`ClientClosedError` once closed.
        """
        task = anyio.get_current_task()
        if self.life.state == "new" and _is_task_of_its_own(task.coro, self.life.name):
            raise errors.ClientStateError(_own_task_message(self.life.name))
        self.life.begin_start()
        self._owner = task.id
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        self._stack = stack
        try:
            host = await stack.enter_async_context(anyio.create_task_group())
            tg = await host.start(_shielded_group)  # rule 8
            self._tg = tg
            cluster = make_cluster(tg)
            self.current = cluster
            await cluster.connect()
            yield cluster, tg
        except BaseException:
            self.life.begin_close()
            await self.shutdown()
            raise

    async def start(
        self,
        make_cluster: Callable[[TaskGroup], Cluster],
        setup: Callable[[Cluster, TaskGroup], Awaitable[None]] | None = None,
    ) -> None:
        """:meth:`starting`, with ``setup`` as its body."""
        async with self.starting(make_cluster) as (cluster, tg):
            if setup is not None:
                await setup(cluster, tg)

    def begin_close(self) -> bool:
        """Mark the client closed; ``False`` if it already was (rule 2).

        :raises ClientStateError: called in another task than the one that started the
            client, which stays running (rule 7): close it from that task.
        """
        if self._stack is not None and self._owner != anyio.get_current_task().id:
            raise errors.ClientStateError(
                f"{self.life.name} closed in another task than the one that started it: "
                "start() and aclose() must run in the same task, as `async with` does. "
                "It is still running: close it from the task that started it"
            )
        return self.life.begin_close()

    def push_metrics(
        self,
        collect: Callable[[], list[MetricPoint]],
        *,
        resource: Mapping[str, str],
        request_timeout: float,
        logger: logging.Logger,
    ) -> TelemetryPusher:
        """Push ``collect()``'s metrics to brokers that ask for them, in the client's task
        group, until shutdown (rule 5); call it once the client has started.

        :raises ClientStateError: the client is not running.
        """
        pusher = TelemetryPusher(
            self.cluster, collect, resource=resource, request_timeout=request_timeout, logger=logger
        )
        self.telemetry = pusher
        self.task_group.start_soon(pusher.run, name="sharecon telemetry")
        return pusher

    async def shutdown(
        self,
        farewell: Callable[[Cluster], Awaitable[None]] | None = None,
        timeout: float = 5.0,
    ) -> bool:
        """Say farewell, close the cluster, cancel and exit the task group (rule 4).

        Shielded, and the farewell plus the closing bounded by ``timeout`` seconds. Does
        nothing when nothing is held (never started, or shut down already).

        :returns: ``True`` if the timeout cut the farewell or the closing short.
        """
        stack, self._stack = self._stack, None
        if stack is None:
            return False
        cluster, tg = self.current, self._tg
        try:
            if self._on_close is not None:
                self._on_close()
            timed_out = False
            telemetry = self.telemetry
            if telemetry is not None and telemetry.plan.subscription is None:
                telemetry = None  # never subscribed: no last push to send
            if cluster is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(timeout) as scope:
                    if farewell is None and telemetry is None:
                        await cluster.aclose()
                    else:
                        async with anyio.create_task_group() as last:
                            cluster.rebind(last)
                            try:
                                if telemetry is not None:
                                    # Bounded, never raises; before the client's own goodbye.
                                    await telemetry.terminate()
                                if farewell is not None:
                                    await farewell(cluster)
                            finally:
                                await cluster.aclose()
                timed_out = scope.cancelled_caught
        finally:
            if tg is not None:
                # The background tasks (and connection readers) end here; their cleanup
                # is theirs to bound.
                tg.cancel_scope.cancel()
            self.current = self._tg = None
            # No body exception goes into the group (it would come back in an
            # ExceptionGroup), and no scope opened after it wraps its exit.
            await stack.aclose()
        return timed_out


# The modules whose coroutines wrap a task's function (anyio's TaskHandle in some versions).
_RUNNERS = ("anyio.", "trio.", "asyncio.")


def _is_task_of_its_own(root: object, client: str) -> bool:
    """Whether the running ``<client>.start()`` is its task's function (``root`` is the
    task's coroutine): the task then ends as soon as the client started, holding its task
    group (rule 7). Only anyio's own wrappers may stand between the two."""
    root_frame = getattr(root, "cr_frame", None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not _is_start_of(frame, client):
        frame = frame.f_back
    if frame is None or root_frame is None:
        return False
    while frame is not root_frame:
        frame = frame.f_back
        if frame is None or not frame.f_globals.get("__name__", "").startswith(_RUNNERS):
            return False
    return True


async def _shielded_group(*, task_status: TaskStatus[TaskGroup]) -> None:
    """Host the client's background group, shielded from outer cancellation (rule 8),
    until its own cancel scope is cancelled (at shutdown)."""
    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            task_status.started(tg)
            await anyio.sleep_forever()


def _is_start_of(frame: FrameType, client: str) -> bool:
    if frame.f_code.co_name != "start":
        return False
    owner = frame.f_locals.get("self")
    return owner is not None and any(c.__name__ == client for c in type(owner).__mro__)


def _own_task_message(client: str) -> str:
    return (
        f"{client}.start() runs as a task of its own (e.g. tg.start_soon(client.start)): "
        "that task would end holding the client's task group. start() and aclose() must run "
        f"in the same task: use `async with {client}(...)`, or await start() in the task "
        "that will close the client"
    )


class Hosting:
    """Clients entered and run by a task of another's task group, until :meth:`stop` (rule 6).

    ::

        hosting = Hosting()
        await tg.start(hosting.run, [Producer(...), Admin(...)], on_ready)
        ...
        await hosting.stop()
    """

    __slots__ = ("_stop", "_stopped", "started")

    def __init__(self) -> None:
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        #: Whether every client was entered (and ``on_ready`` called).
        self.started = False

    async def run(
        self,
        clients: list[contextlib.AbstractAsyncContextManager[Any]],
        on_ready: Callable[[list[Any]], None],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Enter ``clients`` in order, hand what they entered to ``on_ready``, report started,
        and hold them until :meth:`stop`; they are exited in reverse order."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                entered = [await stack.enter_async_context(c) for c in clients]
                on_ready(entered)
                self.started = True
                task_status.started()
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        """Let the clients be exited, and wait until they are (bounded by the caller)."""
        self._stop.set()
        if self.started:
            await self._stopped.wait()
