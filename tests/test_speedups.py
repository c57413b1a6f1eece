"""The compiled build's C record maker (``sharecon/_speedups.c``) against its Python twin.

In the compiled leg the module is the one the build put beside the sources, and
``SHARECON_EXPECT_COMPILED=1`` requires that the consumer uses it. Elsewhere (the pure
leg) the same C file is built here, with the C compiler setuptools finds, and loaded
from a temporary folder: every leg tests the C, and the pure build never ships it.
"""

from __future__ import annotations

import copy
import gc
import importlib.util
import os
import pickle
import sys
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sharecon import _native
from sharecon.record import BatchInfo, Record, _python_factory, record_factory
from sharecon.types import TopicIdPartition

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
FIELDS = [name for name in Record.__slots__ if name != "_serialized"]


def _build(tmp: Path) -> ModuleType:
    from setuptools import Distribution, Extension

    dist = Distribution(
        {
            "name": "speedups-test",
            "ext_modules": [
                Extension("sharecon._speedups", [str(ROOT / "sharecon" / "_speedups.c")])
            ],
        }
    )
    build = dist.get_command_obj("build_ext")
    build.build_lib = str(tmp / "lib")
    build.build_temp = str(tmp / "obj")
    dist.run_command("build_ext")
    (path,) = (tmp / "lib").rglob("_speedups*")
    spec = importlib.util.spec_from_file_location("sharecon._speedups", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def speedups(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    if _native.speedups is not None:
        return _native.speedups
    return _build(tmp_path_factory.mktemp("speedups"))


def test_the_compiled_build_makes_records_in_c() -> None:
    if os.environ.get("SHARECON_EXPECT_COMPILED") != "1":
        assert _native.speedups is None or "_speedups" in _native.speedups.__file__
        return
    assert _native.speedups is not None, "the compiled build has no sharecon._speedups"
    make = record_factory("t", 0, TopicIdPartition(uuid.uuid4(), 0, "t"), None, None, None)
    assert type(make) is _native.RecordMakerType


def _pair(speedups: ModuleType) -> tuple[Any, Any, tuple[Any, ...]]:
    tp = TopicIdPartition(uuid.uuid4(), 3, "orders")
    owner = object()
    batch = BatchInfo(0, 7, 0)
    fixed = ("orders", 3, tp, owner, 12.5, batch)
    layout = speedups.RecordLayout(Record)
    return speedups.RecordMaker(layout, *fixed), _python_factory(*fixed), fixed


@pytest.mark.parametrize(
    "args",
    [
        (41, 1_700_000_000_000, b"k", b"v" * 100, ((b"h", b"x"),)),
        (0, -1, None, None, ()),
        (2**62, 0, b"", b"", ()),
    ],
)
def test_the_c_maker_makes_the_python_factorys_record(
    speedups: ModuleType, args: tuple[Any, ...]
) -> None:
    c_make, py_make, _ = _pair(speedups)
    got, want = c_make(*args), py_make(*args)
    assert type(got) is Record
    for name in FIELDS:
        assert getattr(got, name) is getattr(want, name) or getattr(got, name) == getattr(
            want, name
        ), name
    # Never set by either: read, it raises as on any record without deserializers.
    with pytest.raises(AttributeError):
        got._serialized  # noqa: B018
    assert repr(got) == repr(want)
    assert got.serialized_value == want.serialized_value
    assert got.lock_deadline == 12.5 and got.delivery_count == 1
    # A made record is an ordinary one: fields set, copied, pickled.
    got.delivery_count = 3
    assert copy.copy(got).delivery_count == 3
    assert pickle.loads(pickle.dumps(Record.build("t", b"v"))).value == b"v"


def test_the_c_maker_holds_its_references(speedups: ModuleType) -> None:
    c_make, _, fixed = _pair(speedups)
    owner, batch = fixed[3], fixed[5]
    value = object()
    before = (sys.getrefcount(owner), sys.getrefcount(batch), sys.getrefcount(value))
    records = [c_make(i, 0, None, value, ()) for i in range(100)]
    held = (sys.getrefcount(owner), sys.getrefcount(batch), sys.getrefcount(value))
    assert (held[0] - before[0], held[1] - before[1], held[2] - before[2]) == (100, 100, 100)
    del records
    gc.collect()
    assert (sys.getrefcount(owner), sys.getrefcount(batch), sys.getrefcount(value)) == before


def test_the_c_maker_is_collected_with_a_cycle_through_it(speedups: ModuleType) -> None:
    # A delivery's owner points at the maker's records, which point at the owner: the
    # collector must see through the maker (its GC slots) to free them.
    class Owner:
        made: list[Any]

    owner = Owner()
    make = speedups.RecordMaker(speedups.RecordLayout(Record), "t", 0, None, owner, None, None)
    owner.made = [make, make(0, 0, None, None, ())]
    ref = weakref.ref(owner)
    del owner, make
    gc.collect()
    assert ref() is None


def test_the_c_maker_refuses_wrong_calls(speedups: ModuleType) -> None:
    c_make, _, _ = _pair(speedups)
    with pytest.raises(TypeError, match="5 positional arguments"):
        c_make(1, 2, None, None)
    with pytest.raises(TypeError, match="5 positional arguments"):
        c_make(1, 2, None, None, (), extra=1)
    with pytest.raises(TypeError):
        speedups.RecordMaker(object(), "t", 0, None, None, None, None)


def test_a_layout_takes_only_writable_object_slots(speedups: ModuleType) -> None:
    class NoSlots:
        topic = "class attribute"

    with pytest.raises((TypeError, AttributeError)):
        speedups.RecordLayout(NoSlots)

    class WithProperty(Record):  # type: ignore[type-arg]
        __slots__ = ()

        @property
        def topic(self) -> str:  # type: ignore[override]
            return "t"

    with pytest.raises(TypeError, match="topic is not a slot"):
        speedups.RecordLayout(WithProperty)
    with pytest.raises(TypeError):
        speedups.RecordLayout("not a class")
