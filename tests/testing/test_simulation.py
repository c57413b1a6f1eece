"""Deterministic simulation: the real share machine and buffer against the model broker,
under seeded fault schedules (``sharecon.testing.sim``; "Simulation" in docs/testing.md).

A bounded run: fixed seeds, some random ones (printed), the seeds of the bugs it found,
and the deliberate bugs it must catch. A failure names the command that replays it.
"""

from __future__ import annotations

import ast
import pathlib
import random
from typing import TYPE_CHECKING, Any
from unittest import mock

import pytest

from sharecon._consumer.delayed import DelayedReleaser, Stepped
from sharecon._share.fetch_policy import FetchPlanner
from sharecon._share.machine import MIN_PARKED_WAIT_MS
from sharecon._share.record_limit import RecordBudget
from sharecon.testing.model import RecordState
from sharecon.testing.sim import MUTANTS, Outcome, first_failure, run, search
from sharecon.testing.sim.__main__ import main
from sharecon.testing.sim.world import GROUP, World

if TYPE_CHECKING:
    from sharecon._share.fetch_policy import Turn
    from sharecon._share.ledger import AckLedger

FIXED = list(range(1000))
RANDOM = 200
#: Seeds of bugs the simulator found (all on Kafka 4.4 semantics), kept as regressions:
#: 272 close() raised ValueError (an offset dead in two buffered deliveries); 1974 handing
#: out an old delivery marked a buffered newer one as handed out; 2964 a leader kept the
#: whole strict record budget (record_limit) while records waited at the other;
#: 334190681 (found on 4.2) a stalled 75-byte answer blocked its partition for good as
#: a batch too large for the link (invariant 9; _share/oversize.py rule 1).
#: The others pinned the simulator's own bookkeeping while it was built (leader moves,
#: hostile ranges, answers after close).
REGRESSIONS = [
    272,
    1974,
    2964,
    334190681,
    16,
    28,
    293,
    347,
    407,
    408,
    1084,
    1093,
    500001712,
    590556105,
    100041544,  # an error answer waited out max_wait at the model broker
    100044878,  # a pipelined fetch abandoned with its record reservation held
    700003365,  # a lock loss at once for an answer ended an older delivery (checker)
    291,  # explicit mode: a record whose loss was reported stopped `async for` for good
    298,  # the same, found with it (the cursor's own steps, issue 30)
    236,  # implicit poll(): the bulk accept reported buffered records of a lost delivery
    705236232,  # checker: a compacted offset released at close was counted as a delivery
    20007135,  # a corrupt redelivery's release marked the older delivery the app held
    1479,  # a stalled answer from the old leader ended the new leader's delivery
    300000256,  # a pipelined request carried a release onto a re-acquisition it hid
    60019839,  # a partition rebuilt on the same leader: old buffered copies handed out
]
#: Seeds of bugs found with ``--delayed-release`` (on 4.2 and 4.4), replayed with it:
#: 501488 and six more: with record_limit 1 and two leaders, a finished record woke no
#: leader waiting for the budget and an empty leader then held it for a whole long poll,
#: about 3 s a record, so records were left unanswered after the drain (invariant 5);
#: 501325 and 502223: under batch acquisition a record waiting out its delay counted as
#: held and stopped fetching for the delay (invariant 9).
DELAYED_REGRESSIONS = [
    501488,
    500299,
    501584,
    501829,
    502063,
    502231,
    502714,
    501325,
    502223,
    1969,  # found on the simdry branch (4.4, record_limit 1), fixed by the same rule 4
    50004145,  # checker: a refused delayed release ended a delivery the cursor still held
]


def _explain(bad: list[Outcome], mutant: str | None = None) -> str:
    return "\n".join(f"{o.violation}\n  replay: {o.replay(mutant)}" for o in bad[:5])


@pytest.mark.parametrize("version", ["4.1", "4.4"])
def test_fixed_seeds_keep_every_invariant(version: str) -> None:
    bad = search(FIXED, (version,))
    assert not bad, _explain(bad)


