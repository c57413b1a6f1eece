"""OAUTHBEARER token providers: OIDC client credentials, and Kafka's client properties.

:class:`OidcTokenProvider` gets tokens from an OAuth 2 token endpoint with the
``client_credentials`` grant (RFC 6749 section 4.4), as Kafka's own
``OAuthBearerLoginCallbackHandler`` does (KIP-768). It keeps one token and fetches a new one
once about 80 % of the token's lifetime has passed (with jitter, so many clients started
together do not all ask at once), retrying a failing endpoint with backoff.

Rules of this module:

1. The client secret and the tokens never appear in a ``repr``, a log line or an error.
2. An answer that says the client is wrong (4xx: ``invalid_client``, ``invalid_scope``)
   fails at once with ``OAuthTokenRefusedError``; only an unreachable endpoint, a 5xx or a
   429 is retried, and after the retries it is an ``OAuthTokenUnavailableError``, which the
   clients treat as a broker they cannot reach yet (``sharecon._token_policy`` decides).
3. A token still valid is used while a refresh fails; past its expiry the failure is raised,
   and further fetches are held back for a short, capped wait (``_token_policy`` rule 4).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import time
import urllib.parse
from types import MappingProxyType
from typing import TYPE_CHECKING

import anyio

from sharecon import errors
from sharecon._backoff import Backoff
from sharecon._net.http import HttpError, check_url, post_form
from sharecon._net.sasl import OAuthBearerToken
from sharecon._token_policy import Step, TokenFailure, TokenSchedule, classify_status, expired_by

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping

__all__ = [
    "OidcTokenProvider",
    "RefreshingTokenProvider",
]

logger = logging.getLogger(__name__)

_RETRY_BACKOFF = Backoff(initial=0.2, maximum=2.0)


class RefreshingTokenProvider:
    """A token provider that keeps its token and fetches a new one at ~80 % of its life.

    Subclasses implement :meth:`_fetch_with_retries`, raising
    :class:`~sharecon.errors.OAuthTokenUnavailableError` for what may heal and any other
    :class:`~sharecon.errors.OAuthTokenError` for what cannot. This class does the caching,
    one fetch at a time, and follows :class:`~sharecon._token_policy.TokenSchedule` for
    when to fetch, when a still-valid token stands in, and when to hold back.
    """

    def __init__(self) -> None:
        self._token: OAuthBearerToken | None = None
        self._schedule = TokenSchedule()
        self._lock: anyio.Lock | None = None
        self._clock = time.time
        # The last transient failure's text, repeated while its hold is on.
        self._last_failure = ""
        #: Tokens fetched so far (for tests and metrics).
        self.fetches = 0
        self._what = type(self).__name__

    async def __call__(self) -> OAuthBearerToken:
        """The current token, fetching a new one when it is due for refresh.

        :raises OAuthTokenRefusedError: the endpoint refused the client (never heals).
        :raises OAuthTokenUnavailableError: no valid token now (endpoint down, 5xx, 429);
            asking again later may succeed.
        :raises OAuthTokenError: the provider failed otherwise.
        """
        token = self._token
        if token is not None and self._schedule.step(self._clock()) is Step.USE:
            return token
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            token = self._token
            now = self._clock()
            step = self._schedule.step(now)
            if step is Step.USE and token is not None:
                return token  # another task refreshed it while we waited
            if step is Step.HOLD:
                raise errors.OAuthTokenUnavailableError(
                    f"{self._last_failure}; next attempt in {self._schedule.retry_in(now):.1f} s"
                )
            try:
                fresh = await self._fetch_with_retries()
            except errors.OAuthTokenError as exc:
                kind = (
                    TokenFailure.TRANSIENT
                    if isinstance(exc, errors.OAuthTokenUnavailableError)
                    else TokenFailure.PERMANENT
                )
                if self._schedule.failed(self._clock(), kind) and token is not None:
                    logger.warning("token refresh failed, using the current token: %s", exc)
                    return token
                if kind is TokenFailure.TRANSIENT:
                    self._last_failure = str(exc)
                    logger.info(
                        "no token: %s; the next attempt in %.1f s",
                        exc,
                        self._schedule.retry_in(self._clock()),
                    )
                raise
            self._schedule.fetched(self._clock(), fresh.expires_at)
            self._token = fresh
            self.fetches += 1
            logger.debug(
                "got a token for %r from %s, valid %.0f s",
                fresh.principal,
                self._what,
                max(fresh.expires_at - self._clock(), 0.0),
            )
            return fresh

    def expired(self, token: OAuthBearerToken) -> bool:
        """Whether ``token`` counts as expired now on this provider's clock
        (:func:`~sharecon._token_policy.expired_by`): a broker's refusal of it is then a
        stale token's, which the next login replaces (``_token_policy`` rule 5)."""
        return expired_by(token.expires_at, self._clock())

    async def _fetch_with_retries(self) -> OAuthBearerToken:
        raise NotImplementedError


