"""Generate sharecon/protocol/messages/<api>.py from Kafka's JSON message definitions.

Usage::

    python tools/gen_messages.py ../shared/reference/kafka-schemas [--out sharecon/protocol/messages]

The schema folder is read, never copied: the output is our own dataclass form (snake_case
fields, defaults from the schema, a ``kafka_fields`` spec list) with short doc lines of our
own. Fetch and InitProducerId have no definition in that folder, so their layouts are given
below in the same dict form (Fetch transcribed from the golden seed for Fetch v17,
InitProducerId from the protocol documentation of versions 0-5).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF
REPO = Path(__file__).resolve().parent.parent

# API name -> (module name, lowest version, highest version) we generate.
# ShareFetch/ShareAcknowledge v0 (Kafka 4.0 early access) are kept for the golden seeds;
# the 4.4 files still describe their v0 fields.
APIS: dict[str, tuple[str, int, int]] = {
    "ApiVersions": ("api_versions", 0, 4),
    "Metadata": ("metadata", 12, 13),
    "FindCoordinator": ("find_coordinator", 4, 6),
    "ShareGroupHeartbeat": ("share_group_heartbeat", 1, 1),
    "ShareGroupDescribe": ("share_group_describe", 1, 1),
    "ShareFetch": ("share_fetch", 0, 2),
    "ShareAcknowledge": ("share_acknowledge", 0, 2),
    "Produce": ("produce", 9, 13),
    "CreateTopics": ("create_topics", 5, 7),
    "DeleteTopics": ("delete_topics", 4, 6),
    "IncrementalAlterConfigs": ("incremental_alter_configs", 1, 1),
    "DescribeConfigs": ("describe_configs", 4, 4),
    "ListGroups": ("list_groups", 5, 5),
    "DescribeShareGroupOffsets": ("describe_share_group_offsets", 0, 1),
    "AlterShareGroupOffsets": ("alter_share_group_offsets", 0, 0),
    "DeleteShareGroupOffsets": ("delete_share_group_offsets", 0, 0),
    "SaslHandshake": ("sasl_handshake", 1, 1),
    "SaslAuthenticate": ("sasl_authenticate", 2, 2),
    "Fetch": ("fetch", 4, 17),
    "InitProducerId": ("init_producer_id", 0, 5),
}


# (message or struct class, schema field name) of fields that carry credentials: their value
# is left out of the dataclass repr, so a logged or printed message never shows a password.
# SaslAuthenticate's AuthBytes hold the PLAIN password and the SCRAM proof and signatures.
SECRET_FIELDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("SaslAuthenticateRequest", "AuthBytes"),
        ("SaslAuthenticateResponse", "AuthBytes"),
    }
)


def _f(name: str, typ: str, versions: str, **kw: object) -> dict[str, object]:
    d: dict[str, object] = {"name": name, "type": typ, "versions": versions}
    d.update(kw)
    return d


# Fetch (key 1), versions 4-17, in the same dict shape the loader produces. Field order,
# types, version ranges, nullability, tags and defaults follow the layout in the Fetch v17
# golden seed (shared/seeds); no prose is carried over.
FETCH_REQUEST: dict[str, object] = {
    "apiKey": 1,
    "type": "request",
    "name": "FetchRequest",
    "validVersions": "4-17",
    "flexibleVersions": "12+",
    "fields": [
        _f(
            "ClusterId",
            "string",
            "12+",
            nullableVersions="12+",
            default="null",
            taggedVersions="12+",
            tag=0,
            ignorable=True,
        ),
        _f("ReplicaId", "int32", "0-14", default="-1"),
        _f(
            "ReplicaState",
            "ReplicaState",
            "15+",
            taggedVersions="15+",
            tag=1,
            fields=[
                _f("ReplicaId", "int32", "15+", default="-1"),
                _f("ReplicaEpoch", "int64", "15+", default="-1"),
            ],
        ),
        _f("MaxWaitMs", "int32", "0+"),
        _f("MinBytes", "int32", "0+"),
        _f("MaxBytes", "int32", "3+", default="0x7fffffff", ignorable=True),
        _f("IsolationLevel", "int8", "4+", default="0", ignorable=True),
        _f("SessionId", "int32", "7+", default="0", ignorable=True),
        _f("SessionEpoch", "int32", "7+", default="-1", ignorable=True),
        _f(
            "Topics",
            "[]FetchTopic",
            "0+",
            fields=[
                _f("Topic", "string", "0-12", ignorable=True),
                _f("TopicId", "uuid", "13+", ignorable=True),
                _f(
                    "Partitions",
                    "[]FetchPartition",
                    "0+",
                    fields=[
                        _f("Partition", "int32", "0+"),
                        _f("CurrentLeaderEpoch", "int32", "9+", default="-1", ignorable=True),
                        _f("FetchOffset", "int64", "0+"),
                        _f("LastFetchedEpoch", "int32", "12+", default="-1", ignorable=False),
                        _f("LogStartOffset", "int64", "5+", default="-1", ignorable=True),
                        _f("PartitionMaxBytes", "int32", "0+"),
                        _f(
                            "ReplicaDirectoryId",
                            "uuid",
                            "17+",
                            taggedVersions="17+",
                            tag=0,
                            ignorable=True,
                        ),
                    ],
                ),
            ],
        ),
        _f(
            "ForgottenTopicsData",
            "[]ForgottenTopic",
            "7+",
            ignorable=False,
            fields=[
                _f("Topic", "string", "7-12", ignorable=True),
                _f("TopicId", "uuid", "13+", ignorable=True),
                _f("Partitions", "[]int32", "7+"),
            ],
        ),
        _f("RackId", "string", "11+", default="", ignorable=True),
    ],
}

FETCH_RESPONSE: dict[str, object] = {
    "apiKey": 1,
    "type": "response",
    "name": "FetchResponse",
    "validVersions": "4-17",
    "flexibleVersions": "12+",
    "fields": [
        _f("ThrottleTimeMs", "int32", "1+", ignorable=True),
        _f("ErrorCode", "int16", "7+", ignorable=True),
        _f("SessionId", "int32", "7+", default="0", ignorable=False),
        _f(
            "Responses",
            "[]FetchableTopicResponse",
            "0+",
            fields=[
                _f("Topic", "string", "0-12", ignorable=True),
                _f("TopicId", "uuid", "13+", ignorable=True),
                _f(
                    "Partitions",
                    "[]PartitionData",
                    "0+",
                    fields=[
                        _f("PartitionIndex", "int32", "0+"),
                        _f("ErrorCode", "int16", "0+"),
                        _f("HighWatermark", "int64", "0+"),
                        _f("LastStableOffset", "int64", "4+", default="-1", ignorable=True),
                        _f("LogStartOffset", "int64", "5+", default="-1", ignorable=True),
                        _f(
                            "DivergingEpoch",
                            "EpochEndOffset",
                            "12+",
                            taggedVersions="12+",
                            tag=0,
                            fields=[
                                _f("Epoch", "int32", "12+", default="-1"),
                                _f("EndOffset", "int64", "12+", default="-1"),
                            ],
                        ),
                        _f(
                            "CurrentLeader",
                            "LeaderIdAndEpoch",
                            "12+",
                            taggedVersions="12+",
                            tag=1,
                            fields=[
                                _f("LeaderId", "int32", "12+", default="-1"),
                                _f("LeaderEpoch", "int32", "12+", default="-1"),
                            ],
                        ),
                        _f(
                            "SnapshotId",
                            "SnapshotId",
                            "12+",
                            taggedVersions="12+",
                            tag=2,
                            fields=[
                                _f("EndOffset", "int64", "0+", default="-1"),
                                _f("Epoch", "int32", "0+", default="-1"),
                            ],
                        ),
                        _f(
                            "AbortedTransactions",
                            "[]AbortedTransaction",
                            "4+",
                            nullableVersions="4+",
                            ignorable=True,
                            fields=[
                                _f("ProducerId", "int64", "4+"),
                                _f("FirstOffset", "int64", "4+"),
                            ],
                        ),
                        _f("PreferredReadReplica", "int32", "11+", default="-1", ignorable=False),
                        _f("Records", "records", "0+", nullableVersions="0+"),
                    ],
                ),
            ],
        ),
        _f(
            "NodeEndpoints",
            "[]NodeEndpoint",
            "16+",
            taggedVersions="16+",
            tag=0,
            fields=[
                _f("NodeId", "int32", "16+"),
                _f("Host", "string", "16+"),
                _f("Port", "int32", "16+"),
                _f("Rack", "string", "16+", nullableVersions="16+", default="null"),
            ],
        ),
    ],
}


# InitProducerId (key 22), versions 0-5. v3 added the producer id and epoch to the request
# (resuming after an epoch error); v4 and v5 only widen the error codes. v6 (two-phase
# commit fields) is left out on purpose.
INIT_PRODUCER_ID_REQUEST: dict[str, object] = {
    "apiKey": 22,
    "type": "request",
    "name": "InitProducerIdRequest",
    "validVersions": "0-5",
    "flexibleVersions": "2+",
    "fields": [
        _f("TransactionalId", "string", "0+", nullableVersions="0+"),
        _f("TransactionTimeoutMs", "int32", "0+"),
        _f("ProducerId", "int64", "3+", default="-1"),
        _f("ProducerEpoch", "int16", "3+", default="-1"),
    ],
}

INIT_PRODUCER_ID_RESPONSE: dict[str, object] = {
    "apiKey": 22,
    "type": "response",
    "name": "InitProducerIdResponse",
    "validVersions": "0-5",
    "flexibleVersions": "2+",
    "fields": [
        _f("ThrottleTimeMs", "int32", "0+", ignorable=True),
        _f("ErrorCode", "int16", "0+"),
        _f("ProducerId", "int64", "0+", default="-1"),
        _f("ProducerEpoch", "int16", "0+"),
    ],
}

#: APIs defined in this file rather than read from the schema folder.
INLINE_SCHEMAS: dict[str, tuple[dict[str, object], dict[str, object]]] = {
    "Fetch": (FETCH_REQUEST, FETCH_RESPONSE),
    "InitProducerId": (INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE),
}


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def strip_comments(text: str) -> str:
    """Drop ``//`` comments outside string literals (the schema files are JSON + comments)."""
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


