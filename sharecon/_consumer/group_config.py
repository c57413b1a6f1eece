"""The share group's settings a consumer may ask about: its acquisition lock duration,
and whether it takes lock renewals.

Rules of this module:

1. The group's own value comes first: DescribeConfigs on the GROUP resource. A broker
   answers it with the effective value, whether set on the group or inherited from the
   broker's ``group.share.record.lock.duration.ms``.
2. If that cannot be read (the principal may not describe the group's configs, or the
   broker leaves the key out), the group coordinator's own
   ``group.share.record.lock.duration.ms`` is asked for (DescribeConfigs on its BROKER
   resource): the coordinator's setting is the one that applies to the group.
3. Nothing is cached: a group config can change at any time.
4. ``share.renew.acknowledge.enable`` (Kafka 4.3+; true unless set): whether the broker
   applies RENEW answers for the group. ``None`` when it cannot be told (an older broker
   that does not report it, or a principal without DESCRIBE_CONFIGS on the group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharecon import errors
from sharecon._consumer.config import check_seconds

if TYPE_CHECKING:
    from sharecon._net.cluster import Cluster

__all__ = [
    "BROKER_LOCK_DURATION",
    "GROUP_LOCK_DURATION",
    "GROUP_RENEW_ENABLE",
    "lock_duration",
    "renewals_enabled",
]

#: The group config (KIP-932).
GROUP_LOCK_DURATION = "share.record.lock.duration.ms"
#: The broker's default for every share group.
BROKER_LOCK_DURATION = "group.share.record.lock.duration.ms"
#: The group config (Kafka 4.3+) that lets the broker refuse lock renewals (rule 4).
GROUP_RENEW_ENABLE = "share.renew.acknowledge.enable"

# DescribeConfigs resource types (as sharecon.admin.ResourceType, which layer 4 internals
# do not import).
_BROKER = 4
_GROUP = 32


async def lock_duration(cluster: Cluster, group_id: str, *, timeout: float) -> float:
    """The acquisition lock duration of ``group_id``, in seconds (rules 1-2).

    :raises ConfigError: ``timeout`` is not a positive number of seconds.
    :raises BrokerError: neither the group's nor the coordinator's config could be read
        (the coordinator's error, e.g. CLUSTER_AUTHORIZATION_FAILED, chained to the
        group's).
    :raises IncompatibleBrokerError: the cluster reports neither setting.
    :raises RemoteProtocolError: the value reported is not a positive number of ms.
    """
    timeout = check_seconds("timeout", timeout)
    group_error: errors.BrokerError | None = None
    try:
        value = await _describe(cluster, None, _GROUP, group_id, GROUP_LOCK_DURATION, timeout)
    except errors.BrokerError as exc:
        group_error = exc
        value = None
    key = GROUP_LOCK_DURATION
    if value is None:
        key = BROKER_LOCK_DURATION
        node = await cluster.coordinator(group_id, timeout=timeout)
        try:
            value = await _describe(cluster, node, _BROKER, str(node), key, timeout)
        except errors.BrokerError as exc:
            raise exc from group_error
    if value is None:
        raise errors.IncompatibleBrokerError(
            f"group {group_id!r}: the cluster reports neither {GROUP_LOCK_DURATION} nor "
            f"{BROKER_LOCK_DURATION}"
        ) from group_error
    try:
        ms = int(value)
    except ValueError:
        ms = 0
    if ms <= 0:
        raise errors.RemoteProtocolError(
            f"group {group_id!r}: the broker reported {key}={value!r}, not a positive number "
            "of milliseconds"
        )
    return ms / 1000


async def renewals_enabled(cluster: Cluster, group_id: str, *, timeout: float) -> bool | None:
    """Whether the broker takes RENEW answers for ``group_id`` (rule 4); ``None`` when it
    cannot be told."""
    try:
        value = await _describe(cluster, None, _GROUP, group_id, GROUP_RENEW_ENABLE, timeout)
    except errors.KafkaError:  # refused, or no answer in time: cannot be told
        return None
    if value is None:
        return None
    return value.strip().lower() != "false"


async def _describe(
    cluster: Cluster, node: int | None, resource_type: int, name: str, key: str, timeout: float
) -> str | None:
    """The value of config ``key`` of one resource (``None`` if the answer lacks it), asked
    of ``node`` (any broker for ``None``)."""
    # Imported here: a consumer that never asks (keep_locks off, no lock_duration() call)
    # never creates these message classes.
    from sharecon.protocol.messages.describe_configs import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )

    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=(key,)
            ),
        )
    )
    if node is None:
        response = await cluster.request_any(request, timeout=timeout)
    else:
        response = await cluster.request(node, request, timeout=timeout)
    for result in response.results:
        err = errors.error_for_code(
            result.error_code,
            f"describing {key} of {name!r}"
            + (f": {result.error_message}" if result.error_message else ""),
        )
        if err is not None:
            raise err
        for config in result.configs:
            if config.name == key and config.value is not None:
                return config.value
    return None
