"""Test support for sharecon and for applications built on it: a real Kafka broker.

* :class:`KafkaBroker`: start a Kafka 4.x broker (KRaft, share groups on) from Python.
* :class:`KafkaTools`: Kafka's Java tools (topics, group configs, producing) for arranging tests.
* :class:`KafkaCluster`: a controller quorum and several brokers, each killable.
* :class:`OidcIssuer`: a loopback OIDC issuer (token endpoint, JWKS) for OAUTHBEARER tests.
* :class:`DeliveryTally`: count every record of a fault run and explain each duplicate.
* :class:`KerberosKdc`: a real MIT Kerberos KDC with a throwaway realm, for SASL GSSAPI
  (``KafkaBroker(gssapi=kdc.broker_setup())``).
* :class:`FaultProxy`: a loopback TCP proxy (Toxiproxy) that cuts, stalls, delays or
  throttles the connections of a client under test.
* :class:`FakeKafka`: an in-process fake broker (no JVM, starts in milliseconds) for unit
  tests of share-group code; held true against real Kafka by a differential suite.
* ``sharecon.testing.pytest_plugin``: pytest fixtures built on the broker and the tools.

See ``docs/testing.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sharecon.testing._provision import (
        DEFAULT_KAFKA_VERSION,
        LATEST_PATCH,
        BrokerStartError,
        KafkaInstall,
        provision,
    )
    from sharecon.testing.broker import (
        AuthorizerSetup,
        ClientCertificate,
        KafkaBroker,
        OAuthSetup,
        SaslSetup,
        TlsSetup,
    )
    from sharecon.testing.cluster import ClusterBroker, KafkaCluster
    from sharecon.testing.fake import FakeKafka
    from sharecon.testing.fault_proxy import FaultProxy, FaultProxyError, ToxiproxyServer
    from sharecon.testing.kdc import KdcStartError, KerberosKdc, KerberosSetup
    from sharecon.testing.oidc import OidcIssuer
    from sharecon.testing.tally import DeliveryTally, TallyReport
    from sharecon.testing.tools import FeatureLevel, KafkaToolError, KafkaTools, ProduceResult

# Imported on first use, so that ``python -m sharecon.testing.broker`` does not find its
# own module already imported by the package (runpy warns about that).
_LAZY = {
    "DEFAULT_KAFKA_VERSION": "sharecon.testing._provision",
    "LATEST_PATCH": "sharecon.testing._provision",
    "BrokerStartError": "sharecon.testing._provision",
    "KafkaInstall": "sharecon.testing._provision",
    "provision": "sharecon.testing._provision",
    "ClientCertificate": "sharecon.testing.broker",
    "AuthorizerSetup": "sharecon.testing.broker",
    "KafkaBroker": "sharecon.testing.broker",
    "SaslSetup": "sharecon.testing.broker",
    "OAuthSetup": "sharecon.testing.broker",
    "OidcIssuer": "sharecon.testing.oidc",
    "TlsSetup": "sharecon.testing.broker",
    "ClusterBroker": "sharecon.testing.cluster",
    "KafkaCluster": "sharecon.testing.cluster",
    "FakeKafka": "sharecon.testing.fake",
    "DeliveryTally": "sharecon.testing.tally",
    "TallyReport": "sharecon.testing.tally",
    "FaultProxy": "sharecon.testing.fault_proxy",
    "FaultProxyError": "sharecon.testing.fault_proxy",
    "ToxiproxyServer": "sharecon.testing.fault_proxy",
    "KdcStartError": "sharecon.testing.kdc",
    "KerberosKdc": "sharecon.testing.kdc",
    "KerberosSetup": "sharecon.testing.kdc",
    "FeatureLevel": "sharecon.testing.tools",
    "KafkaToolError": "sharecon.testing.tools",
    "KafkaTools": "sharecon.testing.tools",
    "ProduceResult": "sharecon.testing.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sharecon.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "LATEST_PATCH",
    "AuthorizerSetup",
    "BrokerStartError",
    "ClientCertificate",
    "ClusterBroker",
    "DeliveryTally",
    "FakeKafka",
    "FaultProxy",
    "FaultProxyError",
    "KafkaCluster",
    "KafkaInstall",
    "TallyReport",
    "FeatureLevel",
    "KafkaBroker",
    "KafkaToolError",
    "KdcStartError",
    "KerberosKdc",
    "KerberosSetup",
    "KafkaTools",
    "OAuthSetup",
    "OidcIssuer",
    "ProduceResult",
    "SaslSetup",
    "TlsSetup",
    "ToxiproxyServer",
    "provision",
]
