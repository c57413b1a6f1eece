"""Hypothesis strategies that build any generated message at any version from its specs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from sharecon.protocol.messages import REQUESTS, RESPONSES
from sharecon.protocol.messages._base import ArrayOf, Message, Struct, TypeSpec

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


def all_message_versions() -> list[tuple[type[Message], int]]:
    """Every (message class, version) pair the generated code supports."""
    out: list[tuple[type[Message], int]] = []
    for table in (REQUESTS, RESPONSES):
        for cls in table.values():
            out.extend((cls, v) for v in range(cls.min_version, cls.max_version + 1))
    return sorted(out, key=lambda p: (p[0].__name__, p[1]))


def _value(t: TypeSpec, version: int, flex: bool) -> st.SearchStrategy[Any]:
    if isinstance(t, ArrayOf):
        return st.lists(_value(t.elem, version, flex), max_size=2).map(tuple)
    if isinstance(t, str):
        if t in _INT_BOUNDS:
            lo, hi = _INT_BOUNDS[t]
            return st.integers(lo, hi)
        if t == "float64":
            return st.floats(allow_nan=False)
        if t == "bool":
            return st.booleans()
        if t == "uuid":
            return st.uuids()
        if t == "string":
            return _text
        if t == "bytes":
            return st.binary(max_size=12)
        if t == "records":
            return st.binary(max_size=40)
        raise AssertionError(t)
    return struct_strategy(t, version, flex)


def _unknown_tags(cls: type[Struct], version: int) -> st.SearchStrategy[Any]:
    used = {f.tag for f in cls.kafka_fields if f.tag is not None and f.is_tagged(version)}
    tags = st.integers(0, 40).filter(lambda t: t not in used)
    return st.lists(
        st.tuples(tags, st.binary(max_size=6)), max_size=2, unique_by=lambda p: p[0]
    ).map(lambda items: tuple(sorted(items)))


def struct_strategy(cls: type[Struct], version: int, flex: bool) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` holding only what ``version`` can carry."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls.kafka_fields:
        if not f.present(version):
            continue
        s = _value(f.type, version, flex)
        if f.is_nullable(version):
            s = st.none() | s
        kwargs[f.name] = s
    if flex:
        kwargs["unknown_tags"] = _unknown_tags(cls, version)
    return st.builds(cls, **kwargs)


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    """Instances of message ``cls`` valid at ``version``."""
    return struct_strategy(cls, version, cls.is_flexible(version))
