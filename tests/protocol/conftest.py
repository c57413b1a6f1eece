"""The upstream Kafka message definitions, for the tests that compare against them.

They live outside the repository: ``../shared/reference/kafka-schemas`` beside the clone
(CI has them there), or wherever ``SHARECON_KAFKA_SCHEMAS`` points. Without them those
tests are skipped locally, and fail under ``CI=true``: CI must prove agreement, not
assume it. Nothing else in tests/protocol needs them (the generator reads tools/spec/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(
    os.environ.get("SHARECON_KAFKA_SCHEMAS")
    or ROOT.parent / "shared" / "reference" / "kafka-schemas"
)


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def kafka_schemas() -> Path:
    """The upstream definitions folder; skips the test if absent (fails it under CI=true)."""
    if not SCHEMAS.is_dir():
        message = f"upstream schema folder {SCHEMAS} not present (see SHARECON_KAFKA_SCHEMAS)"
        if _ci():
            pytest.fail(f"{message}; CI=true requires it", pytrace=False)
        pytest.skip(message)
    return SCHEMAS
