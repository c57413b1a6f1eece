"""The ``sharecon`` command line: consume, produce, groups, topics, dlq, bench, worker,
exporter.

Run ``sharecon --help`` (or ``python -m sharecon.cli --help``); every subcommand has its
own ``--help``. See docs/cli.md for examples.

Rules of this package:

1. One module per subcommand, each with ``register(subparsers, parents)``; handlers are
   ``async def run(args, options) -> int`` run with :func:`anyio.run`.
2. Data goes to stdout (records, tables, JSON lines); messages, summaries and progress
   bars go to stderr, so pipes stay clean.
3. Expected failures end as one line on stderr (``sharecon <command>: error: ...``) and an
   exit code from :class:`~sharecon.cli._common.ExitCode`; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import traceback
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon._version import __version__
from sharecon.cli import bench, consume, dlq, exporter, groups, produce, topics, worker
from sharecon.cli._common import (
    ENV_HELP,
    EXIT_CODES_HELP,
    CliError,
    ExitCode,
    add_client_options,
    client_options,
    exit_code_for,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sharecon.cli._common import ClientOptions

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
Command line for Apache Kafka share groups (KIP-932), built on the sharecon client.

Connection options (--bootstrap, --tls..., --sasl-..., --timeout) are accepted before or
after the subcommand and default to the SHARECON_* environment variables below.
"""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for documentation and tests)."""
    common = argparse.ArgumentParser(add_help=False)
    add_client_options(common)
    output = common.add_argument_group("output options")
    output.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no progress bars or summaries on stderr (errors are still printed)",
    )
    output.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log what the client does on stderr (-vv: debug)",
    )
    parser = argparse.ArgumentParser(
        prog="sharecon",
        description=_DESCRIPTION,
        epilog=EXIT_CODES_HELP + "\n" + ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"sharecon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (consume, produce, groups, topics, dlq, bench, worker, exporter):
        module.register(sub, [common])
    _document_exit_codes(parser)
    return parser


def _document_exit_codes(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's --help ends with the exit codes (scripts read them there)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.epilog = (child.epilog + "\n\n" if child.epilog else "") + EXIT_CODES_HELP
                child.formatter_class = argparse.RawDescriptionHelpFormatter
                _document_exit_codes(child)


def _command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` were parsed for, e.g. ``groups reset``."""
    current = parser
    for dest in ("command", "action"):
        name = getattr(args, dest, None)
        subparsers = next(
            (a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        if name is None or subparsers is None or name not in subparsers.choices:
            break
        current = subparsers.choices[name]
    return current


# Commands that print nothing on stdout (messages go to stderr): they run with it closed.
_NO_STDOUT = frozenset({"produce", "worker", "exporter"})
# Arguments that name files (--file, --tls-ca, --config, a worker's handler file...).
_PATH_DEST = re.compile(r"file|tls|config|path|handler|dir")


def _refuse_undecodable(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error (exit 2) for an argument that is not UTF-8 text.

    Python hands such bytes over as lone surrogates (``surrogateescape``); a topic, group or
    header name made of them could only fail later, far from the mistake, as a Kafka error.
    """
    for dest, value in vars(args).items():
        if _PATH_DEST.search(dest):
            continue  # a file name need not be UTF-8: the operating system takes bytes
        for item in value if isinstance(value, list | tuple) else (value,):
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raw = item.encode("utf-8", "surrogateescape")
                # A secret is not shown, not even in part.
                shown = "" if "password" in dest else f" ({raw!r})"
                parser.error(f"argument {dest.replace('_', '-')}{shown} is not valid UTF-8 text")


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("sharecon")
    root.addHandler(handler)
    root.setLevel(level)
    if verbosity == 0:
        # Failures reach the user as the command's own one-line error; the library's
        # warnings about the same failure would only repeat it.
        root.setLevel(logging.ERROR)


def _leaf(exc: BaseException) -> BaseException:
    """The exception that matters inside (possibly nested) exception groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or not inner:
            return exc
        # Prefer an interrupt, then one of ours, then whatever came first.
        chosen: BaseException | None = next(
            (e for e in inner if isinstance(e, KeyboardInterrupt)), None
        )
        if chosen is None:
            chosen = next((e for e in inner if isinstance(e, CliError | errors.KafkaError)), None)
        exc = chosen if chosen is not None else inner[0]


class _Terminated(Exception):
    """SIGTERM arrived; the command was cancelled and cleaned up (groups left, records released)."""


async def _supervise(
    func: Callable[[argparse.Namespace, ClientOptions], Awaitable[int]],
    args: argparse.Namespace,
    options: ClientOptions,
) -> int:
    """Run the command; SIGTERM cancels it as Ctrl-C does, so clients close cleanly (a
    consumer leaves its group and releases what it holds) instead of dying with records
    locked.

    Like asyncio's own SIGINT handling, this cancels the main task itself rather than a
    cancel scope around it: a scope would also cancel the loops inside the clients'
    task groups (the consumer's heartbeat), which their close still needs.
    """
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError):  # no signal support here (e.g. Windows)
        pass
    try:
        return await func(args, options)
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see ``sharecon --help``)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # parse_args would report these with the top-level usage; the subcommand's usage
        # (its own options) is the one that helps.
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    _refuse_undecodable(_command_parser(parser, args), args)
    _configure_logging(getattr(args, "verbose", 0))
    args.quiet = getattr(args, "quiet", False)
    prefix = " ".join(["sharecon", args.command, *([args.action] if "action" in args else [])])
    if sys.stdout is None and args.command not in _NO_STDOUT:
        # Started with stdout closed (`>&-`): what the command prints (records, tables)
        # could go nowhere. Refuse before connecting, so that nothing is done, and no
        # record taken from a group, for output that cannot be written.
        sys.stderr.write(
            f"{prefix}: error: stdout is closed, so there is nowhere to write the output; "
            "redirect it instead (> FILE, or > /dev/null to discard it)\n"
        )
        return ExitCode.USAGE
    try:
        try:
            options = client_options(args)
            code = anyio.run(_supervise, args.func, args, options)
            if sys.stdout is not None:
                sys.stdout.flush()
            return code
        except BaseException as exc:
            leaf = _leaf(exc)
            if leaf is exc or not isinstance(
                leaf,
                CliError | errors.KafkaError | KeyboardInterrupt | BrokenPipeError | _Terminated,
            ):
                raise
            raise leaf from None
    except KeyboardInterrupt:
        # A command may say how far it got (produce: the input line to resume from).
        sys.stderr.write(f"{prefix}: interrupted{getattr(args, 'interrupt_note', '')}\n")
        return ExitCode.INTERRUPTED
    except _Terminated:
        sys.stderr.write(f"{prefix}: terminated{getattr(args, 'interrupt_note', '')}\n")
        return ExitCode.TERMINATED
    except BrokenPipeError:
        # The reader of our stdout went away (e.g. `| head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except (CliError, errors.KafkaError) as exc:
        sys.stderr.write(f"{prefix}: error: {_one_line(str(exc))}\n")
        return exit_code_for(exc)
    except Exception:
        traceback.print_exc()
        sys.stderr.write(f"{prefix}: internal error (a bug in sharecon; please report it)\n")
        return ExitCode.INTERNAL


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"
