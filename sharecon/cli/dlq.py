"""``sharecon dlq inspect|replay``: look at a dead-letter topic, move its records back.

Dead-letter copies carry ``sharecon.dlq.*`` headers (written by
``ShareConsumer.reject_to_dlq`` and ``DeadLetterPolicy``; see docs/dlq.md) naming the
source topic, partition, offset, delivery count, group, reason and time. Copies a Kafka
4.4 broker wrote itself carry its ``__dlq.errors.*`` headers instead; both are decoded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import uuid
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon.cli._clients import (
    IdleTimer,
    make_admin,
    make_consumer,
    make_producer,
    require_topics,
    set_earliest,
)
from sharecon.cli._common import CliError, ExitCode, non_negative_float, positive_int
from sharecon.cli._encoding import record_to_json, text_of
from sharecon.cli._progress import Progress
from sharecon.dlq import DeadLetterInfo, any_dead_letter_info, original_headers
from sharecon.producer import ProducerRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.admin import Admin
    from sharecon.cli._common import ClientOptions
    from sharecon.consumer import ShareConsumer
    from sharecon.record import Record

__all__ = ["DEFAULT_REPLAY_GROUP", "register"]

#: The share group ``dlq replay`` consumes the dead-letter topic with, unless --group.
DEFAULT_REPLAY_GROUP = "sharecon-dlq-replay"
#: Prefix of the throwaway groups ``dlq inspect`` and ``dlq replay --dry-run`` read with.
INSPECT_GROUP_PREFIX = "sharecon-dlq-inspect-"
_EVERYTHING = 2**63 - 1

_INSPECT_DESCRIPTION = """\
Print the records of a dead-letter topic with their dead-letter headers decoded: source
topic-partition@offset, delivery count, group, time and reason. Both kinds are read: the
sharecon.dlq.* headers of copies written by sharecon, and the __dlq.errors.* headers of
copies a Kafka 4.4 broker wrote itself (shown with by=broker; their reason is the
broker's message, their time the copy's timestamp).

Non-destructive: each run reads through a new throwaway share group
(sharecon-dlq-inspect-<random>, starting at the earliest record), so it neither takes
records away from `dlq replay` nor raises their delivery count. The throwaway group is
deleted afterwards, with its config: nothing is left behind. It stops after --max
records, or once nothing arrived for --idle seconds.

