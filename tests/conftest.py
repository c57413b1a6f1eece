from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

# Real-broker fixtures (kafka_broker, topic, share_group, ...) come from sharecon's pytest
# plugin, which installing sharecon registers (entry point pytest11 "sharecon"); listing it
# in pytest_plugins here as well would register it twice. See docs/testing.md.
# pytester: tests/testing runs pytest on small test files, as a user's project would.
pytest_plugins = ["pytester"]


# Under pytest-xdist (``scripts/test`` runs two workers), tests that must not share the
# machine's resources with each other run on one worker, in order: the documentation's
# commands all need port 9092; the cluster tests share one three-broker session cluster
# (started once per worker that runs any of them); the version tests start a broker per
# Kafka version. Without xdist the mark does nothing.
_XDIST_GROUPS = {
    "tests/docs/test_doc_commands.py": "port-9092",
    "tests/cluster/": "cluster",
    "tests/broker/test_matrix.py": "versions",
    "tests/consumer/test_versions.py": "versions",
    "tests/broker/test_kerberos.py": "kerberos",  # one KDC and one GSSAPI broker
    "tests/testing/test_conformance.py": "versions",
    "tests/testing/test_fake_differential.py": "versions",
    "tests/test_xdist_groups.py": "selfcheck",
    # One module-scoped broker requiring client certificates: started once, on one worker.
    "tests/broker/test_mtls.py": "mtls",
    # One module-scoped broker with the telemetry receiver plugin: started once.
    "tests/observability/test_telemetry_broker.py": "telemetry",
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.has_plugin("xdist"):
        return  # ``-p no:xdist``: the mark would not even be known
    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix()
        for prefix, group in _XDIST_GROUPS.items():
            if path.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
                break


@pytest.fixture(autouse=True)
def _sharecon_logger_restored() -> Iterator[None]:
    """The "sharecon" logger as it was before each test. A test that runs the CLI in this
    process (``sharecon.cli.main`` sets the logger's level to ERROR and adds a handler, as
    a command line should) would otherwise hide the log records later tests read with
    ``caplog`` (it failed tests/net/test_oauth.py when run after tests/testing/test_fake.py)."""
    log = logging.getLogger("sharecon")
    level, handlers = log.level, list(log.handlers)
    yield
    log.setLevel(level)
    for handler in log.handlers[:]:
        if handler not in handlers:
            log.removeHandler(handler)
