"""SASL GSSAPI (Kerberos V5) as a synchronous state machine, like PLAIN and SCRAM in ``sasl``.

Kafka's GSSAPI exchange, after ``SaslHandshake(GSSAPI)``, each token in a SaslAuthenticate:

1. the GSS-API security context: our initial token (the Kerberos AP-REQ for the service
   principal ``<service>/<host>``), then the broker's reply (AP-REP, mutual authentication),
   answered by an empty token once our context is complete (RFC 4752 section 3.1);
2. the security-layer negotiation (RFC 4752 section 3.1): the broker sends 4 bytes, wrapped,
   naming the layers it offers; we answer, wrapped, "no security layer" (Kafka offers no
   other) followed by our authorization id.

Rules of this module:

1. No socket I/O here. The ``gssapi`` library may contact the KDC (an AS exchange for a keytab
   login, a TGS exchange for the service ticket) inside :meth:`GssapiMechanism.step`, so the
   mechanism says ``blocking = True`` and the connection runs its steps in a worker thread.
2. ``gssapi`` (the ``sharecon[kerberos]`` extra) is imported only when a :class:`GssapiConfig`
   is made: sharecon works without it, and a missing one is a :class:`ConfigError` saying
   how to install it.
3. No secret appears in a ``repr``, a log line or an exception: the key lives in the keytab
   or the ticket cache, and the messages name only principals and file names.
"""

from __future__ import annotations

import importlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sharecon import errors
from sharecon._net.sasl import SaslMechanism

if TYPE_CHECKING:
    from types import ModuleType

    from sharecon._net.sasl import OAuthBearerToken

__all__ = ["DEFAULT_SERVICE_NAME", "GSSAPI", "GssapiConfig", "GssapiMechanism"]

#: The SASL name of the mechanism.
GSSAPI = "GSSAPI"
#: The first part of the broker's service principal (Kafka's ``sasl.kerberos.service.name``).
DEFAULT_SERVICE_NAME = "kafka"
# RFC 4752 section 3.3: bit 1 of the first octet is "no security layer".
_NO_SECURITY_LAYER = 0x01
_INSTALL_HINT = (
    "SASL GSSAPI needs the gssapi package: pip install 'sharecon[kerberos]' (on Linux it "
    "builds against MIT Kerberos, so install its headers first: apt-get install libkrb5-dev "
    "gcc, or dnf install krb5-devel gcc)"
)


