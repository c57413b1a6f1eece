"""Dead-letter routing for share consumers: copy a poison record to a topic, then reject it.

Rules of this module:

1. Nothing is lost: the original is rejected only after the broker acknowledged the copy.
   If the copy cannot be written, the original is *released* (delivered again later) and
   the caller gets :class:`~sharecon.errors.DeadLetterError`. When retrying cannot help
   (the principal may not write, describe or create the topic; an invalid name) it is
   :class:`~sharecon.errors.DeadLetterTopicError`, and the consumer stops with it: every
   further record routed there would only be released again, one delivery closer to the
   broker's ``share.delivery.count.limit``, past which it is archived unseen.
2. The copy keeps the original key, value and headers, and adds ``sharecon.dlq.*`` headers
   naming where it came from and why (see :data:`DLQ_HEADERS`), so it can be inspected and
   replayed (``sharecon dlq replay``). A record too large for the dead-letter topic
   (``MESSAGE_TOO_LARGE``: its copy never fits, and released it would come back until the
   broker archived it with no copy at all) gets a *stub* instead: the same headers and
   key, no value, and :data:`DLQ_VALUE_DROPPED` giving the size of the value left out.
   The original is then rejected as for any copy; the stub is evidence, not something
   ``sharecon dlq replay`` can put back (it skips stubs and says how many).
3. Where the broker routes rejected records itself (Kafka 4.4, ``share.version`` 2, and
   the group config ``errors.deadletterqueue.topic.name`` naming the same topic), the
   client does not copy: rejecting is enough, and the broker writes the copy, with its
   own ``__dlq.errors.*`` headers instead (see :data:`BROKER_DLQ_HEADERS`). The group
   config can change at any time: what it says is kept for :data:`BROKER_DLQ_TTL`
   seconds, then asked again; a lookup that failed for a transient reason (a timeout, a
   lost connection, a moved coordinator) is retried after :data:`BROKER_DLQ_RETRY`
   seconds (copying in the client meanwhile), one refused (no DESCRIBE_CONFIGS on the
   group) after the TTL. When the broker's topic differs from the policy's, the client
   writes its copy to the policy's topic, and the broker, which copies every rejected
   record of the group, writes one to its own topic too.
4. The producer and admin client the router needs run in a task of the consumer's task
   group, started on first use and stopped when the consumer closes.
5. Least privilege: the topic is looked up (Metadata, which needs DESCRIBE) before it is
   created, so a principal with WRITE on an existing topic needs no CREATE: Kafka refuses
   ``CreateTopics`` without CREATE even for a topic that exists.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._lifecycle import Hosting
from sharecon.protocol.names import validate_topic_name

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from anyio.abc import TaskStatus

    from sharecon._net.connect import ConnectionConfig
    from sharecon.admin import Admin
    from sharecon.producer import Producer, RecordMetadata
    from sharecon.record import Record

__all__ = [
    "BROKER_DLQ_DELIVERY_COUNT",
    "BROKER_DLQ_RETRY",
    "BROKER_DLQ_TTL",
    "BROKER_DLQ_GROUP",
    "BROKER_DLQ_HEADERS",
    "BROKER_DLQ_MESSAGE",
    "BROKER_DLQ_OFFSET",
    "BROKER_DLQ_PARTITION",
    "BROKER_DLQ_PREFIX",
    "BROKER_DLQ_TOPIC",
    "DLQ_DELIVERY_COUNT",
    "DLQ_GROUP",
    "DLQ_HEADERS",
    "DLQ_OFFSET",
    "DLQ_PARTITION",
    "DLQ_REASON",
    "DLQ_TIME",
    "DLQ_TOPIC",
    "DLQ_VALUE_DROPPED",
    "BrokerDlqCache",
    "DeadLetterInfo",
    "DeadLetterPolicy",
    "any_dead_letter_info",
    "broker_dead_letter_info",
    "dead_letter_headers",
    "dead_letter_info",
    "original_headers",
]

logger = logging.getLogger("sharecon.dlq")

#: Header prefix of everything the router adds.
DLQ_PREFIX = "sharecon.dlq."
DLQ_TOPIC = "sharecon.dlq.topic"
DLQ_PARTITION = "sharecon.dlq.partition"
DLQ_OFFSET = "sharecon.dlq.offset"
DLQ_DELIVERY_COUNT = "sharecon.dlq.delivery.count"
DLQ_GROUP = "sharecon.dlq.group"
DLQ_REASON = "sharecon.dlq.reason"
#: Milliseconds since the Unix epoch when the record was dead-lettered.
DLQ_TIME = "sharecon.dlq.time"
#: Only on a stub (rule 2): the size in bytes of the value the copy left out, because the
#: whole copy was too large for the dead-letter topic. Not in :data:`DLQ_HEADERS`.
DLQ_VALUE_DROPPED = "sharecon.dlq.value.dropped"
#: Every header the router adds, in the order it adds them.
DLQ_HEADERS = (
    DLQ_TOPIC,
    DLQ_PARTITION,
    DLQ_OFFSET,
    DLQ_DELIVERY_COUNT,
    DLQ_GROUP,
    DLQ_REASON,
    DLQ_TIME,
)

# The group config that makes a Kafka 4.4 broker copy rejected records itself (KIP-1191).
BROKER_DLQ_CONFIG = "errors.deadletterqueue.topic.name"

#: Header prefix of what a Kafka 4.4 broker adds to the dead letters it writes itself.
#: Names and formats are those of Kafka 4.4.0's ``ShareGroupDLQStateManager`` (every value
#: UTF-8 text, numbers in decimal). The broker copies the key and the value (with the
#: topic config ``errors.deadletterqueue.copy.record.enable``) but not the original
#: headers, and stamps the copy with the time it wrote it.
BROKER_DLQ_PREFIX = "__dlq.errors."
BROKER_DLQ_TOPIC = "__dlq.errors.topic"
BROKER_DLQ_PARTITION = "__dlq.errors.partition"
BROKER_DLQ_OFFSET = "__dlq.errors.offset"
BROKER_DLQ_GROUP = "__dlq.errors.group"
#: Absent when the broker did not know the count.
BROKER_DLQ_DELIVERY_COUNT = "__dlq.errors.delivery.count"
#: Why: "Offset rejected by client." or "Offset delivery count exceeded the threshold.".
BROKER_DLQ_MESSAGE = "__dlq.errors.message"
#: Every header a Kafka 4.4 broker adds, in the order it adds them.
BROKER_DLQ_HEADERS = (
    BROKER_DLQ_TOPIC,
    BROKER_DLQ_PARTITION,
    BROKER_DLQ_OFFSET,
    BROKER_DLQ_GROUP,
    BROKER_DLQ_DELIVERY_COUNT,
    BROKER_DLQ_MESSAGE,
)


#: Seconds a looked-up ``errors.deadletterqueue.topic.name`` is trusted (rule 3).
BROKER_DLQ_TTL = 30.0
#: Seconds before a lookup that failed for a transient reason is tried again (rule 3).
BROKER_DLQ_RETRY = 1.0


@dataclass(slots=True)
class BrokerDlqCache:
    """Rule 3, sans-I/O: when to ask the group's ``errors.deadletterqueue.topic.name``
    again, and what the last answer was (``None``: the broker keeps no dead-letter
    topic for the group, or it could not be read)."""

    ttl: float = BROKER_DLQ_TTL
    retry: float = BROKER_DLQ_RETRY
    topic: str | None = None
    _due: float = field(default=float("-inf"), init=False)

    def needs_lookup(self, now: float) -> bool:
        """Whether the value is stale at ``now`` (never looked up, expired, or failed)."""
        return now >= self._due

    def on_value(self, now: float, topic: str | None) -> None:
        """The lookup at ``now`` answered ``topic`` (``None`` or empty: not set)."""
        self.topic = topic or None
        self._due = now + self.ttl

    def on_error(self, now: float, *, retriable: bool) -> None:
        """The lookup at ``now`` failed: copy in the client until it is asked again."""
        self.topic = None
        self._due = now + (self.retry if retriable else self.ttl)


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """Route records to a dead-letter topic (``ShareConsumer(dead_letter=...)``).

    :param topic: the dead-letter topic (default ``dlq.<group id>``).
    :param max_deliveries: ``N`` counts deliveries (the broker's delivery count, the one
        count every member shares), not handler failures. In
        :meth:`ShareConsumer.process`, a handler that raises on delivery ``N`` or later
        routes the record to the dead-letter topic; a :class:`~sharecon.record.RetryLater`
        never does (it releases the record). A record that arrives for delivery ``N + 1``
        or later is routed before the application sees it only if the application here
        released it on an earlier delivery, or with ``route_unseen=True``: by default a
        record whose earlier attempts were spent unseen (a lock that ended in a buffer,
        prefetched records released at a close, another member's crash) is handed out
        once more. Keep ``N >= 2`` with delayed retries (``RetryLater``,
        ``retry_backoff``). Keep it below the group's ``share.delivery.count.limit``
        (default 5), past which the broker archives the record without asking the client.
    :param route_unseen: also route a record that arrives past ``max_deliveries`` that the
        application never saw here (``False``, default: it is handed out; see
        ``max_deliveries``). Turn it on for records that crash a process outright, which
        no handler error can route.
    :param create_topic: create the topic on first use if it does not exist.
    :param partitions: partitions of a topic created on first use.
    :param use_broker_dlq: let a Kafka 4.4 broker with its own dead-letter queue for this
        group and topic do the copy (``"auto"``), always copy in the client (``False``).
    :param retry_backoff: in :meth:`ShareConsumer.process`, a handler error before the
        last allowed delivery releases the record after a delay,
        ``retry_backoff.delay(delivery_count - 1)`` seconds (e.g.
        ``Backoff(initial=1.0, maximum=60.0, multiplier=2.0)``: 1 s, 2 s, 4 s, ... at
        most 60 s), as ``record.release(delay=...)`` does (Kafka 4.2+). ``None``
        (default): released at once.
    :param breaker_threshold: the circuit breaker of :meth:`ShareConsumer.process`: when
        more than this share of the last ``breaker_window`` records handled went to the
        dead-letter path, the consumer stops handing out and fetching records,
        :meth:`ShareConsumer.health` is not ok and says why, and one WARNING is logged; it
        resumes after ``breaker_cooldown`` seconds (then the next 20 records decide: more
        than this share of them dead opens it again) or at
        :meth:`ShareConsumer.reset_dead_letter_breaker`. ``None`` turns it off. Default
        0.5: a handler that fails more than half the records it sees is a broken deploy,
        not bad data (a 10 % poison rate trips it with a chance below 1e-30).
    :param breaker_window: the records judged (default 200: at most 101 go to the
        dead-letter path before the breaker opens when every one fails).
    :param breaker_cooldown: seconds the breaker stays open (default 60), or ``None`` to
        stay open until :meth:`ShareConsumer.reset_dead_letter_breaker`.
    """

    topic: str | None = None
    max_deliveries: int = 3
    create_topic: bool = True
    partitions: int = 1
    use_broker_dlq: bool | str = "auto"
    retry_backoff: Backoff | None = None
    breaker_threshold: float | None = 0.5
    breaker_window: int = 200
    breaker_cooldown: float | None = 60.0
    route_unseen: bool = False

    def __post_init__(self) -> None:
        if self.breaker_threshold is not None and not 0 < self.breaker_threshold < 1:
            raise errors.ConfigError(
                f"breaker_threshold must be between 0 and 1 (exclusive) or None, "
                f"not {self.breaker_threshold}"
            )
        if self.breaker_window < 1:
            raise errors.ConfigError(
                f"breaker_window must be at least 1, not {self.breaker_window}"
            )
        if self.breaker_cooldown is not None and not self.breaker_cooldown > 0:
            raise errors.ConfigError(
                f"breaker_cooldown must be positive or None, not {self.breaker_cooldown}"
            )
        if self.max_deliveries < 1:
            raise errors.ConfigError(
                f"max_deliveries must be at least 1, not {self.max_deliveries}"
            )
        if self.partitions < 1:
            raise errors.ConfigError(f"partitions must be at least 1, not {self.partitions}")
        if self.use_broker_dlq not in (True, False, "auto"):
            raise errors.ConfigError("use_broker_dlq must be True, False or 'auto'")
        if self.topic is not None:
            validate_topic_name(self.topic, param="DeadLetterPolicy.topic")
        if self.retry_backoff is not None and not isinstance(self.retry_backoff, Backoff):
            raise errors.ConfigError(
                f"retry_backoff must be a sharecon.Backoff or None, not {self.retry_backoff!r}"
            )


@dataclass(frozen=True, slots=True)
class DeadLetterInfo:
    """What the dead-letter headers of a copy say (``-1`` for a number that is missing).

    ``written_by`` is ``"sharecon"`` for the ``sharecon.dlq.*`` headers of
    :func:`dead_letter_headers`, ``"broker"`` for the ``__dlq.errors.*`` headers of a
    Kafka 4.4 broker (then ``reason`` is the broker's message and ``time_ms`` the copy's
    own timestamp, which the broker sets when it writes it).
    """

    topic: str
    partition: int
    offset: int
    delivery_count: int
    group: str
    reason: str
    time_ms: int
    written_by: Literal["sharecon", "broker"] = "sharecon"
    #: on a stub (rule 2): the size of the value the copy left out; -1 on a whole copy
    value_dropped: int = -1


def dead_letter_headers(
    record: Record[Any, Any],
    group: str,
    reason: str,
    now_ms: int | None = None,
    *,
    value_dropped: int | None = None,
) -> list[tuple[str, bytes | None]]:
    """The copy's headers: the original ones, then the ``sharecon.dlq.*`` ones (rule 2);
    for a stub, ``value_dropped`` (the size of the value left out) as well."""
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    headers = [
        *record.headers,
        (DLQ_TOPIC, record.topic.encode()),
        (DLQ_PARTITION, str(record.partition).encode()),
        (DLQ_OFFSET, str(record.offset).encode()),
        (DLQ_DELIVERY_COUNT, str(record.delivery_count).encode()),
        (DLQ_GROUP, group.encode()),
        (DLQ_REASON, reason.encode()),
        (DLQ_TIME, str(stamp).encode()),
    ]
    if value_dropped is not None:
        headers.append((DLQ_VALUE_DROPPED, str(value_dropped).encode()))
    return headers


def dead_letter_info(headers: Sequence[tuple[str, bytes | None]]) -> DeadLetterInfo | None:
    """Read the ``sharecon.dlq.*`` headers back (``None`` if the record has none)."""
    found = _text_headers(headers, DLQ_PREFIX)
    if DLQ_TOPIC not in found:
        return None
    return DeadLetterInfo(
        topic=found[DLQ_TOPIC],
        partition=_number(found, DLQ_PARTITION),
        offset=_number(found, DLQ_OFFSET),
        delivery_count=_number(found, DLQ_DELIVERY_COUNT),
        group=found.get(DLQ_GROUP, ""),
        reason=found.get(DLQ_REASON, ""),
        time_ms=_number(found, DLQ_TIME),
        value_dropped=_number(found, DLQ_VALUE_DROPPED),
    )


def broker_dead_letter_info(
    headers: Sequence[tuple[str, bytes | None]], timestamp_ms: int = -1
) -> DeadLetterInfo | None:
    """Read the ``__dlq.errors.*`` headers of a copy a Kafka 4.4 broker wrote (``None`` if
    the record has none); ``timestamp_ms`` is the copy's own timestamp, taken as the time
    it was dead-lettered."""
    found = _text_headers(headers, BROKER_DLQ_PREFIX)
    if BROKER_DLQ_TOPIC not in found:
        return None
    return DeadLetterInfo(
        topic=found[BROKER_DLQ_TOPIC],
        partition=_number(found, BROKER_DLQ_PARTITION),
        offset=_number(found, BROKER_DLQ_OFFSET),
        delivery_count=_number(found, BROKER_DLQ_DELIVERY_COUNT),
        group=found.get(BROKER_DLQ_GROUP, ""),
        reason=found.get(BROKER_DLQ_MESSAGE, ""),
        time_ms=timestamp_ms,
        written_by="broker",
    )


def any_dead_letter_info(
    headers: Sequence[tuple[str, bytes | None]], timestamp_ms: int = -1
) -> DeadLetterInfo | None:
    """:func:`dead_letter_info`, else :func:`broker_dead_letter_info`: whoever wrote the copy."""
    return dead_letter_info(headers) or broker_dead_letter_info(headers, timestamp_ms)


def _text_headers(headers: Sequence[tuple[str, bytes | None]], prefix: str) -> dict[str, str]:
    return {
        key: value.decode("utf-8", "replace")
        for key, value in headers
        if key.startswith(prefix) and value is not None
    }


def _number(found: dict[str, str], key: str) -> int:
    try:
        return int(found.get(key, "-1"))
    except ValueError:
        return -1


def original_headers(headers: Sequence[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """The headers without the dead-letter ones, ``sharecon.dlq.*`` and the broker's
    ``__dlq.errors.*`` (for replaying a copy)."""
    return [(k, v) for k, v in headers if not k.startswith((DLQ_PREFIX, BROKER_DLQ_PREFIX))]


class DeadLetterRouter:
    """Writes dead-letter copies for one consumer (rules 1-4)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        connection: ConnectionConfig,
        group_id: str,
        policy: DeadLetterPolicy,
        share_version: int,
    ) -> None:
        self._bootstrap = bootstrap
        self._connection = connection
        self.group_id = group_id
        self.policy = policy
        self.default_topic = policy.topic or f"dlq.{group_id}"
        self._share_version = share_version
        self._producer: Producer | None = None
        self._admin: Admin | None = None
        self._hosting = Hosting()
        self._known_topics: set[str] = set()
        self._broker_dlq = BrokerDlqCache()

    @property
    def started(self) -> bool:
        """Whether the producer and admin client are up (rule 4)."""
        return self._hosting.started

    async def host(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the router's producer and admin until :meth:`stop` (rule 4)."""
        from sharecon.admin import Admin
        from sharecon.producer import Producer

        clients: list[AbstractAsyncContextManager[Any]] = [
            Producer(self._bootstrap, config=self._connection, client_id="sharecon-dlq"),
            Admin(self._bootstrap, config=self._connection),
        ]
        try:
            await self._hosting.run(clients, self._on_ready, task_status=task_status)
        finally:
            self._producer = self._admin = None

    def _on_ready(self, clients: list[Any]) -> None:
        self._producer, self._admin = clients

    async def stop(self) -> None:
        """Flush and stop the producer and admin (bounded by the caller)."""
        await self._hosting.stop()

    async def _broker_routes(self, topic: str) -> bool:
        """Rule 3: does the broker copy rejected records of this group to ``topic``?"""
        if self.policy.use_broker_dlq is False or self._share_version < 2:
            return False
        cache = self._broker_dlq
        now = anyio.current_time()
        if cache.needs_lookup(now):
            assert self._admin is not None
            try:
                entries = await self._admin.describe_group_config(
                    self.group_id, [BROKER_DLQ_CONFIG]
                )
            except errors.KafkaError as exc:
                logger.info(
                    "could not read %s of group %s: %s", BROKER_DLQ_CONFIG, self.group_id, exc
                )
                cache.on_error(anyio.current_time(), retriable=exc.retriable)
            else:
                entry = entries.get(BROKER_DLQ_CONFIG)
                cache.on_value(anyio.current_time(), entry.value if entry is not None else None)
        return cache.topic == topic

    async def _ensure_topic(self, topic: str) -> None:
        """Rule 5: make sure ``topic`` exists, creating it only if it does not."""
        if topic in self._known_topics:
            return
        assert self._admin is not None
        try:
            await self._admin.describe_topics([topic])
        except errors.UnknownTopicOrPartitionError as exc:
            if not self.policy.create_topic:
                # Every record routed here would be released again: stop instead.
                raise errors.DeadLetterTopicError(
                    f"the dead-letter topic {topic!r} does not exist (and create_topic=False)"
                ) from exc
        except errors.KafkaError as exc:
            raise routing_error(
                f"cannot look up the dead-letter topic {topic!r}", exc, topic_level=True
            ) from exc
        else:
            self._known_topics.add(topic)
            return
        try:
            await self._admin.create_topics(
                [topic], num_partitions=self.policy.partitions, exist_ok=True
            )
        except errors.KafkaError as exc:
            raise routing_error(
                f"cannot create the dead-letter topic {topic!r} (create it beforehand, or "
                "grant CREATE on it)",
                exc,
                topic_level=True,
            ) from exc
        self._known_topics.add(topic)

    async def write(
        self, record: Record[Any, Any], reason: str, topic: str, *, stub: bool = False
    ) -> RecordMetadata | None:
        """Write the copy of ``record`` to ``topic``; ``None`` when the broker does it (rule 3).
        ``stub``: the copy without the value, for a record too large for the topic (rule 2).

        :raises DeadLetterError: the copy could not be written (the caller releases).
        """
        if await self._broker_routes(topic):
            return None
        await self._ensure_topic(topic)
        assert self._producer is not None
        try:
            # The bytes as fetched: a consumer's deserializers changed key and value.
            # send_and_wait, not send: rule 1 needs the broker's acknowledgement here.
            value = record.serialized_value
            dropped = len(value or b"") if stub else None
            return await self._producer.send_and_wait(
                topic,
                None if stub else value,
                key=record.serialized_key,
                headers=dead_letter_headers(record, self.group_id, reason, value_dropped=dropped),
                timestamp=record.timestamp if record.timestamp >= 0 else None,
            )
        except errors.KafkaError as exc:
            raise routing_error(
                f"{record.topic}-{record.partition}@{record.offset}: writing the dead-letter "
                f"copy to {topic!r} failed",
                exc,
            ) from exc


# Errors that say the topic itself cannot be written, whatever the record (rule 1). A
# record too large for the topic is not among them: the next one may fit.
_TOPIC_REFUSED: tuple[type[errors.BrokerError], ...] = (
    errors.TopicAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
    errors.InvalidTopicError,
)


def routing_error(
    what: str, exc: errors.KafkaError, *, topic_level: bool = False
) -> errors.DeadLetterError:
    """Rule 1: :class:`~sharecon.errors.DeadLetterTopicError` when retrying cannot help:
    an authorization error or an invalid topic, or (``topic_level``: looking the topic up
    or creating it) any broker error that is not retriable. Else
    :class:`~sharecon.errors.DeadLetterError`: a closing client, a timeout, a lost
    connection or a record too large may pass."""
    if isinstance(exc, errors.BrokerError) and (
        isinstance(exc, _TOPIC_REFUSED) or (topic_level and not exc.retriable)
    ):
        hint = ""
        if isinstance(
            exc, (errors.TopicAuthorizationFailedError, errors.ClusterAuthorizationFailedError)
        ):
            hint = " (see the ACLs of a dead-letter writer in docs/security.md)"
        return errors.DeadLetterTopicError(f"{what}: {exc}{hint}")
    return errors.DeadLetterError(f"{what}: {exc}")
