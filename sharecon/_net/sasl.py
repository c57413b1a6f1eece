"""SASL mechanisms as small synchronous state machines: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Rules of this module:

1. No I/O. A mechanism turns the server's last token into our next token; the connection
   layer carries the tokens in SaslAuthenticate requests. For OAUTHBEARER the connection
   layer asks the token provider first (that may do I/O) and hands the token in.
2. Credentials (passwords, tokens) never appear in a ``repr``, a log line or an exception
   message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sharecon import errors

__all__ = [
    "MECHANISMS",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "PlainMechanism",
    "SaslConfig",
    "SaslMechanism",
    "ScramMechanism",
    "TokenProvider",
]

#: The mechanisms this client implements, by their SASL name.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Most SCRAM iterations a server may ask for: Kafka's own limit (ScramMechanism's
#: maxIterations), so no real broker asks for more. PBKDF2 runs on the event loop, and a
#: hostile or broken server asking for a million rounds would stall it for a second per login.
SCRAM_MAX_ITERATIONS = 16384
#: Fewest SCRAM iterations a server may ask for: RFC 7677 requires at least 4096, and so
#: does Kafka (ScramMechanism's minIterations). Fewer would make a captured exchange cheap
#: to attack offline, so a server asking for fewer is refused, not obeyed.
SCRAM_MIN_ITERATIONS = 4096


# RFC 7628 section 3.1: an extension key is ALPHA+, a value VCHAR / SP / HTAB / CR / LF;
# "auth" is the token's own key. Kafka checks the same patterns on the broker.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
# RFC 6750 b64token: what may follow "Bearer ".
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """One OAUTHBEARER token, as a token provider returns it.

    :param value: the bearer token (a JWT for OIDC, a presigned URL for MSK IAM); never
        shown in ``repr``, logs or errors.
    :param expires_at: when the token stops being valid, in Unix seconds (``time.time()``).
    :param principal: who the token names (the JWT's ``sub``); for logs and messages only.
    :param extensions: SASL extensions sent with the token (RFC 7628), e.g. Confluent
        Cloud's ``{"logicalCluster": "lkc-...", "identityPoolId": "pool-..."}``.
    """

    value: str = field(repr=False)
    expires_at: float
    principal: str = ""
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _BEARER_TOKEN.fullmatch(self.value):
            # Say what is wrong with it without showing it.
            raise errors.ConfigError(
                "OAUTHBEARER token value must be a non-empty RFC 6750 bearer token "
                "(letters, digits, -._~+/ and trailing =)"
            )
        for key, value in self.extensions.items():
            if key == "auth" or not _EXTENSION_KEY.fullmatch(key):
                raise errors.ConfigError(
                    f"SASL extension name {key!r} must be letters only and not 'auth'"
                )
            if not isinstance(value, str) or not _EXTENSION_VALUE.fullmatch(value):
                raise errors.ConfigError(
                    f"SASL extension {key!r} must be non-empty printable ASCII"
                )
        # A frozen copy: a caller's dict changing later must not change what is sent.
        object.__setattr__(self, "extensions", MappingProxyType(dict(self.extensions)))


TokenProvider = Callable[[], OAuthBearerToken | Awaitable[OAuthBearerToken]]
"""A token provider: a plain or async callable returning an :class:`OAuthBearerToken`.

Called at every login and re-authentication; it should cache and refresh its token
itself (:class:`~sharecon.config.OidcTokenProvider` does)."""


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """SASL credentials for a connection.

    ``SaslConfig("SCRAM-SHA-512", "alice", password)`` for a user name and password;
    ``SaslConfig("OAUTHBEARER", token_provider=provider)`` for OAuth bearer tokens
    (see :class:`~sharecon.config.OidcTokenProvider` and
    :func:`~sharecon.config.msk_iam_token_provider`).

    :param mechanism: one of ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``.
    :param username: the user to authenticate as (PLAIN and SCRAM).
    :param password: the user's password (PLAIN and SCRAM); never shown in ``repr`` or errors.
    :param token_provider: OAUTHBEARER only: a plain or async callable returning an
        :class:`OAuthBearerToken`, called at every login and re-authentication. A plain
        callable runs in a worker thread, so it may block (on HTTP, say).
    """

    mechanism: str
    username: str = ""
    password: str = field(default="", repr=False)
    token_provider: TokenProvider | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mechanism == "GSSAPI":
            raise errors.ConfigError(
                "for SASL GSSAPI (Kerberos) pass sasl=GssapiConfig(...) from sharecon.config"
            )
        if self.mechanism not in MECHANISMS:
            raise errors.ConfigError(
                f"unsupported SASL mechanism {self.mechanism!r}; choose one of {', '.join(MECHANISMS)}"
            )
        if self.mechanism == "OAUTHBEARER":
            if self.token_provider is None or not callable(self.token_provider):
                raise errors.ConfigError(
                    "SASL OAUTHBEARER needs token_provider=, a callable returning an "
                    "OAuthBearerToken (e.g. sharecon.config.OidcTokenProvider)"
                )
            if self.username or self.password:
                raise errors.ConfigError(
                    "SASL OAUTHBEARER takes no username or password; the token provider "
                    "holds the credentials"
                )
            return
        if self.token_provider is not None:
            raise errors.ConfigError(
                f"token_provider is for OAUTHBEARER only, not {self.mechanism}"
            )
        if not self.username:
            raise errors.ConfigError("SASL username must not be empty")

    def _new_mechanism(self, token: OAuthBearerToken | None = None) -> SaslMechanism:
        """A fresh exchange for one (re-)authentication (OAUTHBEARER: with ``token``)."""
        if self.mechanism == "PLAIN":
            return PlainMechanism(self.username, self.password)
        if self.mechanism == "OAUTHBEARER":
            if token is None:
                raise errors.LocalProtocolError("OAUTHBEARER needs a token from the provider")
            return OAuthBearerMechanism(token)
        return ScramMechanism(self.mechanism, self.username, self.password)


class SaslMechanism:
    """One SASL exchange: call :meth:`step` with the server's token until :attr:`done`."""

    name: str = ""
    done: bool = False
    #: Why the server refused, as far as the mechanism learnt it (added to the broker's
    #: error message); None when it said nothing the mechanism understands.
    failure: str | None = None
    #: True when :meth:`step` may block (GSSAPI asks the KDC for tickets): the connection
    #: then runs each step in a worker thread instead of on the event loop.
    blocking: bool = False
    #: The host of the broker address being authenticated to, set by the connection before
    #: the first step (GSSAPI names the broker's service principal after it).
    server_host: str = ""

    def step(self, server_token: bytes | None) -> bytes:
        """Return the next client token; ``server_token`` is None for the first step."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class PlainMechanism(SaslMechanism):
    """RFC 4616 PLAIN: one message, ``\\0user\\0password``. Use it only over TLS."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def step(self, server_token: bytes | None) -> bytes:
        """PLAIN sends its single message; any server reply ends the exchange."""
        if server_token is not None:
            self.done = True
            return b""
        self.done = True
        return self._message


def _saslname(name: str) -> str:
    # RFC 5802 section 5.1: ',' and '=' in a user name are escaped.
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramMechanism(SaslMechanism):
    """RFC 5802 / RFC 7677 SCRAM client (no channel binding), SHA-256 or SHA-512.

    The exchange is client-first, server-first, client-final, server-final; the server's
    final message is verified, so a server that does not know the password is caught too.
    """

    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        self.name = mechanism
        self._hash = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._state = "start"
        self._server_signature = b""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()

    def step(self, server_token: bytes | None) -> bytes:
        """Advance the exchange; raises SaslAuthenticationFailedError on a bad server reply."""
        if self._state == "start":
            self._state = "first-sent"
            return ("n,," + self._first_bare).encode()
        if server_token is None:
            raise errors.SaslAuthenticationFailedError("SCRAM: the server sent no challenge")
        if self._state == "first-sent":
            self._state = "final-sent"
            return self._client_final(server_token)
        if self._state == "final-sent":
            self._verify_server_final(server_token)
            self._state = "done"
            self.done = True
            return b""
        raise errors.SaslAuthenticationFailedError("SCRAM: unexpected extra server message")

    @staticmethod
    def _attributes(message: bytes) -> dict[str, str]:
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise errors.SaslAuthenticationFailedError(
                "SCRAM: server message is not UTF-8"
            ) from None
        out: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if sep and len(key) == 1:
                out[key] = value
        return out

    def _client_final(self, server_first: bytes) -> bytes:
        attrs = self._attributes(server_first)
        if "e" in attrs:
            raise errors.SaslAuthenticationFailedError(f"SCRAM: server error {attrs['e']!r}")
        nonce, salt_b64, iterations = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if not nonce or not salt_b64 or not iterations:
            raise errors.SaslAuthenticationFailedError("SCRAM: server-first message is incomplete")
        if not nonce.startswith(self._nonce):
            raise errors.SaslAuthenticationFailedError("SCRAM: server nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            rounds = int(iterations)
        except ValueError:
            raise errors.SaslAuthenticationFailedError(
                "SCRAM: bad salt or iteration count"
            ) from None
        if rounds > SCRAM_MAX_ITERATIONS:
            raise errors.SaslAuthenticationFailedError(
                f"SCRAM: the server asks for {rounds} iterations; refusing more than "
                f"{SCRAM_MAX_ITERATIONS} (Kafka's own limit)"
            )
        if rounds < SCRAM_MIN_ITERATIONS:
            raise errors.SaslAuthenticationFailedError(
                f"SCRAM: the server asks for {rounds} iterations; refusing fewer than "
                f"{SCRAM_MIN_ITERATIONS} (the minimum of RFC 7677 and Kafka)"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, rounds)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        final_bare = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first.decode()},{final_bare}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: bytes) -> None:
        attrs = self._attributes(server_final)
        if "e" in attrs:
            raise errors.SaslAuthenticationFailedError(f"SCRAM: server error {attrs['e']!r}")
        try:
            got = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            got = b""
        if not hmac.compare_digest(got, self._server_signature):
            raise errors.SaslAuthenticationFailedError("SCRAM: server signature does not verify")


