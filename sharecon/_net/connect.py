"""Opening a ready-to-use broker connection: TCP or TLS, ApiVersions, then SASL.

Rules of this module:

1. A connection is returned only once it is fully usable: versions negotiated and, when
   configured, authenticated. Any failure on the way closes what was opened and raises
   :class:`~sharecon.errors.BrokerConnectError` (or the broker's own error for SASL and
   version problems), naming the broker.
2. The reader task runs in the task group the caller passes in: the top-level client owns
   every task (see the house rules on structured concurrency).
3. Re-authentication (KIP-368) happens lazily before a request once the session lifetime the
   broker granted is 85-95% spent, so an idle connection costs nothing.
"""

from __future__ import annotations

import errno
import inspect
import logging
import math
import random
import re
import ssl
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from sharecon import errors
from sharecon._net.connection import DEFAULT_MAX_FRAME_SIZE, BrokerAddress, BrokerConnection
from sharecon._net.rebootstrap import DEFAULT_TRIGGER_MS, check_recovery_settings
from sharecon._net.sasl import OAuthBearerToken
from sharecon._net.tls import warn_weakened_verification
from sharecon._version import __version__
from sharecon.protocol import ApiVersionsRequest, negotiate
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.framing import identify_protocol
from sharecon.protocol.versions import CLIENT_VERSIONS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from anyio.abc import ByteStream, TaskGroup

    from sharecon._net.sasl import SaslConfig, TokenProvider
    from sharecon._net.sasl_gssapi import GssapiConfig
    from sharecon._net.tls import TlsConfig

__all__ = ["ConnectionConfig", "Dialer", "dialer", "handshake", "open_connection"]

#: Opens a byte stream to ``(host, port)`` in place of TCP; raises :class:`OSError` as a
#: refused or failed connect does.
Dialer = Callable[[str, int], Awaitable["ByteStream"]]
#: The dialer of the clients running in this context (``None``: TCP, in every real use).
#: The whole-client simulation (:mod:`sharecon.testing.sim.client`) sets it, so the real
#: clients reach an in-memory broker on a virtual clock without knowing it.
dialer: ContextVar[Dialer | None] = ContextVar("sharecon_dialer", default=None)

logger = logging.getLogger(__name__)