def test_random_seeds_keep_every_invariant() -> None:
    start = random.SystemRandom().randrange(10**6, 10**9)
    print(f"simulation: random seeds {start}..{start + RANDOM - 1}")
    seeds = list(range(start, start + RANDOM))
    bad = search(seeds, ("4.1", "4.2", "4.3", "4.4"))
    assert not bad, _explain(bad)


def test_the_seeds_of_found_bugs_keep_every_invariant() -> None:
    bad = search(REGRESSIONS, ("4.1", "4.2", "4.4"))
    assert not bad, _explain(bad)


def test_the_seeds_of_found_bugs_replay_as_they_were_found() -> None:
    """A quarter of the schedules became ``poll()`` applications after most of these
    seeds found their bugs (16, 293 and 500001712 among them): without them
    (``poll=False``, ``--no-poll``) each seed replays the schedule that found its bug."""
    assert any(World(s, "4.4", None, None).knobs.poll for s in REGRESSIONS)
    assert not any(World(s, "4.4", None, None, poll=False).knobs.poll for s in REGRESSIONS)
    bad = search(REGRESSIONS, ("4.1", "4.2", "4.4"), poll=False)
    assert not bad, _explain(bad)


@pytest.mark.parametrize(
    ("mutant", "invariant"),
    [
        ("no-supersede", 2),
        ("no-record-lock-check", 1),
        ("dry-forever", 9),
        ("answer-no-wake", 22),
        ("answers-ungathered", 25),
        ("partitions-cut-short", 26),
        ("no-transport-backoff", 13),
        ("pipelines-closing", 27),
    ],
)
@pytest.mark.parametrize("version", ["4.1", "4.4"])
def test_a_deliberate_bug_is_caught(mutant: str, invariant: int, version: str) -> None:
    """Proof the simulator can fail: the supersede rule that fixed the double accepts
    skipped (the pipelined request then carries an answer the broker applies to the new
    delivery), the buffer's per-record lock check skipped, and the fix of rule 2 of
    _share/fetch_policy.py reverted (after an empty no-wait fetch the planner waits for
    an answer for ever; a gathering application answers only once it has seen another
    record), a loop idle with nothing marked left asleep by the application's answers
    (an unhurried application near the end of the settling time), and answers after an
    empty no-wait fetch sent a fetch each instead of gathering, an answer's records
    taken in only up to its first partition that brought only acknowledgement codes, and
    a broker asked again at once after a request to it failed in transport, and an
    answer pipelined while the member closes (its next fetch acquires records the close
    releases unseen)."""
    found = first_failure(list(range(2000)), (version,), mutant)
    assert found is not None, f"{mutant} was not caught in 2000 schedules"
    assert found.violation is not None
    assert found.violation.invariant == invariant, str(found.violation)
    # The same seed without the mutant keeps every invariant.
    assert run(found.seed, version).violation is None


def test_an_answer_held_back_by_a_long_poll_is_caught() -> None:
    """Invariant 22: records received but not buffered yet stop counting as held
    (``extra_records`` ignored, as the mutant ``extra_records == 0`` of rule 2 of
    ``fetch_policy`` did): the pipelined fetch then waits at the broker while they come
    in, and the application's answers to them wait for that long poll to end."""
    original = FetchPlanner.next

    def planned(self: FetchPlanner, ledger: AckLedger, want: Any, **kw: Any) -> Turn:
        kw["extra_records"] = 0
        return original(self, ledger, want, **kw)

    with mock.patch.object(FetchPlanner, "next", planned):
        bad = run(34, "4.1").violation
    assert bad is not None and bad.invariant == 22, bad
    assert "is not on the wire" in bad.what
    assert run(34, "4.1").violation is None


