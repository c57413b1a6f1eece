"""The consumer's own CPU per record, without a broker: fetch answers in, ``async for`` out.

One leader's fetch loop runs as the consumer runs it (:class:`FetchDriver` over the
consumer's core: plan the request, encode it, decode the answer, take it into the share
machine, buffer its records), and ``async for record in consumer``'s step (the compiled
:class:`~sharecon._consumer.cursor.Cursor`, implicit mode) hands every record out,
accepting the previous one (``--explicit``: explicit mode, the loop calling
``record.accept()`` on each); the next request carries those acknowledgements. Only the
sockets and the broker are missing, so what is measured is the client's own work per
record and per fetch, steadier than a run against a broker on a shared machine.

Each shape is ``PARTITIONSxRECORDS[/TOUCHED]``: a topic of that many partitions, all in
the share session, and every answer holding one batch of ``RECORDS`` records for each of
``TOUCHED`` partitions (default: all of them; the next answer takes the next ones). The
issue's runs against a broker had about 1,571 records per answer at 12 partitions and 279
at 300: ``12x131`` and ``300x10/28`` are answers of those sizes.

Each variant runs in its own process, outside the checkout: the working tree's build
(``pure`` or ``compiled``), and with ``--before REV`` the same build of a git revision, so
a change is measured before and after side by side. CPU time per record
(``time.process_time``), the lowest of ``--rounds`` runs, and the difference of a run of
``--records`` and one of a fifth of it, so set-up and warm-up cancel out::

    python benchmarks/handout.py --shapes 12x131,300x10/28 --builds pure,compiled --before HEAD~3

``--stages`` times the loop's steps apart instead (plan the request, encode it, decode
the answer, its session part, its records taken in, the hand-out) and prints each as CPU
µs per partition an answer carries records for: at ``300x10/28`` that is where the cost
per partition goes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, build_env, compiled_tree

# Run in the child: builds one shape's answers, then times whole rounds of fetch + hand-out.
CHILD = r"""
import gc, json, os, sys, time, uuid
from typing import Any, cast

import anyio

import sharecon
from sharecon._consumer.config import ConsumerConfig
from sharecon._consumer.core import ConsumerCore
from sharecon._consumer.cursor import Cursor
from sharecon._consumer.fetch_driver import Apply, FetchDriver
from sharecon._consumer.liveness import Liveness
from sharecon.protocol import ShareFetchResponse
from sharecon.protocol.messages import share_fetch as sf
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.types import AckType, TopicIdPartition

spec = json.loads(sys.argv[1])
want_build = spec["build"]
got = "compiled" if sharecon.COMPILED else "pure"
if got != want_build:
    sys.exit(f"asked for the {want_build} build, got {got} from {sharecon.__file__}")
partitions, per, touched = spec["partitions"], spec["per"], spec["touched"]
explicit = spec["explicit"]
size, version = spec["size"], 1
TID = uuid.uuid4()
NAMES = {TID: "t"}
NODE = 1
tps = tuple(TopicIdPartition(TID, p, "t") for p in range(partitions))
payload = os.urandom(size)


class Owner:
    # What the records call back into (the ShareConsumer), and the cursor's slow paths.
    def __init__(self, core):
        self.core = core

    def acknowledge(self, record, ack):
        # As ShareConsumer.acknowledge: the answer, then the cursor told (explicit mode).
        self.core.handout.acknowledge(record, ack)
        cursor = self.cursor
        if record is cursor.current and ack is not AckType.RENEW:
            cursor.answered = True

    def release_later(self, record, delay):
        raise NotImplementedError

    def _not_running(self):
        return RuntimeError("not running")

    def _rejoin_after_idle(self, core):
        pass

    async def _next_prepared(self, core):
        raise NotImplementedError

    async def _no_record(self, core):
        raise StopAsyncIteration


def answers(n_records):
    # The answers, encoded as the broker sends them, offsets advancing per partition. Each
    # answer also names the partitions whose records the previous one delivered (their
    # acknowledgements ride on this request), with AcknowledgeErrorCode 0, as the broker
    # does: a partition left out would fail its acknowledgements (MISSING_FROM_RESPONSE).
    out, nxt, total, k = [], [0] * partitions, 0, 0
    acked = set()
    while total < n_records:
        parts = []
        delivered = {(k + i) % partitions for i in range(touched)}
        for p in sorted(acked - delivered):
            parts.append(sf.PartitionData(partition_index=p))
        acked = delivered
        for i in range(touched):
            p = (k + i) % partitions
            first = nxt[p]
            data = encode_batch(
                [WireRecord(first + j, 0, None, payload, ()) for j in range(per)],
                base_offset=first,
            )
            nxt[p] = first + per
            parts.append(
                sf.PartitionData(
                    partition_index=p,
                    records=data,
                    acquired_records=(sf.AcquiredRecords(first_offset=first, last_offset=first + per - 1, delivery_count=1),),
                )
            )
        k += touched
        total += touched * per
        parts.sort(key=lambda d: d.partition_index)
        resp = ShareFetchResponse(
            acquisition_lock_timeout_ms=30000,
            responses=(sf.ShareFetchableTopicResponse(topic_id=TID, partitions=tuple(parts)),),
        )
        out.append(resp.encode(version))
    return out, total


