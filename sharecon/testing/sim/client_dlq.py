"""Dead letters in the whole-client simulation (:mod:`sharecon.testing.sim.client`).

A fraction of seeds give the ``process`` and ``gather`` members a
:class:`~sharecon.dlq.DeadLetterPolicy`, make their handler fail for some records every
time ("poison"), and have the broker refuse the dead-letter topic's Produce for a while
(an error code drawn per seed: retriable or not), then accept it. The copies go through
the real ``Producer`` and ``Admin`` of the consumer's dead-letter router.

What this module checks (docs/testing.md, "Dead letters"):

* *D1, no record lost*: a record the broker archived was rejected by the application or
  has a dead-letter copy in the topic (the broker's log, read back); and only a record a
  handler failed (a poison one) is ever copied.
* *D2, progress*: invariant 2 holds with the refusal counted as a fault: the schedule's
  ``healed_at`` includes its end.
* *D3, bounded cost*: each poison record's delivery attempts spent by failed copies (the
  delivery count of its first accepted copy minus that of its first attempted one) are at
  most :func:`spent_bound`: one per lock the refusal spans, not one per attempt.
* *D4, too large is a stub*: in some plans some poison records are too large for the
  dead-letter topic (the broker answers a whole copy of one MESSAGE_TOO_LARGE, whenever
  it comes): every copy of such a record in the topic is a stub (no value, and
  ``sharecon.dlq.value.dropped`` giving the value's size), and D1 and D3 hold for them
  too (released on every delivery instead, such a record would be archived uncopied).

The schedule's draws come from a random source of their own, so the schedules of seeds
without dead letters are those they always were.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

from sharecon._share.dead_letter_retry import LOCK_MARGIN, RETRY_BACKOFF
from sharecon.dlq import (
    DLQ_DELIVERY_COUNT,
    DLQ_OFFSET,
    DLQ_PARTITION,
    DLQ_VALUE_DROPPED,
    DeadLetterPolicy,
)
from sharecon.protocol.messages.produce import ProduceRequest
from sharecon.protocol.records import decode_records
from sharecon.testing.fake.cluster import _error_response

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response
    from sharecon.testing.fake.cluster import FakeCluster

__all__ = [
    "DLQ_TOPIC",
    "REFUSALS",
    "TOO_LARGE",
    "DlqPlan",
    "DlqWatch",
    "no_stub",
    "release_at_once",
    "spent_bound",
]

#: The dead-letter topic of the schedules' group ``g``.
DLQ_TOPIC = "dlq.g"
#: What the broker answers the dead-letter topic's Produce with while it refuses it:
#: NOT_ENOUGH_REPLICAS (19, retriable: the producer retries it), UNKNOWN_TOPIC_OR_PARTITION
#: (3, the topic looks missing: retriable), POLICY_VIOLATION (44, not retriable: each
#: attempt fails at once).
REFUSALS = (19, 3, 44)
#: MESSAGE_TOO_LARGE: the broker's answer to a whole copy of a record too large for the
#: dead-letter topic (D4).
TOO_LARGE = 10
#: Share of plans with records too large for the dead-letter topic (D4), and the share of
#: their poison records that are.
OVERSIZE_SHARE = 0.4
OVERSIZE_PART = 0.5


def spent_bound(refuse_for: float, lock: float, faults: int) -> int:
    """D3: the most delivery attempts a record may spend on dead-letter copies that failed
    (docs/dlq.md, sharecon._share.dead_letter_retry rule 2): one per lock it holds while
    the copies are refused, a lock lasting at least ``lock`` less the longest retry wait and
    the margin, plus the one at hand when the refusal starts, plus one per other fault of
    the schedule (a cut, crash or restart may end the lock of a record being retried)."""
    if not refuse_for:
        return faults
    usable = lock - RETRY_BACKOFF.maximum - LOCK_MARGIN
    return 1 + math.ceil(refuse_for / usable) + faults


#: Share of seeds with dead letters (of those with a member that routes them).
SHARE = 0.35
#: The styles that route poison records: ``process`` and ``gather`` by the policy (a
#: handler error on the last allowed delivery), ``iter`` and ``explicit`` by
#: ``reject_to_dlq``; ``poll`` and ``batches`` members accept them.
_ROUTING = ("process", "gather", "iter", "explicit")


def _header(headers: Sequence[tuple[str, bytes | None]], key: str) -> int:
    for k, v in headers:
        if k == key and v is not None:
            return int(v)
    return -1


@dataclass(frozen=True, slots=True)
class DlqPlan:
    """One seed's dead letters: the policy, the poison records, the refusal."""

    max_deliveries: int
    #: indexes of the records (``v<i>``) a handler with the policy always fails
    poison: frozenset[int]
    refuse_at: float
    refuse_for: float
    code: int
    #: indexes of poison records too large for the dead-letter topic (D4)
    oversize: frozenset[int] = frozenset()

    @classmethod
    def draw(cls, seed: int, records: int, styles: Sequence[str]) -> DlqPlan | None:
        """The plan of ``seed`` (``None``: no dead letters in this schedule)."""
        rng = random.Random(seed * 104729 + 0xD1A)
        if not any(s in _ROUTING for s in styles) or rng.random() >= SHARE:
            return None
        share = rng.choice([0.05, 0.1, 0.2])
        poison = frozenset(i for i in range(records) if rng.random() < share)
        plan = cls(
            max_deliveries=rng.choice([2, 3]),
            poison=poison or frozenset({rng.randrange(records)}),
            refuse_at=round(rng.uniform(0.0, 10.0), 3),
            refuse_for=rng.choice([0.0, 2.0, 10.0, 40.0]),
            code=rng.choice(REFUSALS),
        )
        # A stream of its own (D4), so the draws above stay what they were.
        orng = random.Random(seed * 7919 + 0x0B16)
        if orng.random() >= OVERSIZE_SHARE:
            return plan
        oversize = frozenset(i for i in sorted(plan.poison) if orng.random() < OVERSIZE_PART)
        return dataclasses.replace(plan, oversize=oversize)

    def describe(self) -> str:
        refusal = (
            f"refused {self.refuse_for:g}s from {self.refuse_at:g} (error {self.code})"
            if self.refuse_for
            else "never refused"
        )
        too_large = f", {len(self.oversize)} too large for the topic" if self.oversize else ""
        return (
            f"dead letters: max_deliveries {self.max_deliveries}, "
            f"{len(self.poison)} poison{too_large}, {refusal}"
        )

    @property
    def heals_at(self) -> float:
        """When the refusal ends (schedule seconds)."""
        return self.refuse_at + self.refuse_for

    def policy(self) -> DeadLetterPolicy:
        """The policy of the members whose handlers fail."""
        # The breaker stays as users get it: the poison share is below its threshold.
        return DeadLetterPolicy(topic=DLQ_TOPIC, max_deliveries=self.max_deliveries)


