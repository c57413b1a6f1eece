"""The SHARECON_* variables: the CLI and the worker read one connection table, and each variable is
in ``sharecon --help`` and documented in docs/cli.md or docs/worker.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sharecon._net.environment import CONNECTION_ENV
from sharecon.cli import _common as cli
from sharecon.worker import _config as worker

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_worker_reads_every_connection_variable_the_cli_reads() -> None:
    assert cli.ENV is CONNECTION_ENV  # one table, not a copy
    missing = {k: v for k, v in cli.ENV.items() if worker.ENV.get(k) != v}
    assert missing == {}


def test_every_cli_variable_is_in_the_help_and_in_docs_cli() -> None:
    page = (DOCS / "cli.md").read_text()
    assert [v for v in cli.ENV.values() if v not in cli.ENV_HELP] == []
    assert [v for v in cli.ENV.values() if f"`{v}" not in page] == []


def test_every_worker_variable_is_documented() -> None:
    page = (DOCS / "worker.md").read_text() + (DOCS / "cli.md").read_text()
    assert [v for v in worker.ENV.values() if f"`{v}" not in page] == []


def test_docs_worker_lists_every_setting_run_takes() -> None:
    """docs/worker.md names each WorkerConfig field that sharecon.worker.run() accepts."""
    page = (DOCS / "worker.md").read_text()
    section = page[page.index("`run(handler, *,") :]
    section = section[: section.index("returns the exit code")]
    fields = {f.name for f in dataclasses.fields(worker.WorkerConfig)}
    fields -= {"handler", "group", "topics", "log_level"}
    assert sorted(f for f in fields if f"`{f}`" not in section) == []
