"""The event loop's clock, looked up once instead of per read.

Rules of this module:

1. :func:`event_loop_clock` returns a callable reading the same clock as
   :func:`anyio.current_time` (deadlines made with either compare): the running asyncio
   loop's bound ``time`` method, or :func:`trio.current_time` (so a trio ``MockClock``
   in tests still rules). Any other backend gets :func:`anyio.current_time` itself.
   A loop whose ``time`` is asyncio's own (``time.monotonic()``, in Python) gets
   :func:`time.monotonic` itself: the same clock without a Python frame per read.
   asyncio is imported where it is asked about, not at this module's import: under
   asyncio it is loaded already, and a trio program never needs it (docs/performance.md).
2. Why: :func:`anyio.current_time` finds the backend on every call (sniffio, a dict,
   a class method, then ``get_running_loop()``): about 1 us, which the consumer paid per
   record to check lock deadlines. The bound method costs a sixth of that.
3. Call it inside the event loop that will read the clock (the asyncio loop is bound),
   once per client, when the client starts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["event_loop_clock"]


def _backend_name() -> str | None:
    # As anyio decides it: sniffio when installed (trio always brings it), else asyncio
    # if a loop runs.
    try:
        import sniffio
    except ImportError:  # pragma: no cover - sniffio comes with trio and most installs
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None
        return "asyncio"
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


def event_loop_clock() -> Callable[[], float]:
    """The running event loop's clock as a cheap callable (rules 1-3).

    :raises RuntimeError: no event loop runs in this thread.
    """
    name = _backend_name()
    if name == "asyncio":
        import asyncio

        loop = asyncio.get_running_loop()
        if type(loop).time is asyncio.BaseEventLoop.time:
            return time.monotonic
        return loop.time
    if name == "trio":
        import trio

        return trio.current_time
    if name is None:
        raise RuntimeError("event_loop_clock() needs a running event loop")
    return anyio.current_time
