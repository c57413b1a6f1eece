"""Generate sharecon/protocol/messages/<api>.py from our message spec in tools/spec/.

Usage::

    python tools/gen_messages.py [--spec tools/spec] [--out sharecon/protocol/messages]

The spec (one JSON file per API, format described in tools/import_schemas.py) lives in
the repository, so a fresh clone regenerates the messages with nothing else at hand. The
output is our own dataclass form (snake_case fields, defaults from the spec, a
``kafka_fields`` spec list) with short doc lines of our own.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 0x7FFF
REPO = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO / "tools" / "spec"

# (message or struct class, schema field name) of fields that carry credentials: their value
# is left out of the dataclass repr, so a logged or printed message never shows a password.
# SaslAuthenticate's AuthBytes hold the PLAIN password and the SCRAM proof and signatures.
SECRET_FIELDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("SaslAuthenticateRequest", "AuthBytes"),
        ("SaslAuthenticateResponse", "AuthBytes"),
        # A config value set through IncrementalAlterConfigs may be a password or a JAAS
        # config with one inside (sasl.jaas.config, ssl.key.password, ...).
        ("AlterableConfig", "Value"),
    }
)


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def load_spec(path: Path) -> dict[str, Any]:
    """Read one spec file."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def spec_range(r: list[int | None] | None) -> tuple[int, int] | None:
    """A spec version range (``[3, null]``) as ``(3, MAX_VERSION)``; absent -> None."""
    if r is None:
        return None
    lo, hi = r
    assert lo is not None
    return (lo, MAX_VERSION if hi is None else hi)


def default_text(value: object) -> str:
    """A spec default as the schema-style text :func:`default_literal` reads."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def snake(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


@dataclass
class FieldDef:
    """A parsed field."""

    name: str  # schema name
    type: str  # schema type string
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None
    ignorable: bool
    default: str | None
    struct: StructDef | None = None  # for struct / []struct types


@dataclass
class StructDef:
    """A parsed struct (message body or nested)."""

    name: str
    fields: list[FieldDef] = field(default_factory=list)
    pyname: str = ""


PRIMITIVES = {
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "bool",
    "uuid",
    "string",
    "bytes",
    "records",
}


def _overlaps(a: tuple[int, int], lo: int, hi: int) -> bool:
    return a[0] <= hi and lo <= a[1]


def parse_struct(name: str, spec_fields: list[dict[str, Any]], lo: int, hi: int) -> StructDef:
    """Parse spec fields, keeping only those present somewhere in ``lo..hi``."""
    sd = StructDef(name)
    for sf in spec_fields:
        versions = spec_range(sf["versions"])
        assert versions is not None
        if not _overlaps(versions, lo, hi):
            continue
        base = str(sf["type"])
        fd = FieldDef(
            name=str(sf["name"]),
            type=f"[]{base}" if sf.get("array") else base,
            versions=versions,
            nullable=spec_range(sf.get("nullable")),
            tag=sf.get("tag"),
            tagged=spec_range(sf.get("tagged")),
            ignorable=bool(sf.get("ignorable", False)),
            default=default_text(sf["default"]) if "default" in sf else None,
        )
        if base not in PRIMITIVES:
            fd.struct = parse_struct(base, sf["fields"], lo, hi)
        sd.fields.append(fd)
    return sd


# --------------------------------------------------------------------------------------
# Emitting
# --------------------------------------------------------------------------------------

_PY_TYPES = {
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "bool": "bool",
    "uuid": "uuid.UUID",
    "string": "str",
    "bytes": "bytes",
    "records": "Records",
}

_INT_LIMITS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _vr(r: tuple[int, int] | None) -> str:
    if r is None:
        return "None"
    return f"({r[0]}, {'MAX_VERSION' if r[1] == MAX_VERSION else r[1]})"


def _vtext(r: tuple[int, int]) -> str:
    if r[1] == MAX_VERSION:
        return f"v{r[0]}+"
    if r[0] == r[1]:
        return f"v{r[0]}"
    return f"v{r[0]}-{r[1]}"


def _nullable_anywhere(fd: FieldDef) -> bool:
    return fd.nullable is not None and _overlaps(fd.nullable, *fd.versions)


def default_literal(fd: FieldDef) -> str:
    """Python source for the field's default value."""
    t = fd.type
    d = fd.default
    if t.startswith("[]"):
        if d == "null":
            return "None"
        return "()"
    if fd.struct is not None:
        if d == "null":
            return "None"
        return f"{fd.struct.pyname}()"
    if t in _INT_LIMITS:
        return str(int(d, 0)) if d not in (None, "") else "0"
    if t == "float64":
        return repr(float(d)) if d else "0.0"
    if t == "bool":
        return "True" if (d or "").lower() == "true" else "False"
    if t == "uuid":
        return "ZERO_UUID"
    if t == "string":
        return "None" if d == "null" else repr(d or "")
    if t in ("bytes", "records"):
        return "None" if d == "null" else 'b""'
    raise AssertionError(t)