def test_a_member_that_spins_while_a_record_is_parked_is_caught() -> None:
    """Invariant 23: a fetch with a parked record waits at the broker only the shortest
    parked wait (the mutant ``// 1000`` for ``* 1000`` in ``_parked_wait_ms``), not until
    the record's renewal or release is due: an idle member then asks its leaders ten
    times a second. Planted where the planner is handed that wait (``FetchPlanner.next``
    is pure Python in both builds; the machine, compiled, calls its own methods
    directly)."""
    original = FetchPlanner.next

    def planned(self: FetchPlanner, ledger: AckLedger, want: Any, **kw: Any) -> Turn:
        if kw.get("wait_ms") is not None:
            kw["wait_ms"] = min(kw["wait_ms"], MIN_PARKED_WAIT_MS)
        return original(self, ledger, want, **kw)

    with mock.patch.object(FetchPlanner, "next", planned):
        bad = run(4, "4.4", delayed=True).violation
    assert bad is not None and bad.invariant == 23, bad
    assert "the member spins" in bad.what
    assert run(4, "4.4", delayed=True).violation is None


def test_a_member_that_takes_more_than_its_record_limit_is_caught() -> None:
    """Invariant 24: under a strict record limit the member's fetches are granted only
    what it may still hold. A budget that forgets what is held (the mutant ``>>`` for
    ``+`` in the machine's ``grant(held + extra_records)`` did so whenever a fetch was in
    flight) lets a member of limit 1 hold two records; every other invariant held.
    Planted in ``RecordBudget.grant``, pure Python in both builds."""
    original = RecordBudget.grant

    def forgetful(self: RecordBudget, held: int) -> int:
        return original(self, 0)

    world = World(0, "4.4", None, None)
    assert world.record_limit == 1
    with mock.patch.object(RecordBudget, "grant", forgetful):
        bad = world.run().violation
    assert bad is not None and bad.invariant == 24, bad
    assert "over its record limit of 1" in bad.what
    assert run(0, "4.4").violation is None


def test_the_ledger_alone_refuses_answers_after_close() -> None:
    """The machine told nothing of the close (the simulator's ``answers-after-close``
    mutant) takes no answer given after it either: closing marks every record the member
    holds, those whose renewal is pending or in flight included, so the ledger refuses a
    late answer itself. Before that fix the records being renewed were left held, and
    invariant 6 caught the mutant (first at seed 326 on 4.4); no schedule does now."""
    assert first_failure(list(range(1000)), ("4.4",), "answers-after-close") is None


def test_the_schedules_lose_the_coordinator_leaders_and_sessions() -> None:
    """The fault list of the issue: lock expiry (slow handlers, stalls), leader moves,
    coordinator loss (unavailable, moved, heartbeats cut until the member is fenced and
    loses its assignment), session eviction, transient top-level errors; every schedule keeps every invariant
    (``test_fixed_seeds_keep_every_invariant``)."""
    kinds: dict[str, int] = {}
    for seed in range(300):
        out = run(seed, "4.4")
        assert out.violation is None, out.replay()
        seen = {f.split("@")[0] for f in out.faults}
        if "unassigned" in seen and "close" not in seen:
            seen.add("fenced")  # the coordinator took the assignment away; the member rejoined
        for k in seen:
            kinds[k] = kinds.get(k, 0) + 1
    kinds_ = ("coord-down", "coord-move", "coord-cut", "move", "evict", "stall", "fenced", "error")
    for k in kinds_:
        assert kinds.get(k, 0) >= 10, (k, kinds)


def test_a_record_waiting_out_a_delay_holds_up_no_other_record() -> None:
    """After the faults the application releases a record with a delay three locks long
    (renewed meanwhile, as ``release(delay=)`` does) while a producer writes; the records
    written meanwhile reach the application within the liveness bound (invariant 9)."""
    bad = search(list(range(100)), ("4.2", "4.4"), delayed=True)
    assert not bad, _explain(bad)


def test_the_delayed_seeds_of_found_bugs_keep_every_invariant() -> None:
    bad = search(DELAYED_REGRESSIONS, ("4.2", "4.4"), delayed=True)
    assert not bad, _explain(bad)


