"""The code blocks of the README, the guides and the examples, as the doc tests run them.

Sources:

* Markdown (``README.md``, ``docs/*.md``): fenced blocks. ``bash``/``sh``/``shell`` blocks
  run as one bash script (``set -e -o pipefail``); ``console`` blocks run their ``$ ``
  lines; ``python`` blocks run as a script. Other languages (``text``, ``json``,
  ``toml``, ...) are output or file contents and are not run.
* ``examples/*.py``: the module docstring's reST literal blocks (a paragraph ending in
  ``::``, then an indented block) are shell commands.

A block runs unless a marker on the line just before it (markdown: the nearest non-blank
line above the fence; docstrings: a ``.. doc-test: ...`` comment line anywhere after the
previous literal block) says otherwise:

``<!-- doc-test: foreground -->``
    a long-running program (a server, a consumer loop): each command line starts on its
    own, must print a first line, then gets SIGINT (Ctrl-C) and must end cleanly (exit 0
    or 130, no traceback).
``<!-- doc-test: fragment -->``
    Python that is part of a program, not a whole one (names such as ``handle`` come from
    the reader's code): compiled (top-level ``await`` allowed) and its ``sharecon`` imports
    checked, not run.
``<!-- doc-test: skip REASON -->``
    not run, for the reason given (kept to a handful; a test counts them).

A file whose first line is ``<!-- doc-test: no-broker -->`` runs without the harness's
broker on localhost:9092 (its own commands start one there).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHELL = frozenset({"bash", "sh", "shell", "console"})
RUN = SHELL | {"python"}
NOT_RUN = frozenset({"text", "json", "toml", "yaml", "ini", ""})
KINDS = frozenset({"run", "foreground", "fragment", "skip"})

_MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*([\w-]+)\s*(.*?)\s*-->\s*$")
_RST_MARKER = re.compile(r"^\s*\.\. doc-test:\s*([\w-]+)\s*(.*?)\s*$")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass(frozen=True, slots=True)
class Block:
    """One block: where it is, its language, its text and what to do with it."""

    path: Path
    line: int
    lang: str
    code: str
    kind: str = "run"
    note: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """The shell command lines (comments and blank lines left out)."""
        lines = self.code.splitlines()
        if self.lang == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]

    def script(self) -> str:
        """The block as a bash script (console: its ``$`` lines)."""
        if self.lang == "console":
            return "\n".join(self.commands()) + "\n"
        return self.code


def markdown_blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file, with its marker."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        kind, note = "run", ""
        above = start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = _MARKER.match(lines[above]) if above >= 0 else None
        if marker:
            kind, note = marker.group(1), marker.group(2)
        blocks.append(Block(path, start + 1, lang, "\n".join(body) + "\n", kind, note))
    return blocks


def docstring_blocks(path: Path) -> list[Block]:
    """The literal blocks of a module docstring, as shell commands."""
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree, clean=False) or ""
    lines = doc.splitlines()
    blocks: list[Block] = []
    kind, note = "run", ""
    i = 0
    while i < len(lines):
        marker = _RST_MARKER.match(lines[i])
        if marker:
            kind, note = marker.group(1), marker.group(2)
        if not lines[i].rstrip().endswith("::"):
            i += 1
            continue
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        body: list[str] = []
        start = i
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
            body.append(lines[i][4:])
            i += 1
        code = "\n".join(body).strip("\n") + "\n"
        # The docstring opens on the file's first line, so its line i is the file's i + 1.
        blocks.append(Block(path, start + 1, "bash", code, kind, note))
        kind, note = "run", ""
    return blocks


def doc_files() -> list[Path]:
    """The files whose blocks are tested, README first."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").glob("*.py")),
    ]


def blocks_of(path: Path) -> list[Block]:
    return docstring_blocks(path) if path.suffix == ".py" else markdown_blocks(path)


def needs_broker(path: Path) -> bool:
    if path.suffix != ".md":
        return True
    first = path.read_text().split("\n", 1)[0]
    m = _MARKER.match(first)
    return not (m and m.group(1) == "no-broker")
