"""``sharecon groups list|describe|offsets|config|reset|delete``: inspect, configure,
reposition and delete share groups."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon.admin import ConfigSource
from sharecon.cli._clients import make_admin, require_topics
from sharecon.cli._common import CliError, ExitCode, parse_key_values, print_table
from sharecon.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sharecon.admin import Admin, ConfigEntry, ShareGroupDescription
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]

_DESCRIPTION = """\
Share groups: list them, describe one (state, members, assignments), show its start
offsets and lag per partition, read or change its configs, move its start offsets
(reset), or delete it.
"""

_RESET_DESCRIPTION = """\
Move a share group's start offset on the partitions of TOPIC. The group must have no
active members (stop its consumers first), otherwise exit code 1.

  --to-offset N        start every chosen partition at offset N (AlterShareGroupOffsets).
                       An N past a partition's end starts that partition at its end, and
                       an N before its first record at its first record (each said on
                       stderr). A group that does not exist yet is created with these
                       start offsets.
  --to-earliest        forget the group's state on TOPIC and set the group's
  --to-latest          share.auto.offset.reset to earliest/latest, so the next consumer
                       starts from the first / next new record (DeleteShareGroupOffsets).
                       For a group that does not exist yet there is no state to forget:
                       only share.auto.offset.reset is set, and the group's first
                       consumer starts from the first / next new record.
"""

_CONFIG_DESCRIPTION = """\
Read, set or remove a share group's configs (IncrementalAlterConfigs; no consumer needed,
and the group need not exist yet: settings made before it exists apply once it is
created). Without --set/--delete it prints the configs that matter to share groups:
share.* and, on Kafka 4.4, the errors.deadletterqueue.* ones (--all: every group config).
With --set/--delete it changes them first, then prints the result.

  share.auto.offset.reset          earliest | latest | by_duration:<ISO-8601 duration>
  share.record.lock.duration.ms    how long a delivered record stays locked to its consumer
  share.delivery.count.limit       deliveries before the broker archives a record
  share.isolation.level            read_uncommitted | read_committed
  errors.deadletterqueue.topic.name          (Kafka 4.4) the broker's dead-letter topic
  errors.deadletterqueue.copy.record.enable  (Kafka 4.4) copy key and value, not only headers

