"""A producer's key and value serializers, applied to one record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sharecon import errors

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["serialize"]


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
            raise errors.SerializationError(
                f"topic {topic!r}: the {field}_serializer failed on a "
                f"{type(data).__name__}: {type(exc).__name__}: {exc}",
                topic=topic,
                field=field,
            ) from exc
        if result is not None and not isinstance(result, bytes | bytearray | memoryview):
            raise errors.SerializationError(
                f"topic {topic!r}: the {field}_serializer returned a "
                f"{type(result).__name__}; it must return bytes or None",
                topic=topic,
                field=field,
            )
        out.append(result if result is None or type(result) is bytes else bytes(result))
    return out[0], out[1]
