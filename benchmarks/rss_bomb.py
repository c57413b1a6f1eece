"""Peak memory of a small answer that inflates: the new lazy intake vs the old eager one.

The issue's case (``zeros``): 20 records of 60 MiB of zeros each, every one in its own
zstd batch, about 40 KB on the wire, all acquired. No broker: the Records bytes are built
with :func:`~sharecon.protocol.records.encode_batch` and handed to the consumer's intake
the way the fetcher does, in a fresh process per measurement so that peaks do not mix:

* **old**: fa2e30e's eager intake (``old_intake`` from ``fuzz_intake.py``: decode every
  batch, filter, ledger), holding every record as the old buffer did; then the
  application takes them one by one;
* **new**: :func:`~sharecon._share.intake.take_partition`, then
  :meth:`~sharecon._share.intake.PartitionIntake.decode_next` one batch at a time, each
  record handed to the application (which drops it) before the next batch is decoded.

A second case (``tiny``) shows what the lazy path does not bound: one zstd batch whose
records section (just under the 64 MiB decompression cap) holds millions of empty
records, of which a single offset is acquired. A batch is decoded whole before it is
filtered, so both paths build every record of it.

Peak RSS is the child's ``VmHWM`` (``ru_maxrss`` agrees on Linux); "over baseline" takes
away the child's RSS after imports and reading the answer, before intake.

Run: ``.venv/bin/python benchmarks/rss_bomb.py [--cases zeros,tiny] [--json PATH]``
(default ``benchmarks/results/rss_bomb.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import crc32c
from _common import environment, print_table, write_json
from fuzz_intake import Answer, old_intake

from sharecon._share.intake import take_partition
from sharecon.protocol.compression import DEFAULT_MAX_UNCOMPRESSED, Codec, compress
from sharecon.protocol.records import Record as WireRecord
from sharecon.protocol.records import encode_batch
from sharecon.record import Record
from sharecon.types import TopicIdPartition

MIB = 1 << 20
TOPIC = "bomb"
TP = TopicIdPartition(uuid.UUID(int=0xB0B), 0, TOPIC)


# -- the answers -------------------------------------------------------------------------------


def zeros_answer(records: int, size: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    """``records`` records of ``size`` zero bytes, one zstd batch each; all acquired."""
    value = bytes(size)
    parts = [
        encode_batch(
            [WireRecord(i, 1_750_000_000_000, None, value)], codec=Codec.ZSTD, base_offset=i
        )
        for i in range(records)
    ]
    return b"".join(parts), [(0, records - 1, 1)]


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def tiny_answer(limit: int = DEFAULT_MAX_UNCOMPRESSED) -> tuple[bytes, list[tuple[int, int, int]]]:
    """One zstd batch of as many empty records as fit ``limit`` bytes; offset 0 acquired."""
    chunks: list[bytes] = []
    size = 0
    count = 0
    while True:
        # attributes, timestamp delta 0, offset delta, null key, null value, no headers
        body = b"\x00\x00" + _varint(count) + b"\x01\x01\x00"
        rec = _varint(len(body)) + body
        if size + len(rec) > limit:
            break
        chunks.append(rec)
        size += len(rec)
        count += 1
    payload = compress(Codec.ZSTD, b"".join(chunks))
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            int(Codec.ZSTD),
            count - 1,
            1_750_000_000_000,
            1_750_000_000_000,
            -1,
            -1,
            -1,
            count,
        )
        + payload
    )
    head = struct.pack(">qiib", 0, 49 + len(payload), -1, 2)
    batch = head + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    return batch, [(0, 0, 1)]


CASES = {
    "zeros": "20 x 60 MiB of zeros, one zstd batch each, all acquired",
    "tiny": "one zstd batch of ~64 MiB of empty records, 1 offset acquired",
}


# -- the worker (a fresh process per measurement) ----------------------------------------------


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (0 where there is no /proc)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def worker(mode: str, answer_path: Path) -> dict[str, Any]:
    """Run one intake over the answer stored at ``answer_path``; report memory and time."""
    stored = json.loads(answer_path.with_suffix(".json").read_text())
    data = answer_path.read_bytes()
    triples = [(int(f), int(last), int(dc)) for f, last, dc in stored["triples"]]
    factory = partial(Record, TOPIC, TP.partition, TP, None, None)
    consumed = [0, 0]

    def consume(rec: Record) -> None:
        """The application: look at the record, keep nothing."""
        consumed[0] += 1
        consumed[1] += len(rec.value or b"")

    gc.collect()
    baseline = _status("VmRSS")
    cpu, wall = time.process_time(), time.perf_counter()
    if mode == "old":
        held = old_intake(factory, Answer(triples, data, None)).delivered
        held_peak = _status("VmRSS")
        while held:
            consume(held.pop(0))
    else:
        intake = take_partition(TP, triples, data)
        held_peak = 0
        while (d := intake.decode_next(factory)) is not None:
            for rec in d.records:
                consume(rec)
            del d
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "mode": mode,
        "baseline_rss": baseline,
        "peak_rss": _status("VmHWM"),
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_while_held": held_peak,
        "records": consumed[0],
        "value_bytes": consumed[1],
        "cpu_seconds": cpu,
        "wall_seconds": wall,
    }


def run_worker(mode: str, answer_path: Path) -> dict[str, Any]:
    """Measure ``mode`` on the answer at ``answer_path`` in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", mode, str(answer_path)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            return result
    raise RuntimeError(f"{mode} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


# -- the driver --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="zeros,tiny", help="comma-separated: zeros, tiny")
    parser.add_argument("--records", type=int, default=20, help="zeros: how many records")
    parser.add_argument("--size-mib", type=int, default=60, help="zeros: MiB per record")
    parser.add_argument("--json", type=Path, default=None, help="where to write the results")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = worker(args.worker[0], Path(args.worker[1]))
        print("RESULT " + json.dumps(result), flush=True)
        return

    cases = [c for c in args.cases.split(",") if c]
    results: dict[str, Any] = {}
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="rss_bomb") as tmp:
        for case in cases:
            if case == "zeros":
                data, triples = zeros_answer(args.records, args.size_mib * MIB)
                what = (
                    f"{args.records} x {args.size_mib} MiB of zeros, one zstd batch each, "
                    "all acquired"
                )
            elif case == "tiny":
                data, triples = tiny_answer()
                what = CASES["tiny"]
            else:
                raise SystemExit(f"unknown case {case!r} (known: {', '.join(CASES)})")
            path = Path(tmp) / f"{case}.bin"
            path.write_bytes(data)
            path.with_suffix(".json").write_text(json.dumps({"triples": triples}))
            per: dict[str, Any] = {"description": what, "wire_bytes": len(data)}
            for mode in ("old", "new"):
                r = run_worker(mode, path)
                per[mode] = r
                rows.append(
                    [
                        case,
                        mode,
                        f"{len(data):,}",
                        f"{r['records']:,}",
                        f"{r['value_bytes'] / MIB:,.0f}",
                        f"{r['peak_rss'] / MIB:,.0f}",
                        f"{(r['peak_rss'] - r['baseline_rss']) / MIB:,.0f}",
                        f"{r['cpu_seconds']:.2f}",
                    ]
                )
                print(f"  done: {case} {mode}", file=sys.stderr)
            per["peak_ratio_old_over_new"] = per["old"]["peak_rss"] / per["new"]["peak_rss"]
            results[case] = per
    print()
    print_table(
        [
            "case",
            "intake",
            "wire bytes",
            "records",
            "value MiB",
            "peak RSS MiB",
            "over baseline MiB",
            "CPU s",
        ],
        rows,
        title="Peak RSS of one partition answer through intake (fresh process each)",
    )
    for case in cases:
        print(f"  {case}: {results[case]['description']}")
    payload = {
        "benchmark": "rss_bomb",
        "environment": {
            **environment(["zstandard", "crc32c"]),
            "timer": "time.process_time, one run",
            "memory": "VmHWM of a fresh child process",
        },
        "cases": results,
    }
    if args.json is None:
        out = write_json("rss_bomb", payload)
    else:
        out = args.json
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
