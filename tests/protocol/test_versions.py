"""Version negotiation against an ApiVersions response, and feature levels."""

from __future__ import annotations

import pytest

from sharecon.errors import IncompatibleBrokerError, UnsupportedVersionError
from sharecon.protocol import (
    CLIENT_VERSIONS,
    ApiVersionsResponse,
    MetadataRequest,
    ShareFetchRequest,
    ShareFetchResponse,
    negotiate,
)
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages import REQUESTS
from sharecon.protocol.messages.api_versions import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from sharecon.protocol.versions import SHARE_CONSUMER_APIS, api_name, finalized_features


def _resp(ranges: dict[int, tuple[int, int]], **kw: object) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        api_keys=tuple(
            ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items()
        ),
        **kw,  # type: ignore[arg-type]
    )


# A Kafka 4.2-like broker.
BROKER_42 = {
    0: (3, 13),
    1: (4, 18),
    3: (0, 13),
    10: (0, 6),
    18: (0, 4),
    76: (1, 1),
    77: (1, 1),
    78: (1, 2),
    79: (1, 2),
    90: (0, 1),
}


def test_client_ranges_are_within_what_messages_can_encode() -> None:
    """Every range in CLIENT_VERSIONS is encodable by its message classes."""
    for key, (lo, hi) in CLIENT_VERSIONS.items():
        cls = REQUESTS[key]
        assert cls.min_version <= lo <= hi <= cls.max_version, cls.__name__
        assert cls.response_type.min_version <= lo <= hi <= cls.response_type.max_version


def test_negotiate_picks_highest_common_version() -> None:
    """Highest version both sides support; APIs the broker lacks are simply absent."""
    table = negotiate(_resp(BROKER_42), SHARE_CONSUMER_APIS)
    assert table.version(78) == 2
    assert table.version(ShareFetchRequest) == 2
    assert table.version(ShareFetchResponse) == 2
    assert table.version(MetadataRequest) == 13
    assert table.version(18) == 4
    assert table.version(1) == 17  # broker offers 18, we speak up to 17
    assert table.version(0) == 13
    assert table.get(36) is None  # SaslAuthenticate not offered
    assert not table.supports(36)
    assert table.supports(79)
    assert table.broker_ranges[1] == (4, 18)


def test_negotiate_respects_broker_maximum() -> None:
    """A 4.1 broker (ShareFetch 1 only) gets v1."""
    table = negotiate(_resp({**BROKER_42, 78: (1, 1), 79: (1, 1)}), SHARE_CONSUMER_APIS)
    assert table.version(78) == 1
    assert table.version(79) == 1


def test_delete_groups_negotiates_flexible_versions_only() -> None:
    """DeleteGroups: v2 from a 4.1-4.3 broker (0-2), v3 from 4.4 (0-3); never classic v0/v1."""
    assert negotiate(_resp({**BROKER_42, 42: (0, 2)})).version(42) == 2
    assert negotiate(_resp({**BROKER_42, 42: (0, 3)})).version(42) == 3
    assert not negotiate(_resp({**BROKER_42, 42: (0, 1)})).supports(42)


def test_missing_required_api_is_named() -> None:
    """A 4.0 broker (ShareFetch v0 only) cannot serve us: the error names the API and ranges."""
    broker = {**BROKER_42, 78: (0, 0)}
    del broker[76]
    with pytest.raises(IncompatibleBrokerError) as info:
        negotiate(_resp(broker), SHARE_CONSUMER_APIS)
    text = str(info.value)
    assert "ShareFetch (key 78): client speaks 1-2, broker offers 0" in text
    assert "ShareGroupHeartbeat (key 76): client speaks 1, broker offers none" in text
    assert "ShareAcknowledge" not in text


def test_version_of_unavailable_api_raises() -> None:
    """Looking up an API that did not negotiate raises IncompatibleBrokerError naming it."""
    table = negotiate(_resp(BROKER_42))
    with pytest.raises(IncompatibleBrokerError, match="SaslAuthenticate"):
        table.version(36)


def test_error_code_in_response_raises_broker_error() -> None:
    """An ApiVersions error (e.g. 35 UNSUPPORTED_VERSION) is not silently negotiated."""
    with pytest.raises(UnsupportedVersionError):
        negotiate(_resp(BROKER_42, error_code=ErrorCode.UNSUPPORTED_VERSION))


def test_features_are_exposed() -> None:
    """Finalized and supported features come out as plain mappings."""
    resp = _resp(
        BROKER_42,
        finalized_features_epoch=12,
        finalized_features=(
            FinalizedFeatureKey(name="share.version", max_version_level=1, min_version_level=1),
            FinalizedFeatureKey(name="metadata.version", max_version_level=27, min_version_level=1),
        ),
        supported_features=(
            SupportedFeatureKey(name="share.version", min_version=0, max_version=1),
        ),
    )
    table = negotiate(resp)
    assert table.feature_level("share.version") == 1
    assert table.feature_level("metadata.version") == 27
    assert table.feature_level("streams.version") == 0
    assert table.supported_features["share.version"] == (0, 1)
    assert table.features_epoch == 12
    assert finalized_features(resp) == {"share.version": 1, "metadata.version": 27}


def test_api_name() -> None:
    """Keys map to Kafka's API names."""
    assert api_name(78) == "ShareFetch"
    assert api_name(MetadataRequest) == "Metadata"
    assert api_name(4242) == "api key 4242"
