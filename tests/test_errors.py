"""The broker error table: each code mapped once, classes generated from the table."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

from sharecon import errors

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_generated_classes_are_fresh() -> None:
    """tools/gen_errors.py output matches what is committed in sharecon/errors.py."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_errors
    finally:
        sys.path.pop(0)
    expected = ast.dump(ast.parse(gen_errors.expected_source()))
    assert expected == ast.dump(ast.parse((ROOT / "sharecon" / "errors.py").read_text()))


def test_every_code_maps_to_its_own_class() -> None:
    seen: set[type[errors.BrokerError]] = set()
    for code, row in errors.ERROR_CODES.items():
        cls = errors.error_class_for_code(code)
        assert cls.code == code and cls.name == row.name and cls.retriable == row.retriable
        assert issubclass(cls, errors.BrokerError) and cls not in seen
        seen.add(cls)
        assert getattr(errors, cls.__name__) is cls and cls.__name__ in errors.__all__


def test_known_share_codes() -> None:
    assert errors.error_for_code(0) is None
    err = errors.error_for_code(122, "broker 1")
    assert isinstance(err, errors.ShareSessionNotFoundError) and err.retriable
    assert str(err).startswith("[122 SHARE_SESSION_NOT_FOUND]") and "broker 1" in str(err)
    assert not errors.InvalidRecordStateError.retriable
    assert errors.NotLeaderOrFollowerError.retriable
    assert errors.UnknownTopicIdError.code == 100
    assert errors.ShareSessionLimitReachedError.retriable


def test_unknown_code_keeps_number() -> None:
    err = errors.error_for_code(4242)
    assert isinstance(err, errors.UnknownServerError)
    assert err.error_code == 4242 and "4242" in str(err)


def test_code_zero_is_not_an_error_class() -> None:
    with pytest.raises(ValueError, match="NONE"):
        errors.error_class_for_code(0)


def test_hierarchy() -> None:
    assert issubclass(errors.CorruptRecordError, errors.RemoteProtocolError)
    assert issubclass(errors.RemoteProtocolError, errors.ProtocolError)
    assert issubclass(errors.LocalProtocolError, errors.ProtocolError)
    assert issubclass(errors.KafkaConnectionError, ConnectionError)
    assert issubclass(errors.KafkaTimeoutError, TimeoutError)
    assert issubclass(errors.ConfigError, ValueError)
    for cls in (errors.BrokerError, errors.ProtocolError, errors.KafkaConnectionError):
        assert issubclass(cls, errors.KafkaError)