def py_type(fd: FieldDef) -> str:
    """Annotation for the dataclass field."""
    t = fd.type
    if t.startswith("[]"):
        base = t[2:]
        elem = fd.struct.pyname if fd.struct is not None else _PY_TYPES[base]
        ann = f"tuple[{elem}, ...]"
    elif fd.struct is not None:
        ann = fd.struct.pyname
    else:
        ann = _PY_TYPES[t]
    if _nullable_anywhere(fd) or default_literal(fd) == "None":
        ann += " | None"
    return ann


def spec_type(fd: FieldDef) -> str:
    """The ``FieldSpec.type`` expression."""
    t = fd.type
    if t.startswith("[]"):
        base = t[2:]
        inner = fd.struct.pyname if fd.struct is not None else repr(base)
        return f"ArrayOf({inner})"
    if fd.struct is not None:
        return fd.struct.pyname
    return repr(t)


def wire_comment(fd: FieldDef) -> str:
    """A short comment: wire type and versions (and tag, nullability)."""
    bits = [fd.type, _vtext(fd.versions)]
    if fd.tag is not None and fd.tagged is not None:
        bits.append(f"tag {fd.tag}")
    if fd.nullable is not None:
        bits.append(f"nullable {_vtext(fd.nullable)}")
    return ", ".join(bits)


def collect_structs(sd: StructDef, out: list[StructDef]) -> None:
    """Nested structs, innermost first (definition order)."""
    for fd in sd.fields:
        if fd.struct is not None:
            collect_structs(fd.struct, out)
            out.append(fd.struct)


def _shape(sd: StructDef) -> tuple[object, ...]:
    return tuple(
        (
            f.name,
            f.type,
            f.versions,
            f.nullable,
            f.tag,
            f.tagged,
            f.ignorable,
            f.default,
            _shape(f.struct) if f.struct else None,
        )
        for f in sd.fields
    )


def name_structs(req: StructDef, resp: StructDef, api: str) -> list[StructDef]:
    """Give nested structs unique Python names within one API module.

    Identical definitions share one class. A name used for different shapes gets the
    Request/Response prefix on the response side (and a numeric suffix if still taken).
    """
    taken: dict[str, tuple[object, ...]] = {req.name: ("<message>",), resp.name: ("<message>",)}
    ordered: list[StructDef] = []
    for side, top in (("Request", req), ("Response", resp)):
        nested: list[StructDef] = []
        collect_structs(top, nested)
        for sd in nested:
            shape = _shape(sd)
            candidate = sd.name
            if candidate in taken and taken[candidate] != shape:
                candidate = f"{side}{sd.name}"
                k = 2
                while candidate in taken and taken[candidate] != shape:
                    candidate = f"{side}{sd.name}{k}"
                    k += 1
            sd.pyname = candidate
            if candidate not in taken:
                taken[candidate] = shape
                ordered.append(sd)
    return ordered


