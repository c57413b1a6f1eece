"""Base classes for generated messages, and the compiler that turns their field specs
into per-(struct, version) encoder and decoder functions.

Rules for this module:

* A message is data: a frozen, slotted, keyword-only dataclass whose class attribute
  ``kafka_fields`` lists one :class:`FieldSpec` per wire field, in wire order.
* Codecs are compiled once per (struct, version) into straight-line Python (``exec`` of
  generated source, the way :mod:`dataclasses` builds ``__init__``) and cached. The fast
  path does no per-field bookkeeping beyond a local int that names the field being read,
  so an error can say which field broke.
* Decoders raise only :class:`~sharecon.protocol.primitives.DecodeError`; encoders raise
  only :class:`EncodeError`. Both carry the field path.
"""

from __future__ import annotations

import dataclasses
import importlib
import struct
import types
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, TypeAlias, TypeVar

from sharecon.errors import LocalProtocolError
from sharecon.protocol.primitives import DecodeError, Reader, UnknownTags, Writer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "MAX_VERSION",
    "ArrayOf",
    "EncodeError",
    "FieldSpec",
    "Message",
    "Records",
    "Request",
    "Response",
    "Struct",
    "TypeSpec",
    "UnknownTags",
    "decoder_for",
    "encoder_for",
]

#: Upper bound standing for "and every later version" (``N+`` in a version range).
MAX_VERSION = 0x7FFF

#: The value of a ``records`` field: the raw RecordBatch bytes. Decoding yields a
#: zero-copy ``memoryview`` into the frame; encoding accepts any bytes-like object.
Records: TypeAlias = "bytes | memoryview"

_FIXED_SIZES = {
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
}
_STRINGY = ("string", "bytes", "records")


class ArrayOf(NamedTuple):
    """An array whose elements have type ``elem``."""

    elem: TypeSpec


#: A field type: a primitive name (``"int32"``, ``"string"``, ``"records"``, ...),
#: a :class:`Struct` subclass, or :class:`ArrayOf`.
TypeSpec: TypeAlias = "str | type[Struct] | ArrayOf"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one field goes on the wire. Version ranges are inclusive ``(low, high)``."""

    name: str
    type: TypeSpec
    versions: tuple[int, int]
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged: tuple[int, int] | None = None
    ignorable: bool = False

    def present(self, version: int) -> bool:
        """Whether the field exists at ``version``."""
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        """Whether null is allowed at ``version``."""
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def is_tagged(self, version: int) -> bool:
        """Whether the field goes in the tagged section at ``version``."""
        return self.tagged is not None and self.tagged[0] <= version <= self.tagged[1]


class EncodeError(LocalProtocolError):
    """A value the wire cannot hold; ``path`` names the field (innermost first)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def where(self) -> str:
        """The field path, outermost first."""
        return ".".join(reversed(self.path))


_S = TypeVar("_S", bound="Struct")


class Struct:
    """Base of every generated struct: fields in ``kafka_fields``, unknown tags kept."""

    __slots__ = ()

    kafka_fields: ClassVar[tuple[FieldSpec, ...]] = ()

    if TYPE_CHECKING:
        unknown_tags: UnknownTags

    def encode(self, version: int) -> bytes:
        """Encode this struct alone (for a message: the body without header) at ``version``.

        :raises LocalProtocolError: for a value the wire cannot hold at ``version``.
        """
        w = Writer()
        try:
            encoder_for(type(self), version)(w, self)
        except EncodeError as exc:
            raise LocalProtocolError(
                f"{_label(type(self), version)}: {exc.reason} (field {exc.where()})"
            ) from None
        return bytes(w.buf)

    @classmethod
    def decode(cls: type[_S], data: bytes | bytearray | memoryview, version: int) -> _S:
        """Decode exactly ``data`` (no trailing bytes allowed) at ``version``.

        :raises RemoteProtocolError: naming the field and byte offset that failed.
        """
        r = Reader(data)
        try:
            value = decoder_for(cls, version)(r)
            r.finish()
        except DecodeError as exc:
            raise describe_decode_error(exc, _label(cls, version)) from None
        return value  # type: ignore[no-any-return]


