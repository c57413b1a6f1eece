"""Our generated message definitions agree with Kafka's JSON schemas.

The schemas live outside the repository (the ``kafka_schemas`` fixture in conftest.py
finds them; absent, these tests skip, or fail under ``CI=true``). For every message we
define, each field present in our version range is compared: name (snake_case of the
schema name), order, type, versions, nullable versions, tag and tagged versions,
ignorable, and default. Fetch and InitProducerId, whose spec was written by hand, are
compared like the rest.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from sharecon.protocol.messages import REQUESTS, RESPONSES
from sharecon.protocol.messages._base import MAX_VERSION, ArrayOf, FieldSpec, Message, Struct

if TYPE_CHECKING:
    from pathlib import Path

# ShareFetch/ShareAcknowledge v0 (Kafka 4.0 early access) left validVersions in 4.1, but the
# fields still carry their v0 ranges; we keep v0 for the golden seed.
V0_KEPT = {"ShareFetch", "ShareAcknowledge"}

MESSAGES: list[type[Message]] = sorted(
    [*REQUESTS.values(), *RESPONSES.values()], key=lambda c: c.__name__
)

PRIMITIVES = {
    "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool", "uuid",
    "string", "bytes", "records",
}  # fmt: skip


def _load(folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}.json"
    assert path.exists(), f"no schema for {name} in {folder}"
    text = "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("//")
    )  # fmt: skip
    data: dict[str, Any] = json.loads(text)
    return data


def _range(spec: str | None) -> tuple[int, int] | None:
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _expected_default(field: dict[str, Any], ours: FieldSpec) -> Any:
    t = field["type"]
    d = field.get("default")
    if t.startswith("[]"):
        return None if d == "null" else ()
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(str(d), 0) if d not in (None, "") else 0
    if t == "float64":
        return float(d) if d else 0.0
    if t == "bool":
        return d == "true"
    if t == "uuid":
        return uuid.UUID(int=0)
    if t == "string":
        return None if d == "null" else (d or "")
    if t in ("bytes", "records"):
        return None if d == "null" else b""
    # A struct: null, or an instance with its own defaults.
    assert isinstance(ours.type, type)
    return None if d == "null" else ours.type()


def _default_of(cls: type[Struct], name: str) -> Any:
    return {f.name: f for f in dataclasses.fields(cls)}[name].default  # type: ignore[arg-type]


def _compare_struct(
    cls: type[Struct],
    fields: list[dict[str, Any]],
    common: dict[str, list[dict[str, Any]]],
    lo: int,
    hi: int,
    where: str,
) -> None:
    wanted = [f for f in fields if _overlaps(_range(f["versions"]), lo, hi)]
    ours = list(cls.kafka_fields)
    assert [_snake(f["name"]) for f in wanted] == [f.name for f in ours], where
    dc_fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    assert dc_fields == {f.name for f in ours} | {"unknown_tags"}, where
    for f, spec in zip(wanted, ours, strict=True):
        here = f"{where}.{spec.name}"
        assert spec.versions == _range(f["versions"]), here
        assert spec.nullable == _range(f.get("nullableVersions")), here
        assert spec.ignorable == bool(f.get("ignorable", False)), here
        if "tag" in f:
            assert (spec.tag, spec.tagged) == (f["tag"], _range(f.get("taggedVersions"))), here
        else:
            assert spec.tag is None and spec.tagged is None, here
        t: str = f["type"]
        base = t[2:] if t.startswith("[]") else t
        spec_t = spec.type
        if t.startswith("[]"):
            assert isinstance(spec_t, ArrayOf), here
            spec_t = spec_t.elem
        else:
            assert not isinstance(spec_t, ArrayOf), here
        if base in PRIMITIVES:
            assert spec_t == base, here
        else:
            assert isinstance(spec_t, type) and issubclass(spec_t, Struct), here
            sub = f.get("fields") or common[base]
            _compare_struct(spec_t, sub, common, lo, hi, f"{here}<{base}>")
        assert _default_of(cls, spec.name) == _expected_default(f, spec), here


def _overlaps(r: tuple[int, int] | None, lo: int, hi: int) -> bool:
    return r is not None and r[0] <= hi and lo <= r[1]


@pytest.mark.parametrize("cls", MESSAGES, ids=[c.__name__ for c in MESSAGES])
def test_message_matches_schema(cls: type[Message], kafka_schemas: Path) -> None:
    """Field names, order, types, version ranges, nullability, tags and defaults agree."""
    schema = _load(kafka_schemas, cls.__name__)
    assert schema["apiKey"] == cls.api_key
    flex = _range(schema["flexibleVersions"])
    assert cls.flexible_from == (flex[0] if flex else MAX_VERSION)
    valid = _range(schema["validVersions"])
    assert valid is not None
    assert cls.max_version <= valid[1]
    if cls.api_name in V0_KEPT:
        assert cls.min_version == 0
    else:
        assert cls.min_version >= valid[0]
    common = {c["name"]: c["fields"] for c in schema.get("commonStructs", [])}
    _compare_struct(cls, schema["fields"], common, cls.min_version, cls.max_version, cls.__name__)


def test_every_message_has_a_schema(kafka_schemas: Path) -> None:
    """Guard against a comparison silently left out: all 24 APIs have schema files."""
    missing = [c.__name__ for c in MESSAGES if not (kafka_schemas / f"{c.__name__}.json").exists()]
    assert not missing and len(MESSAGES) == 2 * 24, missing
