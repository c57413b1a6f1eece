"""The pytest example in docs/testing.md runs as printed, and needs its anyio marker."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from sharecon.testing.env import ClusterHandle

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    (block,) = [b for b in blocks if "async def test_every_record_arrives" in b]
    return str(block)


def test_the_example_marks_its_tests_for_anyio() -> None:
    assert "pytestmark = pytest.mark.anyio" in _example()


@pytest.mark.broker
def test_the_example_passes_as_printed(
    kafka_broker: ClusterHandle, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_BOOTSTRAP", kafka_broker.bootstrap)
    pytester.makepyfile(test_doc=_example())
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.broker
def test_without_the_marker_pytest_does_not_run_it(
    kafka_broker: ClusterHandle, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_BOOTSTRAP", kafka_broker.bootstrap)
    source = _example().replace("pytestmark = pytest.mark.anyio", "")
    pytester.makepyfile(test_doc=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.parseoutcomes().get("passed", 0) == 0
    result.stdout.fnmatch_lines(["*async def functions are not natively supported*"])
