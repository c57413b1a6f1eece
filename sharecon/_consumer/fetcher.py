"""One fetch loop per leader broker: the I/O around its share session.

Every decision lives in the sans-I/O layer: what to send next and what each error means
(:mod:`sharecon._share.fetch_policy`), what an answer's records are
(:mod:`sharecon._share.intake`). This module sends, waits, and hands results on.

Rules of this module:

1. One request in flight per session. When a ShareFetch answer arrives, its session part
   is applied, the offsets it acquired end what we still held of them from earlier
   deliveries (so the next request carries no answer to those), the next request is
   sent, and only then are its records taken in, so the broker prepares the next answer
   while we work (pipelining).
2. Lock deadlines count from when the request was sent, never later than the broker's.
3. Anything that goes wrong while taking an answer in, whatever the exception, becomes a
   typed :class:`~sharecon.errors.KafkaError` kept in ``recent_errors`` plus a session
   reset: the consumer's task group never sees it.
4. The loop never raises: fatal errors go to :meth:`ConsumerCore.fail`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._consumer.buffer import Chunk
from sharecon._consumer.core import SessionOwner
from sharecon._consumer.requests import (
    FetchParams,
    acknowledge_codes,
    fetch_ack_codes,
    share_acknowledge_request,
    share_fetch_request,
)
from sharecon._consumer.signal import Signal
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._share.acquired import lock_deadline
from sharecon._share.fetch_policy import (
    Action,
    FetchPlanner,
    answer_verdict,
    connection_lost,
    partition_action,
    renewed,
    transport_failed,
)
from sharecon._share.intake import InvalidAnswer, take_partition
from sharecon._share.ledger import AckFailure
from sharecon._share.session import RequestKind, ShareSession
from sharecon.protocol.error_codes import ErrorCode
from sharecon.record import Record
from sharecon.types import AckType, TopicIdPartition

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.cluster import ClusterSent
    from sharecon._share.fetch_policy import Turn
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
    may_wait: bool
    granted: int = 0


class NodeFetcher:
    """The fetch loop and share session for one leader broker (rules 1-4)."""

    def __init__(self, core: ConsumerCore, node_id: int, pool: FetcherPool) -> None:
        self.core = core
        self.node_id = node_id
        self.pool = pool
        self.session = ShareSession(node_id)
        self.planner = FetchPlanner(self.session)
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
        #: The connection the session lives on; when it closes, the session is over.
        self._conn: BrokerConnection | None = None

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch and acknowledge until the consumer closes (never raises: rule 4)."""
        core = self.core
        inflight: _InFlight | None = None
        try:
            while not core.closing and core.fatal is None:
                if inflight is None:
                    self._check_connection()
                    turn = self._turn()
                    if turn.plan is None:
                        await self._idle()
                        continue
                    inflight = await self._start(turn)
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
            self.planner.linger_expired = True

    def _turn(self, extra_records: int = 0, extra_bytes: int = 0) -> Turn:
        core = self.core
        room = core.buffer.has_room(extra_records, extra_bytes)
        budget = core.record_budget
        granted = 0
        if budget is not None and room:
            # Strict limit: ask only for what the member may still hold, counting what
            # every leader's fetches in flight may bring.
            granted = budget.grant(core.ledger.outstanding_all() + extra_records)
            room = granted > 0
        turn = self.planner.next(
            core.ledger,
            core.partitions_for(self.node_id),
            room=room,
            urgent=core.flush_requested > 0,
            extra_records=extra_records,
        )
        if granted:
            if turn.plan is not None and turn.plan.fetches:
                return replace(turn, granted=granted)
            self._settle(granted)
        return turn

    def _settle(self, granted: int) -> None:
        """A fetch granted ``granted`` records was answered, failed or never sent."""
        if granted and self.core.record_budget is not None:
            self.core.record_budget.settle(granted)

    async def _start(self, turn: Turn) -> _InFlight | None:
        """Put ``turn`` on the wire; ``None`` if that failed (already handled)."""
        core, plan = self.core, turn.plan
        assert plan is not None
        body: ShareFetchRequest | ShareAcknowledgeRequest
        if plan.kind is RequestKind.SHARE_FETCH:
            params = self._params if turn.may_wait else self._prefetch_params
            if turn.granted:
                params = replace(
                    params,
                    max_records=turn.granted,
                    batch_size=min(params.batch_size, turn.granted),
                    acquire_mode=1,
                )
            body = share_fetch_request(plan, core.config.group_id, core.member_id, params)
        else:
            body = share_acknowledge_request(plan, core.config.group_id, core.member_id)
        try:
            sent = await core.cluster.send(self.node_id, body)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            self._settle(turn.granted)
            await self._transport_failed(plan, exc)
            return None
        conn = sent.connection
        if conn is not self._conn:
            self._conn = conn
            core.tg.start_soon(self._watch, conn, name=f"sharecon watch node {self.node_id}")
        if turn.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), turn.taken.count)
        return _InFlight(plan, turn.taken, sent, anyio.current_time(), turn.may_wait, turn.granted)

    async def _watch(self, conn: BrokerConnection) -> None:
        # Wake the loop the moment the session's connection dies, so records buffered
        # from it are dropped before the application takes them (they are released).
        await conn.wait_closed()
        self.wake.set()

    def _check_connection(self) -> None:
        conn = self._conn
        if conn is None or not conn.closed:
            return
        self._conn = None
        verdict = connection_lost(self.session, self.core.ledger)
        self.core.report(verdict.results)
        if verdict.lost is not None:
            logger.info("node %d: connection lost; share session reset", self.node_id)
            self.core.session_lost(verdict.lost)

    async def _finish(self, f: _InFlight, *, pipeline: bool) -> _InFlight | None:
        """Take the answer to ``f``; with ``pipeline``, send the next request before
        taking this answer's records in (rule 1)."""
        core, plan = self.core, f.plan
        nxt: _InFlight | None = None
        try:
            if plan.kind is RequestKind.SHARE_FETCH:
                try:
                    resp = cast("ShareFetchResponse", await f.sent.wait(self._timeout))
                finally:
                    # Answered (its records are in ``acquired`` below, then the ledger) or
                    # failed: either way the reservation ends here.
                    self._settle(f.granted)
                nxt = await self._on_fetch(f, resp, pipeline=pipeline)
            else:
                ack_resp = cast(
                    "ShareAcknowledgeResponse", await f.sent.wait(core.config.request_timeout)
                )
                await self._on_acknowledge(plan, ack_resp)
            self._failures = 0
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            await self._transport_failed(plan, exc)
        except Exception as exc:  # rule 3: an answer we could not take in
            self._answer_failed(exc)
            await self._back_off(refresh=True)
        finally:
            core.progress.set()
        return nxt

    async def _on_fetch(
        self, f: _InFlight, resp: ShareFetchResponse, *, pipeline: bool
    ) -> _InFlight | None:
        core, plan = self.core, f.plan
        acquired = 0
        size = 0
        for t in resp.responses:
            for p in t.partitions:
                size += len(p.records or b"")
                for a in p.acquired_records:
                    # Clamped: a hostile range must not make this sum a bignum.
                    acquired += max(0, min(a.last_offset - a.first_offset + 1, 1 << 31))
        self.planner.fetched(plan, may_wait=f.may_wait, acquired=acquired)
        if self.planner.dry:
            self.pool.any_dry = True
        now = anyio.current_time()
        core.stats.on_fetch(
            time.monotonic(), now - f.started, acquired, size, resp.throttle_time_ms
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "node %d: ShareFetch epoch %d (+%d -%d, %d acks%s) answered in %.1f ms: %d records",
                self.node_id,
                plan.epoch,
                len(plan.added),
                len(plan.forgotten),
                f.taken.count if f.taken else 0,
                ", renew" if plan.is_renew else "",
                (now - f.started) * 1000,
                acquired,
            )
        if not await self._on_fetch_session(plan, resp):
            return None
        nxt: _InFlight | None = None
        if pipeline and acquired and not core.closing and core.fatal is None:
            # The records come in after the next request is sent; what they re-acquire
            # must end our earlier hold first, or that request could carry answers to the
            # earlier deliveries, which the broker would apply to these acquisitions.
            self._supersede(resp)
            turn = self._turn(acquired, size)
            if turn.plan is not None:
                nxt = await self._start(turn)
                if plan.tag != self.session.tag:
                    # Sending the next request failed and the session is gone: this answer's
                    # records were acquired under it and can no longer be acknowledged.
                    return None
        await self._on_fetch_data(plan, resp, f.started)
        return nxt

    def _supersede(self, resp: ShareFetchResponse) -> None:
        core = self.core
        ledger = core.ledger
        names = core.cluster.metadata.topic_names
        for t in resp.responses:
            for p in t.partitions:
                if p.acquired_records:
                    tp = TopicIdPartition(t.topic_id, p.partition_index, names.get(t.topic_id))
                    core.report(
                        ledger.supersede(
                            tp, [(a.first_offset, a.last_offset) for a in p.acquired_records]
                        )
                    )

    # -- failures -------------------------------------------------------------------------

    async def _transport_failed(self, plan: SharePlan, exc: errors.KafkaError) -> None:
        """The session incarnation is gone: fail its acks, drop its records, start over."""
        verdict = transport_failed(self.session, self.core.ledger, plan)
        self.core.report(verdict.results)
        if verdict.lost is not None:
            self.core.session_lost(verdict.lost)
        self._renewed(plan, ok=False)
        logger.info("node %d: %s; share session reset", self.node_id, exc)
        self.core.note_unreachable(self.node_id, exc)
        await self._back_off(refresh=True)

    def _answer_failed(self, exc: Exception) -> None:
        """Rule 3: a typed error, and a session reset. The records of the old session stay
        locked at the broker until their locks end (a new session does not release them),
        then are delivered again."""
        core = self.core
        if isinstance(exc, errors.KafkaError):
            err: errors.KafkaError = exc
        else:
            logger.error(
                "node %d: unexpected error taking in an answer", self.node_id, exc_info=exc
            )
            err = errors.RemoteProtocolError(
                f"node {self.node_id}: could not take in the answer: {type(exc).__name__}: {exc}"
            )
        core.note_error(err)
        old = self.session.reset()
        core.report(
            core.ledger.invalidate(AckFailure.SESSION_RESET, ErrorCode.INVALID_REQUEST, tag=old)
        )
        core.session_lost(old)

    async def _back_off(self, *, refresh: bool = False) -> None:
        core = self.core
        delay = self._backoff.delay(self._failures)
        self._failures += 1
        deadline = anyio.current_time() + delay
        if refresh:
            try:
                await core.cluster.refresh_metadata(core.membership.topics)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
                pass
            core.fetchers.ensure()
        # Wake-ups (room in the buffer, acks to send) do not cut the pause short; closing does.
        while not core.closing and core.fatal is None:
            left = deadline - anyio.current_time()
            if left <= 0:
                break
            await self.wake.wait(timeout=left)

    # -- answers --------------------------------------------------------------------------

    async def _top_level(self, plan: SharePlan, code: int, message: str | None) -> bool:
        """Apply an answer's top-level code; True if its body should be taken in."""
        core = self.core
        verdict = answer_verdict(self.session, core.ledger, plan, code)
        core.report(verdict.results)
        if verdict.proceed:
            return True
        if verdict.action is Action.OK:
            return False  # a stale answer
        self._renewed(plan, ok=False)
        err = errors.error_for_code(code, f"node {self.node_id}: {message or ''}".rstrip(": "))
        assert err is not None
        if verdict.lost is not None:
            logger.info("node %d: share session reset by %s", self.node_id, err)
            core.session_lost(verdict.lost)
            # A broker that keeps refusing sessions (SHARE_SESSION_LIMIT_REACHED) must not
            # be asked again in a tight loop.
            await self._back_off()
            return False
        if verdict.action is Action.FATAL:
            core.fail(err)
            return False
        core.note_error(err)
        await self._back_off(refresh=verdict.action is Action.REFRESH_METADATA)
        return False

    async def _on_acknowledge(self, plan: SharePlan, resp: ShareAcknowledgeResponse) -> None:
        if not await self._top_level(plan, resp.error_code, resp.error_message):
            return
        core = self.core
        names = core.cluster.metadata.topic_names
        codes = acknowledge_codes(resp, names)
        core.report(core.ledger.complete(plan.tag, codes))
        self._renewed(plan, ok=True, lock_ms=resp.acquisition_lock_timeout_ms, codes=codes)
        for t in resp.responses:
            for p in t.partitions:
                action = partition_action(p.error_code)
                if action in (Action.LEADER_MOVED, Action.REFRESH_METADATA):
                    tp = TopicIdPartition(t.topic_id, p.partition_index, names.get(t.topic_id))
                    await self._partition_moved(
                        tp, action, p.error_code, p.current_leader, resp.node_endpoints
                    )

    async def _on_fetch_session(self, plan: SharePlan, resp: ShareFetchResponse) -> bool:
        """The session and acknowledgement part of a ShareFetch answer; True to go on."""
        if not await self._top_level(plan, resp.error_code, resp.error_message):
            return False
        core = self.core
        names = core.cluster.metadata.topic_names
        unknown = {t.topic_id for t in resp.responses} - names.keys()
        if unknown:
            try:
                await core.cluster.refresh_metadata(core.membership.topics, topic_ids=unknown)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                logger.info("node %d: metadata refresh failed: %s", self.node_id, exc)
            names = core.cluster.metadata.topic_names
        core.report(core.ledger.complete(plan.tag, fetch_ack_codes(resp, names)))
        self._renewed(plan, ok=True, lock_ms=resp.acquisition_lock_timeout_ms)
        return True

    async def _on_fetch_data(self, plan: SharePlan, resp: ShareFetchResponse, sent: float) -> None:
        """The records part of a ShareFetch answer to a request sent at ``sent``."""
        core = self.core
        names = core.cluster.metadata.topic_names
        # The broker's locks start when it acquires the records, after it read the request:
        # counted from the send, ours end no later than its own, however long the answer
        # then took to reach us and be read (a busy machine, a stalled event loop).
        deadline = lock_deadline(sent, resp.acquisition_lock_timeout_ms)
        for t in resp.responses:
            name = names.get(t.topic_id) or str(t.topic_id)
            for p in t.partitions:
                tp = TopicIdPartition(t.topic_id, p.partition_index, name)
                action = partition_action(p.error_code)
                if action is not Action.OK:
                    await self._partition_error(tp, action, p, resp)
                if p.acquired_records:
                    self._take(plan, tp, p, deadline)

    def _take(
        self, plan: SharePlan, tp: TopicIdPartition, p: sf.PartitionData, deadline: float | None
    ) -> None:
        core = self.core
        name = tp.topic or str(tp.topic_id)
        try:
            intake = take_partition(
                tp,
                [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                p.records,
            )
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"node {self.node_id}: {name}-{tp.partition}: {exc}") from None
        ledger = core.ledger
        before = ledger.sequence
        core.report(
            ledger.add(
                tp, plan.tag, [(r.first_offset, r.last_offset) for r in intake.ranges], intake.gaps
            )
        )
        delivery = (before + 1, ledger.sequence)
        for lo, hi in intake.release:
            ledger.mark_range(tp, lo, hi, AckType.RELEASE)
        for bad in intake.errors:
            core.note_error(
                errors.CorruptRecordError(
                    f"{name}-{tp.partition}: {bad}",
                    base_offset=bad.base_offset,
                    last_offset=bad.last_offset,
                )
            )
        if intake.exhausted:
            return
        if core.closing:
            for r in intake.ranges:
                ledger.mark_range(tp, r.first_offset, r.last_offset, AckType.RELEASE)
            return
        owner = SessionOwner(core.owner, plan.tag, delivery) if core.owner is not None else None
        factory = partial(Record, name, tp.partition, tp, owner, deadline)
        chunk = Chunk(intake, plan.tag, deadline, factory, delivery)
        limit = core.dlq_limit
        if limit is not None and any(r.delivery_count > limit for r in intake.ranges):
            # Records past the dead-letter limit go to the router now, not when (or if) the
            # application reaches them: decode this answer at once (a rare one: redelivered
            # past the limit).
            live: list[Record] = []
            while (d := core.decode(chunk)) is not None:
                live.extend(d.records)
                chunk.decoded += d.nbytes
            if not live:
                return
            chunk.records = live
        core.buffer.push(chunk)

    async def _partition_error(
        self, tp: TopicIdPartition, action: Action, p: sf.PartitionData, resp: ShareFetchResponse
    ) -> None:
        code = p.error_code
        if action in (Action.LEADER_MOVED, Action.REFRESH_METADATA):
            await self._partition_moved(tp, action, code, p.current_leader, resp.node_endpoints)
            return
        err = errors.error_for_code(
            code, f"{tp.topic}-{tp.partition}: {p.error_message or ''}".rstrip(": ")
        )
        assert err is not None
        if action is Action.FATAL:
            self.core.fail(err)
        else:
            self.core.note_error(err)

    async def _partition_moved(
        self,
        tp: TopicIdPartition,
        action: Action,
        code: int,
        hint: _LeaderHint,
        endpoints: Sequence[_Endpoint],
    ) -> None:
        """Leadership moved (or the topic is unknown): drop this node's locks, re-route."""
        core = self.core
        core.partition_lost(tp, self.node_id, code)
        leader_id, leader_epoch = hint.leader_id, hint.leader_epoch
        applied = False
        if action is Action.LEADER_MOVED and leader_id >= 0 and leader_epoch >= 0:
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
        core.fetchers.ensure()

    def _renewed(
        self,
        plan: SharePlan | None,
        *,
        ok: bool,
        lock_ms: int = 0,
        codes: dict[TopicIdPartition, int] | None = None,
    ) -> None:
        """Move the lock deadline of records whose renew the broker accepted."""
        if plan is None or not plan.is_renew:
            return
        good, bad = renewed(plan, ok=ok, codes=codes)
        deadline = lock_deadline(anyio.current_time(), lock_ms) if good else None
        renewing = self.core.renewing
        failed = 0
        for key in [k for k in renewing if k[0] in good or k[0] in bad]:
            rec = renewing.pop(key)
            if key[0] in good and deadline is not None:
                rec.lock_deadline = deadline
            elif key[0] in bad:
                failed += 1
        if failed:
            # The records keep their old lock: a slow handler may lose them to another member.
            self.core.renewals_failed += failed
            logger.warning(
                "node %d: renewing the locks of %d records failed (partitions %s)",
                self.node_id,
                failed,
                ", ".join(sorted(str(tp) for tp in bad)),
            )

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
        if taken is not None:
            core.stats.on_acks_sent(time.monotonic(), taken.count)
        try:
            resp = await core.cluster.request(
                self.node_id,
                share_acknowledge_request(plan, core.config.group_id, core.member_id),
                timeout=core.config.request_timeout,
            )
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            verdict = transport_failed(session, core.ledger, plan)
            core.report(verdict.results)
            logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
            return
        verdict = answer_verdict(session, core.ledger, plan, resp.error_code)
        core.report(verdict.results)
        if verdict.proceed and taken is not None:
            names = core.cluster.metadata.topic_names
            core.report(core.ledger.complete(plan.tag, acknowledge_codes(resp, names)))


