"""The event-loop thread behind one blocking client: start, calls with deadlines, stop.

Each blocking client owns one :class:`EngineThread`: an anyio event loop (asyncio by
default, or trio) on a thread of its own, in which the async client runs unchanged. The
blocking side talks to it in two ways:

- :meth:`EngineThread.call` runs a coroutine function there as a task and waits for it,
  with a deadline; Ctrl-C (or any exception) while waiting cancels the task;
- :meth:`EngineThread.call_soon` / :meth:`EngineThread.run_sync` run a plain function there
  between two steps of the loop, without making a task (the cheap path, for answers).

Exceptions raised in the loop reach the caller's thread as the same objects, so their
types (and ``__cause__``) are kept.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal, start_blocking_portal

from sharecon import errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractContextManager
    from types import FrameType

__all__ = ["Backend", "EngineThread", "SigtermGuard"]

T = TypeVar("T")

#: Seconds between two looks at whether the loop stopped, while a cross-thread call waits
#: for a callback that a loop stopped by ``close()`` in another thread would never run.
_STOP_CHECK = 0.05

Backend = Literal["asyncio", "trio"]

#: How many times this process has forked from the one that imported sharecon.sync: a
#: client remembers the count it was made under, so one read tells a child from its parent
#: (cheaper than os.getpid() on every call, which is a system call on current glibc).
_forks = 0


def _after_fork_in_child() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def fork_generation() -> int:
    """The number of forks between the importing process and this one."""
    return _forks


class _Stop:
    """How the blocking side tells a client's owning task to close it."""

    __slots__ = ("event", "timeout")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.timeout: float | None = None


async def _own(
    start: Callable[[], Awaitable[object]],
    close: Callable[[float | None], Awaitable[object]],
    *,
    task_status: anyio.abc.TaskStatus[_Stop],
) -> None:
    """The task that owns one client: starts it, waits for the word, closes it (also when
    the loop is torn down under it)."""
    stop = _Stop()
    await start()
    try:
        task_status.started(stop)
        await stop.event.wait()
    finally:
        # At the cancel-scope level of start() (the clients require it); their close is
        # shielded and bounded by itself.
        await close(stop.timeout)


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0
    ):
        raise errors.ConfigError(f"timeout must be None or >= 0 seconds, not {timeout!r}")


def _name_library(backend: str) -> None:
    try:
        import sniffio
    except ImportError:  # pragma: no cover - anyio then assumes asyncio, which is right
        return
    sniffio.thread_local.name = backend


