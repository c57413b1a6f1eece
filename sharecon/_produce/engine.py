"""The producer's dispatch decisions, sans-I/O: events in, decisions out, time passed in.

The I/O layer (:mod:`sharecon._producer.sender`) and the producer simulation
(:mod:`sharecon.testing.sim.produce`) both run this one engine; each only carries its
decisions out (sends requests, gets producer ids, refreshes metadata, applies leader
hints). Rules of this module:

1. **A round** (:meth:`Engine.poll`) takes every batch that may go now
   (:meth:`.accumulator.Accumulator.ready`), groups them by leader and splits each group
   into Produce requests of at most ``max_request`` bytes (:class:`Outgoing`): one
   request per leader per round, pipelined on that leader's connection by the I/O layer.
2. **A producer id reset** (asked for by the accumulator, rule 5 there) stops the rounds;
   once nothing is in flight, :meth:`Engine.poll` says so once (:attr:`Round.reset`). The
   I/O layer then gets a new producer id and calls :meth:`Engine.reset_done`, or, when it
   cannot, :meth:`Engine.reset_failed`, which fails every batch and the producer for good
   (:attr:`Engine.fatal`).
3. **Each answer** is applied per partition through :mod:`.policy`; a partition the
   answer does not mention fails its batch (the broker broke the protocol). A retriable
   error asks for a metadata refresh and offers the answer's leader hint
   (:class:`LeaderHint`) to the I/O layer, whose view decides whether it is news: a
   batch whose hint was news is retried at once.
4. **A request without an answer** (:meth:`Engine.failed`) retries or fails its batches
   as :func:`.policy.transport_action` says, and asks for a metadata refresh unless it
   fails them.
5. Every request taken by a round ends exactly once (:meth:`Engine.answered`,
   :meth:`Engine.failed` or :meth:`Engine.abandoned`, e.g. on cancellation): only then
   do its batches stop counting as in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sharecon import errors
from sharecon.protocol import ProduceRequest
from sharecon.protocol.messages.produce import PartitionProduceData, TopicProduceData
from sharecon.types import ZERO_UUID

from .policy import Action, transport_action

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Mapping, Sequence

    from sharecon.protocol import ProduceResponse
    from sharecon.protocol.messages.produce import NodeEndpoint, PartitionProduceResponse

    from .accumulator import Accumulator
    from .batch import Batch
    from .settings import Settings

__all__ = ["Engine", "LeaderHint", "Outgoing", "Round"]


class _Leader(Protocol):
    @property
    def leader_id(self) -> int: ...


class Metadata(Protocol):
    """What the engine reads of the I/O layer's cluster metadata."""

    @property
    def partitions(self) -> Mapping[str, Sequence[_Leader]]: ...

    @property
    def topic_ids(self) -> Mapping[str, uuid.UUID]: ...

    @property
    def topic_names(self) -> Mapping[uuid.UUID, str]: ...