async def run(wire):
    core = ConsumerCore(
        cast(Any, None), ConsumerConfig(group_id="g", topics=("t",)), cast(Any, None)
    )
    owner = Owner(core)
    core.handout.owner = owner
    core.clock = time.monotonic
    driver = FetchDriver(core.machine, core.buffer, NODE, lambda: tps, lambda: False)
    cursor = Cursor(owner, Liveness(None, 30.0), explicit=explicit)
    cursor.core = core
    owner.cursor = cursor
    seen = 0
    gc_before = sum(s["collections"] for s in gc.get_stats())
    t0 = time.process_time()
    for data in wire:
        turn = driver.turn()
        assert turn.plan is not None, "nothing to send"
        driver.request(turn, "member").encode(version)
        f = driver.sent(turn, time.monotonic())
        resp = ShareFetchResponse.decode(data, version)
        for step in driver.fetch_answer(
            f, resp, NAMES, time.monotonic(), pipeline=False, closing=lambda: False
        ):
            assert type(step) is Apply
            for e in step.effects:
                core.apply(e)
        if explicit:
            async for record in cursor:
                len(record.value)
                record.accept()
                seen += 1
        else:
            async for record in cursor:
                len(record.value)
                seen += 1
    took = time.process_time() - t0
    gcs = sum(s["collections"] for s in gc.get_stats()) - gc_before
    return took, seen, gcs


