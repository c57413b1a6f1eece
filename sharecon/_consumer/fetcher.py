"""One fetch loop per leader broker: the I/O around its share session.

Every decision lives in the sans-I/O machine (:mod:`sharecon._share.machine`): what to
send next, what an answer and each error mean, what an answer's records are, and the
order all of that happens in. This module sends, waits, tells the machine what happened
(and when), and carries out the effects it returns (:mod:`sharecon._share.effects`).

Rules of this module:

1. One request in flight per session. Right after every event it gives the machine, the
   loop drains and applies the effects, in order: the effects are that event's.
2. A ShareFetch answer is given to the machine in two steps (its session part, then its
   records) with the pipelined next request sent in between, when the machine says so.
3. Anything that goes wrong while taking an answer in, whatever the exception, becomes a
   typed :class:`~sharecon.errors.KafkaError` given to the machine (it resets the
   session): the consumer's task group never sees it.
4. The loop never raises: fatal errors go to :meth:`ConsumerCore.fail`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, NamedTuple, cast

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._consumer.signal import Signal
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._share.drain import FetchDrain
from sharecon._share.effects import BackOff, Rediscover
from sharecon._share.fetch_policy import Turn
from sharecon._share.session import RequestKind

if TYPE_CHECKING:
    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.cluster import ClusterSent
    from sharecon._share.machine import InFlight
    from sharecon.protocol import Response, ShareAcknowledgeResponse, ShareFetchResponse

logger = logging.getLogger("sharecon.consumer")


class _Wire(NamedTuple):
    """A request in flight: the machine's record of it, and the transport's handle."""

    f: InFlight
    # The body type follows f.plan.kind; _finish casts accordingly.
    sent: ClusterSent[Response]


class NodeFetcher:
    """The fetch loop and share session I/O for one leader broker (rules 1-4)."""

    def __init__(self, core: ConsumerCore, node_id: int, pool: FetcherPool) -> None:
        self.core = core
        self.machine = core.machine
        self.node_id = node_id
        self.pool = pool
        self.machine.leader(node_id)
        self.wake = Signal()
        self.stopped = anyio.Event()
        self._backoff = RETRY_BACKOFF
        self._failures = 0
        cfg = core.config
        self._timeout = cfg.max_wait_ms / 1000 + cfg.request_timeout
        #: The connection the session lives on; when it closes, the session is over.
        self._conn: BrokerConnection | None = None

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch and acknowledge until the consumer closes (never raises: rule 4)."""
        core = self.core
        inflight: _Wire | None = None
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
            self.pool.loop_ended(self.node_id)
            self.stopped.set()

    async def _apply(self) -> None:
        """Carry out the machine's effects, in order (rule 1)."""
        for e in self.machine.drain():
            if type(e) is BackOff:
                await self._back_off(refresh=e.refresh)
            elif type(e) is Rediscover:
                await self._rediscover(e)
            else:
                self.core.apply(e)

    async def _idle(self) -> None:
        # Acks waiting: send them after the linger even if no fetch is due.
        linger = self.machine.idle_timeout(self.node_id, self.core.config.ack_linger)
        woke = await self.wake.wait(timeout=linger if linger is not None else 1.0)
        if not woke and linger is not None:
            self.machine.linger_expired(self.node_id)

    def _turn(self, extra_records: int = 0, extra_bytes: int = 0) -> Turn:
        core = self.core
        buffer = core.buffer
        room = buffer.has_room(extra_records, extra_bytes) or (
            # One answer ahead of the application, past the default record bound, when
            # both can be handled within the lock (rule 7 of _share.fetch_size).
            buffer.single_chunk(extra_records)
            and buffer.nbytes + extra_bytes < buffer.max_bytes
            and self.machine.leader(self.node_id).sizer.overlap_fits(buffer.records + extra_records)
        )
        return self.machine.next_turn(
            self.node_id,
            core.partitions_for(self.node_id),
            room=room,
            urgent=core.flush_requested > 0,
            extra_records=extra_records,
            now=core.clock(),
        )

    async def _start(self, turn: Turn) -> _Wire | None:
        """Put ``turn`` on the wire; ``None`` if that failed (already handled)."""
        core, machine = self.core, self.machine
        assert turn.plan is not None
        fetches = turn.plan.fetches
        if fetches:  # counted before the send (rule 1 of _share.drain)
            self.pool.fetch_planned(self.node_id)
        body = machine.request(turn, core.member_id)
        try:
            sent = await core.cluster.send(self.node_id, body)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            if fetches:
                self.pool.fetch_ended(self.node_id)
            machine.send_failed(self.node_id, turn)
            self._unreachable(exc)
            await self._apply()
            return None
        conn = sent.connection
        if conn is not self._conn:
            self._conn = conn
            core.tg.start_soon(self._watch, conn, name=f"sharecon watch node {self.node_id}")
        if turn.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), turn.taken.count)
        # The buffer's backlog: whether the application set the pace of the acks it carries.
        backlog = core.buffer.records > 0
        return _Wire(machine.sent(self.node_id, turn, anyio.current_time(), backlog=backlog), sent)

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
        self.machine.connection_lost(self.node_id)
        for e in self.machine.drain():  # no back-off or re-routing here
            self.core.apply(e)

    async def _finish(self, w: _Wire, *, pipeline: bool) -> _Wire | None:
        """Take the answer to ``w``; with ``pipeline``, the next request may be sent
        before this answer's records are taken in (rule 2)."""
        core, machine, f = self.core, self.machine, w.f
        nxt: _Wire | None = None
        try:
            if f.plan.kind is RequestKind.SHARE_FETCH:
                timeout = machine.fetch_timeout(f, self._timeout)
                resp = cast("ShareFetchResponse", await w.sent.wait(timeout))
                nxt = await self._on_fetch(f, resp, pipeline=pipeline)
            else:
                ack = cast(
                    "ShareAcknowledgeResponse", await w.sent.wait(core.config.request_timeout)
                )
                names = core.cluster.metadata.topic_names
                machine.acknowledge_answered(f, ack, names, anyio.current_time())
                await self._apply()
            self._failures = 0
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            machine.request_failed(f, timed_out=isinstance(exc, errors.KafkaTimeoutError))
            self._unreachable(exc)
            await self._apply()
        except Exception as exc:  # rule 3: an answer we could not take in
            machine.answer_failed(self.node_id, self._typed(exc), f)
            await self._apply()
        finally:
            if f.plan.fetches:  # its records are in the buffer now, or it failed
                self.pool.fetch_ended(self.node_id)
            core.progress.set()
        return nxt

    async def _on_fetch(
        self, f: InFlight, resp: ShareFetchResponse, *, pipeline: bool
    ) -> _Wire | None:
        core, machine = self.core, self.machine
        names = core.cluster.metadata.topic_names
        unknown = {t.topic_id for t in resp.responses} - names.keys()
        if unknown and resp.error_code == 0:
            try:
                await core.cluster.refresh_metadata(core.membership.topics, topic_ids=unknown)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                logger.info("node %d: metadata refresh failed: %s", self.node_id, exc)
            names = core.cluster.metadata.topic_names
        now = anyio.current_time()
        answer = machine.fetch_answered(
            f, resp, names, now, pipeline=pipeline and not core.closing and core.fatal is None
        )
        core.stats.on_fetch(
            time.monotonic(), now - f.sent_at, answer.acquired, answer.size, resp.throttle_time_ms
        )
        if logger.isEnabledFor(logging.DEBUG):
            plan = f.plan
            logger.debug(
                "node %d: ShareFetch epoch %d (+%d -%d, %d acks%s) answered in %.1f ms: %d records",
                self.node_id,
                plan.epoch,
                len(plan.added),
                len(plan.forgotten),
                f.taken.count if f.taken else 0,
                ", renew" if plan.is_renew else "",
                (now - f.sent_at) * 1000,
                answer.acquired,
            )
        await self._apply()
        if not answer.proceed:
            return None
        nxt: _Wire | None = None
        if answer.pipeline:
            # The machine has ended our earlier hold of what this answer re-acquired; the
            # next request goes out before the records come in (pipelining).
            turn = self._turn(answer.acquired, answer.size)
            if turn.plan is not None:
                nxt = await self._start(turn)
        try:
            machine.fetch_records(f, resp, names, closing=core.closing)
        except BaseException:
            if nxt is not None and nxt.f.plan.fetches:
                self.pool.fetch_ended(self.node_id)  # the pipelined fetch is abandoned
            raise
        await self._apply()
        return nxt

    # -- failures -------------------------------------------------------------------------

    def _unreachable(self, exc: errors.KafkaError) -> None:
        logger.info("node %d: %s; share session reset", self.node_id, exc)
        self.core.note_unreachable(self.node_id, exc)

    def _typed(self, exc: Exception) -> errors.KafkaError:
        if isinstance(exc, errors.KafkaError):
            return exc
        logger.error("node %d: unexpected error taking in an answer", self.node_id, exc_info=exc)
        return errors.RemoteProtocolError(
            f"node {self.node_id}: could not take in the answer: {type(exc).__name__}: {exc}"
        )

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

    async def _rediscover(self, e: Rediscover) -> None:
        """Find a partition's leader again: the answer's hint, else fresh metadata."""
        core, tp = self.core, e.tp
        applied = False
        if e.leader_id >= 0:
            endpoint = None
            if e.endpoint is not None:
                endpoint = BrokerAddress(e.endpoint[0], e.endpoint[1], e.leader_id)
            applied = core.cluster.apply_leader_hint(
                tp.topic_id, tp.partition, e.leader_id, e.leader_epoch, endpoint
            )
        if not applied:
            try:
                await core.cluster.refresh_metadata(core.membership.topics, topic_ids=[tp.topic_id])
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                logger.info(
                    "metadata refresh after %s failed: %s", errors.error_for_code(e.code), exc
                )
        core.fetchers.ensure()

    # -- close ----------------------------------------------------------------------------

    async def close_session(self) -> None:
        """Send the FINAL (-1) ShareAcknowledge with the last acks; the broker then releases
        every record still acquired by this member on this node."""
        core, machine = self.core, self.machine
        f = machine.close_session(self.node_id, anyio.current_time())
        if f is None:
            return
        if f.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), f.taken.count)
        body = machine.request(Turn(f.plan), core.member_id)
        try:
            resp = await core.cluster.request(
                self.node_id, body, timeout=core.config.request_timeout
            )
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            machine.transport_failed(self.node_id, f.plan, back_off=False)
            logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
        else:
            machine.close_answered(
                f, cast("ShareAcknowledgeResponse", resp), core.cluster.metadata.topic_names
            )
        for e in machine.drain():  # closing: nothing to back off or re-route
            core.apply(e)


