"""Record decoding speed: sharecon vs kafka-python vs aiokafka, side by side.

Decodes 1 MiB record sets (100-byte and 1 KiB values, 16-byte keys, batches of at
most 16 KiB like the Java producer's default ``batch.size``), uncompressed and with
each codec. Every decoder does the same work: split the batches, verify each CRC,
decompress, build every record and read its offset, timestamp, key, value and headers
(fields an application reads; aiokafka's records keep offset and timestamp as C integers
and make the Python ints only when they are read, so reading only key and value, as this
benchmark did before, left that part of its work out of its figures). The decoders of a
case are timed in alternation, and the compiled build's child process times aiokafka
beside itself, so that a busy spell on a shared machine does not favour one of them.

aiokafka is measured as it ships: its default decoder is a C (Cython) extension
(``aiokafka.record._crecords``); its pure-Python fallback is measured too, for reference.
kafka-python's decoder is pure Python. sharecon is measured in both its builds: pure
Python, and "sharecon-compiled" (its per-record modules compiled with mypyc, built on first
use; see ``_common.compiled_tree``), which runs in a child process of its own.

Run: ``.venv/bin/python benchmarks/decode.py`` (needs the ``bench`` extra:
``pip install -e '.[dev,bench]'``). Results go to ``benchmarks/results/decode.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import struct
import sys
from collections.abc import Callable
from typing import Any

from _common import (
    best_time,
    check_build,
    environment,
    fmt_rate,
    print_table,
    run_child,
    write_json,
)

from sharecon.protocol.records import Codec, Record, encode_batch, read_batches

Decoder = Callable[[bytes], int]
OTHERS = ("kafka-python", "aiokafka", "aiokafka-py")

TOTAL_BYTES = 1 << 20
BATCH_BYTES = 16 * 1024
KEY_SIZE = 16
VALUE_SIZES = {"100B": 100, "1KiB": 1024}


def make_record_set(value_size: int, codec: Codec, *, seed: int = 1) -> tuple[bytes, int, int]:
    """About 1 MiB of records in ~16 KiB batches; returns (data, record count, raw bytes)."""
    rnd = random.Random(seed)
    # Text-like values from a small vocabulary: compressible, but not trivially.
    words = [
        bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 9))) for _ in range(500)
    ]
    ts = 1_750_000_000_000
    batches: list[bytes] = []
    offset = 0
    raw_total = 0
    while raw_total < TOTAL_BYTES:
        records: list[Record] = []
        size = 0
        while size < BATCH_BYTES and raw_total + size < TOTAL_BYTES:
            value = b" ".join(rnd.choices(words, k=value_size // 4))[:value_size].ljust(
                value_size, b"."
            )
            key = b"user-%011d" % rnd.randrange(10**11)
            records.append(Record(offset + len(records), ts + rnd.randint(0, 50), key, value))
            size += KEY_SIZE + value_size + 8
        batch = encode_batch(records, codec=codec, base_offset=offset)
        batches.append(batch)
        offset += len(records)
        raw_total += size
    return b"".join(batches), offset, raw_total


def decode_sharecon(data: bytes) -> int:
    n = 0
    for batch in read_batches(data).batches:
        for r in batch.records():
            r.offset  # noqa: B018
            r.timestamp  # noqa: B018
            r.key  # noqa: B018
            r.value  # noqa: B018
            r.headers  # noqa: B018
            n += 1
    return n


def _memory_records_decoder(memory_records: Any) -> Decoder:
    def decode(data: bytes) -> int:
        n = 0
        records = memory_records(data)
        while (batch := records.next_batch()) is not None:
            if not batch.validate_crc():
                raise RuntimeError("CRC failed")
            for r in batch:
                r.offset  # noqa: B018
                r.timestamp  # noqa: B018
                r.key  # noqa: B018
                r.value  # noqa: B018
                r.headers  # noqa: B018
                n += 1
        return n

    return decode


def _aiokafka_pure_python() -> Decoder:
    from aiokafka.record.default_records import _DefaultRecordBatchPy

    length_at = struct.Struct(">i")

    def decode(data: bytes) -> int:
        n = 0
        view = memoryview(data)
        pos = 0
        while len(data) - pos >= 12:
            (length,) = length_at.unpack_from(data, pos + 8)
            end = pos + 12 + length
            if end > len(data):
                break
            batch = _DefaultRecordBatchPy(view[pos:end])
            if not batch.validate_crc():
                raise RuntimeError("CRC failed")
            for r in batch:
                r.offset  # noqa: B018
                r.timestamp  # noqa: B018
                r.key  # noqa: B018
                r.value  # noqa: B018
                r.headers  # noqa: B018
                n += 1
            pos = end
        return n

    return decode


def decoders() -> tuple[dict[str, Decoder], dict[str, str]]:
    """The decoders available in this environment, and notes on what each one is."""
    found: dict[str, Decoder] = {"sharecon": decode_sharecon}
    notes = {"sharecon": "pure Python"}
    try:
        from kafka.record.memory_records import MemoryRecords as KafkaPythonRecords
    except ImportError:
        print("kafka-python not installed (pip install -e '.[bench]')", file=sys.stderr)
    else:
        found["kafka-python"] = _memory_records_decoder(KafkaPythonRecords)
        notes["kafka-python"] = "pure Python"
    try:
        from aiokafka.record.memory_records import MemoryRecords as AiokafkaRecords
    except ImportError:
        print("aiokafka not installed (pip install -e '.[bench]')", file=sys.stderr)
    else:
        is_c = "_crecords" in AiokafkaRecords.__module__
        found["aiokafka"] = _memory_records_decoder(AiokafkaRecords)
        notes["aiokafka"] = "C extension (default)" if is_c else "pure Python (no C extension)"
        if is_c:
            found["aiokafka-py"] = _aiokafka_pure_python()
            notes["aiokafka-py"] = "pure-Python fallback"
    return found, notes


def best_times(
    fns: dict[str, Callable[[], object]], *, repeats: int, min_time: float
) -> dict[str, float]:
    """Best CPU seconds per call of each of ``fns``, timed in alternation.

    Each round runs every function (for ``min_time`` CPU seconds, averaged) one after
    the other, and the best round of each is kept: on a shared machine a busy spell then
    hits every decoder alike instead of whichever was being timed at the time.
    """
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():
        fn()  # warm up: imports, caches, lazily built tables
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], best_time(fn, repeats=1, min_time=min_time))
    return best


def _cases() -> list[tuple[str, int, Codec]]:
    return [(name, size, codec) for name, size in VALUE_SIZES.items() for codec in Codec]


def sharecon_only(repeats: int, min_time: float) -> None:
    """Child process: time sharecon's decoder (the build it was started with) on every case."""
    check_build()
    found, _notes = decoders()
    paired = {name: found[name] for name in ("sharecon", "aiokafka") if name in found}
    seconds = {}
    for size_name, value_size, codec in _cases():
        data, count, _raw = make_record_set(value_size, codec)
        if decode_sharecon(data) != count:
            raise RuntimeError(f"decoded the wrong number of records ({size_name} {codec.name})")
        seconds[f"{size_name}/{codec.name}"] = best_times(
            {name: functools.partial(fn, data) for name, fn in paired.items()},
            repeats=repeats,
            min_time=min_time,
        )
    print("RESULT " + json.dumps(seconds), flush=True)


