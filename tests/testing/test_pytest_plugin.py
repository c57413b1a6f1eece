"""sharecon's pytest plugin as another project sees it: registered by installing sharecon,
and a deliberate ``pytest.skip`` stays a skip unless the project opts into failing skipped
broker tests under ``CI=true`` (as this project's own pyproject does).

The test files run here never start a broker: they mark tests ``broker`` explicitly or
only collect them.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from sharecon.testing.pytest_plugin import FORBID_SKIPS_INI

if TYPE_CHECKING:
    import pytest

SKIPPING = """
import pytest

@pytest.mark.broker
def test_needs_a_feature_the_user_lacks():
    pytest.skip("deliberately skipped by the user")

def test_plain_skip():
    pytest.skip("not a broker test")
"""

OPT_IN = f"""
[pytest]
{FORBID_SKIPS_INI} = true
"""


def test_installing_sharecon_registers_the_plugin() -> None:
    (ep,) = entry_points(group="pytest11", name="sharecon")
    assert ep.value == "sharecon.testing.pytest_plugin"


def test_fixtures_are_there_without_a_conftest(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures")
    assert result.ret == 0
    # One line each: pytest lists fixtures in definition order, which is not this order.
    for name in ("kafka_bootstrap", "share_group_factory", "fake_kafka", "fake_kafka_factory"):
        result.stdout.fnmatch_lines([f"{name} *--*"])


def test_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_uses(kafka_bootstrap): pass")
    result = pytester.runpytest_subprocess("-p", "no:sharecon")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'kafka_bootstrap' not found*"])


def test_a_users_skip_stays_a_skip_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(SKIPPING)
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*deliberately skipped by the user*"])


def test_opted_in_project_fails_a_skipped_broker_test_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makeini(OPT_IN)
    pytester.makepyfile(SKIPPING)
    result = pytester.runpytest_subprocess()
    # Only the broker test fails; a skip in a test that needs no broker stays a skip.
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [f"*broker test skipped under CI=true ({FORBID_SKIPS_INI} is set)*deliberately*"]
    )


def test_opted_in_project_keeps_skips_outside_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini(OPT_IN)
    pytester.makepyfile(SKIPPING)
    pytester.runpytest_subprocess().assert_outcomes(skipped=2)


def test_this_project_opts_in(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.getini(FORBID_SKIPS_INI) is True


def test_fixture_users_get_the_broker_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_with_broker(topic): pass
        def test_without(): pass
        """
    )
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-m", "not broker")
    result.stdout.fnmatch_lines(["*test_without*", "*1 deselected*"])
    assert "test_with_broker" not in result.stdout.str()
