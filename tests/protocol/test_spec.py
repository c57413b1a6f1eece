"""tools/spec/ (our message spec, the generator's only input) is complete and right.

Without the upstream definitions: every API in tools/import_schemas.py's table has a spec
file with the versions the table names, and every spec file is well formed. With them
(the ``kafka_schemas`` fixture): converting the upstream definitions gives exactly our
spec for every API and version we speak, the hand-written Fetch and InitProducerId
layouts included; the imported files are byte for byte what the tool writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tools" / "spec"

# Keys a field may have, and which of them every field has.
FIELD_KEYS = {
    "name", "type", "array", "versions", "nullable", "tag", "tagged", "ignorable", "default",
    "fields",
}  # fmt: skip
REQUIRED = {"name", "type", "versions"}
PRIMITIVES = {
    "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool", "uuid",
    "string", "bytes", "records",
}  # fmt: skip


def _import_schemas() -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import import_schemas
    finally:
        sys.path.pop(0)
    return import_schemas


IMPORTER = _import_schemas()
APIS: dict[str, tuple[str, int, int]] = IMPORTER.APIS


def _spec(module: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SPEC / f"{module}.json").read_text())
    return data


def test_one_spec_file_per_api() -> None:
    assert sorted(p.stem for p in SPEC.glob("*.json")) == sorted(m for m, _, _ in APIS.values())


@pytest.mark.parametrize("api", sorted(APIS))
def test_spec_is_well_formed(api: str) -> None:
    module, lo, hi = APIS[api]
    spec = _spec(module)
    assert set(spec) == {"api", "api_key", "versions", "flexible_from", "request", "response"}
    assert (spec["api"], spec["versions"]) == (api, [lo, hi])

    def check(fields: list[dict[str, Any]], where: str) -> None:
        names = [f["name"] for f in fields]
        assert len(set(names)) == len(names), where
        for f in fields:
            here = f"{where}.{f['name']}"
            assert REQUIRED <= set(f) <= FIELD_KEYS, here
            assert ("tag" in f) == ("tagged" in f), here
            assert f.get("array", True) is True and f.get("ignorable", True) is True, here
            for key in ("versions", "nullable", "tagged"):
                if key in f:
                    low, high = f[key]
                    assert isinstance(low, int) and (high is None or high >= low), here
            # Only fields we speak: each is present in at least one of our versions.
            low, high = f["versions"]
            assert low <= hi and (high is None or high >= lo), here
            assert ("fields" in f) == (f["type"] not in PRIMITIVES), here
            if "fields" in f:
                check(f["fields"], here)

    check(spec["request"], f"{api}Request")
    check(spec["response"], f"{api}Response")


def test_spec_matches_upstream(kafka_schemas: Path) -> None:
    """Our spec is what the upstream definitions say for every API and version we speak.

    One test for all APIs (naming every one that differs), so a clone without the
    upstream folder shows one skip here, not twenty.
    """
    differ, stale = [], []
    for api, (module, _, _) in sorted(APIS.items()):
        upstream = IMPORTER.import_api(kafka_schemas, api)
        if upstream != _spec(module):
            differ.append(api)
        elif api not in IMPORTER.HAND_WRITTEN:
            if (SPEC / f"{module}.json").read_text() != IMPORTER.dump(upstream):
                stale.append(api)
    assert not differ, f"tools/spec disagrees with the upstream definitions for {differ}"
    assert not stale, f"not as tools/import_schemas.py writes them (run it): {stale}"
