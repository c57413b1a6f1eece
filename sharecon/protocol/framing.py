"""Sans-I/O framing: a Kafka frame is an int32 size followed by that many bytes.

:class:`FrameDecoder` splits a byte stream into frames with no I/O of its own; the
connection layer feeds it whatever the socket returned and asks for complete frames. A
declared size is checked against ``max_frame_size`` as soon as its four bytes arrive,
before anything is buffered for it, so a hostile or corrupt size cannot make us allocate.

The decoder also keeps the first bytes the peer ever sent (:attr:`FrameDecoder.head`), so a
peer that is not a Kafka broker at all (a TLS listener spoken to in plaintext, an HTTP
server) can be named by :func:`identify_protocol` instead of reported as a bad frame size.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from sharecon.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "NEED_DATA",
    "FrameDecoder",
    "NeedData",
    "encode_frame",
    "identify_protocol",
]

#: Default cap on one incoming frame (the broker's own default request cap is 100 MiB).
DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024

_SIZE: Final = struct.Struct(">i")
# Bytes of the stream's start kept for identify_protocol() and messages.
_HEAD: Final = 8
# TLS record content types alert (0x15) and handshake (0x16), then the 0x03 major version.
# As a Kafka size prefix these read as 350+ MB, which is why they surface as "frame size".
_TLS_RECORD_TYPES: Final = frozenset({0x15, 0x16})


class NeedData(enum.Enum):
    """Returned by :meth:`FrameDecoder.next_frame` when no complete frame is buffered."""

    NEED_DATA = "NEED_DATA"


#: The one :class:`NeedData` value.
NEED_DATA: Final = NeedData.NEED_DATA


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its int32 size.

    :raises LocalProtocolError: if the payload does not fit in an int32 size.
    """
    if len(payload) > 0x7FFFFFFF:
        raise LocalProtocolError(f"frame of {len(payload)} bytes exceeds the int32 size")
    return _SIZE.pack(len(payload)) + bytes(payload)


def identify_protocol(head: bytes | bytearray) -> str | None:
    """Name the protocol a stream that is not Kafka starts with, if it is a known one.

    :param head: the first bytes the peer sent (e.g. :attr:`FrameDecoder.head`).
    :returns: ``"TLS"`` for a TLS alert or handshake record, ``"HTTP"`` for an HTTP
        response, else None.
    """
    if len(head) >= 2 and head[0] in _TLS_RECORD_TYPES and head[1] == 0x03:
        return "TLS"
    if bytes(head[:5]) == b"HTTP/":
        return "HTTP"
    return None


class FrameDecoder:
    """Splits a byte stream into frame payloads (the bytes after each size prefix).

    :param max_frame_size: the largest payload accepted; a larger declared size raises
        :class:`RemoteProtocolError` (the stream is then unusable).
    """

    __slots__ = ("_buf", "_frames", "_head", "_max", "_need")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must be >= 0")
        self._buf = bytearray()
        self._max = max_frame_size
        # Size of the frame whose prefix has been validated but whose body is incomplete.
        self._need = -1
        self._head = b""
        self._frames = 0

    @property
    def max_frame_size(self) -> int:
        """The largest frame payload accepted."""
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames (non-zero at EOF = truncated)."""
        return len(self._buf)

    @property
    def head(self) -> bytes:
        """The first bytes ever received (at most 8), to tell what a non-Kafka peer is."""
        return self._head

    @property
    def frames(self) -> int:
        """How many complete frames :meth:`next_frame` has returned."""
        return self._frames

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the stream.

        :raises RemoteProtocolError: if a size prefix now visible is negative or too big.
        """
        if len(self._head) < _HEAD:
            self._head += bytes(data[: _HEAD - len(self._head)])
        self._buf += data
        if self._need < 0 and len(self._buf) >= 4:
            self._check_size()

    def _check_size(self) -> int:
        size = int(_SIZE.unpack_from(self._buf)[0])
        if size < 0:
            raise RemoteProtocolError(f"negative frame size {size}")
        if size > self._max:
            raise RemoteProtocolError(f"frame size {size} exceeds the maximum of {self._max} bytes")
        self._need = size
        return size

    def next_frame(self) -> bytes | NeedData:
        """Return the next complete frame payload, or :data:`NEED_DATA`.

        :raises RemoteProtocolError: for a negative or oversized size prefix.
        """
        size = self._need
        if size < 0:
            if len(self._buf) < 4:
                return NEED_DATA
            size = self._check_size()
        end = 4 + size
        if len(self._buf) < end:
            return NEED_DATA
        with memoryview(self._buf) as mv:
            frame = bytes(mv[4:end])
        del self._buf[:end]
        # The next prefix (if already here) is checked by the next call or the next
        # receive_data(), so this frame is never lost to an error about the following one.
        self._need = -1
        self._frames += 1
        return frame