class Message(Struct):
    """A request or response body. ``api_key`` and the version range are class facts."""

    __slots__ = ()

    #: Numeric API key (e.g. 78 for ShareFetch).
    api_key: ClassVar[int]
    #: API name as Kafka spells it (e.g. ``"ShareFetch"``).
    api_name: ClassVar[str]
    #: Lowest and highest version this class can encode and decode.
    min_version: ClassVar[int]
    max_version: ClassVar[int]
    #: First flexible version (compact encodings, tagged fields, header v2/v1).
    flexible_from: ClassVar[int]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """Whether ``version`` uses the flexible (compact, tagged) encoding."""
        return version >= cls.flexible_from


class Response(Message):
    """Base of every response body."""

    __slots__ = ()


R_co = TypeVar("R_co", bound=Response, covariant=True)


class Request(Message, Generic[R_co]):
    """Base of every request body; ``response_type`` is the class its answer decodes to."""

    __slots__ = ()

    response_type: ClassVar[type[Response]]


def _label(cls: type[Struct], version: int) -> str:
    return f"{cls.__name__} v{version}"


def describe_decode_error(exc: DecodeError, what: str) -> DecodeError:
    """Turn a low-level :class:`DecodeError` into one whose message names ``what``
    (e.g. ``"ShareFetchResponse v1"``), the field path and the byte offset."""
    where = exc.where()
    field = f" in field {where}" if where else ""
    out = DecodeError(f"{what}: {exc.reason}{field}", exc.offset)
    out.path = list(exc.path)
    return out


# --------------------------------------------------------------------------------------
# Codec compiler
# --------------------------------------------------------------------------------------

_DECODERS: dict[tuple[type[Struct], int], Callable[[Reader], Any]] = {}
_GENERIC_DECODERS: dict[tuple[type[Struct], int], Callable[[Reader], Any]] = {}
_ENCODERS: dict[tuple[type[Struct], int], Callable[[Writer, Any], None]] = {}
_GENERIC_ENCODERS: dict[tuple[type[Struct], int], Callable[[Writer, Any], None]] = {}


def _flexible(cls: type[Struct], version: int) -> bool:
    owner = _OWNER.get(cls, cls)
    if issubclass(owner, Message):
        return version >= owner.flexible_from
    return True


#: Nested struct class -> the message class it belongs to (set by ``register``).
_OWNER: dict[type[Struct], type[Message]] = {}


def register(message: type[Message]) -> None:
    """Record which message each nested struct belongs to (flexibility is per message)."""

    def walk(cls: type[Struct]) -> None:
        for f in cls.kafka_fields:
            t = f.type
            while isinstance(t, ArrayOf):
                t = t.elem
            if isinstance(t, type):
                _OWNER.setdefault(t, message)
                walk(t)

    walk(message)


def _min_size(t: TypeSpec, version: int, flex: bool) -> int:
    # Smallest number of bytes one value of `t` can take; bounds array lengths before
    # anything is allocated.
    if isinstance(t, ArrayOf):
        return 1 if flex else 4
    if isinstance(t, str):
        if t in _FIXED_SIZES:
            return _FIXED_SIZES[t]
        if t == "string":
            return 1 if flex else 2
        return 1 if flex else 4
    total = 1 if flex else 0
    for f in t.kafka_fields:
        if f.present(version) and not (flex and f.is_tagged(version)):
            total += _min_size(f.type, version, flex)
    return total


def _default_of(cls: type[Struct], name: str) -> Any:
    fld = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if fld.default is not dataclasses.MISSING:
        return fld.default
    if fld.default_factory is not dataclasses.MISSING:
        return fld.default_factory()
    raise AssertionError(f"{cls.__name__}.{name} has no default")


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if default is None or value is None:
        return False
    if isinstance(default, tuple) and not default:
        try:
            return len(value) == 0
        except TypeError:
            return False
    try:
        return bool(value == default)
    except Exception:
        return False