Text mode prints one line per record; --json prints the `consume --json` object plus
"dlq": {"source_topic", "source_partition", "source_offset", "delivery_count", "group",
"reason", "time", "time_ms", "written_by"} (null when the record has no dead-letter
headers; written_by is "sharecon" or "broker").
"""

_REPLAY_DESCRIPTION = """\
Move records from a dead-letter topic back to a topic: each record's key, value and
original headers (the dead-letter ones, sharecon.dlq.* and __dlq.errors.*, are dropped)
are produced to --to, or to the source topic named in its sharecon.dlq.topic (or the
broker's __dlq.errors.topic) header. A dead-letter record is accepted
(removed from the replay group's view) only after its copy was acknowledged by the
broker; if producing fails it is released (it stays in the DLQ) and the command stops
with exit code 1.

The DLQ is read through the share group --group (default sharecon-dlq-replay), with
share.auto.offset.reset=earliest set on it first; records that group already accepted
are not replayed again, so running replay twice moves nothing the second time. It stops
after --max records, or once nothing arrived for --idle seconds.

--dry-run changes nothing: it lists what would be replayed, reading through a throwaway
group (as `dlq inspect`) and skipping what the replay group is known to be done with
(offsets below its start offset, and partitions where its lag is 0). Best effort: a
record the replay group accepted out of order may still be listed.
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add ``dlq inspect`` and ``dlq replay`` to the command tree."""
    p = sub.add_parser(
        "dlq",
        help="inspect a dead-letter topic, or replay its records",
        description="Dead-letter topics written by reject_to_dlq / DeadLetterPolicy.",
    )
    dsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    i = dsub.add_parser(
        "inspect",
        parents=parents,
        help="print dead-letter records with their dlq headers decoded (non-destructive)",
        description=_INSPECT_DESCRIPTION,
        epilog="examples:\n  sharecon dlq inspect dlq.billing\n"
        "  sharecon dlq inspect dlq.billing --json --max 100 | jq .dlq.reason",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("topic", help="the dead-letter topic")
    i.add_argument("-n", "--max", type=positive_int, metavar="N", help="stop after N records")
    i.add_argument(
        "--idle",
        type=non_negative_float,
        default=3.0,
        metavar="SECONDS",
        help="stop once nothing arrived for this long (default 3)",
    )
    i.add_argument("--json", action="store_true", help="print JSON lines")
    i.set_defaults(func=_inspect)

    r = dsub.add_parser(
        "replay",
        parents=parents,
        help="move dead-letter records back to a topic",
        description=_REPLAY_DESCRIPTION,
        epilog="examples:\n  sharecon dlq replay --from dlq.billing --to invoices\n"
        "  sharecon dlq replay --from dlq.billing --dry-run\n"
        "  sharecon dlq replay --from dlq.billing --max 10   # to each record's source topic",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--from", dest="source", required=True, metavar="DLQ", help="dead-letter topic")
    r.add_argument(
        "--to",
        dest="target",
        metavar="TOPIC",
        help="topic to produce to (default: each record's sharecon.dlq.topic header)",
    )
    r.add_argument(
        "-g",
        "--group",
        default=DEFAULT_REPLAY_GROUP,
        help=f"share group that reads the DLQ (default {DEFAULT_REPLAY_GROUP})",
    )
    r.add_argument("-n", "--max", type=positive_int, metavar="N", help="replay at most N records")
    r.add_argument(
        "--idle",
        type=non_negative_float,
        default=5.0,
        metavar="SECONDS",
        help="stop once nothing arrived for this long (default 5)",
    )
    r.add_argument(
        "--dry-run", action="store_true", help="list what would be replayed; change nothing"
    )
    r.add_argument("--json", action="store_true", help="--dry-run: print JSON lines")
    r.set_defaults(func=_replay)


# -- shared --------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    if ms < 0:
        return "?"
    stamp = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _info(record: Record) -> DeadLetterInfo | None:
    """The record's dead-letter headers, whoever wrote them (sharecon or the broker)."""
    return any_dead_letter_info(record.headers, record.timestamp)


def _dlq_json(info: DeadLetterInfo | None) -> dict[str, object] | None:
    if info is None:
        return None
    out: dict[str, object] = {
        "source_topic": info.topic,
        "source_partition": info.partition,
        "source_offset": info.offset,
        "delivery_count": info.delivery_count,
        "group": info.group,
        "reason": info.reason,
        "time": _iso(info.time_ms),
        "time_ms": info.time_ms,
        "written_by": info.written_by,
    }
    if info.value_dropped >= 0:
        out["value_dropped"] = info.value_dropped  # a stub: the value was too large
    return out


def _dlq_text(record: Record, info: DeadLetterInfo | None) -> str:
    parts = [f"{record.topic}-{record.partition}@{record.offset}"]
    if info is None:
        parts.append("(no dead-letter headers)")
    else:
        parts += [
            f"from={info.topic}-{info.partition}@{info.offset}",
            f"deliveries={info.delivery_count}",
            f"group={info.group}",
            f"at={_iso(info.time_ms)}",
            f"reason={text_of(info.reason.encode())}",
        ]
        if info.written_by != "sharecon":
            parts.append(f"by={info.written_by}")
        if info.value_dropped >= 0:
            parts.append(f"value-dropped={info.value_dropped}B")
    parts += [f"key={text_of(record.key)}", f"value={text_of(record.value)}"]
    kept = original_headers(record.headers)
    if kept:
        parts.append("headers=" + ",".join(f"{k}={text_of(v)}" for k, v in kept))
    return "\t".join(parts)


async def _read_throwaway(
    options: ClientOptions, admin: Admin, topic: str, args: argparse.Namespace
) -> tuple[str, ShareConsumer]:
    group = INSPECT_GROUP_PREFIX + uuid.uuid4().hex[:12]
    await set_earliest(admin, group)
    consumer = make_consumer(
        options, group=group, topics=[topic], max_records=min(args.max or 500, 500)
    )
    return group, consumer


async def _forget_group(admin: Admin, group: str, timeout: float) -> None:
    """Delete a throwaway group and its config, so a read leaves nothing behind.

    Runs after the consumer left (its close is done), shielded so that Ctrl-C during
    the read still cleans up, and bounded by ``timeout``. A failure is reported on stderr,
    not raised: what was read was printed already.
    """
    problem: str | None = None
    with anyio.CancelScope(shield=True), anyio.move_on_after(timeout) as scope:
        try:
            # The member's leave reaches the coordinator with the consumer's close; a
            # delete racing it is refused as non-empty, so ask again for a moment.
            for attempt in range(50):
                result = (await admin.delete_share_groups([group]))[group]
                if not isinstance(result, errors.NonEmptyGroupError) or attempt == 49:
                    break
                await anyio.sleep(0.1)
            # Not found: the group was never created (nothing was read); nothing to delete.
            if result is not None and not isinstance(result, errors.GroupIdNotFoundError):
                problem = str(result)
            await admin.alter_group_config(group, {"share.auto.offset.reset": None})
        except errors.KafkaError as exc:
            problem = str(exc)
    if scope.cancelled_caught:
        problem = f"no answer within {timeout:g} s"
    if problem is not None:
        sys.stderr.write(
            f"warning: the throwaway share group {group!r} could not be deleted ({problem}); "
            f"`sharecon groups delete {group}` removes it\n"
        )


# -- inspect -------------------------------------------------------------------------------


async def _inspect(args: argparse.Namespace, options: ClientOptions) -> int:
    out = sys.stdout
    count = 0
    async with make_admin(options) as admin:
        await require_topics(admin, [args.topic])
        group, consumer = await _read_throwaway(options, admin, args.topic, args)
        try:
            count = await _drain(
                consumer, args.max, args.idle, lambda r: _print_inspect(r, args.json)
            )
        finally:
            await _forget_group(admin, group, options.timeout)
    if not args.quiet:
        sys.stderr.write(f"{count} dead-letter record(s) in {args.topic}\n")
    out.flush()
    return ExitCode.OK


def _print_inspect(record: Record, as_json: bool) -> None:
    info = _info(record)
    if as_json:
        obj = record_to_json(record, dlq=_dlq_json(info))
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_dlq_text(record, info) + "\n")


async def _drain(
    consumer: ShareConsumer,
    limit: int | None,
    idle: float,
    handle: Callable[[Record], None],
) -> int:
    """Read (and accept) records until ``limit`` or ``idle``; call ``handle`` on each."""
    count = 0
    timer = IdleTimer(idle)
    async with consumer:
        while limit is None or count < limit:
            records = await consumer.poll(
                timer.poll_timeout(), max_records=None if limit is None else limit - count
            )
            if not records:
                if timer.expired(consumer):
                    break
                continue
            timer.activity()
            for record in records:
                handle(record)
                record.accept()
            sys.stdout.flush()
            count += len(records)
    return count


# -- replay --------------------------------------------------------------------------------


def _is_stub(record: Record) -> bool:
    """Whether ``record`` is a stub: a copy written without the value, which was too large
    for the dead-letter topic (``sharecon.dlq`` rule 2). It cannot be replayed."""
    info = _info(record)
    return info is not None and info.value_dropped >= 0


def _target_of(record: Record, target: str | None) -> str:
    if target is not None:
        return target
    info = _info(record)
    if info is None or not info.topic:
        raise CliError(
            f"{record.topic}-{record.partition}@{record.offset} has no sharecon.dlq.topic "
            "(or __dlq.errors.topic) header, so its source topic is unknown; pass --to TOPIC",
            ExitCode.USAGE,
        )
    return info.topic


async def _replay(args: argparse.Namespace, options: ClientOptions) -> int:
    if args.json and not args.dry_run:
        raise CliError(
            "--json goes with --dry-run (a replay prints only a summary)", ExitCode.USAGE
        )
    async with make_admin(options) as admin:
        await require_topics(admin, [args.source] + ([args.target] if args.target else []))
        if args.dry_run:
            return await _dry_run(args, options, admin)
        await set_earliest(admin, args.group)
        return await _replay_for_real(args, options, admin)


async def _dry_run(args: argparse.Namespace, options: ClientOptions, admin: Admin) -> int:
    # Offsets the replay group has already moved past are not shown again.
    # Best effort: the start offset can lag behind what the group accepted, but a lag of
    # 0 means the group has nothing left on that partition.
    start: dict[int, int] = {}
    try:
        offsets = await admin.describe_share_group_offsets(args.group, [args.source])
        start = {
            tp.partition: (_EVERYTHING if o.lag == 0 else o.start_offset)
            for tp, o in offsets.items()
        }
    except (errors.GroupIdNotFoundError, errors.UnknownTopicOrPartitionError):
        pass
    shown = 0
    known: set[str] = set()

    stubs = 0

    def show(record: Record) -> None:
        nonlocal shown, stubs
        if record.offset < start.get(record.partition, -1):
            return
        if _is_stub(record):
            stubs += 1
            if not args.json:
                sys.stdout.write(
                    f"would skip {record.topic}-{record.partition}@{record.offset}: "
                    "its value was too large for the dead-letter topic and is not in it\n"
                )
            return
        target = _target_of(record, args.target)
        known.add(target)
        shown += 1
        if args.json:
            obj = record_to_json(record, target=target, dlq=_dlq_json(_info(record)))
            sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(
                f"would replay {record.topic}-{record.partition}@{record.offset} -> {target}\t"
                f"key={text_of(record.key)}\tvalue={text_of(record.value)}\n"
            )

    group, consumer = await _read_throwaway(options, admin, args.source, args)
    try:
        await _drain(consumer, args.max, args.idle, show)
    finally:
        await _forget_group(admin, group, options.timeout)
    if not args.quiet:
        sys.stderr.write(
            f"dry run: {shown} record(s) would be replayed from {args.source}"
            + (f" to {', '.join(sorted(known))}" if known else "")
            + (f"; {stubs} skipped (written without their value)" if stubs else "")
            + "\n"
        )
    return ExitCode.OK


async def _replay_for_real(args: argparse.Namespace, options: ClientOptions, admin: Admin) -> int:
    known_targets: set[str] = {args.target} if args.target else set()
    replayed = skipped = 0
    per_target: dict[str, int] = {}
    timer = IdleTimer(args.idle)
    limit: int | None = args.max
    consumer = make_consumer(
        options, group=args.group, topics=[args.source], max_records=min(limit or 500, 500)
    )
    async with make_producer(options) as producer, consumer:
        with Progress(f"replaying {args.source}", total=limit, enabled=not args.quiet) as bar:
            while limit is None or replayed < limit:
                records = await consumer.poll(
                    timer.poll_timeout(), max_records=None if limit is None else limit - replayed
                )
                if not records:
                    if timer.expired(consumer):
                        break
                    continue
                timer.activity()
                # A stub has no value to put back: rejected in the replay group's view (it
                # stays in the dead-letter topic, for inspect), counted, and said.
                stubs = [r for r in records if _is_stub(r)]
                for r in stubs:
                    r.reject()
                skipped += len(stubs)
                records = [r for r in records if not _is_stub(r)]
                try:
                    targets = [_target_of(r, args.target) for r in records]
                    for t in set(targets) - known_targets:
                        await require_topics(admin, [t])
                        known_targets.add(t)
                except BaseException:
                    for r in records:
                        r.release()
                    raise
                results = await producer.send_batch(
                    (
                        ProducerRecord(t, r.value, key=r.key, headers=original_headers(r.headers))
                        for r, t in zip(records, targets, strict=True)
                    ),
                    return_exceptions=True,
                )
                failure: tuple[Record, str, errors.KafkaError] | None = None
                for record, target, result in zip(records, targets, results, strict=True):
                    if isinstance(result, errors.KafkaError):
                        # Left unanswered: leaving the group releases it with the final
                        # acknowledgement. A release sent now would ride on the next fetch,
                        # which could acquire it again and count a second delivery.
                        failure = failure or (record, target, result)
                    else:
                        record.accept()
                        replayed += 1
                        per_target[target] = per_target.get(target, 0) + 1
                bar.advance(len(records))
                acked = await consumer.commit()
                lost = {tp: e for tp, e in acked.items() if e is not None}
                if lost:
                    detail = "; ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in lost.items())
                    raise CliError(
                        f"{replayed} record(s) replayed, but the DLQ did not take every "
                        f"acceptance ({detail}); those records were produced and may be "
                        "replayed again",
                        ExitCode.KAFKA,
                    )
                if failure is not None:
                    rec, target, err = failure
                    raise CliError(
                        f"{rec.topic}-{rec.partition}@{rec.offset} could not be produced to "
                        f"{target}: {err}; it was released and stays in the DLQ "
                        f"({replayed} record(s) replayed before stopping)",
                        ExitCode.KAFKA,
                    )
    if not args.quiet:
        if per_target:
            where = " to " + ", ".join(f"{t} ({n})" for t, n in sorted(per_target.items()))
        elif args.target:
            where = f" to {args.target}"
        else:
            where = ""
        nothing = (
            "" if replayed or skipped else f" (nothing left to replay for group {args.group!r})"
        )
        stubs_said = (
            f"; {skipped} skipped: written without their value, which was too large for "
            "the dead-letter topic (still there for `sharecon dlq inspect`)"
            if skipped
            else ""
        )
        sys.stderr.write(
            f"{replayed} record(s) replayed from {args.source}{where}{nothing}{stubs_said}\n"
        )
    return ExitCode.OK
