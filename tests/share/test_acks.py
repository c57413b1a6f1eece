"""Acknowledgement encoding: the reference client's batch rule, checked by tables and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharecon._share.acks import MAX_MIXED_RUN, AckBatch, batches_from_runs, coalesce, expand
from sharecon.types import AckType

G, A, R, J, N = AckType.GAP, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW


def seq(start: int, *types: AckType) -> dict[int, AckType]:
    """Contiguous offsets from ``start`` with the given types."""
    return {start + i: t for i, t in enumerate(types)}


def b(first: int, last: int, *types: AckType) -> AckBatch:
    return AckBatch(first, last, tuple(types))


CASES = [
    ("empty", {}, []),
    ("single offset", {5: A}, [b(5, 5, A)]),
    ("uniform contiguous 500", seq(100, *[A] * 500), [b(100, 599, A)]),
    ("hole splits ranges", {1: A, 2: A, 4: A}, [b(1, 2, A), b(4, 4, A)]),
    ("short mixed", seq(0, A, R, A), [b(0, 2, A, R, A)]),
    ("two short runs stay mixed", seq(0, A, A, A, R, R, R), [b(0, 5, A, A, A, R, R, R)]),
    ("run of exactly 10 stays mixed", seq(0, *[A] * 10, R), [b(0, 10, *[A] * 10, R)]),
    ("run of 11 splits off", seq(0, *[A] * 11, R), [b(0, 10, A), b(11, 11, R)]),
    ("long run in the middle", seq(0, R, *[A] * 11, R), [b(0, 0, R), b(1, 11, A), b(12, 12, R)]),
    (
        "mixed stretches around a long run",
        seq(0, R, J, *[A] * 12, R, J),
        [b(0, 1, R, J), b(2, 13, A), b(14, 15, R, J)],
    ),
    ("two long runs", seq(0, *[A] * 11, *[R] * 11), [b(0, 10, A), b(11, 21, R)]),
    ("gap type mixed with accept", seq(0, A, G, A), [b(0, 2, A, G, A)]),
    ("all gaps", seq(7, G, G, G), [b(7, 9, G)]),
    ("renew mixed", seq(0, N, N, A), [b(0, 2, N, N, A)]),
    ("renew uniform", seq(3, N, N), [b(3, 4, N)]),
    (
        "short stretch between long runs is uniform",
        seq(0, *[A] * 11, *[R] * 5, *[A] * 11),
        [b(0, 10, A), b(11, 15, R), b(16, 26, A)],
    ),
]


@pytest.mark.parametrize(("name", "acks", "want"), CASES, ids=[c[0] for c in CASES])
def test_coalesce_table(name: str, acks: dict[int, AckType], want: list[AckBatch]) -> None:
    assert coalesce(acks) == want


def test_coalesce_unsorted_pairs_and_last_wins() -> None:
    assert coalesce([(3, A), (1, A), (2, A)]) == [b(1, 3, A)]
    assert coalesce([(1, A), (1, R)]) == [b(1, 1, R)]


def test_batches_from_runs_merges_adjacent_same_type() -> None:
    """Runs split at arbitrary points (one per delivery) still give one batch."""
    runs = [(0, 5, 1), (6, 11, 1), (12, 12, 2)]
    assert batches_from_runs(runs) == [b(0, 11, A), b(12, 12, R)]


@pytest.mark.parametrize(
    "runs",
    [[(5, 6, 1), (6, 7, 1)], [(5, 6, 1), (1, 2, 1)], [(3, 2, 1)], [(0, 0, 9)]],
    ids=["overlap", "unsorted", "inverted", "bad type"],
)
def test_batches_from_runs_rejects_bad_runs(runs: list[tuple[int, int, int]]) -> None:
    with pytest.raises(ValueError):
        batches_from_runs(runs)


@pytest.mark.parametrize(
    ("first", "last", "types"),
    [(5, 4, (A,)), (0, 2, (A, R))],
    ids=["inverted", "wrong type count"],
)
def test_ackbatch_validates(first: int, last: int, types: tuple[AckType, ...]) -> None:
    with pytest.raises(ValueError):
        AckBatch(first, last, types)


def test_ackbatch_helpers() -> None:
    mixed = b(10, 13, A, A, R, A)
    assert mixed.count == 4 and not mixed.uniform
    assert mixed.type_at(12) is R
    assert list(mixed.runs()) == [(10, 11, 1), (12, 12, 2), (13, 13, 1)]
    assert list(b(0, 2, J).runs()) == [(0, 2, 3)]
    with pytest.raises(ValueError):
        mixed.type_at(14)


ack_maps = st.dictionaries(
    st.integers(min_value=0, max_value=300),
    st.sampled_from(list(AckType)),
    max_size=250,
)
# Long uniform stretches are rare in plain random maps; build some on purpose.
run_lists = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 25), st.sampled_from(list(AckType))),
    max_size=30,
)


def from_runs(spec: list[tuple[int, int, AckType]]) -> dict[int, AckType]:
    out: dict[int, AckType] = {}
    pos = 0
    for hole, length, t in spec:
        pos += hole
        for _ in range(length):
            out[pos] = t
            pos += 1
    return out


def check_invariants(acks: dict[int, AckType], batches: list[AckBatch]) -> None:
    assert list(expand(batches)) == sorted(acks.items())
    for prev, nxt in zip(batches, batches[1:], strict=False):
        assert prev.last_offset < nxt.first_offset
    for bt in batches:
        if len(bt.types) > 1:
            assert len(set(bt.types)) > 1, "a uniform batch must use one type"
            longest = max(r[1] - r[0] + 1 for r in bt.runs())
            assert longest <= MAX_MIXED_RUN, "a long run must be its own batch"


@given(ack_maps)
def test_coalesce_round_trips_random_maps(acks: dict[int, AckType]) -> None:
    check_invariants(acks, coalesce(acks))


@given(run_lists)
def test_coalesce_round_trips_runs(spec: list[tuple[int, int, AckType]]) -> None:
    acks = from_runs(spec)
    batches = coalesce(acks)
    check_invariants(acks, batches)
    # Re-encoding the batches' runs gives the same batches.
    assert batches_from_runs([r for bt in batches for r in bt.runs()]) == batches
