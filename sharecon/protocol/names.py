"""Kafka's rules for names the user chooses: topics and group ids (pure functions).

Checking these before a request is built turns "the broker never finds that topic, so
the client waits forever" into an immediate :class:`~sharecon.errors.ConfigError` that
names the value and the rule it breaks. Every layer may use this module.
"""

from __future__ import annotations

import re
from typing import Final

from sharecon.errors import ConfigError

__all__ = [
    "MAX_STRING_BYTES",
    "MAX_TOPIC_NAME_LENGTH",
    "check_protocol_string",
    "topic_name_may_collide",
    "validate_group_id",
    "validate_topic_name",
]

#: Longest topic name Kafka accepts (``Topic.MAX_NAME_LENGTH``: 255 less room for the
#: partition suffix of its log directory names).
MAX_TOPIC_NAME_LENGTH: Final = 249

#: Longest string the protocol can carry: an int16 length prefix, counted in UTF-8 bytes.
MAX_STRING_BYTES: Final = 2**15 - 1

# Kafka's Topic.LEGAL_CHARS; fullmatch so a trailing newline cannot slip through `$`.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_ILLEGAL_TOPIC_CHAR = re.compile(r"[^a-zA-Z0-9._-]")

# Long bad names are shown shortened: the message must stay readable in a traceback.
_SHOWN_CHARS = 60


def _show(name: str) -> str:
    if len(name) <= _SHOWN_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_CHARS]!r}... ({len(name)} characters)"


def validate_topic_name(name: object, *, param: str = "topic") -> str:
    """Return ``name`` if Kafka accepts it as a topic name, else raise :class:`ConfigError`.

    Kafka's rules: a non-empty ``str`` of at most 249 characters from ``[a-zA-Z0-9._-]``,
    and neither ``"."`` nor ``".."``.

    :param param: the argument name to put in the error message (e.g. ``"topics"``).
    :raises ConfigError: naming ``param``, the bad name and the rule it breaks.
    """
    if not isinstance(name, str):
        raise ConfigError(
            f"{param}: a topic name must be a str, not {type(name).__name__} {name!r}"
        )
    reason = _topic_name_problem(name)
    if reason is not None:
        raise ConfigError(f"{param}: invalid topic name {_show(name)}: {reason}")
    return name


def _topic_name_problem(name: str) -> str | None:
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return "'.' and '..' are reserved"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"it is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}"
    if _LEGAL_TOPIC.fullmatch(name) is None:
        bad = sorted(set(_ILLEGAL_TOPIC_CHAR.findall(name)))
        shown = ", ".join(repr(c) for c in bad)
        return f"it contains {shown}; only ASCII letters, digits, '.', '_' and '-' are legal"
    return None


def topic_name_may_collide(name: str) -> bool:
    """Whether ``name`` mixes ``'.'`` and ``'_'``.

    Kafka warns about (but accepts) such names: its metric names replace ``'.'`` with
    ``'_'``, so ``"a.b"`` and ``"a_b"`` would report under one name. Callers may log it.
    """
    return "." in name and "_" in name


def validate_group_id(group_id: object, *, param: str = "group_id") -> str:
    """Return ``group_id`` if the protocol can carry it, else raise :class:`ConfigError`.

    Kafka allows any characters in a group id, but it must be a non-empty ``str`` whose
    UTF-8 encoding fits the protocol's int16-length string.

    :raises ConfigError: naming ``param``, the bad value and why.
    """
    if not isinstance(group_id, str):
        raise ConfigError(f"{param} must be a str, not {type(group_id).__name__} {group_id!r}")
    if not group_id:
        raise ConfigError(f"{param} must be a non-empty string")
    check_protocol_string(group_id, param=param)
    return group_id


def check_protocol_string(value: str, *, param: str) -> None:
    """Raise :class:`ConfigError` unless ``value`` fits a protocol string (UTF-8, int16 length)."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # Lone surrogates: the encoder would fail much later, inside a request.
        raise ConfigError(
            f"{param} {_show(value)} is not encodable as UTF-8: {exc.reason}"
        ) from None
    if size > MAX_STRING_BYTES:
        raise ConfigError(
            f"{param} {_show(value)} is {size} bytes in UTF-8; "
            f"the protocol carries at most {MAX_STRING_BYTES}"
        )