_API_VERSIONS_KEY = ApiVersionsRequest.api_key
#: Seconds a token provider may take (its own retries included) before the login fails.
TOKEN_TIMEOUT = 30.0
_CLIENT_ID_MAX_BYTES = 0x7FFF
# The broker validates ClientSoftwareName/Version against this pattern (KIP-511).
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
# OpenSSL's reasons for a handshake reply that is not TLS at all.
_NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"})


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """How to open and use connections to brokers.

    :param client_id: sent in every request header (shows up in broker logs and quotas).
    :param connect_timeout: seconds for TCP connect, TLS handshake, ApiVersions and SASL together.
    :param request_timeout: default seconds a request may wait for its response.
    :param ssl_context: enables TLS; build it with :func:`ssl.create_default_context`
        (verification on) and load your CA with ``cafile=``.
    :param tls: enables TLS from certificate files (:class:`~sharecon._net.tls.TlsConfig`:
        CA, client certificate and key for mutual TLS, key password), re-read when the
        files change; instead of ``ssl_context``.
    :param sasl: SASL credentials (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), a
        Kerberos login (:class:`~sharecon.config.GssapiConfig`), or None.
    :param max_frame_size: largest response frame accepted (bytes).
    :param metadata_recovery_strategy: ``"rebootstrap"`` (the default, as in the Java
        client 4.x): when no known broker can be reached for
        ``metadata_recovery_rebootstrap_trigger_ms``, or a Metadata response says
        REBOOTSTRAP_REQUIRED, the learned brokers are dropped and the bootstrap names are
        resolved and connected again. ``"none"`` keeps the learned brokers for good.
    :param metadata_recovery_rebootstrap_trigger_ms: milliseconds without any reachable
        known broker before rebootstrapping (Java's default, 300000).
    """

    client_id: str = "sharecon"
    connect_timeout: float = 10.0
    request_timeout: float = 30.0
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl: SaslConfig | GssapiConfig | None = None
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    tls: TlsConfig | None = None
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = DEFAULT_TRIGGER_MS

    def __post_init__(self) -> None:
        check_recovery_settings(
            self.metadata_recovery_strategy, self.metadata_recovery_rebootstrap_trigger_ms
        )
        # The header carries client_id as an int16-length string: a longer one could only
        # fail later, at the first request, far from the mistake.
        size = len(self.client_id.encode("utf-8", "surrogatepass"))
        if size > _CLIENT_ID_MAX_BYTES:
            raise errors.ConfigError(
                f"client_id is {size} bytes in UTF-8; at most {_CLIENT_ID_MAX_BYTES} fit"
            )
        for name in ("connect_timeout", "request_timeout"):
            value = getattr(self, name)
            # NaN fails every comparison and inf disables the deadline: both are mistakes.
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise errors.ConfigError(f"{name} must be finite positive seconds, got {value!r}")
        if self.max_frame_size < 1024:
            raise errors.ConfigError(f"max_frame_size {self.max_frame_size} is too small")
        if self.ssl_context is not None and self.tls is not None:
            raise errors.ConfigError("give ssl_context or tls (certificate files), not both")
        if self.ssl_context is not None:
            _warn_if_unverified(self.ssl_context)

    @property
    def uses_tls(self) -> bool:
        """Whether connections are made over TLS."""
        return self.ssl_context is not None or self.tls is not None

    def current_ssl_context(self) -> ssl.SSLContext | None:
        """The SSL context for a connection opened now (``tls`` files re-read if changed)."""
        if self.tls is not None:
            return self.tls.context()
        return self.ssl_context


def _warn_if_unverified(context: ssl.SSLContext) -> None:
    # Verification off is sometimes deliberate (a test cluster), but it must never be
    # silent. TlsConfig(check_hostname=False) reports through the same function, once.
    if context.verify_mode == ssl.CERT_NONE:
        what, detail = (
            "CERT_NONE",
            "ssl_context.verify_mode is CERT_NONE: any certificate is accepted",
        )
    elif not context.check_hostname:
        what, detail = (
            "check_hostname",
            "ssl_context.check_hostname is False: a certificate for any name is accepted",
        )
    else:
        return
    warn_weakened_verification(
        what, detail, "use ssl.create_default_context(cafile=...) outside tests"
    )


