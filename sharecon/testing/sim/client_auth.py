"""OAUTHBEARER in the whole-client simulation (:mod:`sharecon.testing.sim.client`).

A fraction of seeds make every client (members, the writer, the dead-letter router's
producer and admin) log in with SASL OAUTHBEARER, each through its own
:class:`~sharecon._net.oauth.OidcTokenProvider` (the production provider: its retry loop,
its token parsing, and :class:`~sharecon._token_policy.TokenSchedule` deciding when to
refresh, use the cached token or hold back), whose one HTTP request is replaced by
:class:`TokenEndpoint`, an identity provider in virtual time. The endpoint goes down (a
refused connection) for half or for twice a token's lifetime, then comes back.

The broker side, :class:`BrokerAuth`, checks every login as Kafka's OAUTHBEARER
validator does: a token the endpoint issued, not expired, else RFC 7628's error then
SASL_AUTHENTICATION_FAILED. With ``connections.max.reauth.ms`` set (KIP-368, drawn per
seed: 0, the broker default, or 10 s or 60 s), a session lasts until the token expires
or that many milliseconds pass, whichever is first; a request on a session past its end
closes the connection, so the clients must re-authenticate in time; with 0, a token is
checked only at each login (a reconnect).

What this module checks (docs/testing.md, "OAuth token endpoint outage"):

* *A1*: nothing reaches the application (invariant 1): the outage is transient.
* *A2*: progress once the endpoint is back: invariants 2 and 6 run from its return.
* *A3*: every running consumer's ``health()`` is ok again within :data:`HEALTH_BOUND`
  virtual seconds of the endpoint's return (and of every other fault healing).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from unittest import mock

import anyio

from sharecon._net.oauth import OidcTokenProvider, _Retriable
from sharecon._token_policy import TokenFailure, TokenSchedule
from sharecon.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from sharecon.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from sharecon.protocol.messages.sasl_handshake import (
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from sharecon.testing.sim.intercept import CLOSE, Close

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon._net.sasl import OAuthBearerToken
    from sharecon.protocol.header import RequestHeader
    from sharecon.protocol.messages._base import Request, Response
    from sharecon.testing.fake.cluster import FakeCluster

__all__ = [
    "HEALTH_BOUND",
    "AuthPlan",
    "BrokerAuth",
    "SimTokenProvider",
    "TokenEndpoint",
    "give_up_for_good",
]

#: A3: seconds after the endpoint's return (and every other fault's healing) by which
#: every running consumer's health() is ok again: the provider's hold after failures
#: (at most 5 s, ``sharecon._token_policy.HOLD_BACKOFF``), a reconnect (at most 1 s of
#: backoff), a heartbeat that rejoins the group (1 s interval) and a fetch, with room.
HEALTH_BOUND = 15.0
#: Share of seeds with OAUTHBEARER.
SHARE = 0.3
#: A round trip to the identity provider, virtual seconds.
_RTT = 0.05
#: The error of a refused login (Kafka's SASL_AUTHENTICATION_FAILED).
_SASL_AUTHENTICATION_FAILED = 58
_ILLEGAL_SASL_STATE = 34
_UNSUPPORTED_SASL_MECHANISM = 33


@dataclass(frozen=True, slots=True)
class AuthPlan:
    """One seed's OAuth: token lifetime, the endpoint's outage, the broker's re-auth."""

    #: seconds a token is valid
    lifetime: float
    down_at: float
    down_for: float
    #: the broker's ``connections.max.reauth.ms`` (0: sessions never end; KIP-368 off)
    reauth_ms: int

    @classmethod
    def draw(cls, seed: int) -> AuthPlan | None:
        """The plan of ``seed`` (``None``: no SASL in this schedule)."""
        rng = random.Random(seed * 15485863 + 0xA17)
        if rng.random() >= SHARE:
            return None
        lifetime = rng.choice([20.0, 30.0])
        return cls(
            lifetime=lifetime,
            down_at=round(rng.uniform(1.0, 12.0), 3),
            # less than a token's life, or more: then every token expires during it
            down_for=lifetime * rng.choice([0.5, 2.0]),
            reauth_ms=rng.choice([0, 10_000, 60_000]),
        )

    @property
    def heals_at(self) -> float:
        """When the endpoint is back (schedule seconds)."""
        return self.down_at + self.down_for

    def describe(self) -> str:
        return (
            f"oauth: tokens of {self.lifetime:g}s, endpoint down {self.down_for:g}s from "
            f"{self.down_at:g}, connections.max.reauth.ms={self.reauth_ms}"
        )


@dataclass(slots=True)
class TokenEndpoint:
    """The identity provider, in virtual time: issues tokens that name their expiry, or
    refuses connections while it is down."""

    plan: AuthPlan
    issued: int = 0
    refused: int = 0
    #: tokens issued once it was back after refusing some: the providers recovered
    issued_after: int = 0

    def issue(self, client_id: str) -> dict[str, object]:
        """The token endpoint's JSON answer, or :class:`_Retriable` (a refused
        connection, as ``OidcTokenProvider._fetch`` reports one) while it is down."""
        now = anyio.current_time()
        if self.plan.down_at <= now < self.plan.heals_at:
            self.refused += 1
            raise _Retriable("connection refused")
        self.issued += 1
        if self.refused:
            self.issued_after += 1
        expires_ms = int((now + self.plan.lifetime) * 1000)
        return {"access_token": f"sim_{expires_ms}_{client_id}", "expires_in": self.plan.lifetime}


