"""Noticing that the reader of stdout went away (``sharecon consume ... | head -2``), and
how much of what was written into a pipe its reader has taken out.

A write to a pipe whose reader has exited fails (EPIPE, :class:`BrokenPipeError`), but a
command that is waiting for records writes nothing, so it would wait on with nobody left
to read. :func:`reader_gone` asks the operating system instead, without writing.
"""

from __future__ import annotations

import os
import select
import stat
import struct
import sys
from typing import IO

_FIONREAD: int | None
try:  # POSIX only
    import fcntl
    import termios

    _FIONREAD = termios.FIONREAD
except ImportError:  # pragma: no cover - Windows
    _FIONREAD = None

__all__ = ["PipeProgress", "reader_gone"]


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


class PipeProgress:
    """How many of the bytes written into a pipe its reader has read (Linux, macOS).

    Bytes written into a pipe sit in its buffer (64 KiB and more) until the reader reads
    them; if the reader exits first (``| head -1``), they were never read, though the write
    succeeded. The buffer's fill level (``FIONREAD``, which works on the write end) tells
    the two apart. :attr:`tracking` is False for anything but a pipe (a file, a terminal),
    where a successful write is as good as read.
    """

    __slots__ = ("_fd", "tracking", "written")

    def __init__(self, stream: IO[str] | IO[bytes]) -> None:
        self.written = 0
        self._fd = -1
        self.tracking = False
        if _FIONREAD is None:
            return
        try:
            fd = stream.fileno()
            self.tracking = stat.S_ISFIFO(os.fstat(fd).st_mode)
            self._fd = fd
            if self.tracking:
                self.unread()  # FIONREAD must work here, or nothing is tracked
        except (OSError, ValueError, AttributeError):
            self.tracking = False

    def unread(self) -> int:
        """Bytes written that are still in the pipe's buffer."""
        assert _FIONREAD is not None
        data = fcntl.ioctl(self._fd, _FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", data)[0])

    def read_upto(self) -> int:
        """Position (in bytes written) up to which the reader has read everything."""
        if not self.tracking:
            return self.written
        return self.written - self.unread()