async def open_connection(
    address: BrokerAddress,
    config: ConnectionConfig,
    task_group: TaskGroup,
    *,
    required_apis: Iterable[int] = (),
    timeout: float | None = None,
) -> BrokerConnection:
    """Connect to ``address``, negotiate versions, authenticate; return the connection.

    :param task_group: runs the connection's reader task (owned by the top-level client).
    :param required_apis: API keys that must be usable; otherwise IncompatibleBrokerError.
    :param timeout: seconds for the whole opening, at most ``config.connect_timeout``; for
        a caller whose own deadline is nearer.
    :raises BrokerConnectError: connect, TLS, or handshake failed or timed out; the message
        starts with the address and says why (refused, timed out, not Kafka, ...).
    :raises IncompatibleBrokerError: a required API is not offered.
    :raises SaslAuthenticationFailedError: wrong credentials (or other SASL broker errors).
    :raises OAuthTokenError: OAUTHBEARER: the token provider could not give a token.
    """
    where = str(address)
    limit = config.connect_timeout if timeout is None else min(timeout, config.connect_timeout)
    # One deadline for every phase: connect_timeout covers an OAUTHBEARER token, connect,
    # TLS, ApiVersions and SASL.
    deadline = anyio.current_time() + limit
    token: OAuthBearerToken | None = None
    if config.sasl is not None and config.sasl.token_provider is not None:
        # Before connecting: a slow token endpoint is then named as such, not as a broker
        # that did not answer, and the broker is not kept waiting for it.
        try:
            with anyio.fail_after(limit):
                token = await fetch_token(config.sasl.token_provider)
        except TimeoutError:
            raise errors.OAuthTokenUnavailableError(
                f"{where}: the OAUTHBEARER token provider gave no token within {limit:g} s "
                "(connect_timeout)"
            ) from None
        except errors.OAuthTokenUnavailableError as exc:
            # Named by the broker it kept us from, as every BrokerConnectError is: the
            # clients retry it as they would an unreachable broker, and health() shows it.
            raise errors.OAuthTokenUnavailableError(
                f"{where}: no OAUTHBEARER token: {str(exc).removeprefix(where + ': ')}"
            ) from None
    stream: ByteStream
    context = config.current_ssl_context()
    dial = dialer.get()
    try:
        with anyio.fail_after(max(deadline - anyio.current_time(), 0.0)):
            if dial is not None:
                stream = await dial(address.host, address.port)
            elif context is not None:
                stream = await anyio.connect_tcp(
                    address.host,
                    address.port,
                    ssl_context=context,
                    tls_standard_compatible=False,
                    tls_hostname=address.host,
                )
            else:
                stream = await anyio.connect_tcp(address.host, address.port)
    except TimeoutError:
        raise errors.BrokerConnectError(
            f"{where} timed out: the connection was not accepted within {limit:g} s"
        ) from None
    except ssl.SSLError as exc:
        refused = _refused_certificate(str(exc), where, config)
        if refused is not None:
            raise refused from exc
        # A reply that is not TLS at all ("wrong version number"): a plaintext listener,
        # which will not turn into a TLS one on retry.
        if getattr(exc, "reason", None) in _NOT_TLS_REASONS:
            raise _plaintext_peer(where, f"TLS handshake failed: {exc}") from exc
        raise errors.BrokerConnectError(f"{where}: TLS handshake failed: {exc}") from exc
    except (anyio.EndOfStream, anyio.BrokenResourceError) as exc:
        # The peer hung up during the TLS handshake: typically TLS against a plaintext port
        # (a Kafka broker reads our ClientHello as a ~370 MB request size and hangs up).
        if context is not None:
            raise _plaintext_peer(
                where, "the broker closed the connection during the TLS handshake"
            ) from exc
        raise errors.BrokerConnectError(
            f"{where}: the broker closed the connection during connecting"
        ) from exc
    except OSError as exc:
        if _is_refusal(exc):
            raise errors.BrokerConnectError(
                f"{where} refused the connection", definite=True
            ) from exc
        raise errors.BrokerConnectError(f"{where}: connect failed: {_os_detail(exc)}") from exc

    conn = BrokerConnection(
        stream, address, client_id=config.client_id, max_frame_size=config.max_frame_size
    )
    await task_group.start(conn.run)
    step = _Step()
    try:
        with anyio.fail_after(max(deadline - anyio.current_time(), 0.0)):
            await handshake(conn, config, required_apis=required_apis, token=token, step=step)
    except TimeoutError:
        await conn.aclose()
        not_kafka = _not_kafka(where, conn, config)
        raise errors.BrokerConnectError(
            not_kafka
            or f"{where} timed out: it accepted the connection but did not answer "
            f"{step.name} within {limit:g} s",
            definite=not_kafka is not None,
        ) from None
    except errors.BrokerDisconnectedError as exc:
        await conn.aclose()
        # TLS 1.3: the broker checks our certificate after the handshake completed on our
        # side, so its refusal arrives as an alert on the first read.
        refused = _refused_certificate(str(exc), where, config)
        if refused is not None:
            raise refused from exc
        not_kafka = _not_kafka(where, conn, config)
        raise errors.BrokerConnectError(
            not_kafka or f"{where}: connection lost during {step.name}: {exc}",
            definite=not_kafka is not None,
        ) from exc
    except BaseException:
        await conn.aclose()
        raise
    logger.debug(
        "%s: connected (%d APIs negotiated)",
        where,
        len(conn.versions.versions) if conn.versions else 0,
    )
    return conn


