"""The folder tree is the layer diagram: each layer imports only from the layers below it.

1 protocol (sans-I/O) < 2 _share (sans-I/O, synchronous) < 3 _net (anyio) < 4 clients.
`sharecon.errors` and `sharecon.types` are plain data, importable from every layer.

Every import counts: module level, inside ``if TYPE_CHECKING:``, and inside functions.
The top-level modules (``sharecon/*.py``) have rules too, and no two sharecon modules may
import each other, directly or round a longer loop (see :data:`KNOWN_CYCLES`).
"""

from __future__ import annotations

import ast
import functools
import pathlib
from collections import deque
from itertools import pairwise

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "sharecon"
ROOT = "sharecon"

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
SANS_IO_BASE = {
    "sharecon.errors",
    "sharecon.types",
    "sharecon._version",
    "sharecon._backoff",
    # OAUTHBEARER token decisions (transient or permanent, when to ask again): pure.
    "sharecon._token_policy",
}
# The metric counters (sans-I/O, time passed in) and their public snapshots: clients feed them.
METRICS = {"sharecon._stats", "sharecon.metrics"}

RULES: dict[str, tuple[set[str], set[str]]] = {
    # layer folder: (sharecon modules it may import, third-party/stdlib modules it must not import)
    "protocol": (SANS_IO_BASE | {"sharecon.protocol"}, IO_MODULES),
    "_share": (SANS_IO_BASE | {"sharecon.protocol", "sharecon._share"}, IO_MODULES),
    "_net": (SANS_IO_BASE | {"sharecon.protocol", "sharecon._net"}, set()),
    # The producer's engine: sans-I/O like _share (time and wake-ups passed in); it may use
    # the pure partitioner (murmur2 of keys).
    "_produce": (
        SANS_IO_BASE | {"sharecon.protocol", "sharecon.partitioner", "sharecon._produce"},
        IO_MODULES,
    ),
    # The admin client's engine: sans-I/O like _share (requests, answers, retry decisions;
    # time passed in); Admin (sharecon/admin.py) is its façade and does the I/O.
    "_admin": (SANS_IO_BASE | {"sharecon.protocol", "sharecon._admin"}, IO_MODULES),
    # The producer's I/O side (layer 4 internals): the engine, the network, the counters.
    "_producer": (
        SANS_IO_BASE
        | METRICS
        | {
            "sharecon.protocol",
            "sharecon._net",
            "sharecon._produce",
            "sharecon._producer",
            "sharecon.serde",  # the context and wrapper types of serializers
        },
        set(),
    ),
    # The command line is a client of the public layer-4 API; it must not reach into tests.
    "cli": (
        SANS_IO_BASE
        | {
            ROOT,
            "sharecon.protocol",
            "sharecon._net",
            "sharecon.cli",
            "sharecon.consumer",
            "sharecon.producer",
            "sharecon.admin",
            "sharecon.dlq",
            "sharecon.record",
            "sharecon.partitioner",
            "sharecon.worker",
            "sharecon.exporter",
        },
        set(),
    ),
    # The multi-process worker: a client of the public layer-4 API (never the CLI).
    "worker": (
        SANS_IO_BASE
        | {
            "sharecon._net.sasl",
            "sharecon._net.oauth",  # OAUTHBEARER settings build an OidcTokenProvider
            "sharecon._net.environment",  # the connection variables, as the CLI's
            "sharecon._net.http_serve",  # the health endpoints (as the exporter serves)
            "sharecon.config",
            "sharecon.admin",
            "sharecon.consumer",
            "sharecon.dlq",
            "sharecon.record",
            "sharecon.worker",
        },
        set(),
    ),
    # The test kit (layer 4 tooling: brokers, fault proxies, tallies, the model broker): it
    # may use everything below it and the public clients, never the command line or the
    # worker; nothing in sharecon imports it (test_nothing_imports_the_test_kit).
    "testing": (
        SANS_IO_BASE
        | METRICS
        | {
            ROOT,
            "sharecon.admin",
            "sharecon.producer",
            "sharecon.consumer",
            "sharecon.dlq",
            "sharecon.protocol",
            "sharecon._share",
            "sharecon._net",
            "sharecon._consumer",
            # The producer simulation (testing/sim/produce.py) runs the producer's engine
            # and futures, as the consumer's runs _share and _consumer.
            "sharecon._produce",
            "sharecon._producer",
            "sharecon._lifecycle",
            "sharecon.record",
            "sharecon.config",
            "sharecon.serde",
            "sharecon.partitioner",
            "sharecon.testing",
            # sharecon.testing.faststream: TestShareClient runs the FastStream broker.
            "sharecon.faststream",
        },
        set(),
    ),
    # The FastStream broker (extra ``faststream``): a client of the public layer-4 API, as
    # the other integrations; never imported by the package root (test_extras_stay_optional).
    "faststream": (
        SANS_IO_BASE
        | {
            "sharecon.admin",
            "sharecon.producer",
            "sharecon.consumer",
            "sharecon.dlq",
            "sharecon.record",
            "sharecon.config",
            "sharecon.faststream",
            "sharecon.serde",
        },
        set(),
    ),
    # The blocking clients: façades over the public async clients (never their insides).
    "sync": (
        SANS_IO_BASE
        | METRICS
        | {
            "sharecon.admin",
            "sharecon.producer",
            "sharecon.consumer",
            "sharecon.record",
            "sharecon.serde",
            "sharecon.sync",
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
            # the context and wrapper types of (de)serializers: plain data
            "sharecon.serde",
        }
        | METRICS,
        set(),
    ),
}

