"""What every subcommand shares: connection options, exit codes, errors, output helpers.

Rules of this module:

1. Options shared by all subcommands (``--bootstrap``, security, ``--timeout``) are parsed
   once into :class:`ClientOptions`; each falls back to an environment variable, then to
   a default. The SASL password is never printed, logged or put in an error message.
2. Every expected failure becomes a :class:`CliError` (or a :mod:`sharecon.errors`
   exception) and leaves the program as one line on stderr plus a documented exit code
   (:class:`ExitCode`); only bugs show a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass
from enum import IntEnum
from typing import IO, TYPE_CHECKING, Any

from sharecon import errors
from sharecon._net.connect import ConnectionConfig
from sharecon._net.environment import (
    CONNECTION_ENV,
    FILE_SECURITY_SETTINGS,
    KERBEROS_SETTINGS,
    OAUTH_SETTINGS,
)
from sharecon._net.oauth import OidcTokenProvider
from sharecon._net.properties import from_properties
from sharecon._net.sasl import MECHANISMS, SaslConfig
from sharecon._net.sasl_gssapi import DEFAULT_SERVICE_NAME, GSSAPI, GssapiConfig
from sharecon._net.tls import TlsConfig

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "ENV",
    "ClientOptions",
    "CliError",
    "ExitCode",
    "add_client_options",
    "client_options",
    "exit_code_for",
    "parse_key_values",
    "print_table",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 30.0

#: Environment variables read for options not given on the command line (the worker's too).
ENV = CONNECTION_ENV

#: The CLI's --sasl-mechanism choices: SaslConfig's mechanisms and Kerberos (GssapiConfig).
CLI_MECHANISMS = (*MECHANISMS, GSSAPI)
_KERBEROS = KERBEROS_SETTINGS


class ExitCode(IntEnum):
    """Exit statuses scripts can rely on (also listed in ``sharecon --help`` and docs/cli.md)."""

    #: Everything asked for was done.
    OK = 0
    #: Kafka or the broker refused or failed (produce failed, authorization, bad config...).
    KAFKA = 1
    #: Wrong command line: unknown option, bad value, missing argument.
    USAGE = 2
    #: A topic or group named on the command line does not exist.
    NOT_FOUND = 3
    #: Input that cannot be used (a malformed ``produce`` line, an unreadable file).
    DATA = 4
    #: The cluster could not be reached (bootstrap refused, unreachable, timed out, TLS/SASL).
    UNREACHABLE = 5
    #: A bug in sharecon (the traceback is printed).
    INTERNAL = 70
    #: Interrupted (Ctrl-C / SIGINT); work done until then stays done.
    INTERRUPTED = 130
    #: Terminated by SIGTERM, after closing cleanly (as for SIGINT).
    TERMINATED = 143


EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    Kafka/broker error (e.g. authorization, produce failure, records left unreplayed)
  2    usage error (bad option or argument)
  3    not found (the topic or group does not exist)
  4    bad input data (e.g. a malformed produce line; records before it were sent)
  5    cluster unreachable (connection refused, timed out, TLS or SASL handshake failed)
  70   internal error (a bug in sharecon; a traceback is printed)
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM). Both close cleanly: a consumer
       leaves its group and releases records it did not print
"""

ENV_HELP = """\
environment:
  SHARECON_BOOTSTRAP       default for --bootstrap (else 127.0.0.1:9092)
  SHARECON_CLIENT_ID       default for --client-id
  SHARECON_TIMEOUT         default for --timeout
  SHARECON_TLS             1/true: use TLS (as --tls)
  SHARECON_TLS_CA          default for --tls-ca (implies TLS)
  SHARECON_TLS_CERT        default for --tls-cert (implies TLS)
  SHARECON_TLS_KEY         default for --tls-key
  SHARECON_TLS_KEY_PASSWORD  the password of an encrypted --tls-key (no flag: a
                           command line is visible to other users)
  SHARECON_COMMAND_CONFIG  default for --command-config
  SHARECON_SASL_MECHANISM  default for --sasl-mechanism
  SHARECON_SASL_USERNAME   default for --sasl-username
  SHARECON_SASL_PASSWORD   the SASL password (preferred over --sasl-password, which
                           other users can see in the process list)
  SHARECON_OAUTH_TOKEN_URL, SHARECON_OAUTH_CLIENT_ID, SHARECON_OAUTH_SCOPE
                           defaults for --oauth-token-url, --oauth-client-id, --oauth-scope
  SHARECON_OAUTH_CLIENT_SECRET
                           the OAuth client secret for --sasl-mechanism OAUTHBEARER
                           (environment only, never a flag)
  SHARECON_KERBEROS_PRINCIPAL, SHARECON_KERBEROS_KEYTAB, SHARECON_KERBEROS_SERVICE_NAME
                           defaults for --kerberos-principal, --kerberos-keytab,
                           --kerberos-service-name (--sasl-mechanism GSSAPI)
"""


