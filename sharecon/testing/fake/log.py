"""The fake's topic logs: record batches kept as the producer wrote them.

The model broker (:mod:`sharecon.testing.model`) decides *which* offsets a share fetch
acquires; it knows a partition's batches by offset range only. The bytes are kept here:
each produced batch with its base offset rewritten, as a broker appends it, so that a
fetch hands out whole batches with the producer's keys, values, headers, timestamps and
compression untouched.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field

from sharecon.protocol.records import read_batches
from sharecon.testing.model.produce import ProducerStates

__all__ = ["StoredBatch", "TopicLog"]

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One appended batch: its offsets and its bytes (base offset already rewritten)."""

    first: int
    last: int
    data: bytes
    max_timestamp: int


@dataclass(slots=True)
class TopicLog:
    """One partition's batches, in offset order."""

    batches: list[StoredBatch] = field(default_factory=list)
    firsts: list[int] = field(default_factory=list)
    #: The idempotent producers' states: the model broker's rules, one copy for both.
    producers: ProducerStates = field(default_factory=ProducerStates)

    def append(self, first: int, last: int, data: bytes, leader_epoch: int, max_ts: int) -> None:
        """Keep one batch the model placed at ``first..last``."""
        buf = bytearray(data)
        _BASE_OFFSET.pack_into(buf, 0, first)
        # Neither field is covered by the batch CRC (it starts at the attributes).
        _LEADER_EPOCH.pack_into(buf, 12, leader_epoch)
        self.batches.append(StoredBatch(first, last, bytes(buf), max_ts))
        self.firsts.append(first)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset`` on, up to ``max_bytes`` (at least
        one batch, as a broker sends a batch larger than the limit alone)."""
        i = bisect.bisect_right(self.firsts, offset) - 1
        i = max(i, 0)
        out: list[bytes] = []
        size = 0
        for b in self.batches[i:]:
            if b.last < offset:
                continue
            if out and size + len(b.data) > max_bytes:
                break
            out.append(b.data)
            size += len(b.data)
        return b"".join(out)

    def size_of(self, first: int) -> int:
        """The bytes of the batch holding offset ``first`` (0: none)."""
        i = bisect.bisect_right(self.firsts, first) - 1
        return len(self.batches[i].data) if i >= 0 else 0

    def covering(self, offsets: list[tuple[int, int]]) -> bytes:
        """The batches holding any of the ``(first, last)`` offset ranges, each once."""
        chosen: dict[int, bytes] = {}
        for first, last in offsets:
            i = max(bisect.bisect_right(self.firsts, first) - 1, 0)
            for b in self.batches[i:]:
                if b.first > last:
                    break
                if b.last >= first:
                    chosen[b.first] = b.data
        return b"".join(chosen[k] for k in sorted(chosen))

    def offset_for_time(self, timestamp: int) -> int | None:
        """The first offset of the first batch whose newest record is at or after
        ``timestamp`` (the batch granularity is enough for a test broker)."""
        for b in self.batches:
            if b.max_timestamp >= timestamp:
                return b.first
        return None


def split_batches(data: bytes | memoryview) -> list[tuple[bytes, int, int, int, int, int, int]]:
    """``(bytes, offset span, producer id, epoch, base sequence, records, max timestamp)``
    per batch of a produce request's ``records``.

    :raises CorruptRecordError: bytes that are not RecordBatch v2.
    """
    split = read_batches(data)
    out = []
    for b in split.batches:
        raw = bytes(b.raw)
        out.append(
            (
                raw,
                b.last_offset_delta + 1,
                b.producer_id,
                b.producer_epoch,
                b.base_sequence,
                b.records_count,
                b.max_timestamp,
            )
        )
    return out