SOURCE says where a value comes from: group (set on this group), default (the broker's
default), broker (the broker's configuration). A name the broker does not know, or a value
it refuses, is exit code 1 with the broker's reason.
"""

_DELETE_DESCRIPTION = """\
Delete share groups with their state on every partition (start offsets, delivery counts).
Every group is checked first: if one does not exist (exit code 3, unless --if-exists) or
still has active members (exit code 1: stop its consumers first), nothing is deleted.

The group's configs (share.auto.offset.reset, ...) are kept by the broker: a new group of
the same name starts with them. `sharecon groups config GROUP --delete KEY` removes them.
"""

# Group configs shown by `groups config` without --all: the ones share groups read.
_SHARE_CONFIG_PREFIXES = ("share.", "errors.deadletterqueue.")


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

    c = gsub.add_parser(
        "config",
        parents=parents,
        help="read or change a group's configs (lock duration, delivery limit, ...)",
        description=_CONFIG_DESCRIPTION,
        epilog="examples:\n  sharecon groups config billing\n"
        "  sharecon groups config billing --set share.record.lock.duration.ms=60000 "
        "--set share.delivery.count.limit=3\n"
        "  sharecon groups config billing --delete share.auto.offset.reset --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("group", help="the share group")
    c.add_argument(
        "--set",
        dest="set_",
        action="append",
        metavar="KEY=VALUE",
        help="set a config on this group (repeatable)",
    )
    c.add_argument(
        "--delete",
        action="append",
        metavar="KEY",
        help="remove this group's own value, back to the broker default (repeatable)",
    )
    c.add_argument("--all", action="store_true", help="show every group config")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=_config)

    x = gsub.add_parser(
        "delete",
        parents=parents,
        help="delete share groups (they must have no active members)",
        description=_DELETE_DESCRIPTION,
        epilog="example:\n  sharecon groups delete billing audit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    x.add_argument("groups", nargs="+", metavar="GROUP", help="the share groups")
    x.add_argument(
        "--if-exists", action="store_true", help="a group that does not exist is not an error"
    )
    x.set_defaults(func=_delete)


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


async def _group_exists(admin: Admin, group: str) -> bool:
    try:
        await _describe_group(admin, group)
    except CliError:
        return False
    return True


async def _reset(args: argparse.Namespace, options: ClientOptions) -> int:
    notes: list[str] = []
    async with make_admin(options) as admin:
        described = await require_topics(admin, [args.topic])
        partitions = [p.partition for p in described[args.topic].partitions]
        exists = await _group_exists(admin, args.group)
        try:
            if args.to_offset is not None:
                if args.to_offset < 0:
                    raise CliError("--to-offset must not be negative", ExitCode.USAGE)
                chosen = sorted(set(args.partition or partitions))
                unknown = sorted(set(chosen) - set(partitions))
                if unknown:
                    raise CliError(
                        f"topic {args.topic!r} has no partition {unknown[0]}", ExitCode.NOT_FOUND
                    )
                targets = await _clamped_offsets(admin, args.topic, chosen, args.to_offset, notes)
                await admin.alter_share_group_offsets(args.group, targets)
                values = sorted(set(targets.values()))
                what = (
                    f"offset {values[0]} on {len(targets)} partition(s)"
                    if len(values) == 1
                    else "offsets " + ", ".join(f"{tp.partition}:{o}" for tp, o in targets.items())
                )
                if not exists:
                    what += " (the group did not exist: created with these offsets)"
            else:
                if args.partition:
                    raise CliError(
                        "--partition works with --to-offset only (earliest/latest apply to the "
                        "whole topic)",
                        ExitCode.USAGE,
                    )
                policy = "earliest" if args.to_earliest else "latest"
                # State first: if the group turns out to have members, nothing was changed.
                had_state = exists
                if exists:
                    try:
                        await admin.delete_share_group_offsets(args.group, [args.topic])
                    except errors.GroupIdNotFoundError:
                        exists = had_state = False  # deleted meanwhile: nothing to forget
                    except errors.UnknownTopicOrPartitionError:
                        # The topic exists (checked above), so the group has no state on it
                        # (never read it, or a reset already deleted it): nothing to forget.
                        had_state = False
                await admin.alter_group_config(args.group, {"share.auto.offset.reset": policy})
                if had_state:
                    what = f"{policy} (state deleted; share.auto.offset.reset={policy})"
                elif exists:
                    what = (
                        f"{policy} (the group had no state on the topic; "
                        f"share.auto.offset.reset={policy} set)"
                    )
                else:
                    what = (
                        f"{policy} (the group does not exist yet: share.auto.offset.reset="
                        f"{policy} set, so its first consumer starts from the "
                        f"{'first' if policy == 'earliest' else 'next new'} record)"
                    )
        except errors.NonEmptyGroupError as exc:
            raise CliError(
                f"share group {args.group!r} has active members; stop its consumers first",
                ExitCode.KAFKA,
            ) from exc
    if not args.quiet:
        for note in notes:
            sys.stderr.write(note + "\n")
        sys.stderr.write(f"group {args.group!r} on {args.topic}: reset to {what}\n")
    return ExitCode.OK


async def _clamped_offsets(
    admin: Admin, topic: str, partitions: list[int], offset: int, notes: list[str]
) -> dict[TopicPartition, int]:
    """``offset`` for each partition, moved into [first offset, end offset] where it falls
    outside (a start offset past the end would show a negative lag and skip records written
    until the log reaches it); each move is explained in ``notes``."""
    tps = [TopicPartition(topic, p) for p in partitions]
    first = await admin.list_offsets(tps, "earliest")
    end = await admin.list_offsets(tps, "latest")
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if offset > end[tp]:
            out[tp] = end[tp]
            notes.append(
                f"{topic}-{tp.partition}: offset {offset} is past the end (the next record "
                f"will be {end[tp]}); starting at {end[tp]}"
            )
        elif offset < first[tp]:
            out[tp] = first[tp]
            notes.append(
                f"{topic}-{tp.partition}: offset {offset} is before the first record "
                f"({first[tp]}); starting at {first[tp]}"
            )
        else:
            out[tp] = offset
    return out


# -- config --------------------------------------------------------------------------------


def _source_name(entry: ConfigEntry) -> str:
    if entry.source == ConfigSource.GROUP_CONFIG:
        return "group"
    if entry.source == ConfigSource.DEFAULT_CONFIG:
        return "default"
    if isinstance(entry.source, ConfigSource) and entry.source.name.endswith("BROKER_CONFIG"):
        return "broker"
    return str(entry.source.name.lower() if isinstance(entry.source, ConfigSource) else "unknown")


async def _config(args: argparse.Namespace, options: ClientOptions) -> int:
    changes: dict[str, str | None] = dict(parse_key_values(args.set_, "--set"))
    for key in args.delete or ():
        if key in changes:
            raise CliError(f"{key} is both set and deleted", ExitCode.USAGE)
        changes[key] = None
    async with make_admin(options) as admin:
        if changes:
            await admin.alter_group_config(args.group, changes)
            entries = await _read_back(admin, args.group, changes, options.timeout)
        else:
            entries = await admin.describe_group_config(args.group)
        exists = await _group_exists(admin, args.group)
    shown = sorted(
        (e for e in entries.values() if args.all or e.name.startswith(_SHARE_CONFIG_PREFIXES)),
        key=lambda e: e.name,
    )
    if args.json:
        obj = {
            "group": args.group,
            "exists": exists,
            "configs": {
                e.name: {"value": e.value, "source": _source_name(e), "default": e.is_default}
                for e in shown
            },
        }
        sys.stdout.write(json.dumps(obj) + "\n")
    else:
        print_table(
            ("NAME", "VALUE", "SOURCE"),
            ((e.name, "(sensitive)" if e.sensitive else e.value, _source_name(e)) for e in shown),
        )
    if not args.quiet:
        if changes:
            sys.stderr.write(
                f"group {args.group!r}: "
                + ", ".join(f"{k} {'removed' if v is None else 'set'}" for k, v in changes.items())
                + "\n"
            )
        if not exists:
            sys.stderr.write(
                f"share group {args.group!r} does not exist yet; these settings apply "
                "once it is created\n"
            )
    return ExitCode.OK


async def _read_back(
    admin: Admin, group: str, changes: Mapping[str, str | None], timeout: float
) -> dict[str, ConfigEntry]:
    """The group's configs once the change is visible.

    The broker answering DescribeConfigs learns the change from the cluster metadata a
    moment after IncrementalAlterConfigs returned, so a read at once can show the old
    value. Read until it shows the new one, for at most ``timeout`` seconds.
    """

    def applied(entries: Mapping[str, ConfigEntry]) -> bool:
        for key, value in changes.items():
            entry = entries.get(key)
            if entry is None:
                continue
            if value is None and entry.source == ConfigSource.GROUP_CONFIG:
                return False
            if value is not None and entry.value != value:
                return False
        return True

    with anyio.move_on_after(timeout):
        while True:
            entries = await admin.describe_group_config(group)
            if applied(entries):
                return entries
            await anyio.sleep(0.1)
    return await admin.describe_group_config(group)


# -- delete --------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace, options: ClientOptions) -> int:
    names = list(dict.fromkeys(args.groups))
    async with make_admin(options) as admin:
        found: dict[str, ShareGroupDescription] = {}
        missing: list[str] = []
        for group in names:
            try:
                found[group] = await _describe_group(admin, group)
            except CliError:
                missing.append(group)
        if missing and not args.if_exists:
            raise CliError(
                f"share group {', '.join(repr(g) for g in missing)} does not exist; "
                "nothing was deleted",
                ExitCode.NOT_FOUND,
            )
        busy = [g for g, d in found.items() if d.members]
        if busy:
            raise CliError(
                f"share group {', '.join(repr(g) for g in busy)} has active members; stop "
                "its consumers first; nothing was deleted",
                ExitCode.KAFKA,
            )
        results = await admin.delete_share_groups(found) if found else {}
    failed = {g: e for g, e in results.items() if e is not None}
    if not args.quiet:
        for group in names:
            if group in results and results[group] is None:
                sys.stderr.write(f"share group {group!r} deleted\n")
            elif group in missing:
                sys.stderr.write(f"share group {group!r} does not exist (skipped)\n")
    if failed:
        # Only races get here (a member joined, or the group went, since the check).
        group, err = next(iter(failed.items()))
        others = f" ({len(failed) - 1} more could not be deleted)" if len(failed) > 1 else ""
        if isinstance(err, errors.GroupIdNotFoundError):
            raise CliError(f"share group {group!r} does not exist{others}", ExitCode.NOT_FOUND)
        if isinstance(err, errors.NonEmptyGroupError):
            raise CliError(
                f"share group {group!r} has active members; stop its consumers first{others}",
                ExitCode.KAFKA,
            )
        raise CliError(f"{err}{others}", ExitCode.KAFKA)
    return ExitCode.OK
