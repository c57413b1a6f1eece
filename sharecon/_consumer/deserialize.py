"""The consumer's deserializers, applied to a record as it is handed out.

Rules of this module:

1. Both or neither: a record's key and value are replaced together, only once both
   deserializers succeeded; the bytes stay readable as ``serialized_key`` and
   ``serialized_value``.
2. A deserializer that raises gives a :class:`~sharecon.errors.DeserializationError` naming
   the record (topic, partition, offset, delivery), the field and the size of the bytes,
   never the bytes themselves in the message; the record is left unchanged.
3. ``None`` stays ``None`` (a tombstone's value, a record without key).
4. The kind of each deserializer (a plain callable, :class:`~sharecon.serde.WithContext`,
   :class:`~sharecon.serde.AsyncWithContext`) is read once, here, when the consumer is
   made: with plain callables only, :meth:`Deserializers.apply` is the whole per-record
   path, unchanged; with a context one, :meth:`Deserializers.apply_context`; with an async
   one, the consumer awaits :meth:`Deserializers.apply_async` (:attr:`Deserializers.awaits`).
   A :class:`~sharecon.serde.SerdeContext` is made only for a deserializer that asked for
   one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sharecon import errors
from sharecon.serde import AsyncWithContext, SerdeContext, WithContext

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.record import Record

__all__ = ["Deserializers"]

_PLAIN, _CONTEXT, _ASYNC = 0, 1, 2


def _kind(fn: object) -> int:
    if isinstance(fn, AsyncWithContext):
        return _ASYNC
    if isinstance(fn, WithContext):
        return _CONTEXT
    return _PLAIN


class Deserializers:
    """A consumer's key and value deserializers (either may be ``None``: left as bytes)."""

    __slots__ = ("_key_kind", "_value_kind", "awaits", "key", "plain", "value")

    def __init__(self, key: Any, value: Any) -> None:
        self._key_kind = _kind(key)
        self._value_kind = _kind(value)
        # A wrapper's function is what is called (rule 4).
        self.key: Any = key.fn if self._key_kind else key
        self.value: Any = value.fn if self._value_kind else value
        #: Only plain callables (or none): :meth:`apply` is the path.
        self.plain = self._key_kind == _PLAIN and self._value_kind == _PLAIN
        #: An async deserializer: the consumer awaits :meth:`apply_async`.
        self.awaits = _ASYNC in (self._key_kind, self._value_kind)

    @property
    def active(self) -> bool:
        """Whether there is anything to do per record."""
        return self.key is not None or self.value is not None

    @property
    def apply_sync(self) -> Callable[[Record[Any, Any]], None]:
        """The per-record step when nothing is awaited (rule 4)."""
        return self.apply if self.plain else self.apply_context

    def apply(self, record: Record[Any, Any]) -> None:
        """Replace ``record``'s key and value by what the deserializers make of them
        (rules 1-3), plain callables only.

        :raises DeserializationError: a deserializer raised; the record is unchanged.
        """
        key = raw_key = record.key
        value = raw_value = record.value
        field: Literal["key", "value"] = "key"
        try:
            if raw_key is not None and self.key is not None:
                key = self.key(raw_key)
            field = "value"
            if raw_value is not None and self.value is not None:
                value = self.value(raw_value)
        except Exception as exc:
            raise _failed(record, field, raw_key if field == "key" else raw_value, exc) from exc
        record._serialized = (raw_key, raw_value)
        record.key = key
        record.value = value

    def apply_context(self, record: Record[Any, Any]) -> None:
        """:meth:`apply` with context deserializers among the two (none async)."""
        key = raw_key = record.key
        value = raw_value = record.value
        field: Literal["key", "value"] = "key"
        try:
            if raw_key is not None and self.key is not None:
                if self._key_kind:
                    key = self.key(raw_key, _context(record, "key"))
                else:
                    key = self.key(raw_key)
            field = "value"
            if raw_value is not None and self.value is not None:
                if self._value_kind:
                    value = self.value(raw_value, _context(record, "value"))
                else:
                    value = self.value(raw_value)
        except Exception as exc:
            raise _failed(record, field, raw_key if field == "key" else raw_value, exc) from exc
        record._serialized = (raw_key, raw_value)
        record.key = key
        record.value = value

    async def apply_async(self, record: Record[Any, Any]) -> None:
        """:meth:`apply` with an async deserializer among the two, awaited."""
        key = raw_key = record.key
        value = raw_value = record.value
        field: Literal["key", "value"] = "key"
        try:
            if raw_key is not None and self.key is not None:
                key = await self._call(self.key, self._key_kind, raw_key, record, "key")
            field = "value"
            if raw_value is not None and self.value is not None:
                value = await self._call(self.value, self._value_kind, raw_value, record, "value")
        except Exception as exc:
            raise _failed(record, field, raw_key if field == "key" else raw_value, exc) from exc
        record._serialized = (raw_key, raw_value)
        record.key = key
        record.value = value

    @staticmethod
    async def _call(
        fn: Any, kind: int, data: bytes, record: Record[Any, Any], field: Literal["key", "value"]
    ) -> Any:
        if kind == _PLAIN:
            return fn(data)
        if kind == _CONTEXT:
            return fn(data, _context(record, field))
        return await fn(data, _context(record, field))


def _context(record: Record[Any, Any], field: Literal["key", "value"]) -> SerdeContext:
    return SerdeContext(record.topic, record.partition, record.offset, record.headers, field)


def _failed(
    record: Record[Any, Any], field: Literal["key", "value"], data: bytes | None, exc: Exception
) -> errors.DeserializationError:
    """The error of rule 2."""
    assert data is not None
    return errors.DeserializationError(
        f"{record.topic}-{record.partition} offset {record.offset} (delivery "
        f"{record.delivery_count}): the {field}_deserializer failed on {len(data)} "
        f"bytes: {type(exc).__name__}: {exc}",
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        field=field,
        data=data,
        delivery_count=record.delivery_count,
    )
