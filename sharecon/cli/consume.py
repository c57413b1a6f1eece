"""``sharecon consume``: read records through a share group and print them."""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from typing import TYPE_CHECKING

import anyio

from sharecon.cli._clients import (
    IdleTimer,
    make_admin,
    make_consumer,
    require_topics,
    set_earliest,
)
from sharecon.cli._common import CliError, ExitCode, non_negative_float, positive_int
from sharecon.cli._encoding import record_to_json, text_of
from sharecon.cli._stdout import PipeProgress, reader_gone
from sharecon.protocol import ShareFetchRequest
from sharecon.types import AckType

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from sharecon import errors
    from sharecon.cli._common import ClientOptions
    from sharecon.record import Record
    from sharecon.types import TopicPartition

__all__ = ["register"]

_ACKS = {"accept": AckType.ACCEPT, "release": AckType.RELEASE, "reject": AckType.REJECT}
# Seconds to wait at the end for the reader of a pipe to read the last lines written.
_DRAIN_WAIT = 10.0

_DESCRIPTION = """\
Join a share group, print each record it delivers to this member, and answer each one
with --ack (accept by default) after it was written to stdout.

Records are printed one per line: TOPIC-PARTITION@OFFSET, then key=..., the value, and
headers (text mode); or as JSON lines with --json:
  {"topic", "partition", "offset", "key", "value", "headers", "timestamp", "delivery_count"}
In JSON, bytes that are valid UTF-8 are text; others base64, flagged by
"key_encoding"/"value_encoding": "base64" (and "encoding" in a header).
In text mode: null is a missing key or value; UTF-8 text is shown as is, or as a quoted
JSON string ("null", "a\\tb") when it is null, starts with " or base64:, or holds
unprintable characters; other bytes as base64:...

Runs until --max records were handled, --idle seconds passed without a record, Ctrl-C,
or the reader of stdout went away. Records delivered but not printed when it stops are
released (given back to the group, which spends one of their delivery attempts).

To peek at a few records, use --max N (with --ack release to give them back), not
| head -N: on a pipe, a record is answered once its reader has read its line, and one
written into the pipe but never read is released; yet a reader such as head reads more
lines than it shows, and those count as read.
"""

