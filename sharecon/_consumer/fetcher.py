"""One fetch loop per leader broker: the I/O around its share session.

Every decision lives in sans-I/O code: the share machine (:mod:`sharecon._share.machine`)
decides what to send, what an answer and each error mean, what an answer's records are;
the fetch loop (:mod:`sharecon._consumer.fetch_loop`, over the fetch driver) decides the
request lifecycle: when to plan, pause, idle, stop and close, and what a failure or a
cut means in each phase. The simulator runs the same fetch loop. This module only
carries out its actions (send, await, wait, pause, re-route) and reports what happened,
with the time.

Rules of this module:

1. One request in flight per session (the fetch loop's rule 2). Every action is carried
   out before the next is asked for; effects are carried out in order.
2. Anything that goes wrong while taking an answer in, whatever the exception, becomes a
   typed :class:`~sharecon.errors.KafkaError` given to the fetch loop (the session is
   reset): the consumer's task group never sees it.
3. The loop never raises: fatal errors go to :meth:`ConsumerCore.fail`.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, cast

import anyio

from sharecon import errors
from sharecon._backoff import RETRY_BACKOFF
from sharecon._consumer.fetch_driver import FetchDriver
from sharecon._consumer.fetch_loop import (
    Apply,
    Await,
    Done,
    FetchLoop,
    Idle,
    Pause,
    Phase,
    Send,
)
from sharecon._consumer.signal import Signal
from sharecon._net.connection import BrokerAddress, BrokerConnection
from sharecon._share.acks import describe
from sharecon._share.drain import FetchDrain
from sharecon._share.effects import Rediscover
from sharecon._share.leader_search import LeaderSearch, unrouted
from sharecon._share.requests import acknowledge_codes, fetch_ack_codes
from sharecon._share.session import RequestKind
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    import uuid
    from collections.abc import Mapping

    from sharecon._consumer.core import ConsumerCore
    from sharecon._net.cluster import ClusterSent
    from sharecon._share.effects import Effect
    from sharecon._share.machine import FetchAnswer, InFlight
    from sharecon.protocol import Response, ShareAcknowledgeResponse, ShareFetchResponse

logger = logging.getLogger("sharecon.consumer")


class _Wire(NamedTuple):
    """A request in flight: the loop's record of it, and the transport's handle."""

    f: InFlight
    sent: ClusterSent[Response]


class NodeFetcher:
    """The fetch loop's I/O for one leader broker (rules 1-3)."""

    def __init__(self, core: ConsumerCore, node_id: int, pool: FetcherPool) -> None:
        self.core = core
        self.node_id = node_id
        self.pool = pool
        cfg = core.config
        #: The loop's lifecycle and decisions (shared with the simulator): this class is
        #: only their I/O.
        self.loop = FetchLoop(
            FetchDriver(
                core.machine,
                core.buffer,
                node_id,
                partial(core.partitions_for, node_id),
                lambda: core.flush_requested > 0,
                core.clock,
            ),
            core.member_id,
            running=lambda: not core.closing and core.fatal is None,
            closing=core.is_closing,
            backoff=RETRY_BACKOFF,
            timeout=cfg.max_wait_ms / 1000 + cfg.request_timeout,
            ack_timeout=cfg.request_timeout,
            ack_linger=cfg.ack_linger,
            counts=pool,
        )
        self.wake = Signal()
        self.stopped = anyio.Event()
        #: The connection the session lives on; when it closes, the session is over.
        self._conn: BrokerConnection | None = None
        #: The request on the wire.
        self._wire: _Wire | None = None
        #: The answer being taken in, and when it came (for the counters).
        self._resp: ShareFetchResponse | None = None
        self._resp_at = 0.0

    @property
    def driver(self) -> FetchDriver:
        """The loop's decisions (the order of the share machine's calls)."""
        return self.loop.driver

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch and acknowledge until the consumer closes (never raises: rule 3)."""
        try:
            while await self._step(closing=False):
                pass
        except errors.KafkaError as exc:
            self.core.fail(exc)
        finally:
            self.pool.loop_ended(self.node_id)
            self.stopped.set()

    async def _step(self, *, closing: bool) -> bool:
        """Carry out the loop's next action; ``False`` once it stopped (or closed)."""
        loop = self.loop
        self._check_connection()
        try:
            a = loop.next(anyio.current_time())
        except Exception as exc:  # rule 2: the answer's records could not be taken in
            if not loop.answer_error(self._typed(exc), anyio.current_time()):
                raise
            return True
        kind = type(a)
        if kind is Apply:
            await self._carry(cast("Apply", a), closing=closing)
        elif kind is Send:
            await self._send(cast("Send", a))
        elif kind is Await:
            await self._await(cast("Await", a))
        elif kind is Done:
            self.core.progress.set()
        elif kind is Idle:
            await self._idle(cast("Idle", a))
        elif kind is Pause:
            await self._pause(cast("Pause", a))
        else:  # Stopped, Closed
            return False
        return True

    async def _carry(self, a: Apply, *, closing: bool) -> None:
        loop = self.loop
        if a.answer is not None and a.f is not None and self._resp is not None:
            self._answered(a.f, self._resp, self._resp_at, a.answer)
        try:
            await self._apply(a.effects, closing=closing)
        except Exception as exc:  # rule 2
            if not loop.answering or not loop.answer_error(self._typed(exc), anyio.current_time()):
                raise

    async def _apply(self, effects: list[Effect], *, closing: bool = False) -> None:
        """Carry out ``effects``, in order (rule 1); re-routing waits for metadata, unless
        closing."""
        for e in effects:
            if type(e) is Rediscover and not closing:
                await self._rediscover(e)
            else:
                self.core.apply(e)

    async def _idle(self, a: Idle) -> None:
        # Acks waiting: send them after the linger even if no fetch is due; dry: fetch again.
        woke = await self.wake.wait(timeout=a.timeout if a.timeout is not None else 1.0)
        if not woke:
            self.loop.idle_expired()

    async def _send(self, a: Send) -> None:
        """Put the request on the wire, and tell the loop whether it went."""
        core, loop = self.core, self.loop
        try:
            sent = await core.cluster.send(self.node_id, a.body)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            if a.final:
                logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
            else:
                self._unreachable(exc)
            loop.send_failed(anyio.current_time())
            return
        conn = sent.connection
        if not a.final and conn is not self._conn:
            self._conn = conn
            core.tg.start_soon(self._watch, conn, name=f"sharecon watch node {self.node_id}")
        if a.taken is not None:
            core.stats.on_acks_sent(time.monotonic(), a.taken.count)
        f = loop.sent(anyio.current_time())
        self._wire = _Wire(f, sent)
        if logger.isEnabledFor(logging.DEBUG):
            # Which offsets went in which session's request: what a double acceptance or a
            # lost answer is traced back with (see docs/troubleshooting.md).
            plan = f.plan
            logger.debug(
                "%s node %d: sent %s gen %d epoch %d on %s%s: acks %s",
                core.member_id,
                self.node_id,
                plan.kind.value,
                plan.tag.generation,
                plan.epoch,
                conn,
                " (renew)" if plan.is_renew else "",
                describe(plan.acks),
            )

    async def _await(self, a: Await) -> None:
        """Wait for the answer to the request out, and give it (or its failure) to the loop."""
        core, loop, w = self.core, self.loop, self._wire
        assert w is not None and w.f is a.f
        try:
            resp = await w.sent.wait(a.timeout)
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            if loop.phase is not Phase.CLOSING:
                self._unreachable(exc)
            else:
                logger.info("node %d: closing the share session failed: %s", self.node_id, exc)
            loop.failed(anyio.current_time(), timed_out=isinstance(exc, errors.KafkaTimeoutError))
            return
        except Exception as exc:  # rule 2: an answer we could not read
            loop.answer_error(self._typed(exc), anyio.current_time())
            return
        finally:
            self._wire = None
        names = core.cluster.metadata.topic_names
        if a.f.plan.kind is RequestKind.SHARE_FETCH and loop.phase is not Phase.CLOSING:
            fetched = cast("ShareFetchResponse", resp)
            unknown = {t.topic_id for t in fetched.responses} - names.keys()
            if unknown and fetched.error_code == 0:
                try:
                    await core.cluster.refresh_metadata(core.membership.topics, topic_ids=unknown)
                except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                    logger.info("node %d: metadata refresh failed: %s", self.node_id, exc)
                names = core.cluster.metadata.topic_names
            self._resp = fetched
        now = anyio.current_time()
        self._resp_at = now
        if logger.isEnabledFor(logging.DEBUG) and a.f.plan.acks:
            self._log_ack_answer(a.f, resp, names)
        loop.answered(resp, names, now)  # type: ignore[arg-type]

    async def _watch(self, conn: BrokerConnection) -> None:
        # Wake the loop the moment the session's connection dies, so records buffered
        # from it are dropped before the application takes them (they are released).
        await conn.wait_closed()
        self.wake.set()

    def _log_ack_answer(
        self,
        f: InFlight,
        resp: Response,
        names: Mapping[uuid.UUID, str],
    ) -> None:
        plan = f.plan
        if plan.kind is RequestKind.SHARE_FETCH:
            fetched = cast("ShareFetchResponse", resp)
            code, codes = fetched.error_code, fetch_ack_codes(fetched, names)
        else:
            acked = cast("ShareAcknowledgeResponse", resp)
            code, codes = acked.error_code, acknowledge_codes(acked, names)
        logger.debug(
            "%s node %d: %s gen %d epoch %d answered: error %d, acks %s",
            self.core.member_id,
            self.node_id,
            plan.kind.value,
            plan.tag.generation,
            plan.epoch,
            code,
            describe(plan.acks, codes),
        )

    def _check_connection(self) -> None:
        conn = self._conn
        if conn is None or not conn.closed:
            return
        self._conn = None
        self.loop.connection_closed()

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

    async def _pause(self, a: Pause) -> None:
        core = self.core
        if a.refresh:
            try:
                await core.cluster.refresh_metadata(core.membership.topics)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
                pass
            core.fetchers.ensure()
        # Wake-ups (room in the buffer, acks to send) do not cut the pause short; closing does.
        running = self.loop.running
        while running():
            left = a.until - anyio.current_time()
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

    async def close_session(self, timeout: float | None = None) -> None:
        """Send the FINAL (-1) ShareAcknowledge with the last acks; the broker then releases
        every record still acquired by this member on this node. Its answer is awaited
        ``timeout`` seconds at most (``None``: the request timeout)."""
        self.loop.close(timeout)
        while await self._step(closing=True):
            pass


