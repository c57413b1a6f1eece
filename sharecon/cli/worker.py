"""``sharecon worker``: run a record handler in supervised processes of one share group."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from sharecon.cli._common import non_negative_float, positive_int
from sharecon.worker import load_toml, serve
from sharecon.worker._config import config_from_sources

if TYPE_CHECKING:
    from sharecon.cli._common import ClientOptions

__all__ = ["register"]

_DESCRIPTION = """\
Start --processes worker processes, each a member of the share group --group reading
--topic, and call HANDLER (package.module:function or path/to/file.py:function; async, or
sync run in a thread) on each record, --concurrency at a time per process. A record is
accepted when the handler returns and released (delivered again) when it raises; with
--dlq-after N, a record whose handler raises on its Nth delivery goes to the dead-letter
topic instead.

A process that dies is restarted (with exponential backoff); with --handler-timeout, a
process whose handler holds a record longer, or stops reporting, is killed and restarted.
The records a lost process held come back to the group.

Ctrl-C or SIGTERM drains: no new records are fetched, the records in flight and those
already fetched get --grace seconds to finish (the rest are released), every consumer leaves the group, exit 0.
A second Ctrl-C or SIGTERM kills the processes at once (exit 130 or 143).

With --autoscale MIN:MAX the supervisor adds a process while the handlers are busy and
the group's backlog (share-group lag) is not falling, and drains one while they are idle,
one change per --scale-cooldown seconds; each change is one line on stderr.

With --health-port PORT the supervisor serves GET /healthz (liveness: it runs and no
worker process went silent) and GET /readyz (readiness: a process's consumer is healthy;
503 while draining) on --health-host (default 127.0.0.1).

Every drain finishes the records a process had fetched instead of releasing them (a
release would spend one of their delivery attempts).

A progress line every --interval seconds on stderr: records/s per process and in total,
records in flight, handled, failures, dead-lettered, redelivered (delivery count > 1)
and restarts.

Settings come from flags, else SHARECON_* variables (SHARECON_GROUP, SHARECON_TOPICS
(comma-separated), SHARECON_PROCESSES, SHARECON_CONCURRENCY, SHARECON_DLQ_AFTER,
SHARECON_DLQ_TOPIC, SHARECON_HANDLER_TIMEOUT, SHARECON_GRACE, SHARECON_INTERVAL,
SHARECON_MAX_RECORDS, SHARECON_AUTOSCALE, SHARECON_SCALE_BACKLOG,
SHARECON_SCALE_UP_AFTER, SHARECON_SCALE_DOWN_AFTER, SHARECON_SCALE_COOLDOWN,
SHARECON_HEALTH_PORT, SHARECON_HEALTH_HOST, SHARECON_HANDLER, and the connection ones below), else the --config TOML file (keys
named like the flags: group = "billing", topics = ["invoices"], processes = 4; Python
3.11+).
"""

_EPILOG = """\
examples:
  sharecon worker myapp.handlers:handle --group billing --topic invoices --processes 4
  sharecon worker handlers.py:handle -g billing -t invoices --concurrency 16 --dlq-after 3
  sharecon worker --config worker.toml
worker exit codes: 0 drained; 1 a process failed to drain; 2 bad settings or handler;
  3 a topic does not exist; 5 cluster unreachable at start; 130/143 killed by a second
  Ctrl-C/SIGTERM
