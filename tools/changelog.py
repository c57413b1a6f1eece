"""CHANGELOG.md as data: its checks, and the release notes of one version.

The changelog follows Keep a Changelog: a ``## [VERSION]`` (or ``## [Unreleased]``)
heading per release, under it at most one ``### TYPE`` heading per type of change, each
with its list of entries. ``tests/test_changelog.py`` runs :func:`problems`;
``scripts/release`` writes the notes of the version it builds with :func:`notes`::

    python tools/changelog.py check          # exit 1 naming each problem
    python tools/changelog.py notes [VERSION] # the notes of VERSION (default: Unreleased)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"

#: Keep a Changelog's types of change, in the order a release lists them.
TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")

_RELEASE = re.compile(r"^## \[(?P<name>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?\s*$")
_TYPE = re.compile(r"^### (?P<type>.+?)\s*$")


@dataclass(slots=True)
class Release:
    """One ``## [...]`` section: its name, line, the text before its first type heading,
    and each ``### TYPE`` heading with its line and body, in file order."""

    name: str
    line: int
    intro: list[str] = field(default_factory=list)
    sections: list[tuple[str, int, list[str]]] = field(default_factory=list)


def parse(text: str) -> list[Release]:
    """The releases of a changelog's text, newest first as written."""
    releases: list[Release] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if m := _RELEASE.match(line):
            releases.append(Release(m["name"], number))
        elif line.startswith("## "):
            raise ValueError(f"line {number}: a release heading is '## [VERSION]', not {line!r}")
        elif releases and (m := _TYPE.match(line)):
            releases[-1].sections.append((m["type"], number, []))
        elif releases and re.match(r"^\[[^\]]+\]: ", line):
            continue  # the link references at the end
        elif releases and releases[-1].sections:
            releases[-1].sections[-1][2].append(line)
        elif releases:
            releases[-1].intro.append(line)
    return releases


def problems(text: str) -> list[str]:
    """What is wrong with a changelog's text (an empty list when nothing is)."""
    try:
        releases = parse(text)
    except ValueError as exc:
        return [str(exc)]
    found: list[str] = []
    if not releases:
        found.append("no '## [...]' release heading")
    names = [r.name for r in releases]
    if "Unreleased" in names and names.index("Unreleased") != 0:
        found.append("[Unreleased] is not the first release")
    for dup in sorted({n for n in names if names.count(n) > 1}):
        found.append(f"release [{dup}] has more than one heading")
    for release in releases:
        seen: dict[str, int] = {}
        for kind, line, body in release.sections:
            where = f"[{release.name}] line {line}"
            if kind not in TYPES:
                found.append(f"{where}: '### {kind}' is not one of {', '.join(TYPES)}")
            elif kind in seen:
                found.append(f"{where}: a second '### {kind}' (the first is line {seen[kind]})")
            else:
                seen[kind] = line
            if not any(b.startswith("- ") for b in body):
                found.append(f"{where}: '### {kind}' lists no entry")
        order = [k for k, _, _ in release.sections if k in TYPES]
        if order != sorted(order, key=TYPES.index):
            found.append(f"[{release.name}]: types out of order {order}; expected {TYPES}")
    return found


def notes(text: str, version: str = "Unreleased") -> str:
    """The release notes of ``version``: its sections as markdown, types in order."""
    for release in parse(text):
        if release.name == version:
            break
    else:
        raise KeyError(f"CHANGELOG.md has no [{version}] release")
    out: list[str] = []
    intro = "\n".join(release.intro).strip()
    if intro:
        out += [intro, ""]
    for kind, _, body in release.sections:
        out += [f"## {kind}", "", "\n".join(body).strip(), ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    """``python tools/changelog.py check | notes [VERSION]``."""
    text = CHANGELOG.read_text()
    if argv == ["check"]:
        bad = problems(text)
        for problem in bad:
            print(f"CHANGELOG.md: {problem}", file=sys.stderr)
        return 1 if bad else 0
    if argv[:1] == ["notes"] and len(argv) <= 2:
        sys.stdout.write(notes(text, *argv[1:]))
        return 0
    print("usage: changelog.py check | notes [VERSION]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