class FetcherPool:
    """The per-leader fetchers of one consumer (:class:`~sharecon._consumer.core.Fetchers`)."""

    def __init__(self, core: ConsumerCore) -> None:
        self.core = core
        self._fetchers: dict[int, NodeFetcher] = {}
        #: The fetches that could still bring records (``ShareConsumer.stop_fetching()``).
        self.drain = FetchDrain()
        #: Set once fetching stopped and no fetch is outstanding (:mod:`sharecon._share.drain`).
        self.drained = anyio.Event()

    def stop_fetching(self) -> None:
        """Fetch no more; :attr:`drained` is set once no fetch is outstanding."""
        self.core.buffer.stopped = True
        self._done(self.drain.stop())

    def fetch_planned(self, node_id: int) -> None:
        """``node_id``'s loop planned a fetch that may acquire records."""
        self.drain.planned(node_id)

    def fetch_ended(self, node_id: int) -> None:
        """One of ``node_id``'s fetches is over (its records in the buffer, or failed)."""
        self._done(self.drain.ended(node_id))

    def loop_ended(self, node_id: int) -> None:
        """``node_id``'s loop ended: none of its fetches is outstanding."""
        self._done(self.drain.loop_ended(node_id))

    def _done(self, drained: bool) -> None:
        if drained:
            self.drained.set()

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