class FetcherPool:
    """The per-leader fetchers of one consumer (:class:`~sharecon._consumer.core.Fetchers`)."""

    def __init__(self, core: ConsumerCore) -> None:
        self.core = core
        self._fetchers: dict[int, NodeFetcher] = {}
        #: Some fetcher may be dry: answered() has work to do (a per-record check).
        self.any_dry = False

    def ensure(self) -> None:
        """Start a fetcher for every leader of an assigned partition that has none."""
        core = self.core
        for tp in core.assignment:
            leader = core.leader(tp)
            if leader is not None and leader >= 0 and leader not in self._fetchers:
                fetcher = NodeFetcher(core, leader, self)
                self._fetchers[leader] = fetcher
                core.tg.start_soon(fetcher.run, name=f"sharecon fetcher node {leader}")
        self.wake()

    def wake(self, node_id: int | None = None) -> None:
        """Wake one fetcher (or all of them)."""
        if node_id is None:
            for f in self._fetchers.values():
                f.wake.set()
        else:
            one = self._fetchers.get(node_id)
            if one is not None:
                one.wake.set()

    def answered(self) -> None:
        """The application answered records: wake the fetchers waiting for that (dry)."""
        if not self.any_dry:
            return
        self.any_dry = False
        for f in self._fetchers.values():
            if f.planner.answered():
                f.wake.set()

    def pending_acks(self) -> bool:
        """Whether any live session has acknowledgements marked or in flight."""
        ledger = self.core.ledger
        for f in self._fetchers.values():
            tag = f.session.tag
            if ledger.has_marked(tag) or ledger.in_flight(tag):
                return True
        return False

    def nodes(self) -> list[int]:
        """The leaders with a fetcher."""
        return list(self._fetchers)

    async def close(self) -> None:
        """Wait for every loop to stop, then close each share session (epoch -1)."""
        fetchers = list(self._fetchers.values())
        for f in fetchers:
            await f.stopped.wait()
        for f in fetchers:
            await f.close_session()
