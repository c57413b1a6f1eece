"""What the blocking Producer and Admin share: one async client on one loop thread,
started by ``with`` (or :meth:`start`) and stopped by leaving it (or :meth:`close`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sharecon import errors
from sharecon.sync import _thread
from sharecon.sync._thread import Backend, EngineThread, SigtermGuard

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from typing_extensions import Self

__all__ = ["BlockingClient"]

C = TypeVar("C", bound="AbstractAsyncContextManager[Any]")


class BlockingClient(Generic[C]):
    """A blocking client around the async client ``engine`` (its lifecycle only)."""

    _name = "client"

    def __init__(self, engine: C, backend: Backend, handle_sigterm: bool) -> None:
        self._thread = EngineThread(self._name, backend)
        self._engine = engine
        self._forks = _thread.fork_generation()
        self._handle_sigterm = bool(handle_sigterm)
        self._guarded = False
        self._closed = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the event-loop thread and the client in it (what entering ``with`` does).

        :raises ClientStateError: started before (``ClientClosedError`` after a close).
        :raises ForkedClientError: in a child process forked after the client was made.
        """
        self._thread.check_fork()
        if self._closed:
            raise errors.ClientClosedError(f"sharecon.sync.{self._name} was closed; make a new one")
        if self._thread.running:
            raise errors.ClientStateError(f"sharecon.sync.{self._name} is started already")
        engine: Any = self._engine
        try:
            self._thread.open(engine.start, lambda _timeout: engine.aclose())
        except BaseException:
            self._closed = True
            raise
        if self._handle_sigterm:
            self._guarded = SigtermGuard.acquire()

    def close(self) -> None:
        """Close the client (what leaving ``with`` does) and stop its thread. Closing twice
        does nothing; so does closing in a child process after ``fork()``."""
        if self._closed or self._thread.forked():
            self._closed = True
            return
        self._closed = True
        try:
            self._thread.shut(None)
        finally:
            if self._guarded:
                self._guarded = False
                SigtermGuard.release()

    def _running(self) -> EngineThread:
        thread = self._thread
        if _thread._forks != self._forks:
            raise thread.fork_error()
        if self._closed:
            raise errors.ClientClosedError(f"sharecon.sync.{self._name} is closed; make a new one")
        if not thread.running:
            raise errors.ClientNotStartedError(
                f"sharecon.sync.{self._name} is not started: use it in a `with` block or call "
                "start()"
            )
        return thread
