"""In-memory byte streams for scripting a broker's side of a connection.

Faults a real broker cannot be made to produce (desync, truncated frames, oversized frames,
unknown correlation ids) are played here; share behaviour is never tested this way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteStream

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class MemoryByteStream(ByteStream):
    """One end of an in-memory byte pipe; `send` chunks arrive as `receive` chunks."""

    def __init__(
        self,
        tx: MemoryObjectSendStream[bytes],
        rx: MemoryObjectReceiveStream[bytes],
        *,
        send_delay: float = 0.0,
    ) -> None:
        self._tx = tx
        self._rx = rx
        self._buffer = b""
        self.send_delay = send_delay

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._buffer:
            try:
                self._buffer = await self._rx.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                raise anyio.EndOfStream from None
        chunk, self._buffer = self._buffer[:max_bytes], self._buffer[max_bytes:]
        return chunk

    async def send(self, item: bytes) -> None:
        if self.send_delay:
            # Split the write so a cancellation can land between two halves of a frame.
            half = len(item) // 2
            await self._tx.send(item[:half])
            await anyio.sleep(self.send_delay)
            await self._tx.send(item[half:])
        else:
            await self._tx.send(item)

    async def send_eof(self) -> None:
        await self._tx.aclose()

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Close both directions (synchronously, so fixtures and plain tests can too)."""
        self._tx.close()
        self._rx.close()


def byte_stream_pair(
    *, client_send_delay: float = 0.0
) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Return (client end, broker end) of an in-memory byte pipe."""
    a_tx, b_rx = anyio.create_memory_object_stream[bytes](100)
    b_tx, a_rx = anyio.create_memory_object_stream[bytes](100)
    return (
        MemoryByteStream(a_tx, a_rx, send_delay=client_send_delay),
        MemoryByteStream(b_tx, b_rx),
    )
