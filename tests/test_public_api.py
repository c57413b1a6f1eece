"""No private types in public signatures.

Walks every name in ``sharecon.__all__`` and in the ``__all__`` of every public submodule
(no path component starting with ``_``), and every signature they have: functions,
classes' ``__init__`` and public methods, and properties. Each annotation is parsed, each
name in it resolved in the module that wrote it (its imports, including those under
``TYPE_CHECKING``), and a name that resolves to a sharecon object fails the test unless
that object is public: exported by ``sharecon.__all__`` or by a public submodule's
``__all__``. So ``ConnectionConfig`` (defined in ``sharecon._net.connect``) may appear in
a signature only because ``sharecon.config`` exports it; ``Cluster`` may not appear at all.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

import sharecon

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# Importing these runs the command line.
_SKIP_MODULES = {"sharecon.__main__", "sharecon.cli.__main__"}


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def public_modules() -> list[ModuleType]:
    """``sharecon`` and every public submodule (imported)."""
    out = [sharecon]
    for info in pkgutil.walk_packages(sharecon.__path__, "sharecon."):
        if info.name in _SKIP_MODULES or not _is_public(info.name):
            continue
        out.append(importlib.import_module(info.name))
    return out


@functools.cache
def public_objects() -> frozenset[int]:
    """Ids of every object a public module exports in its ``__all__``."""
    ids: set[int] = set()
    for module in public_modules():
        for name in getattr(module, "__all__", ()):
            ids.add(id(getattr(module, name)))
    return frozenset(ids)


@functools.cache
def imports_of(module_name: str) -> dict[str, str]:
    """``{local name: "module:attribute"}`` for every ``from X import Y`` in a module
    (also those under ``if TYPE_CHECKING:``), resolved against the module's package."""
    module = sys.modules[module_name]
    source = inspect.getsource(module)
    table: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module is not None
            or (isinstance(node, ast.ImportFrom) and node.level)
        ):
            assert isinstance(node, ast.ImportFrom)
            base = node.module or ""
            if node.level:
                package = (
                    module_name if hasattr(module, "__path__") else module_name.rpartition(".")[0]
                )
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                table[alias.asname or alias.name] = f"{base}:{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                table[alias.asname or alias.name.split(".")[0]] = f"{alias.name}:"
    return table


def resolve(name: str, module_name: str) -> Any:
    """The object ``name`` means in ``module_name`` (``None`` if not a sharecon object)."""
    module = sys.modules[module_name]
    if hasattr(module, name):
        return getattr(module, name)
    target = imports_of(module_name).get(name)
    if target is None:
        return None
    source, _, attribute = target.partition(":")
    if not source.startswith("sharecon"):
        return None
    imported = importlib.import_module(source)
    return getattr(imported, attribute) if attribute else imported


def annotation_names(annotation: object) -> Iterator[str]:
    """The root names an annotation (a string, as ``from __future__ import annotations``
    leaves them) refers to: ``ConnectionConfig | None`` -> ``ConnectionConfig``."""
    if not isinstance(annotation, str):
        return
    for node in ast.walk(ast.parse(annotation, mode="eval")):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from annotation_names(node.value)  # a quoted part


def signatures(name: str, obj: object) -> Iterator[tuple[str, Callable[..., Any], str]]:
    """``(where, callable, module it was written in)`` for every public signature of a
    public object."""
    if inspect.isclass(obj):
        for attr, value in vars(obj).items():
            if attr.startswith("_") and attr != "__init__":
                continue
            if isinstance(value, property) and value.fget is not None:
                yield f"{name}.{attr}", value.fget, obj.__module__
            elif isinstance(value, (classmethod, staticmethod)):
                yield f"{name}.{attr}", value.__func__, obj.__module__
            elif inspect.isfunction(value):
                yield f"{name}.{attr}", value, obj.__module__
    elif inspect.isfunction(obj):
        yield name, obj, obj.__module__


def private_types_in_public_signatures() -> list[str]:
    """Every ``where: parameter -> type`` naming a sharecon object that is not public."""
    public = public_objects()
    found: set[str] = set()
    for module in public_modules():
        for export in getattr(module, "__all__", ()):
            obj = getattr(module, export)
            for where, fn, written_in in signatures(f"{module.__name__}.{export}", obj):
                for param, annotation in inspect.get_annotations(fn).items():
                    for ref in annotation_names(annotation):
                        target = resolve(ref, written_in)
                        if target is None or not getattr(target, "__module__", "").startswith(
                            "sharecon"
                        ):
                            continue
                        if isinstance(target, ModuleType) or id(target) in public:
                            continue
                        if type(target).__name__ in ("TypeVar", "ParamSpec"):
                            continue  # a type variable is not a type from anywhere
                        found.add(
                            f"{where}: {param} -> {ref} "
                            f"({target.__module__}.{getattr(target, '__qualname__', ref)})"
                        )
    return sorted(found)


def test_public_modules_are_walked() -> None:
    names = {m.__name__ for m in public_modules()}
    assert {"sharecon", "sharecon.consumer", "sharecon.producer", "sharecon.admin"} <= names
    assert not any(n.startswith("sharecon._") for n in names)


def test_no_private_type_in_a_public_signature() -> None:
    found = private_types_in_public_signatures()
    assert not found, "private types in public signatures:\n" + "\n".join(found)


def test_the_walker_finds_a_private_type() -> None:
    """The check can fail: a public function annotated with a private type is reported."""
    fake = ModuleType("sharecon.fake_public")
    exec(
        "from __future__ import annotations\n"
        "from sharecon._net.cluster import Cluster\n"
        "def peek(cluster: Cluster) -> None:\n"
        "    '''A public function taking a private type.'''\n"
        "__all__ = ['peek']\n",
        fake.__dict__,
    )
    sys.modules[fake.__name__] = fake
    fake.peek.__module__ = fake.__name__
    try:
        refs = [
            (param, resolve(ref, fake.__name__))
            for _, fn, _ in signatures("peek", fake.peek)
            for param, annotation in inspect.get_annotations(fn).items()
            for ref in annotation_names(annotation)
        ]
    finally:
        del sys.modules[fake.__name__]
    from sharecon._net.cluster import Cluster

    assert refs == [("cluster", Cluster)]
    assert id(Cluster) not in public_objects()
