"""A sans-I/O model of one Kafka broker's share-group side: share sessions and partitions.

:class:`ModelBroker` answers :class:`~sharecon.protocol.messages.share_fetch.ShareFetchRequest`
and :class:`~sharecon.protocol.messages.share_acknowledge.ShareAcknowledgeRequest` bodies
with the response bodies Kafka would send, and takes the events a real broker sees from
outside: a connection closing, a leader change, time passing. Every call takes ``now``
(seconds on a virtual clock); the model never reads a clock and never draws a random
number, so a simulator can step it deterministically and inject faults (seeded by the
simulator) through :meth:`ModelBroker.disconnect`, :meth:`ModelBroker.disconnect_many`,
:meth:`ModelBroker.move_leader` and :meth:`ModelBroker.evict_session`.

The rules follow Kafka's ``SharePartitionManager``, ``ShareSessionCache`` and
``SharePartition`` (4.1 to 4.4; see :class:`~sharecon.testing.model.behaviour.Behaviour`):

* A share session is keyed by (group, member). ShareFetch epoch 0 replaces any session of
  that key **without releasing** its records, and binds the new one to the connection it
  came on; epoch -1 (final) and a closed connection release the member's records.
* When a connection closes, its session's member "leaves" (its records are released), and
  when a group has no session left on the broker, the broker drops the group's share
  partitions from memory. They are built again from the persisted state on the next fetch.
* When the sessions of a group end at once (a proxy that closes every connection, a client
  process that dies) and the group's last session is removed before another member's
  release has run, the group's share partitions are dropped first and that release finds
  nothing: Kafka logs ``No share partition found ... while releasing acquired topic
  partitions``. Those records were acquired, never persisted as such, and the next fetch
  (``Initialized share partition ... with persister read state``) hands them out with the
  **same** delivery count. :meth:`ModelBroker.disconnect_many` with ``concurrent=True``
  plays that order (the threads of a real broker may or may not take it).
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.share_acknowledge import (
    LeaderIdAndEpoch as AckLeader,
)
from sharecon.protocol.messages.share_acknowledge import (
    PartitionData as AckPartitionData,
)
from sharecon.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from sharecon.protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from sharecon.protocol.records import Record, encode_batch
from sharecon.testing.model.behaviour import Behaviour
from sharecon.testing.model.partition import (
    GroupSettings,
    PartitionLog,
    RecordState,
    SharePartitionModel,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BrokerEvent", "ModelBroker", "SessionKey", "TopicPartitionId"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Seconds a release rides to the share coordinator and back before the records can be
#: acquired again, where the broker answers before that (acknowledgements on a ShareFetch,
#: a final ShareFetch or ShareAcknowledge). A request that comes sooner races the write on a
#: real broker; the model says it loses.
PERSIST_DELAY = 0.05

TopicPartitionId = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]  # (group, member)


@dataclass(frozen=True, slots=True)
class BrokerEvent:
    """Something the broker would log (the model's trace; Kafka's wording in ``what``)."""

    at: float
    what: str
    group: str = ""
    member: str = ""


@dataclass(slots=True)
class _Session:
    key: SessionKey
    epoch: int
    connection: str
    partitions: list[TopicPartitionId] = field(default_factory=list)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ModelBroker:
    """One broker leading every partition of the model's topics.

    :param version: the Kafka line to imitate (``"4.1"`` .. ``"4.4"``).
    :param node_id: reported as the leader in answers.
    """

    version: str = "4.4"
    node_id: int = 1
    behaviour: Behaviour = field(init=False)
    topics: dict[str, uuid.UUID] = field(default_factory=dict, init=False)
    logs: dict[TopicPartitionId, PartitionLog] = field(default_factory=dict, init=False)
    leader_epochs: dict[TopicPartitionId, int] = field(default_factory=dict, init=False)
    #: partitions with no leader now (an election under way, the leader gone): every
    #: request about them is answered NOT_LEADER_OR_FOLLOWER, naming no leader
    leaderless: set[TopicPartitionId] = field(default_factory=set, init=False)
    groups: dict[str, GroupSettings] = field(default_factory=dict, init=False)
    #: the share-partition cache: (group, topic partition) -> share partition
    partitions: dict[tuple[str, TopicPartitionId], SharePartitionModel] = field(
        default_factory=dict, init=False
    )
    #: what the share coordinator persisted, per (group, topic partition)
    persister: dict[
        tuple[str, TopicPartitionId], tuple[int, dict[int, tuple[RecordState, int]]]
    ] = field(default_factory=dict, init=False)
    sessions: dict[SessionKey, _Session] = field(default_factory=dict, init=False)
    #: connection -> (session key, stale); stale once the session was replaced or closed
    connections: dict[str, tuple[SessionKey, bool]] = field(default_factory=dict, init=False)
    #: connections whose session an epoch-0 request on another connection replaced (their
    #: close still ends the member's session on 4.1: Behaviour.old_connection_ends_session)
    replaced: set[str] = field(default_factory=set, init=False)
    events: list[BrokerEvent] = field(default_factory=list, init=False)
    #: the start offset each share state was last written with (what an admin reads;
    #: see ``SharePartitionModel.written_start``), kept while a partition is not loaded
    written_starts: dict[tuple[str, TopicPartitionId], int] = field(
        default_factory=dict, init=False
    )
    #: how each record the start offset moved past ended (ACKNOWLEDGED or ARCHIVED), per
    #: (group, topic partition), across rebuilds: for checkers (the broker forgets it)
    finished: dict[tuple[str, TopicPartitionId], dict[int, RecordState]] = field(
        default_factory=dict, init=False
    )
    #: The bytes of the log batch starting at an offset, if known (a broker serving real
    #: batches sets it): then a ShareFetch's ``MaxBytes`` is honoured as Kafka's read of
    #: the log does: each partition may read ``MaxBytes`` split evenly over the session's
    #: partitions, within what the partitions before it left of ``MaxBytes``, and only the
    #: first partition that gives records may give one whole batch larger than that.
    #: ``None`` (the core simulation's model, whose records have no size): records only.
    batch_bytes: Callable[[TopicPartitionId, int], int] | None = field(default=None, init=False)
    #: Every record a member's acknowledgement released, as ``(group, member, topic
    #: partition, offset, delivery count)``, once a checker turned the log on (``None``,
    #: the default: off). Observation only: what a client must count as spent unseen.
    release_log: list[tuple[str, str, TopicPartitionId, int, int]] | None = field(
        default=None, init=False
    )

    def __post_init__(self) -> None:
        self.behaviour = Behaviour.for_version(self.version)

    # -- arranging ---------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, topic_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        """Create a topic; returns its id (a fresh one unless given)."""
        tid = topic_id or uuid.uuid4()
        self.topics[name] = tid
        for p in range(partitions):
            self.logs[(tid, p)] = PartitionLog()
            self.leader_epochs[(tid, p)] = 0
        return tid

    def produce(self, topic: str, partition: int, records: int | list[bytes]) -> tuple[int, int]:
        """Append one batch: ``records`` records without values, or these values; returns
        its first and last offsets."""
        log = self.logs[(self.topics[topic], partition)]
        if isinstance(records, int):
            return log.append(records)
        return log.append(len(records), list(records))

    def configure_group(
        self,
        group: str,
        *,
        lock_ms: int | None = None,
        delivery_limit: int | None = None,
        max_locks: int | None = None,
        earliest: bool | None = None,
        renew_enabled: bool | None = None,
    ) -> GroupSettings:
        """Set group configs (``share.record.lock.duration.ms`` etc.); unset ones keep
        their values. Applies to share partitions loaded afterwards and, like Kafka's
        dynamic group configs, to the lock duration and limits of loaded ones."""
        s = self.groups.setdefault(group, GroupSettings())
        if lock_ms is not None:
            s.lock_ms = lock_ms
        if delivery_limit is not None:
            s.delivery_limit = delivery_limit
        if max_locks is not None:
            s.max_locks = max_locks
        if earliest is not None:
            s.earliest = earliest
        if renew_enabled is not None:
            s.renew_enabled = renew_enabled
        return s

    # -- time --------------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Let time reach ``now``: locks that end by then end."""
        for sp in self.partitions.values():
            sp.expire(now)

    def next_wakeup(self) -> float | None:
        """When the next lock ends (for a simulator's virtual clock), if any is held."""
        ends = [d for sp in self.partitions.values() if (d := sp.next_deadline()) is not None]
        return min(ends) if ends else None

    def next_change(self, now: float) -> float | None:
        """The first time after ``now`` at which a share partition changes without a
        request (a lock ends, a released record is persisted), if any: a server holding
        fetches (:meth:`fetch_would_wait`) looks again then instead of polling."""
        first: float | None = None
        for sp in self.partitions.values():
            t = sp.next_change(now)
            if t is not None and (first is None or t < first):
                first = t
        return first

    # -- faults ------------------------------------------------------------------------------

    def disconnect(self, connection: str, now: float) -> None:
        """A client connection closed: its session's member leaves (records released),
        then the group's share partitions are dropped if it has no session left."""
        self.disconnect_many([connection], now, concurrent=False)

    def disconnect_many(self, connections: list[str], now: float, *, concurrent: bool) -> None:
        """Several connections closed together.

        ``concurrent=False``: handled one after the other, as one network thread would.
        ``concurrent=True``: the order in which every session is removed first, the last
        removal empties the group and drops its share partitions, and the releases that
        follow find none (one way a broker's threads can interleave closes that come
        together; the one that yields ``No share partition found``).
        """
        self.advance(now)
        leaving: list[tuple[str, _Session | None]] = []
        for conn in connections:
            entry = self.connections.pop(conn, None)
            if entry is None:
                continue
            key, stale = entry
            replaced = conn in self.replaced
            self.replaced.discard(conn)
            # Kafka 4.1 ends the member's current session even when the connection's own
            # was replaced by an epoch-0 request on another connection
            # (Behaviour.old_connection_ends_session).
            if stale and not (replaced and self.behaviour.old_connection_ends_session):
                session = None
            else:
                session = self.sessions.get(key)
            leaving.append((key[0], session))
        if not concurrent:
            for group, session in leaving:
                if session is not None:
                    self._release_session(session, now)
                self._check_group_empty(group, now)
            return
        for _, session in leaving:
            if session is not None:
                self._remove_session(session.key)
        for group, _ in leaving:
            self._check_group_empty(group, now)
        for _, session in leaving:
            if session is not None:
                self._release_partitions(session, now)

    def evict_session(self, group: str, member: str, now: float) -> None:
        """The session is gone from the cache without a release (as an epoch-0 request
        from elsewhere, or a cache eviction, leaves it): the member's records stay locked
        until their locks end."""
        self.advance(now)
        if self._remove_session((group, member)) is not None:
            self._event(now, "Removed share session", group, member)

    def move_leader(self, topic: str, partition: int, now: float) -> None:
        """Leadership of the partition moves (here: to a new incarnation of this broker).
        Every group's share partition for it is dropped and rebuilt from the persisted
        state on the next fetch: acquisitions are forgotten and their records come back
        with the count they had before being acquired."""
        self.advance(now)
        tp = (self.topics[topic], partition)
        self.leader_epochs[tp] += 1
        for key in [k for k in self.partitions if k[1] == tp]:
            self._drop_partition(key, now, "leader changed")

    def withdraw_leader(self, topic: str, partition: int, now: float) -> None:
        """The partition loses its leader: the broker that led it shuts down cleanly. That
        broker closes its connections first, so what its sessions held of the partition is
        released and persisted as a closing session releases it (on 4.2+ with the count
        it was acquired with: the next delivery counts one more; held against a real
        cluster by the conformance scenario ``leaderless-then-back``). Then its share
        partitions are dropped as in :meth:`move_leader`, and until
        :meth:`restore_leader` every fetch and acknowledgement of it is answered
        NOT_LEADER_OR_FOLLOWER with no leader named (-1, -1)."""
        self.advance(now)
        tp = (self.topics[topic], partition)
        for (group, of), sp in list(self.partitions.items()):
            if of != tp:
                continue
            holders = {st.member for st in sp.states.values() if st.state is RecordState.ACQUIRED}
            for member in sorted(holders):
                sp.release_member(
                    member, decrement=self.behaviour.session_release_decrements, now=now
                )
            self._save(group, tp)
        self.move_leader(topic, partition, now)
        self.leaderless.add(tp)

    def restore_leader(self, topic: str, partition: int, now: float) -> None:
        """A leader is elected for the partition again (a new leader epoch)."""
        self.advance(now)
        tp = (self.topics[topic], partition)
        self.leaderless.discard(tp)
        self.leader_epochs[tp] += 1

    def leader_of(self, tp: TopicPartitionId) -> LeaderIdAndEpoch:
        """The leader answers name for ``tp``: this node, or none while leaderless."""
        if tp in self.leaderless:
            return _leader(-1, -1)
        return _leader(self.node_id, self.leader_epochs.get(tp, 0))

    # -- requests ----------------------------------------------------------------------------

    def share_fetch(
        self, request: ShareFetchRequest, connection: str, now: float
    ) -> ShareFetchResponse:
        """Answer a ShareFetch that arrived on ``connection`` at ``now``."""
        self.advance(now)
        group = request.group_id or ""
        member = request.member_id or ""
        epoch = request.share_session_epoch
        wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
        forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
        acks = {
            (t.topic_id, p.partition_index): [
                (b.first_offset, b.last_offset, b.acknowledge_types)
                for b in p.acknowledgement_batches
            ]
            for t in request.topics
            for p in t.partitions
            if p.acknowledgement_batches
        }
        if request.is_renew_ack and (
            request.max_wait_ms or request.min_bytes or request.max_bytes or request.max_records
        ):
            return self._fetch_error(ErrorCode.INVALID_REQUEST)
        key = (group, member)
        session = self.sessions.get(key)
        if epoch == FINAL_EPOCH:
            if session is None:
                return self._fetch_error(ErrorCode.SHARE_SESSION_NOT_FOUND)
        elif epoch == INITIAL_EPOCH:
            if acks:
                return self._fetch_error(ErrorCode.INVALID_REQUEST)
            if session is not None:
                self._remove_session(key)
                if session.connection != connection:
                    self.replaced.add(session.connection)
            session = _Session(key, 1, connection, list(dict.fromkeys(wanted)))
            self.sessions[key] = session
            self.connections[connection] = (key, False)
        else:
            if session is None:
                return self._fetch_error(ErrorCode.SHARE_SESSION_NOT_FOUND)
            if session.epoch != epoch:
                return self._fetch_error(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
            for tp in wanted:
                if tp not in session.partitions:
                    session.partitions.append(tp)
            session.partitions = [tp for tp in session.partitions if tp not in forgotten]
            session.epoch = _next_epoch(session.epoch)
        # Acknowledgements riding on a fetch are persisted while the fetch runs: what they
        # release is not acquirable by this same fetch at once.
        ack_errors = {
            tp: self._acknowledge(group, member, tp, b, now, settle=PERSIST_DELAY)
            for tp, b in acks.items()
        }
        acquired: dict[TopicPartitionId, list[tuple[int, int]]] = {}
        fetch_errors: dict[TopicPartitionId, ErrorCode] = {}
        if epoch == FINAL_EPOCH:
            # Kafka answers a final ShareFetch without waiting for the release to persist.
            self._release_session(session, now, settle=PERSIST_DELAY)
        elif not request.is_renew_ack and request.max_records > 0 and request.max_bytes > 0:
            at = now
            self._acquire(group, member, session.partitions, request, at, acquired, fetch_errors)
            if (
                not acquired
                and self.behaviour.wakes_on_persist
                and request.max_wait_ms > 0
                and request.min_bytes > 0
            ):
                # The waiting fetch is completed when a release it raced with is persisted.
                until = now + request.max_wait_ms / 1000.0
                ready = [
                    t
                    for tp in session.partitions
                    if (sp := self.partitions.get((group, tp))) is not None
                    and (t := sp.next_ready(now, until)) is not None
                ]
                if ready:
                    at = min(ready)
                    self._acquire(
                        group, member, session.partitions, request, at, acquired, fetch_errors
                    )
        return self._fetch_response(
            request, session.partitions, acquired, ack_errors, fetch_errors, now
        )

    def _acquire(
        self,
        group: str,
        member: str,
        partitions: list[TopicPartitionId],
        request: ShareFetchRequest,
        now: float,
        acquired: dict[TopicPartitionId, list[tuple[int, int]]],
        fetch_errors: dict[TopicPartitionId, ErrorCode],
    ) -> None:
        budget = request.max_records
        mode_limit = self.behaviour.record_limit and request.share_acquire_mode == 1
        sizes = self.batch_bytes
        share = request.max_bytes // max(1, len(partitions))
        left = request.max_bytes
        for tp in partitions:
            if tp in self.leaderless:
                fetch_errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            sp = self._partition(group, tp, now)
            if sp is None:
                fetch_errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if budget <= 0:
                break
            if sizes is None:
                got = sp.acquire(member, budget, record_limit=mode_limit, now=now)
            else:
                got = sp.acquire(
                    member,
                    budget,
                    record_limit=mode_limit,
                    now=now,
                    max_bytes=min(share, left),
                    batch_bytes=functools.partial(sizes, tp),
                    min_one=left == request.max_bytes,
                )
                left = max(0, left - sp.read_bytes)
            if got:
                acquired[tp] = got
                budget -= len(got)

    def share_acknowledge(
        self, request: ShareAcknowledgeRequest, connection: str, now: float
    ) -> ShareAcknowledgeResponse:
        """Answer a ShareAcknowledge that arrived on ``connection`` at ``now``."""
        del connection  # acknowledgements are not bound to the session's connection
        self.advance(now)
        group = request.group_id or ""
        member = request.member_id or ""
        epoch = request.share_session_epoch
        key = (group, member)
        if epoch == INITIAL_EPOCH:
            return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session = self.sessions.get(key)
        if session is None:
            return ShareAcknowledgeResponse(error_code=ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != FINAL_EPOCH:
            if session.epoch != epoch:
                return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
            session.epoch = _next_epoch(session.epoch)
        results: list[ShareAcknowledgeTopicResponse] = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                tp = (t.topic_id, p.partition_index)
                batches = [
                    (b.first_offset, b.last_offset, b.acknowledge_types)
                    for b in p.acknowledgement_batches
                ]
                err = self._acknowledge(group, member, tp, batches, now)
                parts.append(
                    AckPartitionData(
                        partition_index=p.partition_index,
                        error_code=err,
                        current_leader=AckLeader(
                            leader_id=(leader := self.leader_of(tp)).leader_id,
                            leader_epoch=leader.leader_epoch,
                        ),
                    )
                )
            results.append(
                ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=tuple(parts))
            )
        if epoch == FINAL_EPOCH:
            self._release_session(session, now, settle=PERSIST_DELAY)
        return ShareAcknowledgeResponse(
            acquisition_lock_timeout_ms=self.groups.get(group, GroupSettings()).lock_ms,
            responses=tuple(results),
        )

    # -- inspection --------------------------------------------------------------------------

    def share_partition(self, group: str, topic: str, partition: int) -> SharePartitionModel | None:
        """The loaded share partition, if the broker holds it in memory now."""
        return self.partitions.get((group, (self.topics[topic], partition)))

    # -- administration (what an admin client changes; FakeKafka uses these) ------------------

    def delete_topic(self, name: str) -> None:
        """Delete a topic: its logs and every group's share state for it go."""
        tid = self.topics.pop(name)
        for tp in [k for k in self.logs if k[0] == tid]:
            del self.logs[tp]
            del self.leader_epochs[tp]
        for key in [k for k in self.partitions if k[1][0] == tid]:
            del self.partitions[key]
        for key in [k for k in self.persister if k[1][0] == tid]:
            del self.persister[key]
            self.written_starts.pop(key, None)

    def initialize_group_state(self, group: str, topic: str, partition: int) -> int:
        """The group's share state for the partition, written the first time the partition
        is assigned in the group (Kafka's InitializeShareGroupState): the start offset from
        ``share.auto.offset.reset`` at that moment. Returns the start offset (an existing
        state is kept)."""
        tp = (self.topics[topic], partition)
        sp = self.partitions.get((group, tp))
        if sp is not None:
            return sp.start
        saved = self.persister.get((group, tp))
        if saved is not None:
            return saved[0]
        log = self.logs[tp]
        settings = self.groups.setdefault(group, GroupSettings())
        start = log.start if settings.earliest else log.end
        self.persister[(group, tp)] = (start, {})
        return start

    def set_start_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Reset the group's share state of the partition to start at ``offset``
        (AlterShareGroupOffsets on a group without members)."""
        tp = (self.topics[topic], partition)
        self.partitions.pop((group, tp), None)
        self.persister[(group, tp)] = (offset, {})
        self.written_starts[(group, tp)] = offset

    def delete_group_state(self, group: str, topic: str | None = None) -> None:
        """Forget the group's share state, for one topic or all of them."""
        tid = None if topic is None else self.topics[topic]
        for store in (self.partitions, self.persister, self.written_starts):
            for key in [k for k in store if k[0] == group and (tid is None or k[1][0] == tid)]:
                del store[key]

    def share_offsets(self, group: str, topic: str, partition: int) -> tuple[int, int] | None:
        """The group's start offset on the partition as an admin sees it, and its lag (the
        records from the start offset to the log end not yet acknowledged or archived);
        None if the group has no state there."""
        tp = (self.topics[topic], partition)
        end = self.logs[tp].end
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        sp = self.partitions.get((group, tp))
        if sp is not None:
            finished = sum(1 for s in sp.states.values() if s.state in done)
            return sp.written_start, max(end - sp.start - finished, 0)
        saved = self.persister.get((group, tp))
        if saved is None:
            return None
        start, states = saved
        finished = sum(1 for o, (state, _) in states.items() if o >= start and state in done)
        return self.written_starts.get((group, tp), start), max(end - start - finished, 0)

    # -- waiting (what a server around the model needs; FakeKafka uses these) ----------------

    def fetch_would_wait(self, request: ShareFetchRequest, now: float, arrived: float) -> bool:
        """Whether a ShareFetch that arrived at ``arrived`` would still be waiting at
        ``now`` for records to acquire (the model itself answers at once; a server holds
        such a fetch up to its ``max_wait_ms``).

        False for a fetch that acknowledges, closes or renews, does not wait, names a wrong
        session, or finds a record to acquire. A record released and still being persisted
        counts from when it is persisted on 4.2+; on 4.1 only if it was persisted before
        the fetch arrived (see :attr:`Behaviour.wakes_on_persist`).
        """
        if (
            request.share_session_epoch == FINAL_EPOCH
            or request.is_renew_ack
            or request.max_wait_ms <= 0
            or request.min_bytes <= 0
            or request.max_records <= 0
            or any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
        ):
            return False
        group, member = request.group_id or "", request.member_id or ""
        tps = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
        if request.share_session_epoch != INITIAL_EPOCH:
            session = self.sessions.get((group, member))
            if session is None or session.epoch != request.share_session_epoch:
                return False
            gone = {(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions}
            tps = [tp for tp in [*session.partitions, *tps] if tp not in gone]
        self.advance(now)
        for tp in tps:
            log = self.logs.get(tp)
            sp = self.partitions.get((group, tp))
            if log is None or sp is None:
                return False  # an error, or a share partition to load: answer now
            hi = min(log.end, sp.start + sp.settings.max_locks)
            tracked = [o for o in sp.states if o < hi]
            if len(tracked) < hi - sp.start:
                return False  # an offset never acquired yet
            for o in tracked:
                st = sp.states[o]
                if st.state is RecordState.AVAILABLE and st.ready_at <= now:
                    if self.behaviour.wakes_on_persist or st.ready_at <= arrived:
                        return False
        return True

    def restart(self, now: float) -> None:
        """The broker restarts: share sessions and loaded share partitions are lost without
        a release (rebuilt from the persisted state on the next fetch), leader epochs go up;
        logs and persisted state stay."""
        self.advance(now)
        for session_key in list(self.sessions):
            self._remove_session(session_key)
        self.connections.clear()
        for tp in self.leader_epochs:
            self.leader_epochs[tp] += 1
        for key in list(self.partitions):
            self._drop_partition(key, now, "broker restarted")

    # -- internals ---------------------------------------------------------------------------

    def _event(self, now: float, what: str, group: str = "", member: str = "") -> None:
        self.events.append(BrokerEvent(now, what, group, member))

    def _partition(
        self, group: str, tp: TopicPartitionId, now: float
    ) -> SharePartitionModel | None:
        key = (group, tp)
        sp = self.partitions.get(key)
        if sp is None:
            log = self.logs.get(tp)
            if log is None:
                return None
            saved = self.persister.get(key)
            sp = SharePartitionModel.create(
                log,
                self.groups.setdefault(group, GroupSettings()),
                throttle_last_delivery=self.behaviour.throttle_last_delivery,
                persisted=saved,
            )
            self.partitions[key] = sp
            sp.finished = self.finished.setdefault(key, {})
            sp.written_start = self.written_starts.get(key, sp.written_start)
            self.persister[key] = sp.snapshot()
            self._event(
                now,
                "Initialized share partition with persister read state"
                if saved is not None
                else "Initialized share partition (no persisted state)",
                group,
            )
        return sp

    def _acknowledge(
        self,
        group: str,
        member: str,
        tp: TopicPartitionId,
        batches: list[tuple[int, int, tuple[int, ...]]],
        now: float,
        *,
        settle: float = 0.0,
    ) -> ErrorCode:
        if tp in self.leaderless:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        sp = self.partitions.get((group, tp))
        if sp is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not self.behaviour.renew and any(4 in types for _, _, types in batches):
            return ErrorCode.INVALID_REQUEST
        log = self.release_log
        releasing = sp.releasable(member, batches) if log is not None else []
        err = sp.acknowledge(member, batches, now, settle=settle)
        if log is not None and err is ErrorCode.NONE:
            log.extend((group, member, tp, offset, count) for offset, count in releasing)
        self._save(group, tp)
        return err

    def _save(self, group: str, tp: TopicPartitionId) -> None:
        sp = self.partitions.get((group, tp))
        if sp is not None:
            self.persister[(group, tp)] = sp.snapshot()

    def _remove_session(self, key: SessionKey) -> _Session | None:
        session = self.sessions.pop(key, None)
        if session is not None:
            entry = self.connections.get(session.connection)
            if entry is not None and entry[0] == key:
                self.connections[session.connection] = (key, True)
        return session

    def _release_session(self, session: _Session, now: float, *, settle: float = 0.0) -> None:
        self._remove_session(session.key)
        self._release_partitions(session, now, settle=settle)

    def _release_partitions(self, session: _Session, now: float, *, settle: float = 0.0) -> None:
        group, member = session.key
        for tp in session.partitions:
            sp = self.partitions.get((group, tp))
            if sp is None:
                self._event(
                    now,
                    "No share partition found while releasing acquired topic partitions",
                    group,
                    member,
                )
                continue
            sp.release_member(
                member, decrement=self.behaviour.session_release_decrements, now=now, settle=settle
            )
            self._save(group, tp)

    def _check_group_empty(self, group: str, now: float) -> None:
        if any(k[0] == group for k in self.sessions):
            return
        for key in [k for k in self.partitions if k[0] == group]:
            self._drop_partition(key, now, "group empty")

    def _drop_partition(self, key: tuple[str, TopicPartitionId], now: float, why: str) -> None:
        sp = self.partitions.pop(key, None)
        if sp is not None:
            self.written_starts[key] = sp.written_start
            self.persister[key] = sp.snapshot()
            self._event(now, f"Share partition removed from cache ({why})", key[0])

    def _fetch_error(self, code: ErrorCode) -> ShareFetchResponse:
        return ShareFetchResponse(error_code=code)

    def _fetch_response(
        self,
        request: ShareFetchRequest,
        partitions: list[TopicPartitionId],
        acquired: dict[TopicPartitionId, list[tuple[int, int]]],
        ack_errors: dict[TopicPartitionId, ErrorCode],
        fetch_errors: dict[TopicPartitionId, ErrorCode],
        now: float,
    ) -> ShareFetchResponse:
        del now
        group = request.group_id or ""
        by_topic: dict[uuid.UUID, list[PartitionData]] = {}
        for tp in dict.fromkeys([*partitions, *ack_errors]):
            got = acquired.get(tp, [])
            if not got and tp not in ack_errors and tp not in fetch_errors:
                continue
            by_topic.setdefault(tp[0], []).append(
                PartitionData(
                    partition_index=tp[1],
                    error_code=fetch_errors.get(tp, ErrorCode.NONE),
                    acknowledge_error_code=ack_errors.get(tp, ErrorCode.NONE),
                    current_leader=self.leader_of(tp),
                    records=_batches(self.logs[tp], got) if got else None,
                    acquired_records=_ranges(got),
                )
            )
        return ShareFetchResponse(
            acquisition_lock_timeout_ms=self.groups.get(group, GroupSettings()).lock_ms,
            responses=tuple(
                ShareFetchableTopicResponse(topic_id=tid, partitions=tuple(parts))
                for tid, parts in by_topic.items()
            ),
        )


def _leader(node_id: int, epoch: int) -> LeaderIdAndEpoch:
    return LeaderIdAndEpoch(leader_id=node_id, leader_epoch=epoch)


def _batches(log: PartitionLog, got: list[tuple[int, int]]) -> bytes:
    """The log batches holding the acquired offsets, whole, as a broker sends them."""
    wanted = {o for o, _ in got}
    out = []
    cache = log.encoded
    for batch in log.batches:
        first, last = batch
        if any(first <= o <= last for o in wanted):
            data = cache.get(batch)
            if data is None:
                holes = log.holes
                records = [
                    Record(offset=o, timestamp=0, key=None, value=log.values.get(o))
                    for o in range(first, last + 1)
                    if o not in holes
                ]
                data = cache[batch] = encode_batch(
                    records, base_offset=first, last_offset_delta=last - first
                )
            out.append(data)
    return b"".join(out)


def _ranges(got: list[tuple[int, int]]) -> tuple[AcquiredRecords, ...]:
    """Contiguous offsets with one delivery count become one AcquiredRecords entry."""
    out: list[AcquiredRecords] = []
    for offset, count in got:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            prev = out[-1]
            out[-1] = AcquiredRecords(
                first_offset=prev.first_offset, last_offset=offset, delivery_count=count
            )
        else:
            out.append(
                AcquiredRecords(first_offset=offset, last_offset=offset, delivery_count=count)
            )
    return tuple(out)