def test_the_simulator_runs_the_consumers_delayed_releases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: the simulator runs the code users run. A delayed release goes through the
    consumer's own DelayedReleaser (``sharecon/_consumer/delayed.py``), renewed and then
    released by its ``step``; the simulator holds no copy of that driver."""
    path = pathlib.Path(__file__).resolve().parents[2] / "sharecon" / "testing" / "sim"
    modules = {
        node.module
        for node in ast.walk(ast.parse((path / "world.py").read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert "sharecon._consumer.delayed" in modules
    assert "sharecon._share.delayed" not in modules  # the decisions only through the driver
    released: list[object] = []
    step = DelayedReleaser.step

    def counted(self: DelayedReleaser, now: float) -> Stepped:
        done = step(self, now)
        released.extend(r for r, _ in done.released)
        return done

    monkeypatch.setattr(DelayedReleaser, "step", counted)
    assert run(0, "4.4", delayed=True).violation is None
    assert len(released) == 1


def test_a_schedule_is_deterministic() -> None:
    for seed in (3, 27, 272):
        assert run(seed, "4.4") == run(seed, "4.4")


def test_a_failure_prints_the_command_that_replays_it(capsys: pytest.CaptureFixture[str]) -> None:
    found = first_failure(list(range(600)), ("4.1",), "no-supersede")
    assert found is not None
    cmd = found.replay("no-supersede")
    assert cmd == (
        f"python -m sharecon.testing.sim --seed {found.seed} --version 4.1 --mutant no-supersede"
    )
    assert main(cmd.split()[3:]) == 1
    out = capsys.readouterr().out
    assert f"replay: {cmd}" in out
    assert str(found.violation) in out
    assert main(["--seed", str(found.seed), "--version", "4.1"]) == 0


def test_a_dry_wait_restarted_by_each_wake_up_is_caught() -> None:
    """The dry planner's wait restarted at every idle spell (no deadline): a gathering
    application keeping its locks wakes the loop with each renewal, so the planner never
    fetches again while a record written after its empty answer waits (invariant 9).
    Renewals exist from Kafka 4.2."""
    found = first_failure(list(range(2000)), ("4.4",), "dry-restarts")
    assert found is not None and found.violation is not None
    assert found.violation.invariant == 9, str(found.violation)
    assert run(found.seed, "4.4").violation is None


def test_a_refused_renewal_taken_as_granted_is_caught() -> None:
    """A renewal the broker refused for a partition taken as granted (the mutation
    ``codes.get(tp) >= NONE`` of ``fetch_policy.renewed``, which survived the simulation):
    with a delayed release the parked record's renewal comes back refused once its lock
    is gone, and invariant 20 now checks each record the member believes renewed against
    what the broker held for it when it read the renew, not only its lock's end."""
    found = None
    for seed in range(100):
        out = run(seed, "4.4", "renew-refused-ok", delayed=True)
        if out.violation is not None:
            found = out
            break
    assert found is not None and found.violation is not None
    assert found.violation.invariant == 20, str(found.violation)
    assert "no longer held it" in str(found.violation)
    assert run(found.seed, "4.4", delayed=True).violation is None


def test_gathering_applications_get_the_records_written_while_they_hold_one() -> None:
    """Some schedules' application gathers (process(concurrency=2) whose handlers wait
    for each other) while a producer writes after the faults; those schedules keep every
    invariant, the liveness bound included, and hand out the records written."""
    gathering = 0
    for seed in range(200):
        for version in ("4.1", "4.4"):
            world = World(seed, version, None, None)
            if not world.knobs.gather:
                continue
            gathering += 1
            before = _written(world)
            out = world.run()
            assert out.violation is None, out.replay()
            after = _written(world)
            assert after > before  # records were written while the last was held
            assert out.handed >= after  # as many hand-outs as records written
    assert gathering >= 20, gathering


def _written(world: World) -> int:
    """How many records the schedule's partitions hold (from their log start; not the
    offsets compaction emptied, nor those of a batch it removed whole)."""
    held = 0
    for tp in world.tps:
        log = world.brokers[world.leader_of[tp]].logs[(tp.topic_id, tp.partition)]
        held += sum(world.holds_record(tp, o) for o in range(log.start, log.end))
    return held


