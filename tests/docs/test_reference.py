"""The API reference covers every public name, and the site builds with ``--strict``.

Public means: listed in the ``__all__`` of a public module (``PUBLIC_MODULES``). Every
other module whose dotted name has no underscore part must be listed in ``NOT_PUBLIC``
with the reason, so a new module forces a decision.

Two checks: the ``:::`` directives of ``docs/reference/*.md`` name each public object
(fast, no build), and the built site has an anchor for each (what a reader sees; it also
catches names griffe cannot see statically, such as ``sharecon.errors``' generated
``__all__``).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sharecon

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"

PUBLIC_MODULES = (
    "sharecon",
    "sharecon.admin",
    "sharecon.consumer",
    "sharecon.producer",
    "sharecon.record",
    "sharecon.sync",
    "sharecon.types",
    "sharecon.dlq",
    "sharecon.errors",
    "sharecon.worker",
    "sharecon.partitioner",
    "sharecon.config",
    "sharecon.serde",
    "sharecon.metrics",
    "sharecon.otel",
    "sharecon.prometheus",
    "sharecon.exporter",
    "sharecon.testing",
    "sharecon.testing.broker",
    "sharecon.testing.cluster",
    "sharecon.testing.tools",
    "sharecon.testing.fault_proxy",
    "sharecon.testing.kdc",
    "sharecon.testing.tally",
    "sharecon.testing.chaos",
    "sharecon.testing.probe",
    "sharecon.testing.env",
    "sharecon.testing.pytest_plugin",
    "sharecon.testing.image",
    "sharecon.testing.app_image",
    "sharecon.testing.oidc",
    "sharecon.testing.telemetry",
    "sharecon.testing.fake",
    "sharecon.testing.faststream",
    "sharecon.faststream",
    "sharecon.faststream.annotations",
)

#: Module prefixes left out of the reference, and why (docs/reference/index.md says so too).
NOT_PUBLIC = {
    "sharecon.protocol": "layer 1 wire protocol, generated per Kafka version: internal",
    "sharecon.cli": "the command line is documented in docs/cli.md, not as Python API",
    "sharecon.testing.demo": "scripts/demo's program (python -m sharecon.testing.demo)",
    "sharecon.testing.model": "speaks sharecon.protocol's message classes: docs/testing.md",
    "sharecon.testing.conformance": "speaks sharecon.protocol's message classes: docs/testing.md",
    "sharecon.testing.sim": "drives sharecon's internal share machine: docs/testing.md",
    "sharecon.testing.fake.cluster": "speaks sharecon.protocol's message classes: docs/testing.md",
    "sharecon.testing.fake.log": "FakeKafka's record store: docs/testing.md",
    "sharecon.testing.fake.groups": "FakeKafka's group coordinator: docs/testing.md",
    "sharecon.testing.fake.server": "FakeKafka is documented from sharecon.testing.fake",
    "sharecon.testing.fake.differential": "the differential scenarios: docs/testing.md",
    "sharecon.faststream.broker": "ShareBroker is documented from sharecon.faststream",
    "sharecon.faststream.config": "re-exported from sharecon.faststream",
    "sharecon.faststream.message": "re-exported from sharecon.faststream",
    "sharecon.faststream.producer": "re-exported from sharecon.faststream",
    "sharecon.faststream.publisher": "re-exported from sharecon.faststream",
    "sharecon.faststream.subscriber": "re-exported from sharecon.faststream",
}

_DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$((?:\n[ \t]+.*)*)", re.M)
_SCALARS = (str, bytes, int, float, bool, tuple, frozenset, dict, type(None))


def _exports() -> dict[object, list[str]]:
    """Each exported object (by identity; constants by their own name) and every public
    dotted path that exports it."""
    found: dict[object, list[str]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            key: object = (name, attr) if isinstance(obj, _SCALARS) else id(obj)
            found.setdefault(key, []).append(f"{name}.{attr}")
    return found


def _directives() -> dict[str, str]:
    """``::: path`` -> its indented options block, over every reference page."""
    out: dict[str, str] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for m in _DIRECTIVE.finditer(page.read_text()):
            out[m.group(1)] = m.group(2)
    return out


def _covered(path: str, directives: dict[str, str]) -> bool:
    if path in directives:
        return True
    module, _, _name = path.rpartition(".")
    options = directives.get(module)
    # A whole-module directive renders the module's public members, unless it says
    # `members: false` or lists them.
    return options is not None and "members:" not in options


def test_every_module_is_public_or_excluded_with_a_reason() -> None:
    unknown = []
    for info in pkgutil.walk_packages(sharecon.__path__, "sharecon."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if info.name in PUBLIC_MODULES:
            continue
        if any(info.name == p or info.name.startswith(p + ".") for p in NOT_PUBLIC):
            continue
        unknown.append(info.name)
    assert unknown == [], "add to PUBLIC_MODULES (and a reference page) or NOT_PUBLIC"


def test_every_public_name_has_a_reference_directive() -> None:
    directives = _directives()
    missing = [
        paths[0] for paths in _exports().values() if not any(_covered(p, directives) for p in paths)
    ]
    assert missing == []


def test_every_directive_names_a_public_path() -> None:
    """A directive for a name that no longer exists would render nothing useful."""
    exported = {p for paths in _exports().values() for p in paths}
    for path in _directives():
        assert path in PUBLIC_MODULES or path in exported, path


def test_every_reference_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in REFERENCE.glob("*.md"):
        assert f"reference/{page.name}" in nav, page.name


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is not installed: pip install -e '.[docs]'"
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    return site


def test_the_built_site_has_an_anchor_for_every_public_name(built_site: Path) -> None:
    anchors: set[str] = set()
    for page in (built_site / "reference").rglob("*.html"):
        anchors |= set(re.findall(r'id="(sharecon[\w.]*)"', page.read_text()))
    missing = [paths[0] for paths in _exports().values() if not anchors.intersection(paths)]
    assert missing == []
    # Sphinx roles were rewritten, not shown as text.
    for page in (built_site / "reference").rglob("*.html"):
        assert ":class:" not in page.read_text(), page
