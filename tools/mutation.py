"""Mutation testing of the decision modules, in bounded shards (docs/testing.md, "Mutation
testing").

The mutants come from cosmic-ray's operators (``pip install -e '.[mutation]'``, part of
``dev``); this script only chooses and runs them. For each module it enumerates every
mutation cosmic-ray's core operators can make, draws a seeded sample, keeps this shard's
share of it, and runs each mutant in a scratch copy of the checkout (``sharecon/``,
``tests/``, ``pyproject.toml``: the working tree is never written, so it is safe beside a
running suite) in two stages, each under a timeout:

1. the seeded simulation alone: ``python -m sharecon.testing.sim`` over a bounded range of
   seeds on each Kafka line given (``--sim-seeds``, ``--versions``), then with
   ``--delayed-release`` over ``--delayed-seeds`` seeds on each of those lines that renew
   locks (4.2 and later), then, with ``--client-seeds N``, the whole-client simulation
   (``python -m sharecon.testing.sim.client``) over N seeds on each line;
2. if the simulation did not kill it, the broker-free unit tests (``--tests``, default
   ``tests/share``), the test file named after the module first.

A mutant is killed by a stage when the stage fails (an invariant broken, a crash, a failing
test) or runs past its timeout. A mutant the package cannot even import is "incompetent",
counted apart. One JSON line per mutant goes to ``--out``; the summary prints the kill rates
and every survivor with its diff, for triage (equivalent, or a missing invariant or test).

    python tools/mutation.py --sample 40 --seed 1 --shard 0/4 --out mut-0.jsonl
    python tools/mutation.py --report mut-*.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The decision modules sampled by default (sans-I/O, in ``sharecon/_share/``).
DEFAULT_MODULES = (
    "sharecon/_share/fetch_policy.py",
    "sharecon/_share/session.py",
    "sharecon/_share/ledger.py",
    "sharecon/_share/machine.py",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Mutant:
    """One mutation: cosmic-ray's operator applied at one occurrence in one module."""

    module: str
    operator: str
    occurrence: int
    line: int

    @property
    def name(self) -> str:
        return f"{self.module}:{self.line} {self.operator}#{self.occurrence}"


def _operators() -> Iterator[tuple[str, object]]:
    from cosmic_ray.plugins import get_operator, operator_names

    for name in sorted(operator_names()):
        cls = get_operator(name)
        # Operators that need arguments yield nothing without a configuration.
        if name.startswith("core/") and not cls.arguments():
            yield name, cls()


def enumerate_mutants(module: str) -> list[Mutant]:
    """Every mutation of ``module`` (a path relative to the checkout), in cosmic-ray's order."""
    from cosmic_ray.ast import ast_nodes, get_ast

    tree = get_ast((ROOT / module).read_text(encoding="utf-8"))
    nodes = list(ast_nodes(tree))
    out = []
    for name, op in _operators():
        positions = (
            (node, pos)
            for node in nodes
            for pos in op.mutation_positions(node)  # type: ignore[attr-defined]
        )
        for occurrence, (node, (start, _end)) in enumerate(positions):
            if not _in_annotation(node) and not _star_marker(node):
                out.append(Mutant(module, name, occurrence, start[0]))
    return out


def _star_marker(node: object) -> bool:
    """Whether ``node`` is a ``*`` or ``**`` that is no operator (``def f(*, a)``,
    ``f(*args)``): cosmic-ray would turn it into a syntax error, no mutant at all."""
    parent = getattr(node, "parent", None)
    arithmetic = ("term", "power", "arith_expr", "expr", "factor", "atom_expr", "augassign")
    return (
        getattr(node, "value", None) in ("*", "**")
        and getattr(parent, "type", "") not in arithmetic
    )


def _in_annotation(node: object) -> bool:
    """Whether ``node`` is part of a type annotation: under ``from __future__ import
    annotations`` (every module here) an annotation never runs, so its mutants (``int | None``
    made ``int // None``) are equivalent by construction and left out."""
    while getattr(node, "parent", None) is not None:
        parent = node.parent  # type: ignore[attr-defined]
        if parent.type == "annassign" and parent.children[1] is node:
            return True
        before = getattr(node.get_previous_sibling(), "value", None)  # type: ignore[attr-defined]
        if (parent.type, before) in (("tfpdef", ":"), ("funcdef", "->")):
            return True
        node = parent
    return False


