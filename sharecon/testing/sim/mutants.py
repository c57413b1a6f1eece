"""Deliberate bugs shared by the two simulations: each written once, here.

The core simulation (:mod:`.world`) plants them through its fetch driver (one schedule at a
time, no global patching); the whole-client simulation (:mod:`.client`) patches the
machine's class for one run with the context managers here.

``dry-forever``: the fix of rule 2 of :mod:`sharecon._share.fetch_policy` reverted. After a
no-wait fetch came back empty the planner waits for an answer from the application before
fetching again, with no timeout: the loop's idle wait has one only while acknowledgements
wait their linger, and its end never clears ``dry``.

``handed-short``: ``poll()`` and ``batches()`` tell the machine they handed out every
record of a batch but its last (an off-by-one in ``Handout.handed_out``): that record
stays acquired in the ledger, as if still buffered, and the next batch's implicit accept
leaves it out. Planted in the pure iteration's call, so it acts in both builds.

``renew-refused-ok``: a renewal the broker refused for a partition (the partition's code
in a ShareAcknowledge answer) is taken as granted, as the mutation
``codes.get(tp) >= NONE`` in :func:`sharecon._share.fetch_policy.renewed` does: the
member believes it holds a record the broker took back. Planted in the machine's module
(its call to ``renewed``, a module of the pure build in both builds) for one run.

``answers-ungathered``: rule 2's gathering of :mod:`sharecon._share.fetch_policy` undone
(stop 51): an answer that follows an empty no-wait fetch wakes the loop into another
no-wait fetch at once, as do answers given before that empty answer came. A slow
handler's answers go a fetch each. Planted in the planner's class for one run.

``partitions-cut-short``: the machine stops taking in a topic's records at its first
partition that brings neither an error nor records (an ack-only partition, whose codes
``fetch_answered`` took), as the mutation ``continue`` to ``break`` in
:meth:`ShareMachine.fetch_records` does: records the broker acquired for the member in
the partitions after it sit under their locks unseen until the locks end (stop 52; a
survivor of the mutation sample of seed 15). Planted in the machine's class for one run.

``no-transport-backoff``: a request that failed in transport (its connection refused or
cut) asks for no back-off, as the mutation ``if not back_off`` in
:meth:`ShareMachine.transport_failed` does: the loop asks the same broker again at once,
and against a broker that keeps refusing it would retry without pause (stop 53; a
survivor of the mutation sample of seed 16). Planted in the machine's class for one run,
in the two methods the driver calls.

``pipelines-closing``: the machine pipelines every answer that acquired records, even
while the member closes (the driver's ``pipeline=False`` ignored, as the mutation ``or
not hidden`` for ``and not hidden`` in :meth:`ShareMachine.fetch_answered` does when
records came): the next fetch goes out during the close, and what it acquires is
released unseen (stop 53; a survivor of the mutation sample of seed 16). Planted in the
machine's class for one run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from unittest import mock

from sharecon._share.machine import ShareMachine

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

# The two machine-level functions are for the core simulation's fetch driver only.
__all__ = [
    "answers_ungathered",
    "dry_forever",
    "handed_short",
    "no_transport_backoff",
    "partitions_cut_short",
    "pipelines_closing",
    "renew_refused_ok",
]


def dry_forever_idle_timeout(
    machine: ShareMachine, node_id: int, ack_linger: float, now: float | None = None
) -> float | None:
    """``ShareMachine.idle_timeout`` of the ``dry-forever`` mutant: ``ack_linger`` while
    acknowledgements wait, else no timeout at all (a dry planner waits for a wake-up).
    Like the real one, a loop idle with nothing marked is woken by the next answer."""
    leader = machine.leader(node_id)
    if machine.ledger.has_marked(leader.session.tag):
        return ack_linger
    if not leader.planner.dry:
        leader.planner.awaits_answer = True
        machine.any_dry = True
    return None


def dry_forever_idle_expired(machine: ShareMachine, node_id: int) -> None:
    """``ShareMachine.idle_expired`` of the ``dry-forever`` mutant: the lingering
    acknowledgements go out, and the planner stays dry."""
    planner = machine.leader(node_id).planner
    if machine.ledger.has_marked(planner.session.tag):
        planner.linger_expired = True


def dry_forever() -> AbstractContextManager[object]:
    """Plant ``dry-forever`` in :class:`ShareMachine` itself while the context runs (for
    a simulation that runs the real clients, which make their own machines)."""
    return mock.patch.multiple(
        ShareMachine,
        idle_timeout=dry_forever_idle_timeout,
        idle_expired=dry_forever_idle_expired,
    )


def handed_short() -> AbstractContextManager[object]:
    """Plant ``handed-short`` in :class:`~sharecon._consumer.handout.Handout` while the
    context runs."""
    from sharecon._consumer.handout import Handout

    real = Handout.handed_out

    def handed_out(self: Handout, records: list[Any]) -> None:
        if len(records) > 1:
            real(self, records[:-1])

    return mock.patch.object(Handout, "handed_out", handed_out)


def renew_refused_ok() -> AbstractContextManager[object]:
    """Plant ``renew-refused-ok`` in :mod:`sharecon._share.machine` while the context
    runs: per-partition renewal codes ignored, a whole answer's success taken for each."""
    from sharecon._share import fetch_policy
    from sharecon._share import machine as machine_module

    real = fetch_policy.renewed

    def renewed(plan: Any, *, ok: bool, codes: Any = None) -> Any:
        return real(plan, ok=ok, codes=None)

    return mock.patch.object(machine_module, "renewed", renewed)


