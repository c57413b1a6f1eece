"""What the share machine (:mod:`.machine`) asks its driver to do: effects, as plain data.

Rules of this module:

1. An effect is a decision already taken; the driver carries it out (I/O, buffers, the
   application's callbacks) and decides nothing more.
2. The driver applies a batch of effects in the order the machine emitted them: that
   order is part of the rules (a lost session is reported before its records are dropped,
   a back-off comes after everything else of the same answer).
3. Effects are frozen and slotted; they carry no I/O objects. ``handle`` fields are the
   driver's own objects (its records), passed through untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

# Real imports, not under TYPE_CHECKING: the compiled build (mypyc) looks up the
# dataclass fields' annotations when the module is imported.
from sharecon.errors import KafkaError  # noqa: TC001
from sharecon.types import TopicIdPartition  # noqa: TC001

from .intake import PartitionIntake  # noqa: TC001
from .ledger import AckResult, Delivery  # noqa: TC001
from .session import SessionTag  # noqa: TC001

__all__ = [
    "BackOff",
    "DeadLetters",
    "Deliver",
    "Effect",
    "Fail",
    "FetchLate",
    "LockLost",
    "LocksRenewed",
    "NoteError",
    "PartitionBlocked",
    "PartitionLost",
    "Reach",
    "Rediscover",
    "RenewFailed",
    "Report",
    "SessionLost",
    "Wake",
]


@dataclass(frozen=True, slots=True)
class Report:
    """Acknowledgement outcomes to hand to the callback and to waiting commits."""

    results: list[AckResult]


@dataclass(frozen=True, slots=True)
class LockLost:
    """Answers the application gave records whose lock this member had already lost:
    reported now, and kept for the next ``commit()``."""

    results: list[AckResult]


@dataclass(frozen=True, slots=True)
class SessionLost:
    """A share session incarnation is gone: drop its buffered records (``reason``: why,
    for the log)."""

    tag: SessionTag
    reason: str = ""
    #: The broker's error code when its answer ended the session (0: the connection or
    #: the answer failed here), e.g. ``SHARE_SESSION_NOT_FOUND``: it ended it by itself.
    code: int = 0


@dataclass(frozen=True, slots=True)
class PartitionLost:
    """``tp`` moved away from ``node_id``: drop its buffered records from that node."""

    tp: TopicIdPartition
    node_id: int


@dataclass(frozen=True, slots=True)
class Rediscover:
    """Find ``tp``'s leader again: apply the answer's hint (``leader_id`` >= 0 with its
    epoch and, when the answer named it, the endpoint ``(host, port)``), else refresh
    metadata. ``code`` is the error that said so."""

    tp: TopicIdPartition
    code: int
    leader_id: int = -1
    leader_epoch: int = -1
    endpoint: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Deliver:
    """An answer's records for ``tp``, to buffer for the application.

    Every record shares ``deadline`` (counted from the fetch's send) and ``delivery``
    (which ledger entries it belongs to, so an answer to it never lands on a newer
    delivery of the same offset).
    """

    tp: TopicIdPartition
    tag: SessionTag
    deadline: float | None
    intake: PartitionIntake
    delivery: Delivery
    #: Some records are past the dead-letter limit: decode the answer now, so they reach
    #: the router at once (:class:`DeadLetters`), not when the application gets to them.
    eager: bool = False


@dataclass(frozen=True, slots=True)
class DeadLetters:
    """``count`` decoded records past the dead-letter limit now wait in the machine's
    ``dead_letters``: wake the dead-letter router."""

    count: int


@dataclass(frozen=True, slots=True)
class NoteError:
    """An error that does not stop the consumer: log it and keep it for health checks."""

    error: KafkaError


@dataclass(frozen=True, slots=True)
class Fail:
    """Stop the consumer with ``error``: the application's next wait raises it."""

    error: KafkaError


@dataclass(frozen=True, slots=True)
class BackOff:
    """Pause ``node_id``'s fetch loop before its next request (refreshing metadata first
    with ``refresh``)."""

    node_id: int
    refresh: bool = False


@dataclass(frozen=True, slots=True)
class Reach:
    """The handling rate was measured again: release the buffered answers the application
    cannot reach before their locks end (batch acquisition, :mod:`.reach`)."""


@dataclass(frozen=True, slots=True)
class Wake:
    """Wake ``node_id``'s fetch loop (``None``: every loop): it has something to send."""

    node_id: int | None = None


@dataclass(frozen=True, slots=True)
class LocksRenewed:
    """The broker renewed these records' locks: their deadline is now ``deadline``."""

    handles: tuple[object, ...]
    deadline: float | None


@dataclass(frozen=True, slots=True)
class RenewFailed:
    """The broker did not renew ``count`` records' locks on ``node_id`` (they keep their
    old deadline: a slow handler may lose them); ``records`` names them (partition,
    offset), so the driver tells each record once (``renew_refusals``)."""

    node_id: int
    count: int
    partitions: tuple[TopicIdPartition, ...]
    records: tuple[tuple[TopicIdPartition, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FetchLate:
    """A ShareFetch to ``node_id`` came back after its records' locks ended (``timed_out``:
    or never): count it (``fetches_late_total``).

    ``warn``: even one record's worth cannot arrive within the ``lock`` (seconds) at the
    measured ``bytes_per_second`` (0: not measured); set once per leader, the driver logs
    it at WARNING then (``what`` says what was seen), else at DEBUG when ``too_slow``.
    """

    node_id: int
    timed_out: bool
    too_slow: bool
    warn: bool
    lock: float
    bytes_per_second: float
    what: str = ""


@dataclass(frozen=True, slots=True)
class PartitionBlocked:
    """``tp``'s batches cannot arrive from ``node_id`` within the lock: it is no longer
    fetched (:mod:`.oversize`); log ``cause`` at WARNING."""

    node_id: int
    tp: TopicIdPartition
    cause: str


Effect = (
    Report
    | Reach
    | LockLost
    | SessionLost
    | PartitionLost
    | Rediscover
    | Deliver
    | DeadLetters
    | NoteError
    | Fail
    | BackOff
    | Wake
    | LocksRenewed
    | RenewFailed
    | FetchLate
    | PartitionBlocked
)