def _gssapi() -> ModuleType:
    """The ``gssapi`` module, or a ConfigError saying how to install it."""
    try:
        return importlib.import_module("gssapi")
    except ImportError:
        raise errors.ConfigError(_INSTALL_HINT) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class GssapiConfig:
    """Kerberos (SASL GSSAPI) login for a connection; pass it as ``sasl=`` like a
    :class:`~sharecon.config.SaslConfig`.

    Three ways to log in:

    * a keytab: ``GssapiConfig(principal="app@EXAMPLE.COM", keytab="/etc/app.keytab")``;
      sharecon gets its tickets from the keytab itself (MIT Kerberos' client keytab, through
      the GSS-API credential store) into a private in-memory ticket cache, and renews them;
    * the default ticket cache, filled by ``kinit`` (``KRB5CCNAME`` picks another one):
      ``GssapiConfig()``, or with ``principal=`` to insist on one of its principals;
    * a named ticket cache: ``GssapiConfig(ticket_cache="FILE:/run/app/krb5cc")``.

    The broker's service principal is ``<service_name>/<host>``: ``host`` is the address each
    connection goes to (the bootstrap address, then the host each broker advertises), unless
    ``service_host`` names one host for every broker. Kerberos' own settings (realm, KDCs,
    host name canonicalization) come from ``krb5.conf`` (``KRB5_CONFIG`` picks another file).

    :param principal: the client principal, e.g. ``app@EXAMPLE.COM``; required with a keytab.
    :param keytab: path of a keytab holding the principal's key.
    :param ticket_cache: a ticket cache name such as ``FILE:/path`` (where the keytab's
        tickets go, when given with ``keytab``).
    :param service_name: the broker's Kerberos service name (``sasl.kerberos.service.name``).
    :param service_host: the host part of the broker's service principal, for every broker;
        by default the host of the address connected to.
    :raises ConfigError: ``gssapi`` is not installed, the keytab is unreadable, or a value is
        malformed.
    """

    mechanism: ClassVar[str] = GSSAPI
    #: OAUTHBEARER's token provider, which a Kerberos login never has (the connection asks).
    token_provider: ClassVar[None] = None

    principal: str | None = None
    keytab: str | os.PathLike[str] | None = None
    ticket_cache: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    service_host: str | None = None
    # The keytab's tickets go to this process-private cache, shared by every connection
    # made with this config, so each needs only a service ticket.
    _memory_cache: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        if not self.service_name or any(c in self.service_name for c in "/@ "):
            raise errors.ConfigError(
                f"GSSAPI service_name {self.service_name!r} must be a plain name like 'kafka'"
            )
        if self.service_host is not None and (
            not self.service_host or any(c in self.service_host for c in "/@ :")
        ):
            raise errors.ConfigError(
                f"GSSAPI service_host {self.service_host!r} must be a host name like "
                "'broker1.example.com'"
            )
        if self.principal is not None and not self.principal.strip():
            raise errors.ConfigError("GSSAPI principal must not be empty")
        if self.ticket_cache is not None and not self.ticket_cache:
            raise errors.ConfigError("GSSAPI ticket_cache must not be empty")
        if self.keytab is not None:
            path = Path(self.keytab)
            if self.principal is None:
                raise errors.ConfigError(
                    "GSSAPI keytab needs principal= (the keytab's principal to log in as)"
                )
            if not path.is_file() or not os.access(path, os.R_OK):
                raise errors.ConfigError(f"GSSAPI keytab {str(path)!r} is not a readable file")
            object.__setattr__(self, "keytab", str(path))
            object.__setattr__(self, "_memory_cache", f"MEMORY:sharecon-{secrets.token_hex(8)}")
        _gssapi()

    def _new_mechanism(self, token: OAuthBearerToken | None = None) -> GssapiMechanism:
        """A fresh exchange for one (re-)authentication (``token`` is OAUTHBEARER's)."""
        return GssapiMechanism(self)


def _describe(exc: BaseException) -> str:
    # python-gssapi's message is "Major (...): <major text>, Minor (...): <minor text>"
    # spread over lines; one line reads better in a log.
    return " ".join(str(exc).split()) or type(exc).__name__


