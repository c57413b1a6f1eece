"""The image recipe's inputs (the build itself runs in .ci/run's container leg)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sharecon.testing import BrokerStartError
from sharecon.testing.image import default_tag, kafka_docker_dir, main

if TYPE_CHECKING:
    from pathlib import Path


def test_default_tag_is_the_official_name() -> None:
    assert default_tag("4.4") == "apache/kafka:4.4.0"


def test_a_scripts_folder_without_kafkas_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "jvm").mkdir()
    (tmp_path / "jvm" / "launch").write_text("#!/bin/bash\n")
    with pytest.raises(BrokerStartError) as info:
        kafka_docker_dir(tmp_path)
    message = str(info.value)
    assert "resources/common-scripts/run" in message
    assert "opt-kafka/bin/kafka-run-class.sh" in message
    assert "jvm/launch" not in message.split("missing", 1)[1]


def test_scripts_folder_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARECON_KAFKA_DOCKER", str(tmp_path))
    with pytest.raises(BrokerStartError, match=str(tmp_path)):
        kafka_docker_dir()


def test_the_command_reports_a_missing_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", "--version", "4.4.0", "--scripts", str(tmp_path)]) == 1
    assert "Kafka's container scripts not found" in capsys.readouterr().err
