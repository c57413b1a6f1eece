"""Packaging metadata tells the truth: one version, the supported Pythons, the license, the
project's addresses, and the dependencies the code imports.

No broker, no network: the checks read pyproject.toml and the installed metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import sharecon

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
REPO = "https://github.com/sharecon/sharecon"
DOCS = "https://sharecon.github.io/sharecon/"


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        data: dict[str, Any] = tomllib.load(f)
    return data


def test_installed_version_is_the_package_version() -> None:
    assert importlib.metadata.version("sharecon") == sharecon.__version__


def test_version_has_one_source(project: dict[str, Any]) -> None:
    """pyproject declares no version of its own: hatchling reads sharecon/_version.py."""
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "sharecon/_version.py"
    tree = ast.parse((ROOT / "sharecon" / "_version.py").read_text())
    assigned = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
    ]
    assert assigned == [sharecon.__version__]


def test_a_classifier_per_supported_python(project: dict[str, Any]) -> None:
    classifiers = project["project"]["classifiers"]
    listed = sorted(
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert listed == sorted(SUPPORTED, key=lambda v: tuple(map(int, v.split("."))))
    assert project["project"]["requires-python"] == f">={SUPPORTED[0]}"
    assert any(c.startswith("Operating System :: ") for c in classifiers)
    assert any(c.startswith("Topic :: ") for c in classifiers)


def test_license_is_apache_2(project: dict[str, Any]) -> None:
    """The SPDX expression is the license metadata (PEP 639); the full text ships as LICENSE."""
    assert project["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    # PEP 639: license classifiers are superseded by the expression.
    assert not any(c.startswith("License ::") for c in project["project"]["classifiers"])


def test_project_urls_agree_with_the_docs_site(project: dict[str, Any]) -> None:
    urls = project["project"]["urls"]
    assert urls == {
        "Homepage": REPO,
        "Documentation": DOCS,
        "Source": REPO,
        "Issues": f"{REPO}/issues",
        "Changelog": f"{REPO}/blob/main/CHANGELOG.md",
    }
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert f"site_url: {DOCS}\n" in mkdocs
    assert f"repo_url: {REPO}\n" in mkdocs


def test_changelog_follows_keep_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "## [Unreleased]" in text
    assert sharecon.__version__ in text
    assert re.search(r"^\[Unreleased\]: https://", text, flags=re.M)


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in reqs}


def test_rich_is_a_required_dependency_as_the_docs_say(project: dict[str, Any]) -> None:
    """The CLI's progress bars and the worker's status lines import rich on a terminal, with
    no fallback: it is a dependency, and the install docs name it."""
    assert "rich" in _requirement_names(project["project"]["dependencies"])
    assert "rich" in (ROOT / "README.md").read_text().split("## Install", 1)[1].split("##")[0]
    cli_guide = (ROOT / "docs" / "cli.md").read_text()
    assert "rich" in cli_guide


def test_docs_extra_builds_the_site_and_dev_installs_it(project: dict[str, Any]) -> None:
    extras = project["project"]["optional-dependencies"]
    # (plus a pin of pymdown-extensions on Python 3.10, where the newest versions clash)
    assert {"mkdocs", "mkdocs-material", "mkdocstrings"} <= _requirement_names(extras["docs"])
    assert any(r.startswith("sharecon[") and "docs" in r for r in extras["dev"])
