"""docs/sync.md's programs run as printed (names swapped for fresh ones): the setup writes
six records, the worker ships five and dead-letters the garbage, and SIGTERM ends it
cleanly; the poll/commit program accepts what it polled."""

from __future__ import annotations

import ast
import importlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sharecon.sync import Admin, ShareConsumer
from tests.sync.conftest import take

pytestmark = [pytest.mark.broker]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "sync.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)


def _program(marker: str, bootstrap: str, topic: str, group: str) -> str:
    block = next(b for b in _blocks() if marker in b)
    return (
        block.replace('"localhost:9092"', repr(bootstrap))
        .replace('"orders"', repr(topic))
        .replace('"shipping"', repr(group))
    )


def test_guide_snippets_import_only_existing_names() -> None:
    blocks = _blocks()
    assert len(blocks) >= 4
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sharecon"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


def test_the_guide_worker_ships_dead_letters_and_stops_on_sigterm(kafka_bootstrap: str) -> None:
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"shipping-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    setup = subprocess.run(
        [sys.executable, "-c", _program("alter_group_config", kafka_bootstrap, topic, group)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert setup.returncode == 0, setup.stderr
    assert len(re.findall(rf"^{topic} \d \d+$", setup.stdout, flags=re.M)) == 6, setup.stdout
    worker = subprocess.Popen(
        [sys.executable, "-c", _program("reject_to_dlq", kafka_bootstrap, topic, group)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert worker.stdout is not None
        deadline = time.monotonic() + 90
        while len(lines) < 6 and time.monotonic() < deadline:
            line = worker.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert sorted(ln for ln in lines if ln.startswith("shipped")) == [
        f"shipped order {i}" for i in range(5)
    ], (lines, err)
    assert len([ln for ln in lines if ln.startswith("dead-lettered offset")]) == 1, lines
    assert worker.returncode == 143 and "Traceback" not in err, err
    # The garbage went to dlq.<group>; every order was answered: nothing comes back.
    dlq_reader = f"r-{group}"
    with Admin(kafka_bootstrap) as admin:
        admin.alter_group_config(dlq_reader, {"share.auto.offset.reset": "earliest"})
    with ShareConsumer(kafka_bootstrap, group_id=dlq_reader, topics=[f"dlq.{group}"]) as reader:
        [copy] = take(reader, 1)
        assert copy.value == b"garbage"
        reader.commit()


def test_the_guide_poll_and_commit_program(kafka_bootstrap: str) -> None:
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"shipping-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for marker in ("alter_group_config", "consumer.commit()"):
        done = subprocess.run(
            [sys.executable, "-c", _program(marker, kafka_bootstrap, topic, group)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    polled = re.match(r"(\d+) records\n", done.stdout)
    assert polled and 1 <= int(polled.group(1)) <= 6, done.stdout
    verdicts = re.findall(rf"^{topic} \d (\S+)", done.stdout, flags=re.M)
    assert verdicts and set(verdicts) == {"accepted"}, done.stdout
