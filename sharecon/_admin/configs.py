"""DescribeConfigs and IncrementalAlterConfigs: requests, answers, and credentials kept out
of errors (the package's rule 2: a broker may quote a value it refuses)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sharecon import errors
from sharecon._admin.check import raise_for
from sharecon._admin.results import ConfigEntry, ConfigSource, ResourceType
from sharecon.protocol import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from sharecon.protocol.messages.describe_configs import DescribeConfigsResource
from sharecon.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from sharecon.protocol import DescribeConfigsResponse, IncrementalAlterConfigsResponse

__all__ = [
    "alter_configs_request",
    "check_altered",
    "config_source",
    "configs_of",
    "describe_configs_request",
    "is_sensitive_config",
    "redact_config_values",
    "resource_label",
]

SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
# Config names whose values are credentials (ssl.key.password, sasl.jaas.config,
# ...oauthbearer.client.secret, ssl.keystore.key): such a value never appears in an error.
_SENSITIVE_CONFIG = re.compile(r"password|secret|jaas|token|credential|keystore\.key", re.I)
_HIDDEN = "[hidden]"


def resource_label(resource_type: ResourceType, name: str) -> str:
    """``group 'billing'``, ``client metrics 's'``: a resource as errors name it."""
    return f"{resource_type.name.lower().replace('_', ' ')} {name!r}"


def config_source(value: int) -> ConfigSource | int:
    """The :class:`ConfigSource` of ``value``, or the number itself if it is a new one."""
    try:
        return ConfigSource(value)
    except ValueError:
        return value


def is_sensitive_config(name: str) -> bool:
    """True for a config whose value is a credential (its name mentions a password, a
    secret, a token, a JAAS config or a private key), so it is never shown."""
    return _SENSITIVE_CONFIG.search(name) is not None


def redact_config_values(text: str, configs: Mapping[str, str | None]) -> str:
    """``text`` (e.g. a broker's error message) with the value of every sensitive config in
    ``configs`` replaced by ``[hidden]``: brokers may quote a value they refuse."""
    for key, value in configs.items():
        if value and is_sensitive_config(key):
            text = text.replace(value, _HIDDEN)
    return text


def alter_configs_request(
    resource_type: ResourceType, name: str, configs: Mapping[str, str | None]
) -> IncrementalAlterConfigsRequest:
    """Set each config with a value, remove each whose value is ``None``."""
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
                    for k, v in configs.items()
                ),
            ),
        )
    )


def check_altered(
    response: IncrementalAlterConfigsResponse,
    resource_type: ResourceType,
    name: str,
    configs: Mapping[str, str | None],
) -> None:
    """:raises BrokerError: the first error, naming the resource and the broker's reason
    (credentials hidden)."""
    for r in response.responses:
        detail = r.error_message and redact_config_values(r.error_message, configs)
        err = errors.error_for_code(
            r.error_code,
            f"altering configs of {resource_label(resource_type, name)}"
            + (f": {detail}" if detail else ""),
        )
        if err is not None:
            raise err


def describe_configs_request(
    resource_type: ResourceType, name: str, keys: Iterable[str] | None
) -> DescribeConfigsRequest:
    """Every config of one resource, or only ``keys``."""
    return DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configuration_keys=None if keys is None else tuple(keys),
            ),
        )
    )


def configs_of(
    response: DescribeConfigsResponse, resource_type: ResourceType, name: str
) -> dict[str, ConfigEntry]:
    """The configs by name.

    :raises BrokerError: naming the resource.
    """
    out: dict[str, ConfigEntry] = {}
    for result in response.results:
        raise_for(
            result.error_code,
            f"describing configs of {resource_label(resource_type, name)}",
            result.error_message,
        )
        for c in result.configs:
            out[c.name] = ConfigEntry(
                c.name, c.value, config_source(c.config_source), c.read_only, c.is_sensitive
            )
    return out
