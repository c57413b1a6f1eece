"""Kafka's own client configuration (``client.properties``) as sharecon settings.

Rules of this module:

1. Only what sharecon can honour is mapped: ``bootstrap.servers``, ``security.protocol``,
   ``sasl.mechanism`` and ``sasl.jaas.config`` (PLAIN, SCRAM, OAUTHBEARER), the
   ``sasl.oauthbearer.*`` client-credentials keys, ``ssl.truststore.*`` /
   ``ssl.keystore.*`` (PEM; PKCS12 when ``cryptography`` is installed; JKS refused with how
   to convert), ``ssl.endpoint.identification.algorithm``, ``client.id`` and
   ``metadata.recovery.strategy`` / ``metadata.recovery.rebootstrap.trigger.ms``. Every other
   key is named in one WARNING (names only: values may be secrets).
2. Errors name the key that is wrong, never a password, a secret or a JAAS text.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sharecon import errors
from sharecon._net.connect import ConnectionConfig
from sharecon._net.msk import msk_iam_token_provider
from sharecon._net.numerals import ascii_int
from sharecon._net.oauth import OidcTokenProvider
from sharecon._net.pem import canonical_pem, pem_entries
from sharecon._net.rebootstrap import STRATEGIES
from sharecon._net.sasl import SaslConfig
from sharecon._net.tls import TlsConfig

if TYPE_CHECKING:
    import ssl
    from collections.abc import Iterator, Mapping

__all__ = [
    "ClientProperties",
    "OAuthBearerProperties",
    "from_properties",
    "oauthbearer_from_properties",
    "parse_jaas",
    "read_properties",
]

logger = logging.getLogger(__name__)

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
# Keys read here; any other key is reported once as not used.
_KNOWN = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",  # librdkafka's spelling, in Confluent's non-Java snippets
        "sasl.username",
        "sasl.password",
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.scope",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "client.id",
        "metadata.recovery.strategy",
        "metadata.recovery.rebootstrap.trigger.ms",
    }
)
_CONVERT_JKS = (
    "convert it: keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
    "-deststoretype PKCS12, then openssl pkcs12 -in store.p12 -out store.pem "
    "(-nokeys for a truststore), and set {prefix}.type=PEM with {prefix}.location=store.pem"
)


@dataclass(frozen=True, slots=True)
class OAuthBearerProperties:
    """The OAUTHBEARER settings of a properties file (KIP-255 / KIP-768 client credentials).

    :param token_endpoint_url: ``sasl.oauthbearer.token.endpoint.url``.
    :param client_id: ``sasl.oauthbearer.client.credentials.client.id``, or the JAAS
        ``clientId`` option.
    :param client_secret: ``...client.secret`` or JAAS ``clientSecret``; never in ``repr``.
    :param scope: ``sasl.oauthbearer.scope`` or JAAS ``scope``.
    :param extensions: the JAAS ``extension_NAME="value"`` options by NAME (Confluent
        Cloud's ``logicalCluster`` and ``identityPoolId``).
    :param login_callback_handler: ``sasl.login.callback.handler.class`` (e.g. AWS MSK's
        ``IAMOAuthBearerLoginCallbackHandler``), if set.
    """

    token_endpoint_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scope: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)
    login_callback_handler: str | None = None


@dataclass(frozen=True, slots=True)
class ClientProperties:
    """What a ``client.properties`` describes: where the brokers are and how to connect.

    It unpacks as the keyword arguments every client takes::

        props = from_properties("client.properties")
        async with Producer(**props) as producer: ...
        ShareConsumer(**props, group_id="billing", topics=["orders"])

    Type checkers see ``Producer(**props)`` as ``Producer[Any, Any]``; for typed records
    write ``Producer(props.bootstrap, config=props.config)``.

    :param bootstrap: ``bootstrap.servers``.
    :param config: the :class:`~sharecon.config.ConnectionConfig` (client id, TLS, SASL).
    :param oauthbearer: the OAUTHBEARER settings, when ``sasl.mechanism=OAUTHBEARER``.
    """

    bootstrap: str
    config: ConnectionConfig
    oauthbearer: OAuthBearerProperties | None = None

    def keys(self) -> tuple[str, ...]:
        """``("bootstrap", "config")``: the names ``**props`` passes to a client."""
        return ("bootstrap", "config")

    def __getitem__(self, key: str) -> Any:
        if key not in ("bootstrap", "config"):
            raise KeyError(key)
        return getattr(self, key)


def from_properties(
    source: str | os.PathLike[str] | Mapping[str, str],
    *,
    bootstrap: str | None = None,
) -> ClientProperties:
    """Read Kafka client properties (a file path, or a mapping of them).

    :param bootstrap: overrides ``bootstrap.servers`` (which then may be absent).
    :raises ConfigError: a missing or unreadable file, a missing key, a value sharecon
        cannot use (naming the key, never a secret).
    """
    if isinstance(source, (str, os.PathLike)):
        props = read_properties(source)
        where = f"{os.fspath(source)}: "
    else:
        props = {str(k): str(v) for k, v in source.items()}
        where = ""
    try:
        return _build(props, bootstrap)
    except errors.ConfigError as exc:
        raise errors.ConfigError(f"{where}{exc}") from None


def _build(props: Mapping[str, str], bootstrap: str | None) -> ClientProperties:
    unused = sorted(k for k in props if k not in _KNOWN)
    if unused:
        # Names only: a value may be a secret (a schema-registry password, say).
        logger.warning(
            "client properties not used by sharecon (consumer/producer settings are "
            "arguments of the clients instead): %s",
            ", ".join(unused),
        )
    servers = bootstrap or props.get("bootstrap.servers", "").strip()
    if not servers:
        raise errors.ConfigError("bootstrap.servers is missing")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise errors.ConfigError(
            f"security.protocol={protocol}: expected one of {', '.join(_PROTOCOLS)}"
        )
    tls = _tls(props) if protocol in ("SSL", "SASL_SSL") else None
    sasl: SaslConfig | None = None
    oauth: OAuthBearerProperties | None = None
    if protocol.startswith("SASL_"):
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "").strip()
        mechanism = mechanism.upper()
        if not mechanism:
            raise errors.ConfigError(
                f"security.protocol={protocol} needs sasl.mechanism (Kafka's default, GSSAPI, "
                "is not read from properties: use GssapiConfig or --sasl-mechanism GSSAPI)"
            )
        if mechanism == "OAUTHBEARER":
            oauth = _oauthbearer(props)
            sasl = oauthbearer_sasl(oauth, servers)
        else:
            sasl = _password_sasl(mechanism, props)
    kwargs: dict[str, Any] = {"tls": tls, "sasl": sasl}
    client_id = props.get("client.id", "").strip()
    if client_id:
        kwargs["client_id"] = client_id
    kwargs.update(_recovery(props))
    return ClientProperties(servers, ConnectionConfig(**kwargs), oauth)


def _recovery(props: Mapping[str, str]) -> dict[str, Any]:
    # Java reads the strategy case-insensitively ("REBOOTSTRAP" and "rebootstrap" alike).
    out: dict[str, Any] = {}
    strategy = props.get("metadata.recovery.strategy")
    if strategy is not None:
        value = strategy.strip().lower()
        if value not in STRATEGIES:
            raise errors.ConfigError(
                f"metadata.recovery.strategy={strategy.strip()}: expected rebootstrap or none"
            )
        out["metadata_recovery_strategy"] = value
    trigger = props.get("metadata.recovery.rebootstrap.trigger.ms")
    if trigger is not None:
        text = trigger.strip()
        ms = ascii_int(text)
        if ms is None:
            raise errors.ConfigError(
                f"metadata.recovery.rebootstrap.trigger.ms={text}: expected whole milliseconds >= 0"
            )
        out["metadata_recovery_rebootstrap_trigger_ms"] = ms
    return out


# -- SASL ------------------------------------------------------------------------------------


def _password_sasl(mechanism: str, props: Mapping[str, str]) -> SaslConfig:
    if mechanism == "GSSAPI":
        # Kerberos has its own settings (keytab, principal, krb5.conf), not read from here.
        raise errors.ConfigError(
            "sasl.mechanism=GSSAPI is not read from properties: use GssapiConfig in Python, "
            "or --sasl-mechanism GSSAPI with --kerberos-principal and --kerberos-keytab"
        )
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise errors.ConfigError(
            f"sasl.mechanism={mechanism} is not supported by this build (PLAIN, "
            "SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)"
        )
    jaas = props.get("sasl.jaas.config")
    if jaas is None:
        # librdkafka-style files give the credentials as plain keys.
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if username is None or password is None:
            raise errors.ConfigError(f"sasl.mechanism={mechanism} needs sasl.jaas.config")
        return SaslConfig(mechanism, username, password)
    module, options = parse_jaas(jaas)
    if module != _LOGIN_MODULES[mechanism]:
        raise errors.ConfigError(
            f"sasl.jaas.config names the login module {module}, which does not do "
            f"{mechanism} (expected {_LOGIN_MODULES[mechanism]})"
        )
    missing = [k for k in ("username", "password") if k not in options]
    if missing:
        raise errors.ConfigError(f"sasl.jaas.config has no {' and no '.join(missing)} option")
    return SaslConfig(mechanism, options["username"], options["password"])


def _oauthbearer(props: Mapping[str, str]) -> OAuthBearerProperties:
    options: dict[str, str] = {}
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        module, options = parse_jaas(jaas)
        if module != _LOGIN_MODULES["OAUTHBEARER"]:
            raise errors.ConfigError(
                f"sasl.jaas.config names the login module {module}, which does not do "
                f"OAUTHBEARER (expected {_LOGIN_MODULES['OAUTHBEARER']})"
            )
    prefix = "sasl.oauthbearer.client.credentials."
    return OAuthBearerProperties(
        token_endpoint_url=props.get("sasl.oauthbearer.token.endpoint.url"),
        client_id=props.get(prefix + "client.id") or options.get("clientId"),
        client_secret=props.get(prefix + "client.secret") or options.get("clientSecret"),
        scope=props.get("sasl.oauthbearer.scope") or options.get("scope"),
        extensions={
            k[len("extension_") :]: v for k, v in options.items() if k.startswith("extension_")
        },
        login_callback_handler=props.get("sasl.login.callback.handler.class"),
    )


_MSK_REGION = re.compile(r"\.kafka(?:-serverless)?\.([a-z0-9-]+)\.amazonaws\.com(?::\d+)?$")


def oauthbearer_from_properties(
    properties: Mapping[str, str], *, ssl_context: ssl.SSLContext | None = None
) -> SaslConfig:
    """An OAUTHBEARER :class:`SaslConfig` from Kafka client properties (a ``client.properties``).

    Reads what Kafka's own clients read for OIDC client credentials (KIP-768, KIP-1139):

    * ``sasl.oauthbearer.token.endpoint.url``: the token endpoint (required);
    * ``sasl.jaas.config``: ``OAuthBearerLoginModule required clientId='...'
      clientSecret='...' scope='...' extension_logicalCluster='...' ...;``
    * or ``sasl.oauthbearer.client.credentials.client.id`` / ``...client.secret`` and
      ``sasl.oauthbearer.scope`` (these win over the JAAS options);
    * ``sasl.login.callback.handler.class`` naming AWS MSK's
      ``IAMOAuthBearerLoginCallbackHandler``: MSK IAM tokens instead (``sharecon[aws]``).

    :param ssl_context: how to verify the token endpoint's certificate (system CAs by default).
    :raises ConfigError: a required property is missing or malformed (named, never its value).
    """
    handler = properties.get("sasl.login.callback.handler.class", "")
    if (
        not handler.endswith("IAMOAuthBearerLoginCallbackHandler")
        and not properties.get("sasl.oauthbearer.token.endpoint.url", "").strip()
    ):
        raise errors.ConfigError(
            "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (only the OIDC client "
            "credentials flow and AWS MSK IAM are supported)"
        )
    return oauthbearer_sasl(
        _oauthbearer(properties),
        properties.get("bootstrap.servers", ""),
        ssl_context=ssl_context,
    )


def oauthbearer_sasl(
    settings: OAuthBearerProperties,
    servers: str = "",
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> SaslConfig:
    """The SASL config for ``settings``: AWS MSK IAM tokens when the file names MSK's
    login callback handler, else tokens from the OIDC token endpoint by client credentials.

    :param servers: the bootstrap servers, where an MSK cluster's region is read from.
    :raises ConfigError: a required setting is missing (named, never a secret's value), or
        MSK IAM without the ``sharecon[aws]`` extra.
    """
    handler = settings.login_callback_handler or ""
    if handler.endswith("IAMOAuthBearerLoginCallbackHandler"):
        regions = {m.group(1) for s in servers.split(",") if (m := _MSK_REGION.search(s.strip()))}
        region = regions.pop() if len(regions) == 1 else os.environ.get("AWS_REGION")
        if not region:
            raise errors.ConfigError(
                "AWS MSK IAM: cannot tell the region from bootstrap.servers; set AWS_REGION"
            )
        return SaslConfig("OAUTHBEARER", token_provider=msk_iam_token_provider(region))
    # Kafka's own handler (and its pre-3.x "secured" name) is the client-credentials flow
    # that OidcTokenProvider implements; any other class is code sharecon cannot run.
    if handler and not (
        handler.startswith("org.apache.kafka.common.security.oauthbearer.")
        and handler.endswith(".OAuthBearerLoginCallbackHandler")
    ):
        raise errors.ConfigError(
            f"sasl.login.callback.handler.class={handler} is not supported (sharecon has its "
            "own OIDC client-credentials provider and AWS MSK IAM; pass another provider in "
            "Python as SaslConfig('OAUTHBEARER', token_provider=...))"
        )
    if not settings.token_endpoint_url:
        raise errors.ConfigError(
            "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (only the OIDC client "
            "credentials flow and AWS MSK IAM are supported)"
        )
    if not settings.client_id or not settings.client_secret:
        raise errors.ConfigError(
            "OAUTHBEARER needs a client id and secret: clientId and clientSecret in "
            "sasl.jaas.config, or sasl.oauthbearer.client.credentials.client.id/.secret"
        )
    provider = OidcTokenProvider(
        settings.token_endpoint_url,
        settings.client_id,
        settings.client_secret,
        scope=settings.scope,
        extensions=settings.extensions,
        ssl_context=ssl_context,
    )
    return SaslConfig("OAUTHBEARER", token_provider=provider)


_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(
    r"""
    \s+ | //[^\n]* | /\*.*?\*/              # space and comments (skipped)
    | (?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<word>[^\s=;"']+)
    | (?P<punct>[=;])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """Kafka's ``sasl.jaas.config``: ``LoginModule flag key=value ... ;`` as the module
    name and its options.

    Values may be bare words or quoted with ``"`` or ``'`` (backslash escapes ``\\"``,
    ``\\\\``, ``\\n``, ``\\t`` inside quotes); ``//`` and ``/* */`` comments are skipped,
    as Kafka's own parser does.

    :raises ConfigError: malformed text, naming what was expected (never the text).
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            raise errors.ConfigError(
                f"sasl.jaas.config: cannot be read at character {pos} (an unclosed quote?)"
            )
        pos = m.end()
        if m.group("quoted") is not None:
            tokens.append(("value", _unquote(m.group("quoted")[1:-1])))
        elif m.group("word") is not None:
            tokens.append(("word", m.group("word")))
        elif m.group("punct") is not None:
            tokens.append((m.group("punct"), m.group("punct")))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise errors.ConfigError(
            "sasl.jaas.config: expected 'LoginModuleClass required key=\"value\" ... ;'"
        )
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _JAAS_FLAGS:
        raise errors.ConfigError(
            f"sasl.jaas.config: expected a control flag ({', '.join(_JAAS_FLAGS)}) after {module}"
        )
    options: dict[str, str] = {}
    rest = tokens[2:]
    i = 0
    while i < len(rest) and rest[i][0] != ";":
        if (
            i + 2 >= len(rest)
            or rest[i][0] != "word"
            or rest[i + 1][0] != "="
            or rest[i + 2][0] not in ("word", "value")
        ):
            raise errors.ConfigError(
                f"sasl.jaas.config: expected key=value options after {module} {flag} "
                f"(option {len(options) + 1} is malformed)"
            )
        options[rest[i][1]] = rest[i + 2][1]
        i += 3
    if i >= len(rest):
        raise errors.ConfigError("sasl.jaas.config: the login module must end with ';'")
    if i + 1 != len(rest):
        raise errors.ConfigError(
            "sasl.jaas.config: only one login module is supported (text after ';')"
        )
    return module, options


def _unquote(body: str) -> str:
    out: list[str] = []
    chars = iter(body)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "\\")
            out.append(_ESCAPES.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


# -- TLS -------------------------------------------------------------------------------------


def _tls(props: Mapping[str, str]) -> TlsConfig:
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https"):
        raise errors.ConfigError(
            f"ssl.endpoint.identification.algorithm={algorithm}: expected https or empty"
        )
    kwargs: dict[str, Any] = {"check_hostname": algorithm == "https"}
    kwargs.update(_truststore(props))
    kwargs.update(_keystore(props))
    return TlsConfig(**kwargs)


def _store_type(props: Mapping[str, str], prefix: str, path: str | None) -> str:
    given = props.get(f"{prefix}.type", "").strip().upper()
    if given:
        return given
    # Kafka defaults to JKS; a file that is plainly PEM or PKCS12 is taken for what it is.
    if path is not None:
        if path.lower().endswith((".p12", ".pfx")):
            return "PKCS12"
        try:
            with open(path, "rb") as f:
                if b"-----BEGIN" in f.read(4096):
                    return "PEM"
        except OSError:
            pass
    return "PEM" if path is None else "JKS"


def _truststore(props: Mapping[str, str]) -> dict[str, Any]:
    path = props.get("ssl.truststore.location") or None
    inline = props.get("ssl.truststore.certificates") or None
    if path is None and inline is None:
        return {}  # the system's CAs
    kind = _store_type(props, "ssl.truststore", path)
    if kind == "PEM":
        if path is not None and inline is not None:
            raise errors.ConfigError(
                "give ssl.truststore.location or ssl.truststore.certificates, not both"
            )
        if path is not None:
            return {"ca_file": path}
        assert inline is not None
        return {"ca_pem": canonical_pem(inline, "CERTIFICATE", "ssl.truststore.certificates")}
    assert path is not None
    if kind == "PKCS12":
        certs, _key = _read_pkcs12(path, props.get("ssl.truststore.password"), "ssl.truststore")
        return {"ca_pem": certs}
    raise _refuse_store(kind, path, "ssl.truststore")


def _keystore(props: Mapping[str, str]) -> dict[str, Any]:
    path = props.get("ssl.keystore.location") or None
    key = props.get("ssl.keystore.key") or None
    chain = props.get("ssl.keystore.certificate.chain") or None
    key_password = props.get("ssl.key.password")
    if path is None and key is None and chain is None:
        return {}
    kind = _store_type(props, "ssl.keystore", path)
    if kind == "PEM":
        if path is not None:
            if key is not None or chain is not None:
                raise errors.ConfigError(
                    "give ssl.keystore.location or ssl.keystore.key with "
                    "ssl.keystore.certificate.chain, not both"
                )
            # One file holding the key and its certificate chain, as Kafka reads it.
            return {"cert_file": path, "key_password": key_password}
        if key is None or chain is None:
            raise errors.ConfigError(
                "ssl.keystore.key and ssl.keystore.certificate.chain go together"
            )
        return _inline_keystore(key, chain, key_password)
    assert path is not None
    if kind == "PKCS12":
        password = props.get("ssl.keystore.password")
        certs, private = _read_pkcs12(path, password, "ssl.keystore", key_password)
        if private is None:
            raise errors.ConfigError(f"ssl.keystore.location {path}: no private key in it")
        return {"cert_pem": certs, "key_pem": private}
    raise _refuse_store(kind, path, "ssl.keystore")


def _inline_keystore(key: str, chain: str, key_password: str | None) -> dict[str, Any]:
    """``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` in any layout Kafka
    reads (one line with spaces, as continuation lines join, or PEM's own lines)."""
    keys = pem_entries(key, "PRIVATE KEY", "ssl.keystore.key")
    if len(keys) != 1:
        raise errors.ConfigError(f"ssl.keystore.key: expected one private key, found {len(keys)}")
    encrypted = keys[0].label.startswith("ENCRYPTED") or any(
        "ENCRYPTED" in header for header in keys[0].headers
    )
    # As Kafka: a key password means an encrypted key, and an encrypted key needs one.
    if encrypted and not key_password:
        raise errors.ConfigError(
            "ssl.keystore.key is an encrypted key: set ssl.key.password to its password"
        )
    if key_password and not encrypted:
        raise errors.ConfigError(
            "ssl.key.password is set but ssl.keystore.key is not encrypted: remove "
            "ssl.key.password, or give the key as -----BEGIN ENCRYPTED PRIVATE KEY-----"
        )
    return {
        "cert_pem": canonical_pem(chain, "CERTIFICATE", "ssl.keystore.certificate.chain"),
        "key_pem": keys[0].text(),
        "key_password": key_password,
    }


def _refuse_store(kind: str, path: str, prefix: str) -> errors.ConfigError:
    if kind == "JKS":
        return errors.ConfigError(
            f"{prefix}.location {path} is a JKS store, which Python cannot read; "
            + _CONVERT_JKS.format(path=path, prefix=prefix)
        )
    return errors.ConfigError(f"{prefix}.type={kind}: expected PEM or PKCS12")


def _read_pkcs12(
    path: str, password: str | None, prefix: str, key_password: str | None = None
) -> tuple[str, str | None]:
    """The certificates and the key of a PKCS12 file, as PEM text (key unencrypted,
    kept in memory only)."""
    try:
        pkcs12: Any = importlib.import_module("cryptography.hazmat.primitives.serialization.pkcs12")
        serialization: Any = importlib.import_module("cryptography.hazmat.primitives.serialization")
    except ImportError:
        raise errors.ConfigError(
            f"{prefix}.location {path} is PKCS12, which needs the 'cryptography' package "
            "(pip install cryptography); or convert it to PEM: openssl pkcs12 -in "
            f"{os.path.basename(path)} -out store.pem, and set {prefix}.type=PEM"
        ) from None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise errors.ConfigError(f"{prefix}.location {path}: {exc.strerror or exc}") from None
    secret = password if password is not None else key_password
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, secret.encode() if secret else None
        )
    except ValueError:
        raise errors.ConfigError(
            f"{prefix}.location {path}: cannot open it (wrong {prefix}.password?)"
        ) from None
    pem = serialization.Encoding.PEM
    certs = "".join(c.public_bytes(pem).decode() for c in [cert, *extra] if c is not None)
    private = None
    if key is not None:
        private = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
    return certs, private


# -- the file format ---------------------------------------------------------------------------

# java.util.Properties: whitespace is space, tab and form feed; lines end at \n, \r or \r\n.
_PROP_SPACE = " \t\f"
_PROP_LINES = re.compile(r"\r\n|\r|\n")
# Only these letters are escapes; any other escaped character stands for itself (\b is "b").
_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A Java ``.properties`` file as a dict, read as ``java.util.Properties`` reads it.

    ``key=value``, ``key: value`` or ``key value`` (the first unescaped ``=``, ``:`` or
    whitespace ends the key; whitespace around it is dropped); ``#`` and ``!`` comment
    lines; a line ending in an odd number of backslashes continues on the next, whose
    leading whitespace is dropped (no newline is kept: an inline PEM value becomes one line
    with spaces, which is read as Kafka reads it); escapes ``\\t \\n \\r \\f \\uXXXX``,
    and a backslash before any other character stands for that character. The bytes are
    UTF-8, or ISO-8859-1 when they are not valid UTF-8 (as Java 9+ reads resource bundles;
    Kafka's tools read every file as ISO-8859-1, so write non-ASCII text as ``\\uXXXX``
    for both to read it alike). A later key wins over an earlier one.

    :raises ConfigError: the file cannot be read, or a malformed ``\\uXXXX`` (naming the
        file and the line).
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise errors.ConfigError(
            f"properties file {os.fspath(path)}: {exc.strerror or exc}"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark, as editors on Windows write
    try:
        return dict(_entries(text))
    except errors.ConfigError as exc:
        raise errors.ConfigError(f"properties file {os.fspath(path)}: {exc}") from None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, logical line) for each line that is not blank or a comment."""
    pending: str | None = None
    start = 0
    for number, raw in enumerate(_PROP_LINES.split(text), 1):
        if pending is None:
            line = raw.lstrip(_PROP_SPACE)
            # Comments and blank lines are recognised only where a logical line begins.
            if not line or line[0] in "#!":
                continue
            start, pending = number, ""
        else:
            line = raw.lstrip(_PROP_SPACE)
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = None
    if pending is not None:
        yield start, pending


def _entries(text: str) -> Iterator[tuple[str, str]]:
    for number, line in _logical_lines(text):
        i, end = 0, len(line)
        while i < end:
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=:" or ch in _PROP_SPACE:
                break
            i += 1
        key, rest = line[:i], line[i:].lstrip(_PROP_SPACE)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_PROP_SPACE)
        yield _unescape(key, number), _unescape(rest, number)


def _unescape(text: str, line: int = 0) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= end:
            break  # a lone backslash at the very end of the file: dropped, as Java does
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not _HEX4.fullmatch(digits):
                raise errors.ConfigError(f"line {line}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_PROP_ESCAPES.get(nxt, nxt))
        i += 2
    result = "".join(out)
    if _SURROGATE.search(result):
        # Java strings are UTF-16: \\uD83D\\uDE00 is one character (a pair), so join pairs.
        result = result.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return result
