"""The broker error table: each code mapped once, classes generated from the table."""

from __future__ import annotations

import ast
import json
import pathlib
import sys
from typing import TYPE_CHECKING

import pytest

from sharecon import errors
from sharecon.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _gen_errors() -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_errors
    finally:
        sys.path.pop(0)
    return gen_errors


def test_generated_classes_are_fresh() -> None:
    """tools/gen_errors.py output matches what is committed in sharecon/errors.py."""
    expected = ast.dump(ast.parse(_gen_errors().expected_source()))
    assert expected == ast.dump(ast.parse((ROOT / "sharecon" / "errors.py").read_text()))


def test_the_spec_maps_each_code_once() -> None:
    """One row per broker code and name in tools/spec/errors/, one class per row."""
    rows = json.loads(_gen_errors().SPEC.read_text())
    codes = [row["code"] for row in rows]
    assert len(codes) == len(set(codes)) and 0 not in codes
    assert len({row["name"] for row in rows}) == len(rows)
    assert sorted(codes) == sorted(errors.ERROR_CODES)
    generated = (ROOT / "sharecon" / "errors.py").read_text().splitlines()
    assert sum(line.startswith("class ") and "(BrokerError)" in line for line in generated) == len(
        rows
    )


def test_error_code_enum_matches_table() -> None:
    """One member per table row plus NONE; each member's value is its row's code."""
    assert {m.value: m.name for m in ErrorCode} == {
        0: "NONE",
        **{code: spec.name for code, spec in errors.ERROR_CODES.items()},
    }
    assert errors.ErrorCode is ErrorCode and "ErrorCode" in errors.__all__
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert errors.error_class_for_code(ErrorCode.INVALID_RECORD_STATE).code == 121


def test_errors_import_nothing_of_sharecon() -> None:
    """sharecon.errors is the bottom of the layers: the protocol layer's enum module
    re-exports ``ErrorCode`` from it, never the other way round."""

    def imported(path: pathlib.Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {
            (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        }

    assert not {m for m in imported(ROOT / "sharecon" / "errors.py") if m.startswith("sharecon")}
    enum_module = ROOT / "sharecon" / "protocol" / "error_codes.py"
    assert imported(enum_module) <= {"__future__", "sharecon.errors"}


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