_EPILOG = """\
examples:
  sharecon consume invoices -g billing --max 10
  sharecon consume invoices -g billing --json --idle 5 > records.jsonl
  sharecon consume invoices -g audit --earliest --ack release --max 1   # peek, give back
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: list[argparse.ArgumentParser]
) -> None:
    """Add ``consume`` to the command tree."""
    p = sub.add_parser(
        "consume",
        parents=parents,
        help="read records through a share group and print them",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topics", nargs="+", metavar="TOPIC", help="topic(s) to subscribe to")
    p.add_argument("-g", "--group", required=True, help="the share group to consume as")
    p.add_argument(
        "--ack",
        choices=sorted(_ACKS),
        default="accept",
        help="answer for each printed record: accept (done), release (deliver again), "
        "reject (archive, never delivered again); default accept",
    )
    p.add_argument(
        "-n",
        "--max",
        type=positive_int,
        metavar="N",
        help="stop after N records (the way to peek, rather than | head -N)",
    )
    p.add_argument(
        "--idle",
        type=non_negative_float,
        metavar="SECONDS",
        help="stop once no record arrived for this long (counted from the assignment)",
    )
    # One output format: --value-only is a text form, and JSON lines always carry the
    # whole record.
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON lines")
    output.add_argument(
        "--value-only", action="store_true", help="print only each value (text mode)"
    )
    p.add_argument(
        "--earliest",
        action="store_true",
        help="set the group's share.auto.offset.reset=earliest first, so a new group "
        "also gets records written before it joined",
    )
    p.set_defaults(func=run)


def format_text(record: Record, *, value_only: bool = False) -> str:
    """One record as one line of text."""
    if value_only:
        return text_of(record.value)
    parts = [
        f"{record.topic}-{record.partition}@{record.offset}",
        f"key={text_of(record.key)}",
        text_of(record.value),
    ]
    if record.headers:
        parts.append("headers=" + ",".join(f"{k}={text_of(v)}" for k, v in record.headers))
    if record.delivery_count > 1:
        parts.append(f"delivery={record.delivery_count}")
    return "\t".join(parts)


async def run(args: argparse.Namespace, options: ClientOptions) -> int:
    """Consume, print and answer records; see the subcommand's help."""
    async with make_admin(options) as admin:
        await require_topics(admin, args.topics)
        if args.earliest:
            await set_earliest(admin, args.group)
        # --max N takes only N records where the broker can limit acquisition (4.2+).
        fetch_version = admin.api_versions.get(ShareFetchRequest)
        limited = args.max is not None and fetch_version is not None and fetch_version >= 2
    if args.max is not None and not limited and not args.quiet:
        sys.stderr.write(
            f"note: this broker (before Kafka 4.2) cannot limit what a fetch acquires: "
            f"it may take whole batches, so records beyond the {args.max} shown are "
            "acquired and given back, which uses up one of their delivery attempts\n"
        )
    ack = _ACKS[args.ack]
    remaining: int | None = args.max
    out = sys.stdout
    handled = 0
    idle = IdleTimer(args.idle)
    consumer = make_consumer(
        options,
        group=args.group,
        topics=args.topics,
        max_records=min(remaining, 500) if remaining else 500,
        acquire_mode="record_limit" if limited else "batch",
    )
    results: dict[TopicPartition, errors.KafkaError | None] = {}
    # On a pipe, records are answered once the reader has read their line: (end of the
    # line in bytes written, record), oldest first. Elsewhere a written line is read.
    pipe = PipeProgress(out)
    held: deque[tuple[int, Record]] = deque()
    encoding = getattr(out, "encoding", None) or "utf-8"
    encode_errors = getattr(out, "errors", None) or "strict"

    def settle(upto: int | None = None) -> None:
        # Answer the records whose line the reader has read (all up to ``upto``).
        upto = pipe.read_upto() if upto is None else upto
        while held and held[0][0] <= upto:
            consumer.acknowledge(held.popleft()[1], ack)

    # Waits are cut short so that a reader gone while nothing arrives (`| head -2` with
    # every record printed) ends the command at once instead of leaving it waiting.
    poll_timeout = min(idle.poll_timeout(), 0.2)
    async with consumer:
        while remaining is None or remaining > 0:
            if held and await _wait_for_reader(out, pipe, held, settle):
                # What is still in the pipe was never read: close() releases it.
                raise BrokenPipeError("the reader of stdout went away")
            records = await consumer.poll(poll_timeout, max_records=remaining)
            if not records:
                settle()
                if reader_gone(out):
                    # What is still in the pipe was never read: close() releases it.
                    raise BrokenPipeError("the reader of stdout went away")
                if idle.expired(consumer):
                    break
                continue
            idle.activity()
            last = remaining is not None and len(records) >= remaining
            if last:
                # Fetch nothing more: once these answers are confirmed the member could
                # acquire again, only for close() to give the records back (a delivery
                # attempt each, for records never shown).
                consumer.unsubscribe()
            # The last releases are left to close(): it releases every delivered record
            # with its final acknowledgement, which fetches nothing. Released on a fetch,
            # they could be acquired again at once and released once more (two deliveries
            # counted for one look).
            answer = not (last and ack is AckType.RELEASE)
            for i, record in enumerate(records):
                try:
                    if args.json:
                        line = json.dumps(record_to_json(record), ensure_ascii=False) + "\n"
                    else:
                        line = format_text(record, value_only=args.value_only) + "\n"
                    # Flushed one by one: a record is answered only once it really left
                    # (a buffered line is not written yet), and a closed pipe shows up at
                    # the first record it did not take.
                    if pipe.tracking:
                        data = line.encode(encoding, encode_errors)
                        out.buffer.write(data)
                        out.buffer.flush()
                        pipe.written += len(data)
                    else:
                        out.write(line)
                        out.flush()
                except BaseException:
                    # Not written: give this record and the rest of the batch back (and
                    # close() those written but never read).
                    settle()
                    for r in records[i:]:
                        r.release()
                    raise
                if answer:
                    held.append((pipe.written, record))
                    settle()
            handled += len(records)
            if remaining is not None:
                remaining -= len(records)
        unread = 0
        if held and await _wait_for_reader(out, pipe, held, settle):
            for _, record in held:
                record.release()
            unread = len(held)
            held.clear()
        if ack is not AckType.RELEASE:
            results = await consumer.commit()
    failed = {tp: err for tp, err in results.items() if err is not None}
    if not args.quiet:
        sys.stderr.write(
            f"{handled} record(s) consumed, answered {args.ack}"
            + (
                f"; {unread} of them released: the reader of stdout left them unread"
                if unread
                else ""
            )
            + "\n"
        )
    if failed:
        detail = "; ".join(f"{tp.topic}-{tp.partition}: {err}" for tp, err in failed.items())
        raise CliError(
            f"the broker did not take every acknowledgement ({detail}); those records "
            "will be delivered again",
            ExitCode.KAFKA,
        )
    return ExitCode.OK


async def _wait_for_reader(
    out: TextIO,
    pipe: PipeProgress,
    held: deque[tuple[int, Record]],
    settle: Callable[[int | None], None],
) -> bool:
    """Wait for the reader of the pipe to read the lines of the records in ``held``,
    answering each as it is read. Explicit acknowledgement needs every record answered
    before the next poll, so nothing more is taken before then.

    :returns: True when the reader went away and left some unread (they stay in
        ``held``); False when all were read, or, after :data:`_DRAIN_WAIT` s of a reader
        that is there but does not read, answered as read (it will read them).
    """
    with anyio.move_on_after(_DRAIN_WAIT):
        while True:
            settle(None)
            if not held:
                return False
            if reader_gone(out):
                return True
            await anyio.sleep(0.005)
    settle(None)
    if held and reader_gone(out):
        return True
    settle(pipe.written)
    return False