def _plaintext_peer(where: str, what: str) -> errors.BrokerConnectError:
    # Both ways a TLS client learns that the peer does not speak TLS (a reply that is not
    # TLS, or a hang-up on the ClientHello) get one hint, and are definite: bootstrap gives
    # up after its short grace (about 2 s) instead of the connect timeout.
    return errors.BrokerConnectError(
        f"{where}: {what} (the peer does not answer in TLS: is this a plaintext listener?)",
        definite=True,
    )


@dataclass(slots=True)
class _Step:
    """Which request of the opening exchange is in flight, for the error if it stalls."""

    name: str = "the version handshake (ApiVersions)"


def _not_kafka(where: str, conn: BrokerConnection, config: ConnectionConfig) -> str | None:
    # Bytes came back, but not one Kafka frame: say what the peer seems to be instead.
    head = conn.unframed_head
    if not head:
        return None
    protocol = identify_protocol(head)
    if protocol == "TLS" and not config.uses_tls:
        return (
            f"{where} does not speak Kafka (it answered with TLS: is this a TLS listener? "
            "pass ssl_context or tls)"
        )
    if protocol is not None:
        return f"{where} does not speak Kafka (it answered with {protocol})"
    size = int.from_bytes(head[:4], "big", signed=True)
    if len(head) >= 8 and 0 < size <= config.max_frame_size and head[4:8] == bytes(4):
        return None  # the start of our first response (correlation id 0): slow, not foreign
    return f"{where} does not speak Kafka (it answered with bytes {head.hex(' ')}...)"


# TLS alerts a broker sends when it does not accept the client's certificate (Kafka sends
# bad_certificate for a missing one too; OpenSSL names the alerts like this).
_CERT_ALERTS = (
    "ALERT_BAD_CERTIFICATE",
    "ALERT_CERTIFICATE_REQUIRED",
    "ALERT_UNKNOWN_CA",
    "ALERT_CERTIFICATE_EXPIRED",
    "ALERT_CERTIFICATE_REVOKED",
    "ALERT_CERTIFICATE_UNKNOWN",
    "ALERT_UNSUPPORTED_CERTIFICATE",
)


def _refused_certificate(
    text: str, where: str, config: ConnectionConfig
) -> errors.TlsAuthenticationError | None:
    if not config.uses_tls or not any(alert in text for alert in _CERT_ALERTS):
        return None
    if config.tls is not None and config.tls.mutual:
        why = (
            f"the broker refused the client certificate {config.tls.cert_file or '(PEM text)'}: "
            "is it signed by a CA the broker trusts, and still valid?"
        )
    elif config.tls is not None:
        why = "the broker requires a client certificate (mutual TLS): give TlsConfig(cert_file=..., key_file=...)"
    else:
        why = "the broker refused the TLS client authentication (does it require a client certificate?)"
    return errors.TlsAuthenticationError(f"{where}: {why} [{text.removeprefix(where + ': ')}]")


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    # anyio's connect_tcp raises OSError("All connection attempts failed") from the one
    # attempt's error, or from an ExceptionGroup when the name had several addresses.
    # (Duck-typed: BaseExceptionGroup is not a builtin before Python 3.11.)
    subs = getattr(exc, "exceptions", None)
    if isinstance(subs, tuple):
        return [
            leaf for sub in subs if isinstance(sub, BaseException) for leaf in _leaf_errors(sub)
        ]
    if exc.__cause__ is not None and isinstance(exc, OSError) and exc.errno is None:
        return _leaf_errors(exc.__cause__)
    return [exc]


def _is_refusal(exc: OSError) -> bool:
    # Every attempt refused (nothing listens on the port): immediate and definite.
    leaves = _leaf_errors(exc)
    return bool(leaves) and all(
        isinstance(e, ConnectionRefusedError)
        or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED)
        for e in leaves
    )