# The public clients, which the dead-letter helpers and the package root build on.
CLIENTS = {"sharecon.admin", "sharecon.producer", "sharecon.consumer", "sharecon.dlq"}

TOP_LEVEL_RULES: dict[str, tuple[set[str], set[str]]] = {
    # top-level module: (sharecon modules it may import, modules it must not import)
    # Plain data and pure helpers, importable from every layer: they import (almost) nothing.
    # The bottom: the exception hierarchy and the generated error-code enum import nothing.
    "sharecon.errors": (set(), IO_MODULES),
    "sharecon.types": ({"sharecon.errors"}, IO_MODULES),
    "sharecon._version": (set(), IO_MODULES),
    # Which build is running: names the compiled modules, imports none of sharecon itself
    # (hatch_build.py reads it without importing sharecon).
    "sharecon._build": (set(), IO_MODULES),
    # The compiled build's C helpers, loaded where built: the C module and nothing else.
    "sharecon._native": ({"sharecon._speedups"}, IO_MODULES),
    "sharecon._backoff": ({"sharecon.errors", "sharecon.types"}, IO_MODULES),
    "sharecon._token_policy": ({"sharecon._backoff", "sharecon.errors"}, IO_MODULES),
    "sharecon.partitioner": ({"sharecon.errors", "sharecon.types"}, IO_MODULES),
    "sharecon.metrics": (set(), IO_MODULES),
    "sharecon._stats": ({"sharecon.metrics"}, IO_MODULES),
    # The public names of the settings objects (defined in the layers below).
    "sharecon.config": ({"sharecon._backoff", "sharecon._net"}, set()),
    # The clients' one runtime: lifecycle states and errors, task group, cluster, shutdown.
    "sharecon._lifecycle": (
        SANS_IO_BASE | {"sharecon.protocol", "sharecon._net", "sharecon._telemetry"},
        set(),
    ),
    # KIP-714 pushing for every client (run by the runtime): the plan's decisions, the
    # network, the metric tables for names.
    "sharecon._telemetry": (
        SANS_IO_BASE
        | METRICS
        | {"sharecon.protocol", "sharecon._net", "sharecon._share.telemetry"},
        set(),
    ),
    # Serializer helpers: pure functions over bytes (no I/O, no clock).
    "sharecon.serde": ({"sharecon.errors"}, IO_MODULES),
    # ``python -m sharecon``: the command line and nothing else.
    "sharecon.__main__": ({"sharecon.cli"}, set()),
    # The public record: data, typed against the protocol's header tuples.
    "sharecon.record": (
        {"sharecon.errors", "sharecon.types", "sharecon.protocol", "sharecon._native"},
        IO_MODULES,
    ),
    # Layer-4 clients: everything below them, never the CLI or the test helpers.
    "sharecon.admin": (
        SANS_IO_BASE
        | METRICS
        | {
            "sharecon.protocol",
            "sharecon._net",
            "sharecon._admin",
            "sharecon._lifecycle",
            "sharecon._telemetry",
        },
        set(),
    ),
    "sharecon.producer": (
        SANS_IO_BASE
        | METRICS
        | {
            "sharecon.protocol",
            "sharecon._net",
            "sharecon._produce",
            "sharecon._producer",
            "sharecon._lifecycle",
            "sharecon._telemetry",
            "sharecon.serde",
        },
        set(),
    ),
    "sharecon.dlq": (
        SANS_IO_BASE
        | {
            "sharecon.protocol",
            "sharecon._net",
            "sharecon.record",
            "sharecon.admin",
            "sharecon.producer",
            "sharecon._lifecycle",
        },
        set(),
    ),
    "sharecon.consumer": (
        SANS_IO_BASE
        | {
            "sharecon.protocol",
            "sharecon._share",
            "sharecon._net",
            "sharecon._consumer",
            "sharecon._lifecycle",
            "sharecon._telemetry",
            "sharecon.record",
            "sharecon.dlq",
            "sharecon.producer",
            "sharecon.serde",
        }
        | METRICS,
        set(),
    ),
    # The optional integrations (extras): clients of the public API and its metrics, never
    # imported by the package root (test_extras_stay_optional).
    "sharecon.otel": (
        SANS_IO_BASE | METRICS | CLIENTS | {"sharecon.record", "sharecon._share"},
        set(),
    ),
    "sharecon.prometheus": (SANS_IO_BASE | METRICS | CLIENTS, set()),
    # The share-group exporter: a client of Admin (its oldest-record Fetch included) and
    # the HTTP server (sharecon exporter serves it).
    "sharecon.exporter": (SANS_IO_BASE | {"sharecon.admin", "sharecon._net.http_serve"}, set()),
    # The package root re-exports the public API.
    ROOT: (
        SANS_IO_BASE
        | CLIENTS
        | METRICS
        | {
            "sharecon.protocol",
            "sharecon._share",
            "sharecon._net",
            "sharecon.record",
            "sharecon.config",
            "sharecon._build",
        },
        set(),
    ),
}

