"""Pipelined request round trips on one connection: sharecon vs aiokafka, same broker, same run.

Each client opens its cluster client, then ``concurrency`` tasks send ``requests`` requests
in total through the client's public per-node call (``Cluster.request`` /
``AIOKafkaClient.send``), all on the one connection to the broker. Two calls are measured:

* ``Metadata`` for one topic (3 partitions): a small request, a mid-sized response;
* ``ApiVersions``: an empty request, a ~90-entry response.

Reported per client and call: requests/s (wall clock, the broker included) and the client's
own CPU time per request (``time.process_time``: the broker runs in another process), best of
``--rounds`` rounds. Run::

    python benchmarks/roundtrip.py                       # starts a local broker
    SHARECON_BOOTSTRAP=host:9092 python benchmarks/roundtrip.py

Needs the ``bench`` extra (aiokafka). Versions differ by client (each negotiates its own);
they are listed in the table with the size of each answer. sharecon asks Metadata v12+ as
its cluster view needs topic ids (v10+) and asks topics by id (v12); aiokafka stops at v5.

``--profile N`` also runs one more Metadata round per client (asyncio only) under cProfile
and prints its top N entries by own time (the figures above are measured without it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import environment, fmt_rate, print_table, write_json

from sharecon._net.cluster import Cluster
from sharecon._net.connect import ConnectionConfig
from sharecon.admin import Admin
from sharecon.protocol import ApiVersionsRequest, MetadataRequest
from sharecon.protocol.messages.metadata import MetadataRequestTopic

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator


@contextlib.contextmanager
def broker_bootstrap() -> Iterator[str]:
    """``$SHARECON_BOOTSTRAP``, or a local broker started for this run."""
    external = os.environ.get("SHARECON_BOOTSTRAP")
    if external:
        yield external
        return
    from sharecon.testing import KafkaBroker

    with KafkaBroker() as broker:
        yield broker.bootstrap


async def drive(
    call: Callable[[], Awaitable[object]],
    total: int,
    concurrency: int,
    profile: cProfile.Profile | None = None,
) -> tuple[float, float]:
    """Run ``total`` calls from ``concurrency`` tasks; return (wall seconds, CPU seconds)."""
    per_task, extra = divmod(total, concurrency)

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    if profile is not None:
        profile.enable()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(worker, per_task + (1 if i < extra else 0))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if profile is not None:
        profile.disable()
    return wall, cpu


def top_entries(profile: cProfile.Profile, n: int) -> list[dict[str, Any]]:
    """The ``n`` functions with the most own time: name, calls, own and total seconds."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:n]
    out = []
    for (path, line, func), (_, calls, own, total, _) in rows:
        where = f"{Path(path).name}:{line}" if line else "~"
        out.append({"function": f"{where}({func})", "calls": calls, "own_s": own, "total_s": total})
    return out


async def profiled(
    call: Callable[[], Awaitable[object]], total: int, concurrency: int, n: int
) -> dict[str, Any]:
    """One more round under cProfile: its rate and CPU (inflated) and the top ``n`` entries."""
    profile = cProfile.Profile()
    wall, cpu = await drive(call, total, concurrency, profile)
    return {
        "requests_per_s": total / wall,
        "cpu_us_per_request": cpu / total * 1e6,
        "top": top_entries(profile, n),
    }