@dataclass(slots=True, eq=False)
class Outgoing:
    """One Produce request to send to broker ``node``: ``batches``, encoded in ``request``."""

    node: int
    batches: list[Batch]
    request: ProduceRequest
    #: Set once its outcome is applied (rule 5).
    ended: bool = field(default=False)


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """A partition's new leader as a NOT_LEADER-style answer named it (rule 3)."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    leader_id: int
    leader_epoch: int
    #: The new leader's address when the answer carried it.
    endpoint: NodeEndpoint | None


@dataclass(slots=True)
class Round:
    """What one :meth:`Engine.poll` decided."""

    #: The requests to send now.
    sends: list[Outgoing]
    #: Seconds until the next batch falls due (``inf``: none until woken).
    wait: float
    #: Whether the metadata must be refreshed (a partition without a known leader).
    refresh: bool = False
    #: Whether to get a new producer id now (rule 2; said once per reset).
    reset: bool = False


class Engine:
    """The decisions of one producer's sender around its :class:`.accumulator.Accumulator`."""

    __slots__ = ("_acks", "_max_request", "_reset_started", "_timeout_ms", "acc", "fatal")

    def __init__(self, acc: Accumulator, settings: Settings) -> None:
        self.acc = acc
        self._acks = settings.acks
        self._timeout_ms = int(settings.request_timeout * 1000)
        self._max_request = settings.max_request
        self._reset_started = False
        #: Why the producer cannot go on (a producer id could not be replaced), if so.
        self.fatal: errors.KafkaError | None = None

    # -- rounds ----------------------------------------------------------------------------

    def poll(self, now: float, metadata: Metadata) -> Round:
        """The requests to send now (rule 1), or the reset to start (rule 2)."""
        acc = self.acc
        if acc.reset_wanted:
            if acc.in_flight or self._reset_started:
                return Round([], math.inf)  # woken when the last answer or the reset is in
            self._reset_started = True
            return Round([], math.inf, reset=True)
        ready, wait, refresh = acc.ready(now, metadata.partitions)
        sends = [
            self._request(node, group, metadata.topic_ids)
            for node, batches in ready.items()
            for group in acc.requests(batches, self._max_request)
        ]
        return Round(sends, wait, refresh)

    def _request(self, node: int, batches: list[Batch], ids: Mapping[str, uuid.UUID]) -> Outgoing:
        by_topic: dict[str, list[Batch]] = {}
        for batch in batches:
            batch.attempts += 1
            by_topic.setdefault(batch.topic, []).append(batch)
        request = ProduceRequest(
            transactional_id=None,
            acks=self._acks,
            timeout_ms=self._timeout_ms,
            topic_data=tuple(
                TopicProduceData(
                    name=topic,
                    topic_id=ids.get(topic, ZERO_UUID),
                    partition_data=tuple(
                        PartitionProduceData(index=b.partition, records=b.encoded) for b in group
                    ),
                )
                for topic, group in by_topic.items()
            ),
        )
        return Outgoing(node, batches, request)

    # -- outcomes of requests ----------------------------------------------------------------

    def failed(self, out: Outgoing, exc: errors.KafkaError, now: float) -> bool:
        """``out`` got no answer (rule 4); returns whether to refresh the metadata."""
        if out.ended:
            return False
        action = transport_action(exc)
        # The request may or may not have been written: retry the same bytes.
        self.acc.transport_failed(out.batches, exc, action, now)
        self._end(out)
        return action is not Action.FAIL

    def answered(
        self,
        out: Outgoing,
        response: ProduceResponse,
        now: float,
        metadata: Metadata,
        apply_hint: Callable[[LeaderHint], bool],
    ) -> bool:
        """Apply the answer to ``out`` (rule 3). ``apply_hint`` applies a leader hint to the
        I/O layer's view and says whether it was news. Returns whether to refresh the
        metadata."""
        if out.ended:
            return False
        names = metadata.topic_names
        answers: dict[tuple[str, int], PartitionProduceResponse] = {}
        for topic in response.responses:
            name = topic.name or names.get(topic.topic_id, "")
            for part in topic.partition_responses:
                answers[(name, part.index)] = part
        endpoints = {e.node_id: e for e in response.node_endpoints}
        refresh = False
        acc = self.acc
        for batch in out.batches:
            answer = answers.get((batch.topic, batch.partition))
            if answer is None:
                acc.finish(
                    batch,
                    errors.RemoteProtocolError(
                        f"broker {out.node}: the Produce response does not mention "
                        f"{batch.topic}-{batch.partition}"
                    ),
                )
                continue
            refresh |= self._apply(out.node, batch, answer, endpoints, now, metadata, apply_hint)
        self._end(out)
        return refresh

    def _apply(
        self,
        node: int,
        batch: Batch,
        pr: PartitionProduceResponse,
        endpoints: Mapping[int, NodeEndpoint],
        now: float,
        metadata: Metadata,
        apply_hint: Callable[[LeaderHint], bool],
    ) -> bool:
        code = pr.error_code
        acc = self.acc
        action = acc.answer_action(batch, code)
        err: errors.KafkaError | None = None
        hinted = False
        if action is not Action.WRITTEN:
            detail = f"topic {batch.topic!r} partition {batch.partition} (broker {node})"
            if pr.error_message:
                detail += f": {pr.error_message}"
            err = errors.error_for_code(code, detail)
            assert err is not None
        retry = action is Action.RETRY or action is Action.RETRY_AMBIGUOUS
        if retry:
            # A retry of unknown outcome is still a retriable error: the hint and the
            # metadata refresh (policy rule 4) apply to it as well.
            leader = pr.current_leader
            tid = metadata.topic_ids.get(batch.topic)
            if leader.leader_id >= 0 and tid is not None:
                hinted = apply_hint(
                    LeaderHint(
                        batch.topic,
                        tid,
                        batch.partition,
                        leader.leader_id,
                        leader.leader_epoch,
                        endpoints.get(leader.leader_id),
                    )
                )
        acc.answered(
            batch,
            action,
            err,
            base_offset=pr.base_offset,
            log_append_time=pr.log_append_time_ms,
            now=now,
            hinted=hinted,
        )
        return retry

    def abandoned(self, out: Outgoing) -> None:
        """``out`` ends without an outcome (its task was cancelled: the producer is closing
        and fails its batches itself)."""
        if not out.ended:
            self._end(out)

    def _end(self, out: Outgoing) -> None:
        out.ended = True
        self.acc.request_done(len(out.batches))

    # -- producer id resets -----------------------------------------------------------------

    def reset_done(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id is in (rule 2): every partition's sequence restarts at 0."""
        self.acc.restart_sequences(producer_id, producer_epoch)
        self._reset_over()

    def reset_failed(self, error: errors.KafkaError) -> None:
        """No new producer id could be had (rule 2): the producer fails for good, and with
        it every batch."""
        self.fatal = error
        self.acc.fail_all(error)
        self._reset_over()

    def _reset_over(self) -> None:
        self.acc.reset_wanted = False
        self._reset_started = False
