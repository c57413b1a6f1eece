"""Settings objects the clients take: connections, SASL credentials, retry backoff.

::

    from sharecon import Admin, Producer
    from sharecon.config import Backoff, ConnectionConfig, SaslConfig

    config = ConnectionConfig(client_id="billing", request_timeout=10.0,
                              sasl=SaslConfig("SCRAM-SHA-512", "billing", password))
    async with Admin(bootstrap, config=config) as admin, \\
               Producer(bootstrap, config=config,
                        retry_backoff=Backoff(initial=0.2, maximum=5.0)) as producer:
        ...

* :class:`ConnectionConfig`: how to open and use broker connections (client id,
  timeouts, TLS, SASL, largest frame); ``Producer(config=...)`` and ``Admin(config=...)``
  take one instead of their separate connection options.
* :class:`SaslConfig`: SASL PLAIN / SCRAM / OAUTHBEARER credentials (``sasl=`` on every client).
* :class:`OAuthBearerToken`: what an OAUTHBEARER token provider returns; any plain or async
  callable returning one is a provider.
* :class:`OidcTokenProvider`: tokens from an OIDC token endpoint by client credentials
  (Confluent Cloud, Keycloak, Okta, Entra ID, ...), refreshed at about 80 % of their life;
  :func:`oauthbearer_from_properties` builds one from Kafka client properties.
* :func:`msk_iam_token_provider`: AWS MSK IAM tokens (``pip install 'sharecon[aws]'``).
* :class:`GssapiConfig`: a Kerberos (SASL GSSAPI) login from a keytab or a ticket cache
  (``sasl=`` on every client; needs the ``sharecon[kerberos]`` extra).
* :class:`TlsConfig`: TLS from certificate files (CA; client certificate, key and key
  password for mutual TLS), re-read when the files change (``ConnectionConfig(tls=...)``).
* :func:`from_properties`: a Kafka ``client.properties`` file (or mapping) as the
  bootstrap servers and the ConnectionConfig they describe.
* :class:`Backoff`: jittered exponential delays between retries
  (``Producer(retry_backoff=...)``); :data:`DEFAULT_RETRY_BACKOFF` is the default.

Every value is checked when the object is made: a wrong one raises
:class:`~sharecon.errors.ConfigError` naming it.
"""

from __future__ import annotations

from sharecon._backoff import RETRY_BACKOFF, Backoff
from sharecon._net.connect import ConnectionConfig
from sharecon._net.msk import MskIamTokenProvider, msk_iam_token_provider
from sharecon._net.oauth import OidcTokenProvider
from sharecon._net.properties import (
    ClientProperties,
    OAuthBearerProperties,
    from_properties,
    oauthbearer_from_properties,
)
from sharecon._net.sasl import OAuthBearerToken, SaslConfig, TokenProvider
from sharecon._net.sasl_gssapi import GssapiConfig
from sharecon._net.tls import TlsConfig

__all__ = [
    "DEFAULT_RETRY_BACKOFF",
    "Backoff",
    "ClientProperties",
    "ConnectionConfig",
    "GssapiConfig",
    "MskIamTokenProvider",
    "OAuthBearerProperties",
    "OAuthBearerToken",
    "OidcTokenProvider",
    "SaslConfig",
    "TlsConfig",
    "TokenProvider",
    "from_properties",
    "msk_iam_token_provider",
    "oauthbearer_from_properties",
]

#: The producer's default ``retry_backoff``: 0.1 s, doubling, at most 1 s, ±20 % jitter
#: (the Java client's ``retry.backoff.ms`` and ``retry.backoff.max.ms``).
DEFAULT_RETRY_BACKOFF: Backoff = RETRY_BACKOFF
