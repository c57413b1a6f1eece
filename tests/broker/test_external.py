"""SHARECON_BOOTSTRAP: the fixtures use an existing cluster and start nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from sharecon.testing.env import ClusterHandle

INNER_TEST = """
# The plugin comes in through its entry point (installing sharecon registers it).
from sharecon.testing.env import ExternalKafka


def test_uses_the_given_cluster(kafka_broker, kafka_bootstrap, topic, share_group, kafka_tools):
    assert isinstance(kafka_broker, ExternalKafka)
    assert kafka_bootstrap == "{bootstrap}"
    assert topic in kafka_tools.list_topics()
    assert kafka_tools.describe_group_config(share_group) == {{"share.auto.offset.reset": "earliest"}}
"""


def test_sharecon_bootstrap_points_fixtures_at_an_existing_cluster(
    kafka_broker: ClusterHandle, tmp_path: Path
) -> None:
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(INNER_TEST.format(bootstrap=kafka_broker.bootstrap))
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    broker: real broker\n")
    env = {**os.environ, "SHARECON_BOOTSTRAP": kafka_broker.bootstrap}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    # The topic made through the external-cluster fixtures was deleted afterwards.
    assert not [t for t in kafka_broker.tools.list_topics() if "test_uses_the_given_cluster" in t]
