"""``sharecon topics create|list|describe|delete``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon.admin import NewTopic
from sharecon.cli._clients import make_admin, require_topics
from sharecon.cli._common import CliError, ExitCode, parse_key_values, print_table

if TYPE_CHECKING:
    from sharecon.admin import TopicDescription
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add ``topics`` and its subcommands to the command tree."""
    p = sub.add_parser(
        "topics",
        help="create, list, describe or delete topics",
        description="Create, list, describe or delete topics.",
    )
    tsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    c = tsub.add_parser(
        "create",
        parents=parents,
        help="create topics",
        description="Create topics and wait until every partition has a leader. A topic "
        "that already exists is exit code 1, unless --if-not-exists.",
        epilog="example:\n  sharecon topics create invoices dlq.invoices --partitions 3 "
        "--config retention.ms=86400000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("topics", nargs="+", metavar="TOPIC")
    c.add_argument("-p", "--partitions", type=int, default=1, help="partitions (default 1)")
    c.add_argument(
        "-r",
        "--replication-factor",
        type=int,
        default=-1,
        help="replicas per partition (default: the broker's default.replication.factor)",
    )
    c.add_argument(
        "-c", "--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)"
    )
    c.add_argument(
        "--if-not-exists", action="store_true", help="a topic that exists already is not an error"
    )
    c.set_defaults(func=_create)

    ls = tsub.add_parser(
        "list",
        parents=parents,
        help="list topics",
        description="List the cluster's topics with their partition counts and ids.",
        epilog="example:\n  sharecon topics list --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ls.add_argument("--internal", action="store_true", help="include internal topics")
    ls.add_argument("--json", action="store_true", help="print JSON lines")
    ls.set_defaults(func=_list)

    d = tsub.add_parser(
        "describe",
        parents=parents,
        help="partitions, leaders and replicas of topics",
        description="Describe topics: id, and each partition's leader, replicas and ISR. "
        "A topic that does not exist is exit code 3.",
        epilog="example:\n  sharecon topics describe invoices",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("topics", nargs="+", metavar="TOPIC")
    d.add_argument("--json", action="store_true", help="print JSON lines")
    d.set_defaults(func=_describe)

    rm = tsub.add_parser(
        "delete",
        parents=parents,
        help="delete topics",
        description="Delete topics. A topic that does not exist is exit code 3, unless "
        "--if-exists.",
        epilog="example:\n  sharecon topics delete scratch --if-exists",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rm.add_argument("topics", nargs="+", metavar="TOPIC")
    rm.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")
    rm.set_defaults(func=_delete)


async def _create(args: argparse.Namespace, options: ClientOptions) -> int:
    configs = parse_key_values(args.config, "--config")
    specs = [
        NewTopic(
            name=t,
            num_partitions=args.partitions,
            replication_factor=args.replication_factor,
            configs=configs,
        )
        for t in args.topics
    ]
    async with make_admin(options) as admin:
        try:
            created = await admin.create_topics(specs, exist_ok=args.if_not_exists)
        except errors.TopicAlreadyExistsError as exc:
            name = next((t for t in args.topics if repr(t) in str(exc)), None)
            what = f"topic {name!r}" if name else "a topic"
            raise CliError(
                f"{what} already exists (--if-not-exists makes that not an error)",
                ExitCode.KAFKA,
            ) from exc
    if not args.quiet:
        for t in created:
            state = "created" if t.created else "exists"
            sys.stderr.write(f"{t.name}: {state} ({t.num_partitions} partition(s))\n")
    return ExitCode.OK


def _topic_json(t: TopicDescription) -> dict[str, object]:
    return {
        "topic": t.name,
        "topic_id": str(t.topic_id),
        "internal": t.internal,
        "partitions": len(t.partitions),
    }


async def _list(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        topics = await admin.list_topics(internal=args.internal)
    rows = [topics[name] for name in sorted(topics)]
    if args.json:
        for t in rows:
            sys.stdout.write(json.dumps(_topic_json(t)) + "\n")
    else:
        print_table(
            ("TOPIC", "PARTITIONS", "TOPIC-ID"),
            ((t.name, len(t.partitions), t.topic_id) for t in rows),
        )
    return ExitCode.OK


async def _describe(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        described = await require_topics(admin, args.topics)
    for name in dict.fromkeys(args.topics):
        t = described[name]
        if args.json:
            obj = _topic_json(t)
            obj["partitions"] = [
                {
                    "partition": p.partition,
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                }
                for p in t.partitions
            ]
            sys.stdout.write(json.dumps(obj) + "\n")
            continue
        sys.stdout.write(f"{t.name}  id={t.topic_id}  partitions={len(t.partitions)}\n")
        print_table(
            ("  PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"),
            (
                (
                    f"  {p.partition}",
                    p.leader_id,
                    p.leader_epoch,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                )
                for p in t.partitions
            ),
        )
    return ExitCode.OK


async def _delete(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        if not args.if_exists:
            # Check first, so a typo in one name deletes nothing.
            await require_topics(admin, args.topics)
        await admin.delete_topics(args.topics, missing_ok=args.if_exists)
    if not args.quiet:
        sys.stderr.write(f"deleted {', '.join(args.topics)}\n")
    return ExitCode.OK
