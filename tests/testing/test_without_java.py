"""With an existing cluster (``SHARECON_BOOTSTRAP``) no fixture but ``kafka_tools`` needs a
local Java: topics and group configs go through sharecon's Admin, records through
sharecon's Producer. Proven by running a user's test file with Java taken away, against
this session's broker (started separately, by this process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.testing.no_java import run_user_tests_without_java

if TYPE_CHECKING:
    from sharecon.testing.env import ClusterHandle

pytestmark = pytest.mark.broker


def test_fixtures_need_no_java_with_an_external_cluster(
    kafka_broker: ClusterHandle, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_BOOTSTRAP", kafka_broker.bootstrap)
    monkeypatch.delenv("SHARECON_BROKER", raising=False)
    result = run_user_tests_without_java(pytester, monkeypatch)
    result.assert_outcomes(passed=3)
