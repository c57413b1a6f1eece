"""The consumer's per-record deserialize step, before and after a change, side by side.

Times :meth:`Deserializers.apply` (the step every hand-out style runs per record with
plain-callable deserializers) as it is in a git revision (``--before``, default
``HEAD~1``) and in the working tree, and, for reference, the working tree's context and
async steps. Each variant runs in its own process, with the current directory outside the
checkout, on the same records; CPU time per record (``time.process_time``), best of
``--repeat`` runs, minus the cost of the loop itself without the step. The ratio column
is after / before (1.00: no change).

::

    python benchmarks/serde_step.py --records 200000 --before HEAD~1 --decoder text
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = "sharecon/_consumer/deserialize.py"

# Run in the child: load the step's module from a file, time it on fresh records.
CHILD = r"""
import asyncio, importlib.util, json, sys, time
from sharecon.record import Record
from sharecon.serde import async_deserializer, with_context

path, kind, n, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
decoder = sys.argv[5]
spec = importlib.util.spec_from_file_location("step_under_test", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
key, value = b"customer-7", b'{"id": 7, "total": 12.5}'
decode_key, decode_value = bytes.decode, (json.loads if decoder == "json" else bytes.decode)

def fresh():
    return [Record.build("orders", value, key=key, offset=i) for i in range(n)]

if kind == "plain":
    d = mod.Deserializers(decode_key, decode_value)
elif kind == "context":
    d = mod.Deserializers(decode_key, with_context(lambda b, ctx: decode_value(b)))
else:
    async def dv(b, ctx):
        return decode_value(b)
    d = mod.Deserializers(decode_key, async_deserializer(dv))

def run_sync(records, step):
    t = time.process_time()
    for r in records:
        step(r)
    return time.process_time() - t

async def run_async(records, step):
    t = time.process_time()
    for r in records:
        await step(r)
    return time.process_time() - t

def noop(r):
    pass

best = base = float("inf")
for _ in range(repeat):
    records = fresh()
    base = min(base, run_sync(records, noop))
    records = fresh()
    if kind == "async":
        took = asyncio.run(run_async(records, d.apply_async))
    else:
        took = run_sync(records, d.apply if kind == "plain" else d.apply_context)
    best = min(best, took)
print(json.dumps({"ns_per_record": (best - base) / n * 1e9}))
"""


def measure(path: Path, kind: str, args: argparse.Namespace, cwd: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), kind, str(args.records), str(args.repeat)]
        + [args.decoder],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["ns_per_record"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", default="HEAD~1", help="git revision of the old step")
    parser.add_argument("--rounds", type=int, default=3, help="before/after alternations")
    parser.add_argument(
        "--decoder",
        choices=("text", "json"),
        default="text",
        help="the value deserializer: bytes.decode (the step's own cost shows) or json.loads",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before_deserialize.py"
        old.write_text(
            subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{args.before}:{STEP}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        new = ROOT / STEP
        before: list[float] = []
        after: list[float] = []
        for _ in range(args.rounds):  # alternate, so drifting load hits both alike
            before.append(measure(old, "plain", args, tmp))
            after.append(measure(new, "plain", args, tmp))
        context = measure(new, "context", args, tmp)
        asyncs = measure(new, "async", args, tmp)
    b, a = min(before), min(after)
    print(
        f"deserialize step ({args.decoder} values), CPU ns per record "
        f"(best of {args.rounds} x {args.repeat})"
    )
    print(f"{'variant':<32}{'ns/record':>10}{'ratio':>8}")
    print(f"{'plain callables, before':<32}{b:>10.0f}{1.0:>8.2f}")
    print(f"{'plain callables, after':<32}{a:>10.0f}{a / b:>8.2f}")
    print(f"{'with_context value, after':<32}{context:>10.0f}{context / b:>8.2f}")
    print(f"{'async_deserializer value, after':<32}{asyncs:>10.0f}{asyncs / b:>8.2f}")


if __name__ == "__main__":
    main()
