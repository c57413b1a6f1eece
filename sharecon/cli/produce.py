"""``sharecon produce``: write lines or JSON lines from stdin or a file to a topic."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

import anyio
import anyio.to_thread

from sharecon import errors
from sharecon.cli._clients import make_admin, make_producer, require_topics
from sharecon.cli._common import CliError, ExitCode, parse_key_values
from sharecon.cli._encoding import InputLineError, decode_field, headers_from_json
from sharecon.cli._progress import Progress
from sharecon.producer import ProducerRecord

if TYPE_CHECKING:
    from sharecon.cli._common import ClientOptions
    from sharecon.producer import Producer

__all__ = ["parse_json_line", "register"]

_DESCRIPTION = """\
Read records from stdin (or --file), one per line, and write them to TOPIC. Each record
is sent once the broker acknowledged the ones before it in the same read chunk; at the
end the number of records sent is printed on stderr.

--format lines (default): each line (without its newline) is the value; with
  --key-separator SEP, the text before the first SEP is the key. Empty lines are empty
  values.
--format json: each non-empty line is a JSON object with any of
  "key", "value"          strings are UTF-8 text; null is no key / a tombstone; any
                          other JSON value is written as its compact JSON text
  "key_encoding", "value_encoding"   "base64" when the string is base64
  "headers"               [{"key": k, "value": v[, "encoding": "base64"]}, ...],
                          [[k, v], ...] or {k: v, ...}
  "partition", "timestamp" (ms since the epoch)
  Other fields (topic, offset, delivery_count...) are ignored, so the output of
  `sharecon consume --json` can be fed back in.

A line that cannot be parsed stops the command with exit code 4, naming the line and
the reason; the records before it have been sent (their count is printed). Interrupted
(Ctrl-C, exit 130), it says how many records were sent and the input line to resume from.
"""

_EPILOG = """\
examples:
  printf 'a\\nb\\n' | sharecon produce invoices
  sharecon produce invoices --file orders.txt --key-separator ':' -H source=import
  sharecon consume invoices -g copy --json --idle 3 | sharecon produce invoices-copy --format json
"""

# Bytes read at a time: a whole chunk of lines becomes one send_batch (shared batches
# and requests), yet an interactive stdin is sent line by line as it arrives.
_CHUNK = 256 * 1024


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add ``produce`` to the command tree."""
    p = sub.add_parser(
        "produce",
        parents=parents,
        help="write lines or JSON lines from stdin or a file to a topic",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", help="the topic to write to")
    p.add_argument("-f", "--file", default="-", help="read from FILE instead of stdin ('-')")
    p.add_argument("--format", choices=("lines", "json"), default="lines", help="input format")
    p.add_argument(
        "--key-separator",
        metavar="SEP",
        help="lines format: split each line into KEY SEP VALUE at the first SEP",
    )
    p.add_argument(
        "-H",
        "--header",
        action="append",
        metavar="KEY=VALUE",
        help="add this header to every record (repeatable)",
    )
    p.add_argument("-p", "--partition", type=int, help="write every record to this partition")
    p.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        default="none",
        help="batch compression (default none)",
    )
    p.add_argument(
        "--acks", choices=("all", "1"), default="all", help="acknowledgement level (default all)"
    )
    p.set_defaults(func=run)


@dataclass(slots=True)
class _Parsed:
    line: int
    record: ProducerRecord


def parse_json_line(
    text: bytes, *, topic: str, extra_headers: list[tuple[str, bytes | None]]
) -> ProducerRecord:
    """One JSON input line as a record.

    :raises InputLineError: why the line cannot be used.
    """
    try:
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise InputLineError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputLineError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InputLineError(f"expected a JSON object, got {type(data).__name__}")
    key = decode_field(data.get("key"), data.get("key_encoding"), "key")
    value = decode_field(data.get("value"), data.get("value_encoding"), "value")
    headers = headers_from_json(data.get("headers")) + extra_headers
    partition = data.get("partition")
    if partition is not None and (type(partition) is not int or partition < 0):
        raise InputLineError(f"partition must be a non-negative integer, not {partition!r}")
    timestamp = data.get("timestamp")
    if timestamp is not None and type(timestamp) is not int:
        raise InputLineError(f"timestamp must be integer milliseconds, not {timestamp!r}")
    return ProducerRecord(
        topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp
    )


def _parse_line(
    raw: bytes, args: argparse.Namespace, extra_headers: list[tuple[str, bytes | None]]
) -> ProducerRecord | None:
    line = raw[:-1] if raw.endswith(b"\r") else raw
    if args.format == "json":
        if not line.strip():
            return None
        return parse_json_line(line, topic=args.topic, extra_headers=extra_headers)
    key: bytes | None = None
    value = line
    if args.key_separator:
        sep = args.key_separator.encode()
        k, found, v = line.partition(sep)
        if found:
            key, value = k, v
    return ProducerRecord(args.topic, value, key=key, headers=extra_headers or None)