class _Gen:
    """Accumulates the source of one codec function and the globals it needs."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "DecodeError": DecodeError,
            "EncodeError": EncodeError,
            "LocalProtocolError": LocalProtocolError,
            "Writer": Writer,
            "_is_default": _is_default,
        }
        self._n = 0

    def const(self, value: Any, hint: str = "k") -> str:
        self._n += 1
        name = f"_{hint}{self._n}"
        self.ns[name] = value
        return name

    def var(self, hint: str = "v") -> str:
        self._n += 1
        return f"{hint}{self._n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _read_expr(g: _Gen, t: TypeSpec, version: int, flex: bool) -> str:
    """Expression reading one non-null-checked value of `t` (arrays handled by caller)."""
    if isinstance(t, str):
        if t in _FIXED_SIZES:
            return f"r.{t}()"
        if t == "string":
            return "r.compact_string()" if flex else "r.string()"
        if t in ("bytes", "records"):
            return "r.compact_bytes_view()" if flex else "r.bytes_view()"
        raise AssertionError(t)
    if isinstance(t, ArrayOf):
        raise AssertionError("nested arrays are read by _emit_read")
    return g.const(decoder_for(t, version), "dec") + "(r)"


def _emit_read(
    g: _Gen, ind: int, target: str, f: FieldSpec, version: int, flex: bool, struct_name: str
) -> None:
    nullable = f.is_nullable(version)
    t = f.type
    label = f"{struct_name}.{f.name}"
    null_msg = g.const(f"null value for non-nullable field {label}", "m")
    if isinstance(t, ArrayOf):
        unit = _min_size(t.elem, version, flex)
        n = g.var("n")
        if flex:
            # A one-byte length that fits in what is left, read inline (null is 0: -1);
            # anything else by the method, which names what is wrong.
            g.emit(ind, "p = r.pos")
            g.emit(
                ind, f"if p < r.end and r.buf[p] < 0x80 and (r.buf[p] - 1) * {unit} < r.end - p:"
            )
            g.emit(ind + 1, f"{n} = r.buf[p] - 1")
            g.emit(ind + 1, "r.pos = p + 1")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"{n} = r.compact_array_len({unit})")
        else:
            g.emit(ind, f"{n} = r.array_len({unit})")
        g.emit(ind, f"if {n} < 0:")
        if nullable:
            g.emit(ind + 1, f"{target} = None")
        else:
            g.emit(ind + 1, f"raise DecodeError({null_msg}, r.pos)")
        g.emit(ind, "else:")
        if isinstance(t.elem, ArrayOf):
            raise AssertionError("arrays of arrays are not used by Kafka messages")
        elem = _read_expr(g, t.elem, version, flex)
        g.emit(ind + 1, f"{target} = tuple([{elem} for _ in range({n})])")
        return
    if isinstance(t, type):
        dec = g.const(decoder_for(t, version), "dec")
        if nullable:
            g.emit(ind, f"{target} = None if r.int8() < 0 else {dec}(r)")
        else:
            g.emit(ind, f"{target} = {dec}(r)")
        return
    expr = _read_expr(g, t, version, flex)
    if t == "string" and flex and nullable:
        # A null compact string (one zero byte: most error messages) read inline, not
        # through two method calls; anything else, or too few bytes, by the method.
        g.emit(ind, "p = r.pos")
        g.emit(ind, "if p < r.end and r.buf[p] == 0:")
        g.emit(ind + 1, "r.pos = p + 1")
        g.emit(ind + 1, f"{target} = None")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{target} = {expr}")
        return
    if t == "records" and flex:
        # A records field whose length takes one or two bytes (an answer's empty and
        # small partitions) read inline; longer ones, and too few bytes, by the method.
        g.emit(ind, "p = r.pos")
        g.emit(ind, "buf = r.buf")
        g.emit(ind, "end = r.end")
        g.emit(ind, "n = -2")
        g.emit(ind, "if p < end:")
        g.emit(ind + 1, "b = buf[p]")
        g.emit(ind + 1, "if b < 0x80:")
        g.emit(ind + 2, "n = b - 1")
        g.emit(ind + 2, "q = p + 1")
        g.emit(ind + 1, "elif p + 1 < end and buf[p + 1] < 0x80:")
        g.emit(ind + 2, "n = ((b & 0x7F) | (buf[p + 1] << 7)) - 1")
        g.emit(ind + 2, "q = p + 2")
        g.emit(ind, "if n == -1:")
        g.emit(ind + 1, "r.pos = q")
        g.emit(ind + 1, f"{target} = None")
        g.emit(ind, "elif n >= 0 and q + n <= end:")
        g.emit(ind + 1, "r.pos = q + n")
        g.emit(ind + 1, f"{target} = buf[q : q + n]")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{target} = {expr}")
        if not nullable:
            null_msg2 = null_msg
            g.emit(ind, f"if {target} is None:")
            g.emit(ind + 1, f"raise DecodeError({null_msg2}, r.pos)")
        return
    if t in _STRINGY:
        g.emit(ind, f"{target} = {expr}")
        if not nullable:
            g.emit(ind, f"if {target} is None:")
            g.emit(ind + 1, f"raise DecodeError({null_msg}, r.pos)")
        if t == "bytes":
            # `bytes` fields are small (SASL tokens); copy so they outlive the frame.
            # `records` stay a zero-copy view.
            g.emit(ind, f"if {target} is not None:")
            g.emit(ind + 1, f"{target} = bytes({target})")
        return
    g.emit(ind, f"{target} = {expr}")


#: struct format letters of the fixed-size numbers a run of fields can be read with at once.
_STRUCT_CODES = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
}


def _is_fixed(f: FieldSpec) -> bool:
    return isinstance(f.type, str) and f.type in _STRUCT_CODES


def _runs(fields: list[tuple[int, FieldSpec]]) -> list[list[tuple[int, FieldSpec]]]:
    # Consecutive fixed-size numbers form one run; every other field is a run of its own.
    runs: list[list[tuple[int, FieldSpec]]] = []
    for i, f in fields:
        fixed = isinstance(f.type, str) and f.type in _STRUCT_CODES
        if (
            fixed
            and runs
            and isinstance(runs[-1][0][1].type, str)
            and (runs[-1][0][1].type in _STRUCT_CODES)
        ):
            runs[-1].append((i, f))
        else:
            runs.append([(i, f)])
    return runs


def _emit_fixed_run(g: _Gen, run: list[tuple[int, FieldSpec]]) -> None:
    # One struct.unpack_from for the whole run (a partition's error code, index, leader
    # and epoch are one call, not four). Too few bytes left: read field by field, so the
    # error names the field that was cut short, exactly as before.
    fmt = ">" + "".join(_STRUCT_CODES[str(f.type)] for _, f in run)
    unpack = g.const(struct.Struct(fmt).unpack_from, "unpack")
    size = struct.calcsize(fmt)
    targets = ", ".join(f"f{i}" for i, _ in run) + ("," if len(run) == 1 else "")
    g.emit(2, f"if r.pos + {size} <= r.end:")
    g.emit(3, f"{targets} = {unpack}(r.buf, r.pos)")
    g.emit(3, f"r.pos += {size}")
    g.emit(2, "else:")
    for i, f in run:
        g.emit(3, f"fi = {i}")
        g.emit(3, f"f{i} = r.{f.type}()")


def _slot_setters(cls: type[Struct]) -> dict[str, Any] | None:
    """Each dataclass field's slot setter, or ``None`` when the class must be built
    through its ``__init__`` (no slots, a ``__post_init__``, a default factory)."""
    if hasattr(cls, "__post_init__"):
        return None
    setters: dict[str, Any] = {}
    for fld in dataclasses.fields(cls):  # type: ignore[arg-type]
        slot = vars(cls).get(fld.name)
        if type(slot) is not types.MemberDescriptorType:
            return None
        if fld.default is dataclasses.MISSING:
            return None  # every field the decoder leaves out must have a plain default
        setters[fld.name] = slot.__set__
    return setters


def _emit_construct(g: _Gen, cls: type[Struct], kwargs: list[str]) -> None:
    # A frozen dataclass's __init__ sets each field through object.__setattr__, a call
    # per field that costs more than decoding it: a partition of a ShareFetch answer
    # is three structs. The decoder sets the slots directly instead (the same values,
    # the defaults for the fields this version lacks), about half the cost.
    setters = _slot_setters(cls)
    if setters is None:
        g.emit(1, f"return _cls({', '.join(kwargs)})")
        return
    given = dict(kw.split("=", 1) for kw in kwargs)
    g.ns["_new"] = object.__new__
    g.emit(1, "o = _new(_cls)")
    for name, setter in setters.items():
        value = given.get(name)
        if value is None:
            value = g.const(cls.__dataclass_fields__[name].default, "d")  # type: ignore[attr-defined]
        g.emit(1, f"{g.const(setter, 'set')}(o, {value})")
    g.emit(1, "return o")


#: Codecs written out for mypyc: (module, class name) -> the module and the function
#: that makes one from the version and the generic codec (to which it hands anything
#: unusual, errors included). Used only where that module is compiled.
_WRITTEN_OUT = {
    ("decode", "sharecon.protocol.messages.share_fetch", "ShareFetchResponse"): (
        "sharecon.protocol._share_fetch_codec",
        "share_fetch_response_decoder",
    ),
    ("encode", "sharecon.protocol.messages.share_fetch", "ShareFetchRequest"): (
        "sharecon.protocol._share_fetch_codec",
        "share_fetch_request_encoder",
    ),
}


def _written_out(kind: str, cls: type[Struct], version: int, generic: Any) -> Any:
    # The codec written out for mypyc, where there is one and it is compiled; else None.
    written = _WRITTEN_OUT.get((kind, cls.__module__, cls.__qualname__))
    if written is None:
        return None
    module = importlib.import_module(written[0])
    if not (getattr(module, "__file__", None) or "").endswith(tuple(EXTENSION_SUFFIXES)):
        return None
    return getattr(module, written[1])(version, generic)


def decoder_for(cls: type[Struct], version: int) -> Callable[[Reader], Any]:
    """The compiled decoder of ``cls`` at ``version`` (built on first use, then cached)."""
    key = (cls, version)
    fn = _DECODERS.get(key)
    if fn is not None:
        return fn
    fn = generic_decoder_for(cls, version)
    fn = _written_out("decode", cls, version, fn) or fn
    _DECODERS[key] = fn
    return fn


def generic_decoder_for(cls: type[Struct], version: int) -> Callable[[Reader], Any]:
    """The generated decoder of ``cls`` at ``version`` (built on first use, then cached);
    :func:`decoder_for` may use one written out for mypyc instead."""
    key = (cls, version)
    fn = _GENERIC_DECODERS.get(key)
    if fn is not None:
        return fn
    flex = _flexible(cls, version)
    g = _Gen()
    sname = cls.__name__
    names = [f.name for f in cls.kafka_fields] + ["<tagged fields>", "<start>"]
    g.ns["_names"] = names
    g.ns["_cls"] = cls
    g.ns["_struct"] = sname
    # Placeholder so recursive structs (none in Kafka today) would not loop forever.
    g.emit(0, "def decode(r):")
    g.emit(1, "fi = -1")
    g.emit(1, "try:")
    g.emit(2, "pass")
    kwargs: list[str] = []
    tagged: list[tuple[int, FieldSpec]] = []
    body: list[tuple[int, FieldSpec]] = []
    for i, f in enumerate(cls.kafka_fields):
        if not f.present(version):
            continue
        if flex and f.is_tagged(version):
            tagged.append((i, f))
            continue
        body.append((i, f))
        kwargs.append(f"{f.name}=f{i}")
    for run in _runs(body):
        if len(run) > 1 or _is_fixed(run[0][1]):
            # One unpack_from for the run (or the lone number), not a method call each.
            _emit_fixed_run(g, run)
            continue
        i, f = run[0]
        g.emit(2, f"fi = {i}")
        _emit_read(g, 2, f"f{i}", f, version, flex, sname)
    if flex:
        tag_idx = len(cls.kafka_fields)
        g.emit(2, f"fi = {tag_idx}")
        g.emit(2, "unk = ()")
        # No tagged fields (one zero byte, nearly always) read inline, not by a call.
        g.emit(2, "p = r.pos")
        g.emit(2, "if p < r.end and r.buf[p] == 0:")
        g.emit(3, "r.pos = p + 1")
        g.emit(3, "ntag = 0")
        g.emit(2, "else:")
        g.emit(3, "ntag = r.uvarint()")
        for i, f in tagged:
            default = g.const(_default_of(cls, f.name), "d")
            g.emit(2, f"f{i} = {default}")
            kwargs.append(f"{f.name}=f{i}")
        g.emit(2, "if ntag:")
        g.emit(3, "unk_l = []")
        g.emit(3, "for _ in range(ntag):")
        g.emit(4, f"fi = {tag_idx}")
        g.emit(4, "tag = r.uvarint()")
        g.emit(4, "size = r.uvarint()")
        g.emit(4, "start = r.pos")
        g.emit(4, "outer_end = r.end")
        g.emit(4, "if size > outer_end - start:")
        g.emit(
            5,
            "raise DecodeError(f'tagged field {tag} claims {size} bytes, "
            "{outer_end - start} left', start)",
        )
        g.emit(4, "r.end = start + size")
        first = True
        for i, f in tagged:
            g.emit(4, f"{'if' if first else 'elif'} tag == {f.tag}:")
            first = False
            g.emit(5, f"fi = {i}")
            _emit_read(g, 5, f"f{i}", f, version, flex, sname)
        if tagged:
            g.emit(4, "else:")
            g.emit(5, "unk_l.append((tag, bytes(r.raw(size))))")
        else:
            g.emit(4, "unk_l.append((tag, bytes(r.raw(size))))")
        g.emit(4, "if r.pos != r.end:")
        g.emit(
            5,
            "raise DecodeError(f'tagged field {tag} declared {size} bytes but used "
            "{r.pos - start}', r.pos)",
        )
        g.emit(4, "r.end = outer_end")
        g.emit(3, "unk = tuple(unk_l)")
        kwargs.append("unknown_tags=unk")
    g.emit(1, "except DecodeError as e:")
    g.emit(2, "e.path.append(_struct + '.' + _names[fi] if fi >= 0 else _struct)")
    g.emit(2, "raise")
    _emit_construct(g, cls, kwargs)
    src = "\n".join(g.lines)
    exec(compile(src, f"<decode {sname} v{version}>", "exec"), g.ns)
    fn = g.ns["decode"]
    _GENERIC_DECODERS[key] = fn
    return fn  # type: ignore[no-any-return]


def _write_stmt(g: _Gen, t: TypeSpec, version: int, flex: bool, value: str, w: str) -> str:
    if isinstance(t, str):
        if t in _FIXED_SIZES:
            return f"{w}.{t}({value})"
        if t == "string":
            return f"{w}.{'compact_string' if flex else 'string'}({value})"
        return f"{w}.{'compact_bytes' if flex else 'bytes'}({value})"
    if isinstance(t, ArrayOf):
        raise AssertionError("arrays are written by _emit_write")
    enc = g.const(encoder_for(t, version), "enc")
    return f"{enc}({w}, {value})"


def _emit_write(
    g: _Gen, ind: int, value: str, f: FieldSpec, version: int, flex: bool, w: str
) -> None:
    nullable = f.is_nullable(version)
    t = f.type
    null_msg = g.const(f"None given for non-nullable field at v{version}", "m")
    if isinstance(t, ArrayOf):
        g.emit(ind, f"if {value} is None:")
        if nullable:
            g.emit(ind + 1, f"{w}.{'compact_array_len' if flex else 'array_len'}(None)")
        else:
            g.emit(ind + 1, f"raise EncodeError({null_msg})")
        g.emit(ind, "else:")
        if flex:
            # A length under 127 is one byte (n + 1): appended, not through two calls.
            n = g.var("n")
            g.emit(ind + 1, f"{n} = len({value})")
            g.emit(ind + 1, f"if {n} < 127:")
            g.emit(ind + 2, f"{w}.buf.append({n} + 1)")
            g.emit(ind + 1, "else:")
            g.emit(ind + 2, f"{w}.compact_array_len({n})")
        else:
            g.emit(ind + 1, f"{w}.array_len(len({value}))")
        e = g.var("e")
        g.emit(ind + 1, f"for {e} in {value}:")
        g.emit(ind + 2, _write_stmt(g, t.elem, version, flex, e, w))
        return
    if isinstance(t, type):
        stmt = _write_stmt(g, t, version, flex, value, w)
        g.emit(ind, f"if {value} is None:")
        if nullable:
            g.emit(ind + 1, f"{w}.int8(-1)")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"{w}.int8(1)")
            g.emit(ind + 1, stmt)
        else:
            g.emit(ind + 1, f"raise EncodeError({null_msg})")
            g.emit(ind, stmt)
        return
    if t in _STRINGY and not nullable:
        g.emit(ind, f"if {value} is None:")
        g.emit(ind + 1, f"raise EncodeError({null_msg})")
    g.emit(ind, _write_stmt(g, t, version, flex, value, w))


def encoder_for(cls: type[Struct], version: int) -> Callable[[Writer, Any], None]:
    """The compiled encoder of ``cls`` at ``version`` (built on first use, then cached)."""
    key = (cls, version)
    fn = _ENCODERS.get(key)
    if fn is not None:
        return fn
    fn = generic_encoder_for(cls, version)
    fn = _written_out("encode", cls, version, fn) or fn
    _ENCODERS[key] = fn
    return fn


def generic_encoder_for(cls: type[Struct], version: int) -> Callable[[Writer, Any], None]:
    """The generated encoder of ``cls`` at ``version`` (built on first use, then cached);
    :func:`encoder_for` may use one written out for mypyc instead."""
    key = (cls, version)
    fn = _GENERIC_ENCODERS.get(key)
    if fn is not None:
        return fn
    flex = _flexible(cls, version)
    g = _Gen()
    sname = cls.__name__
    names = [f.name for f in cls.kafka_fields] + ["unknown_tags", "<start>"]
    g.ns["_names"] = names
    g.ns["_struct"] = sname
    g.emit(0, "def encode(w, o):")
    g.emit(1, "fi = -1")
    g.emit(1, "try:")
    g.emit(2, "pass")
    tagged: list[tuple[int, FieldSpec]] = []
    for i, f in enumerate(cls.kafka_fields):
        if not f.present(version):
            if not f.ignorable:
                default = g.const(_default_of(cls, f.name), "d")
                msg = g.const(
                    f"field {sname}.{f.name} is not in version {version} "
                    "and cannot be set to a non-default value",
                    "m",
                )
                g.emit(2, f"fi = {i}")
                g.emit(2, f"if not _is_default(o.{f.name}, {default}):")
                g.emit(3, f"raise EncodeError({msg})")
            continue
        if flex and f.is_tagged(version):
            tagged.append((i, f))
            continue
        g.emit(2, f"fi = {i}")
        v = g.var("x")
        g.emit(2, f"{v} = o.{f.name}")
        _emit_write(g, 2, v, f, version, flex, "w")
    unk_idx = len(cls.kafka_fields)
    if flex:
        g.emit(2, f"fi = {unk_idx}")
        if not tagged:
            # No tagged fields (nearly always): the one zero byte appended inline.
            g.emit(2, "unk = o.unknown_tags")
            g.emit(2, "if unk:")
            g.emit(3, "w.tagged_section(unk)")
            g.emit(2, "else:")
            g.emit(3, "w.buf.append(0)")
        else:
            g.emit(2, "tags = list(o.unknown_tags)")
            for i, f in tagged:
                default = g.const(_default_of(cls, f.name), "d")
                v = g.var("x")
                g.emit(2, f"fi = {i}")
                g.emit(2, f"{v} = o.{f.name}")
                g.emit(2, f"if not _is_default({v}, {default}):")
                g.emit(3, "tw = Writer()")
                _emit_write(g, 3, v, f, version, flex, "tw")
                g.emit(3, f"tags.append(({f.tag}, bytes(tw.buf)))")
            g.emit(2, f"fi = {unk_idx}")
            g.emit(2, "w.tagged_section(tags)")
    else:
        msg = g.const(f"unknown_tags cannot be sent in non-flexible version {version}", "m")
        g.emit(2, f"fi = {unk_idx}")
        g.emit(2, "if o.unknown_tags:")
        g.emit(3, f"raise EncodeError({msg})")
    g.emit(1, "except EncodeError as e:")
    g.emit(2, "e.path.append(_struct + '.' + _names[fi] if fi >= 0 else _struct)")
    g.emit(2, "raise")
    g.emit(1, "except LocalProtocolError as e:")
    g.emit(2, "err = EncodeError(str(e))")
    g.emit(2, "err.path.append(_struct + '.' + _names[fi] if fi >= 0 else _struct)")
    g.emit(2, "raise err from None")
    g.emit(1, "except (TypeError, AttributeError, ValueError, OverflowError) as e:")
    g.emit(2, "err = EncodeError(f'bad value ({type(e).__name__}: {e})')")
    g.emit(2, "err.path.append(_struct + '.' + _names[fi] if fi >= 0 else _struct)")
    g.emit(2, "raise err from None")
    src = "\n".join(g.lines)
    exec(compile(src, f"<encode {sname} v{version}>", "exec"), g.ns)
    fn = g.ns["encode"]
    _GENERIC_ENCODERS[key] = fn
    return fn  # type: ignore[no-any-return]