def test_logs_start_far_from_zero_in_half_the_schedules() -> None:
    """Half the schedules' partitions start their logs far from offset 0 (retention
    deleted older records), each partition elsewhere: offsets relative to a batch or a
    ledger segment then differ from absolute ones. Every record of those schedules is
    accepted or archived at its own offset, none below the log start."""
    far = 0
    for seed in range(60):
        world = World(seed, "4.4", None, None)
        starts = [
            world.brokers[world.leader_of[tp]].logs[(tp.topic_id, tp.partition)].start
            for tp in world.tps
        ]
        assert starts == list(world.log_starts)
        out = world.run()
        assert out.violation is None, out.replay()
        if not any(starts):
            continue
        far += 1
        assert all(starts) and len(set(starts)) == len(starts)
        assert out.handed >= 1
        for tp, start in zip(world.tps, starts, strict=True):
            b = world.brokers[world.leader_of[tp]]
            key = (tp.topic_id, tp.partition)
            sp = b.partitions[(GROUP, key)]
            assert sp.start >= start
            finished = {RecordState.ACKNOWLEDGED, RecordState.ARCHIVED}
            assert all(sp.state_of(o).state in finished for o in range(start, b.logs[key].end))
    assert 15 <= far <= 45, far


def test_a_quarter_of_the_schedules_have_two_partitions_on_each_leader() -> None:
    """Some schedules' topic has four partitions, two on each broker: the member's share
    sessions hold several partitions (and forget one on a leader move). They keep every
    invariant and every record is finished."""
    wide = 0
    for seed in range(80):
        world = World(seed, "4.4", None, None)
        if world.n_partitions == 2:
            continue
        wide += 1
        assert len(world.tps) == 4
        assert {world.leader_of[tp] for tp in world.tps} == {1, 2}
        before = _written(world)
        out = world.run()
        assert out.violation is None, out.replay()
        assert out.handed >= before
        assert not world._unfinished()
    assert 10 <= wide <= 35, wide


def test_a_third_of_the_schedules_have_compacted_logs() -> None:
    """Some schedules' logs were compacted: records removed from inside their batches,
    each batch keeping one. The member finds those holes when it decodes a batch and
    acknowledges them as gaps: every invariant holds (17: no record is acknowledged as
    a gap), every record is finished, and every hole ends archived, none accepted (the
    member never took one for a record). In half the compacted partitions a batch went
    whole: its offsets lie in no batch, and end behind the start offset all the same."""
    compacted = whole = 0
    for seed in range(90):
        world = World(seed, "4.4", None, None)
        if not any(world.holes.values()):
            continue
        compacted += 1
        whole += any(
            world._log(tp).batch_of(o) is None for tp, holes in world.holes.items() for o in holes
        )
        out = world.run()
        assert out.violation is None, out.replay()
        assert not world._unfinished()
        for tp, holes in world.holes.items():
            b = world.brokers[world.leader_of[tp]]
            sp = b._partition(GROUP, (tp.topic_id, tp.partition), world.now)
            assert sp is not None
            for o in holes:
                assert sp.state_of(o).state is RecordState.ARCHIVED, (seed, tp, o)
    assert 15 <= compacted <= 45, compacted
    assert compacted // 4 <= whole < compacted, (whole, compacted)


def test_a_quarter_of_the_applications_poll() -> None:
    """In a quarter of the schedules (not gathering, not with a delayed release) the
    application calls ``poll(max_records=N)``: batches of several records go through the
    buffer's ``pop_many`` and the consumer's ``Handout.handed_out`` (the ledger's
    ``deliver``). About half answer each record of the batch explicitly; the others
    (implicit mode) answer only what they reject or release, and the next ``poll()``
    accepts the rest in bulk. Every invariant holds, every record is finished, and the
    cursor served none (``async for`` was not used)."""
    polled = 0
    implicit = 0
    for seed in range(120):
        world = World(seed, "4.4", None, None)
        if not world.knobs.poll:
            continue
        polled += 1
        implicit += not world.knobs.explicit
        assert not world.knobs.gather
        first = world.member
        out = world.run()
        assert out.violation is None, out.replay()
        assert not world._unfinished()
        assert first.cursor.served == 0
        assert out.handed > 0
    assert 15 <= polled <= 50, polled
    assert 5 <= implicit <= polled - 5, (implicit, polled)


