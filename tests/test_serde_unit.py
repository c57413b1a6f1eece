"""sharecon.serde helpers, and the (de)serializer arguments checked when a client is made."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sharecon import errors
from sharecon.consumer import ShareConsumer
from sharecon.producer import Producer
from sharecon.serde import (
    json_deserializer,
    json_serializer,
    string_deserializer,
    string_serializer,
)


def test_json_round_trip_is_compact_utf8() -> None:
    doc = {"id": 7, "name": "café", "tags": ["a", "b"], "total": 12.5, "none": None}
    data = json_serializer()(doc)
    assert data == '{"id":7,"name":"café","tags":["a","b"],"total":12.5,"none":null}'.encode()
    assert json_deserializer()(data) == doc


def test_json_options() -> None:
    assert json_serializer(sort_keys=True)({"b": 1, "a": 2}) == b'{"a":2,"b":1}'
    assert json_serializer(ensure_ascii=True)("é") == b'"\\u00e9"'
    assert json_serializer(default=str)({"n": 1j}) == b'{"n":"1j"}'
    with pytest.raises(TypeError):
        json_serializer()({"n": 1j})
    hooked = json_deserializer(object_hook=lambda d: sorted(d))
    assert hooked(b'{"b": 1, "a": 2}') == ["a", "b"]


def test_json_deserializer_reads_utf16_and_refuses_garbage() -> None:
    assert json_deserializer()('{"x": "ü"}'.encode("utf-16")) == {"x": "ü"}
    with pytest.raises(json.JSONDecodeError):
        json_deserializer()(b"{nope")


def test_string_helpers_use_their_encoding() -> None:
    assert string_serializer()("żółw") == "żółw".encode()
    assert string_serializer("latin-1")("café") == b"caf\xe9"
    assert string_deserializer("latin-1")(b"caf\xe9") == "café"
    with pytest.raises(UnicodeDecodeError):
        string_deserializer()(b"caf\xe9")
    assert string_deserializer(errors="replace")(b"caf\xe9") == "caf\ufffd"
    with pytest.raises(UnicodeEncodeError):
        string_serializer("ascii")("é")


@pytest.mark.parametrize("make", [string_serializer, string_deserializer])
def test_unknown_encodings_are_refused_when_the_helper_is_made(make: Any) -> None:
    with pytest.raises(errors.ConfigError, match="no-such-codec"):
        make("no-such-codec")
    with pytest.raises(errors.ConfigError, match="no-such-handler"):
        make("utf-8", "no-such-handler")


def test_clients_refuse_a_serializer_that_is_not_callable() -> None:
    with pytest.raises(errors.ConfigError, match="value_deserializer"):
        ShareConsumer("127.0.0.1:9", group_id="g", topics=["t"], value_deserializer=b"x")  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="key_serializer"):
        Producer("127.0.0.1:9", key_serializer="json")  # type: ignore[arg-type]
