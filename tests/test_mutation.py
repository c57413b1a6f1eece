"""Mutation testing, the fixed sample CI runs (tools/mutation.py; docs/testing.md, "Mutation
testing").

A few mutants of the decision modules, drawn by cosmic-ray's operators and pinned by the line
they change, each of which the seeded simulation or the unit tests of tests/share killed when
measured. Each must still be killed: a survivor means a check that used to catch this bug no
longer does. The whole sample (and the figures) comes from ``python tools/mutation.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "tools" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mutation = _load()

#: (module, cosmic-ray operator, the line before, the line after), stripped.
#: Killed by the simulation when pinned: the first three; by tests/share: the last two.
PINNED = [
    (
        "sharecon/_share/session.py",
        "core/ReplaceAndWithOr",
        "if not added and not forgotten and not acks and not self._partitions:",
        "if not added and not forgotten or not acks and not self._partitions:",
    ),
    (
        "sharecon/_share/ledger.py",
        "core/ReplaceComparisonOperator_LtE_Gt",
        "if of_delivery and not lo <= seg.seq <= hi:",
        "if of_delivery and not lo > seg.seq <= hi:",
    ),
    (
        "sharecon/_share/session.py",
        "core/ReplaceBinaryOperator_Add_FloorDiv",
        "return 1 if epoch >= MAX_EPOCH else epoch + 1",
        "return 1 if epoch >= MAX_EPOCH else epoch // 1",
    ),
    (
        "sharecon/_share/ledger.py",
        "core/AddNot",
        "pattern = _MARKED_START if include_renew else _MARKED_START_NO_RENEW",
        "pattern = _MARKED_START if not include_renew else _MARKED_START_NO_RENEW",
    ),
    (
        "sharecon/_share/ledger.py",
        "core/ReplaceComparisonOperator_Gt_Eq",
        "if len(runs) > n:",
        "if len(runs) == n:",
    ),
]


@pytest.fixture(scope="module")
def scratch() -> Iterator[object]:
    s = mutation.Scratch()
    yield s
    s.close()


@pytest.mark.parametrize(("module", "operator", "before", "after"), PINNED)
def test_a_pinned_mutant_is_killed(
    scratch: object, module: str, operator: str, before: str, after: str
) -> None:
    mutant = mutation.find(module, operator, before, after)
    result = mutation.run_mutant(
        scratch,
        mutant,
        sim_seeds=200,
        versions=["4.1", "4.4"],
        tests=["tests/share"],
        timeout=600.0,
    )
    assert result.status in ("sim", "unit"), f"{mutant.name} survived:\n{result.diff}"


def test_an_equivalent_mutant_survives(scratch: object) -> None:
    """The harness can report a survivor: a dataclass without ``__slots__`` behaves the
    same, and the simulation lets it through (so a kill above is the checks' doing, not a
    broken scratch copy)."""
    mutant = mutation.find(
        "sharecon/_share/session.py",
        "core/ReplaceTrueWithFalse",
        "@dataclass(frozen=True, slots=True)",
        "@dataclass(frozen=True, slots=False)",
    )
    result = mutation.run_mutant(
        scratch, mutant, sim_seeds=200, versions=["4.4"], tests=[], timeout=600.0, unit=False
    )
    assert result.status == "survived", result.detail


def test_the_sample_is_seeded_and_sharded() -> None:
    """The same seed draws the same mutants, and the shards split them without overlap."""
    modules = ["sharecon/_share/session.py"]
    whole = mutation.sample(modules, 12, 7)
    assert whole == mutation.sample(modules, 12, 7)
    assert len(whole) == 12 and len(set(whole)) == 12
    shards = [whole[i::3] for i in range(3)]
    assert sorted(m.name for s in shards for m in s) == sorted(m.name for m in whole)
    # Annotations never run (``from __future__ import annotations``): no mutant there.
    source = (ROOT / modules[0]).read_text(encoding="utf-8").splitlines()
    every = mutation.enumerate_mutants(modules[0])
    assert not any("->" in source[m.line - 1] and "BitOr" in m.operator for m in every)