class CliError(Exception):
    """An expected failure: ``message`` goes to stderr, ``code`` is the exit status."""

    def __init__(self, message: str, code: ExitCode = ExitCode.KAFKA) -> None:
        super().__init__(message)
        self.code = code


_NOT_FOUND: tuple[type[errors.KafkaError], ...] = (
    errors.UnknownTopicOrPartitionError,
    errors.UnknownTopicIdError,
    errors.GroupIdNotFoundError,
)

# The connection could not be set up: no route, refused, TLS, or the SASL exchange failed
# (wrong password, a mechanism the listener does not offer, a listener without SASL).
_UNREACHABLE: tuple[type[errors.KafkaError], ...] = (
    errors.KafkaConnectionError,
    errors.SaslAuthenticationFailedError,
    errors.UnsupportedSaslMechanismError,
    errors.IllegalSaslStateError,
    errors.OAuthTokenError,
)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit status for an expected exception."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, errors.ConfigError):
        return ExitCode.USAGE
    if isinstance(exc, _NOT_FOUND):
        return ExitCode.NOT_FOUND
    if isinstance(exc, _UNREACHABLE):
        return ExitCode.UNREACHABLE
    return ExitCode.KAFKA


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Connection options resolved from the command line, the environment and defaults."""

    bootstrap: str
    client_id: str
    timeout: float
    ssl_context: ssl.SSLContext | None
    sasl: SaslConfig | GssapiConfig | None
    #: The whole connection config, when TLS files (--tls-cert) or --command-config gave one.
    config: ConnectionConfig | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments every sharecon client takes (Admin, Producer, ShareConsumer)."""
        if self.config is not None:
            return {"config": self.config, "request_timeout": self.timeout}
        return {
            "client_id": self.client_id,
            "connect_timeout": self.timeout,
            "request_timeout": self.timeout,
            "ssl_context": self.ssl_context,
            "sasl": self.sasl,
        }


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """Add the shared connection options.

    Defaults are suppressed, so an option given before the subcommand is not overwritten
    by the subcommand's own (absent) copy; :func:`client_options` fills in the rest.
    """
    group = parser.add_argument_group("connection options (also from SHARECON_* variables)")
    s = argparse.SUPPRESS
    group.add_argument(
        "-b",
        "--bootstrap",
        default=s,
        metavar="HOST:PORT[,...]",
        help=f"brokers to bootstrap from (env SHARECON_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument(
        "--client-id", default=s, help="client id sent to the brokers (default sharecon-cli)"
    )
    group.add_argument(
        "--timeout",
        type=_positive_float,
        default=s,
        metavar="SECONDS",
        help=f"connect and request timeout (env SHARECON_TIMEOUT; default {DEFAULT_TIMEOUT:g})",
    )
    group.add_argument(
        "--tls", action="store_true", default=s, help="use TLS, verified against the system CAs"
    )
    group.add_argument(
        "--tls-ca",
        default=s,
        metavar="FILE",
        help="PEM file of CA certificates to verify the brokers with (implies --tls)",
    )
    group.add_argument(
        "--tls-cert",
        default=s,
        metavar="FILE",
        help="PEM client certificate for brokers that require one (mutual TLS; implies --tls)",
    )
    group.add_argument(
        "--tls-key",
        default=s,
        metavar="FILE",
        help="PEM private key of --tls-cert (if not in that file); an encrypted key's "
        "password comes from env SHARECON_TLS_KEY_PASSWORD",
    )
    group.add_argument(
        "--command-config",
        default=s,
        metavar="FILE",
        help="Kafka client properties file (bootstrap.servers, security.protocol, sasl.*, "
        "ssl.*, client.id), as Kafka's tools take it; replaces the TLS and SASL options",
    )
    group.add_argument(
        "--sasl-mechanism",
        default=s,
        type=str.upper,
        choices=CLI_MECHANISMS,
        help="SASL mechanism (GSSAPI: Kerberos, with the --kerberos-* options)",
    )
    group.add_argument("--sasl-username", default=s, metavar="USER", help="SASL user name")
    group.add_argument(
        "--sasl-password",
        default=s,
        metavar="PASSWORD",
        help="SASL password (better: env SHARECON_SASL_PASSWORD)",
    )
    group.add_argument(
        "--oauth-token-url",
        default=s,
        metavar="URL",
        help="OAUTHBEARER: the OIDC token endpoint (client credentials; the secret is read "
        "from env SHARECON_OAUTH_CLIENT_SECRET)",
    )
    group.add_argument(
        "--oauth-client-id", default=s, metavar="ID", help="OAUTHBEARER: the OAuth client id"
    )
    group.add_argument(
        "--oauth-scope", default=s, metavar="SCOPE", help="OAUTHBEARER: the scope to ask for"
    )
    group.add_argument(
        "--kerberos-principal",
        default=s,
        metavar="PRINCIPAL",
        help="GSSAPI: the client principal, e.g. app@EXAMPLE.COM (needed with a keytab; "
        "without one, the ticket cache kinit filled is used)",
    )
    group.add_argument(
        "--kerberos-keytab",
        default=s,
        metavar="FILE",
        help="GSSAPI: a keytab holding the principal's key (sharecon gets its own tickets)",
    )
    group.add_argument(
        "--kerberos-service-name",
        default=s,
        metavar="NAME",
        help=f"GSSAPI: the brokers' Kerberos service name (default {DEFAULT_SERVICE_NAME})",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _truthy(text: str) -> bool:
    return text.strip().lower() in {"1", "true", "yes", "on"}


def client_options(args: argparse.Namespace) -> ClientOptions:
    """Resolve the connection options: command line, then environment, then defaults.

    :raises CliError: (usage) a wrong value, naming the option or variable.
    """
    env = os.environ

    def pick(name: str) -> str | None:
        value = getattr(args, name, None)
        if value is not None:
            return str(value)
        return env.get(ENV[name]) or None

    client_id = pick("client_id") or "sharecon-cli"
    timeout_text = pick("timeout")
    timeout = DEFAULT_TIMEOUT
    if timeout_text is not None:
        try:
            timeout = _positive_float(timeout_text)
        except argparse.ArgumentTypeError as exc:
            raise CliError(f"SHARECON_TIMEOUT: {exc}", ExitCode.USAGE) from None
    command_config = pick("command_config")
    if command_config is not None:
        return _from_command_config(args, command_config, pick("bootstrap"), timeout)
    bootstrap = pick("bootstrap") or DEFAULT_BOOTSTRAP
    tls_ca = pick("tls_ca")
    tls_cert = pick("tls_cert")
    tls_key = pick("tls_key")
    if tls_key and not tls_cert:
        raise CliError("--tls-key needs --tls-cert (the certificate it belongs to)", ExitCode.USAGE)
    tls = bool(getattr(args, "tls", False)) or _truthy(env.get(ENV["tls"], "")) or bool(tls_ca)
    files: TlsConfig | None = None
    if tls or tls_cert:
        # From files, re-read when they change: a renewed certificate is used by the next
        # connection of a long-running consume.
        try:
            files = TlsConfig(
                ca_file=tls_ca,
                cert_file=tls_cert,
                key_file=tls_key,
                key_password=env.get(ENV["tls_key_password"]) or None,
            )
        except errors.ConfigError as exc:
            flag = "--tls-ca" if str(exc).startswith("ca_file") else "--tls-cert/--tls-key"
            raise CliError(f"{flag}: {exc}", ExitCode.USAGE) from None
    mechanism = pick("sasl_mechanism")
    username = pick("sasl_username")
    password = pick("sasl_password")
    sasl: SaslConfig | GssapiConfig | None = None
    kerberos = [name for name in _KERBEROS if pick(name) is not None]
    if kerberos and (mechanism is None or mechanism.upper() != GSSAPI):
        raise CliError(
            f"{_flag_or_env(args, kerberos[0])} needs --sasl-mechanism GSSAPI", ExitCode.USAGE
        )
    oauth = [name for name in OAUTH_SETTINGS if pick(name) is not None]
    if oauth and (mechanism is None or mechanism.upper() != "OAUTHBEARER"):
        raise CliError(
            f"{_flag_or_env(args, oauth[0])} needs --sasl-mechanism OAUTHBEARER", ExitCode.USAGE
        )
    if mechanism is not None and mechanism.upper() == "OAUTHBEARER":
        sasl = _oauth_sasl(pick, username, password)
    elif mechanism is not None and mechanism.upper() == GSSAPI:
        sasl = _gssapi_sasl(pick, username, password)
    elif mechanism or username or password:
        if not (mechanism and username and password is not None):
            missing = [
                opt
                for opt, val in (
                    ("--sasl-mechanism", mechanism),
                    ("--sasl-username", username),
                    ("--sasl-password", password),
                )
                if not val
            ]
            raise CliError(
                f"SASL needs a mechanism, a user name and a password; missing {', '.join(missing)}",
                ExitCode.USAGE,
            )
        try:
            sasl = SaslConfig(mechanism.upper(), username, password)
        except errors.ConfigError as exc:
            raise CliError(str(exc), ExitCode.USAGE) from None
    config = None
    if files is not None:
        config = ConnectionConfig(
            client_id=client_id,
            connect_timeout=timeout,
            # As the separate options give the producer: its wait covers the broker's own.
            request_timeout=timeout + 5.0,
            tls=files,
            sasl=sasl,
        )
    return ClientOptions(bootstrap, client_id, timeout, None, sasl, config)


_SECURITY_FLAGS = ("tls", *FILE_SECURITY_SETTINGS)


def _flag_or_env(args: argparse.Namespace, name: str) -> str:
    """How the user gave setting ``name``: its flag, or else its environment variable."""
    if getattr(args, name, None) is not None:
        return "--" + name.replace("_", "-")
    return ENV[name]


def _from_command_config(
    args: argparse.Namespace, path: str, bootstrap: str | None, timeout: float
) -> ClientOptions:
    """ClientOptions from a Kafka properties file: ``--bootstrap``, ``--client-id`` and
    ``--timeout`` still apply; TLS and SASL come from the file alone."""
    given = [
        "--" + name.replace("_", "-")
        for name in (*_SECURITY_FLAGS, "sasl_password")
        if getattr(args, name, None) not in (None, False)
    ]
    if given:
        raise CliError(
            f"--command-config gives the TLS and SASL settings; drop {', '.join(given)}",
            ExitCode.USAGE,
        )
    try:
        props = from_properties(path, bootstrap=bootstrap)
    except errors.ConfigError as exc:
        raise CliError(f"--command-config {exc}", ExitCode.USAGE) from None
    changes: dict[str, Any] = {"connect_timeout": timeout, "request_timeout": timeout + 5.0}
    client_id = getattr(args, "client_id", None)
    if client_id:
        changes["client_id"] = client_id
    elif props.config.client_id == "sharecon":  # ConnectionConfig's default
        changes["client_id"] = "sharecon-cli"  # the file named none
    config = dataclasses.replace(props.config, **changes)
    return ClientOptions(
        props.bootstrap, config.client_id, timeout, config.ssl_context, config.sasl, config
    )


def _oauth_sasl(
    pick: Callable[[str], str | None], username: str | None, password: str | None
) -> SaslConfig:
    if username or password:
        raise CliError(
            "--sasl-mechanism OAUTHBEARER takes --oauth-token-url and --oauth-client-id, "
            "not a SASL user name or password",
            ExitCode.USAGE,
        )
    url, client_id = pick("oauth_token_url"), pick("oauth_client_id")
    secret = os.environ.get(ENV["oauth_client_secret"])
    missing = [
        name
        for name, value in (
            ("--oauth-token-url", url),
            ("--oauth-client-id", client_id),
            (f"env {ENV['oauth_client_secret']}", secret),
        )
        if not value
    ]
    if missing or url is None or client_id is None or secret is None:
        raise CliError(f"OAUTHBEARER needs {', '.join(missing)}", ExitCode.USAGE)
    try:
        provider = OidcTokenProvider(url, client_id, secret, scope=pick("oauth_scope"))
        return SaslConfig("OAUTHBEARER", token_provider=provider)
    except errors.ConfigError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None


def _gssapi_sasl(
    pick: Callable[[str], str | None], username: str | None, password: str | None
) -> GssapiConfig:
    if username or password:
        raise CliError(
            "--sasl-mechanism GSSAPI takes --kerberos-principal and --kerberos-keytab (or "
            "the ticket cache kinit filled), not a SASL user name or password",
            ExitCode.USAGE,
        )
    keytab = pick("kerberos_keytab")
    principal = pick("kerberos_principal")
    if keytab and not principal:
        raise CliError("--kerberos-keytab needs --kerberos-principal", ExitCode.USAGE)
    try:
        return GssapiConfig(
            principal=principal,
            keytab=keytab,
            service_name=pick("kerberos_service_name") or DEFAULT_SERVICE_NAME,
        )
    except errors.ConfigError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None


def parse_key_values(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict.

    :raises CliError: (usage) an item without ``=``, naming it.
    """
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{what} {item!r}: expected KEY=VALUE", ExitCode.USAGE)
        out[key] = value
    return out


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], out: IO[str] | None = None
) -> None:
    """Left-aligned columns separated by two spaces (plain text: easy to read and to grep)."""
    stream = out or sys.stdout
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        stream.write(line + "\n")
