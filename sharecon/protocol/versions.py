"""The API versions this client speaks, and negotiation against a broker's ApiVersions.

:data:`CLIENT_VERSIONS` is the single list of what we send. The message classes can
encode a little more (ShareFetch/ShareAcknowledge v0 for golden tests, Fetch 4-17), but
negotiation only ever picks from this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, TypeAlias

from sharecon.errors import IncompatibleBrokerError, error_for_code
from sharecon.protocol.messages import REQUESTS, ApiKey

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from sharecon.protocol.messages._base import Message
    from sharecon.protocol.messages.api_versions import ApiVersionsResponse

__all__ = [
    "ADMIN_APIS",
    "CLIENT_VERSIONS",
    "PRODUCER_APIS",
    "SHARE_CONSUMER_APIS",
    "VersionTable",
    "api_name",
    "finalized_features",
    "negotiate",
]

#: API key -> (lowest, highest) version this client sends. The keys are plain ints (what
#: the broker's ApiVersions answer holds); ``ApiKey`` names them without importing the
#: message classes, which a client imports for the APIs it uses only.
_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.METADATA: (12, 13),
    ApiKey.FIND_COORDINATOR: (4, 6),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    # v0 was Kafka 4.0 early access and is gone from 4.1 brokers: never negotiate it.
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.PRODUCE: (9, 13),
    ApiKey.CREATE_TOPICS: (5, 7),
    ApiKey.DELETE_TOPICS: (4, 6),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (1, 1),
    ApiKey.DESCRIBE_CONFIGS: (4, 4),
    ApiKey.LIST_GROUPS: (5, 5),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # v2 is the first flexible version (Kafka 4.1-4.3 stop there); v3 (4.4) adds a
    # per-group error message. v0-1 are generated and tested but never sent.
    ApiKey.DELETE_GROUPS: (2, 3),
    # Earliest/latest offsets only; v6 is the first flexible version, v10 the newest
    # a Kafka 4.1 broker speaks.
    ApiKey.LIST_OFFSETS: (6, 10),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (2, 2),
    ApiKey.FETCH: (12, 17),
    # v3+ carries the producer id/epoch; v6 (two-phase commit) is not generated.
    ApiKey.INIT_PRODUCER_ID: (3, 5),
    # KIP-714 client telemetry (Kafka 3.7+).
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
}
CLIENT_VERSIONS: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {int(key): versions for key, versions in _VERSIONS.items()}
)

#: APIs a share consumer cannot work without.
SHARE_CONSUMER_APIS: Final[frozenset[int]] = frozenset(
    map(
        int,
        (
            ApiKey.METADATA,
            ApiKey.FIND_COORDINATOR,
            ApiKey.SHARE_GROUP_HEARTBEAT,
            ApiKey.SHARE_FETCH,
            ApiKey.SHARE_ACKNOWLEDGE,
        ),
    )
)
#: APIs the producer helper needs.
PRODUCER_APIS: Final[frozenset[int]] = frozenset(map(int, (ApiKey.METADATA, ApiKey.PRODUCE)))
#: APIs the admin helper needs for topic management.
ADMIN_APIS: Final[frozenset[int]] = frozenset(
    map(int, (ApiKey.METADATA, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS))
)

ApiRef: TypeAlias = "int | type[Message]"


def _key(api: ApiRef) -> int:
    return api if isinstance(api, int) else api.api_key


def api_name(api: ApiRef) -> str:
    """Human name of an API key (``"ShareFetch"``), or ``"api key N"`` if unknown."""
    cls = REQUESTS.get(_key(api))
    return cls.api_name if cls is not None else f"api key {_key(api)}"


def finalized_features(response: ApiVersionsResponse) -> dict[str, int]:
    """Finalized cluster features from an ApiVersions response, name -> max version level.

    ``finalized_features(resp).get("share.version", 0) >= 1`` means share groups are on.
    """
    return {f.name: f.max_version_level for f in response.finalized_features}


@dataclass(frozen=True, slots=True)
class VersionTable:
    """Result of :func:`negotiate`: the version to use per API, and the broker's features.

    ``versions`` holds every API both sides support (API key -> chosen version);
    ``broker_ranges`` everything the broker offered.
    """

    versions: Mapping[int, int]
    broker_ranges: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: Finalized feature levels (name -> max version level), e.g. ``{"share.version": 1}``.
    features: Mapping[str, int] = field(default_factory=dict)
    #: Feature ranges the broker supports (name -> (min, max)).
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: Epoch of the finalized features (-1 when the broker did not say).
    features_epoch: int = -1

    def get(self, api: ApiRef) -> int | None:
        """The negotiated version for ``api`` (key or request/response class), or None."""
        return self.versions.get(_key(api))

    def supports(self, api: ApiRef) -> bool:
        """Whether both sides share a version of ``api``."""
        return _key(api) in self.versions

    def version(self, api: ApiRef) -> int:
        """The negotiated version for ``api``.

        :raises IncompatibleBrokerError: naming the API and both sides' ranges.
        """
        key = _key(api)
        v = self.versions.get(key)
        if v is None:
            raise IncompatibleBrokerError(_missing_message([key], self.broker_ranges))
        return v

    def feature_level(self, name: str) -> int:
        """Finalized level of feature ``name`` (0 when not finalized)."""
        return self.features.get(name, 0)


def _range_text(r: tuple[int, int] | None) -> str:
    if r is None:
        return "none"
    return f"{r[0]}" if r[0] == r[1] else f"{r[0]}-{r[1]}"


def _missing_message(keys: Iterable[int], broker: Mapping[int, tuple[int, int]]) -> str:
    parts = []
    for key in sorted(keys):
        parts.append(
            f"{api_name(key)} (key {key}): client speaks {_range_text(CLIENT_VERSIONS.get(key))}, "
            f"broker offers {_range_text(broker.get(key))}"
        )
    return "broker does not support required API versions: " + "; ".join(parts)


def negotiate(
    response: ApiVersionsResponse,
    required: Iterable[ApiRef] = (),
    *,
    client_versions: Mapping[int, tuple[int, int]] = CLIENT_VERSIONS,
) -> VersionTable:
    """Pick, per API, the highest version both this client and the broker support.

    :param response: the broker's ApiVersions response.
    :param required: APIs (keys or classes) that must be usable, e.g.
        :data:`SHARE_CONSUMER_APIS`.
    :param client_versions: our ranges (default :data:`CLIENT_VERSIONS`).
    :raises BrokerError: if the response carries a non-zero error code.
    :raises IncompatibleBrokerError: naming every required API with no common version,
        with both sides' ranges.
    """
    err = error_for_code(response.error_code, "in the ApiVersions response")
    if err is not None:
        raise err
    broker: dict[int, tuple[int, int]] = {
        k.api_key: (k.min_version, k.max_version) for k in response.api_keys
    }
    chosen: dict[int, int] = {}
    for key, (lo, hi) in client_versions.items():
        offered = broker.get(key)
        if offered is None:
            continue
        top = min(hi, offered[1])
        if top >= max(lo, offered[0]):
            chosen[key] = top
    missing = [k for k in {_key(a) for a in required} if k not in chosen]
    if missing:
        raise IncompatibleBrokerError(_missing_message(missing, broker))
    return VersionTable(
        versions=MappingProxyType(chosen),
        broker_ranges=MappingProxyType(broker),
        features=MappingProxyType(finalized_features(response)),
        supported_features=MappingProxyType(
            {f.name: (f.min_version, f.max_version) for f in response.supported_features}
        ),
        features_epoch=response.finalized_features_epoch,
    )
