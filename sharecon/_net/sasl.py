"""SASL mechanisms as small synchronous state machines: PLAIN and SCRAM-SHA-256/512.

Rules of this module:

1. No I/O. A mechanism turns the server's last token into our next token; the connection
   layer carries the tokens in SaslAuthenticate requests.
2. Credentials never appear in a ``repr``, a log line or an exception message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from sharecon import errors

__all__ = [
    "MECHANISMS",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "PlainMechanism",
    "SaslConfig",
    "SaslMechanism",
    "ScramMechanism",
]

#: The mechanisms this client implements, by their SASL name.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Most SCRAM iterations a server may ask for: Kafka's own limit (ScramMechanism's
#: maxIterations), so no real broker asks for more. PBKDF2 runs on the event loop, and a
#: hostile or broken server asking for a million rounds would stall it for a second per login.
SCRAM_MAX_ITERATIONS = 16384
#: Fewest SCRAM iterations a server may ask for: RFC 7677 requires at least 4096, and so
#: does Kafka (ScramMechanism's minIterations). Fewer would make a captured exchange cheap
#: to attack offline, so a server asking for fewer is refused, not obeyed.
SCRAM_MIN_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """SASL credentials for a connection.

    :param mechanism: one of ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``.
    :param username: the user to authenticate as.
    :param password: the user's password; never shown in ``repr`` or errors.
    """

    mechanism: str
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise errors.ConfigError(
                f"unsupported SASL mechanism {self.mechanism!r}; choose one of {', '.join(MECHANISMS)}"
            )
        if not self.username:
            raise errors.ConfigError("SASL username must not be empty")

    def _new_mechanism(self) -> SaslMechanism:
        """A fresh exchange for one (re-)authentication."""
        if self.mechanism == "PLAIN":
            return PlainMechanism(self.username, self.password)
        return ScramMechanism(self.mechanism, self.username, self.password)


class SaslMechanism:
    """One SASL exchange: call :meth:`step` with the server's token until :attr:`done`."""

    name: str = ""
    done: bool = False

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
