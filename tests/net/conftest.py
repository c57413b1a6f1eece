from __future__ import annotations

import pytest

from sharecon._net import tls


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Connection tests run under both asyncio and trio."""
    return str(request.param)


@pytest.fixture
def fresh_tls_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each weakened TLS setting is reported once per process: start from none reported."""
    monkeypatch.setattr(tls, "_INSECURE_WARNED", set())
