"""The consumer's deserializers, applied to a record as it is handed out.

Rules of this module:

1. Both or neither: a record's key and value are replaced together, only once both
   deserializers succeeded; the bytes stay readable as ``serialized_key`` and
   ``serialized_value``.
2. A deserializer that raises gives a :class:`~sharecon.errors.DeserializationError` naming
   the record (topic, partition, offset, delivery), the field and the size of the bytes,
   never the bytes themselves in the message; the record is left unchanged.
3. ``None`` stays ``None`` (a tombstone's value, a record without key).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sharecon import errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from sharecon.record import Record

__all__ = ["Deserializers"]


class Deserializers:
    """A consumer's key and value deserializers (either may be ``None``: left as bytes)."""

    __slots__ = ("key", "value")

    def __init__(
        self, key: Callable[[bytes], Any] | None, value: Callable[[bytes], Any] | None
    ) -> None:
        self.key = key
        self.value = value

    @property
    def active(self) -> bool:
        """Whether there is anything to do per record."""
        return self.key is not None or self.value is not None

    def apply(self, record: Record[Any, Any]) -> None:
        """Replace ``record``'s key and value by what the deserializers make of them
        (rules 1-3).

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
            data = raw_key if field == "key" else raw_value
            assert data is not None
            raise errors.DeserializationError(
                f"{record.topic}-{record.partition} offset {record.offset} (delivery "
                f"{record.delivery_count}): the {field}_deserializer failed on {len(data)} "
                f"bytes: {type(exc).__name__}: {exc}",
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                field=field,
                data=data,
                delivery_count=record.delivery_count,
            ) from exc
        record._serialized = (raw_key, raw_value)
        record.key = key
        record.value = value
