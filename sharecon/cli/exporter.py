"""``sharecon exporter``: serve share groups' lag, members and assignments to Prometheus."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from sharecon.cli._clients import make_admin
from sharecon.cli._common import non_negative_float
from sharecon.exporter import Exporter

if TYPE_CHECKING:
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]

_DESCRIPTION = """\
Serve the share groups named with --group (repeatable) as Prometheus text on
http://HOST:PORT/metrics, read from the broker at each scrape (ShareGroupDescribe and
DescribeShareGroupOffsets, and a Fetch of the record at each pending start offset): lag
per partition and per group (Kafka 4.2+), the oldest pending record's age, start offsets,
state, members and their assignments. /healthz answers "ok" without asking the broker.
Scrapes within --min-interval seconds of a read share it. Runs until Ctrl-C or SIGTERM.
"""

_EPILOG = """\
examples:
  sharecon exporter --group billing --group audit
  sharecon exporter -g billing --host 0.0.0.0 --port 9308   # in a container
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: list[argparse.ArgumentParser]
) -> None:
    """Add ``exporter`` to the command tree."""
    p = sub.add_parser(
        "exporter",
        parents=parents,
        help="serve share groups' lag and members as Prometheus metrics",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-g",
        "--group",
        action="append",
        required=True,
        dest="groups",
        metavar="GROUP",
        help="a share group to report (repeat for more)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for a scraper in another "
        "container or pod)",
    )
    p.add_argument("--port", type=int, default=9308, help="port to listen on (default 9308)")
    p.add_argument(
        "--min-interval",
        type=non_negative_float,
        default=1.0,
        metavar="SECONDS",
        help="reuse one read of the groups for this long (default 1)",
    )
    p.set_defaults(func=run)


async def run(args: argparse.Namespace, options: ClientOptions) -> int:
    """Serve until cancelled (Ctrl-C, SIGTERM)."""

    def listening(host: str, port: int) -> None:
        if not args.quiet:
            shown = f"[{host}]" if ":" in host else host
            sys.stderr.write(f"sharecon exporter: serving http://{shown}:{port}/metrics\n")
            sys.stderr.flush()

    async with make_admin(options) as admin:
        exporter = Exporter(
            admin, args.groups, timeout=options.timeout, min_interval=args.min_interval
        )
        await exporter.serve(args.host, args.port, on_listening=listening)
    return 0
