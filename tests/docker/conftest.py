"""Tests of the container path itself. They need a Docker engine and an image (see
docs/testing.md), so they run in .ci/run's container leg (``SHARECON_BROKER=docker``) and
are not collected in other sessions."""

from __future__ import annotations

from sharecon.testing.env import requested_kind

if requested_kind() != "docker":
    collect_ignore_glob = ["test_*.py"]
