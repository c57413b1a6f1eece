"""Turning share-session plans into wire messages, and answers back into plain data.

The sans-I/O session (:mod:`sharecon._share.session`) says *what* a request carries; this
module says how that looks on the wire for each version, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharecon.protocol import ShareAcknowledgeRequest, ShareFetchRequest
from sharecon.protocol._share_fetch_codec import acknowledgement_batch, fetch_partition
from sharecon.protocol.messages import share_acknowledge as sa
from sharecon.protocol.messages import share_fetch as sf

from .partition_ids import topic_partition

if TYPE_CHECKING:
    import uuid
    from collections.abc import Mapping, Sequence

    from sharecon.protocol import ShareAcknowledgeResponse, ShareFetchResponse
    from sharecon.types import TopicIdPartition

    from .acks import AckBatch
    from .session import SharePlan


@dataclass(frozen=True, slots=True)
class FetchParams:
    """The fetch sizing a ShareFetch carries when it fetches."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    #: ShareAcquireMode: 0 batch-optimized, 1 record-limit (KIP-1206, ShareFetch v2+).
    acquire_mode: int = 0


_NO_FETCH = FetchParams(0, 0, 0, 0, 0)


def _fetch_batches(batches: Sequence[AckBatch]) -> tuple[sf.AcknowledgementBatch, ...]:
    if not batches:
        return ()  # a partition the request adds: the usual case of a session opening
    # Built by slot, not through the frozen dataclasses' __init__ (an object.__setattr__
    # call per field): these are per partition of every fetch.
    return tuple([acknowledgement_batch(b.first_offset, b.last_offset, b.types) for b in batches])


def _ack_batches(batches: Sequence[AckBatch]) -> tuple[sa.AcknowledgementBatch, ...]:
    return tuple(
        sa.AcknowledgementBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, acknowledge_types=b.types
        )
        for b in batches
    )


def share_fetch_request(
    plan: SharePlan, group_id: str, member_id: str, params: FetchParams
) -> ShareFetchRequest:
    """The ShareFetch for ``plan``; fetch sizing is zeroed when the plan may not fetch."""
    p = params if plan.fetches else _NO_FETCH
    # Lists, then tuples: a generator per topic and per partition costs more than these.
    topics = tuple(
        [
            sf.FetchTopic(
                topic_id=tid,
                partitions=tuple(
                    [fetch_partition(part, _fetch_batches(b)) for part, b in parts.items()]
                ),
            )
            for tid, parts in plan.topics().items()
        ]
    )
    forgotten = tuple(
        sf.ForgottenTopic(topic_id=tid, partitions=tuple(parts))
        for tid, parts in plan.forgotten_topics().items()
    )
    return ShareFetchRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=plan.epoch,
        max_wait_ms=p.max_wait_ms,
        min_bytes=p.min_bytes,
        max_bytes=p.max_bytes,
        max_records=p.max_records,
        batch_size=p.batch_size,
        share_acquire_mode=p.acquire_mode,
        is_renew_ack=plan.is_renew,
        topics=topics,
        forgotten_topics_data=forgotten,
    )


def share_acknowledge_request(
    plan: SharePlan, group_id: str, member_id: str
) -> ShareAcknowledgeRequest:
    """The ShareAcknowledge for ``plan``."""
    topics = tuple(
        sa.AcknowledgeTopic(
            topic_id=tid,
            partitions=tuple(
                sa.AcknowledgePartition(
                    partition_index=part, acknowledgement_batches=_ack_batches(b)
                )
                for part, b in parts.items()
            ),
        )
        for tid, parts in plan.topics().items()
    )
    return ShareAcknowledgeRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=plan.epoch,
        is_renew_ack=plan.is_renew,
        topics=topics,
    )


def fetch_ack_codes(
    resp: ShareFetchResponse, names: Mapping[uuid.UUID, str]
) -> dict[TopicIdPartition, int]:
    """Per-partition acknowledgement error codes of a ShareFetch answer."""
    codes: dict[TopicIdPartition, int] = {}
    for t in resp.responses:
        tid = t.topic_id
        name = names.get(tid)  # once a topic: a UUID hashes in Python
        for p in t.partitions:
            codes[topic_partition(tid, p.partition_index, name)] = p.acknowledge_error_code
    return codes


def acknowledge_codes(
    resp: ShareAcknowledgeResponse, names: Mapping[uuid.UUID, str]
) -> dict[TopicIdPartition, int]:
    """Per-partition error codes of a ShareAcknowledge answer."""
    codes: dict[TopicIdPartition, int] = {}
    for t in resp.responses:
        tid = t.topic_id
        name = names.get(tid)
        for p in t.partitions:
            codes[topic_partition(tid, p.partition_index, name)] = p.error_code
    return codes