def emit_struct(sd: StructDef, base: str, doc: str, extra: list[str]) -> list[str]:
    """Source lines for one dataclass."""
    lines = [
        "",
        "",
        "@dataclass(frozen=True, slots=True, kw_only=True)",
        f"class {sd.pyname}({base}):",
        f'    """{doc}"""',
        "",
    ]
    lines.extend(extra)
    for fd in sd.fields:
        lines.append(f"    # {wire_comment(fd)}")
        default = default_literal(fd)
        if (sd.pyname, fd.name) in SECRET_FIELDS:
            lines.append("    # A credential: never shown in repr().")
            default = f"field(default={default}, repr=False)"
        lines.append(f"    {snake(fd.name)}: {py_type(fd)} = {default}")
    lines.append("    unknown_tags: UnknownTags = ()")
    lines.append("")
    lines.append("    kafka_fields: ClassVar[tuple[FieldSpec, ...]] = (")
    for fd in sd.fields:
        args = [repr(snake(fd.name)), spec_type(fd), _vr(fd.versions)]
        if fd.nullable is not None:
            args.append(f"nullable={_vr(fd.nullable)}")
        if fd.tag is not None and fd.tagged is not None:
            args.append(f"tag={fd.tag}")
            args.append(f"tagged={_vr(fd.tagged)}")
        if fd.ignorable:
            args.append("ignorable=True")
        lines.append(f"        FieldSpec({', '.join(args)}),")
    lines.append("    )")
    return lines


def _q(text: str) -> str:
    return json.dumps(text)