def _os_detail(exc: OSError) -> str:
    # "All connection attempts failed" says nothing: name the underlying errors instead.
    texts = dict.fromkeys(str(e) or type(e).__name__ for e in _leaf_errors(exc))
    return "; ".join(texts)


async def handshake(
    conn: BrokerConnection,
    config: ConnectionConfig,
    *,
    required_apis: Iterable[int] = (),
    token: OAuthBearerToken | None = None,
    step: _Step | None = None,
) -> None:
    """ApiVersions (with the UNSUPPORTED_VERSION fallback), then SASL when configured.

    :param token: OAUTHBEARER: a token already fetched from the provider for this login.
    :param step: updated with the request in flight, so a caller's timeout can name it.
    """
    version = CLIENT_VERSIONS[_API_VERSIONS_KEY][1]
    request = ApiVersionsRequest(
        client_software_name="sharecon",
        client_software_version=__version__ if _SOFTWARE_RE.fullmatch(__version__) else "unknown",
    )
    response = await conn.request(request, api_version=version)
    if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
        # The broker answered in v0 with its own ranges: retry at the highest it offers.
        offered = {k.api_key: k.max_version for k in response.api_keys}
        retry = min(version, offered.get(_API_VERSIONS_KEY, 0))
        logger.debug(
            "%s: ApiVersions v%d unsupported; retrying with v%d", conn.address, version, retry
        )
        response = await conn.request(request, api_version=retry)
    conn.versions = negotiate(response, required_apis)
    if config.sasl is not None:
        await authenticate(conn, config.sasl, token=token, step=step)


async def authenticate(
    conn: BrokerConnection,
    sasl: SaslConfig | GssapiConfig,
    *,
    token: OAuthBearerToken | None = None,
    step: _Step | None = None,
) -> None:
    """SaslHandshake v1 then SaslAuthenticate rounds; sets the re-authentication time.

    OAUTHBEARER asks the token provider (unless ``token`` was fetched already) at every
    login and re-authentication, so a re-authentication carries the provider's current
    token; it asks once the handshake is answered, just before the token is sent: an
    answer held up behind others on a slow link could otherwise let the token expire on
    the way, and the broker's refusal of it end the client (found by the whole-client
    simulation: a re-authentication waited 2 s for its handshake answer behind a fetch
    over a 2 KiB/s link while the token endpoint was down, seed 480).

    :param step: updated with the request in flight, so a caller's timeout can name it.
    """
    # Imported here: a client without SASL never creates these message classes.
    from sharecon.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from sharecon.protocol.messages.sasl_handshake import SaslHandshakeRequest

    if step is not None:
        step.name = f"the SASL handshake (SaslHandshake for {sasl.mechanism})"
    hs = await conn.request(SaslHandshakeRequest(mechanism=sasl.mechanism))
    if hs.error_code:
        offered = ", ".join(hs.mechanisms) or "none"
        err = errors.error_for_code(
            hs.error_code, f"{conn.address}: mechanism {sasl.mechanism}; broker offers {offered}"
        )
        assert err is not None
        raise err
    token_obj = token
    if token_obj is None and sasl.token_provider is not None:
        if step is not None:
            step.name = "the OAUTHBEARER token provider"
        token_obj = await fetch_token(sasl.token_provider)
    mechanism = sasl._new_mechanism(token_obj)
    mechanism.server_host = conn.address.host
    server_token: bytes | None = None
    lifetime_ms = 0
    rounds = 0
    sent_at = anyio.current_time()
    while True:
        if mechanism.blocking:
            # GSSAPI may wait on the KDC: keep the event loop free; the connect deadline
            # still applies (the thread is left to finish on its own if it passes).
            out = await anyio.to_thread.run_sync(
                mechanism.step, server_token, abandon_on_cancel=True
            )
        else:
            out = mechanism.step(server_token)
        if mechanism.done and not out:
            break
        rounds += 1
        if step is not None:
            step.name = f"SASL authentication (SaslAuthenticate {sasl.mechanism}, round {rounds})"
        sent_at = anyio.current_time()
        resp = await conn.request(SaslAuthenticateRequest(auth_bytes=out))
        if resp.error_code:
            # The broker's message says why (e.g. "Authentication failed ... invalid credentials").
            detail = resp.error_message or "no detail"
            if mechanism.failure:
                detail = f"{detail} ({sasl.mechanism}: {mechanism.failure})"
            err = errors.error_for_code(resp.error_code, f"{conn.address}: {detail}")
            assert err is not None
            if token_obj is not None and _stale(sasl.token_provider, token_obj):
                # Valid when sent, expired on the way (a stall, a slow link): not the
                # credentials' fault, and the next login brings a new token
                # (sharecon._token_policy rule 5). Raised as the refusal, it ended a
                # producer for good (the whole-client simulation, seed 27).
                raise errors.BrokerConnectError(
                    f"{conn.address}: the OAUTHBEARER token expired before the broker read "
                    "it; the next login uses a new one"
                ) from err
            raise err
        lifetime_ms = resp.session_lifetime_ms
        server_token = bytes(resp.auth_bytes)
        if mechanism.done:
            break
    if lifetime_ms > 0:
        # Re-authenticate when 85-95% of the lifetime has passed, like the Java client,
        # counted from when the last SaslAuthenticate was sent: the broker's session
        # began after that, whereas the answer may be read late on a busy event loop (a
        # 3 s session counted from a reading 0.5 s late was closed by the broker, and the
        # acknowledgements in flight with it).
        delay = lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        conn.set_reauthentication(sent_at + delay, lambda: authenticate(conn, sasl))
    logger.debug(
        "%s: authenticated with %s%s",
        conn.address,
        sasl.mechanism,
        f" as {token_obj.principal!r}" if token_obj is not None and token_obj.principal else "",
    )


