"""Write tools/spec/<module>.json, our message spec, from Kafka's JSON message definitions.

Usage::

    python tools/import_schemas.py [../shared/reference/kafka-schemas] [--out tools/spec]

The upstream definitions live outside the repository and are never copied into it. This
tool reads them and writes our own compact spec, holding only what tools/gen_messages.py
needs for the versions we speak: the API key, our version range, the first flexible
version, and per field its name, type, version ranges, tag, ignorability and default.
Fields outside our version range, descriptions, comments, entity types and map keys are
left behind; shared structs are written out in place.

``APIS`` below is where we decide which APIs and versions sharecon speaks. Fetch and
InitProducerId are in it but marked hand-written: their spec files were written by hand
(from the Fetch v17 golden seed and the protocol documentation) before the upstream
definitions were at hand, so this tool leaves them alone; tests/protocol/test_spec.py
checks them, like every other spec file, against the upstream definitions.

The spec format (one JSON object per API)::

    {"api": "ShareFetch", "api_key": 78, "versions": [0, 2], "flexible_from": 0,
     "request": [<field>, ...], "response": [<field>, ...]}

    <field> = {"name": "Topics", "type": "FetchTopic", "array": true,
               "versions": [0, null], "nullable": [..], "tag": 0, "tagged": [..],
               "ignorable": true, "default": <value>, "fields": [<field>, ...]}

A version range is ``[low, high]``, ``high`` null meaning "and every later version".
``flexible_from`` is null when no version is flexible. Optional keys are left out when
they do not apply (``array``/``ignorable`` false, no nullable or tagged versions, no
default). ``default`` is a JSON value of the field's type (null for a null default);
``fields`` is present exactly for struct types.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO / "tools" / "spec"
DEFAULT_SCHEMAS = REPO.parent / "shared" / "reference" / "kafka-schemas"

# API name -> (module name, lowest version, highest version) we speak.
# ShareFetch/ShareAcknowledge v0 (Kafka 4.0 early access) are kept for the golden seeds;
# the 4.4 files still describe their v0 fields. InitProducerId stops at v5: v6 adds the
# two-phase-commit fields, which we leave out on purpose.
APIS: dict[str, tuple[str, int, int]] = {
    "ApiVersions": ("api_versions", 0, 4),
    "Metadata": ("metadata", 0, 13),
    "FindCoordinator": ("find_coordinator", 0, 6),
    "ShareGroupHeartbeat": ("share_group_heartbeat", 1, 1),
    "ShareGroupDescribe": ("share_group_describe", 1, 1),
    "ShareFetch": ("share_fetch", 0, 2),
    "ShareAcknowledge": ("share_acknowledge", 0, 2),
    "Produce": ("produce", 3, 13),
    "CreateTopics": ("create_topics", 2, 7),
    "DeleteTopics": ("delete_topics", 1, 6),
    "IncrementalAlterConfigs": ("incremental_alter_configs", 1, 1),
    "DescribeConfigs": ("describe_configs", 1, 4),
    "ListGroups": ("list_groups", 5, 5),
    "DescribeShareGroupOffsets": ("describe_share_group_offsets", 0, 1),
    "AlterShareGroupOffsets": ("alter_share_group_offsets", 0, 0),
    "DeleteShareGroupOffsets": ("delete_share_group_offsets", 0, 0),
    "DeleteGroups": ("delete_groups", 0, 3),
    "ListOffsets": ("list_offsets", 6, 10),
    "SaslHandshake": ("sasl_handshake", 1, 1),
    "SaslAuthenticate": ("sasl_authenticate", 2, 2),
    "Fetch": ("fetch", 4, 17),
    "InitProducerId": ("init_producer_id", 0, 5),
    "GetTelemetrySubscriptions": ("get_telemetry_subscriptions", 0, 0),
    "PushTelemetry": ("push_telemetry", 0, 0),
}

#: Spec files maintained by hand; this tool never overwrites them.
HAND_WRITTEN = frozenset({"Fetch", "InitProducerId"})

PRIMITIVES = frozenset(
    {
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
)
_INTS = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})

Range = list[int | None]
Spec = dict[str, Any]


def strip_comments(text: str) -> str:
    """Drop ``//`` comments outside string literals (the upstream files are JSON + comments)."""
    out: list[str] = []
    i = 0
    in_str = False
    n = len(text)
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def load_upstream(folder: Path, name: str) -> dict[str, Any]:
    """Read one upstream definition, e.g. ``ShareFetchRequest``."""
    data: dict[str, Any] = json.loads(
        strip_comments((folder / f"{name}.json").read_text(encoding="utf-8"))
    )
    return data


