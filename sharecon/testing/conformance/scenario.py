"""Scripted share-group scenarios: steps a client takes, and what it observes.

A :class:`Scenario` is a list of steps on one topic partition and one share group. The
same script runs against the model broker (:mod:`.model_runner`) and a real broker
(:mod:`.broker_runner`); each run yields one :class:`Observation` per observable step, and
the two lists must be equal.

Members are named by short strings; each has its own connection and share session. Epochs
are tracked by the runner (the next one the session expects) unless a step forces one.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field

__all__ = [
    "Ack",
    "CloseOld",
    "Disconnect",
    "Fetch",
    "LookUp",
    "MoveLeader",
    "NewSession",
    "Observation",
    "Produce",
    "Scenario",
    "StartLeader",
    "Step",
    "StopLeader",
    "Wait",
    "member_id",
]

GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4


def member_id() -> str:
    """A fresh member id as Kafka writes one (a UUID in URL-safe base64; 4.1 insists)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


#: ``(first, last, ack type)``
AckRange = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Produce:
    """Produce ``batches`` record batches of ``records`` records each."""

    records: int = 1
    batches: int = 1


@dataclass(frozen=True, slots=True)
class Fetch:
    """A ShareFetch by ``member``, with piggy-backed acknowledgements.

    :ivar expect: whether records should come: a real broker is then given time (up to
        its ``max_wait_ms``) to deliver them; otherwise the fetch waits briefly.
    :ivar epoch: force this session epoch (None: the member's next one).
    :ivar final: epoch -1: acknowledge and close the session.
    :ivar renew: ``IsRenewAck`` (4.2+): acknowledgements only, nothing fetched.
    :ivar patience: seconds a real broker's empty answer to an expecting fetch may be
        followed by more fetches (without the acknowledgements) until records come. For
        a release the broker persists through its share coordinator (a final fetch or
        acknowledgement): on a loaded machine that write can outlast ``max_wait_ms``,
        and one empty answer would then judge the machine, not the broker's rules. Keep
        it short of what would change the answer (a lock's end redelivers with a higher
        count, which the comparison still tells apart).
    """

    member: str
    max_records: int = 500
    record_limit: bool = False
    acks: tuple[AckRange, ...] = ()
    expect: bool = True
    epoch: int | None = None
    final: bool = False
    renew: bool = False
    patience: float = 0.0


@dataclass(frozen=True, slots=True)
class Ack:
    """A ShareAcknowledge by ``member``."""

    member: str
    acks: tuple[AckRange, ...]
    epoch: int | None = None
    final: bool = False
    renew: bool = False


@dataclass(frozen=True, slots=True)
class Wait:
    """Let ``seconds`` pass (locks end)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Close ``member``'s connection; its next request opens a new one with epoch 0."""

    member: str


@dataclass(frozen=True, slots=True)
class CloseOld:
    """Close the connections :class:`NewSession` left open for ``member`` (its current
    one stays)."""

    member: str


@dataclass(frozen=True, slots=True)
class NewSession:
    """``member``'s next fetch uses epoch 0 on a new connection, and the old connection
    stays open (the broker replaces the session without releasing anything)."""

    member: str


@dataclass(frozen=True, slots=True)
class MoveLeader:
    """Leadership of the partition moves to another broker (a replica in sync; no broker
    stops). The new leader builds the share partition from the persisted state when it
    is first fetched. Every member's next request goes to the new leader on a new
    connection with epoch 0; their sessions on the old leader are left as they are. Only
    in a scenario with ``cluster=True`` (a broker target of two brokers or more)."""


@dataclass(frozen=True, slots=True)
class StopLeader:
    """The broker leading the partition, its only replica, shuts down cleanly: the
    partition has no leader until :class:`StartLeader`. Its share partition is gone with
    the broker (acquisitions forgotten; what was acknowledged or released is persisted).
    Every member's next request goes to another broker, which is up, on a new connection
    with epoch 0. Only in a scenario with ``cluster=True``."""


@dataclass(frozen=True, slots=True)
class StartLeader:
    """The broker :class:`StopLeader` stopped starts again and leads the partition once
    more (under a new leader epoch); every member's next request goes to it on a new
    connection with epoch 0."""


@dataclass(frozen=True, slots=True)
class LookUp:
    """``member`` asks for the topic's metadata on its connection: observed as the
    partition's error code and whether a leader is named."""

    member: str


Step = (
    Produce
    | Fetch
    | Ack
    | Wait
    | Disconnect
    | NewSession
    | CloseOld
    | MoveLeader
    | StopLeader
    | StartLeader
    | LookUp
)


@dataclass(frozen=True, slots=True)
class Observation:
    """What one step showed the client.

    ``acquired`` is ``(offset, delivery count)`` per acquired record, in offset order.
    """

    step: int
    kind: str
    member: str
    error: int = 0
    ack_error: int = 0
    acquired: tuple[tuple[int, int], ...] = ()
    #: for a :class:`LookUp`: whether the metadata named a leader
    leader: bool | None = None
    #: the first partition-level error code of a fetch's answer (0: none)
    partition_error: int = 0

    def __str__(self) -> str:
        if self.leader is not None:
            named = "a leader" if self.leader else "no leader"
            return f"#{self.step} {self.kind}({self.member}) error={self.error} {named}"
        got = ",".join(f"{o}@{c}" for o, c in self.acquired)
        part = f" partition_error={self.partition_error}" if self.partition_error else ""
        return (
            f"#{self.step} {self.kind}({self.member}) error={self.error}{part} "
            f"ack_error={self.ack_error} acquired=[{got}]"
        )


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named script.

    :ivar lock_ms: the group's ``share.record.lock.duration.ms``.
    :ivar renew_enabled: ``share.renew.acknowledge.enable`` (set only on 4.3+).
    :ivar min_minor: the oldest Kafka 4.x line the scenario applies to.
    :ivar max_minor: the newest.
    :ivar cluster: it moves the partition's leader (:class:`MoveLeader`) or stops it
        (:class:`StopLeader`): it needs a cluster, so :func:`~.scenarios.scenarios_for` leaves it out and
        :func:`~.scenarios.cluster_scenarios_for` lists it.
    """

    name: str
    steps: tuple[Step, ...]
    lock_ms: int = 10000
    renew_enabled: bool | None = None
    min_minor: int = 1
    max_minor: int = 4
    cluster: bool = False
    doc: str = field(default="", compare=False)

    def applies_to(self, version: str) -> bool:
        """Whether the scenario is meant for Kafka ``version``."""
        minor = int(version.split(".")[1])
        return self.min_minor <= minor <= self.max_minor

    @property
    def duration(self) -> float:
        """The seconds of waiting it contains."""
        return sum(s.seconds for s in self.steps if isinstance(s, Wait))
