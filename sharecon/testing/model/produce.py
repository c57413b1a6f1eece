"""A sans-I/O model of how a Kafka partition leader appends an idempotent producer's
batches (4.x, non-transactional): the rules the producer simulation
(:mod:`sharecon.testing.sim.produce`) answers Produce requests with.

Rules (Kafka's ``ProducerAppendInfo`` and ``ProducerStateEntry``; "The model broker" in
``docs/testing.md``):

1. **No producer id** (-1): the batch is appended, nothing is checked.
2. **An older epoch** than the partition last saw from the producer id:
   ``INVALID_PRODUCER_EPOCH``, nothing appended.
3. **A duplicate**: the same epoch and the same first and last sequence as one of the
   last five batches the partition appended for the producer id: answered ``NONE`` with
   that batch's first offset; nothing is appended again.
4. **A new producer id or epoch**: with no state for the producer id at all (never
   written, or its state is gone, e.g. by retention) any sequence is accepted; for a
   newer epoch of a known producer id the sequence must be 0, else
   ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
5. **The same epoch**: the first sequence must follow the last one appended (wrapping
   after 2**31 - 1), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
6. An appended batch takes the next offsets; the producer's state remembers its epoch and
   its last five batches.

The state is the partition's, not a broker's: followers rebuild it from the log they
replicate, so a new leader answers as the old one would have (a clean election).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.records import read_batches

__all__ = ["Appended", "ProducePartition", "ProducerState", "ProducerStates"]

_SEQ_MASK = 0x7FFFFFFF
#: Batches remembered per producer id to recognise a resent one (Kafka's
#: ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``).
RETAINED = 5


@dataclass(slots=True)
class ProducerState:
    """What a partition remembers of one producer id (rule 6)."""

    epoch: int
    #: (first sequence, last sequence, first offset) of the last batches appended.
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=RETAINED))


class ProducerStates:
    """A partition's producer states and the rules 1 to 6 on them: one copy of the rules,
    for the model partition below and for FakeKafka's logs alike."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[int, ProducerState] = {}

    def get(self, producer_id: int) -> ProducerState | None:
        """The state of ``producer_id``, None when the partition has none."""
        return self._by_id.get(producer_id)

    def check(self, producer_id: int, epoch: int, base_seq: int, count: int) -> tuple[int, int]:
        """Rules 1 to 5 for a batch of ``count`` records: ``(error code, first offset)``,
        where the offset is that of the batch it duplicates (rule 3; nothing to append)
        and -1 otherwise (append it unless the code is an error)."""
        if producer_id < 0:
            return ErrorCode.NONE, -1
        state = self._by_id.get(producer_id)
        if state is None:
            return ErrorCode.NONE, -1  # rule 4: no state, any sequence
        if epoch < state.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, -1
        if epoch != state.epoch:
            ok = base_seq == 0
            return (ErrorCode.NONE if ok else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), -1
        last_seq = (base_seq + count - 1) & _SEQ_MASK
        for f, lst, offset in state.batches:
            if f == base_seq and lst == last_seq:
                return ErrorCode.NONE, offset  # rule 3
        if state.batches and base_seq != (state.batches[-1][1] + 1) & _SEQ_MASK:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        return ErrorCode.NONE, -1

    def note(self, producer_id: int, epoch: int, base_seq: int, count: int, first: int) -> None:
        """Rule 6: remember a batch of ``count`` records appended at offset ``first``."""
        if producer_id < 0:
            return
        state = self._by_id.get(producer_id)
        if state is None or epoch != state.epoch:
            state = self._by_id[producer_id] = ProducerState(epoch)
        state.batches.append((base_seq, (base_seq + count - 1) & _SEQ_MASK, first))

    def forget(self, producer_id: int) -> None:
        """Drop the state of ``producer_id`` (as retention does once its batches are
        deleted): its next batch is accepted at any sequence (rule 4)."""
        self._by_id.pop(producer_id, None)


@dataclass(frozen=True, slots=True)
class Appended:
    """One record in the log: who sent it (producer id, epoch, sequence) and its value."""

    producer_id: int
    epoch: int
    sequence: int
    value: bytes | None


class ProducePartition:
    """One partition's log and producer states."""

    __slots__ = ("log", "producers")

    def __init__(self) -> None:
        self.log: list[Appended] = []
        self.producers = ProducerStates()

    def append(self, records: bytes | bytearray | memoryview) -> tuple[int, int]:
        """Append the batch of a Produce request's partition data: ``(error code, base
        offset)`` (-1 when nothing was appended)."""
        split = read_batches(records)
        if len(split.batches) != 1:
            return ErrorCode.INVALID_RECORD, -1
        (batch,) = split.batches
        values = [r.value for r in batch.records()]
        return self.append_batch(
            batch.producer_id, batch.producer_epoch, batch.base_sequence, values
        )

    def append_batch(
        self, producer_id: int, epoch: int, base_seq: int, values: list[bytes | None]
    ) -> tuple[int, int]:
        """Rules 1 to 6 for one batch of ``values``."""
        code, duplicate = self.producers.check(producer_id, epoch, base_seq, len(values))
        if code != ErrorCode.NONE or duplicate >= 0:
            return code, duplicate
        first = len(self.log)
        self.producers.note(producer_id, epoch, base_seq, len(values), first)
        for i, value in enumerate(values):
            self.log.append(Appended(producer_id, epoch, (base_seq + i) & _SEQ_MASK, value))
        return ErrorCode.NONE, first

    def forget(self, producer_id: int) -> None:
        """Drop the state of ``producer_id``: its next batch takes any sequence (rule 4)."""
        self.producers.forget(producer_id)