#: Import cycles between sharecon modules that are being removed. Each entry lists the
#: modules of one cycle in import order (the last imports the first). An entry that is no
#: longer a cycle fails ``test_known_cycles_are_real``: delete it then.
KNOWN_CYCLES: tuple[tuple[str, ...], ...] = ()


def module_name(path: pathlib.Path) -> str:
    """``sharecon/_net/cluster.py`` -> ``sharecon._net.cluster``; a package's ``__init__`` -> it."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def all_modules() -> dict[str, pathlib.Path]:
    found = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
    # An extension module written in C is known by its stub (sharecon/_speedups.pyi).
    for stub in sorted(PKG.rglob("*.pyi")):
        found.setdefault(module_name(stub), stub)
    return found


def _resolve(target: str) -> str:
    """The sharecon module an import of ``target`` loads: itself, or its longest module prefix."""
    modules = all_modules()
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every import in ``path`` as ``(line, module)``, wherever it sits in the file.

    ``from package import name`` counts as an import of ``package.name`` when that is a
    sharecon module (``from sharecon import errors``), else of ``package`` itself.
    """
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):  # walks function bodies and `if TYPE_CHECKING:` blocks too
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative import: resolve against the module's package.
                parts = module_name(path).split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep])
                module = f"{base}.{node.module}" if node.module else base
            elif node.module:
                module = node.module
            else:
                continue
            if module.startswith(ROOT):
                subs = [f"{module}.{a.name}" for a in node.names]
                modules = all_modules()
                found.extend((node.lineno, s) for s in subs if s in modules)
                if any(s not in modules for s in subs):
                    found.append((node.lineno, module))
            else:
                found.append((node.lineno, module))
    return found