def _stale(provider: TokenProvider | None, token: OAuthBearerToken) -> bool:
    """Whether the provider says ``token`` has expired by now (a provider may tell, with an
    ``expired(token)`` method, as :class:`~sharecon._net.oauth.RefreshingTokenProvider`
    does on its own clock; a plain callable cannot, and its refusals stay refusals)."""
    expired = getattr(provider, "expired", None)
    return callable(expired) and bool(expired(token))


async def fetch_token(provider: TokenProvider) -> OAuthBearerToken:
    """Call an OAUTHBEARER token provider: async ones awaited, plain ones in a worker thread.

    :raises OAuthTokenUnavailableError: the provider timed out, or failed in a way that may
        heal (its own ``OAuthTokenUnavailableError``, or an ``OSError`` such as a refused
        connection).
    :raises OAuthTokenError: the provider failed otherwise or returned something else;
        the message names the provider's error, never a token or secret.
    """
    try:
        with anyio.fail_after(TOKEN_TIMEOUT):
            if _is_async(provider):
                result = provider()
            else:
                result = await anyio.to_thread.run_sync(provider, abandon_on_cancel=True)
            if inspect.isawaitable(result):
                result = await result
    except TimeoutError:
        raise errors.OAuthTokenUnavailableError(
            f"the OAUTHBEARER token provider gave no token within {TOKEN_TIMEOUT:g} s"
        ) from None
    except errors.KafkaError:
        raise
    except OSError as exc:
        # A network failure inside the user's own provider: may heal like ours.
        raise errors.OAuthTokenUnavailableError(
            f"the OAUTHBEARER token provider failed: {type(exc).__name__}"
        ) from exc
    except Exception as exc:
        # The provider's own error, by type only: its text could hold what it was given.
        raise errors.OAuthTokenError(
            f"the OAUTHBEARER token provider failed: {type(exc).__name__}"
        ) from exc
    if not isinstance(result, OAuthBearerToken):
        raise errors.OAuthTokenError(
            f"the OAUTHBEARER token provider returned {type(result).__name__}, "
            "not an OAuthBearerToken"
        )
    return result


def _is_async(provider: object) -> bool:
    return inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(
        getattr(provider, "__call__", None)  # noqa: B004 - an async __call__ on an object
    )