def answers_ungathered() -> AbstractContextManager[object]:
    """Plant ``answers-ungathered`` in :class:`~sharecon._share.fetch_policy.FetchPlanner`
    while the context runs: an answer ends a dry spell without gathering, and a dry
    planner with answers marked plans as if it were not dry."""
    from contextlib import ExitStack

    from sharecon._share.fetch_policy import FetchPlanner

    real_next = FetchPlanner.next

    def answered(self: FetchPlanner) -> bool:
        was = self.dry
        self.dry = False
        return was

    def next_turn(self: FetchPlanner, ledger: Any, want: Any, **kw: Any) -> Any:
        if self.dry and ledger.has_marked(self.session.tag):
            self.dry = False
        return real_next(self, ledger, want, **kw)

    stack = ExitStack()
    stack.enter_context(mock.patch.object(FetchPlanner, "answered", answered))
    stack.enter_context(mock.patch.object(FetchPlanner, "next", next_turn))
    return stack


def partitions_cut_short() -> AbstractContextManager[object]:
    """Plant ``partitions-cut-short`` in :class:`ShareMachine` while the context runs: each
    topic of a ShareFetch answer is cut before its first partition with no error and no
    records, before the machine takes the records in."""
    from dataclasses import replace

    real = ShareMachine.fetch_records

    def fetch_records(self: ShareMachine, f: Any, resp: Any, names: Any, **kw: Any) -> None:
        topics = []
        for t in resp.responses:
            kept = []
            for p in t.partitions:
                if not p.error_code and not p.acquired_records:
                    break
                kept.append(p)
            topics.append(replace(t, partitions=tuple(kept)))
        real(self, f, replace(resp, responses=tuple(topics)), names, **kw)

    return mock.patch.object(ShareMachine, "fetch_records", fetch_records)


def no_transport_backoff() -> AbstractContextManager[object]:
    """Plant ``no-transport-backoff`` in :class:`ShareMachine` while the context runs: a
    transport failure never asks for a back-off. Planted in the two methods the driver
    calls (``send_failed``, ``request_failed``), whose back-off comes from
    ``transport_failed``: in the compiled build they call it natively, past any patch of
    ``transport_failed`` itself."""
    from contextlib import ExitStack

    from sharecon._share.effects import BackOff

    def without_backoff(real: Any) -> Any:
        def method(self: ShareMachine, *args: Any, **kw: Any) -> Any:
            before = len(self.effects)
            out = real(self, *args, **kw)
            self.effects[before:] = [e for e in self.effects[before:] if type(e) is not BackOff]
            return out

        return method

    stack = ExitStack()
    for name in ("send_failed", "request_failed"):
        real = getattr(ShareMachine, name)
        stack.enter_context(mock.patch.object(ShareMachine, name, without_backoff(real)))
    return stack


def pipelines_closing() -> AbstractContextManager[object]:
    """Plant ``pipelines-closing`` in :class:`ShareMachine` while the context runs: every
    ShareFetch answer is taken in as if the loop went on after it."""
    real = ShareMachine.fetch_answered

    def fetch_answered(
        self: ShareMachine, f: Any, resp: Any, names: Any, now: float, *, pipeline: bool
    ) -> Any:
        return real(self, f, resp, names, now, pipeline=True)

    return mock.patch.object(ShareMachine, "fetch_answered", fetch_answered)