@dataclass(slots=True)
class DlqWatch:
    """The broker side of one schedule's dead letters: refuses, and remembers attempts."""

    plan: DlqPlan
    #: the schedule's clock, in seconds since it started
    elapsed: Callable[[], float]
    #: the broker's cluster (to know the topic's id: Produce v13+ names topics by id)
    cluster: Callable[[], FakeCluster]
    #: D3's bound for this schedule (:func:`spent_bound`)
    bound: int
    #: (partition, offset) -> delivery counts of the copies attempted (refused or not)
    attempted: dict[tuple[int, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    refused: int = 0
    #: the most delivery attempts one record spent on failed copies (D3)
    spent: int = 0
    #: (partition, offset) -> the value's size, of the whole copies refused as too large (D4)
    too_large: dict[tuple[int, int], int] = field(default_factory=dict)

    def intercept(
        self, conn: str, header: RequestHeader, body: Request[Response]
    ) -> Response | None:
        """The MemoryKafka hook: refuse the dead-letter topic's Produce while the plan says."""
        del conn, header
        if not isinstance(body, ProduceRequest):
            return None
        topic = self.cluster().topics.get(DLQ_TOPIC)
        tid = topic.topic_id if topic is not None else None
        ours = [td for td in body.topic_data if td.name == DLQ_TOPIC or td.topic_id == tid]
        too_large = False
        for td in ours:
            for pd in td.partition_data:
                for rec in decode_records(pd.records or b""):
                    key = (_header(rec.headers, DLQ_PARTITION), _header(rec.headers, DLQ_OFFSET))
                    self.attempted[key].append(_header(rec.headers, DLQ_DELIVERY_COUNT))
                    if rec.value is not None and int(rec.value[1:]) in self.plan.oversize:
                        self.too_large[key] = len(rec.value)
                        too_large = True
        t = self.elapsed()
        if ours and self.plan.refuse_at <= t < self.plan.heals_at:
            self.refused += 1
            return _error_response(body, self.plan.code)
        if too_large:
            # Kafka refuses the whole batch; the producer splits it until the record
            # alone is refused (its MessageTooLargeError).
            return _error_response(body, TOO_LARGE)
        return None

    def copies(self, cluster: FakeCluster) -> dict[tuple[int, int], list[int]]:
        """The dead-letter topic's records, by the (partition, offset) they copy: the
        delivery count each copy was made at."""
        out: dict[tuple[int, int], list[int]] = defaultdict(list)
        for key, count, _ in self._read(cluster):
            out[key].append(count)
        return out

    def stubs(self, cluster: FakeCluster) -> dict[tuple[int, int], int]:
        """The dead-letter topic's copies of records a whole copy of which was refused as
        too large, and of every stub, by the (partition, offset) they copy: the value size
        a stub names, or -1 for a whole copy (D4)."""
        return self._stubs(self._read(cluster))

    def _stubs(self, copies: list[tuple[tuple[int, int], int, int]]) -> dict[tuple[int, int], int]:
        return {key: size for key, _, size in copies if key in self.too_large or size >= 0}

    def _read(self, cluster: FakeCluster) -> list[tuple[tuple[int, int], int, int]]:
        """Every copy in the dead-letter topic, read once: the (partition, offset) it
        copies, the delivery count it was made at, and for a stub the value size it names
        (-1 for a whole copy)."""
        topic = cluster.topics.get(DLQ_TOPIC)
        if topic is None:
            return []
        out = []
        for p in range(topic.partitions):
            for batch in cluster.logs[(topic.topic_id, p)].batches:
                for rec in decode_records(batch.data):
                    key = (_header(rec.headers, DLQ_PARTITION), _header(rec.headers, DLQ_OFFSET))
                    dropped = _header(rec.headers, DLQ_VALUE_DROPPED)
                    size = dropped if rec.value is None else -1
                    out.append((key, _header(rec.headers, DLQ_DELIVERY_COUNT), size))
        return out

    def check(
        self,
        cluster: FakeCluster,
        archived: set[tuple[int, int]],
        rejected: set[tuple[int, int]],
        poison: set[tuple[int, int]],
        final: bool,
    ) -> str | None:
        """D1 (and, once the schedule is over, D3): the violation, or ``None``."""
        read = self._read(cluster)  # the topic decoded once for D1, D3 and D4
        copies: dict[tuple[int, int], list[int]] = defaultdict(list)
        for key, count, _ in read:
            copies[key].append(count)
        for key in sorted(copies):
            if key not in poison:
                return f"invariant D1: {key} was dead-lettered, but no handler failed it"
        for key, size in sorted(self._stubs(read).items()):
            want = self.too_large.get(key)
            if size != want:
                whole = "a whole copy" if size < 0 else f"a stub naming {size} bytes"
                return f"invariant D4: {key}: {whole} in the dead-letter topic; " + (
                    f"its value ({want} bytes) is too large for it" if want else "it fits"
                )
        for key in sorted(archived - rejected):
            if key not in copies:
                return (
                    f"invariant D1: {key} archived with no dead-letter copy, the application "
                    f"never rejected it (copies attempted at deliveries "
                    f"{self.attempted.get(key, [])})"
                )
        if final:
            for key, counts in sorted(copies.items()):
                tried = self.attempted.get(key) or counts
                spent = min(counts) - min(tried)
                self.spent = max(self.spent, spent)
                if spent > self.bound:
                    return (
                        f"invariant D3: {key}: {spent} delivery attempts spent on dead-letter "
                        f"copies that failed (bound {self.bound}): tried at deliveries {tried}"
                    )
        return None


def release_at_once() -> Any:
    """Mutant ``dlq-release-at-once``: a failed dead-letter copy releases its record at
    once (the bug fixed by ``sharecon._share.dead_letter_retry``): a copy refused for a few
    seconds sends the record round and round to the broker's delivery limit."""
    return mock.patch("sharecon.consumer.dead_letter_retry_in", lambda *a, **k: None)


def no_stub() -> Any:
    """Mutant ``dlq-no-stub``: a copy too large for the dead-letter topic releases its
    record as any failed copy did before stubs (sharecon.dlq rule 2): the record comes
    back on every delivery until the broker archives it with no copy (D1)."""
    from sharecon.dlq import DeadLetterRouter

    real = DeadLetterRouter.write

    async def whole_only(
        self: DeadLetterRouter, record: Any, reason: str, topic: str, *, stub: bool = False
    ) -> Any:
        del stub
        return await real(self, record, reason, topic)

    return mock.patch.object(DeadLetterRouter, "write", whole_only)
