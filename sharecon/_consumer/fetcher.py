"""One fetch loop per leader broker: the I/O around its share session.

Every decision lives in the sans-I/O machine (:mod:`sharecon._share.machine`): what to
send next, what an answer and each error mean, what an answer's records are. The order
of the machine's calls is the fetch driver's (:mod:`sharecon._consumer.fetch_driver`),
which the simulator runs too. This module sends, waits, tells the driver what happened
(and when), and carries out the steps and effects it returns
(:mod:`sharecon._share.effects`); it calls the machine itself for nothing else.

Rules of this module:

1. One request in flight per session. Right after every event it gives the driver, the
   loop applies the effects it returned, in order: the effects are that event's.
2. A ShareFetch answer is given to the driver, whose steps take it in two parts (its
   session part, then its records) with the pipelined next request sent in between,
   when the machine says so.
3. Anything that goes wrong while taking an answer in, whatever the exception, becomes a
   typed :class:`~sharecon.errors.KafkaError` given to the machine (it resets the
   session): the consumer's task group never sees it.
4. The loop never raises: fatal errors go to :meth:`ConsumerCore.fail`.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, cast

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._consumer.fetch_driver import Apply, FetchDriver, Send
from sharecon._consumer.signal import Signal
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._share.drain import FetchDrain
from sharecon._share.effects import BackOff, Rediscover
from sharecon._share.session import RequestKind

if TYPE_CHECKING:
    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.cluster import ClusterSent
    from sharecon._share.effects import Effect
    from sharecon._share.fetch_policy import Turn
    from sharecon._share.machine import FetchAnswer, InFlight
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
        self.node_id = node_id
        self.pool = pool
        #: The loop's decisions and the order of the machine's calls (shared with the
        #: simulator): this class is only their I/O.
        self.driver = FetchDriver(
            core.machine,
            core.buffer,
            node_id,
            partial(core.partitions_for, node_id),
            lambda: core.flush_requested > 0,
            core.clock,
        )
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

    async def _apply(self, effects: list[Effect]) -> None:
        """Carry out ``effects``, in order (rule 1)."""
        for e in effects:
            if type(e) is BackOff:
                await self._back_off(refresh=e.refresh)
            elif type(e) is Rediscover:
                await self._rediscover(e)
            else:
                self.core.apply(e)

    async def _idle(self) -> None:
        # Acks waiting: send them after the linger even if no fetch is due.
        linger = self.driver.idle_timeout(self.core.config.ack_linger)
        woke = await self.wake.wait(timeout=linger if linger is not None else 1.0)
        if not woke and linger is not None:
            self.driver.linger_expired()

    def _turn(self) -> Turn:
        return self.driver.turn()

    async def _start(self, turn: Turn) -> _Wire | None:
        """Put ``turn`` on the wire; ``None`` if that failed (already handled)."""
        core = self.core
        assert turn.plan is not None
        fetches = turn.plan.fetches
        if fetches:  # counted before the send (rule 1 of _share.drain)
            self.pool.fetch_planned(self.node_id)
        body = self.driver.request(turn, core.member_id)
        try:
            sent = await core.cluster.send(self.node_id, body)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            if fetches:
                self.pool.fetch_ended(self.node_id)
            effects = self.driver.send_failed(turn)
            self._unreachable(exc)
            await self._apply(effects)
            return None
        conn = sent.connection
        if conn is not self._conn:
            self._conn = conn
            core.tg.start_soon(self._watch, conn, name=f"sharecon watch node {self.node_id}")
        if turn.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), turn.taken.count)
        return _Wire(self.driver.sent(turn, anyio.current_time()), sent)

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
        for e in self.driver.connection_lost():  # no back-off or re-routing here
            self.core.apply(e)

    async def _finish(self, w: _Wire, *, pipeline: bool) -> _Wire | None:
        """Take the answer to ``w``; with ``pipeline``, the next request may be sent
        before this answer's records are taken in (rule 2)."""
        core, f = self.core, w.f
        nxt: _Wire | None = None
        try:
            if f.plan.kind is RequestKind.SHARE_FETCH:
                timeout = self.driver.fetch_timeout(f, self._timeout)
                resp = cast("ShareFetchResponse", await w.sent.wait(timeout))
                nxt = await self._on_fetch(f, resp, pipeline=pipeline)
            else:
                ack = cast(
                    "ShareAcknowledgeResponse", await w.sent.wait(core.config.request_timeout)
                )
                names = core.cluster.metadata.topic_names
                await self._apply(
                    self.driver.acknowledge_answer(f, ack, names, anyio.current_time())
                )
            self._failures = 0
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            timed_out = isinstance(exc, errors.KafkaTimeoutError)
            effects = self.driver.request_failed(f, timed_out=timed_out)
            self._unreachable(exc)
            await self._apply(effects)
        except Exception as exc:  # rule 3: an answer we could not take in
            await self._apply(self.driver.answer_failed(self._typed(exc), f))
        finally:
            if f.plan.fetches:  # its records are in the buffer now, or it failed
                self.pool.fetch_ended(self.node_id)
            core.progress.set()
        return nxt

    async def _on_fetch(
        self, f: InFlight, resp: ShareFetchResponse, *, pipeline: bool
    ) -> _Wire | None:
        core = self.core
        names = core.cluster.metadata.topic_names
        unknown = {t.topic_id for t in resp.responses} - names.keys()
        if unknown and resp.error_code == 0:
            try:
                await core.cluster.refresh_metadata(core.membership.topics, topic_ids=unknown)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                logger.info("node %d: metadata refresh failed: %s", self.node_id, exc)
            names = core.cluster.metadata.topic_names
        now = anyio.current_time()
        # The order of the machine's calls is the driver's (rule 2); this only sends,
        # carries out effects and counts.
        steps = self.driver.fetch_answer(
            f,
            resp,
            names,
            now,
            pipeline=pipeline and not core.closing and core.fatal is None,
            closing=core.is_closing,
        )
        nxt: _Wire | None = None
        try:
            for step in steps:
                if type(step) is Send:
                    nxt = await self._start(step.turn)
                    continue
                assert type(step) is Apply
                if step.answer is not None:
                    self._answered(f, resp, now, step.answer)
                await self._apply(step.effects)
        except BaseException:
            if nxt is not None:
                self.driver.abandon(nxt.f)  # the pipelined fetch is abandoned
                if nxt.f.plan.fetches:
                    self.pool.fetch_ended(self.node_id)
            raise
        return nxt

    def _answered(
        self, f: InFlight, resp: ShareFetchResponse, now: float, answer: FetchAnswer
    ) -> None:
        """Count (and at DEBUG log) the session part of a ShareFetch answer."""
        self.core.stats.on_fetch(
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
        core = self.core
        final = self.driver.close_session(anyio.current_time(), core.member_id)
        if final is None:
            return
        f, body = final
        if f.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), f.taken.count)
        try:
            resp = await core.cluster.request(
                self.node_id, body, timeout=core.config.request_timeout
            )
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            effects = self.driver.close_failed(f)
            logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
        else:
            effects = self.driver.close_answered(
                f, cast("ShareAcknowledgeResponse", resp), core.cluster.metadata.topic_names
            )
        for e in effects:  # closing: nothing to back off or re-route
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