def compiled_seconds(repeats: int, min_time: float) -> dict[str, dict[str, float]]:
    """Run :func:`sharecon_only` under the compiled build; per case, its seconds and
    (when installed) aiokafka's, timed in the same process and window."""
    result: dict[str, dict[str, float]] = run_child(
        [__file__, "--sharecon-only", f"--repeats={repeats}", f"--min-time={min_time}"],
        "compiled",
        "the compiled build's run",
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per case (best is kept)")
    parser.add_argument("--min-time", type=float, default=0.2, help="CPU seconds per run")
    parser.add_argument("--sharecon-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sharecon_only:
        sharecon_only(args.repeats, args.min_time)
        return

    check_build()
    print("  timing the compiled build (child process)", file=sys.stderr)
    compiled = compiled_seconds(args.repeats, args.min_time)
    found, notes = decoders()
    notes["sharecon-compiled"] = "per-record modules compiled with mypyc"
    results: list[dict[str, Any]] = []
    rows: list[list[object]] = []
    for size_name, value_size in VALUE_SIZES.items():
        for codec in Codec:
            data, count, raw = make_record_set(value_size, codec)
            compiled_s = compiled[f"{size_name}/{codec.name}"]
            case: dict[str, Any] = {
                "value_size": size_name,
                "codec": codec.name.lower(),
                "records": count,
                "wire_bytes": len(data),
                "raw_bytes": raw,
                "decoders": {},
            }
            for name, decode in found.items():
                got = decode(data)
                if got != count:
                    raise RuntimeError(f"{name} decoded {got} records, expected {count}")
            timed = best_times(
                {name: functools.partial(decode, data) for name, decode in found.items()},
                repeats=args.repeats,
                min_time=args.min_time,
            )
            pure_s = timed.pop("sharecon")
            ordered = {"sharecon": pure_s, "sharecon-compiled": compiled_s["sharecon"], **timed}
            for name, seconds in ordered.items():
                case["decoders"][name] = {
                    "seconds": seconds,
                    "records_per_s": count / seconds,
                    "mb_per_s": raw / seconds / 1e6,
                }
            if "aiokafka" in compiled_s:
                # The compiled build's child timed aiokafka in alternation with itself: its
                # ratio to aiokafka comes from that one process and window.
                case["compiled_vs_aiokafka"] = compiled_s["aiokafka"] / compiled_s["sharecon"]
            results.append(case)
            rates = {n: d["records_per_s"] for n, d in case["decoders"].items()}
            row: list[object] = [size_name, codec.name.lower()]
            for name in case["decoders"]:
                row += [fmt_rate(rates[name]), f"{case['decoders'][name]['mb_per_s']:.1f}"]
            for other in OTHERS:
                if other in rates:
                    row.append(f"{rates['sharecon'] / rates[other]:.2f}x")
                    compiled_ratio = rates["sharecon-compiled"] / rates[other]
                    if other == "aiokafka" and "compiled_vs_aiokafka" in case:
                        compiled_ratio = case["compiled_vs_aiokafka"]
                    row.append(f"{compiled_ratio:.2f}x")
            rows.append(row)
            print(f"  done: {size_name} {codec.name.lower()}", file=sys.stderr)

    headers: list[str] = ["value", "codec"]
    for name in results[0]["decoders"]:
        headers += [f"{name} rec/s", "MB/s"]
    for other in OTHERS:
        if other in found:
            headers += [f"pure/{other}", f"compiled/{other}"]
    print()
    print_table(
        headers,
        rows,
        title="Record decoding, 1 MiB record sets (MB/s of uncompressed record data; "
        "CPU time, best of runs)",
    )
    print(
        "  decoders timed in alternation; compiled/aiokafka from the compiled build's own"
        " process, which times aiokafka beside it"
    )
    for name, note in notes.items():
        print(f"  {name}: {note}")
    path = write_json(
        "decode",
        {
            "benchmark": "decode",
            "environment": environment(
                ["aiokafka", "kafka-python", "lz4", "zstandard", "python-snappy", "crc32c"]
            ),
            "decoders": notes,
            "cases": results,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