class GssapiMechanism(SaslMechanism):
    """One GSSAPI exchange (RFC 4752 over Kafka's SaslAuthenticate); see the module doc.

    Set :attr:`server_host` (the connection does) before the first :meth:`step`.
    """

    name = GSSAPI
    blocking = True

    def __init__(self, config: GssapiConfig) -> None:
        self._config = config
        self._context: Any = None
        self._state = "start"
        self._phase = "logging in"

    def step(self, server_token: bytes | None) -> bytes:
        """Advance the exchange; raises SaslAuthenticationFailedError naming what failed."""
        gssapi = _gssapi()
        try:
            return self._step(gssapi, server_token)
        except gssapi.exceptions.GSSError as exc:
            raise errors.SaslAuthenticationFailedError(
                f"GSSAPI: {self._phase} failed: {_describe(exc)}{self._hint(_describe(exc))}"
            ) from None

    def _hint(self, reason: str) -> str:
        # MIT's words ("No credentials cache found", "Server not found in Kerberos
        # database") do not say where it looked or what to change: say so.
        if self._state != "start":
            return ""
        config = self._config
        if self._phase.startswith("getting a ticket") and "not found" in reason:
            return (
                f" (the KDC does not know {self.service_principal}: check service_name, and "
                "service_host or the address the broker advertises)"
            )
        if config.keytab is not None and self._phase.startswith("logging in"):
            keytab = os.fspath(config.keytab)
            return f" (does the keytab {keytab} hold {config.principal}'s current key?)"
        if config.keytab is None and (self._phase.startswith("logging in") or "xpired" in reason):
            cache = (
                config.ticket_cache or os.environ.get("KRB5CCNAME") or "the default ticket cache"
            )
            return f" (no usable ticket in {cache}: run kinit?)"
        return ""

    @property
    def service_principal(self) -> str:
        """``service/host``, the broker principal this exchange asks a ticket for."""
        host = self._config.service_host or self.server_host
        return f"{self._config.service_name}/{host}"

    def _step(self, gssapi: ModuleType, server_token: bytes | None) -> bytes:
        if self._state == "start":
            if not (self._config.service_host or self.server_host):
                raise errors.SaslAuthenticationFailedError("GSSAPI: no broker host to name")
            who = self._config.principal or "the ticket cache's principal"
            self._phase = f"logging in as {who}"
            creds = self._credentials(gssapi)
            self._phase = f"getting a ticket for {self.service_principal}"
            self._context = self._new_context(gssapi, creds)
            token = bytes(self._context.step() or b"")
            self._state = "context"
            self._phase = f"authenticating to {self.service_principal}"
            return token
        if server_token is None:
            raise errors.SaslAuthenticationFailedError("GSSAPI: the broker sent no token")
        if self._state == "context":
            if not self._context.complete:
                # RFC 4752: once our context is complete with no token to send, we send an
                # empty one, and the broker answers with the security-layer offer.
                return bytes(self._context.step(server_token) or b"")
            self._phase = "the security-layer negotiation"
            answer = self._security_layer(server_token)
            self._state = "done"
            self.done = True
            return answer
        raise errors.SaslAuthenticationFailedError("GSSAPI: unexpected extra broker message")

    def _credentials(self, gssapi: ModuleType) -> Any:
        config = self._config
        name = (
            gssapi.Name(config.principal, gssapi.NameType.kerberos_principal)
            if config.principal
            else None
        )
        store: dict[str, str] = {}
        if config.keytab is not None:
            store["client_keytab"] = os.fspath(config.keytab)
            store["ccache"] = config.ticket_cache or config._memory_cache
        elif config.ticket_cache is not None:
            store["ccache"] = config.ticket_cache
        return gssapi.Credentials(
            name=name,
            usage="initiate",
            mechs=[gssapi.MechType.kerberos],
            store=store or None,
        )

    def _new_context(self, gssapi: ModuleType, creds: Any) -> Any:
        host = self._config.service_host or self.server_host
        target = gssapi.Name(
            f"{self._config.service_name}@{host}", gssapi.NameType.hostbased_service
        )
        flags = (
            gssapi.RequirementFlag.mutual_authentication
            | gssapi.RequirementFlag.out_of_sequence_detection
            | gssapi.RequirementFlag.integrity
        )
        return gssapi.SecurityContext(
            name=target,
            creds=creds,
            usage="initiate",
            mech=gssapi.MechType.kerberos,
            flags=flags,
        )

    def _security_layer(self, wrapped: bytes) -> bytes:
        # RFC 4752 section 3.1: the broker's 4 octets are the layers it offers (a bit mask)
        # and its largest buffer; we take "no security layer", which needs no buffer size.
        offer = bytes(self._context.unwrap(wrapped).message)
        if len(offer) != 4:
            raise errors.SaslAuthenticationFailedError(
                f"GSSAPI: the broker's security-layer offer is {len(offer)} bytes, not 4"
            )
        if not offer[0] & _NO_SECURITY_LAYER:
            raise errors.SaslAuthenticationFailedError(
                f"GSSAPI: the broker offers security layers {offer[0]:#04x} without "
                "'no security layer', the only one Kafka clients use"
            )
        # The authorization id is our own principal, as the Java client sends it.
        authzid = str(self._context.initiator_name).encode()
        answer = bytes((_NO_SECURITY_LAYER, 0, 0, 0)) + authzid
        return bytes(self._context.wrap(answer, False).message)