class OidcTokenProvider(RefreshingTokenProvider):
    """Tokens from an OIDC/OAuth 2 token endpoint by client credentials; pass it as
    ``SaslConfig("OAUTHBEARER", token_provider=...)``.

    :param token_url: the endpoint (``https://``; ``http://`` only to a loopback address).
    :param client_id: the OAuth client id (also the principal when the token has no ``sub``).
    :param client_secret: the client's secret; never shown in ``repr``, logs or errors.
    :param scope: the ``scope`` to ask for (space-separated), or None.
    :param audience: an ``audience`` to ask for (Auth0, Okta and others need one), or None.
    :param extensions: SASL extensions sent with every token, e.g. Confluent Cloud's
        ``{"logicalCluster": "lkc-...", "identityPoolId": "pool-..."}``.
    :param ssl_context: how to verify the endpoint's certificate; the system's CAs by default.
    :param timeout: seconds for one HTTP request.
    :param attempts: requests at most per refresh when the endpoint is unreachable or answers
        5xx/429 (waits of 0.2 s doubling up to 2 s between them).
    """

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        audience: str | None = None,
        extensions: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        attempts: int = 3,
    ) -> None:
        try:
            check_url(token_url)
        except ValueError as exc:
            raise errors.ConfigError(f"OAuth token_url: {exc}") from None
        if not client_id:
            raise errors.ConfigError("OAuth client_id must not be empty")
        if not client_secret:
            raise errors.ConfigError("OAuth client_secret must not be empty")
        if not (math.isfinite(timeout) and timeout > 0):
            raise errors.ConfigError(
                f"OAuth timeout must be finite positive seconds, got {timeout!r}"
            )
        if attempts < 1:
            raise errors.ConfigError(f"OAuth attempts must be at least 1, got {attempts!r}")
        # Checked now: a bad extension should fail here, not at the first login.
        OAuthBearerToken("x", 0.0, extensions=extensions or {})
        self.token_url = token_url
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self.audience = audience
        self.extensions: Mapping[str, str] = MappingProxyType(dict(extensions or {}))
        self._ssl_context = ssl_context
        self.timeout = float(timeout)
        self.attempts = attempts
        super().__init__()
        self._what = token_url

    def __repr__(self) -> str:
        return f"OidcTokenProvider({self.token_url!r}, client_id={self.client_id!r}, scope={self.scope!r})"

    async def _fetch_with_retries(self) -> OAuthBearerToken:
        attempt = 0
        while True:
            try:
                return await self._fetch()
            except _Retriable as exc:
                attempt += 1
                if attempt >= self.attempts:
                    raise errors.OAuthTokenUnavailableError(
                        f"{self.token_url}: {exc} (after {attempt} attempts)"
                    ) from None
                delay = _RETRY_BACKOFF.delay(attempt - 1)
                logger.info("%s: %s; retrying in %.2f s", self.token_url, exc, delay)
                await anyio.sleep(delay)

    async def _fetch(self) -> OAuthBearerToken:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        if self.audience:
            form["audience"] = self.audience
        # RFC 6749 section 2.3.1: the id and secret form-encoded, then HTTP Basic.
        basic = ":".join(urllib.parse.quote_plus(v) for v in (self.client_id, self._secret))
        headers = {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
        try:
            response = await post_form(
                self.token_url,
                urllib.parse.urlencode(form).encode(),
                headers=headers,
                ssl_context=self._ssl_context,
                timeout=self.timeout,
            )
        except HttpError as exc:
            raise _Retriable(self._scrub(str(exc).removeprefix(f"{self.token_url}: "))) from None
        doc = _json_object(response.body)
        failure = classify_status(response.status)
        if failure is TokenFailure.TRANSIENT:
            raise _Retriable(f"HTTP {response.status}{_oauth_error(doc, self._scrub)}")
        if failure is TokenFailure.PERMANENT:
            raise errors.OAuthTokenRefusedError(
                f"{self.token_url} refused client {self.client_id!r}: HTTP {response.status}"
                f"{_oauth_error(doc, self._scrub)}"
            )
        return self._token_from(doc)

    def _token_from(self, doc: dict[str, object] | None) -> OAuthBearerToken:
        where = f"{self.token_url} (client {self.client_id!r})"
        if doc is None or not isinstance(doc.get("access_token"), str):
            raise errors.OAuthTokenRefusedError(f"{where}: the answer has no access_token")
        value = str(doc["access_token"])
        now = self._clock()
        claims = _jwt_claims(value)
        expires: list[float] = []
        expires_in = doc.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            expires.append(now + float(expires_in))
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool):
            expires.append(float(exp))
        if not expires:
            raise errors.OAuthTokenRefusedError(
                f"{where}: the answer says neither expires_in nor exp"
            )
        expires_at = min(expires)
        if expires_at <= now:
            raise errors.OAuthTokenRefusedError(
                f"{where}: the token it gave expired {now - expires_at:.0f} s ago "
                "(is the endpoint's or this machine's clock wrong?)"
            )
        sub = claims.get("sub")
        try:
            return OAuthBearerToken(
                value,
                expires_at,
                principal=sub if isinstance(sub, str) else self.client_id,
                extensions=self.extensions,
            )
        except errors.ConfigError:
            raise errors.OAuthTokenRefusedError(
                f"{where}: the access_token is not a bearer token"
            ) from None

    def _scrub(self, text: str) -> str:
        # An endpoint that echoes what it was sent must not put the secret in our errors.
        return text.replace(self._secret, "***") if self._secret else text


class _Retriable(Exception):
    """A failure worth another attempt (unreachable endpoint, 5xx, 429)."""


def _json_object(body: bytes) -> dict[str, object] | None:
    try:
        doc = json.loads(body.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _oauth_error(doc: dict[str, object] | None, scrub: Callable[[str], str]) -> str:
    # RFC 6749 section 5.2: {"error": "invalid_client", "error_description": "..."}.
    if doc is None or "error" not in doc:
        return ""
    text = f", error {str(doc['error'])[:100]!r}"
    description = doc.get("error_description")
    if description:
        text += f": {scrub(str(description)[:200])}"
    return text


def _jwt_claims(value: str) -> dict[str, object]:
    # The payload of a JWT, read (not verified: the broker verifies) for its exp and sub.
    parts = value.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        doc = json.loads(base64.urlsafe_b64decode(payload))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