def generate_module(module: str, spec: dict[str, Any]) -> str:
    """Source of ``sharecon/protocol/messages/<module>.py`` from its spec."""
    api = str(spec["api"])
    lo, hi = spec["versions"]
    key = int(spec["api_key"])
    req = parse_struct(f"{api}Request", spec["request"], lo, hi)
    resp = parse_struct(f"{api}Response", spec["response"], lo, hi)
    for sd in (req, resp):
        sd.pyname = sd.name
    nested = name_structs(req, resp, api)
    owner: dict[str, str] = {}

    def mark(top: StructDef) -> None:
        stack = [top]
        while stack:
            s = stack.pop()
            for fd in s.fields:
                if fd.struct is not None:
                    kind = "Element of" if fd.type.startswith("[]") else "Value of"
                    owner.setdefault(fd.struct.pyname, f"{kind} ``{s.pyname}.{snake(fd.name)}``")
                    stack.append(fd.struct)

    mark(req)
    mark(resp)
    vtext = f"versions {lo}-{hi}" if lo != hi else f"version {lo}"
    flexible_from = MAX_VERSION if spec["flexible_from"] is None else spec["flexible_from"]
    body: list[str] = []
    for sd in nested:
        body.extend(emit_struct(sd, "Struct", owner[sd.pyname] + ".", []))

    def class_facts(extra_resp: str | None) -> list[str]:
        facts = [
            f"    api_key: ClassVar[int] = {key}",
            f'    api_name: ClassVar[str] = "{api}"',
            f"    min_version: ClassVar[int] = {lo}",
            f"    max_version: ClassVar[int] = {hi}",
            f"    flexible_from: ClassVar[int] = {flexible_from if flexible_from != MAX_VERSION else 'MAX_VERSION'}",
        ]
        if extra_resp:
            facts.append(f"    response_type: ClassVar[type[Response]] = {extra_resp}")
        facts.append("")
        return facts

    body.extend(emit_struct(resp, "Response", f"{api} response body ({vtext}).", class_facts(None)))
    body.extend(
        emit_struct(
            req,
            f"Request[{resp.pyname}]",
            f"{api} request body ({vtext}).",
            class_facts(resp.pyname),
        )
    )
    body.append("")
    body.append("")
    body.append(f"register({req.pyname})")
    body.append(f"register({resp.pyname})")
    body.append("")
    text = "\n".join(body)
    base_names = [
        n
        for n in (
            "MAX_VERSION",
            "ArrayOf",
            "FieldSpec",
            "Records",
            "Request",
            "Response",
            "Struct",
            "UnknownTags",
            "register",
        )
        if re.search(rf"\b{n}\b", text)
    ]
    out = [
        f'"""{api} (API key {key}): request and response, {vtext}.',
        "",
        f"GENERATED by tools/gen_messages.py from tools/spec/{module}.json; do not edit.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    out.append(
        "from dataclasses import dataclass, field"
        if re.search(r"= field\(", text)
        else "from dataclasses import dataclass"
    )
    if "uuid.UUID" in text:
        out.append("from typing import TYPE_CHECKING, ClassVar")
    else:
        out.append("from typing import ClassVar")
    out.append("")
    out.append("from sharecon.protocol.messages._base import (")
    out.extend(f"    {n}," for n in base_names)
    out.append(")")
    if "ZERO_UUID" in text:
        out.append("from sharecon.types import ZERO_UUID")
    if "uuid.UUID" in text:
        out.extend(["", "if TYPE_CHECKING:", "    import uuid"])
    out.append("")
    out.append("__all__ = [")
    names = sorted([s.pyname for s in nested] + [req.pyname, resp.pyname])
    out.extend(f'    "{n}",' for n in names)
    out.append("]")
    return "\n".join(out) + text


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", type=Path, default=SPEC_DIR, help="folder of <module>.json specs")
    ap.add_argument(
        "--out",
        type=Path,
        default=REPO / "sharecon/protocol/messages",
    )
    ap.add_argument(
        "--ruff",
        default=str(Path(sys.executable).parent / "ruff"),
        help="ruff executable used to format the output",
    )
    ap.add_argument("--no-format", action="store_true", help="skip ruff format")
    args = ap.parse_args(argv)
    modules: list[tuple[str, str, int]] = []
    for path in sorted(args.spec.glob("*.json")):
        spec = load_spec(path)
        module = path.stem
        (args.out / f"{module}.py").write_text(generate_module(module, spec), encoding="utf-8")
        modules.append((str(spec["api"]), module, int(spec["api_key"])))
    (args.out / "__init__.py").write_text(package_index(modules), encoding="utf-8")
    if not args.no_format:
        # Committed output is ruff-formatted so the freshness test can compare bytes.
        # Use the repository's ruff settings even when writing outside it (tests do).
        config = ["--config", str(REPO / "pyproject.toml")]
        subprocess.run([args.ruff, "format", "--quiet", *config, str(args.out)], check=True)
        subprocess.run(
            [args.ruff, "check", "--quiet", "--fix", "--select", "I", *config, str(args.out)],
            check=False,
        )
    return 0


