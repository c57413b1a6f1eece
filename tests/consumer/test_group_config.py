"""Where the consumer's lock_duration() comes from, without a broker: the group's config,
else the coordinator's broker default; errors typed (the broker test is in test_api.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from sharecon import errors
from sharecon._consumer.group_config import lock_duration
from sharecon.protocol import DescribeConfigsRequest, DescribeConfigsResponse
from sharecon.protocol.error_codes import ErrorCode
from sharecon.protocol.messages.describe_configs import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
)

pytestmark = pytest.mark.anyio

Answer = tuple[int, str | None]  # (error code, value of the key or None if absent)


class FakeCluster:
    """Answers DescribeConfigs for the GROUP resource (any broker) and the coordinator's
    BROKER resource (node 7), recording who was asked what."""

    def __init__(self, group: Answer, broker: Answer = (0, None)) -> None:
        self.answers = {32: group, 4: broker}
        self.asked: list[tuple[int | None, int, str, tuple[str, ...] | None]] = []

    async def coordinator(self, group_id: str, *, timeout: float | None = None) -> int:
        return 7

    async def request_any(self, body: DescribeConfigsRequest, *, timeout: float) -> Any:
        return self._answer(None, body)

    async def request(self, node: int, body: DescribeConfigsRequest, *, timeout: float) -> Any:
        return self._answer(node, body)

    def _answer(self, node: int | None, body: DescribeConfigsRequest) -> DescribeConfigsResponse:
        (res,) = body.resources
        self.asked.append((node, res.resource_type, res.resource_name, res.configuration_keys))
        code, value = self.answers[res.resource_type]
        configs = ()
        if value is not None and res.configuration_keys:
            configs = (DescribeConfigsResourceResult(name=res.configuration_keys[0], value=value),)
        return DescribeConfigsResponse(
            results=(
                DescribeConfigsResult(
                    error_code=code,
                    error_message="denied" if code else None,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=configs,
                ),
            )
        )


async def ask(cluster: FakeCluster, timeout: float = 5.0) -> float:
    return await lock_duration(cast("Any", cluster), "billing", timeout=timeout)


async def test_the_groups_value_comes_first() -> None:
    cluster = FakeCluster(group=(0, "4500"), broker=(0, "30000"))
    assert await ask(cluster) == 4.5
    assert cluster.asked == [(None, 32, "billing", ("share.record.lock.duration.ms",))]


@pytest.mark.parametrize(
    "group", [(ErrorCode.GROUP_AUTHORIZATION_FAILED, None), (0, None)], ids=["denied", "absent"]
)
async def test_the_coordinators_broker_default_is_the_fallback(group: Answer) -> None:
    cluster = FakeCluster(group=group, broker=(0, "20000"))
    assert await ask(cluster) == 20.0
    assert cluster.asked[1] == (7, 4, "7", ("group.share.record.lock.duration.ms",))


async def test_when_neither_can_be_read_the_error_is_typed() -> None:
    cluster = FakeCluster(
        group=(ErrorCode.GROUP_AUTHORIZATION_FAILED, None),
        broker=(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None),
    )
    with pytest.raises(errors.ClusterAuthorizationFailedError) as info:
        await ask(cluster)
    assert isinstance(info.value.__cause__, errors.GroupAuthorizationFailedError)
    with pytest.raises(errors.IncompatibleBrokerError, match="reports neither"):
        await ask(FakeCluster(group=(0, None), broker=(0, None)))


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
async def test_a_value_that_is_not_a_duration_is_refused(value: str) -> None:
    with pytest.raises(errors.RemoteProtocolError, match="not a positive number of milliseconds"):
        await ask(FakeCluster(group=(0, value)))


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), True])
async def test_a_bad_timeout_is_a_config_error(timeout: float) -> None:
    cluster = FakeCluster(group=(0, "4500"))
    with pytest.raises(errors.ConfigError, match="timeout"):
        await ask(cluster, timeout)
    assert cluster.asked == []