class SimTokenProvider(OidcTokenProvider):
    """The production OIDC provider with its one HTTP request answered by a
    :class:`TokenEndpoint`, on the event loop's (virtual) clock."""

    def __init__(self, endpoint: TokenEndpoint, client_id: str) -> None:
        super().__init__("https://idp.sim/token", client_id, "sim-secret")
        self._clock = anyio.current_time
        self._endpoint = endpoint

    async def _fetch(self) -> OAuthBearerToken:
        await anyio.sleep(_RTT)
        return self._token_from(self._endpoint.issue(self.client_id))


def _token_expiry(auth_bytes: bytes) -> float | None:
    """The expiry (virtual seconds) of the token in an OAUTHBEARER initial response, if it
    is one the endpoint issued."""
    try:
        text = auth_bytes.decode()
    except UnicodeDecodeError:
        return None
    for part in text.split("\x01"):
        if part.startswith("auth=Bearer "):
            fields = part.removeprefix("auth=Bearer ").split("_", 2)
            if len(fields) == 3 and fields[0] == "sim" and fields[1].isdigit():
                return int(fields[1]) / 1000
    return None


@dataclass(slots=True)
class BrokerAuth:
    """MemoryKafka's SASL OAUTHBEARER listener (an intercept): handshake, token check,
    KIP-368 session lifetimes, and connections closed for unauthenticated requests or
    sessions past their end."""

    plan: AuthPlan
    cluster: Callable[[], FakeCluster]
    #: the fake's clock (FakeCluster.handle's ``now``)
    fake_now: Callable[[], float]
    #: connection -> when its session ends (``inf``: never); absent: not logged in
    sessions: dict[str, float] = field(default_factory=dict)
    handshaken: set[str] = field(default_factory=set)
    #: connections whose token was refused, waiting for the client's ``\x01``
    refusing: set[str] = field(default_factory=set)
    logins: int = 0
    reauths: int = 0
    refused: int = 0
    #: connections closed for a request on a session past its end
    expired: int = 0

    def intercept(
        self, conn: str, header: RequestHeader, body: Request[Response]
    ) -> Response | Close | None:
        """The hook (see ``MemoryKafka.intercepts``)."""
        now = anyio.current_time()
        if header.api_key == ApiVersionsResponse.api_key:
            response = self.cluster().handle(
                header.api_key, header.api_version, body, conn, self.fake_now(), header.client_id
            )
            assert isinstance(response, ApiVersionsResponse)
            sasl = (
                ApiVersion(api_key=SaslHandshakeRequest.api_key, min_version=1, max_version=1),
                ApiVersion(api_key=SaslAuthenticateRequest.api_key, min_version=2, max_version=2),
            )
            return dataclasses.replace(response, api_keys=(*response.api_keys, *sasl))
        if isinstance(body, SaslHandshakeRequest):
            self.handshaken.add(conn)
            code = 0 if body.mechanism == "OAUTHBEARER" else _UNSUPPORTED_SASL_MECHANISM
            return SaslHandshakeResponse(error_code=code, mechanisms=("OAUTHBEARER",))
        if isinstance(body, SaslAuthenticateRequest):
            return self._authenticate(conn, body.auth_bytes, now)
        end = self.sessions.get(conn)
        if end is None:
            return CLOSE  # a request before logging in: Kafka closes the connection
        if now >= end:
            self.expired += 1
            del self.sessions[conn]
            return CLOSE  # KIP-368: the session ended without a re-authentication
        return None

    def _authenticate(self, conn: str, auth_bytes: bytes, now: float) -> Response | Close:
        if conn in self.refusing:
            # The client acknowledged the error (RFC 7628): now the exchange fails.
            self.refusing.discard(conn)
            return SaslAuthenticateResponse(
                error_code=_SASL_AUTHENTICATION_FAILED,
                error_message="Authentication failed: invalid or expired token",
            )
        if conn not in self.handshaken:
            return CLOSE
        self.handshaken.discard(conn)
        expires = _token_expiry(auth_bytes)
        if expires is None or expires <= now:
            self.refused += 1
            self.refusing.add(conn)
            self.sessions.pop(conn, None)
            return SaslAuthenticateResponse(
                auth_bytes=json.dumps({"status": "invalid_token"}).encode()
            )
        end = expires
        if self.plan.reauth_ms:
            end = min(end, now + self.plan.reauth_ms / 1000)
        if conn in self.sessions:
            self.reauths += 1
        else:
            self.logins += 1
        self.sessions[conn] = end if self.plan.reauth_ms else math.inf
        lifetime_ms = int((end - now) * 1000) if self.plan.reauth_ms else 0
        return SaslAuthenticateResponse(session_lifetime_ms=lifetime_ms)


def _failed_for_good(self: TokenSchedule, now: float, kind: TokenFailure) -> bool:
    # Mutant: once a fetch failed with no valid token, the provider never asks again
    # (the behaviour issue 30 reported: OAuthTokenError for ever after an outage).
    keep = _FAILED(self, now, kind)
    if not keep:
        self.hold_until = math.inf
    return keep


_FAILED = TokenSchedule.failed


def give_up_for_good() -> Any:
    """Mutant ``token-give-up``: after an outage past a token's expiry the provider holds
    back for ever, so no client logs in again."""
    return mock.patch.object(TokenSchedule, "failed", _failed_for_good)
