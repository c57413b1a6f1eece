"""The public :class:`RecordFuture` (re-exported by :mod:`sharecon.producer`): one
record's outcome, over the engine's :class:`~sharecon._produce.batch.Batch`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sharecon import errors

from .sender import Sender, run_callback

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from sharecon._produce.batch import Batch
    from sharecon._produce.metadata import RecordMetadata

__all__ = ["RecordFuture"]


class RecordFuture:
    """The outcome of one record queued by :meth:`Producer.send`: await it for the
    record's :class:`RecordMetadata`.

    ``await future`` waits until the broker acknowledged the record and returns where it was
    written, or raises the typed error that made its delivery fail
    (:class:`~sharecon.errors.MessageTooLargeError`,
    :class:`~sharecon.errors.KafkaTimeoutError` after ``delivery_timeout``, ...). It can
    be awaited any number of times, by several tasks, under asyncio and trio alike; each
    gets the same result. Cancelling a wait does not take the record back.

    A record whose delivery fails while no one has awaited its future yet is not lost
    silently: the producer logs a WARNING (logger ``sharecon.producer``) once for its
    batch. Awaiting the future later still raises the error.
    """

    __slots__ = ("_batch", "_claimed", "_index")

    _batch: Batch
    _index: int
    _claimed: bool

    def __init__(self) -> None:
        raise TypeError("RecordFuture objects are made by Producer.send()")

    @classmethod
    def _for(cls, batch: Batch, index: int) -> RecordFuture:
        future = object.__new__(cls)
        future._batch = batch
        future._index = index
        future._claimed = False
        batch.unclaimed += 1
        return future

    @property
    def topic(self) -> str:
        """The record's topic."""
        return self._batch.topic

    @property
    def partition(self) -> int:
        """The partition the record was queued for (known before it is written)."""
        return self._batch.partition

    def done(self) -> bool:
        """Whether the record's delivery is over (written, or failed for good)."""
        return self._batch.done

    def result(self) -> RecordMetadata:
        """Where the record was written, without waiting.

        :raises RuntimeError: the delivery is not done yet (see :meth:`done`).
        :raises KafkaError: the delivery failed (the same error ``await`` raises).
        """
        batch = self._batch
        if not batch.done:
            raise RuntimeError(
                f"the record for {batch.topic}-{batch.partition} is not delivered yet: "
                "await the future (or producer.flush()) first"
            )
        self._claim()
        outcome = batch.outcome(self._index)
        if isinstance(outcome, errors.KafkaError):
            raise outcome
        return outcome

    def _claim(self) -> None:
        if not self._claimed:
            self._claimed = True
            self._batch.unclaimed -= 1

    def add_done_callback(self, callback: Callable[[RecordFuture], object]) -> None:
        """Call ``callback(future)`` once the delivery is over (at once if it already is).

        The callback runs in the producer's own task, so it must be quick and must not
        block; read the outcome with :meth:`result`. An exception it raises is logged
        (logger ``sharecon.producer``) and otherwise ignored. A future with a callback
        counts as awaited: its failure is the callback's to report.
        """
        self._claim()
        batch = self._batch
        if batch.done:
            run_callback(callback, self)
        elif batch.callbacks is None:
            batch.callbacks = [(self, callback)]
        else:
            batch.callbacks.append((self, callback))

    async def _wait(self) -> RecordMetadata:
        self._claim()
        await Sender.wait_done(self._batch)
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self._wait().__await__()

    def __repr__(self) -> str:
        batch = self._batch
        if not batch.done:
            state = "pending"
        else:
            outcome = batch.outcome(self._index)
            state = (
                f"failed: {type(outcome).__name__}"
                if isinstance(outcome, errors.KafkaError)
                else f"offset {outcome.offset}"
            )
        return f"<RecordFuture {batch.topic}-{batch.partition} {state}>"


# The public home of the class is sharecon.producer (docs and reprs name it there).
RecordFuture.__module__ = "sharecon.producer"