async def stages(wire):
    # The same loop, its steps timed apart (CPU time): where an answer's cost goes.
    core = ConsumerCore(
        cast(Any, None), ConsumerConfig(group_id="g", topics=("t",)), cast(Any, None)
    )
    owner = Owner(core)
    core.handout.owner = owner
    core.clock = time.monotonic
    machine = core.machine
    driver = FetchDriver(machine, core.buffer, NODE, lambda: tps, lambda: False)
    cursor = Cursor(owner, Liveness(None, 30.0), explicit=explicit)
    cursor.core = core
    owner.cursor = cursor
    pc = time.process_time
    out = dict.fromkeys(STAGES, 0.0)
    for data in wire:
        t0 = pc()
        turn = driver.turn()
        request = driver.request(turn, "member")
        t1 = pc()
        request.encode(version)
        f = driver.sent(turn, time.monotonic())
        t2 = pc()
        resp = ShareFetchResponse.decode(data, version)
        t3 = pc()
        machine.fetch_answered(f, resp, NAMES, time.monotonic(), pipeline=False)
        for e in machine.drain():
            core.apply(e)
        t4 = pc()
        machine.fetch_records(f, resp, NAMES, closing=False)
        for e in machine.drain():
            core.apply(e)
        t5 = pc()
        async for record in cursor:
            len(record.value)
            if explicit:
                record.accept()
        t6 = pc()
        for k, a, b in zip(STAGES, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
            out[k] += b - a
    return out


# plan: the next request planned (acknowledgements taken, session, message built);
# encode: it encoded; decode: the answer decoded; answered: its session and
# acknowledgement part; take: its records into the ledger and the buffer; hand-out:
# every record through async for (batches decoded on the way).
STAGES = ("plan", "encode", "decode", "answered", "take", "hand-out")


if spec.get("stages"):
    wire, n = answers(spec["records"])
    best = None
    for _ in range(spec["rounds"]):
        got = anyio.run(stages, wire)
        best = got if best is None else {k: min(best[k], got[k]) for k in got}
    # Per partition an answer carries records for.
    print("RESULT " + json.dumps({k: v * 1e6 / (len(wire) * touched) for k, v in best.items()}))
    sys.exit(0)

big, n_big = answers(spec["records"])
small, n_small = answers(spec["records"] // 5)
best = float("inf")
gcs = 0
for _ in range(spec["rounds"]):
    t_small, s_small, _g = anyio.run(run, small)
    t_big, s_big, gcs = anyio.run(run, big)
    assert s_big == n_big and s_small == n_small, (s_big, n_big, s_small, n_small)
    best = min(best, (t_big - t_small) / (n_big - n_small))
print("RESULT " + json.dumps({
    "us_per_record": best * 1e6,
    "records_per_fetch": n_big / len(big),
    "us_per_fetch_equiv": best * 1e6 * n_big / len(big),
    "gc_collections": gcs,
}))
"""


def revision_tree(rev: str) -> Path:
    """A copy of the sources at git revision ``rev`` (``build/rev-<sha>/``)."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = ROOT / "build" / f"rev-{sha[:12]}"
    if not (tree / ".complete").exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
            subprocess.run(["git", "-C", str(ROOT), "archive", "-o", tar.name, sha], check=True)
            with tarfile.open(tar.name) as t:
                t.extractall(tree, filter="data")
        (tree / ".complete").touch()
    return tree


def _digest(root: Path) -> str:
    # As _common.compiled_tree names its folder: the sources' hash, under this Python.
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(
        [*root.glob("sharecon/**/*.py"), *root.glob("sharecon/**/*.c"), root / "hatch_build.py"]
    ):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


#: The ``--without-c`` variant: the working tree's build with ``SHARECON_SPEEDUPS=0``.
WITHOUT_C = "without C"


def variant_env(build: str, rev: str | None) -> dict[str, str]:
    """The environment of a child running ``build`` of the working tree or of ``rev``."""
    if rev == WITHOUT_C:
        return {**build_env(build), "SHARECON_SPEEDUPS": "0"}
    if rev is None:
        return build_env(build)
    tree = revision_tree(rev)
    env = {**os.environ, "SHARECON_BENCH_BUILD": build}
    if build == "compiled":
        # A compiled build of the same sources, if this checkout made one already.
        same = ROOT / "build" / f"compiled-{_digest(tree)}"
        if (same / ".complete").exists():
            env["PYTHONPATH"] = str(same)
            return env
        # Else the revision's own compiled build (its _common knows how to make it).
        code = "import sys; sys.path.insert(0, 'benchmarks'); import _common; print(_common.compiled_tree())"
        path = (
            subprocess.run(
                [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        env["PYTHONPATH"] = path
    else:
        env["PYTHONPATH"] = str(tree)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--shapes", default="12x131,300x10/28", help="PARTITIONSxRECORDS[/TOUCHED], ..."
    )
    parser.add_argument("--builds", default="pure,compiled")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", default=None, help="a git revision to compare with")
    parser.add_argument(
        "--stages",
        action="store_true",
        help="print CPU µs per partition an answer carries records for, per step of the loop",
    )
    parser.add_argument(
        "--explicit",
        action="store_true",
        help="explicit mode: the loop calls record.accept() on every record",
    )
    parser.add_argument(
        "--without-c",
        action="store_true",
        help="also run the compiled build without its C module (SHARECON_SPEEDUPS=0), "
        "as the 'before' column",
    )
    args = parser.parse_args()
    if args.without_c and args.before:
        parser.error("--without-c and --before both fill the 'before' column")
    variants = [("after" if args.before or args.without_c else "now", None)]
    if args.before:
        variants.insert(0, ("before", args.before))
    if args.without_c:
        variants.insert(0, ("before", WITHOUT_C))
    rows = []
    for shape in args.shapes.split(","):
        dims, _, touched = shape.partition("/")
        partitions, per = (int(x) for x in dims.split("x"))
        for build in args.builds.split(","):
            if build == "compiled":
                compiled_tree()
            results = {}
            for label, rev in variants:
                spec = {
                    "build": build, "partitions": partitions, "per": per,
                    "touched": int(touched or partitions), "size": args.size, "records": args.records,
                    "rounds": args.rounds, "explicit": args.explicit, "stages": args.stages,
                }  # fmt: skip
                proc = subprocess.run(
                    [sys.executable, "-c", CHILD, json.dumps(spec)],
                    env=variant_env(build, rev),
                    cwd=tempfile.gettempdir(),  # not the checkout: no sharecon/ beside
                    capture_output=True,
                    text=True,
                    check=False,
                )
                line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
                if not line:
                    sys.exit(f"{shape} {build} {label} failed:\n{proc.stdout}\n{proc.stderr}")
                results[label] = json.loads(line[0][7:])
            if args.stages:
                for label, _ in variants:
                    got = results[label]
                    cells = [f"{got[k]:.1f}" for k in got]
                    row = (shape, build, label, *cells, f"{sum(got.values()):.1f}")
                    rows.append(row)
                    print(" | ".join(row), flush=True)
                continue
            first = next(iter(results.values()))
            cells = [f"{results[label]['us_per_record']:.3f}" for label, _ in variants]
            ratio = (
                f"{results['after']['us_per_record'] / results['before']['us_per_record']:.2f}x"
                if args.before or args.without_c
                else ""
            )
            rows.append((shape, build, f"{first['records_per_fetch']:.0f}", *cells, ratio))
            print(" | ".join(rows[-1]), flush=True)
    heads = ["shape", "build", "records/fetch", *(f"µs/record {v}" for v, _ in variants)]
    if args.before or args.without_c:
        heads.append("after ÷ before")
    if args.stages:
        stages = ("plan", "encode", "decode", "answered", "take", "hand-out")
        heads = ["shape", "build", "revision", *stages, "total"]
    print()
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for row in rows:
        print("| " + " | ".join(row[: len(heads)]) + " |")


if __name__ == "__main__":
    main()
