"""The upstream Kafka message definitions, for the tests that compare against them.

Where they come from, first found wins:

1. the folder ``SHARECON_KAFKA_SCHEMAS`` points at;
2. ``../shared/reference/kafka-schemas`` beside the clone (CI's checkout has it);
3. the ``common/message/*.json`` files inside ``kafka-clients-<version>.jar`` of the Kafka
   4.4 the test kit provisions from Maven Central (the same files Kafka's build compiles
   its message classes from), unpacked into a temporary folder.

So a fresh clone anywhere proves agreement, as CI does. If none is available the tests
are skipped locally and fail under ``CI=true``: CI must prove agreement, not assume it.
Nothing else in tests/protocol needs them (the generator reads tools/spec/).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import NoReturn

import pytest

from sharecon.errors import KafkaError
from sharecon.testing._provision import provision

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(
    os.environ.get("SHARECON_KAFKA_SCHEMAS")
    or ROOT.parent / "shared" / "reference" / "kafka-schemas"
)
#: The Kafka line whose definitions tools/spec was imported from.
JAR_VERSION = "4.4"
_IN_JAR = "common/message/"


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(problem: str) -> NoReturn:
    if _ci():
        pytest.fail(f"{problem}; CI=true requires them", pytrace=False)
    pytest.skip(problem)


@pytest.fixture(scope="session")
def jar_schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``common/message/*.json`` of the provisioned Kafka 4.4 ``kafka-clients`` jar, unpacked."""
    folder = tmp_path_factory.mktemp("kafka-schemas")
    try:
        install = provision(JAR_VERSION)
        jar = install.lib / f"kafka-clients-{install.version}.jar"
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                file = name.removeprefix(_IN_JAR)
                if name.startswith(_IN_JAR) and file.endswith(".json") and "/" not in file:
                    (folder / file).write_bytes(archive.read(name))
    except (KafkaError, OSError, zipfile.BadZipFile) as exc:
        _unavailable(f"the Kafka {JAR_VERSION} jars could not be used: {exc}")
    if not any(folder.glob("*.json")):
        _unavailable(f"{jar.name} holds no {_IN_JAR}*.json")
    return folder


@pytest.fixture(scope="session")
def kafka_schemas(request: pytest.FixtureRequest) -> Path:
    """The reference folder if present, else the definitions in Kafka's own jar."""
    if SCHEMAS.is_dir():
        return SCHEMAS
    folder: Path = request.getfixturevalue("jar_schemas")
    return folder