def package_index(modules: list[tuple[str, str, int]]) -> str:
    """The package's ``__init__``: every message class by name, the API keys, the registry.

    Nothing is imported at the package's import: a message module is imported the first
    time one of its names is asked for, so a client creates the dataclasses of the APIs it
    speaks and no others (each costs its generated methods' ``exec``). ``modules`` holds
    ``(API name, module, API key)`` tuples.
    """
    by_module = sorted(modules, key=lambda x: x[1])
    by_key = sorted(modules, key=lambda x: x[2])
    idx = [
        '"""Generated message modules, one per API; nested types live in each module.',
        "",
        "A module is imported the first time one of its names is asked for",
        "(``from sharecon.protocol.messages import ShareFetchRequest``, ``REQUESTS[78]``),",
        "so a client creates the message classes of the APIs it speaks and no others.",
        "",
        "GENERATED by tools/gen_messages.py; do not edit.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from collections.abc import Iterator, Mapping",
        "from enum import IntEnum",
        "from typing import TYPE_CHECKING, Final, TypeVar",
        "",
        "if TYPE_CHECKING:",
        "    from sharecon.protocol.messages import (",
    ]
    idx.extend(f"        {m}," for _, m, _ in by_module)
    idx.append("    )")
    idx.append("    from sharecon.protocol.messages._base import Request, Response")
    for api, m, _ in by_module:
        idx.append(f"    from sharecon.protocol.messages.{m} import {api}Request, {api}Response")
    idx.append("")
    idx.append("__all__ = [")
    entries = ["REQUESTS", "RESPONSES", "ApiKey"]
    for api, m, _ in modules:
        entries += [f"{api}Request", f"{api}Response", m]
    idx.extend(f'    "{e}",' for e in sorted(entries))
    idx.append("]")
    idx.append("")
    idx.append("")
    idx.append("class ApiKey(IntEnum):")
    idx.append('    """The API key of every generated API (``ApiKey.SHARE_FETCH == 78``)."""')
    idx.append("")
    idx.extend(f"    {m.upper()} = {key}" for _, m, key in by_key)
    idx.append("")
    idx.append("")
    idx.append("#: API key -> (module, API name): where the registry finds each class.")
    idx.append("_APIS: Final[dict[int, tuple[str, str]]] = {")
    idx.extend(f'    {key}: ("{m}", "{api}"),' for api, m, key in by_key)
    idx.append("}")
    idx.append("#: Public name -> the module that defines it (a module names itself).")
    idx.append("_HOME: Final[dict[str, str]] = {")
    for m, api in sorted((m, api) for api, m, _ in modules):
        idx.append(f'    "{m}": "{m}",')
        idx.append(f'    "{api}Request": "{m}",')
        idx.append(f'    "{api}Response": "{m}",')
    idx.append("}")
    idx.append("")
    idx.append('_C = TypeVar("_C")')
    idx.append(LAZY_REGISTRY)
    idx.append("")
    idx.append("#: API key -> request class.")
    idx.append('REQUESTS: Final[Mapping[int, type[Request[Response]]]] = _ByApiKey("Request")')
    idx.append("#: API key -> response class.")
    idx.append('RESPONSES: Final[Mapping[int, type[Response]]] = _ByApiKey("Response")')
    idx.append(LAZY_GETATTR)
    return "\n".join(idx)


# The registry and the module's lazy attributes, the same for every spec.
LAZY_REGISTRY = '''

class _ByApiKey(Mapping[int, _C]):
    """API key -> message class; a class's module is imported the first time it is asked for."""

    __slots__ = ("_loaded", "_suffix")

    def __init__(self, suffix: str) -> None:
        self._suffix = suffix
        self._loaded: dict[int, _C] = {}

    def __getitem__(self, api_key: int) -> _C:
        cls = self._loaded.get(api_key)
        if cls is None:
            module, api = _APIS[api_key]  # KeyError for an unknown key, as a dict's
            cls = getattr(importlib.import_module(f"{__name__}.{module}"), api + self._suffix)
            self._loaded[api_key] = cls
        return cls

    def get(self, api_key: int, default: _C | None = None) -> _C | None:  # type: ignore[override]
        # The path of every request's header: the loaded class without a KeyError.
        cls = self._loaded.get(api_key)
        if cls is not None:
            return cls
        return self[api_key] if api_key in _APIS else default

    def __contains__(self, api_key: object) -> bool:
        return api_key in _APIS

    def __iter__(self) -> Iterator[int]:
        return iter(_APIS)

    def __len__(self) -> int:
        return len(_APIS)

    def __repr__(self) -> str:
        return f"<{self._suffix} classes by API key: {sorted(_APIS)}>"
'''

LAZY_GETATTR = '''

def __getattr__(name: str) -> object:
    """A message class or module, imported on first use (PEP 562)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = importlib.import_module(f"{__name__}.{module}")
    if name != module:
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
'''


if __name__ == "__main__":
    sys.exit(main())
