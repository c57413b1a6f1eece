"""One fetch loop per leader broker: its share session, requests, and answers.

Rules of this module:

1. One request in flight per session (the session enforces it). Each turn of the loop
   picks the request: a renew (IsRenewAck, no fetching), else a fetch carrying the
   pending acknowledgements when the buffer has room, else a ShareAcknowledge when
   acknowledgements wait longer than ``ack_linger`` or a commit asked for them.
   While this member holds acquired records, a fetch does not wait at the broker
   (MaxWaitMs 0): a long poll would sit in front of the acknowledgements that free the
   broker's per-partition record locks. If such a fetch comes back empty, the loop waits
   for the application to answer something before fetching again (``dry``).
2. Only acquired offsets are delivered. Acquired offsets without a deliverable record
   become GAP acknowledgements. Offsets whose batch is corrupt, or cut off by the
   broker's byte limit, are RELEASED, never gapped: nothing is lost.
3. A transport failure or a session reset fails the acknowledgements of that session
   incarnation (reported, never re-sent) and reopens the session with epoch 0.
4. The loop never raises: fatal errors go to :meth:`ConsumerCore.fail`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._consumer.requests import (
    FetchParams,
    acknowledge_codes,
    fetch_ack_codes,
    share_acknowledge_request,
    share_fetch_request,
)
from sharecon._consumer.signal import Signal
from sharecon._net.connection import BrokerAddress
from sharecon._share.acquired import AcquiredRange, clip, filter_acquired, lock_deadline
from sharecon._share.ledger import AckFailure
from sharecon._share.session import RequestKind, SessionEvent, ShareSession
from sharecon.protocol.records import read_batches
from sharecon.record import Record
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.cluster import ClusterSent
    from sharecon._share.ledger import Taken
    from sharecon._share.session import SharePlan
    from sharecon.protocol import (
        Response,
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchRequest,
        ShareFetchResponse,
    )
    from sharecon.protocol.messages import share_fetch as sf

logger = logging.getLogger("sharecon.consumer")

_NETWORK_EXCEPTION = 13
_LEADER_MOVED = frozenset({6, 74})  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
_UNKNOWN_TOPIC = frozenset({3, 100})  # UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID
_FATAL_TOP = frozenset({29, 30, 31})  # topic/group/cluster authorization
_UNSUPPORTED_VERSION = 35


class _LeaderHint(Protocol):
    """CurrentLeader of a ShareFetch or ShareAcknowledge partition answer."""

    @property
    def leader_id(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...


class _Endpoint(Protocol):
    """A NodeEndpoints entry of a ShareFetch or ShareAcknowledge answer."""

    @property
    def node_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


class _InFlight(NamedTuple):
    plan: SharePlan
    taken: Taken | None
    # The body type follows plan.kind; _finish casts accordingly.
    sent: ClusterSent[Response]
    started: float
    holding: bool


class _Decoded(NamedTuple):
    base_offset: int
    last_offset: int
    is_control: bool
    records: Sequence[Record]


def _subtract(ranges: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` minus the offsets in ``cut`` (both sorted, inclusive)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for c_lo, c_hi in cut:
            if c_hi < lo or c_lo > hi:
                continue
            if c_lo > lo:
                out.append((lo, c_lo - 1))
            lo = c_hi + 1
            if lo > hi:
                break
        if lo <= hi:
            out.append((lo, hi))
    return out


class NodeFetcher:
    """The fetch loop and share session for one leader broker (rules 1-4)."""

    def __init__(self, core: ConsumerCore, node_id: int) -> None:
        self.core = core
        self.node_id = node_id
        self.session = ShareSession(node_id)
        self.wake = Signal()
        self.stopped = anyio.Event()
        self._backoff = RETRY_BACKOFF
        self._failures = 0
        cfg = core.config
        self._params = FetchParams(
            max_wait_ms=cfg.max_wait_ms,
            min_bytes=cfg.min_bytes,
            max_bytes=cfg.fetch_max_bytes,
            max_records=cfg.max_records,
            batch_size=cfg.max_records,
        )
        self._prefetch_params = replace(self._params, max_wait_ms=0)
        self._timeout = cfg.max_wait_ms / 1000 + cfg.request_timeout
        #: A no-wait fetch found nothing acquirable: wait for answers before the next one.
        self.dry = False
        self._holding = False
        #: Acks waited ``ack_linger`` without a request to carry them: send them on their own.
        self._linger_expired = False

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch and acknowledge until the consumer closes (never raises: rule 4)."""
        core = self.core
        inflight: _InFlight | None = None
        try:
            while not core.closing and core.fatal is None:
                if inflight is None:
                    plan, taken = self._next_request()
                    if plan is None:
                        await self._idle()
                        continue
                    inflight = await self._start(plan, taken)
                    if inflight is None:
                        continue
                inflight = await self._finish(inflight, pipeline=True)
            if inflight is not None:
                # Closing: answer the request still out, so the session can be closed.
                await self._finish(inflight, pipeline=False)
        except errors.KafkaError as exc:
            core.fail(exc)
        finally:
            self.stopped.set()

    async def _idle(self) -> None:
        core = self.core
        # Acks waiting: send them after the linger even if no fetch is due.
        linger = core.config.ack_linger if core.ledger.has_marked(self.session.tag) else None
        woke = await self.wake.wait(timeout=linger if linger is not None else 1.0)
        if not woke and linger is not None:
            self._linger_expired = True

    def _next_request(
        self, extra_records: int = 0, extra_bytes: int = 0
    ) -> tuple[SharePlan | None, Taken | None]:
        """Plan the next request (rule 1); ``extra_*`` are records received, not yet buffered."""
        core, session, ledger = self.core, self.session, self.core.ledger
        want = core.partitions_for(self.node_id)
        room = core.buffer.has_room(extra_records, extra_bytes)
        if session.is_new:
            # A new session cannot carry acknowledgements; it opens by fetching.
            self._holding = False
            return (session.build_fetch(want) if room else None), None
        urgent = core.flush_requested > 0 or self._linger_expired
        marked = ledger.has_marked(session.tag)
        self._holding = extra_records > 0 or ledger.outstanding(session.tag) > 0
        if self.dry and not marked and not urgent and self._holding:
            return None, None  # rule 1: wait for answers, they free the broker's locks
        taken = ledger.take(session.tag) if marked else None
        self._linger_expired = False
        plan: SharePlan | None
        if taken is not None and taken.is_renew:
            plan = session.build_acknowledge(taken.acks, is_renew=True)
        elif taken is not None and (urgent or not room):
            plan = session.build_acknowledge(taken.acks)
        elif room:
            plan = session.build_fetch(want, taken.acks if taken else None)
        else:
            plan = None
        if plan is None and taken is not None:
            # Cannot happen with acks in hand; never strand them in SENT state.
            raise AssertionError(
                f"node {self.node_id}: acknowledgements taken but no request built"
            )
        return plan, taken

    async def _start(self, plan: SharePlan, taken: Taken | None) -> _InFlight | None:
        """Put ``plan`` on the wire; ``None`` if that failed (already handled)."""
        core = self.core
        body: ShareFetchRequest | ShareAcknowledgeRequest
        if plan.kind is RequestKind.SHARE_FETCH:
            params = self._prefetch_params if self._holding else self._params
            body = share_fetch_request(plan, core.config.group_id, core.member_id, params)
        else:
            body = share_acknowledge_request(plan, core.config.group_id, core.member_id)
        try:
            sent = await core.cluster.send(self.node_id, body)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            await self._transport_failed(plan, exc)
            return None
        return _InFlight(plan, taken, sent, anyio.current_time(), self._holding)

    async def _finish(self, f: _InFlight, *, pipeline: bool) -> _InFlight | None:
        """Take the answer to ``f``; with ``pipeline``, send the next request before
        decoding this answer's records, so the broker works while we decode."""
        core, plan = self.core, f.plan
        nxt: _InFlight | None = None
        try:
            if plan.kind is RequestKind.SHARE_FETCH:
                resp = cast("ShareFetchResponse", await f.sent.wait(self._timeout))
                got = sum(
                    a.last_offset - a.first_offset + 1
                    for t in resp.responses
                    for p in t.partitions
                    for a in p.acquired_records
                )
                self.dry = f.holding and not got and plan.fetches
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug(
                        "node %d: ShareFetch epoch %d (+%d -%d, %d acks%s) answered in %.1f ms: %d records",
                        self.node_id,
                        plan.epoch,
                        len(plan.added),
                        len(plan.forgotten),
                        f.taken.count if f.taken else 0,
                        ", renew" if plan.is_renew else "",
                        (anyio.current_time() - f.started) * 1000,
                        got,
                    )
                if not await self._on_fetch_session(plan, f.taken, resp):
                    return None
                if pipeline and got and not core.closing and core.fatal is None:
                    size = sum(len(p.records or b"") for t in resp.responses for p in t.partitions)
                    plan2, taken2 = self._next_request(got, size)
                    if plan2 is not None:
                        nxt = await self._start(plan2, taken2)
                await self._on_fetch_data(plan, resp)
            else:
                ack_resp = cast(
                    "ShareAcknowledgeResponse", await f.sent.wait(core.config.request_timeout)
                )
                await self._on_acknowledge(plan, f.taken, ack_resp)
            self._failures = 0
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            await self._transport_failed(plan, exc)
        finally:
            core.progress.set()
        return nxt

    async def _transport_failed(self, plan: SharePlan, exc: errors.KafkaError) -> None:
        """Rule 3: the session incarnation is gone; fail its acks and start over."""
        core = self.core
        outcome = self.session.on_transport_error(plan)
        core.report(
            core.ledger.invalidate(AckFailure.SESSION_RESET, _NETWORK_EXCEPTION, tag=outcome.tag)
        )
        self._renew_done(plan, ok=False)
        logger.info("node %d: %s; share session reset", self.node_id, exc)
        core.progress.set()
        await self._back_off(refresh=True)

    async def _back_off(self, *, refresh: bool = False) -> None:
        delay = self._backoff.delay(self._failures)
        self._failures += 1
        if refresh:
            try:
                await self.core.cluster.refresh_metadata(self.core.membership.topics)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
                pass
            self.core.ensure_fetchers()
        await self.wake.wait(timeout=delay)

    # -- answers --------------------------------------------------------------------------

    def _session_outcome(
        self, plan: SharePlan, taken: Taken | None, code: int, message: str | None
    ) -> bool:
        """Apply the top-level code; True if the response body should be processed."""
        core = self.core
        outcome = self.session.on_response(plan, code)
        if outcome.event is SessionEvent.STALE:
            return False
        if outcome.event is SessionEvent.RESET:
            logger.info(
                "node %d: share session reset by %s", self.node_id, errors.error_for_code(code)
            )
            core.report(core.ledger.invalidate(AckFailure.SESSION_RESET, code, tag=outcome.tag))
            self._renew_done(plan, ok=False)
            return False
        if code:
            if taken is not None:
                core.report(core.ledger.complete_all(plan.tag, code))
            self._renew_done(plan, ok=False)
            err = errors.error_for_code(code, f"node {self.node_id}: {message or ''}".rstrip(": "))
            assert err is not None
            if code in _FATAL_TOP or code == _UNSUPPORTED_VERSION:
                core.fail(err)
            else:
                core.note_error(err)
            return False
        return True

    async def _on_acknowledge(
        self, plan: SharePlan, taken: Taken | None, resp: ShareAcknowledgeResponse
    ) -> None:
        if not self._session_outcome(plan, taken, resp.error_code, resp.error_message):
            if resp.error_code:
                await self._back_off()
            return
        names = self.core.cluster.metadata.topic_names
        codes = acknowledge_codes(resp, names)
        if taken is not None:
            self.core.report(self.core.ledger.complete(plan.tag, codes))
        self._renew_done(plan, ok=True, lock_ms=resp.acquisition_lock_timeout_ms, codes=codes)
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code in _LEADER_MOVED or p.error_code in _UNKNOWN_TOPIC:
                    tp = TopicIdPartition(t.topic_id, p.partition_index, names.get(t.topic_id))
                    await self._partition_moved(
                        tp, p.error_code, p.current_leader, resp.node_endpoints
                    )

    async def _on_fetch_session(
        self, plan: SharePlan, taken: Taken | None, resp: ShareFetchResponse
    ) -> bool:
        """The session and acknowledgement part of a ShareFetch answer; True to go on."""
        core = self.core
        if not self._session_outcome(plan, taken, resp.error_code, resp.error_message):
            if resp.error_code:
                await self._back_off(refresh=resp.error_code in _UNKNOWN_TOPIC)
            return False
        names = core.cluster.metadata.topic_names
        unknown = {t.topic_id for t in resp.responses} - names.keys()
        if unknown:
            await core.cluster.refresh_metadata(core.membership.topics, topic_ids=unknown)
            names = core.cluster.metadata.topic_names
        if taken is not None:
            core.report(core.ledger.complete(plan.tag, fetch_ack_codes(resp, names)))
        self._renew_done(plan, ok=True, lock_ms=resp.acquisition_lock_timeout_ms)
        return True

    async def _on_fetch_data(self, plan: SharePlan, resp: ShareFetchResponse) -> None:
        """The records part of a ShareFetch answer (rule 2)."""
        names = self.core.cluster.metadata.topic_names
        deadline = lock_deadline(anyio.current_time(), resp.acquisition_lock_timeout_ms)
        for t in resp.responses:
            name = names.get(t.topic_id) or str(t.topic_id)
            for p in t.partitions:
                tp = TopicIdPartition(t.topic_id, p.partition_index, name)
                if p.error_code:
                    await self._partition_error(tp, p, resp)
                if p.acquired_records:
                    self._take_data(plan, tp, name, p, deadline)

    def _take_data(
        self,
        plan: SharePlan,
        tp: TopicIdPartition,
        name: str,
        p: sf.PartitionData,
        deadline: float | None,
    ) -> None:
        core = self.core
        ranges = [
            AcquiredRange(a.first_offset, a.last_offset, a.delivery_count)
            for a in p.acquired_records
        ]
        lo = min(r.first_offset for r in ranges)
        hi = max(r.last_offset for r in ranges)
        release: list[tuple[int, int]] = []
        decoded: list[_Decoded] = []
        raw = p.records or b""
        factory = partial(Record, name, tp.partition, tp, core.owner, deadline)
        try:
            split = read_batches(raw)
        except errors.CorruptRecordError as exc:
            core.note_error(errors.CorruptRecordError(f"{name}-{tp.partition}: {exc}"))
            split = None
        if split is None:
            release = clip(ranges, lo, hi)
        else:
            for b in split.batches:
                b_last = b.base_offset + b.last_offset_delta
                if b_last < lo or b.base_offset > hi:
                    continue
                if b.is_control:
                    decoded.append(_Decoded(b.base_offset, b_last, True, ()))
                    continue
                try:
                    recs = b.records(factory)
                except errors.CorruptRecordError as exc:
                    # Rule 2: release what the bad batch covers, so it is redelivered.
                    core.note_error(
                        errors.CorruptRecordError(
                            f"{name}-{tp.partition}: {exc}",
                            base_offset=b.base_offset,
                            last_offset=b_last,
                        )
                    )
                    release.extend(clip(ranges, b.base_offset, b_last))
                    continue
                decoded.append(_Decoded(b.base_offset, b_last, False, recs))
            if split.truncated:
                end = (
                    split.batches[-1].base_offset + split.batches[-1].last_offset_delta
                    if split.batches
                    else lo - 1
                )
                if end < hi:
                    release.extend(clip(ranges, end + 1, hi))
        release.sort()
        filtered = filter_acquired(ranges, decoded)
        gaps = _subtract(filtered.gaps, release) if release else filtered.gaps
        core.report(
            core.ledger.add(tp, plan.tag, [(r.first_offset, r.last_offset) for r in ranges], gaps)
        )
        for r_lo, r_hi in release:
            core.ledger.mark_range(tp, r_lo, r_hi, AckType.RELEASE)
        records = filtered.records
        if any(r.delivery_count != 1 for r in ranges):
            for rec, dc in zip(records, filtered.delivery_counts, strict=True):
                rec.delivery_count = dc
        limit = core.dlq_limit
        if limit is not None and records and any(r.delivery_count > limit for r in ranges):
            # A dead-letter policy: these are not delivered again, they are routed.
            keep: list[Record] = []
            for rec in records:
                (core.dead_letters if rec.delivery_count > limit else keep).append(rec)
            records = keep
            core.dead_letter_signal.set()
        if not records:
            return
        if core.closing:
            for rec in records:
                core.ledger.mark(tp, rec.offset, AckType.RELEASE)
            return
        core.buffer.push(records, len(raw))

    async def _partition_error(
        self, tp: TopicIdPartition, p: sf.PartitionData, resp: ShareFetchResponse
    ) -> None:
        code = p.error_code
        if code in _LEADER_MOVED or code in _UNKNOWN_TOPIC:
            await self._partition_moved(tp, code, p.current_leader, resp.node_endpoints)
            return
        err = errors.error_for_code(
            code, f"{tp.topic}-{tp.partition}: {p.error_message or ''}".rstrip(": ")
        )
        assert err is not None
        if code in _FATAL_TOP:
            self.core.fail(err)
        else:
            self.core.note_error(err)

    async def _partition_moved(
        self,
        tp: TopicIdPartition,
        code: int,
        hint: _LeaderHint,
        endpoints: Sequence[_Endpoint],
    ) -> None:
        """Leadership moved (or the topic is unknown): drop this node's locks, re-route."""
        core = self.core
        core.report(
            core.ledger.invalidate(
                AckFailure.LEADER_CHANGED, code, partition=tp, node_id=self.node_id
            )
        )
        leader_id, leader_epoch = hint.leader_id, hint.leader_epoch
        applied = False
        if code in _LEADER_MOVED and leader_id >= 0 and leader_epoch >= 0:
            endpoint = None
            for e in endpoints:
                if e.node_id == leader_id:
                    endpoint = BrokerAddress(e.host, e.port, leader_id)
            applied = core.cluster.apply_leader_hint(
                tp.topic_id, tp.partition, leader_id, leader_epoch, endpoint
            )
        if not applied:
            try:
                await core.cluster.refresh_metadata(core.membership.topics, topic_ids=[tp.topic_id])
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                logger.info(
                    "metadata refresh after %s failed: %s", errors.error_for_code(code), exc
                )
        core.ensure_fetchers()

    def _renew_done(
        self,
        plan: SharePlan,
        *,
        ok: bool,
        lock_ms: int = 0,
        codes: dict[TopicIdPartition, int] | None = None,
    ) -> None:
        """Move the lock deadline of records whose renew the broker accepted."""
        if not plan.is_renew:
            return
        renewing = self.core.renewing
        deadline = lock_deadline(anyio.current_time(), lock_ms) if ok else None
        for tp in plan.acks:
            good = ok and (codes is None or codes.get(tp, 0) == 0)
            for key in [k for k in renewing if k[0] == tp]:
                rec = renewing.pop(key)
                if good and deadline is not None:
                    rec.lock_deadline = deadline

    # -- close ----------------------------------------------------------------------------

    async def close_session(self) -> None:
        """Send the FINAL (-1) ShareAcknowledge with the last acks; the broker then releases
        every record still acquired by this member on this node."""
        core, session = self.core, self.session
        if session.in_flight is not None or session.is_new:
            return
        taken = core.ledger.take(session.tag, include_renew=False)
        plan = session.build_close(taken.acks if taken else None)
        if plan is None:
            return
        try:
            resp = await core.cluster.request(
                self.node_id,
                share_acknowledge_request(plan, core.config.group_id, core.member_id),
                timeout=core.config.request_timeout,
            )
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            self.session.on_transport_error(plan)
            core.report(
                core.ledger.invalidate(AckFailure.REQUEST_FAILED, _NETWORK_EXCEPTION, tag=plan.tag)
            )
            logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
            return
        self.session.on_response(plan, resp.error_code)
        if taken is not None:
            if resp.error_code:
                core.report(core.ledger.complete_all(plan.tag, resp.error_code))
            else:
                names = core.cluster.metadata.topic_names
                core.report(core.ledger.complete(plan.tag, acknowledge_codes(resp, names)))