class FetcherPool:
    """The per-leader fetchers of one consumer (:class:`~sharecon._consumer.core.Fetchers`)."""

    def __init__(self, core: ConsumerCore) -> None:
        self.core = core
        self._fetchers: dict[int, NodeFetcher] = {}
        #: The fetches that could still bring records (``ShareConsumer.stop_fetching()``).
        self.drain = FetchDrain()
        #: Set once fetching stopped and no fetch is outstanding (:mod:`sharecon._share.drain`).
        self.drained = anyio.Event()
        #: Whether a search for missing leaders runs (:meth:`ensure`).
        self._searching = False

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
        """Start a fetcher for every leader of an assigned partition that has none, and a
        search for the leaders the metadata does not know (:mod:`.leader_search`)."""
        core = self.core
        missing = False
        for tp in core.assignment:
            leader = core.leader(tp)  # None while unknown (never negative)
            if leader is None:
                missing = True
            elif leader not in self._fetchers:
                fetcher = NodeFetcher(core, leader, self)
                self._fetchers[leader] = fetcher
                core.tg.start_soon(fetcher.run, name=f"sharecon fetcher node {leader}")
        if missing and not self._searching and self._running():
            self._searching = True
            core.tg.start_soon(self._search_leaders, name="sharecon leader search")
        self.wake()

    def _running(self) -> bool:
        core = self.core
        return not core.closing and core.fatal is None and core.machine.subscribed

    async def _search_leaders(self) -> None:
        """Look the missing leaders up until the metadata knows every one (rules 2, 3 of
        :mod:`sharecon._share.leader_search`); each found one gets its fetcher."""
        core, search = self.core, LeaderSearch()
        try:
            while self._running():
                missing = unrouted(core.assignment, core.cluster.metadata.leader_for)
                looked = search.lookups
                wait = search.next_wait(bool(missing))
                if wait is None:
                    if looked:
                        logger.info(
                            "share consumer %s: every partition has a leader again", core.member_id
                        )
                    return
                if not looked:
                    logger.info(
                        "share consumer %s: no leader known for %s; looking again",
                        core.member_id,
                        ", ".join(f"{tp.topic or tp.topic_id}-{tp.partition}" for tp in missing),
                    )
                await anyio.sleep(wait)
                try:
                    await core.cluster.refresh_metadata(
                        core.membership.topics, topic_ids={tp.topic_id for tp in missing}
                    )
                except errors.KafkaError as exc:
                    # Kept looking (a task of the consumer's group must not raise); one that
                    # retrying cannot fix is said where it can be seen.
                    level = logging.DEBUG if exc.retriable else logging.INFO
                    logger.log(level, "looking for leaders: metadata refresh failed: %s", exc)
                self._name_assignment()
                self.ensure()
        finally:
            self._searching = False

    def _name_assignment(self) -> None:
        # An assignment taken while its metadata could not be read (heartbeat._assign)
        # has partitions without their topic's name: named once the metadata knows it.
        core = self.core
        if all(tp.topic is not None for tp in core.assignment):
            return
        names = core.cluster.metadata.topic_names
        core.assignment = frozenset(
            tp
            if tp.topic is not None
            else TopicIdPartition(tp.topic_id, tp.partition, names.get(tp.topic_id))
            for tp in core.assignment
        )

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

    async def close(self, timeout: float | None = None) -> None:
        """Wait for every loop to stop, then close each share session (epoch -1), their
        answers awaited ``timeout`` seconds in all at most: an answer that never comes
        must not take the time the close has left for leaving the group."""
        fetchers = list(self._fetchers.values())
        for f in fetchers:
            await f.stopped.wait()
        deadline = None if timeout is None else anyio.current_time() + timeout
        for f in fetchers:
            left = None if deadline is None else max(0.0, deadline - anyio.current_time())
            await f.close_session(left)
