"""Serializers for :class:`~sharecon.Producer` and deserializers for
:class:`~sharecon.ShareConsumer`: plain callables, and helpers for JSON and text.

::

    from sharecon import Producer, ShareConsumer
    from sharecon.serde import json_deserializer, json_serializer, string_deserializer

    async with Producer(bootstrap, value_serializer=json_serializer()) as producer:
        await producer.send("orders", {"id": 7, "total": 12.5}, key=b"customer-7")

    async with ShareConsumer(bootstrap, group_id="billing", topics=["orders"],
                             key_deserializer=string_deserializer(),
                             value_deserializer=json_deserializer()) as consumer:
        async for record in consumer:
            print(record.key, record.value["total"])    # str, and the decoded JSON

Rules of this module:

1. A serializer is any ``Callable[[T], bytes | None]``, a deserializer any
   ``Callable[[bytes], T]``: ``json.loads`` or a schema library's decoder work as they are.
2. ``None`` is never passed to either: a null key or a tombstone value stays ``None`` in
   both directions, so a JSON serializer never turns a tombstone into ``b"null"``.
3. Arguments are checked when the helper is made (an unknown encoding is a
   :class:`~sharecon.errors.ConfigError` at once, not on the first record).
4. A (de)serializer that needs the record's topic, partition, offset, headers or which
   field it handles is wrapped once, where it is made: :func:`with_context` for a plain
   function ``fn(data, ctx)``, :func:`async_deserializer` / :func:`async_serializer` for a
   coroutine function ``async fn(data, ctx)`` (a schema-registry lookup). The client sees
   the wrapper's type when it is made and picks its path then; a plain callable keeps the
   path it always had, with no per-record test of its kind. The consumer awaits an async
   deserializer where it hands records out (``async for``, :meth:`~sharecon.ShareConsumer.poll`,
   :meth:`~sharecon.ShareConsumer.batches`, :meth:`~sharecon.ShareConsumer.process`), the
   producer an async serializer in :meth:`~sharecon.Producer.send`.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from sharecon import errors

__all__ = [
    "AnyDeserializer",
    "AnySerializer",
    "AsyncWithContext",
    "Deserializer",
    "SerdeContext",
    "Serializer",
    "WithContext",
    "async_deserializer",
    "async_serializer",
    "json_deserializer",
    "json_serializer",
    "string_deserializer",
    "string_serializer",
    "with_context",
]

T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")

#: Turns a key or value into bytes for the producer (``None`` is never passed in).
Serializer: TypeAlias = Callable[[T], "bytes | None"]
#: Turns fetched key or value bytes into what the application handles (never given ``None``).
Deserializer: TypeAlias = Callable[[bytes], T]


@dataclass(frozen=True, slots=True)
class SerdeContext:
    """What a context-aware (de)serializer is told about the record it handles (rule 4).

    :ivar topic: the record's topic.
    :ivar partition: its partition (the producer: the ``partition`` given to ``send``,
        else ``None``: the partitioner has not picked one yet).
    :ivar offset: its offset (the consumer); ``None`` on the producer side.
    :ivar headers: its headers, ``(name, value)`` pairs in order.
    :ivar field: ``"key"`` or ``"value"``: which of the two is being handled.
    """

    topic: str
    partition: int | None
    offset: int | None
    headers: tuple[tuple[str, bytes | None], ...]
    field: Literal["key", "value"]


@dataclass(frozen=True, slots=True)
class WithContext(Generic[A, R]):
    """A (de)serializer called as ``fn(data, ctx)`` with a :class:`SerdeContext` (rule 4);
    made by :func:`with_context`."""

    fn: Callable[[A, SerdeContext], R]


@dataclass(frozen=True, slots=True)
class AsyncWithContext(Generic[A, R]):
    """A (de)serializer awaited as ``await fn(data, ctx)`` with a :class:`SerdeContext`
    (rule 4); made by :func:`async_deserializer` or :func:`async_serializer`."""

    fn: Callable[[A, SerdeContext], Awaitable[R]]


def with_context(fn: Callable[[A, SerdeContext], R]) -> WithContext[A, R]:
    """Mark ``fn(data, ctx)`` as a (de)serializer that is given a :class:`SerdeContext`.

    :raises ConfigError: ``fn`` is not callable.
    """
    _check_callable(fn, "with_context")
    return WithContext(fn)


def async_deserializer(
    fn: Callable[[bytes, SerdeContext], Awaitable[T]],
) -> AsyncWithContext[bytes, T]:
    """Mark ``async fn(data, ctx)`` as a deserializer the consumer awaits (rule 4).

    :raises ConfigError: ``fn`` is not callable.
    """
    _check_callable(fn, "async_deserializer")
    return AsyncWithContext(fn)


def async_serializer(
    fn: Callable[[T, SerdeContext], Awaitable[bytes | None]],
) -> AsyncWithContext[T, bytes | None]:
    """Mark ``async fn(obj, ctx)`` as a serializer the producer awaits (rule 4).

    :raises ConfigError: ``fn`` is not callable.
    """
    _check_callable(fn, "async_serializer")
    return AsyncWithContext(fn)


def _check_callable(fn: object, name: str) -> None:
    if not callable(fn):
        raise errors.ConfigError(f"{name}() takes a callable, not {type(fn).__name__}")


#: What a consumer's ``key_deserializer`` / ``value_deserializer`` may be.
AnyDeserializer: TypeAlias = (
    Callable[[bytes], T] | WithContext[bytes, T] | AsyncWithContext[bytes, T]
)
#: What a producer's ``key_serializer`` / ``value_serializer`` may be.
AnySerializer: TypeAlias = (
    Callable[[T], bytes | None] | WithContext[T, bytes | None] | AsyncWithContext[T, bytes | None]
)


def _check_encoding(encoding: str, errors_: str) -> None:
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise errors.ConfigError(f"unknown text encoding {encoding!r}") from None
    try:
        codecs.lookup_error(errors_)
    except (LookupError, TypeError):
        raise errors.ConfigError(f"unknown encoding error handler {errors_!r}") from None


def string_serializer(encoding: str = "utf-8", errors: str = "strict") -> Serializer[str]:
    """``str`` to bytes in ``encoding``.

    :param errors: what to do with characters the encoding cannot express, as
        :meth:`str.encode` (``"strict"`` raises, so the record is not sent).
    :raises ConfigError: an unknown encoding or error handler.
    """
    _check_encoding(encoding, errors)

    def serialize(text: str) -> bytes:
        return text.encode(encoding, errors)

    return serialize


def string_deserializer(encoding: str = "utf-8", errors: str = "strict") -> Deserializer[str]:
    """Bytes to ``str`` from ``encoding``.

    :param errors: what to do with bytes that are not valid in the encoding, as
        :meth:`bytes.decode` (``"strict"`` raises, which the consumer reports as a
        :class:`~sharecon.errors.DeserializationError`).
    :raises ConfigError: an unknown encoding or error handler.
    """
    _check_encoding(encoding, errors)

    def deserialize(data: bytes) -> str:
        return data.decode(encoding, errors)

    return deserialize


def json_serializer(
    *,
    default: Callable[[Any], Any] | None = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> Serializer[Any]:
    """Any JSON-serializable object to compact UTF-8 JSON (``{"a":1}``).

    :param default: called for objects :mod:`json` cannot serialize (as :func:`json.dumps`).
    :param sort_keys: write object keys sorted.
    :param ensure_ascii: escape non-ASCII characters (off: they are written as UTF-8).
    """
    encoder = json.JSONEncoder(
        default=default, sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=(",", ":")
    )

    def serialize(obj: Any) -> bytes:
        return encoder.encode(obj).encode("utf-8")

    return serialize


def json_deserializer(
    *, object_hook: Callable[[dict[str, Any]], Any] | None = None
) -> Deserializer[Any]:
    """UTF-8 (or UTF-16/32, as :func:`json.loads` detects) JSON bytes to Python objects.

    :param object_hook: called with every decoded JSON object (as :func:`json.loads`).
    """
    if object_hook is None:
        return json.loads  # bytes in, the encoding detected

    def deserialize(data: bytes) -> Any:
        return json.loads(data, object_hook=object_hook)

    return deserialize
