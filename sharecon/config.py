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
* :class:`SaslConfig`: SASL PLAIN / SCRAM credentials (``sasl=`` on every client).
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
from sharecon._net.properties import ClientProperties, OAuthBearerProperties, from_properties
from sharecon._net.sasl import SaslConfig
from sharecon._net.tls import TlsConfig

__all__ = [
    "DEFAULT_RETRY_BACKOFF",
    "Backoff",
    "ClientProperties",
    "ConnectionConfig",
    "OAuthBearerProperties",
    "SaslConfig",
    "TlsConfig",
    "from_properties",
]

#: The producer's default ``retry_backoff``: 0.1 s, doubling, at most 1 s, ±20 % jitter
#: (the Java client's ``retry.backoff.ms`` and ``retry.backoff.max.ms``).
DEFAULT_RETRY_BACKOFF: Backoff = RETRY_BACKOFF
