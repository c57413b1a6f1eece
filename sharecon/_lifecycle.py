"""The one lifecycle of sharecon's clients (ShareConsumer, Producer, Admin), and its errors.

Rules of this module:

1. A client is ``new`` until :meth:`start` (or ``async with``), ``running`` from then,
   and ``closed`` once closed, or once a start failed: it never starts twice.
2. Using a client that is not running raises :class:`~sharecon.errors.ClientNotStartedError`
   (before start) or :class:`~sharecon.errors.ClientClosedError` (after close); a second
   start raises :class:`~sharecon.errors.ClientStateError`; closing is idempotent.
"""

from __future__ import annotations

from typing import Literal

from sharecon import errors

__all__ = ["Lifecycle"]

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
