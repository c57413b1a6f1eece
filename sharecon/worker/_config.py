"""The worker's settings: one frozen :class:`WorkerConfig`, built from keyword arguments,
or from command-line flags, ``SHARECON_*`` environment variables and a TOML file.

Rules of this module:

1. Every setting is checked once, here, and a wrong one raises
   :class:`~sharecon.errors.ConfigError` naming the setting and where it came from.
2. Precedence: command-line flag, then environment variable, then TOML file, then default.
3. The config travels to each worker process as JSON on its stdin (never on the command
   line, where other users could read the SASL password).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharecon import errors
from sharecon._net.environment import (
    CONNECTION_ENV,
    FILE_SECURITY_SETTINGS,
    KERBEROS_SETTINGS,
    OAUTH_SETTINGS,
)
from sharecon._net.oauth import OidcTokenProvider
from sharecon._net.sasl import SaslConfig
from sharecon.config import ConnectionConfig, GssapiConfig, TlsConfig, from_properties
from sharecon.worker._autoscale import AutoscalePolicy, parse_range

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "ENV",
    "WorkerConfig",
    "config_from_sources",
    "handler_spec",
    "load_handler",
    "load_toml",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

#: Environment variables for settings not given as flags (connection ones as the CLI's).
ENV = {
    "handler": "SHARECON_HANDLER",
    "group": "SHARECON_GROUP",
    "topics": "SHARECON_TOPICS",
    "processes": "SHARECON_PROCESSES",
    "concurrency": "SHARECON_CONCURRENCY",
    "dlq_after": "SHARECON_DLQ_AFTER",
    "dlq_topic": "SHARECON_DLQ_TOPIC",
    "handler_timeout": "SHARECON_HANDLER_TIMEOUT",
    "grace": "SHARECON_GRACE",
    "interval": "SHARECON_INTERVAL",
    "max_records": "SHARECON_MAX_RECORDS",
    "acquire_mode": "SHARECON_ACQUIRE_MODE",
    "autoscale": "SHARECON_AUTOSCALE",
    "scale_backlog": "SHARECON_SCALE_BACKLOG",
    "scale_up_after": "SHARECON_SCALE_UP_AFTER",
    "scale_down_after": "SHARECON_SCALE_DOWN_AFTER",
    "scale_cooldown": "SHARECON_SCALE_COOLDOWN",
    "health_port": "SHARECON_HEALTH_PORT",
    "health_host": "SHARECON_HEALTH_HOST",
    **CONNECTION_ENV,
}

#: ``WorkerConfig.acquire_mode``'s values (``ShareConsumer(acquire_mode=...)``).
ACQUIRE_MODES = ("auto", "record_limit", "batch")

_KERBEROS = KERBEROS_SETTINGS
_GSSAPI = GssapiConfig.mechanism


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Everything a worker needs; see docs/worker.md for each setting.

    :param handler: ``"package.module:function"`` or ``"path/to/file.py:function"``; the
        function takes a :class:`~sharecon.record.Record` (async, or sync: run in a thread).
    :param group: the share group.
    :param topics: topics to subscribe to.
    :param processes: worker processes (each one ShareConsumer, one group member).
    :param concurrency: records handled at once in each process.
    :param dlq_after: route a record to the dead-letter topic when its handler fails on
        this delivery (``DeadLetterPolicy(max_deliveries=dlq_after)``); ``None``: never.
    :param dlq_topic: the dead-letter topic (default ``dlq.<group>``).
    :param handler_timeout: seconds one record may be in a handler (or a process may stop
        reporting) before the process is killed and replaced; ``None``: no limit.
    :param grace: seconds a draining process waits for the records in flight.
    :param interval: seconds between progress lines; ``None``: no progress lines.
    :param max_records: the most records a process holds (``ShareConsumer(max_records=...)``);
        a bound only where records are acquired by record limit (see ``acquire_mode``).
    :param acquire_mode: ``"auto"`` (default): ``"record_limit"`` where the broker has it
        (Kafka 4.2+), else ``"batch"``. Under ``"record_limit"`` a process holds at most
        ``max_records`` records and no more than it handles within half the acquisition lock
        at its measured rate, so a backlog spreads over the processes; under ``"batch"``
        (Kafka 4.1) the broker hands out whole producer batches, whatever ``max_records``
        says (``ShareConsumer(acquire_mode=...)``).
    :param autoscale: ``"MIN:MAX"``: the supervisor runs between MIN and MAX processes,
        adding one while the handlers are busy and the backlog is not falling, removing
        one (with a drain) while they are idle (:mod:`sharecon.worker._autoscale`);
        ``processes`` is then the count to start with. ``None``: always ``processes``.
    :param scale_backlog: backlog (records of share-group lag) above which a process is
        added and at or below which one may go (default: ``concurrency``).
    :param scale_up_after: seconds the up condition must hold.
    :param scale_down_after: seconds the down condition must hold.
    :param scale_cooldown: seconds after a change before the next one.
    :param health_port: serve ``GET /healthz`` (liveness) and ``GET /readyz`` (readiness)
        on this TCP port (``0``: one the system picks, said on the stream); ``None``: off.
    :param health_host: the address the health endpoints listen on.
    :param bootstrap: ``host:port[,...]`` of the brokers.
    :param client_id: sent to the brokers.
    :param timeout: connect and request timeout.
    :param tls: use TLS (verified against the system CAs, or ``tls_ca``).
    :param tls_ca: PEM file of CA certificates (implies ``tls``).
    :param tls_cert: PEM client certificate for mutual TLS (implies ``tls``); re-read by
        each new connection when the file changed.
    :param tls_key: PEM private key of ``tls_cert``, unless it is in that file.
    :param tls_key_password: the password of an encrypted ``tls_key`` (never in ``repr``;
        from ``SHARECON_TLS_KEY_PASSWORD``, not a flag).
    :param command_config: a Kafka client properties file (``--command-config``); it
        gives the TLS and SASL settings, and the bootstrap servers unless ``bootstrap``
        is given too.
    :param sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``
        or ``GSSAPI`` (Kerberos).
    :param sasl_username: the SASL user.
    :param sasl_password: the SASL password (never shown in ``repr``).
    :param oauth_token_url: OAUTHBEARER: the OIDC token endpoint (client credentials).
    :param oauth_client_id: OAUTHBEARER: the OAuth client id.
    :param oauth_scope: OAUTHBEARER: the scope to ask for, if any.
    :param oauth_client_secret: OAUTHBEARER: the client secret (never shown in ``repr``;
        from ``SHARECON_OAUTH_CLIENT_SECRET`` or the TOML file, never a flag).
    :param kerberos_principal: GSSAPI: the client principal (needed with a keytab; without
        one, the ticket cache ``kinit`` filled is used).
    :param kerberos_keytab: GSSAPI: a keytab holding the principal's key.
    :param kerberos_service_name: GSSAPI: the brokers' Kerberos service name (``kafka``).
    :param log_level: logging level of the ``sharecon`` logger in the worker processes.
    :raises ConfigError: for a wrong setting, naming it.
    """

    handler: str
    group: str
    topics: tuple[str, ...]
    processes: int = 1
    concurrency: int = 1
    dlq_after: int | None = None
    dlq_topic: str | None = None
    handler_timeout: float | None = None
    grace: float = 30.0
    interval: float | None = 10.0
    max_records: int = 500
    acquire_mode: str = "auto"
    autoscale: str | None = None
    scale_backlog: int | None = None
    scale_up_after: float = 5.0
    scale_down_after: float = 30.0
    scale_cooldown: float = 30.0
    health_port: int | None = None
    health_host: str = "127.0.0.1"
    bootstrap: str = DEFAULT_BOOTSTRAP
    client_id: str = "sharecon-worker"
    timeout: float = 30.0
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)
    command_config: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    oauth_token_url: str | None = None
    oauth_client_id: str | None = None
    oauth_scope: str | None = None
    oauth_client_secret: str | None = field(default=None, repr=False)
    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None
    kerberos_service_name: str | None = None
    log_level: int = 40

    def __post_init__(self) -> None:
        # A list given for topics still makes a hashable, immutable config.
        object.__setattr__(self, "topics", tuple(self.topics))
        if not isinstance(self.handler, str) or ":" not in self.handler:
            raise errors.ConfigError(
                f"handler must be 'package.module:function' or 'file.py:function', not {self.handler!r}"
            )
        if not self.group:
            raise errors.ConfigError("a group is needed (--group or SHARECON_GROUP)")
        if not self.topics or not all(self.topics):
            raise errors.ConfigError("at least one topic is needed (--topic or SHARECON_TOPICS)")
        for name in ("processes", "concurrency", "max_records"):
            _at_least(name, getattr(self, name), 1)
        if self.dlq_after is not None:
            _at_least("dlq_after", self.dlq_after, 1)
        if self.acquire_mode not in ACQUIRE_MODES:
            raise errors.ConfigError(
                f"acquire_mode must be one of {', '.join(ACQUIRE_MODES)}, not {self.acquire_mode!r}"
            )
        if self.scale_backlog is not None:
            _at_least("scale_backlog", self.scale_backlog, 0)
        if self.health_port is not None:
            _at_least("health_port", self.health_port, 0)
            if self.health_port > 65535:
                raise errors.ConfigError(
                    f"health_port must be at most 65535, not {self.health_port}"
                )
        if not self.health_host:
            raise errors.ConfigError("health_host must not be empty")
        if self.autoscale is not None:
            autoscale_policy(self)  # raises ConfigError for a bad range or windows
        for name in ("handler_timeout", "interval", "timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise errors.ConfigError(f"{name} must be positive, not {value!r}")
        if not self.grace >= 0:
            raise errors.ConfigError(f"grace must not be negative, not {self.grace!r}")
        if self.dlq_topic is not None and self.dlq_after is None:
            raise errors.ConfigError("dlq_topic needs dlq_after (the delivery that routes there)")
        if self.tls_key is not None and self.tls_cert is None:
            raise errors.ConfigError("tls_key needs tls_cert (the certificate it belongs to)")
        if self.command_config is not None:
            mixed = [name for name in FILE_SECURITY_SETTINGS if getattr(self, name) is not None] + (
                ["tls"] if self.tls else []
            )
            if mixed:
                raise errors.ConfigError(
                    f"command_config gives the TLS and SASL settings; drop {', '.join(mixed)}"
                )
        mechanism = None if self.sasl_mechanism is None else self.sasl_mechanism.upper()
        kerberos = [name for name in _KERBEROS if getattr(self, name) is not None]
        if kerberos and mechanism != _GSSAPI:
            raise errors.ConfigError(f"{kerberos[0]} needs sasl_mechanism GSSAPI")
        oauth = [name for name in OAUTH_SETTINGS if getattr(self, name) is not None]
        if oauth and mechanism != "OAUTHBEARER":
            raise errors.ConfigError(f"{oauth[0]} needs sasl_mechanism OAUTHBEARER")
        if mechanism == "OAUTHBEARER":
            self._check_oauth()
            return
        if mechanism == _GSSAPI:
            if self.sasl_username is not None or self.sasl_password is not None:
                raise errors.ConfigError(
                    "GSSAPI takes kerberos_principal and kerberos_keytab (or the ticket "
                    "cache kinit filled), not sasl_username or sasl_password"
                )
            self.sasl()  # checks the keytab, the principal and the service name
            return
        given = [self.sasl_mechanism, self.sasl_username, self.sasl_password]
        if any(v is not None for v in given) and not all(v is not None for v in given):
            raise errors.ConfigError(
                "SASL needs a mechanism, a user name and a password (sasl_mechanism, "
                "sasl_username, sasl_password)"
            )
        if self.sasl_mechanism is not None:
            self.sasl()  # checks the mechanism

    def _check_oauth(self) -> None:
        if self.sasl_username is not None or self.sasl_password is not None:
            raise errors.ConfigError(
                "OAUTHBEARER takes oauth_token_url, oauth_client_id and oauth_client_secret, "
                "not sasl_username or sasl_password"
            )
        missing = [
            name
            for name in ("oauth_token_url", "oauth_client_id", "oauth_client_secret")
            if not getattr(self, name)
        ]
        if missing:
            raise errors.ConfigError(f"OAUTHBEARER needs {', '.join(missing)}")
        self.sasl()  # checks the URL

    def sasl(self) -> SaslConfig | GssapiConfig | None:
        """The SASL credentials, if any (OAUTHBEARER: with a new OIDC token provider;
        GSSAPI: a Kerberos login)."""
        if self.sasl_mechanism is not None and self.sasl_mechanism.upper() == _GSSAPI:
            service = (
                {"service_name": self.kerberos_service_name} if self.kerberos_service_name else {}
            )
            return GssapiConfig(
                principal=self.kerberos_principal, keytab=self.kerberos_keytab, **service
            )
        if (
            self.sasl_mechanism is not None
            and self.sasl_mechanism.upper() == "OAUTHBEARER"
            and self.oauth_token_url
            and self.oauth_client_id
            and self.oauth_client_secret
        ):
            provider = OidcTokenProvider(
                self.oauth_token_url,
                self.oauth_client_id,
                self.oauth_client_secret,
                scope=self.oauth_scope,
            )
            return SaslConfig("OAUTHBEARER", token_provider=provider)
        if self.sasl_mechanism is None or self.sasl_username is None:
            return None
        return SaslConfig(self.sasl_mechanism.upper(), self.sasl_username, self.sasl_password or "")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The verifying TLS context a new connection would use now, when TLS is on (built
        by the :class:`~sharecon.config.TlsConfig` or properties file that
        :meth:`connection_config` gives).

        :raises ConfigError: a TLS file cannot be loaded (naming the file).
        """
        config = self.connection_config()
        return None if config is None else config.current_ssl_context()

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for sharecon's clients (Admin, ShareConsumer).

        :raises ConfigError: a TLS file or the properties file cannot be used.
        """
        config = self.connection_config()
        if config is not None:
            return {"config": config, "request_timeout": self.timeout}
        # No TLS (connection_config() gives a config whenever TLS is on).
        return {
            "client_id": self.client_id,
            "connect_timeout": self.timeout,
            "request_timeout": self.timeout,
            "sasl": self.sasl(),
        }

    def bootstrap_servers(self) -> str:
        """``bootstrap``, or the properties file's ``bootstrap.servers`` when only it names them."""
        if self.command_config is not None and self.bootstrap == DEFAULT_BOOTSTRAP:
            return from_properties(self.command_config).bootstrap
        return self.bootstrap

    def connection_config(self) -> ConnectionConfig | None:
        """The whole connection config when TLS files or a properties file give one."""
        if self.command_config is not None:
            props = from_properties(self.command_config, bootstrap=self.bootstrap)
            client_id = self.client_id
            if client_id == "sharecon-worker" and props.config.client_id != "sharecon":
                client_id = props.config.client_id  # the file's client.id
            return dataclasses.replace(
                props.config,
                client_id=client_id,
                connect_timeout=self.timeout,
                request_timeout=self.timeout,
            )
        if self.tls_cert is None and not (self.tls or self.tls_ca):
            return None
        tls = TlsConfig(
            ca_file=self.tls_ca,
            cert_file=self.tls_cert,
            key_file=self.tls_key,
            key_password=self.tls_key_password,
        )
        return ConnectionConfig(
            client_id=self.client_id,
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            tls=tls,
            sasl=self.sasl(),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the password and client secret included: they go to the worker
        processes' stdin)."""
        out = dataclasses.asdict(self)
        out["topics"] = list(self.topics)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerConfig:
        """The inverse of :meth:`to_dict`."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise errors.ConfigError(f"unknown worker settings: {', '.join(unknown)}")
        values = dict(data)
        if "topics" in values:
            values["topics"] = tuple(values["topics"])
        return cls(**values)


def autoscale_policy(config: WorkerConfig) -> AutoscalePolicy | None:
    """The autoscaling rule's settings, or ``None`` without ``autoscale``.

    :raises ConfigError: a bad ``autoscale`` range or a negative window.
    """
    if config.autoscale is None:
        return None
    low, high = parse_range(config.autoscale)
    backlog = config.concurrency if config.scale_backlog is None else config.scale_backlog
    return AutoscalePolicy(
        minimum=low,
        maximum=high,
        backlog_high=backlog,
        backlog_low=backlog,
        up_after=config.scale_up_after,
        down_after=config.scale_down_after,
        cooldown=config.scale_cooldown,
    )


def _at_least(name: str, value: object, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise errors.ConfigError(f"{name} must be an integer of at least {low}, not {value!r}")


# -- sources: flags, environment, TOML ---------------------------------------------------------

_INTS = {"processes", "concurrency", "dlq_after", "max_records", "scale_backlog", "health_port"}
_FLOATS = {
    "handler_timeout",
    "grace",
    "interval",
    "timeout",
    "scale_up_after",
    "scale_down_after",
    "scale_cooldown",
}
_BOOLS = {"tls"}
_SECURITY = {
    "tls",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_key_password",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "oauth_token_url",
    "oauth_client_id",
    "oauth_scope",
    "oauth_client_secret",
    *_KERBEROS,
}


def _convert(name: str, value: object, where: str) -> object:
    """``value`` (text from the environment, or a TOML value) as the setting's type."""
    try:
        if name == "topics":
            if isinstance(value, str):
                return tuple(t.strip() for t in value.split(",") if t.strip())
            if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
                return tuple(value)
            raise ValueError("expected a list of topic names")
        if name in _INTS:
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            return int(value) if isinstance(value, int | str) else _fail("an integer")
        if name in _FLOATS:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return float(value) if isinstance(value, int | float | str) else _fail("a number")
        if name in _BOOLS:
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                return value.strip().lower() in {"1", "true", "yes", "on"}
            raise ValueError("expected true or false")
        if not isinstance(value, str):
            raise ValueError("expected text")
        return value
    except ValueError as exc:
        raise errors.ConfigError(f"{where}: {exc}: {value!r}") from None


def _fail(what: str) -> object:
    raise ValueError(f"expected {what}")


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings in a TOML file: top-level keys named like the flags (``dlq-after`` or
    ``dlq_after``), or the same keys in a ``[worker]`` table.

    :raises ConfigError: an unreadable or invalid file, or an unknown key.
    """
    try:
        # Looked up by name: mypy checks this package as Python 3.10, which has no tomllib.
        tomllib: Any = importlib.import_module("tomllib")
    except ImportError:  # Python 3.10: the backport sharecon depends on there
        tomllib = importlib.import_module("tomli")

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise errors.ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise errors.ConfigError(f"config file {path}: not valid TOML: {exc}") from None
    table = data.get("worker", data) if isinstance(data.get("worker"), dict) else data
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name == "topic":
            name = "topics"
            value = [value] if isinstance(value, str) else value
        if name not in ENV:
            raise errors.ConfigError(f"config file {path}: unknown setting {key!r}")
        out[name] = _convert(name, value, f"config file {path}, {key}")
    return out


def config_from_sources(
    flags: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    toml: Mapping[str, Any] | None = None,
    *,
    log_level: int = 40,
) -> WorkerConfig:
    """Combine ``flags`` (already typed), environment variables and TOML settings
    (already typed, from :func:`load_toml`): the first that has a setting wins.

    :raises ConfigError: a wrong value, naming where it came from.
    """
    environ = os.environ if env is None else env
    values: dict[str, Any] = {}
    from_env: set[str] = set()
    for name, variable in ENV.items():
        if flags.get(name) is not None:
            values[name] = flags[name]
        elif environ.get(variable):
            values[name] = _convert(name, environ[variable], variable)
            from_env.add(name)
        elif toml is not None and toml.get(name) is not None:
            values[name] = toml[name]
    if values.get("command_config") is not None:
        # As the CLI does: the properties file gives TLS and SASL; the environment's
        # SHARECON_TLS_* / SHARECON_SASL_* are not read then (flags still clash).
        for name in _SECURITY & from_env:
            del values[name]
    for required in ("handler", "group", "topics"):
        values.setdefault(required, "" if required != "topics" else ())
    if values.get("handler") == "":
        raise errors.ConfigError("a handler is needed (HANDLER argument or SHARECON_HANDLER)")
    return WorkerConfig(**values, log_level=log_level)


# -- handlers ------------------------------------------------------------------------------------

#: The module name a handler file is loaded under (not ``__main__``: its
#: ``if __name__ == "__main__":`` block must not run again in each worker process).
_FILE_MODULE = "__sharecon_worker_handler__"


def handler_spec(handler: Callable[..., object] | str) -> str:
    """The import path of ``handler``: a string is returned as it is.

    :raises ConfigError: a lambda or a function defined inside another one (the worker
        processes could not import it).
    """
    if isinstance(handler, str):
        return handler
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise errors.ConfigError(
            f"handler {handler!r} cannot be imported by the worker processes: give a "
            "module-level function, or 'package.module:function'"
        )
    if module == "__main__":
        main_file = getattr(sys.modules["__main__"], "__file__", None)
        if main_file is None:
            raise errors.ConfigError(
                "a handler defined in an interactive session cannot be imported by the "
                "worker processes: put it in a module"
            )
        return f"{os.path.abspath(main_file)}:{qualname}"
    return f"{module}:{qualname}"


def load_handler(spec: str) -> Callable[..., object]:
    """Import the handler named by ``spec`` (``package.module:function`` or
    ``path/to/file.py:function``). The current directory is importable, as for
    ``python -m``; for a file, so is the file's folder, as for ``python path/to/file.py``
    (the file may import the modules next to it).

    :raises ConfigError: it cannot be imported, does not exist or is not callable.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise errors.ConfigError(
            f"handler must be 'package.module:function' or 'file.py:function', not {spec!r}"
        )
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise errors.ConfigError(f"handler {spec!r}: no such file {module_name}")
            # Like `python path/to/file.py`: the file's folder is importable, so the
            # handler's file can import the modules next to it.
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            loader_spec = importlib.util.spec_from_file_location(_FILE_MODULE, path)
            assert loader_spec is not None and loader_spec.loader is not None
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[_FILE_MODULE] = module
            loader_spec.loader.exec_module(module)
        else:
            # Like `python -m`: the working directory is where the handler's package lives
            # (the `sharecon` console script would otherwise only see site-packages).
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except errors.ConfigError:
        raise
    except ImportError as exc:
        raise errors.ConfigError(f"handler {spec!r}: cannot import {module_name}: {exc}") from None
    except Exception as exc:
        # The module itself failed while being imported: the user's bug, named.
        raise errors.ConfigError(
            f"handler {spec!r}: importing {module_name} raised {type(exc).__name__}: {exc}"
        ) from None
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise errors.ConfigError(f"handler {spec!r}: {module_name} has no {attr!r}") from None
    if not callable(obj):
        raise errors.ConfigError(f"handler {spec!r} is not callable")
    return obj


def is_async_handler(handler: Callable[..., object]) -> bool:
    """Whether calling ``handler`` gives an awaitable (async function or async ``__call__``)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - an object with async __call__
    )