def allowed(module: str, prefixes: set[str]) -> bool:
    # The package root is matched exactly: allowing `sharecon` must not allow all of it.
    return any(module == p or (p != ROOT and module.startswith(p + ".")) for p in prefixes)


def violations_of(path: pathlib.Path, may_import: set[str], forbidden: set[str]) -> list[str]:
    found = []
    for lineno, module in imports_of(path):
        where = f"{path.relative_to(PKG.parent)}:{lineno} imports {module}"
        if module == ROOT or module.startswith(ROOT + "."):
            if not allowed(_resolve(module), may_import):
                found.append(where)
        elif module.split(".")[0] in forbidden:
            found.append(where)
    return found


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports(layer: str) -> None:
    may_import, forbidden = RULES[layer]
    violations = []
    for path in sorted((PKG / layer).rglob("*.py")):
        violations += violations_of(path, may_import, forbidden)
    assert not violations, "layering violations:\n" + "\n".join(violations)


@pytest.mark.parametrize("module", sorted(TOP_LEVEL_RULES))
def test_top_level_module_imports(module: str) -> None:
    may_import, forbidden = TOP_LEVEL_RULES[module]
    violations = violations_of(all_modules()[module], may_import, forbidden)
    assert not violations, "layering violations:\n" + "\n".join(violations)


def test_rules_cover_existing_layers() -> None:
    """Every private layer folder has a rule, so a new one cannot slip past this test."""
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= set(RULES), folders


def test_rules_cover_top_level_modules() -> None:
    """Every ``sharecon/*.py`` has a rule, so a new one cannot slip past this test."""
    top = {module_name(p) for p in PKG.glob("*.py")}
    assert top == set(TOP_LEVEL_RULES)


def test_nothing_imports_the_test_kit() -> None:
    """``sharecon.testing`` is tooling for tests: no module outside it imports it."""
    found = [
        f"{path.relative_to(PKG.parent)}:{lineno} imports {module}"
        for name, path in all_modules().items()
        if not (name == "sharecon.testing" or name.startswith("sharecon.testing."))
        for lineno, module in imports_of(path)
        if module == "sharecon.testing" or module.startswith("sharecon.testing.")
    ]
    assert not found, "imports of the test kit:\n" + "\n".join(found)


#: A client's insides: its cluster view and its runtime. Only the client's own methods use
#: them; the CLI, the test kit and other clients go through public methods.
CLIENT_INSIDES = {"_open_cluster", "_runtime"}


def test_nothing_reaches_into_a_client() -> None:
    """No ``something._open_cluster`` or ``x._runtime`` except on ``self``: sharecon's own
    tools (the CLI, the test kit) use the clients' public seams (``Admin.api_versions``,
    ``Admin.find_coordinator``, ...)."""
    found = [
        f"{path.relative_to(PKG.parent)}:{node.lineno} reaches into .{node.attr}"
        for path in all_modules().values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr in CLIENT_INSIDES
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert not found, "reach-ins:\n" + "\n".join(found)


#: The share machine's modules: the code a seeded simulator drives with a virtual clock.
MACHINE = ("sharecon._share.machine", "sharecon._share.effects")
#: What would make the machine depend on the world outside its inputs: I/O, clocks,
#: threads, and randomness (a simulation replays a seed; the machine takes none).
MACHINE_FORBIDDEN = IO_MODULES | {"random", "secrets", "os", "datetime"}


@pytest.mark.parametrize("module", MACHINE)
def test_the_machine_imports_no_io_clock_or_randomness(module: str) -> None:
    """Stricter than its layer: no clock and no randomness either, so the same events
    always give the same effects."""
    path = all_modules()[module]
    violations = violations_of(path, RULES["_share"][0], MACHINE_FORBIDDEN)
    assert not violations, "the machine must stay deterministic:\n" + "\n".join(violations)
    # Nor a clock or a random id reached some other way.
    source = path.read_text()
    for call in ("time(", "monotonic(", "perf_counter(", "current_time(", "uuid4(", "uuid1("):
        assert call not in source, f"{module} calls {call}"


# -- import cycles ---------------------------------------------------------------------------


@functools.cache
def import_graph() -> dict[str, dict[str, str]]:
    """``graph[a][b]`` = where module ``a`` imports sharecon module ``b`` (``file:line``).

    A submodule import does not count as importing its parent packages (Python runs their
    ``__init__`` first, but a package's own ``__init__`` importing its children is how
    packages work, not a cycle).
    """
    graph: dict[str, dict[str, str]] = {}
    for name, path in all_modules().items():
        edges = graph.setdefault(name, {})
        for lineno, module in imports_of(path):
            if module == ROOT or module.startswith(ROOT + "."):
                target = _resolve(module)
                if target != name:
                    edges.setdefault(target, f"{path.relative_to(PKG.parent)}:{lineno}")
    return graph


def strongly_connected(graph: dict[str, dict[str, str]]) -> list[set[str]]:
    """The graph's strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def cycle_through(graph: dict[str, dict[str, str]], start: str, within: set[str]) -> list[str]:
    """A shortest import loop from ``start`` back to itself, inside ``within``."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w not in within:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")


