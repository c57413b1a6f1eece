"""The folder tree is the layer diagram: each layer imports only from the layers below it.

1 protocol (sans-I/O) < 2 _share (sans-I/O, synchronous) < 3 _net (anyio) < 4 clients.
`sharecon.errors` and `sharecon.types` are plain data, importable from every layer.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "sharecon"

# Imports that would bring I/O, clocks, threads or logging into a sans-I/O layer.
IO_MODULES = {
    "anyio",
    "asyncio",
    "trio",
    "socket",
    "ssl",
    "time",
    "logging",
    "threading",
    "selectors",
    "subprocess",
}
SANS_IO_BASE = {"sharecon.errors", "sharecon.types", "sharecon._version", "sharecon._backoff"}

RULES: dict[str, tuple[set[str], set[str]]] = {
    # layer folder: (sharecon modules it may import, third-party/stdlib modules it must not import)
    "protocol": (SANS_IO_BASE | {"sharecon.protocol"}, IO_MODULES),
    "_share": (SANS_IO_BASE | {"sharecon.protocol", "sharecon._share"}, IO_MODULES),
    "_net": (SANS_IO_BASE | {"sharecon.protocol", "sharecon._net"}, set()),
    # The command line is a client of the public layer-4 API; it must not reach into tests.
    "cli": (
        SANS_IO_BASE
        | {
            "sharecon",
            "sharecon.protocol",
            "sharecon._net",
            "sharecon.cli",
            "sharecon.consumer",
            "sharecon.producer",
            "sharecon.admin",
            "sharecon.dlq",
            "sharecon.record",
            "sharecon.partitioner",
        },
        set(),
    ),
    # Layer 4 internals: everything below, plus the public record type; never the CLI/testing.
    "_consumer": (
        SANS_IO_BASE
        | {
            "sharecon.protocol",
            "sharecon._share",
            "sharecon._net",
            "sharecon._consumer",
            "sharecon.record",
        },
        set(),
    ),
}


def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative import: resolve against the module's package.
                parts = path.relative_to(PKG.parent).with_suffix("").parts[: -node.level]
                base = ".".join(parts)
                found.append((node.lineno, f"{base}.{node.module}" if node.module else base))
            elif node.module:
                found.append((node.lineno, node.module))
                if node.module == "sharecon":
                    found.extend((node.lineno, f"sharecon.{a.name}") for a in node.names)
    return found


def allowed(module: str, prefixes: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports(layer: str) -> None:
    may_import, forbidden = RULES[layer]
    violations = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for lineno, module in imports_of(path):
            top = module.split(".")[0]
            if module.startswith("sharecon"):
                if module == "sharecon":
                    continue  # `from sharecon import errors`: each imported name is checked too
                if not allowed(module, may_import):
                    violations.append(f"{path.relative_to(PKG.parent)}:{lineno} imports {module}")
            elif top in forbidden:
                violations.append(f"{path.relative_to(PKG.parent)}:{lineno} imports {module}")
    assert not violations, "layering violations:\n" + "\n".join(violations)


def test_rules_cover_existing_layers() -> None:
    """Every private layer folder has a rule, so a new one cannot slip past this test."""
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - {"testing"} <= set(RULES), folders
