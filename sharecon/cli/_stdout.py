"""Noticing that the reader of stdout went away (``sharecon consume ... | head -2``).

A write to a pipe whose reader has exited fails (EPIPE, :class:`BrokenPipeError`), but a
command that is waiting for records writes nothing, so it would wait on with nobody left
to read. :func:`reader_gone` asks the operating system instead, without writing.
"""

from __future__ import annotations

import select
import sys
from typing import IO

__all__ = ["reader_gone"]


def reader_gone(stream: IO[str] | None = None) -> bool:
    """True when ``stream`` (default stdout) is a pipe or socket whose reader has closed it.

    Never blocks. False for files and terminals, and where the check is not available
    (no ``select.poll``, e.g. on Windows, or a stream without a file descriptor).
    """
    stream = sys.stdout if stream is None else stream
    poll = getattr(select, "poll", None)
    if poll is None:
        return False
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # closed, or not backed by a file descriptor
        return False
    poller = poll()
    # No events asked for: poll() still reports POLLERR (a pipe without reader) and
    # POLLHUP (a socket whose peer hung up); a file or a terminal reports neither.
    poller.register(fd, 0)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