def version_range(text: str | None) -> Range | None:
    """``"3+"`` -> [3, None]; ``"1-2"`` -> [1, 2]; ``"0"`` -> [0, 0]; ``"none"``/None -> None."""
    if text is None or text == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return [int(text[:-1]), None]
    if "-" in text:
        lo, hi = text.split("-")
        return [int(lo), int(hi)]
    return [int(text), int(text)]


def overlaps(r: Range, lo: int, hi: int) -> bool:
    """Whether version range ``r`` shares a version with ``lo..hi``."""
    start, end = r
    assert start is not None
    return start <= hi and (end is None or lo <= end)


def default_value(typ: str, raw: object) -> object:
    """An upstream default (a string, or sometimes a JSON number) as a JSON value of ``typ``."""
    text = str(raw)
    if text == "null":
        return None
    if typ in _INTS:
        return int(text, 0)
    if typ == "float64":
        return float(text)
    if typ == "bool":
        return text.lower() == "true"
    return text


def convert_fields(
    fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]], lo: int, hi: int
) -> list[Spec]:
    """Our spec of the upstream ``fields`` present somewhere in ``lo..hi``."""
    out: list[Spec] = []
    for f in fields:
        versions = version_range(f["versions"])
        assert versions is not None, f["name"]
        if not overlaps(versions, lo, hi):
            continue
        typ: str = f["type"]
        array = typ.startswith("[]")
        base = typ[2:] if array else typ
        spec: Spec = {"name": f["name"], "type": base}
        if array:
            spec["array"] = True
        spec["versions"] = versions
        nullable = version_range(f.get("nullableVersions"))
        if nullable is not None:
            spec["nullable"] = nullable
        tagged = version_range(f.get("taggedVersions"))
        if "tag" in f:
            assert tagged is not None, f["name"]
            spec["tag"] = f["tag"]
            spec["tagged"] = tagged
        if f.get("ignorable", False):
            spec["ignorable"] = True
        if "default" in f:
            spec["default"] = default_value(base, f["default"])
        if base not in PRIMITIVES:
            sub = f.get("fields")
            spec["fields"] = convert_fields(common[base] if sub is None else sub, common, lo, hi)
        out.append(spec)
    return out


def convert(api: str, lo: int, hi: int, request: dict[str, Any], response: dict[str, Any]) -> Spec:
    """Our spec of one API, versions ``lo..hi``, from its upstream request and response."""
    sides: dict[str, list[Spec]] = {}
    flexible: list[int | None] = []
    for side, raw in (("request", request), ("response", response)):
        assert raw["apiKey"] == request["apiKey"], api
        common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
        sides[side] = convert_fields(raw["fields"], common, lo, hi)
        flex = version_range(raw["flexibleVersions"])
        flexible.append(None if flex is None else flex[0])
    assert flexible[0] == flexible[1], api
    return {
        "api": api,
        "api_key": request["apiKey"],
        "versions": [lo, hi],
        "flexible_from": flexible[0],
        **sides,
    }


def import_api(folder: Path, api: str) -> Spec:
    """Convert ``api`` (a key of :data:`APIS`) from the upstream folder."""
    _, lo, hi = APIS[api]
    return convert(
        api, lo, hi, load_upstream(folder, f"{api}Request"), load_upstream(folder, f"{api}Response")
    )


def dump(spec: Spec) -> str:
    """The text of a spec file: indented JSON, one short field object per line where it fits."""
    return _dump(spec, 0) + "\n"


def _dump(value: object, indent: int) -> str:
    flat = json.dumps(value)
    if len(flat) + indent <= 96 or not isinstance(value, (dict, list)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + _dump(v, indent + 2) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {_dump(v, indent + 2)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("schemas", type=Path, nargs="?", default=DEFAULT_SCHEMAS)
    ap.add_argument("--out", type=Path, default=SPEC_DIR)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for api, (module, _, _) in APIS.items():
        if api in HAND_WRITTEN:
            continue
        (args.out / f"{module}.json").write_text(dump(import_api(args.schemas, api)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