"""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: list[argparse.ArgumentParser]
) -> None:
    """Add ``worker`` to the command tree."""
    p = sub.add_parser(
        "worker",
        parents=parents,
        help="run a record handler in supervised processes of a share group",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Defaults are suppressed: an absent flag lets the environment or the TOML file decide.
    s = argparse.SUPPRESS
    p.add_argument(
        "handler",
        nargs="?",
        default=s,
        metavar="HANDLER",
        help="package.module:function or path/to/file.py:function",
    )
    p.add_argument("-g", "--group", default=s, help="the share group")
    p.add_argument(
        "-t",
        "--topic",
        dest="topics",
        action="append",
        default=s,
        metavar="TOPIC",
        help="topic to subscribe to (repeat for more)",
    )
    p.add_argument(
        "-p", "--processes", type=positive_int, default=s, metavar="N", help="processes (default 1)"
    )
    p.add_argument(
        "-c",
        "--concurrency",
        type=positive_int,
        default=s,
        metavar="C",
        help="records handled at once per process (default 1)",
    )
    p.add_argument(
        "--dlq-after",
        type=positive_int,
        default=s,
        metavar="N",
        help="a record whose handler raises on its Nth delivery goes to the dead-letter topic",
    )
    p.add_argument(
        "--dlq-topic", default=s, metavar="TOPIC", help="dead-letter topic (default dlq.GROUP)"
    )
    p.add_argument(
        "--handler-timeout",
        type=_positive_seconds,
        default=s,
        metavar="SECONDS",
        help="kill and replace a process whose handler holds a record this long (default: none)",
    )
    p.add_argument(
        "--grace",
        type=non_negative_float,
        default=s,
        metavar="SECONDS",
        help="when draining, how long records in flight may take (default 30)",
    )
    p.add_argument(
        "--interval",
        type=_positive_seconds,
        default=s,
        metavar="SECONDS",
        help="seconds between progress lines (default 10)",
    )
    p.add_argument(
        "--max-records",
        type=positive_int,
        default=s,
        metavar="N",
        help="the most records a process holds, where records are acquired by record "
        "limit (default 500)",
    )
    p.add_argument(
        "--acquire-mode",
        choices=("auto", "record_limit", "batch"),
        default=s,
        help="record_limit (Kafka 4.2+): a process holds only what it handles within the "
        "lock, so work spreads; batch: whole producer batches; auto (default): record_limit "
        "where the broker has it",
    )
    p.add_argument(
        "--autoscale",
        default=s,
        metavar="MIN:MAX",
        help="run MIN to MAX processes, as the backlog and the handlers' busyness ask",
    )
    p.add_argument(
        "--scale-backlog",
        type=int,
        default=s,
        metavar="N",
        help="with --autoscale: backlog above which to add a process (default --concurrency)",
    )
    p.add_argument(
        "--scale-up-after",
        type=non_negative_float,
        default=s,
        metavar="SECONDS",
        help="with --autoscale: how long the up condition must hold (default 5)",
    )
    p.add_argument(
        "--scale-down-after",
        type=non_negative_float,
        default=s,
        metavar="SECONDS",
        help="with --autoscale: how long the down condition must hold (default 30)",
    )
    p.add_argument(
        "--scale-cooldown",
        type=non_negative_float,
        default=s,
        metavar="SECONDS",
        help="with --autoscale: no change for this long after one (default 30)",
    )
    p.add_argument(
        "--health-port",
        type=_port,
        default=s,
        metavar="PORT",
        help="serve GET /healthz (liveness) and /readyz (readiness) on this port (default: off)",
    )
    p.add_argument(
        "--health-host",
        default=s,
        metavar="HOST",
        help="the address the health endpoints listen on (default 127.0.0.1)",
    )
    p.add_argument("--config", default=s, metavar="FILE", help="TOML file of settings")
    p.set_defaults(func=run)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


_FLAGS = (
    "handler",
    "group",
    "topics",
    "processes",
    "concurrency",
    "dlq_after",
    "dlq_topic",
    "handler_timeout",
    "grace",
    "interval",
    "max_records",
    "acquire_mode",
    "autoscale",
    "scale_backlog",
    "scale_up_after",
    "scale_down_after",
    "scale_cooldown",
    "health_port",
    "health_host",
    "bootstrap",
    "client_id",
    "timeout",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "command_config",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "oauth_token_url",
    "oauth_client_id",
    "oauth_scope",
    "kerberos_principal",
    "kerberos_keytab",
    "kerberos_service_name",
)


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line (absent ones are left out)."""
    flags: dict[str, Any] = {name: getattr(args, name) for name in _FLAGS if name in args}
    if getattr(args, "tls", False):
        flags["tls"] = True
    if "topics" in flags:
        flags["topics"] = tuple(flags["topics"])
    return flags


async def run(args: argparse.Namespace, options: ClientOptions) -> int:
    """Run the worker until drained; see the subcommand's help."""
    del options  # resolved again below: the TOML file may hold connection settings too
    toml = load_toml(args.config) if "config" in args else None
    verbosity = getattr(args, "verbose", 0)
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    config = config_from_sources(flags_of(args), toml=toml, log_level=level)
    if args.quiet and config.interval is not None:
        config = config.__class__.from_dict({**config.to_dict(), "interval": None})
    return await serve(config, stream=None if args.quiet else sys.stderr)