def _open(path: str) -> tuple[IO[bytes], int | None]:
    if path == "-":
        stream = sys.stdin.buffer
    else:
        try:
            stream = open(path, "rb")
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}", ExitCode.DATA) from None
    size: int | None = None
    try:
        st = os.fstat(stream.fileno())
        if stat.S_ISREG(st.st_mode):
            size = st.st_size
    except (OSError, ValueError):
        pass
    return stream, size


def _read_chunk(stream: IO[bytes]) -> bytes:
    # read1 returns what is available (at least one byte unless at EOF), so lines typed
    # at a terminal or trickling through a pipe are sent without waiting for a full chunk.
    read1 = getattr(stream, "read1", None)
    data: bytes = read1(_CHUNK) if read1 is not None else stream.read(_CHUNK)
    return data


async def _send(
    producer: Producer, batch: list[_Parsed]
) -> tuple[int, tuple[int, errors.KafkaError] | None]:
    """Send ``batch``; (records sent, (line, error) of the first failure or None)."""
    results = await producer.send_batch((p.record for p in batch), return_exceptions=True)
    sent = 0
    first: tuple[int, errors.KafkaError] | None = None
    for parsed, result in zip(batch, results, strict=True):
        if isinstance(result, errors.KafkaError):
            if first is None:
                first = (parsed.line, result)
        else:
            sent += 1
    return sent, first


async def run(args: argparse.Namespace, options: ClientOptions) -> int:
    """Read, parse and send; see the subcommand's help."""
    extra_headers: list[tuple[str, bytes | None]] = [
        (k, v.encode()) for k, v in parse_key_values(args.header, "--header").items()
    ]
    stream, size = _open(args.file)
    try:
        async with make_admin(options) as admin:
            await require_topics(admin, [args.topic])
        return await _produce(args, options, stream, size, extra_headers)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


async def _produce(
    args: argparse.Namespace,
    options: ClientOptions,
    stream: IO[bytes],
    size: int | None,
    extra_headers: list[tuple[str, bytes | None]],
) -> int:
    sent = 0
    line_no = 0
    # Input lines 1..done are handled (their records acknowledged, or empty); lines
    # done+1..line_no are being sent.
    done = 0
    failure: tuple[int, errors.KafkaError] | None = None
    bad: tuple[int, str] | None = None
    pending = b""
    try:
        async with make_producer(options, compression=args.compression, acks=args.acks) as producer:
            # Counted in bytes read: the number of records in the input is not known ahead.
            with Progress(
                f"producing to {args.topic}", total=size, unit="bytes", enabled=not args.quiet
            ) as bar:
                eof = False
                while not eof and bad is None and failure is None:
                    chunk = await anyio.to_thread.run_sync(
                        _read_chunk, stream, abandon_on_cancel=True
                    )
                    bar.advance(len(chunk))
                    if not chunk:
                        eof = True
                        lines = [pending] if pending else []
                    else:
                        # Only b"\n" ends a line: a lone b"\r" may be part of a value.
                        lines = (pending + chunk).split(b"\n")
                        pending = lines.pop()
                    batch: list[_Parsed] = []
                    for raw in lines:
                        line_no += 1
                        try:
                            record = _parse_line(raw, args, extra_headers)
                        except InputLineError as exc:
                            bad = (line_no, str(exc))
                            break
                        if record is None:
                            continue
                        if args.partition is not None:
                            record = ProducerRecord(
                                record.topic,
                                record.value,
                                key=record.key,
                                headers=record.headers,
                                partition=args.partition,
                                timestamp=record.timestamp,
                            )
                        batch.append(_Parsed(line_no, record))
                    if batch:
                        n, failure = await _send(producer, batch)
                        sent += n
                    if failure is None:
                        done = line_no if bad is None else line_no - 1
    finally:
        # Read by main() if the command was interrupted: where to resume.
        args.interrupt_note = _resume_note(args, sent, done, line_no)
    where = f" to {args.topic}"
    if bad is not None:
        raise CliError(
            f"line {bad[0]}: {bad[1]}; {sent} record(s) before it were sent{where}",
            ExitCode.DATA,
        )
    if failure is not None:
        line, err = failure
        code = (
            ExitCode.NOT_FOUND
            if isinstance(err, errors.UnknownTopicOrPartitionError)
            else ExitCode.KAFKA
        )
        raise CliError(
            f"record from line {line} was not written: {err}; {sent} record(s) were sent{where}",
            code,
        )
    if not args.quiet:
        sys.stderr.write(f"{sent} record(s) sent{where}\n")
    return ExitCode.OK


def _resume_note(args: argparse.Namespace, sent: int, done: int, line_no: int) -> str:
    """What an interrupted run did, and the input line to start again from."""
    source = "INPUT" if args.file == "-" else args.file
    lines = f"input lines 1-{done}" if done else "no input line"
    note = (
        f" after {sent} record(s) were sent to {args.topic} (acknowledged: {lines}); "
        f"the next input line is {done + 1}: resume with "
        f"tail -n +{done + 1} {source} | sharecon produce {args.topic} ..."
    )
    if line_no > done:
        note += f" (lines {done + 1}-{line_no} were being sent and may have been written too)"
    return note
