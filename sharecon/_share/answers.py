"""The application's side of the share machine: which of its answers are refused, and
where acknowledgement outcomes go.

Rules of this module:

1. An answer the ledger refuses is raised as :class:`~sharecon.errors.InvalidRecordStateError`
   when the application is at fault (already answered, never held); an answer to a record
   whose lock was lost is never raised (the machine reports it, :class:`~.effects.LockLost`).
2. RENEW needs ShareAcknowledge v2 (Kafka 4.2+); on an older broker it is refused with
   :class:`~sharecon.errors.UnsupportedVersionError` before anything is marked.
3. Every acknowledgement outcome reaches every collecting ``commit()``, then the
   listeners, then the application's callback, in that order; one that raises stops
   none of the others (:class:`Outcomes`).
4. Answers to records whose lock was lost are also kept for the next ``commit()`` when
   none is collecting now (the newest :data:`LOST_KEPT`): a ``commit()`` reports them as
   failures once, never twice.
5. Sans-I/O: no clock, no logging. The driver passes what it must log through hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharecon.errors import InvalidRecordStateError, UnsupportedVersionError

from .ledger import MarkResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.types import AckType, TopicIdPartition

    from .ledger import AckResult

__all__ = [
    "LOST_KEPT",
    "Outcomes",
    "closed",
    "dead_letter_pending",
    "not_handed_out",
    "position",
    "refusal",
    "renew_refusal",
]

#: Lock-lost answers kept for the next commit() (older ones were reported already).
LOST_KEPT = 10_000

#: ShareAcknowledge's first version with RENEW (KIP-1222, Kafka 4.2).
RENEW_VERSION = 2


def position(tp: TopicIdPartition, offset: int) -> str:
    """How errors name a record: ``topic-partition offset N``."""
    return f"{tp.topic or tp.topic_id}-{tp.partition} offset {offset}"


def refusal(result: MarkResult, where: str, ack: AckType) -> InvalidRecordStateError | None:
    """The error an answer the ledger refused deserves (``None``: not refused, rule 1)."""
    if result is MarkResult.ALREADY_ACKNOWLEDGED:
        return InvalidRecordStateError(
            f"{where} was already acknowledged; cannot {ack.name.lower()} it again"
        )
    if result is MarkResult.UNKNOWN:
        return InvalidRecordStateError(
            f"{where} is not held by this consumer: it was already answered (and its answer "
            "sent), or its lock was lost and reported, or another consumer delivered it"
        )
    return None


def closed(where: str) -> InvalidRecordStateError:
    """The error for an answer given after the consumer began to close."""
    return InvalidRecordStateError(
        f"{where}: the consumer is closed; records it delivered and nobody answered were released"
    )


def not_handed_out(where: str) -> InvalidRecordStateError:
    """The error for an answer by position to a record still buffered: the application
    cannot have seen it, and answering it would leave an answered record in the buffer."""
    return InvalidRecordStateError(
        f"{where} was fetched but not handed out yet; answer only records the consumer gave you"
    )


def dead_letter_pending(where: str) -> InvalidRecordStateError:
    """The error for an answer by position to a record waiting for dead-letter routing."""
    return InvalidRecordStateError(f"{where} is being routed to the dead-letter topic")


def renew_refusal(version: int | None) -> UnsupportedVersionError | None:
    """The error for RENEW when the brokers offer ShareAcknowledge ``version`` (``None``:
    none); ``None`` when they can renew (rule 2)."""
    if version is not None and version >= RENEW_VERSION:
        return None
    offered = "none" if version is None else f"v{version}"
    return UnsupportedVersionError(
        f"renew() needs ShareAcknowledge v2 (Kafka 4.2 or newer); the broker offers {offered}"
    )


class Outcomes:
    """Where acknowledgement outcomes go (rules 3 and 4).

    :param callback: the application's ``on_acknowledged`` (may be replaced any time).
    """

    __slots__ = ("callback", "collectors", "listeners", "lost", "on_failed", "on_raised")

    def __init__(self, callback: Callable[[list[AckResult]], None] | None = None) -> None:
        self.callback = callback
        #: The lists of the ``commit()`` calls collecting now.
        self.collectors: list[list[AckResult]] = []
        #: Also told every outcome (instrumentation, e.g. sharecon.otel).
        self.listeners: list[Callable[[list[AckResult]], None]] = []
        #: Lock-lost answers not returned by a commit() yet (rule 4).
        self.lost: list[AckResult] = []
        #: Told the outcomes of a report with a failure among them (the driver logs and
        #: counts them), before the listeners.
        self.on_failed: Callable[[list[AckResult]], None] | None = None
        #: Told which of the listeners (``"listener"``) or the callback (``"callback"``)
        #: raised, and what (the driver logs it).
        self.on_raised: Callable[[str, Exception], None] | None = None

    def report(self, results: list[AckResult]) -> None:
        """Hand ``results`` to the collecting commits, the listeners and the callback."""
        if not results:
            return
        for collector in self.collectors:
            collector.extend(results)
        if self.on_failed is not None:
            for r in results:
                if not r.ok:
                    self.on_failed(results)
                    break
        for listener in self.listeners:
            try:
                listener(results)
            except Exception as exc:
                self._raised("listener", exc)
        if self.callback is not None:
            try:
                self.callback(results)
            except Exception as exc:
                self._raised("callback", exc)

    def report_lost(self, results: list[AckResult]) -> None:
        """Report lock-lost answers now, and keep them for the next commit (rule 4)."""
        if not results:
            return
        if not self.collectors:
            # A commit() collecting now gets them itself; keep them for the next one.
            self.lost.extend(results)
            del self.lost[:-LOST_KEPT]
        self.report(results)

    def collect(self) -> list[AckResult]:
        """Start a ``commit()``'s collection: the list it fills, holding the lock-lost
        answers kept for it (which are then no longer kept)."""
        collected = self.lost
        self.lost = []
        self.collectors.append(collected)
        return collected

    def stop(self, collected: list[AckResult]) -> None:
        """End the collection :meth:`collect` started."""
        self.collectors.remove(collected)

    def _raised(self, who: str, exc: Exception) -> None:
        if self.on_raised is not None:
            self.on_raised(who, exc)
