"""The share machine's effects carried out once (``sharecon/_consumer/effect_port.py``),
as the consumer's core and the simulator both carry them out: what each does to the
buffer and the records, and what reaches the port, in order. No broker, no event loop."""

from __future__ import annotations

import ast
import re
import typing
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import sharecon
from sharecon._consumer.buffer import Chunk, DeliveryBuffer
from sharecon._consumer.effect_port import carry_out
from sharecon._share import effects as fx
from sharecon._share.intake import take_partition
from sharecon._share.ledger import AckResult
from sharecon._share.session import SessionTag
from sharecon.errors import KafkaError
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import Record, record_factory
from sharecon.types import TopicIdPartition

TOPIC_ID = uuid.uuid4()
TP0 = TopicIdPartition(TOPIC_ID, 0, "t")
TP1 = TopicIdPartition(TOPIC_ID, 1, "t")
OLD = SessionTag(1, 0)
NEW = SessionTag(1, 1)
OTHER_LEADER = SessionTag(2, 0)


class Port:
    """Records what reaches it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def report(self, results: list[AckResult], *, lost: bool) -> None:
        self.calls.append(("report", lost, results))

    def deliver(self, e: fx.Deliver) -> None:
        self.calls.append(("deliver", e))

    def wake(self, node_id: int | None) -> None:
        self.calls.append(("wake", node_id))

    def session_lost(self, e: fx.SessionLost, dropped: int) -> None:
        self.calls.append(("session_lost", e.tag, dropped))

    def partition_lost(self, e: fx.PartitionLost, dropped: int) -> None:
        self.calls.append(("partition_lost", e.tp, dropped))

    def fail(self, error: KafkaError) -> None:
        self.calls.append(("fail", error))

    def look_again(self) -> None:
        self.calls.append(("look_again",))

    def other(self, e: fx.Effect) -> None:
        self.calls.append(("other", e))


def _chunk(tp: TopicIdPartition, tag: SessionTag, first: int) -> Chunk:
    data = encode_batch([WireRecord(first, 0, None, b"v", ())], base_offset=first)
    intake = take_partition(tp, [(first, first, 1)], data)
    factory = partial(record_factory, "t", tp.partition, tp, None, None)
    return Chunk(intake, tag, None, factory, (first, first))


def _buffer(*chunks: Chunk) -> DeliveryBuffer:
    buffer = DeliveryBuffer(max_records=100, max_bytes=1 << 20)
    for c in chunks:
        buffer.push(c)
    return buffer


def _left(buffer: DeliveryBuffer) -> list[tuple[int, SessionTag]]:
    return [(c.intake.tp.partition, c.tag) for c in buffer.chunks()]


def test_a_lost_session_drops_its_chunks_only_then_tells_the_port() -> None:
    buffer = _buffer(_chunk(TP0, OLD, 0), _chunk(TP1, OLD, 0), _chunk(TP0, NEW, 1))
    buffer.push(_chunk(TP1, OTHER_LEADER, 1))
    port = Port()
    carry_out(fx.SessionLost(OLD, "cut"), buffer, port)
    assert _left(buffer) == [(0, NEW), (1, OTHER_LEADER)]
    assert port.calls == [("session_lost", OLD, 2)]


def test_a_lost_partition_drops_its_chunks_from_that_leader_only() -> None:
    buffer = _buffer(_chunk(TP0, OLD, 0), _chunk(TP1, OLD, 0), _chunk(TP0, OTHER_LEADER, 1))
    port = Port()
    carry_out(fx.PartitionLost(TP0, 1), buffer, port)
    assert _left(buffer) == [(1, OLD), (0, OTHER_LEADER)]
    assert port.calls == [("partition_lost", TP0, 1)]


def test_renewed_locks_move_the_deadline_of_the_records_handed_out() -> None:
    records = [Record("t", 0, TP0, None, None, None, o, 0, None, b"v", ()) for o in (3, 4)]
    port = Port()
    carry_out(fx.LocksRenewed(tuple(records), 42.0), _buffer(), port)
    assert [r.lock_deadline for r in records] == [42.0, 42.0]
    assert port.calls == []


def test_every_other_effect_reaches_the_port_in_order() -> None:
    results = [AckResult(TP0, ())]
    error = KafkaError("boom")
    chunk = _chunk(TP0, OLD, 0)
    deliver = fx.Deliver(TP0, OLD, None, chunk.intake, (0, 0))
    note = fx.NoteError(error)
    effects: list[fx.Effect] = [
        fx.Report(results),
        fx.LockLost(results),
        deliver,
        fx.Wake(2),
        fx.Wake(),
        fx.BackOff(1, refresh=True),
        note,
        fx.DeadLetters(1),
        fx.Fail(error),
    ]
    port = Port()
    buffer = _buffer()
    for e in effects:
        carry_out(e, buffer, port)
    assert port.calls == [
        ("report", False, results),
        ("report", True, results),
        ("deliver", deliver),
        ("wake", 2),
        ("wake", None),
        ("look_again",),
        ("other", note),
        ("other", fx.DeadLetters(1)),
        ("fail", error),
    ]


def _kinds_named(module: str, function: str) -> set[str]:
    # From the source file (a compiled build keeps it beside the extension module).
    path = Path(sharecon.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return set(re.findall(r"kind is fx\.(\w+)", ast.get_source_segment(source, node) or ""))
    raise AssertionError(f"{function} not found in {path}")


def test_every_kind_of_effect_is_carried_out_by_the_port_or_the_consumer() -> None:
    """carry_out passes what it does not name to ``other``; the consumer's ``other`` names
    each kind it acts on and has no catch-all. Together they name every kind, so none
    falls through silently (a new kind must be given to one of them)."""
    here = _kinds_named("sharecon._consumer.effect_port", "carry_out")
    there = _kinds_named("sharecon._consumer.core", "other")
    kinds = {k.__name__ for k in typing.get_args(fx.Effect)}
    assert here and there and not here & there
    assert here | there == kinds
