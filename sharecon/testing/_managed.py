"""One context-manager base for the test kit's servers: ``with`` and ``async with`` alike.

Rules of this module:

1. ``with`` enters by :meth:`Managed._enter` and exits by :meth:`Managed._exit`; for a
   :class:`Server` those are ``start()`` and ``stop()``.
2. ``async with`` runs the same blocking calls in a worker thread, so an event loop keeps
   running meanwhile. A start that fails or is cancelled is still stopped before the error
   propagates (a half-started server leaves nothing behind); stopping is shielded from
   cancellation. ``_exit`` must be idempotent.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self

__all__ = ["Managed", "Server"]


class Managed(abc.ABC):
    """A resource of the test kit usable with ``with`` and ``async with`` (rules 1-2)."""

    __slots__ = ()

    def _enter(self) -> object:
        """What entering does (by default nothing: the resource is open already)."""
        return None

    @abc.abstractmethod
    def _exit(self) -> None:
        """What leaving does; idempotent."""

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exit()

    async def __aenter__(self) -> Self:
        try:
            await anyio.to_thread.run_sync(self._enter)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._exit)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._exit)


class Server(Managed):
    """A server the test kit starts and stops: entering starts it, leaving stops it."""

    __slots__ = ()

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the server and return it once it serves."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server and remove what it left behind; idempotent."""

    def _enter(self) -> object:
        return self.start()

    def _exit(self) -> None:
        self.stop()
