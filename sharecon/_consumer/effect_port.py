"""The share machine's effects carried out, once, over a narrow port.

:class:`~sharecon._consumer.core.ConsumerCore` (the consumer) and the simulator's member
(:mod:`sharecon.testing.sim`) both carry out the machine's effects with
:func:`carry_out`: what each effect does to the delivery buffer and to the records
handed out is done here; what needs the runtime (outcomes to the application, chunks
to buffer, loops to wake, the consumer failed) goes to the :class:`EffectPort`, one
method per kind. A port decides nothing; the simulator's records its invariants'
bookkeeping there.

Rules of this module:

1. Effects are carried out one at a time, in the order the machine emitted them (rule 2
   of :mod:`sharecon._share.effects`); the caller loops.
2. A lost session drops every buffered chunk of that session incarnation; a lost
   partition drops that partition's buffered chunks from that leader only; renewed
   locks move the deadline of the records handed out. The port hears of each loss
   after the drop, with how many chunks went.
3. The fetch loop's own effects (``BackOff``, ``Rediscover``) reach here only from
   outside a fetch loop: the port is asked to let its loops look again.
4. Effects only the consumer acts on (errors kept, the dead-letter router woken,
   records out of reach released, counters and log lines) go to :meth:`EffectPort.other`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from sharecon._share import effects as fx

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.buffer import Chunk, DeliveryBuffer
    from sharecon._share.ledger import AckResult
    from sharecon.errors import KafkaError
    from sharecon.record import Record
    from sharecon.types import TopicIdPartition

__all__ = ["EffectPort", "carry_out"]


class EffectPort(Protocol):
    """What carrying out an effect needs from the runtime (rules 2-4)."""

    def report(self, results: list[AckResult], *, lost: bool) -> None:
        """Acknowledgement outcomes (``lost``: answers to records whose lock was lost)."""

    def deliver(self, e: fx.Deliver) -> None:
        """An answer's records, to buffer for the application."""

    def wake(self, node_id: int | None) -> None:
        """Wake one leader's fetch loop (``None``: every one)."""

    def session_lost(self, e: fx.SessionLost, dropped: int) -> None:
        """A session incarnation is over; ``dropped`` of its records left the buffer,
        never handed out."""

    def partition_lost(self, e: fx.PartitionLost, dropped: int) -> None:
        """A partition's locks on one leader are lost; ``dropped`` of its records left the
        buffer, never handed out."""

    def fail(self, error: KafkaError) -> None:
        """Stop the consumer with ``error``."""

    def look_again(self) -> None:
        """A back-off or re-routing outside a fetch loop: let the loops look again."""

    def other(self, e: fx.Effect) -> None:
        """An effect only the consumer acts on (rule 4)."""


def carry_out(e: fx.Effect, buffer: DeliveryBuffer, port: EffectPort) -> None:
    """Carry out one effect (rules 1-4)."""
    kind = type(e)
    if kind is fx.Report:
        port.report(cast("fx.Report", e).results, lost=False)
    elif kind is fx.LockLost:
        port.report(cast("fx.LockLost", e).results, lost=True)
    elif kind is fx.Deliver:
        port.deliver(cast("fx.Deliver", e))
    elif kind is fx.Wake:
        port.wake(cast("fx.Wake", e).node_id)
    elif kind is fx.SessionLost:
        lost = cast("fx.SessionLost", e)
        port.session_lost(lost, buffer.drop(_of_session(lost)))
    elif kind is fx.PartitionLost:
        gone = cast("fx.PartitionLost", e)
        port.partition_lost(gone, buffer.drop(_of_partition(gone.tp, gone.node_id)))
    elif kind is fx.LocksRenewed:
        renewed = cast("fx.LocksRenewed", e)
        for handle in renewed.handles:
            cast("Record", handle).lock_deadline = renewed.deadline
    elif kind is fx.Fail:
        port.fail(cast("fx.Fail", e).error)
    elif kind is fx.BackOff or kind is fx.Rediscover:
        port.look_again()
    else:
        port.other(e)


def _of_session(lost: fx.SessionLost) -> Callable[[Chunk], bool]:
    tag = lost.tag
    return lambda c: c.tag == tag


def _of_partition(tp: TopicIdPartition, node_id: int) -> Callable[[Chunk], bool]:
    return lambda c: c.intake.tp == tp and c.tag.node_id == node_id