def test_some_partitions_fail_to_fetch() -> None:
    """In half the schedules some ShareFetch answers carry, during the faults, a
    partition whose fetch failed with a transient error (UNKNOWN_SERVER_ERROR: nothing
    acquired for it, its acknowledgements answered). The member notes it and goes on:
    every invariant holds (14: it never fails) and every record is finished."""
    failed = 0
    for seed in range(200):
        world = World(seed, "4.4", None, None)
        out = world.run()
        assert out.violation is None, out.replay()
        assert not world._unfinished()
        failed += sum(f.startswith("partition-error@") for f in out.faults)
    assert failed >= 20, failed


def test_stalled_answers_race_leader_moves() -> None:
    """In a quarter of the schedules some ShareFetch answers that acquired records stall,
    and one of their partitions moves to the other leader meanwhile. The member fetches
    it there and takes those records in before the stalled answer lands, which it then
    leaves out (rule 3 of the machine, counted in ``stale_records``): every invariant
    holds (21: no older delivery handed out after a newer one was taken in) and every
    record is finished."""
    races = stale = 0
    for seed in range(200):
        world = World(seed, "4.4", None, None)
        out = world.run()
        assert out.violation is None, out.replay()
        assert not world._unfinished()
        races += sum(f.startswith("stale-race@") for f in out.faults)
        stale += world.member.machine.stale_records > 0
    assert races >= 20, races
    assert stale >= 5, stale


def test_some_answers_arrive_damaged() -> None:
    """In half the schedules some ShareFetch answers' records arrive damaged, during the
    faults: the last batch of a partition cut short (a broker cuts an answer at its byte
    limit) or a batch failing its CRC. Both kinds happen; every invariant holds (17: the
    records the member could not read are not acknowledged as gaps; 3: they are released,
    not left unanswered) and every record is finished."""
    kinds: dict[str, int] = {}
    for seed in range(300):
        world = World(seed, "4.4", None, None)
        out = world.run()
        assert out.violation is None, out.replay()
        assert not world._unfinished()
        for f in out.faults:
            kind = f.split("@")[0]
            if kind.startswith("damaged-"):
                kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds.get("damaged-cut", 0) >= 10, kinds
    assert kinds.get("damaged-crc", 0) >= 10, kinds


def test_the_application_takes_records_through_the_consumers_cursor() -> None:
    """Both ack modes are simulated, through the consumer's ``Cursor`` (its sans-I/O
    steps), and records go through the consumer's ``Handout.deliver``: the cursor served
    what the checker saw handed out (process()-style gathering applications aside)."""
    modes = set()
    for seed in range(60):
        world = World(seed, "4.4", None, None)
        if world.knobs.gather or world.knobs.poll:
            continue
        first = world.member
        out = world.run()
        assert out.violation is None, out.replay()
        modes.add(first.cursor.explicit)
        served = first.cursor.served + (
            world.member.cursor.served if world.member is not first else 0
        )
        assert served == out.handed
    assert modes == {True, False}


def test_the_mutants_are_named() -> None:
    assert set(MUTANTS) == {
        "no-supersede",
        "no-record-lock-check",
        "answers-after-close",
        "dry-forever",
        "dry-restarts",
        "renew-refused-ok",
        "answer-no-wake",
        "answers-ungathered",
        "partitions-cut-short",
        "no-transport-backoff",
        "pipelines-closing",
    }
    with pytest.raises(ValueError, match="unknown mutant"):
        run(1, "4.4", "no-such-bug")


def test_the_simulator_uses_no_io_clock_or_event_loop() -> None:
    """The loop is the simulator's own: virtual time, no wall clock, no sockets, no anyio.
    (Not the whole-client simulation, ``client.py``, its fault classes ``client_*.py``
    and its in-memory connections, ``pipe.py``: it runs the real clients, on trio's mock
    clock, by design.)"""
    forbidden = {"anyio", "asyncio", "trio", "socket", "time", "threading", "selectors"}
    pkg = pathlib.Path(__file__).resolve().parents[2] / "sharecon" / "testing" / "sim"
    whole_client = ("client", "pipe.py")
    for path in sorted(p for p in pkg.glob("*.py") if not p.name.startswith(whole_client)):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"
