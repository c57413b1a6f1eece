"""The xdist groups of tests/conftest.py take effect (they once were silently ignored)."""

from __future__ import annotations

import pytest


def test_group_reaches_the_scheduler(request: pytest.FixtureRequest, worker_id: str) -> None:
    # pytest-xdist's loadgroup scheduler reads the group from the ``@group`` suffix that its
    # worker hook adds to each node id; if pytest and xdist disagree on where a node keeps
    # its id, the suffix never appears and every group runs spread over all workers.
    if worker_id == "master":
        pytest.skip("runs without pytest-xdist workers: there are no groups to schedule")
    assert request.node.nodeid.endswith("@selfcheck"), request.node.nodeid