async def bench_sharecon(
    bootstrap: str, topic: str, total: int, concurrency: int, rounds: int, profile: int = 0
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        cluster = Cluster(bootstrap, ConnectionConfig(), tg, metadata_max_age=0)
        await cluster.connect()
        node = next(iter(cluster.metadata.brokers))
        conn = await cluster.connection(node)
        assert conn.versions is not None
        metadata = MetadataRequest(topics=(MetadataRequestTopic(name=topic),))
        api_versions = ApiVersionsRequest(
            client_software_name="sharecon-bench", client_software_version="0"
        )
        calls: dict[str, tuple[Any, int]] = {
            "Metadata": (metadata, conn.versions.version(MetadataRequest)),
            "ApiVersions": (api_versions, conn.versions.version(ApiVersionsRequest)),
        }
        for name, (body, version) in calls.items():

            async def call(body: Any = body) -> object:
                return await cluster.request(node, body)

            response: Any = await call()
            await drive(call, min(total, 2000), concurrency)  # warm up
            runs = [await drive(call, total, concurrency) for _ in range(rounds)]
            results[name] = _summary(runs, total, version)
            results[name]["response_bytes"] = len(response.encode(version))
            if profile and name == "Metadata":
                results[name]["profile"] = await profiled(call, total, concurrency, profile)
            assert await cluster.connection(node) is conn, "one connection throughout"
        await cluster.aclose()
        tg.cancel_scope.cancel()
    return results


async def bench_aiokafka(
    bootstrap: str, topic: str, total: int, concurrency: int, rounds: int, profile: int = 0
) -> dict[str, Any]:
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.admin import ApiVersionRequest
    from aiokafka.protocol.metadata import MetadataRequest as AkMetadataRequest

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    await client.bootstrap()
    results: dict[str, Any] = {}
    try:
        node = next(iter(client.cluster.brokers())).nodeId
        calls = {"Metadata": AkMetadataRequest([topic]), "ApiVersions": ApiVersionRequest()}
        for name, body in calls.items():

            async def call(body: Any = body) -> object:
                return await client.send(node, body)

            response: Any = await call()
            await drive(call, min(total, 2000), concurrency)
            runs = [await drive(call, total, concurrency) for _ in range(rounds)]
            results[name] = _summary(runs, total, getattr(response, "API_VERSION", None))
            results[name]["response_bytes"] = len(response.encode())
            if profile and name == "Metadata":
                results[name]["profile"] = await profiled(call, total, concurrency, profile)
    finally:
        await client.close()
    return results


def _summary(runs: list[tuple[float, float]], total: int, version: int | None) -> dict[str, Any]:
    wall = min(w for w, _ in runs)
    cpu = min(c for _, c in runs)
    return {
        "version": version,
        "requests": total,
        "wall_s": wall,
        "requests_per_s": total / wall,
        "cpu_us_per_request": cpu / total * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="requests per round")
    parser.add_argument("--concurrency", type=int, default=200, help="requests kept in flight")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small run (a smoke test)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="one more Metadata round per client under cProfile; print its top N entries",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.rounds = 2000, 1

    with broker_bootstrap() as bootstrap:
        topic = f"bench-roundtrip-{uuid.uuid4().hex[:8]}"

        async def setup() -> None:
            async with Admin(bootstrap) as admin:
                await admin.create_topics([topic], num_partitions=3, exist_ok=True)

        anyio.run(setup)
        print(
            f"{args.requests} requests per round, {args.concurrency} in flight, "
            f"best of {args.rounds}, one connection, broker {bootstrap}\n"
        )
        ours = anyio.run(
            bench_sharecon, bootstrap, topic, args.requests, args.concurrency, args.rounds,
            args.profile,
        )  # fmt: skip
        theirs = asyncio.run(
            bench_aiokafka(
                bootstrap, topic, args.requests, args.concurrency, args.rounds, args.profile
            )
        )
        ours_trio = anyio.run(
            bench_sharecon, bootstrap, topic, args.requests, args.concurrency, args.rounds,
            backend="trio",
        )  # fmt: skip

    rows = []
    for call in ("Metadata", "ApiVersions"):
        for client, res in (
            ("sharecon (asyncio)", ours),
            ("sharecon (trio)", ours_trio),
            ("aiokafka", theirs),
        ):
            r = res[call]
            ratio = r["requests_per_s"] / theirs[call]["requests_per_s"]
            rows.append(
                [
                    call,
                    client,
                    f"v{r['version']}",
                    f"{r['response_bytes']:,}",
                    fmt_rate(r["requests_per_s"]),
                    f"{r['cpu_us_per_request']:.1f}",
                    f"{ratio:.2f}x",
                ]
            )
    print_table(
        [
            "call",
            "client",
            "version",
            "answer bytes",
            "requests/s",
            "client CPU us/request",
            "vs aiokafka",
        ],
        rows,
        title="Pipelined round trips on one connection",
    )
    for client, res in (("sharecon (asyncio)", ours), ("aiokafka", theirs)):
        prof = res["Metadata"].get("profile")
        if prof:
            print(
                f"\n{client}, Metadata, profiled round ({fmt_rate(prof['requests_per_s'])}/s, "
                f"{prof['cpu_us_per_request']:.1f} us CPU/request under cProfile):"
            )
            for e in prof["top"]:
                print(f"  {e['own_s']:7.3f} s own {e['calls']:>8} calls  {e['function']}")
    path = write_json(
        "roundtrip",
        {
            "settings": vars(args),
            "sharecon_asyncio": ours,
            "sharecon_trio": ours_trio,
            "aiokafka": theirs,
            "environment": environment(["sharecon", "aiokafka", "anyio", "trio"]),
        },
    )
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
