"""``commit()``: send every pending answer now and wait for the brokers' verdicts.

Rules of this module:

1. The outcomes reported while the call waits are collected (answers to records whose
   lock was already lost count as failures here: they were reported when given), and
   returned per partition: ``None``, or the first error.
2. The wait is bounded by the caller's limit; a consumer failure ends it and is raised.
   While it waits the fetch loops send what is marked at once (``flush_requested``),
   without waiting for ``ack_linger``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio

from sharecon import errors
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._consumer.signal import Signal
    from sharecon._share.answers import Outcomes
    from sharecon._share.ledger import AckResult

__all__ = ["CommitPort", "commit"]


class CommitPort(Protocol):
    """What ``commit()`` uses of its consumer (``ConsumerCore`` has all of it)."""

    #: Fetch loops send marked answers at once while it is above 0.
    flush_requested: int

    @property
    def outcomes(self) -> Outcomes:
        """Where acknowledgement outcomes go (collected while the call waits)."""
        ...

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the consumer."""
        ...

    @property
    def progress(self) -> Signal:
        """Set after every answered share request."""
        ...

    def pending_acks(self) -> bool:
        """Whether any answer is marked or in flight."""
        ...

    def wake_all(self) -> None:
        """Wake every fetch loop (and the heartbeat)."""
        ...


async def commit(
    core: CommitPort, limit: float, accept_delivered: Callable[[], None] | None
) -> dict[TopicPartition, errors.KafkaError | None]:
    """Rules 1-2; ``accept_delivered``: implicit mode's accepting of every record
    delivered so far (``None`` in explicit mode), run once the collecting began.

    :raises KafkaTimeoutError: no verdict within ``limit`` seconds.
    """
    collected = core.outcomes.collect()
    try:
        if accept_delivered is not None:
            accept_delivered()
    except BaseException:
        core.outcomes.stop(collected)
        raise
    if not core.pending_acks():
        core.outcomes.stop(collected)
        return _by_partition(collected)
    core.flush_requested += 1
    core.wake_all()
    try:
        with anyio.move_on_after(limit) as scope:
            while core.pending_acks() and core.fatal is None:
                await core.progress.wait(timeout=0.5)
    finally:
        core.outcomes.stop(collected)
        core.flush_requested -= 1
    if core.fatal is not None:
        raise core.fatal
    if scope.cancelled_caught:
        raise errors.KafkaTimeoutError(f"commit: acknowledgements not answered within {limit:g} s")
    return _by_partition(collected)


def _by_partition(results: list[AckResult]) -> dict[TopicPartition, errors.KafkaError | None]:
    """commit()'s answer: per partition, ``None`` or the first error of its results."""
    out: dict[TopicPartition, errors.KafkaError | None] = {}
    for r in results:
        key = TopicPartition(r.partition.topic or str(r.partition.topic_id), r.partition.partition)
        err = r.error()
        if key not in out or (err is not None and out[key] is None):
            out[key] = err
    return out
