"""``sharecon groups list|describe|offsets|reset``: inspect and reposition share groups."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon.cli._clients import make_admin, require_topics
from sharecon.cli._common import CliError, ExitCode, print_table
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from sharecon.admin import Admin, ShareGroupDescription
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]

_DESCRIPTION = """\
Share groups: list them, describe one (state, members, assignments), show its start
offsets and lag per partition, or move its start offsets (reset).
"""

_RESET_DESCRIPTION = """\
Move a share group's start offset on the partitions of TOPIC. The group must have no
active members (stop its consumers first), otherwise exit code 1.

  --to-offset N        start every chosen partition at offset N (AlterShareGroupOffsets)
  --to-earliest        forget the group's state on TOPIC and set the group's
  --to-latest          share.auto.offset.reset to earliest/latest, so the next consumer
                       starts from the first / next new record (DeleteShareGroupOffsets)
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add ``groups`` and its subcommands to the command tree."""
    p = sub.add_parser(
        "groups",
        help="list, describe, show offsets of, or reset share groups",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    ls = gsub.add_parser(
        "list",
        parents=parents,
        help="list the cluster's share groups",
        description="List every share group in the cluster with its state.",
        epilog="example:\n  sharecon groups list --state Stable --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ls.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    ls.add_argument("--json", action="store_true", help="print JSON lines")
    ls.set_defaults(func=_list)

    d = gsub.add_parser(
        "describe",
        parents=parents,
        help="state, epochs, members and assignments of a group",
        description="Describe a share group: state, epochs, assignor, and each member with "
        "its subscribed topics and assigned partitions. A group that does not exist is "
        "exit code 3.",
        epilog="example:\n  sharecon groups describe billing",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("group", help="the share group")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=_describe)

    o = gsub.add_parser(
        "offsets",
        parents=parents,
        help="start offset and lag of a group per partition",
        description="Show a share group's start offset (the first offset not yet done) and "
        "lag per partition (lag -1: not reported by the broker). Without --topic, every "
        "partition the group has state for.",
        epilog="example:\n  sharecon groups offsets billing --topic invoices",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    o.add_argument("group", help="the share group")
    o.add_argument("-t", "--topic", action="append", help="only this topic (repeatable)")
    o.add_argument("--json", action="store_true", help="print JSON lines")
    o.set_defaults(func=_offsets)

    r = gsub.add_parser(
        "reset",
        parents=parents,
        help="move a group's start offsets on a topic",
        description=_RESET_DESCRIPTION,
        epilog="examples:\n  sharecon groups reset billing --topic invoices --to-offset 0\n"
        "  sharecon groups reset billing --topic invoices --to-latest",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("group", help="the share group")
    r.add_argument("-t", "--topic", required=True, help="the topic whose offsets move")
    r.add_argument(
        "--partition",
        type=int,
        action="append",
        help="with --to-offset: only this partition (repeatable; default all)",
    )
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-offset", type=int, metavar="N", help="start at offset N")
    where.add_argument("--to-earliest", action="store_true", help="start at the first record")
    where.add_argument("--to-latest", action="store_true", help="start after the last record")
    r.set_defaults(func=_reset)


async def _list(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        listing = await admin.list_share_groups(states=args.state or ())
    if args.json:
        for g in listing:
            sys.stdout.write(json.dumps({"group": g.group_id, "state": g.state}) + "\n")
    else:
        print_table(("GROUP", "STATE"), ((g.group_id, g.state) for g in listing))
    return ExitCode.OK


async def _describe_group(admin: Admin, group: str) -> ShareGroupDescription:
    try:
        description = await admin.describe_share_group(group)
    except errors.GroupIdNotFoundError as exc:
        raise CliError(f"share group {group!r} does not exist", ExitCode.NOT_FOUND) from exc
    # Some brokers describe an unknown id as a "Dead" group rather than an error.
    if description.state.lower() == "dead":
        raise CliError(f"share group {group!r} does not exist", ExitCode.NOT_FOUND)
    return description


async def _describe(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        d = await _describe_group(admin, args.group)
    if args.json:
        obj = {
            "group": d.group_id,
            "state": d.state,
            "group_epoch": d.group_epoch,
            "assignment_epoch": d.assignment_epoch,
            "assignor": d.assignor,
            "members": [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "subscribed_topics": list(m.subscribed_topics),
                    "assignment": [
                        {"topic": tp.topic, "partition": tp.partition} for tp in m.assignment
                    ],
                }
                for m in d.members
            ],
        }
        sys.stdout.write(json.dumps(obj) + "\n")
        return ExitCode.OK
    out = sys.stdout
    out.write(f"group:    {d.group_id}\n")
    out.write(f"state:    {d.state}\n")
    out.write(f"epoch:    {d.group_epoch} (assignment {d.assignment_epoch})\n")
    out.write(f"assignor: {d.assignor}\n")
    out.write(f"members:  {len(d.members)}\n")
    if d.members:
        out.write("\n")
        print_table(
            ("MEMBER", "CLIENT", "HOST", "EPOCH", "TOPICS", "ASSIGNMENT"),
            (
                (
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.member_epoch,
                    ",".join(m.subscribed_topics),
                    ",".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment) or "-",
                )
                for m in d.members
            ),
        )
    return ExitCode.OK


async def _offsets(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        await _describe_group(admin, args.group)
        if args.topic:
            await require_topics(admin, args.topic)
        offsets = await admin.describe_share_group_offsets(args.group, args.topic)
    rows = sorted(offsets.values(), key=lambda o: (o.topic, o.partition))
    if args.json:
        for o in rows:
            sys.stdout.write(
                json.dumps(
                    {
                        "topic": o.topic,
                        "partition": o.partition,
                        "start_offset": o.start_offset,
                        "lag": o.lag,
                    }
                )
                + "\n"
            )
    else:
        print_table(
            ("TOPIC", "PARTITION", "START-OFFSET", "LAG"),
            ((o.topic, o.partition, o.start_offset, o.lag) for o in rows),
        )
    return ExitCode.OK


async def _reset(args: argparse.Namespace, options: ClientOptions) -> int:
    async with make_admin(options) as admin:
        described = await require_topics(admin, [args.topic])
        partitions = [p.partition for p in described[args.topic].partitions]
        try:
            if args.to_offset is not None:
                if args.to_offset < 0:
                    raise CliError("--to-offset must not be negative", ExitCode.USAGE)
                chosen = args.partition or partitions
                unknown = sorted(set(chosen) - set(partitions))
                if unknown:
                    raise CliError(
                        f"topic {args.topic!r} has no partition {unknown[0]}", ExitCode.NOT_FOUND
                    )
                await admin.alter_share_group_offsets(
                    args.group,
                    {TopicPartition(args.topic, p): args.to_offset for p in sorted(chosen)},
                )
                what = f"offset {args.to_offset} on {len(chosen)} partition(s)"
            else:
                if args.partition:
                    raise CliError(
                        "--partition works with --to-offset only (earliest/latest apply to the "
                        "whole topic)",
                        ExitCode.USAGE,
                    )
                policy = "earliest" if args.to_earliest else "latest"
                await admin.alter_group_config(args.group, {"share.auto.offset.reset": policy})
                await admin.delete_share_group_offsets(args.group, [args.topic])
                what = f"{policy} (state deleted; share.auto.offset.reset={policy})"
        except errors.NonEmptyGroupError as exc:
            raise CliError(
                f"share group {args.group!r} has active members; stop its consumers first",
                ExitCode.KAFKA,
            ) from exc
        except errors.GroupIdNotFoundError as exc:
            raise CliError(
                f"share group {args.group!r} does not exist", ExitCode.NOT_FOUND
            ) from exc
    if not args.quiet:
        sys.stderr.write(f"group {args.group!r} on {args.topic}: reset to {what}\n")
    return ExitCode.OK
