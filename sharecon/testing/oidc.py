"""A small OIDC issuer on loopback: a client-credentials token endpoint and a JWKS.

For tests of OAUTHBEARER against a real broker running Kafka's own OIDC validator
(``OAuthBearerValidatorCallbackHandler``): the broker fetches the issuer's JWKS, the client
fetches tokens from its token endpoint. Tokens are RS256 JWTs signed with PyJWT and
``cryptography`` (in the ``test`` extra; sharecon itself does not depend on them).

::

    with OidcIssuer(clients={"app": "app-secret"}, audience="kafka") as issuer:
        broker = KafkaBroker(sasl=SaslSetup(mechanisms=("OAUTHBEARER",),
                                            oauth=issuer.broker_setup()))
        provider = OidcTokenProvider(issuer.token_url, "app", "app-secret")

Settings that tests change on the fly (``lifetime``, ``backdate``, ``audience``) are plain
attributes, read at every token request.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharecon.testing._managed import Server

if TYPE_CHECKING:
    from collections.abc import Mapping

    from typing_extensions import Self

    from sharecon.testing.broker import OAuthSetup

__all__ = ["OidcIssuer"]


class OidcIssuer(Server):
    """An OAuth 2 / OIDC issuer on 127.0.0.1 for tests.

    :param clients: client id to secret; the token's ``sub`` is the client id.
    :param audience: the ``aud`` claim of every token.
    :param lifetime: seconds each token is valid (``expires_in`` and ``exp``).
    :param backdate: seconds to move ``iat``/``nbf``/``exp`` into the past while
        ``expires_in`` still says ``lifetime``: an issuer whose clock is wrong, giving
        tokens that are already expired.
    :param port: 0 picks a free port.
    :param tls: serve HTTPS with a throwaway self-signed certificate for 127.0.0.1, whose
        PEM is at :attr:`ca_file` (for the client's ``ssl_context``).
    """

    def __init__(
        self,
        clients: Mapping[str, str] | None = None,
        *,
        audience: str = "kafka",
        lifetime: float = 300.0,
        backdate: float = 0.0,
        port: int = 0,
        tls: bool = False,
    ) -> None:
        import jwt  # the test extra; imported here so sharecon.testing works without it
        from cryptography.hazmat.primitives.asymmetric import rsa

        self._jwt = jwt
        self.clients = dict(clients or {"sharecon": "sharecon-oauth-secret"})
        self.audience = audience
        self.lifetime = lifetime
        self.backdate = backdate
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:12]
        jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        jwk.update(kid=self.kid, use="sig", alg="RS256")
        self._jwks = json.dumps({"keys": [jwk]}).encode()
        self._lock = threading.Lock()
        #: Tokens issued so far, by client id.
        self.issued: dict[str, int] = {}
        #: Token requests refused (wrong client or secret, bad grant).
        self.refused = 0
        #: The next this many token requests answer 503 (an endpoint having a bad moment).
        self.fail_next = 0
        self._server = _Server(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._scheme = "http"
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._tls_context: ssl.SSLContext | None = None
        #: True between :meth:`pause` and :meth:`resume`: nothing listens on the port.
        self.paused = False
        #: PEM of the certificate the HTTPS endpoints present (None without ``tls``).
        self.ca_file: Path | None = None
        if tls:
            self._serve_tls()

    def _serve_tls(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sharecon-oidc-")
        folder = Path(self._tmp.name)
        cert, key = _self_signed(self._key)
        self.ca_file = folder / "issuer.pem"
        self.ca_file.write_bytes(cert)
        key_file = folder / "issuer-key.pem"
        key_file.write_bytes(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.ca_file), str(key_file))
        self._tls_context = context
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._scheme = "https"

    # -- addresses ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with ``tls``), the base URL and ``iss`` claim."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        """The token endpoint (``POST``, ``grant_type=client_credentials``)."""
        return self.url + "/token"

    @property
    def jwks_url(self) -> str:
        """The JSON Web Key Set the broker verifies signatures with."""
        return self.url + "/jwks"

    def broker_setup(self, **kwargs: Any) -> OAuthSetup:
        """An :class:`~sharecon.testing.OAuthSetup` for a broker that trusts this issuer."""
        from sharecon.testing.broker import OAuthSetup

        return OAuthSetup(
            jwks_url=self.jwks_url,
            token_url=self.token_url,
            issuer=self.url,
            audience=self.audience,
            **kwargs,
        )

    # -- tokens -------------------------------------------------------------------------------

    def mint(
        self, subject: str, *, lifetime: float | None = None, audience: str | None = None
    ) -> str:
        """A signed token for ``subject`` without going through the endpoint."""
        life = self.lifetime if lifetime is None else lifetime
        now = time.time() - self.backdate
        claims = {
            "iss": self.url,
            "sub": subject,
            "aud": self.audience if audience is None else audience,
            "iat": int(now),
            "nbf": int(now) - 1,
            "exp": int(now + life),
            "scope": "kafka",
            "jti": uuid.uuid4().hex,
        }
        token: str = self._jwt.encode(
            claims, self._key, algorithm="RS256", headers={"kid": self.kid}
        )
        return token

    def _token_response(self, auth: str, body: bytes) -> tuple[int, dict[str, Any]]:
        form = dict(urllib.parse.parse_qsl(body.decode("ascii", "replace")))
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if auth.startswith("Basic "):
            try:
                decoded = base64.b64decode(auth[6:]).decode()
            except ValueError:
                decoded = ""
            user, _, password = decoded.partition(":")
            client_id, secret = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return 503, {"error": "temporarily_unavailable"}
        if form.get("grant_type") != "client_credentials":
            with self._lock:
                self.refused += 1
            return 400, {"error": "unsupported_grant_type"}
        if not client_id or self.clients.get(client_id) != secret:
            with self._lock:
                self.refused += 1
            return 401, {
                "error": "invalid_client",
                "error_description": "client authentication failed",
            }
        token = self.mint(client_id)
        with self._lock:
            self.issued[client_id] = self.issued.get(client_id, 0) + 1
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(self.lifetime),
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve in a daemon thread; returns at once (the socket is already listening)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="sharecon-oidc", daemon=True
            )
            self._thread.start()
        return self

    def pause(self) -> None:
        """Go down as an identity provider in an outage does: stop serving and close the
        listening socket, so token requests (and JWKS fetches) are refused. The port, keys
        and counters are kept for :meth:`resume`."""
        if self.paused:
            return
        self.paused = True
        self._halt()

    def resume(self) -> None:
        """Serve again on the same port, with the same keys, after :meth:`pause`."""
        if not self.paused:
            return
        port = self._server.server_address[1]
        self._server = _Server(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        if self._tls_context is not None:
            self._server.socket = self._tls_context.wrap_socket(
                self._server.socket, server_side=True
            )
        self.paused = False
        self.start()

    def _halt(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._halt()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __repr__(self) -> str:
        return f"<OidcIssuer {self.url} clients={sorted(self.clients)}>"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client refusing our certificate is what some tests want: no traceback


def _self_signed(key: Any) -> tuple[bytes, bytes]:
    """A certificate for 127.0.0.1 signed by ``key`` itself (PEM), and the key (PEM)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sharecon test OIDC issuer")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _handler(issuer: OidcIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                self._send(200, issuer._jwks)
            elif self.path == "/.well-known/openid-configuration":
                doc = {
                    "issuer": issuer.url,
                    "token_endpoint": issuer.token_url,
                    "jwks_uri": issuer.jwks_url,
                }
                self._send(200, json.dumps(doc).encode())
            else:
                self._send(404, b'{"error": "not_found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 65536))
            if self.path != "/token":
                self._send(404, b'{"error": "not_found"}')
                return
            status, doc = issuer._token_response(self.headers.get("Authorization", ""), body)
            self._send(status, json.dumps(doc).encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: request lines would go to stderr of every test

    return Handler
