"""A producer's key and value serializers, applied to one record.

Plain callables go through :func:`serialize`; a producer with a context or async one
(:mod:`sharecon.serde` rule 4) through :class:`ContextSerializers`, chosen once when the
producer is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sharecon import errors
from sharecon.serde import AsyncWithContext, SerdeContext, WithContext

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ContextSerializers", "serialize"]


def serialize(
    topic: object,
    key: Any,
    value: Any,
    key_serializer: Callable[[Any], object] | None,
    value_serializer: Callable[[Any], object] | None,
) -> tuple[bytes | None, bytes | None]:
    """The key and value through their serializers (``None`` stays ``None``).

    :raises ConfigError: ``topic`` is not a non-empty str.
    :raises SerializationError: a serializer raised or returned something else than
        bytes or ``None``.
    """
    if type(topic) is not str or not topic:
        raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
    out: list[bytes | None] = []
    fields: tuple[tuple[Literal["key", "value"], Any, Callable[[Any], object] | None], ...]
    fields = (("key", key, key_serializer), ("value", value, value_serializer))
    for field, data, serializer in fields:
        if data is None or serializer is None:
            out.append(data)
            continue
        try:
            result = serializer(data)
        except Exception as exc:
            raise _failed(topic, field, data, exc) from exc
        out.append(_checked(topic, field, result))
    return out[0], out[1]


def _failed(
    topic: str, field: Literal["key", "value"], data: object, exc: Exception
) -> errors.SerializationError:
    return errors.SerializationError(
        f"topic {topic!r}: the {field}_serializer failed on a "
        f"{type(data).__name__}: {type(exc).__name__}: {exc}",
        topic=topic,
        field=field,
    )


def _checked(topic: str, field: Literal["key", "value"], result: object) -> bytes | None:
    if result is not None and not isinstance(result, bytes | bytearray | memoryview):
        raise errors.SerializationError(
            f"topic {topic!r}: the {field}_serializer returned a "
            f"{type(result).__name__}; it must return bytes or None",
            topic=topic,
            field=field,
        )
    return result if result is None or type(result) is bytes else bytes(result)


class ContextSerializers:
    """Key and value serializers of which at least one takes a
    :class:`~sharecon.serde.SerdeContext` (either may be plain, or ``None``)."""

    __slots__ = ("awaits", "key", "key_kind", "value", "value_kind")

    def __init__(self, key: Any, value: Any) -> None:
        # 0: plain callable, 1: WithContext, 2: AsyncWithContext
        self.key_kind = (
            2 if isinstance(key, AsyncWithContext) else int(isinstance(key, WithContext))
        )
        self.value_kind = (
            2 if isinstance(value, AsyncWithContext) else int(isinstance(value, WithContext))
        )
        self.key: Any = key.fn if self.key_kind else key
        self.value: Any = value.fn if self.value_kind else value
        #: An async serializer: :meth:`apply_async` must be awaited.
        self.awaits = 2 in (self.key_kind, self.value_kind)

    @staticmethod
    def wanted(key: object, value: object) -> bool:
        """Whether either serializer is a context or async one."""
        return isinstance(key, WithContext | AsyncWithContext) or isinstance(
            value, WithContext | AsyncWithContext
        )

    def apply(
        self, topic: object, key: Any, value: Any, headers: Any, partition: Any
    ) -> tuple[bytes | None, bytes | None]:
        """:func:`serialize` with contexts (no async serializer among the two)."""
        topic = _check_topic(topic)
        out: list[bytes | None] = []
        for field, data, fn, kind in self._fields(key, value):
            if data is None or fn is None:
                out.append(data)
                continue
            try:
                if kind:
                    result = fn(data, SerdeContext(topic, partition, None, headers, field))
                else:
                    result = fn(data)
            except Exception as exc:
                raise _failed(topic, field, data, exc) from exc
            out.append(_checked(topic, field, result))
        return out[0], out[1]

    async def apply_async(
        self, topic: object, key: Any, value: Any, headers: Any, partition: Any
    ) -> tuple[bytes | None, bytes | None]:
        """:meth:`apply` awaiting the async serializers."""
        topic = _check_topic(topic)
        out: list[bytes | None] = []
        for field, data, fn, kind in self._fields(key, value):
            if data is None or fn is None:
                out.append(data)
                continue
            try:
                if kind == 2:
                    result = await fn(data, SerdeContext(topic, partition, None, headers, field))
                elif kind:
                    result = fn(data, SerdeContext(topic, partition, None, headers, field))
                else:
                    result = fn(data)
            except Exception as exc:
                raise _failed(topic, field, data, exc) from exc
            out.append(_checked(topic, field, result))
        return out[0], out[1]

    def _fields(
        self, key: Any, value: Any
    ) -> tuple[tuple[Literal["key", "value"], Any, Any, int], ...]:
        return (
            ("key", key, self.key, self.key_kind),
            ("value", value, self.value, self.value_kind),
        )


def _check_topic(topic: object) -> str:
    if type(topic) is not str or not topic:
        raise errors.ConfigError(f"topic must be a non-empty str, not {topic!r}")
    return topic