def mutate(source: str, mutant: Mutant) -> str | None:
    """The module's source with ``mutant`` applied (None if cosmic-ray applies nothing)."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    code: str | None = mutate_code(source, get_operator(mutant.operator)(), mutant.occurrence)
    return code


def find(module: str, operator: str, before: str, after: str) -> Mutant:
    """The mutant of ``module`` by ``operator`` that turns the line ``before`` into ``after``
    (both stripped): a pinned mutant survives edits elsewhere in the module."""
    source = (ROOT / module).read_text(encoding="utf-8")
    lines = source.splitlines()
    for m in enumerate_mutants(module):
        if m.operator != operator or lines[m.line - 1].strip() != before:
            continue
        code = mutate(source, m)
        if code is not None and code.splitlines()[m.line - 1].strip() == after:
            return m
    raise LookupError(
        f"no {operator} mutant of {module} turns {before!r} into {after!r}: the line changed;"
        " pin another mutant (python tools/mutation.py --list)"
    )


def diff(source: str, mutated: str, module: str) -> str:
    lines = difflib.unified_diff(
        source.splitlines(keepends=True), mutated.splitlines(keepends=True), module, module, n=0
    )
    return "".join(line for line in lines if not line.startswith(("---", "+++")))


def sample(modules: Sequence[str], per_module: int, seed: int) -> list[Mutant]:
    """A seeded sample of ``per_module`` mutants of each module (the same for every shard)."""
    rng = random.Random(seed)
    out: list[Mutant] = []
    for module in modules:
        every = enumerate_mutants(module)
        out.extend(rng.sample(every, min(per_module, len(every))))
    return out


@dataclasses.dataclass(slots=True)
class Result:
    """What became of one mutant."""

    mutant: Mutant
    status: str  # "incompetent", "sim" (killed by the simulation), "unit", "survived"
    diff: str
    detail: str = ""
    seconds: float = 0.0

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["name"] = self.mutant.name
        return json.dumps(d)


class Scratch:
    """A scratch copy of the checkout's package and tests, mutated one module at a time."""

    def __init__(self) -> None:
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="sharecon-mutation-"))
        ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
        shutil.copytree(ROOT / "sharecon", self.dir / "sharecon", ignore=ignore)
        shutil.copytree(ROOT / "tests", self.dir / "tests", ignore=ignore)
        shutil.copy2(ROOT / "pyproject.toml", self.dir / "pyproject.toml")

    def write(self, module: str, code: str) -> None:
        path = self.dir / module
        path.write_text(code, encoding="utf-8")
        # A stale .pyc of the same size and mtime second would hide the mutation.
        for pyc in (path.parent / "__pycache__").glob(path.stem + ".*.pyc"):
            pyc.unlink()

    def run(self, argv: list[str], timeout: float) -> tuple[bool, str]:
        """Run ``argv`` in the scratch copy: (failed or timed out, last line of output)."""
        env = dict(os.environ, PYTHONPATH=str(self.dir), PYTHONHASHSEED="0")
        try:
            proc = subprocess.run(
                argv,
                cwd=self.dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return True, f"timeout after {timeout:g} s"
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR", "seed "))]
        return proc.returncode != 0, (failed or lines or [""])[0][:300]

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _module_name(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def run_mutant(
    scratch: Scratch,
    mutant: Mutant,
    *,
    sim_seeds: int,
    versions: Sequence[str],
    tests: Sequence[str],
    timeout: float,
    unit: bool = True,
    client_seeds: int = 0,
    delayed_seeds: int = 0,
) -> Result:
    """Apply ``mutant`` in ``scratch``, run the stages, restore the module."""
    started = time.monotonic()
    source = (ROOT / mutant.module).read_text(encoding="utf-8")
    code = mutate(source, mutant)
    if code is None:
        raise ValueError(f"cosmic-ray applied nothing for {mutant.name}")
    result = Result(mutant, "survived", diff(source, code, mutant.module))
    py = sys.executable
    scratch.write(mutant.module, code)
    try:
        broken, why = scratch.run([py, "-c", f"import {_module_name(mutant.module)}"], timeout)
        if broken:
            result.status, result.detail = "incompetent", why
            return result
        for version in versions:
            argv = [py, "-m", "sharecon.testing.sim", "--start", "0", "--count", str(sim_seeds)]
            killed, why = scratch.run([*argv, "--version", version], timeout)
            if killed:
                result.status, result.detail = "sim", f"{version}: {why}"
                return result
        for version in versions if delayed_seeds else ():
            if version in ("4.0", "4.1"):
                continue  # no lock renewal: no delayed release to simulate
            argv = [py, "-m", "sharecon.testing.sim", "--start", "0", "--count", str(delayed_seeds)]
            killed, why = scratch.run([*argv, "--version", version, "--delayed-release"], timeout)
            if killed:
                result.status, result.detail = "sim", f"delayed {version}: {why}"
                return result
        for version in versions if client_seeds else ():
            argv = [py, "-m", "sharecon.testing.sim.client", "--count", str(client_seeds)]
            killed, why = scratch.run([*argv, "--version", version], timeout)
            if killed:
                result.status, result.detail = "sim", f"whole-client {version}: {why}"
                return result
        if unit:
            own = f"tests/share/test_{pathlib.Path(mutant.module).stem}.py"
            paths = ([own] if (ROOT / own).exists() else []) + list(tests)
            argv = [py, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
            killed, why = scratch.run([*argv, "-m", "not broker", *paths], timeout)
            if killed:
                result.status, result.detail = "unit", why
        return result
    finally:
        scratch.write(mutant.module, source)
        result.seconds = round(time.monotonic() - started, 1)


def summarize(results: Iterable[Result]) -> str:
    rs = list(results)
    competent = [r for r in rs if r.status != "incompetent"]
    sim = sum(r.status == "sim" for r in competent)
    unit = sum(r.status == "unit" for r in competent)
    n = len(competent) or 1
    out = [
        f"{len(rs)} mutants, {len(rs) - len(competent)} incompetent (do not import), "
        f"{len(competent)} run",
        f"killed by the simulation alone: {sim}/{len(competent)} ({100 * sim / n:.0f} %)"
        + _by_stage(competent),
        f"killed by simulation + unit tests: {sim + unit}/{len(competent)} "
        f"({100 * (sim + unit) / n:.0f} %)",
    ]
    for r in competent:
        if r.status != "sim":
            tag = "SURVIVED" if r.status == "survived" else "sim survived, unit killed"
            out.append(f"\n{tag}: {r.mutant.name}\n{r.diff.rstrip()}")
    return "\n".join(out)


def _by_stage(results: list[Result]) -> str:
    """Which simulation stage killed how many: the core one (over plain schedules), its
    delayed-release schedules, the whole-client one."""
    stages = {"core": 0, "delayed": 0, "whole-client": 0}
    for r in results:
        if r.status == "sim":
            stage = r.detail.split(" ", 1)[0]
            stages[stage if stage in stages else "core"] += 1
    return " (" + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")"


def _load(paths: Iterable[str]) -> list[Result]:
    out = []
    for p in paths:
        for line in pathlib.Path(p).read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            d.pop("name")
            d["mutant"] = Mutant(**d["mutant"])
            out.append(Result(**d))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/mutation.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--modules", nargs="+", default=list(DEFAULT_MODULES))
    ap.add_argument("--sample", type=int, default=10, help="mutants drawn per module")
    ap.add_argument("--seed", type=int, default=1, help="seed of the sample")
    ap.add_argument("--shard", default="0/1", help="index/count: run every count-th mutant")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per stage")
    ap.add_argument("--sim-seeds", type=int, default=300, help="schedules per Kafka line")
    ap.add_argument(
        "--delayed-seeds",
        type=int,
        default=100,
        help="schedules with --delayed-release per Kafka line 4.2+ (0: not run)",
    )
    ap.add_argument(
        "--client-seeds",
        type=int,
        default=0,
        help="whole-client simulation schedules per Kafka line (0: not run)",
    )
    ap.add_argument("--versions", nargs="+", default=["4.1", "4.4"])
    ap.add_argument("--tests", nargs="+", default=["tests/share"])
    ap.add_argument("--no-unit", action="store_true", help="the simulation stage only")
    ap.add_argument("--out", help="append one JSON line per mutant here")
    ap.add_argument("--list", action="store_true", help="print this shard's mutants and stop")
    ap.add_argument("--report", nargs="+", metavar="JSONL", help="summarize earlier runs")
    args = ap.parse_args(argv)
    if args.report:
        print(summarize(_load(args.report)))
        return 0
    index, count = (int(x) for x in args.shard.split("/"))
    mine = sample(args.modules, args.sample, args.seed)[index::count]
    if args.list:
        print("\n".join(m.name for m in mine))
        return 0
    scratch = Scratch()
    results = []
    try:
        for i, m in enumerate(mine, 1):
            r = run_mutant(
                scratch,
                m,
                sim_seeds=args.sim_seeds,
                versions=args.versions,
                tests=args.tests,
                timeout=args.timeout,
                unit=not args.no_unit,
                client_seeds=args.client_seeds,
                delayed_seeds=args.delayed_seeds,
            )
            results.append(r)
            print(f"[{i}/{len(mine)}] {r.status:11} {r.seconds:6.1f} s  {m.name}", flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(r.to_json() + "\n")
    finally:
        scratch.close()
    print(summarize(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
