"""Reading the record at given offsets with a plain Fetch, as a client and not a group
member: it acquires nothing and moves no offset (the exporter's oldest pending record).

Rules:

1. One Fetch per leader, waiting for nothing (``max_wait_ms=0``), at most
   :data:`PEEK_BYTES` per partition (the broker still returns one whole batch when it is
   larger). Partitions without a known leader are left out.
2. A partition answered with an error, or with no record at or after its offset, has no
   result; the first record at or after the offset is the partition's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharecon.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from sharecon.protocol.records import decode_records
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    import uuid
    from collections.abc import Mapping, Sequence

    from sharecon._admin.topics import Partition
    from sharecon.protocol.messages.fetch import FetchResponse

__all__ = ["PEEK_BYTES", "peek_requests", "peeked_timestamps"]

#: Bytes read per partition to find the record at its offset.
PEEK_BYTES = 64 * 1024


def peek_requests(
    offsets: Mapping[TopicPartition, int],
    partitions: Mapping[str, Sequence[Partition]],
    topic_ids: Mapping[str, uuid.UUID],
) -> dict[int, FetchRequest]:
    """The Fetch to send to each leader for the records at ``offsets`` (rule 1)."""
    by_leader: dict[int, dict[str, list[FetchPartition]]] = {}
    for tp, start in offsets.items():
        info = next((p for p in partitions.get(tp.topic, ()) if p.partition == tp.partition), None)
        if info is None or info.leader_id < 0:
            continue
        by_leader.setdefault(info.leader_id, {}).setdefault(tp.topic, []).append(
            FetchPartition(
                partition=tp.partition,
                current_leader_epoch=-1,
                fetch_offset=start,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=PEEK_BYTES,
            )
        )
    return {
        leader: FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=PEEK_BYTES * sum(len(ps) for ps in topics.values()),
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=tuple(
                FetchTopic(topic=name, topic_id=topic_ids[name], partitions=tuple(ps))
                for name, ps in topics.items()
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        for leader, topics in by_leader.items()
    }


def peeked_timestamps(
    response: FetchResponse,
    offsets: Mapping[TopicPartition, int],
    topic_names: Mapping[uuid.UUID, str],
) -> dict[TopicPartition, int]:
    """The timestamp (ms) of the first record at or after each partition's offset (rule 2)."""
    out: dict[TopicPartition, int] = {}
    for t in response.responses:
        name = t.topic or topic_names.get(t.topic_id, "")
        for p in t.partitions:
            tp = TopicPartition(name, p.partition_index)
            if p.error_code or not p.records or tp not in offsets:
                continue
            first = next((r for r in decode_records(p.records) if r.offset >= offsets[tp]), None)
            if first is not None:
                out[tp] = first.timestamp
    return out
