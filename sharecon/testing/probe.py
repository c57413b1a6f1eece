"""Ask a broker what it supports, over one blocking PLAINTEXT socket (no JVM, no event loop).

Used by the demo and the version-matrix tests to show that share groups are enabled:
``ApiVersions`` lists the share RPCs and, from v3 on, the finalized ``share.version``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from sharecon.errors import KafkaConnectionError, RemoteProtocolError
from sharecon.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
    decode_response_for,
    encode_request,
)

__all__ = ["SHARE_APIS", "ShareSupport", "api_versions", "share_support"]

#: The RPCs a share consumer needs, by name and API key.
SHARE_APIS: dict[str, int] = {
    "ShareGroupHeartbeat": ShareGroupHeartbeatRequest.api_key,
    "ShareGroupDescribe": ShareGroupDescribeRequest.api_key,
    "ShareFetch": ShareFetchRequest.api_key,
    "ShareAcknowledge": ShareAcknowledgeRequest.api_key,
}
# v3 carries the features; v4 also lists supported features whose minimum is 0 (share.version).
_VERSION = 4


@dataclass(frozen=True, slots=True)
class ShareSupport:
    """What a broker says about share groups."""

    share_version: int  #: finalized ``share.version`` (0 = share groups off)
    share_version_max: int  #: highest ``share.version`` the broker supports
    apis: dict[str, tuple[int, int]]  #: share RPC name -> (min, max) version offered

    @property
    def enabled(self) -> bool:
        """Share groups usable: feature finalized at >= 1 and every share RPC offered."""
        return self.share_version >= 1 and set(self.apis) == set(SHARE_APIS)


def api_versions(bootstrap: str, *, timeout: float = 10.0) -> ApiVersionsResponse:
    """Send ApiVersions v4 to ``host:port`` and return the decoded response.

    :raises KafkaConnectionError: the broker could not be reached or closed the socket.
    :raises RemoteProtocolError: the answer was not a valid ApiVersions response.
    """
    host, _, port = bootstrap.rpartition(":")
    request = ApiVersionsRequest(client_software_name="sharecon-probe", client_software_version="0")
    frame = encode_request(request.api_key, _VERSION, 1, "sharecon-probe", request)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
            sock.sendall(frame)
            size = int.from_bytes(_recv_exactly(sock, 4), "big", signed=True)
            if not 0 <= size <= 1 << 20:
                raise RemoteProtocolError(
                    f"ApiVersions response frame size {size} from {bootstrap}"
                )
            payload = _recv_exactly(sock, size)
    except OSError as exc:
        raise KafkaConnectionError(f"ApiVersions to {bootstrap} failed: {exc}") from exc
    _, response = decode_response_for(request, _VERSION, payload)
    return response


def share_support(bootstrap: str, *, timeout: float = 10.0) -> ShareSupport:
    """Read share-group support from the broker's ApiVersions answer."""
    response = api_versions(bootstrap, timeout=timeout)
    if response.error_code:
        raise RemoteProtocolError(f"ApiVersions from {bootstrap}: error code {response.error_code}")
    by_key = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    supported = {f.name: f.max_version for f in response.supported_features}
    return ShareSupport(
        share_version=finalized.get("share.version", 0),
        share_version_max=supported.get("share.version", 0),
        apis={name: by_key[key] for name, key in SHARE_APIS.items() if key in by_key},
    )


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)
