"""Consuming with plain-callable deserializers, before and after a change, side by side.

The whole hand-out path (``async for``, ``poll()``, ``process()``) with
``key_deserializer=bytes.decode, value_deserializer=bytes.decode``, as sharecon is in a git
revision (``--before``) and in the working tree. A FakeKafka runs in a process of its own;
each consumer runs in its own process, with the current directory outside the checkout
and ``PYTHONPATH`` pointing at the sharecon tree under test; every run reads the same
records through a fresh share group. Figures: CPU microseconds per record of the consumer
process (``time.process_time``, from the first record to the last), best of ``--rounds``
alternating runs; ratio after / before.

::

    python benchmarks/serde_consume.py --records 50000 --before HEAD~1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE = r"""
import sys, time
from sharecon.testing.fake import FakeKafka
with FakeKafka() as kafka:
    kafka.create_topic("bench")
    print(kafka.bootstrap, flush=True)
    sys.stdin.read()  # until the parent closes it
"""

PRODUCE = r"""
import sys, anyio
from sharecon import Producer
async def main():
    async with Producer(sys.argv[1]) as p:
        for i in range(int(sys.argv[2])):
            await p.send("bench", b"v" * 100, key=b"key-%d" % i)
anyio.run(main)
"""

CONSUME = r"""
import json, sys, time, uuid, anyio
import sharecon
from sharecon import Admin, ShareConsumer
bootstrap, n, style = sys.argv[1], int(sys.argv[2]), sys.argv[3]
async def main():
    group = "bench-" + uuid.uuid4().hex[:8]
    async with Admin(bootstrap) as admin:
        await admin.alter_group_config(group, {"share.auto.offset.reset": "earliest"})
    async with ShareConsumer(bootstrap, group_id=group, topics=["bench"],
                             key_deserializer=bytes.decode,
                             value_deserializer=bytes.decode) as c:
        seen = 0
        start = None
        if style == "async_for":
            async for r in c:
                if start is None:
                    start = time.process_time()
                seen += 1
                if seen == n:
                    break
        elif style == "poll":
            while seen < n:
                batch = await c.poll(5)
                if start is None and batch:
                    start = time.process_time()
                seen += len(batch)
        else:
            done = anyio.Event()
            async def handler(r):
                nonlocal seen, start
                if start is None:
                    start = time.process_time()
                seen += 1
                if seen == n:
                    done.set()
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.process, handler)
                await done.wait()
                tg.cancel_scope.cancel()
        took = time.process_time() - start
    print(json.dumps({"us_per_record": took / n * 1e6, "sharecon": sharecon.__file__}))
anyio.run(main)
"""


def run(code: str, args: list[str], tree: str, cwd: str) -> str:
    env = dict(os.environ, PYTHONPATH=tree)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="HEAD~1", help="git revision to compare with")
    parser.add_argument("--styles", default="async_for,poll,process")
    args = parser.parse_args()
    styles = args.styles.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        before_tree = Path(tmp) / "before"
        before_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.before, "sharecon"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before_tree)], input=archive, check=True)
        trees = {"before": str(before_tree), "after": str(ROOT)}
        fake = subprocess.Popen(
            [sys.executable, "-c", FAKE],
            cwd=tmp,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert fake.stdout is not None
            bootstrap = fake.stdout.readline().strip()
            run(PRODUCE, [bootstrap, str(args.records)], str(ROOT), tmp)
            best: dict[tuple[str, str], float] = {}
            for _ in range(args.rounds):
                for style in styles:
                    for name, tree in trees.items():
                        out = json.loads(
                            run(CONSUME, [bootstrap, str(args.records), style], tree, tmp)
                        )
                        assert out["sharecon"].startswith(tree), out
                        key = (style, name)
                        best[key] = min(best.get(key, float("inf")), out["us_per_record"])
        finally:
            assert fake.stdin is not None
            fake.stdin.close()
            fake.wait(30)
    print(
        f"consume with plain deserializers, {args.records} records of 100 B, CPU us per "
        f"record of the consumer process (best of {args.rounds})"
    )
    print(f"{'hand-out':<12}{'before':>9}{'after':>9}{'ratio':>8}")
    for style in styles:
        b, a = best[(style, "before")], best[(style, "after")]
        print(f"{style:<12}{b:>9.2f}{a:>9.2f}{a / b:>8.2f}")


if __name__ == "__main__":
    main()
