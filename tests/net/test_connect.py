"""Opening connections: configuration checks, and failures that name their cause."""

from __future__ import annotations

import math

import pytest

from sharecon import errors
from sharecon._net.connect import ConnectionConfig

# -- configuration ----------------------------------------------------------------------------


def test_client_id_longer_than_an_int16_string_is_refused_at_construction() -> None:
    with pytest.raises(errors.ConfigError, match="client_id"):
        ConnectionConfig(client_id="x" * 40_000)
    # The limit is in UTF-8 bytes, not characters.
    with pytest.raises(errors.ConfigError, match="client_id"):
        ConnectionConfig(client_id="é" * 20_000)
    assert ConnectionConfig(client_id="x" * 32767).client_id == "x" * 32767


@pytest.mark.parametrize("name", ["connect_timeout", "request_timeout"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0.0, -1.0])
def test_timeouts_must_be_finite_and_positive(name: str, value: float) -> None:
    with pytest.raises(errors.ConfigError, match=name):
        ConnectionConfig(**{name: value})  # type: ignore[arg-type]


def test_small_positive_timeouts_are_fine() -> None:
    config = ConnectionConfig(connect_timeout=0.01, request_timeout=1)
    assert config.connect_timeout == 0.01 and config.request_timeout == 1