def load_schema(path: Path) -> dict[str, object]:
    """Read one schema file."""
    data: dict[str, object] = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    return data


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, MAX); ``"1-2"`` -> (1, 2); ``"0"`` -> (0, 0); ``"none"``/None -> None."""
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


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


def parse_struct(
    name: str,
    raw_fields: list[dict[str, object]],
    common: dict[str, list[dict[str, object]]],
    lo: int,
    hi: int,
) -> StructDef:
    """Parse fields, keeping only those present somewhere in ``lo..hi``."""
    sd = StructDef(name)
    for rf in raw_fields:
        versions = parse_versions(str(rf["versions"]))
        assert versions is not None
        if not _overlaps(versions, lo, hi):
            continue
        typ = str(rf["type"])
        fd = FieldDef(
            name=str(rf["name"]),
            type=typ,
            versions=versions,
            nullable=parse_versions(rf.get("nullableVersions")),  # type: ignore[arg-type]
            tag=rf.get("tag"),  # type: ignore[arg-type]
            tagged=parse_versions(rf.get("taggedVersions")),  # type: ignore[arg-type]
            ignorable=bool(rf.get("ignorable", False)),
            default=None if rf.get("default") is None else str(rf.get("default")),
        )
        base = typ[2:] if typ.startswith("[]") else typ
        if base not in PRIMITIVES:
            sub = rf.get("fields")
            if sub is None:
                sub = common[base]
            fd.struct = parse_struct(base, sub, common, lo, hi)  # type: ignore[arg-type]
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


def generate_module(
    api: str, module: str, lo: int, hi: int, req_raw: dict[str, object], resp_raw: dict[str, object]
) -> str:
    """Source of one API module."""
    parsed: list[StructDef] = []
    flex: list[int] = []
    keys: list[int] = []
    for raw in (req_raw, resp_raw):
        common = {
            str(c["name"]): c["fields"]  # type: ignore[index]
            for c in raw.get("commonStructs", [])  # type: ignore[attr-defined]
        }
        sd = parse_struct(str(raw["name"]), raw["fields"], common, lo, hi)  # type: ignore[arg-type]
        sd.pyname = sd.name
        parsed.append(sd)
        fv = parse_versions(str(raw["flexibleVersions"]))
        flex.append(MAX_VERSION if fv is None else fv[0])
        keys.append(int(raw["apiKey"]))  # type: ignore[call-overload]
    req, resp = parsed
    assert flex[0] == flex[1] and keys[0] == keys[1], api
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
    flexible_from = flex[0]
    body: list[str] = []
    for sd in nested:
        body.extend(emit_struct(sd, "Struct", owner[sd.pyname] + ".", []))

    def class_facts(extra_resp: str | None) -> list[str]:
        facts = [
            f"    api_key: ClassVar[int] = {keys[0]}",
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
        f'"""{api} (API key {keys[0]}): request and response, {vtext}.',
        "",
        "GENERATED by tools/gen_messages.py from the Kafka message definitions; do not edit.",
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
    ap.add_argument("schemas", type=Path, help="folder holding <Name>Request.json etc.")
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
    for api, (module, lo, hi) in APIS.items():
        if api in INLINE_SCHEMAS:
            req_raw, resp_raw = INLINE_SCHEMAS[api]
        else:
            req_raw = load_schema(args.schemas / f"{api}Request.json")
            resp_raw = load_schema(args.schemas / f"{api}Response.json")
        src = generate_module(api, module, lo, hi, req_raw, resp_raw)
        (args.out / f"{module}.py").write_text(src, encoding="utf-8")
        modules.append((api, module, int(req_raw["apiKey"])))  # type: ignore[call-overload]
    # The package index: every message class by name, and the per-key registry.
    idx = [
        '"""Generated message modules, one per API; nested types live in each module.',
        "",
        "GENERATED by tools/gen_messages.py; do not edit.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import TYPE_CHECKING",
        "",
        "from sharecon.protocol.messages import (",
    ]
    idx.extend(f"    {m}," for _, m, _ in sorted(modules, key=lambda x: x[1]))
    idx.append(")")
    for api, m, _ in sorted(modules, key=lambda x: x[1]):
        idx.append(f"from sharecon.protocol.messages.{m} import {api}Request, {api}Response")
    idx.append("")
    idx.append("if TYPE_CHECKING:")
    idx.append("    from sharecon.protocol.messages._base import Request, Response")
    idx.append("")
    idx.append("__all__ = [")
    entries = ["REQUESTS", "RESPONSES"]
    for api, m, _ in modules:
        entries += [f"{api}Request", f"{api}Response", m]
    idx.extend(f'    "{e}",' for e in sorted(entries))
    idx.append("]")
    idx.append("")
    idx.append("#: API key -> request class.")
    idx.append("REQUESTS: dict[int, type[Request[Response]]] = {")
    for api, _, key in sorted(modules, key=lambda x: x[2]):
        idx.append(f"    {key}: {api}Request,")
    idx.append("}")
    idx.append("#: API key -> response class.")
    idx.append("RESPONSES: dict[int, type[Response]] = {")
    for api, _, key in sorted(modules, key=lambda x: x[2]):
        idx.append(f"    {key}: {api}Response,")
    idx.append("}")
    idx.append("")
    (args.out / "__init__.py").write_text("\n".join(idx), encoding="utf-8")
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


if __name__ == "__main__":
    sys.exit(main())