class OAuthBearerMechanism(SaslMechanism):
    """RFC 7628 OAUTHBEARER client as Kafka speaks it (KIP-255).

    The client's first message carries the token and the extensions. The broker answers
    success with an empty token, or failure with a JSON error (``{"status": ...}``); the
    client then sends a lone ``\\x01`` and the broker fails the exchange with
    SASL_AUTHENTICATION_FAILED, to which :attr:`failure` adds the JSON's status.
    """

    name = "OAUTHBEARER"

    def __init__(self, token: OAuthBearerToken) -> None:
        parts = [f"n,,\x01auth=Bearer {token.value}\x01"]
        parts += [f"{key}={value}\x01" for key, value in token.extensions.items()]
        parts.append("\x01")
        self._message = "".join(parts).encode()
        self._sent = False

    def step(self, server_token: bytes | None) -> bytes:
        """The first call sends the token; then an empty answer is success, JSON an error."""
        if not self._sent:
            self._sent = True
            return self._message
        if self.failure is not None:
            # We acknowledged an error and the broker did not fail the exchange: never
            # treat that as a login.
            raise errors.SaslAuthenticationFailedError(f"OAUTHBEARER: {self.failure}")
        if not server_token:
            self.done = True
            return b""
        self.failure = _describe_error(server_token)
        return b"\x01"


def _describe_error(answer: bytes) -> str:
    # RFC 7628 section 3.2.2: {"status": "invalid_token", "scope": ..., "openid-configuration": ...}.
    # Only the status and scope are shown, clipped: the rest is the server's to say.
    try:
        doc = json.loads(answer.decode())
    except (UnicodeDecodeError, ValueError):
        return "the broker rejected the token (its error answer is not JSON)"
    if not isinstance(doc, dict):
        return "the broker rejected the token (its error answer is not a JSON object)"
    status = str(doc.get("status", "unknown"))[:100]
    scope = doc.get("scope")
    scope_text = f", scope {str(scope)[:200]!r}" if scope else ""
    return f"the broker rejected the token: status {status!r}{scope_text}"
