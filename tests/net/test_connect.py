"""Opening connections: configuration checks, and failures that name their cause."""

from __future__ import annotations

import logging
import math
import ssl

import pytest

from sharecon import errors
from sharecon._net import connect
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


# -- TLS settings -----------------------------------------------------------------------------


@pytest.fixture
def fresh_tls_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each weakened setting is reported once per process: start from none reported."""
    monkeypatch.setattr(connect, "_INSECURE_WARNED", set())


def _tls_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "TLS certificate verification" in r.getMessage()
    ]


@pytest.mark.usefixtures("fresh_tls_warnings")
def test_an_unverified_ssl_context_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sharecon")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    for _ in range(3):  # e.g. a consumer, a producer and an admin sharing one context
        ConnectionConfig(ssl_context=context)
    (message,) = _tls_warnings(caplog)
    assert "CERT_NONE" in message and "identity is not checked" in message


@pytest.mark.usefixtures("fresh_tls_warnings")
def test_hostname_checking_off_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sharecon")
    context = ssl.create_default_context()
    context.check_hostname = False  # verify_mode stays CERT_REQUIRED
    ConnectionConfig(ssl_context=context)
    ConnectionConfig(ssl_context=context)
    (message,) = _tls_warnings(caplog)
    assert "check_hostname is False" in message


@pytest.mark.usefixtures("fresh_tls_warnings")
def test_a_verifying_ssl_context_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sharecon")
    ConnectionConfig(ssl_context=ssl.create_default_context())
    ConnectionConfig()
    assert _tls_warnings(caplog) == []