class EngineThread:
    """One event loop on a background thread, for one blocking client.

    :param client: the client's name, for error messages (``"ShareConsumer"``).
    :param backend: ``"asyncio"`` or ``"trio"``.
    """

    __slots__ = (
        "_backend",
        "_client",
        "_finished",
        "_forks",
        "_owner",
        "_pid",
        "_portal",
        "_portal_cm",
        "_soon",
        "_stop",
        "ident",
    )

    def __init__(self, client: str, backend: Backend) -> None:
        if backend not in ("asyncio", "trio"):
            raise errors.ConfigError(f"backend must be 'asyncio' or 'trio', not {backend!r}")
        self._client = client
        self._backend = backend
        self._forks = _forks
        self._pid = os.getpid()
        self._portal: BlockingPortal | None = None
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._soon: Callable[[Callable[[], object]], object] | None = None
        self._owner: concurrent.futures.Future[None] | None = None
        self._stop: _Stop | None = None
        #: Set once the loop has stopped and its thread was joined (nothing runs there).
        self._finished = threading.Event()
        #: The loop thread's ``threading.get_ident()`` (0 until started).
        self.ident = 0

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> BlockingPortal:
        """Start the loop thread; return its portal."""
        self._finished.clear()
        cm = start_blocking_portal(self._backend, name=f"sharecon-{self._client}")
        portal = cm.__enter__()
        self._portal_cm = cm
        self._portal = portal
        self.ident = portal.call(threading.get_ident)
        # Answers run as plain callbacks between the loop's steps (call_soon), outside any
        # task, where sniffio cannot tell the library by itself: name it for the thread.
        portal.call(_name_library, self._backend)
        if self._backend == "trio":
            import trio

            token = portal.call(trio.lowlevel.current_trio_token)
            self._soon = token.run_sync_soon
        else:
            import asyncio

            loop = portal.call(asyncio.get_running_loop)
            self._soon = loop.call_soon_threadsafe
        return portal

    def open(
        self,
        start: Callable[[], Awaitable[object]],
        close: Callable[[float | None], Awaitable[object]],
    ) -> None:
        """Start the loop thread and, in a task of its own, the client (``start()``); the
        client is closed by :meth:`shut`, in the same task (the async clients' rule)."""
        portal = self.start()
        try:
            self._owner, self._stop = portal.start_task(_own, start, close)
        except BaseException:
            self.stop()
            raise

    def shut(self, timeout: float | None) -> None:
        """Close the client (``close(timeout)`` in its owning task), then stop the loop."""
        owner, stop = self._owner, self._stop
        self._owner = self._stop = None
        try:
            if owner is not None and stop is not None and self._portal is not None:
                stop.timeout = timeout
                self._portal.call(stop.event.set)
                owner.result()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the loop and join its thread (the client must be closed already)."""
        cm, self._portal_cm = self._portal_cm, None
        self._portal = None
        self._soon = None
        try:
            if cm is not None:
                cm.__exit__(None, None, None)
        finally:
            self._finished.set()

    @property
    def running(self) -> bool:
        """Whether the loop thread is up."""
        return self._portal is not None

    def forked(self) -> bool:
        """Whether this is a child process forked after the client was made."""
        return _forks != self._forks

    def check_fork(self) -> None:
        """:raises ForkedClientError: used in a child process after ``fork()``."""
        if _forks != self._forks:
            raise self.fork_error()

    def fork_error(self) -> errors.ForkedClientError:
        """The error for a client used in a forked child."""
        return errors.ForkedClientError(
            f"sharecon.sync.{self._client} was created in process {self._pid} and cannot be "
            f"used in process {os.getpid()}, forked from it: its event-loop thread and "
            "connections do not exist in a child. Create a new client after fork() (e.g. in "
            "a worker's post-fork hook)"
        )

    # -- calls --------------------------------------------------------------------------

    def _portal_or_raise(self) -> BlockingPortal:
        portal = self._portal
        if portal is None:
            self.check_fork()
            raise errors.ClientClosedError(
                f"sharecon.sync.{self._client} is closed (or was never started): use it in a "
                "`with` block, or make a new one"
            )
        return portal

    def submit(self, func: Callable[..., Awaitable[T]], *args: Any) -> concurrent.futures.Future[T]:
        """Start ``func(*args)`` as a task in the loop; return its future at once."""
        return self._portal_or_raise().start_task_soon(func, *args)

    def call(
        self,
        func: Callable[..., Awaitable[T]],
        *args: Any,
        timeout: float | None = None,
        what: str = "",
    ) -> T:
        """Run ``func(*args)`` in the loop and wait for its result, at most ``timeout``
        seconds (``None``: no bound; the coroutine's own deadlines apply).

        :raises KafkaTimeoutError: no result within ``timeout`` (the task is cancelled).
        """
        self.check_fork()
        _check_timeout(timeout)
        return self.wait(self.submit(func, *args), timeout, what or getattr(func, "__name__", ""))

    def wait(self, future: concurrent.futures.Future[T], timeout: float | None, what: str) -> T:
        """Wait for ``future`` (a task in the loop) at most ``timeout`` seconds; cancel it
        on timeout, and on anything raised while waiting (Ctrl-C, SIGTERM)."""
        try:
            _check_timeout(timeout)
            done, _ = concurrent.futures.wait((future,), timeout)
        except BaseException:
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise errors.KafkaTimeoutError(
                f"sharecon.sync.{self._client}.{what}: no result within {timeout:g} s"
            )
        return future.result()

    def call_soon(self, func: Callable[[], object]) -> None:
        """Run ``func()`` in the loop thread soon, without waiting (fire and forget).

        :raises ClientClosedError: the loop stopped (``close()``, maybe in another thread).
        """
        soon = self._soon
        if soon is None:
            self._portal_or_raise()
            return
        self._schedule(soon, func)

    def _schedule(
        self, soon: Callable[[Callable[[], object]], object], func: Callable[[], object]
    ) -> None:
        # ``soon`` was read before a close() in another thread may have stopped the loop:
        # asyncio then says "Event loop is closed", trio RunFinishedError (RuntimeErrors
        # both). The caller hears what happened: the client was closed.
        try:
            soon(func)
        except RuntimeError as exc:
            if self._portal is not None and not self._finished.is_set():
                raise
            raise self._closed_error() from exc

    def _closed_error(self) -> errors.ClientClosedError:
        return errors.ClientClosedError(
            f"sharecon.sync.{self._client} was closed (in another thread) during the call"
        )

    def run_sync(self, func: Callable[..., T], *args: Any) -> T:
        """Run the plain function ``func(*args)`` in the loop thread and return its result
        (its exception, of its own type), without making a task: for quick calls only."""
        if threading.get_ident() == self.ident:
            return func(*args)
        self.check_fork()
        soon = self._soon
        if soon is None:
            self._portal_or_raise()
            raise AssertionError("unreachable")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(func(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self._schedule(soon, run)
        # In slices: a close() in another thread may stop the loop before it runs ``run``,
        # and nothing would ever complete the future (every wait has a deadline).
        while True:
            try:
                return future.result(_STOP_CHECK)
            except concurrent.futures.TimeoutError:
                if future.done():
                    return future.result()  # done meanwhile, or ``func`` raised it
                if self._finished.is_set():
                    raise self._closed_error() from None


class SigtermGuard:
    """While at least one blocking client is open in the main thread, SIGTERM raises
    ``SystemExit(143)`` in the main thread, so ``with`` blocks unwind and clients close
    (releasing held records) as on Ctrl-C. Installed only where SIGTERM still has its
    default action: an application's own handler is left alone."""

    _lock = threading.Lock()
    _users = 0
    _installed = False

    @classmethod
    def acquire(cls) -> bool:
        """Count one client in; install the handler if this is the first. Returns whether
        this client counts (it must call :meth:`release` then)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        with cls._lock:
            if cls._users == 0 and not cls._installed:
                try:
                    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                        signal.signal(signal.SIGTERM, cls._on_sigterm)
                        cls._installed = True
                except (ValueError, OSError):  # not the main interpreter, or no SIGTERM
                    cls._installed = False
            cls._users += 1
        return True

    @classmethod
    def release(cls) -> None:
        """Count one client out; restore the default action after the last."""
        with cls._lock:
            cls._users -= 1
            # Only the main thread may set handlers: a client closed in another thread
            # leaves ours in place, for the next close in the main thread to restore.
            if (
                cls._users == 0
                and cls._installed
                and threading.current_thread() is threading.main_thread()
            ):
                cls._installed = False
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    @staticmethod
    def _on_sigterm(signum: int, frame: FrameType | None) -> None:
        # Once: a second SIGTERM during the clean close is ignored (a supervisor's SIGKILL
        # after its grace period still ends the process).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)