def describe(graph: dict[str, dict[str, str]], cycle: list[str]) -> str:
    steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in pairwise(cycle)]
    return "\n    ".join(steps)


def test_no_import_cycles() -> None:
    """No sharecon module imports itself, however indirectly (bar :data:`KNOWN_CYCLES`)."""
    graph = import_graph()
    known = [set(c) for c in KNOWN_CYCLES]
    problems = []
    for component in strongly_connected(graph):
        if component in known:
            continue
        cycle = cycle_through(graph, min(component), component)
        problems.append(f"cycle among {sorted(component)}:\n    {describe(graph, cycle)}")
    assert not problems, "import cycles:\n" + "\n".join(problems)


def stale_entries(
    graph: dict[str, dict[str, str]], known: tuple[tuple[str, ...], ...]
) -> list[str]:
    """Allowlisted cycles that are no longer cycles exactly as written."""
    components = strongly_connected(graph)
    stale = []
    for cycle in known:
        loop = [*cycle, cycle[0]]
        missing = [f"{a} -> {b}" for a, b in pairwise(loop) if b not in graph.get(a, {})]
        if missing:
            stale.append(f"{cycle}: no import {', '.join(missing)}")
        elif set(cycle) not in components:
            stale.append(f"{cycle}: part of a larger cycle; list that one instead")
    return stale


def test_known_cycles_are_real() -> None:
    """Each allowlisted cycle still exists exactly as written; once removed, drop the entry."""
    stale = stale_entries(import_graph(), KNOWN_CYCLES)
    assert not stale, "stale KNOWN_CYCLES entries:\n" + "\n".join(stale)


def test_stale_entry_is_detected() -> None:
    graph = {"a": {"b": "a.py:1"}, "b": {"a": "b.py:1"}, "c": {"a": "c.py:1"}}
    assert stale_entries(graph, (("a", "b"), ("b", "a"))) == []
    assert stale_entries(graph, (("a", "c"),)) == ["('a', 'c'): no import a -> c"]


def test_cycle_finder_finds_a_planted_cycle() -> None:
    """The detector itself works: a three-module loop is found and reported in order."""
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:1"}, "d": {"a": "d:1"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert cycle_through(graph, "a", {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_extras_stay_optional() -> None:
    """``import sharecon`` (and every client) works without the extras installed: it never
    imports OpenTelemetry, prometheus_client or FastStream."""
    import subprocess
    import sys

    code = (
        "import sys, sharecon, sharecon.consumer, sharecon.producer, sharecon.metrics\n"
        "bad = sorted(m for m in sys.modules if m.startswith(\n"
        "    ('opentelemetry', 'prometheus_client', 'faststream', 'fast_depends')))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PKG.parent)
