"""CHANGELOG.md: one heading per type of change per release, and release notes from it.

No broker: the checks read the file (tools/changelog.py, which scripts/release runs too).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import sharecon

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


changelog = _load("changelog")

GOOD = """# Changelog

## [Unreleased]

Intro.

### Added

- one
- two

### Fixed

- three

## [0.1.0] - 2026-01-02

### Added

- first

[Unreleased]: https://example.invalid/compare
"""


def test_the_changelog_has_one_heading_per_type_per_release() -> None:
    assert changelog.problems((ROOT / "CHANGELOG.md").read_text()) == []


def test_the_working_version_is_unreleased() -> None:
    releases = changelog.parse((ROOT / "CHANGELOG.md").read_text())
    assert releases[0].name == "Unreleased"
    assert sharecon.__version__ in "".join(releases[0].intro)
    assert ".dev" in sharecon.__version__


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda t: t.replace("### Fixed", "### Added"), "a second '### Added'"),
        (lambda t: t.replace("### Fixed", "### Fixes"), "'### Fixes' is not one of"),
        (lambda t: t.replace("- three\n", ""), "'### Fixed' lists no entry"),
        (lambda t: t.replace("## [0.1.0] - 2026-01-02", "## [Unreleased]"), "more than one"),
        (lambda t: t.replace("## [0.1.0] - 2026-01-02", "## 0.1.0"), "a release heading is"),
        (
            lambda t: t.replace("### Added\n\n- one", "### Fixed\n\n- zero\n\n### Added\n\n- one"),
            "a second '### Fixed'",
        ),
    ],
)
def test_each_mistake_is_named(edit: object, problem: str) -> None:
    assert changelog.problems(GOOD) == []
    found = changelog.problems(edit(GOOD))  # type: ignore[operator]
    assert any(problem in p for p in found), found


def test_types_out_of_order_are_named() -> None:
    text = GOOD.replace(
        "### Added\n\n- one\n- two\n\n### Fixed\n\n- three",
        "### Fixed\n\n- three\n\n### Added\n\n- one",
    )
    assert any("out of order" in p for p in changelog.problems(text))


def test_release_notes_come_from_the_changelog() -> None:
    notes = changelog.notes(GOOD, "Unreleased")
    assert notes == "Intro.\n\n## Added\n\n- one\n- two\n\n## Fixed\n\n- three\n"
    assert changelog.notes(GOOD, "0.1.0") == "## Added\n\n- first\n"
    with pytest.raises(KeyError, match=r"no \[9\.9\] release"):
        changelog.notes(GOOD, "9.9")


def test_the_command_checks_and_prints_notes() -> None:
    script = ROOT / "tools" / "changelog.py"
    run = [sys.executable, str(script)]
    assert subprocess.run([*run, "check"], check=False, timeout=60).returncode == 0
    out = subprocess.run(
        [*run, "notes"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    assert out.startswith("Nothing has been released yet")
    assert out.count("\n## Added\n") == 1
