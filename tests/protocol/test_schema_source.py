"""The two sources of upstream definitions agree, so a clone without ``../shared`` proves the same.

CI's checkout reads the reference folder; a fresh clone elsewhere reads the provisioned
``kafka-clients`` jar instead (tests/protocol/conftest.py). This test reads the jar
wherever the folder exists too, and checks that each reference file is byte for byte
the jar's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def test_the_kafka_jar_holds_the_reference_definitions(
    kafka_schemas: Path, jar_schemas: Path
) -> None:
    assert len(list(jar_schemas.glob("*.json"))) > 100  # every API, not a stray file
    reference = sorted(kafka_schemas.glob("*.json"))
    assert len(reference) >= 48  # the 24 APIs sharecon speaks, request and response
    differ = [p.name for p in reference if (jar_schemas / p.name).read_bytes() != p.read_bytes()]
    assert not differ, f"{kafka_schemas} and the jar disagree on {differ}"
