"""Kafka's topic-name and group-id rules (sharecon.protocol.names)."""

from __future__ import annotations

import pytest

from sharecon.errors import ConfigError
from sharecon.protocol.names import (
    MAX_TOPIC_NAME_LENGTH,
    topic_name_may_collide,
    validate_group_id,
    validate_topic_name,
)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        (".", "reserved"),
        ("..", "reserved"),
        ("a" * (MAX_TOPIC_NAME_LENGTH + 1), "250 characters long; the limit is 249"),
        ("a" * 300, "300 characters"),
        ("bad topic!", r"' ', '!'"),
        ("a/b", "'/'"),
        ("a\0b", r"'\\x00'"),
        ("a\n", r"'\\n'"),
        ("\u00e9", "'\u00e9'"),
    ],
)
def test_illegal_topic_names(name: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        validate_topic_name(name, param="topics")
    assert str(info.value).startswith("topics: ")


@pytest.mark.parametrize("name", [None, 1, b"t", ["t"]])
def test_topic_name_must_be_str(name: object) -> None:
    with pytest.raises(ConfigError, match="topic: a topic name must be a str"):
        validate_topic_name(name)


@pytest.mark.parametrize("name", ["t", "a" * MAX_TOPIC_NAME_LENGTH, "...", "A.b_c-9", "_", "-"])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


def test_long_name_is_shown_shortened() -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_name("x" * 1000 + "!")
    assert len(str(info.value)) < 250


def test_collision_warning_helper() -> None:
    assert topic_name_may_collide("a.b_c")
    assert not topic_name_may_collide("a.b")
    assert not topic_name_may_collide("a_b")


@pytest.mark.parametrize(
    ("group_id", "match"),
    [("", "non-empty"), (None, "must be a str"), (b"g", "must be a str"), ("g" * 40000, "bytes")],
)
def test_bad_group_ids(group_id: object, match: str) -> None:
    with pytest.raises(ConfigError, match=f"group_id.*{match}"):
        validate_group_id(group_id)


def test_group_id_may_hold_any_characters() -> None:
    assert validate_group_id("billing / ünïcödé !") == "billing / ünïcödé !"
    # The limit counts UTF-8 bytes, not characters.
    with pytest.raises(ConfigError, match="group_id"):
        validate_group_id("\u00e9" * 20000)
